"""Inline-PTX memory accesses for the SM90 role2 kernels.

Owns the loads/stores whose width and cache policy matter and which we want to see verbatim in the
PTX: 16-byte global loads of streamed weights with an L2 EVICT_FIRST policy (decode streams every
routed weight once per layer; keeping them out of L2 protects the activation/scale working set),
16-byte shared stores, and plain global/shared scalar accesses by byte address. Addresses are
integers: global = Int64 (generic == global on sm_90 for cudaMalloc memory), shared = Int32
offsets in the CTA window (``cvta``-free, as produced by ``Pointer.toint()`` of an smem pointer).
"""
from __future__ import annotations

from cutlass import Int32, Int64, Float32
from cutlass.cutlass_dsl import T, dsl_user_op

from .wgmma_rs import _asm, _v


@dsl_user_op
def evict_first_policy(*, loc=None, ip=None) -> Int64:
    """An L2 cache policy register: evict-first for the whole access (``createpolicy``)."""
    return Int64(_asm("createpolicy.fractional.L2::evict_first.b64 $0, 1.0;", "=l", [], 1, T.i64())[0])


@dsl_user_op
def ld_global_v4_stream(addr, policy, *, loc=None, ip=None):
    """16-byte read-only global load with an L2 cache policy, L1 not allocated. 4 Int32."""
    r = _asm(
        "ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {$0, $1, $2, $3}, [$4], $5;",
        "=r,=r,=r,=r,l,l", [_v(addr, Int64), _v(policy, Int64)], 4)
    return [Int32(x) for x in r]


@dsl_user_op
def ld_global_v4(addr, *, loc=None, ip=None):
    """16-byte global load (coherent: data written earlier in the stream / by other kernels)."""
    r = _asm("ld.global.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l", [_v(addr, Int64)], 4)
    return [Int32(x) for x in r]


@dsl_user_op
def ld_global_f32(addr, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("ld.global.f32 $0, [$1];", "=f,l", [_v(addr, Int64)], 1, T.f32())[0])


@dsl_user_op
def ld_global_s32(addr, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("ld.global.s32 $0, [$1];", "=r,l", [_v(addr, Int64)], 1)[0])


@dsl_user_op
def st_shared_v4(saddr, x0, x1, x2, x3, *, loc=None, ip=None):
    _asm("st.shared.v4.u32 [$0], {$1, $2, $3, $4};", "r,r,r,r,r",
         [_v(saddr), _v(x0), _v(x1), _v(x2), _v(x3)], 0)


@dsl_user_op
def st_shared_f32(saddr, x, *, loc=None, ip=None):
    _asm("st.shared.f32 [$0], $1;", "r,f", [_v(saddr), _v(x, Float32)], 0)


@dsl_user_op
def ld_shared_f32(saddr, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("ld.shared.f32 $0, [$1];", "=f,r", [_v(saddr)], 1, T.f32())[0])


@dsl_user_op
def ld_shared_v4(saddr, *, loc=None, ip=None):
    r = _asm("ld.shared.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r", [_v(saddr)], 4)
    return [Int32(x) for x in r]


@dsl_user_op
def st_shared_u8(saddr, x, *, loc=None, ip=None):
    _asm("st.shared.u8 [$0], $1;", "r,r", [_v(saddr), _v(x)], 0)


@dsl_user_op
def st_global_v4(addr, x0, x1, x2, x3, *, loc=None, ip=None):
    _asm("st.global.v4.u32 [$0], {$1, $2, $3, $4};", "l,r,r,r,r",
         [_v(addr, Int64), _v(x0), _v(x1), _v(x2), _v(x3)], 0)


@dsl_user_op
def st_global_f32(addr, x, *, loc=None, ip=None):
    _asm("st.global.f32 [$0], $1;", "l,f", [_v(addr, Int64), _v(x, Float32)], 0)


@dsl_user_op
def bar_sync(bar_id: int, nthreads: int, *, loc=None, ip=None):
    """Named barrier over ``nthreads`` threads (multiple of 32)."""
    _asm(f"bar.sync {int(bar_id)}, {int(nthreads)};", "", [], 0)
