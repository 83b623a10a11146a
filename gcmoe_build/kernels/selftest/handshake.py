"""Cross-partition handshake self-test kernels (CuTe DSL), the runtime's GPU evidence (issue 3).

Three tiny persistent kernels run as one graph replay, exactly the shape of a GC-MoE layer:

* ``selftest_handshake_producer`` (role1 slot, dispatch green context): bumps its persistent replay
  generation ``g``, busy-works ``work_ns``, writes a payload derived from ``g`` and releases the
  generation-tagged counter (``st.release.gpu`` of ``g``).
* ``selftest_handshake_consumer`` (role2 slot, compute green context, concurrent root): busy-works
  ``work_ns`` first (so the two roots overlap only if the driver really runs them side by side),
  then acquires the counter (``ld.acquire.gpu`` until it reaches its own generation) with a device
  timeout: on expiry it writes a trap record (gcmoe_runtime.workspace.trap: magic, code, expected,
  observed) to ``err`` (host-mapped memory, readable after the context dies) and executes ``trap``. It
  checks the payload and counts mismatches.
* ``selftest_handshake_finalize`` (role3 slot, after both): checks that producer and consumer both
  completed this generation.

All state lives in the workspace's ``selftest`` region (gcmoe_runtime.workspace.layout word
indices) and is persistent: generations only grow, so replays need no host reset. Addresses are
passed as plain u64 scalars and dereferenced with inline PTX — the memory-order semantics are the
point of the test, so they are spelled out, not left to a compiler.
"""
# no `from __future__ import annotations`: the DSL evaluates kernel annotations at trace time

from gcmoe_runtime.workspace.layout import (
    SELFTEST_CONSUMER_GEN,
    SELFTEST_COUNTER,
    SELFTEST_ERRORS,
    SELFTEST_FINALIZE_GEN,
    SELFTEST_PAYLOAD,
    SELFTEST_PAYLOAD_WORDS,
    SELFTEST_PRODUCER_GEN,
)

from gcmoe_runtime.workspace.trap import TRAP_MAGIC as GCMOE_TIMEOUT_MAGIC  # record: magic, code, expected, observed

ERR_HANDSHAKE_TIMEOUT = 1  # gcmoe_runtime.workspace.trap.TRAP_CODES
PAYLOAD_MULT = 0x9E3779B1  # payload[i] = g * PAYLOAD_MULT + i (mod 2^32)

ROLES = ("selftest_handshake_producer", "selftest_handshake_consumer", "selftest_handshake_finalize")
THREADS = 32


def _formals():
    from gcmoe_build.abi.plan import Formal

    return (
        Formal("ws", "u64"),  # address of the workspace's selftest region
        Formal("err", "u64"),  # host-mapped error record (0: none)
        Formal("timeout_ns", "u64"),
        Formal("work_ns", "u64"),
    )


#: PTX the memory-order protocol must show per role (checked by the ABI pass: fail closed).
REQUIRED_PTX = {
    "selftest_handshake_producer": ("st.release.gpu.global.u32",),
    "selftest_handshake_consumer": ("ld.acquire.gpu.global.u32", "st.release.gpu.global.u32", "trap"),
    "selftest_handshake_finalize": ("ld.acquire.gpu.global.u32", "st.release.gpu.global.u32"),
}


def abi_plan(role: str):
    from gcmoe_build.abi.plan import AbiPlan

    return AbiPlan(formals=_formals(), required_instructions=REQUIRED_PTX[role])


def build(variant):
    """The KernelBuild for ``variant.role`` (protocol: gcmoe_build.kernels)."""
    from gcmoe_build.kernels import KernelBuild
    from gcmoe_runtime.artifacts.record import LaunchFacts

    role, arch = variant.role, variant.arch
    host, kernel, fake = _trace_parts(role, arch)
    return KernelBuild(
        host=host, kernel=kernel, args=fake, name_prefix=role, abi=abi_plan(role),
        launch=LaunchFacts(block=(THREADS, 1, 1), cluster=(1, 1, 1), dynamic_smem=0, grid="fixed:1"),
        extra={"selftest": "handshake"},
    )


