"""Memory-order primitives of the SM90 dispatch/finalize roles (role1, role3), as inline PTX.

Owns the instructions whose scope and ordering *are* the cross-rank protocol (paper §4.3, §4.6),
spelled out verbatim so the PTX shows them: release stores / acquire loads at the protocol's scope
(``role_common.peer_scope``: system scope over NVLink, GPU scope at P = 1) for the tag-1 barrier and
the combine readiness, GPU-scope packed atomics (send counter), relaxed loads of data peers wrote
into our workspace, the persistent grid barrier, 1-D bulk copies between global and shared memory
(the warp-private staging of the token pull), and the device-timeout path: write a trap record
(``gcmoe_runtime.workspace.trap``) to host-mapped memory with system-scope stores, then ``trap``.

Addresses are integers (global: Int64 generic addresses; shared: Int32 CTA-window offsets).
Import only after ``gcmoe_build.frontend.dsl.import_dsl``.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64
from cutlass.cutlass_dsl import T, dsl_user_op

from gcmoe_runtime.workspace.trap import TRAP_MAGIC

from .ptx_mem import fence_acq_rel_gpu  # noqa: F401  (one definition per instruction; the names role1/role3 use)
from .ptx_mem import ld_global_s32 as ld_s32  # noqa: F401
from .ptx_mem import red_release_add_u32 as red_release_gpu_add_u32  # noqa: F401  (the ring-block release)
from .ptx_mem import st_global_v4 as st_v4  # noqa: F401
from .wgmma_rs import _asm, _v


# ------------------------------------------------------------------------------------------ loads
@dsl_user_op
def ld_u32(addr, *, loc=None, ip=None) -> Int32:
    """Relaxed GPU-scope load (L1 bypassed): our own persistent state written by earlier kernels."""
    return Int32(_asm("ld.relaxed.gpu.global.u32 $0, [$1];", "=r,l", [_v(addr, Int64)], 1)[0])


@dsl_user_op
def ld_peer_u32(addr, scope: str, *, loc=None, ip=None) -> Int32:
    """Relaxed load at the protocol's scope (``role_common.peer_scope``): data a peer rank wrote into our
    workspace (over NVLink when ``scope`` is "sys")."""
    return Int32(_asm(f"ld.relaxed.{scope}.global.u32 $0, [$1];", "=r,l", [_v(addr, Int64)], 1)[0])


@dsl_user_op
def ld_peer_u64(addr, scope: str, *, loc=None, ip=None) -> Int64:
    return Int64(_asm(f"ld.relaxed.{scope}.global.u64 $0, [$1];", "=l,l", [_v(addr, Int64)], 1, T.i64())[0])


@dsl_user_op
def ld_acquire_peer_u32(addr, scope: str, *, loc=None, ip=None) -> Int32:
    return Int32(_asm(f"ld.acquire.{scope}.global.u32 $0, [$1];", "=r,l", [_v(addr, Int64)], 1)[0])


@dsl_user_op
def ld_acquire_gpu_u64(addr, *, loc=None, ip=None) -> Int64:
    return Int64(_asm("ld.acquire.gpu.global.u64 $0, [$1];", "=l,l", [_v(addr, Int64)], 1, T.i64())[0])


@dsl_user_op
def ld_shared_u32(saddr, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("ld.shared.u32 $0, [$1];", "=r,r", [_v(saddr)], 1)[0])


# ----------------------------------------------------------------------------------------- stores
@dsl_user_op
def st_u32(addr, val, *, loc=None, ip=None):
    _asm("st.global.u32 [$0], $1;", "l,r", [_v(addr, Int64), _v(val)], 0)


@dsl_user_op
def st_u64(addr, val, *, loc=None, ip=None):
    _asm("st.global.u64 [$0], $1;", "l,l", [_v(addr, Int64), _v(val, Int64)], 0)


@dsl_user_op
def st_release_peer_u32(addr, val, scope: str, *, loc=None, ip=None):
    _asm(f"st.release.{scope}.global.u32 [$0], $1;", "l,r", [_v(addr, Int64), _v(val)], 0)


@dsl_user_op
def st_release_peer_u64(addr, val, scope: str, *, loc=None, ip=None):
    _asm(f"st.release.{scope}.global.u64 [$0], $1;", "l,l", [_v(addr, Int64), _v(val, Int64)], 0)


@dsl_user_op
def st_shared_u32(saddr, val, *, loc=None, ip=None):
    _asm("st.shared.u32 [$0], $1;", "r,r", [_v(saddr), _v(val)], 0)


# ---------------------------------------------------------------------------------------- atomics
@dsl_user_op
def atom_add_shared_u32(saddr, val, *, loc=None, ip=None) -> Int32:
    """Shared-memory atomic add; returns the old value."""
    return Int32(_asm("atom.shared.add.u32 $0, [$1], $2;", "=r,r,r", [_v(saddr), _v(val)], 1)[0])


@dsl_user_op
def atom_add_gpu_u64(addr, val, *, loc=None, ip=None) -> Int64:
    """GPU-scope relaxed atomic add on a global u64; returns the old value (the packed send counter)."""
    return Int64(_asm("atom.relaxed.gpu.global.add.u64 $0, [$1], $2;", "=l,l,l",
                      [_v(addr, Int64), _v(val, Int64)], 1, T.i64())[0])


@dsl_user_op
def atom_add_acqrel_gpu_u64(addr, val, *, loc=None, ip=None) -> Int64:
    return Int64(_asm("atom.acq_rel.gpu.global.add.u64 $0, [$1], $2;", "=l,l,l",
                      [_v(addr, Int64), _v(val, Int64)], 1, T.i64())[0])


# ----------------------------------------------------------------------------------------- fences
@dsl_user_op
def fence_acq_rel_peer(scope: str, *, loc=None, ip=None):
    _asm(f"fence.acq_rel.{scope};", "", [], 0)


@dsl_user_op
def fence_sc_sys(*, loc=None, ip=None):
    _asm("fence.sc.sys;", "", [], 0)


@dsl_user_op
def syncwarp(*, loc=None, ip=None):
    _asm("bar.warp.sync -1;", "", [], 0)


@dsl_user_op
def shfl_up(x, delta: int, *, loc=None, ip=None) -> Int32:
    return Int32(_asm(f"shfl.sync.up.b32 $0, $1, {int(delta)}, 0, -1;", "=r,r", [_v(x)], 1)[0])


@dsl_user_op
def shfl_idx(x, src, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("shfl.sync.idx.b32 $0, $1, $2, 31, -1;", "=r,r,r", [_v(x), _v(src)], 1)[0])


@dsl_user_op
def ballot(pred, *, loc=None, ip=None) -> Int32:
    """Warp ballot of ``pred != 0``."""
    return Int32(_asm("{\n.reg .pred p;\nsetp.ne.s32 p, $1, 0;\nvote.sync.ballot.b32 $0, p, -1;\n}",
                      "=r,r", [_v(pred)], 1)[0])


@dsl_user_op
def globaltimer(*, loc=None, ip=None) -> Int64:
    return Int64(_asm("mov.u64 $0, %globaltimer;", "=l", [], 1, T.i64())[0])


@dsl_user_op
def trap_now(*, loc=None, ip=None):
    _asm("trap;", "", [], 0)


@dsl_user_op
def st_sys_u32_generic(addr, val, *, loc=None, ip=None):
    # generic address: the trap record lives in host-mapped (UVA) memory
    _asm("st.relaxed.sys.u32 [$0], $1;", "l,r", [_v(addr, Int64), _v(val)], 0)


# ------------------------------------------------------------------------------------ bulk copies
@dsl_user_op
def bulk_g2s(sdst, gsrc, nbytes: int, mbar, *, loc=None, ip=None):
    """1-D bulk copy global -> shared completing ``nbytes`` on the mbarrier (peer addresses work:
    the source is any global address, local or NVLink-mapped)."""
    _asm("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
         f"[$0], [$1], {int(nbytes)}, [$2];", "r,l,r", [_v(sdst), _v(gsrc, Int64), _v(mbar)], 0)


@dsl_user_op
def bulk_s2g(gdst, ssrc, nbytes: int, *, loc=None, ip=None):
    _asm(f"cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], {int(nbytes)};", "l,r",
         [_v(gdst, Int64), _v(ssrc)], 0)


@dsl_user_op
def bulk_commit(*, loc=None, ip=None):
    _asm("cp.async.bulk.commit_group;", "", [], 0)


@dsl_user_op
def bulk_wait(n: int, *, loc=None, ip=None):
    """Wait until at most ``n`` of this thread's bulk groups are pending (their writes performed)."""
    _asm(f"cp.async.bulk.wait_group {int(n)};", "", [], 0)


