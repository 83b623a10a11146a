"""The FP8-weight K128 step of role4 (SM90 shared experts): register-A ``wgmma m64nBMk32 .e4m3`` with the weight
fragments loaded straight from HBM (no FP4 decode), plus the two small PTX helpers role4 needs beyond role2's.

Tile layout: ``gcmoe_runtime.numerics.transforms_sm90_shared`` (per 64-row slab and K128 step, warpgroup thread
``t`` owns code bytes ``[64t, 64t + 64)`` = K32 steps q = 0..3 x A registers a0..a3, and 8 scale bytes at row
group ``8w + g``: byte ``2q + hh`` is the UE8M0 code of row ``16w + g + 8hh`` for K32 ``q``). The scale FMA
schedule is role2's ``_k128_mma`` (``role2_gemm``): per K32 a fresh partial (``p = false``), FMA'd with
``weight_scale[row] * act_scale[token]`` while the next K32's MMAs run (``lag``); for the 1x128x128 recipe
(``block_k128``) the four K32 MMAs chain on one partial and one FMA per K128 scales it (session 15: the per-K32 path
was 1 024 of BM 64's 1 246 instructions per K256).
"""
from __future__ import annotations

from cutlass import Int32, Int64
from cutlass.cutlass_dsl import dsl_user_op

from .role2_gemm import _k128_mma
from .wgmma_rs import _asm, _v

#: Int32 words of one K128 register stage: 2 slabs x 16 code words, then 2 slabs x 2 scale words
WORDS_PER_STAGE = 36
CODE_TILE_BYTES = 8192
SCALE_TILE_BYTES = 256


@dsl_user_op
def ld_global_nc_v4(addr, *, loc=None, ip=None):
    """16-byte read-only global load, L1 not allocated (weights: never written during the kernel)."""
    r = _asm("ld.global.nc.L1::no_allocate.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l", [_v(addr, Int64)], 4)
    return [Int32(x) for x in r]


@dsl_user_op
def ld_global_nc_v2(addr, *, loc=None, ip=None):
    r = _asm("ld.global.nc.L1::no_allocate.v2.u32 {$0, $1}, [$2];", "=r,=r,l", [_v(addr, Int64)], 2)
    return [Int32(x) for x in r]


@dsl_user_op
def st_relaxed_gpu_u32(addr, val, *, loc=None, ip=None):
    _asm("st.relaxed.gpu.global.u32 [$0], $1;", "l,r", [_v(addr, Int64), _v(val)], 0)


def load_k128_fp8(wbuf, stage: int, kb, wbases, sbases):
    """Issue the loads of K128 step ``kb`` into register stage ``stage`` (of 2): per slab, the thread's 64 code
    bytes (four 16-byte loads) and its 8 scale bytes. Shared weights are re-read by every token block of the
    replay, so they keep the default L2 policy (routed weights stream EVICT_FIRST in role2)."""
    base = stage * WORDS_PER_STAGE
    for sl in range(2):
        for q in range(4):
            v = ld_global_nc_v4(wbases[sl] + Int64(kb) * CODE_TILE_BYTES + 16 * q)
            for r in range(4):
                wbuf[base + sl * 16 + q * 4 + r] = v[r]
        sc = ld_global_nc_v2(sbases[sl] + Int64(kb) * SCALE_TILE_BYTES)
        for r in range(2):
            wbuf[base + 32 + sl * 2 + r] = sc[r]


def k128_mma_fp8(words, ascl, acc, act_smem, kl128, bm: int, lag: int, block_k128: bool = False):
    """One K128 step of one warpgroup: role2's ``_k128_mma`` with the A registers taken as they are (no FP4
    decode): K32 ``q`` uses code words ``[4q, 4q + 4)`` of slab 0 and ``[16 + 4q, 16 + 4q + 4)`` of slab 1, the
    scale words start at 32.

    ``words``: :data:`WORDS_PER_STAGE` Int32 (see :func:`load_k128_fp8`); ``ascl[q]``: the token scales of the
    thread's BM/4 tokens for K32 ``q`` (``role2_gemm.TokenScales``); ``acc``: 2 x BM/2 FP32 (slab 0, slab 1).
    ``block_k128``: the weight scale is one per slab and K128 (the 1x128x128 recipe): chained per K128."""
    _k128_mma(words, ascl, acc, act_smem, kl128, bm, lag,
              a_regs=lambda q: words[q * 4:q * 4 + 4] + words[16 + q * 4:16 + q * 4 + 4], scale_word=32,
              block_k128=block_k128)