def _trace_parts(role: str, arch: str):
    """``(host_fn, kernel_fn, fake_args)`` for ``role`` — what the frontend traces."""
    if role not in ROLES:
        raise ValueError(f"unknown self-test role {role!r}; known: {ROLES}")
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl(arch)
    import cutlass
    import cutlass.cute as cute
    from cutlass._mlir.dialects import llvm
    from cutlass.cutlass_dsl import T, dsl_user_op

    Int32, Int64 = cutlass.Int32, cutlass.Int64

    def _asm(ret, args, text, cons):
        return llvm.inline_asm(ret, [a.ir_value() for a in args], text, cons, has_side_effects=True,
                               is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)

    @dsl_user_op
    def ld_acquire(addr: Int64, *, loc=None, ip=None) -> Int32:
        return Int32(_asm(T.i32(), [addr], "ld.acquire.gpu.global.u32 $0, [$1];", "=r,l"))

    @dsl_user_op
    def ld_relaxed(addr: Int64, *, loc=None, ip=None) -> Int32:
        return Int32(_asm(T.i32(), [addr], "ld.relaxed.gpu.global.u32 $0, [$1];", "=r,l"))

    @dsl_user_op
    def st_release(addr: Int64, val: Int32, *, loc=None, ip=None) -> None:
        _asm(None, [addr, val], "st.release.gpu.global.u32 [$0], $1;", "l,r")

    @dsl_user_op
    def st_relaxed(addr: Int64, val: Int32, *, loc=None, ip=None) -> None:
        _asm(None, [addr, val], "st.relaxed.gpu.global.u32 [$0], $1;", "l,r")

    @dsl_user_op
    def st_sys(addr: Int64, val: Int32, *, loc=None, ip=None) -> None:
        # generic address: the error record lives in host-mapped (UVA) memory
        _asm(None, [addr, val], "st.relaxed.sys.u32 [$0], $1;", "l,r")

    @dsl_user_op
    def red_add(addr: Int64, val: Int32, *, loc=None, ip=None) -> None:
        _asm(None, [addr, val], "red.relaxed.gpu.global.add.u32 [$0], $1;", "l,r")

    @dsl_user_op
    def fence_sys(*, loc=None, ip=None) -> None:
        _asm(None, [], "fence.sc.sys;", "")

    @dsl_user_op
    def trap(*, loc=None, ip=None) -> None:
        _asm(None, [], "trap;", "")

    def word(ws: Int64, i: int) -> Int64:
        return ws + Int64(4 * i)

    @cute.jit
    def busy(work_ns: Int64):
        t0 = cute.arch.globaltimer()
        while cute.arch.globaltimer() - t0 < work_ns:
            pass

    if role == "selftest_handshake_producer":

        @cute.kernel
        def kernel(ws: Int64, err: Int64, timeout_ns: Int64, work_ns: Int64):
            tidx, _, _ = cute.arch.thread_idx()
            if tidx == 0:
                g = ld_relaxed(word(ws, SELFTEST_PRODUCER_GEN)) + Int32(1)
                busy(work_ns)
                for i in cutlass.range_constexpr(SELFTEST_PAYLOAD_WORDS):
                    st_relaxed(word(ws, SELFTEST_PAYLOAD + i), g * Int32(PAYLOAD_MULT) + Int32(i))
                st_relaxed(word(ws, SELFTEST_PRODUCER_GEN), g)
                st_release(word(ws, SELFTEST_COUNTER), g)

    elif role == "selftest_handshake_consumer":

        @cute.kernel
        def kernel(ws: Int64, err: Int64, timeout_ns: Int64, work_ns: Int64):
            tidx, _, _ = cute.arch.thread_idx()
            if tidx == 0:
                g = ld_relaxed(word(ws, SELFTEST_CONSUMER_GEN)) + Int32(1)
                busy(work_ns)
                t0 = cute.arch.globaltimer()
                seen = ld_acquire(word(ws, SELFTEST_COUNTER))
                while seen - g < Int32(0):  # wrap-safe "seen < g"
                    if cute.arch.globaltimer() - t0 > timeout_ns:
                        if err != Int64(0):
                            st_sys(err + Int64(4), Int32(ERR_HANDSHAKE_TIMEOUT))
                            st_sys(err + Int64(8), g)
                            st_sys(err + Int64(12), seen)
                            fence_sys()
                            st_sys(err, Int32(GCMOE_TIMEOUT_MAGIC))
                            fence_sys()
                        trap()
                    seen = ld_acquire(word(ws, SELFTEST_COUNTER))
                bad = Int32(0)
                if seen != g:
                    bad = bad + Int32(1)
                for i in cutlass.range_constexpr(SELFTEST_PAYLOAD_WORDS):
                    if ld_relaxed(word(ws, SELFTEST_PAYLOAD + i)) != g * Int32(PAYLOAD_MULT) + Int32(i):
                        bad = bad + Int32(1)
                if bad != Int32(0):
                    red_add(word(ws, SELFTEST_ERRORS), bad)
                st_release(word(ws, SELFTEST_CONSUMER_GEN), g)

    else:

        @cute.kernel
        def kernel(ws: Int64, err: Int64, timeout_ns: Int64, work_ns: Int64):
            tidx, _, _ = cute.arch.thread_idx()
            if tidx == 0:
                g = ld_relaxed(word(ws, SELFTEST_FINALIZE_GEN)) + Int32(1)
                bad = Int32(0)
                if ld_acquire(word(ws, SELFTEST_PRODUCER_GEN)) != g:
                    bad = bad + Int32(1)
                if ld_acquire(word(ws, SELFTEST_CONSUMER_GEN)) != g:
                    bad = bad + Int32(1)
                if bad != Int32(0):
                    red_add(word(ws, SELFTEST_ERRORS), bad)
                st_release(word(ws, SELFTEST_FINALIZE_GEN), g)

    @cute.jit
    def host(ws: Int64, err: Int64, timeout_ns: Int64, work_ns: Int64):
        kernel(ws, err, timeout_ns, work_ns).launch(grid=(1, 1, 1), block=(THREADS, 1, 1))

    fake = (Int64(0), Int64(0), Int64(0), Int64(0))
    return host, kernel, fake