# ------------------------------------------------------------------------------ timeouts and traps
@cute.jit
def trap_with_record(err: Int64, code: cutlass.Constexpr, expected: Int32, observed: Int32):
    """Leave ``(magic, code, expected, observed)`` in the host-mapped record (if any), then trap."""
    bidx, _, _ = cute.arch.block_idx()
    tidx, _, _ = cute.arch.thread_idx()
    cute.printf("GCMOE TIMEOUT code={} expected={} observed={} block={} thread={}",
                Int32(code), expected, observed, bidx, tidx)
    if err != Int64(0):
        st_sys_u32_generic(err + Int64(4), Int32(code))
        st_sys_u32_generic(err + Int64(8), expected)
        st_sys_u32_generic(err + Int64(12), observed)
        fence_sc_sys()
        st_sys_u32_generic(err, Int32(TRAP_MAGIC))
        fence_sc_sys()
    trap_now()


@cute.jit
def wait_geq_u32(addr: Int64, target: Int32, t0: Int64, timeout_ns: Int64, err: Int64, code: cutlass.Constexpr,
                 scope: cutlass.Constexpr):
    """Acquire-spin at ``scope`` until the u32 at ``addr`` reaches ``target`` (wrap-safe): the protocol's scope
    (``role_common.peer_scope``) for words peers release, "gpu" for this GPU's own signals (the ring's empty counts)."""
    seen = ld_acquire_peer_u32(addr, scope)
    while seen - target < Int32(0):
        if globaltimer() - t0 > timeout_ns:
            trap_with_record(err, code, target, seen)
        seen = ld_acquire_peer_u32(addr, scope)


@cute.jit
def grid_sync(counter: Int64, nblocks: cutlass.Constexpr, nthreads: cutlass.Constexpr, timeout_ns: Int64,
              err: Int64, code: cutlass.Constexpr, scope: cutlass.Constexpr):
    """Persistent grid barrier over ``nblocks`` co-resident CTAs: a u64 arrival counter that only
    grows (never reset, so replays need no host work); generation n completes at n * nblocks.
    Every thread fences at the protocol's ``scope`` first, so peer writes issued before the barrier
    (routing entries, counts) are ordered before everything after it."""
    tidx, _, _ = cute.arch.thread_idx()
    fence_acq_rel_peer(scope)
    cute.arch.barrier()
    if tidx == 0:
        old = atom_add_acqrel_gpu_u64(counter, Int64(1))
        target = (old // Int64(nblocks) + Int64(1)) * Int64(nblocks)
        t0 = globaltimer()
        seen = ld_acquire_gpu_u64(counter)
        while seen < target:
            if globaltimer() - t0 > timeout_ns:
                trap_with_record(err, code, Int32(target), Int32(seen))
            seen = ld_acquire_gpu_u64(counter)
        fence_acq_rel_peer(scope)
    cute.arch.barrier()
