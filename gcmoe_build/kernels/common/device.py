"""Device-side waits with timeouts, and the trap that ends them.

Every device-side wait in gc-moe is bounded (DESIGN.md §3): on expiry the kernel prints one
recognisable line (``GCMOE TIMEOUT site=<n> block=<b> thread=<t>``) and executes ``trap``, which
fails the launch/graph with a sticky error instead of hanging the GPU.
"""
import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import dsl_user_op

#: Timeout sites (the number printed before the trap). Add new sites here.
SITE_SELFTEST_TMA = 1

DEFAULT_TIMEOUT_NS = 2_000_000_000  # 2 s: long enough for any legitimate wait at decode


@dsl_user_op
def trap(*, loc=None, ip=None) -> None:
    llvm.inline_asm(None, [], "trap;", "", has_side_effects=True, is_align_stack=False,
                    asm_dialect=llvm.AsmDialect.AD_ATT)


@cute.jit
def timeout_trap(site: cutlass.Constexpr):
    bidx, _, _ = cute.arch.block_idx()
    tidx, _, _ = cute.arch.thread_idx()
    cute.printf("GCMOE TIMEOUT site={} block={} thread={}", cutlass.Int32(site), bidx, tidx)
    trap()


@cute.jit
def mbarrier_wait_or_trap(mbar, phase: cutlass.Int32, timeout_ns: cutlass.Int64, site: cutlass.Constexpr):
    """Wait for ``phase`` of the shared-memory mbarrier ``mbar``; trap after ``timeout_ns``."""
    t0 = cute.arch.globaltimer()
    done = cute.arch.mbarrier_try_wait(mbar, phase)
    while not done:
        if cute.arch.globaltimer() - t0 > timeout_ns:
            timeout_trap(site)
        done = cute.arch.mbarrier_try_wait(mbar, phase)
