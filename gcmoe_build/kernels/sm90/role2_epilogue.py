"""The SM90 role2 / role4 epilogues, inlined into the calling kernel once a task's MMAs are waited: W1's SwiGLU x
routing weight, amax and FP8 requantisation with a UE8M0 scale per 128 I-columns, staged in shared memory and stored
16 bytes at a time (:func:`_w1_epilogue`); W2's BF16 partials staged by ``stmatrix.trans`` and stored 16 bytes at a
time to each token's destination row (:func:`w2_epilogue`), and the slab-pass stash of both.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, const_expr

from gcmoe_runtime.numerics.sm90_layout import k128_epilogue_position

from .ptx_mem import (bar_sync, ld_global_f32, ld_global_s32, ld_shared_f32, ld_shared_u64, ld_shared_v4, st_global_u8,
                      st_global_v4, st_shared_f32, st_shared_u64, st_shared_u8, stmatrix_x4_trans)
from .ring_sync import ld_shared_b32, st_shared_b32
from .role2_config import CONSUMER_THREADS, ROWS_PER_CTA, _consumer_lane
from .role2_math import (bf16_round, fabs, float_bits, fmax, fmin, pack_bf16x2, sel_f32, shfl_bfly_f32, sigmoid,
                         to_e4m3_byte, transpose_bytes_4x4, ue8m0_scale_for)

#: row stride (bytes) of the W1 epilogue's E4M3 staging tile ``[BM][128 I-columns]``: 16-byte aligned rows for the
#: 16-byte copies out, and the +16 puts the rows of a warp's four token pairs (2t apart) on different banks
W1_STAGE_STRIDE = 144


def w1_stage_bytes(bm: int) -> int:
    """Shared-memory bytes of :func:`_w1_epilogue`'s staging tile (it reuses the activation area, which is at least
    ``bm * 256`` bytes: one K256 chunk)."""
    return bm * W1_STAGE_STRIDE


@cute.jit
def _w1_epilogue(acc, smem, amax_off: int, stage_off: int, efac, ntok, tile, wg, warp, g, t, rw_addr, q_addr,
                 sf_addr, bm: int, alpha: float, clamp: float, part: int = 0, stash_off: int = 0,
                 fast_math: bool = False, k_interleave: bool = False):
    """W1 epilogue of one 256-row task (numerics reference steps 3-4), inlined into the calling kernel; every
    consumer thread calls it once the task's MMAs are waited.

    Rows are gate/up interleaved in 8-row groups: accumulator element i (row half 0) is the gate and
    i + 2 (row half 1) the up value of I-column 32*slab + 8*warp + g, token n. Per value: BF16 round,
    clamp, ``gate*sigmoid(alpha*gate)*up*rw`` (padded tokens 0; ``fast_math``: the sigmoid's reciprocal by
    ``rcp.approx``), amax over the task's 128 I-columns, its one :data:`L2_SCALE_GROUP` (each thread's two slabs
    first, then shuffles, then the warp partials — 8 (wg, warp), or 16 (slab, warp) when ``part`` splits the slabs —
    through shared memory at ``amax_off``, ``[16][bm]`` FP32), UE8M0 scale, E4M3 byte. Three barriers: after the
    partials; after one thread per token has reduced its partials into the scale (its inverse replaces partial 0;
    that thread writes the token's scale byte); after the E4M3 bytes are staged in ``[bm][128]`` at ``stage_off``
    (:data:`W1_STAGE_STRIDE`; the activation area, free once every MMA is waited), which then leaves in 16-byte
    stores, 8 per token. The caller orders the next use of either area (its next barrier).

    ``rw_addr(n)``: routing weight of token n (loaded once per token), ``q_addr(n, col)``: its E4M3 output byte of
    I-column ``col`` (16-byte aligned at ``col % 16 == 0``), ``sf_addr(n, grp)``: its UE8M0 scale byte of scale group
    ``grp`` (= ``tile``). ``efac=None`` / ``rw_addr=None`` (role4's shared expert): no expert factor / routing
    weight, the multiply is not emitted at all.

    ``part`` (``Role2GemmConfig.slab_passes = 2``: ``acc`` holds one slab): 1 after pass 0, the warpgroup's first
    slab: its values and amax partials only, the values into the stash at ``stash_off`` (``[value][thread]`` FP32);
    2 after pass 1: the second slab's, then the rest with the first slab's values from the stash. 0: both slabs.

    ``k_interleave`` (``Role2GemmConfig.k_interleave``): the task's 128 output columns leave in the interleaved K order
    of W2's tiles (``sm90_layout.k128_position``), so W2's chunks of ``l2_x`` need no permutation."""
    nd = bm // 2
    ctid = wg * 128 + warp * 32 + g * 4 + t
    ys = []
    rws = {}  # token (as its (i >> 2, i & 1)) -> routing weight: one load for both slabs
    own = (0, 1) if part == 0 else ((0,) if part == 1 else (1,))  # the slabs in acc, in its order
    for pos, sl in enumerate(own):  # plain Python: unrolled at trace time
        for i in cutlass.range_constexpr(nd):
            if const_expr((i >> 1) & 1 == 0):
                n = 8 * (i >> 2) + 2 * t + (i & 1)
                key = (i >> 2, i & 1)
                gv, uv = acc[pos * nd + i], acc[pos * nd + i + 2]
                if const_expr(rw_addr is not None and key not in rws):
                    rws[key] = ld_global_f32(rw_addr(n))
                if const_expr(efac is not None):
                    gv, uv = gv * efac, uv * efac
                rw = None
                if const_expr(rw_addr is not None):
                    rw = rws[key]
                y = swiglu_value(gv, uv, alpha, clamp, fast_math, rw)
                ys.append(sel_f32(Int32(n < ntok), y, Float32(0.0)))
    # amax partials: a thread's values of one token (both slabs when acc holds both) first, then the 8 lanes of
    # its t (g = 0..7 hold the warp's 8 I-columns of the same tokens) by shuffles: half the shuffles of reducing
    # each slab on its own; max is exact, so the scale is the same
    per = nd // 2  # values per slab
    for j in cutlass.range_constexpr(per):
        i = 4 * (j >> 1) + (j & 1)  # the j-th gate element
        n = 8 * (i >> 2) + 2 * t + (i & 1)
        m = fabs(ys[j])
        if const_expr(len(own) == 2):
            m = fmax(m, fabs(ys[per + j]))
        m = fmax(m, shfl_bfly_f32(m, 4))
        m = fmax(m, shfl_bfly_f32(m, 8))
        m = fmax(m, shfl_bfly_f32(m, 16))
        if g == 0:
            slot = wg * 4 + warp if part == 0 else (wg * 2 + own[0]) * 4 + warp
            st_shared_f32(smem + amax_off + (slot * bm + n) * 4, m)
    if const_expr(part == 1):
        for j in cutlass.range_constexpr(len(ys)):
            st_shared_f32(smem + stash_off + (j * CONSUMER_THREADS + ctid) * 4, ys[j])
    else:
        _w1_quantize_store(([ld_shared_f32(smem + stash_off + (j * CONSUMER_THREADS + ctid) * 4)
                             for j in range(nd // 2)] if part == 2 else []) + ys,
                           smem, amax_off, stage_off, ntok, tile, ctid, wg, warp, g, t, q_addr, sf_addr, bm,
                           8 if part == 0 else 16, k_interleave)


def swiglu_value(gv, uv, alpha: float, clamp: float, fast_math: bool, rw=None, rounded: bool = False):
    """One W1 output before its requantisation (numerics reference step 3): the gate ``gv`` and up ``uv`` values
    (``acc x efac``) rounded to BF16 (unless ``rounded``: already BF16 values, e.g. unpacked from a BF16 pair),
    clamped (the gate from above, the up value both ways), ``gate * sigmoid(alpha * gate) * up``, times the routing
    weight ``rw`` unless None. Every W1 epilogue computes its values here."""
    gte = fmin(gv if rounded else bf16_round(gv), Float32(clamp))
    up = fmax(fmin(uv if rounded else bf16_round(uv), Float32(clamp)), Float32(-clamp))
    y = gte * sigmoid(gte * Float32(alpha), fast_math) * up
    if rw is not None:
        y = y * rw
    return y


@cute.jit
def _w1_quantize_store(ys, smem, amax_off: int, stage_off: int, ntok, tile, ctid, wg, warp, g, t, q_addr, sf_addr,
                       bm: int, partials: int = 16, k_interleave: bool = False):
    """:func:`_w1_epilogue` once every amax partial is written (``partials`` of them per token): the scales, the E4M3
    bytes of ``ys`` (the values of both slabs, in order), their staging and 16-byte stores."""
    nd = bm // 2
    bar_sync(1, CONSUMER_THREADS)
    # partials 16: slab p // 4, warp p % 4; 8: warpgroup p // 4, warp p % 4
    w1_token_scales(smem, amax_off, partials, ntok, tile, ctid, bm, sf_addr)
    bar_sync(1, CONSUMER_THREADS)
    invs = {}
    yi = 0
    for sl in cutlass.range_constexpr(2):
        for i in cutlass.range_constexpr(nd):
            if const_expr((i >> 1) & 1 == 0):
                n = 8 * (i >> 2) + 2 * t + (i & 1)
                key = (i >> 2, i & 1)
                if const_expr(key not in invs):
                    invs[key] = ld_shared_f32(smem + amax_off + n * 4)
                if const_expr(k_interleave):  # the column's byte in W2's interleaved K order
                    col = k128_epilogue_position(wg * 2 + sl, warp, g)
                else:  # within the task's 128 I-columns
                    col = (wg * 2 + sl) * 32 + 8 * warp + g
                st_shared_u8(smem + stage_off + n * W1_STAGE_STRIDE + col, to_e4m3_byte(ys[yi] * invs[key]))
                yi += 1
    bar_sync(1, CONSUMER_THREADS)
    w1_store_rows(smem, stage_off, ntok, tile, ctid, CONSUMER_THREADS, bm, q_addr)


@cute.jit
def w1_token_scales(smem, amax_off: int, partials: int, ntok, tile, tid, bm: int, sf_addr):
    """Thread ``tid < bm``, once every amax partial ``[partials][bm]`` FP32 at ``amax_off`` is written: token ``tid``'s
    amax over the task's 128 I-columns, its UE8M0 scale byte (``sf_addr(n, grp)``, valid tokens only) and ``1/scale``
    for every thread, in partial 0's slot (only this thread read the token's partials)."""
    if tid < bm:
        m = Float32(0.0)
        for p in cutlass.range_constexpr(partials):
            m = fmax(m, ld_shared_f32(smem + amax_off + (p * bm + tid) * 4))
        scale, inv = ue8m0_scale_for(m)
        st_shared_f32(smem + amax_off + tid * 4, inv)
        if tid < ntok:
            st_global_u8(sf_addr(tid, tile), (float_bits(scale) >> 23) & 0xFF)


@cute.jit
def w1_store_rows(smem, stage_off: int, ntok, tile, tid, threads: int, bm: int, q_addr, transposed: bool = False):
    """The staged ``[bm][W1_STAGE_STRIDE]`` E4M3 rows out, 16 bytes a store, 8 per valid token (``q_addr(n, col)``: the
    token's byte of I-column ``col``), spread over ``threads`` threads (``tid`` in ``[0, threads)``). ``transposed``:
    each 16-byte unit was staged with its 4 x 4 bytes transposed (``role2_handover``'s packed staging)."""
    for it in cutlass.range_constexpr((bm * 8 + threads - 1) // threads):
        u = tid + it * threads
        if u < bm * 8:
            n = u >> 3
            c = u & 7
            if n < ntok:
                v = ld_shared_v4(smem + stage_off + n * W1_STAGE_STRIDE + c * 16)
                if const_expr(transposed):
                    v = transpose_bytes_4x4(v)
                st_global_v4(q_addr(n, tile * 128 + c * 16), v[0], v[1], v[2], v[3])


def _w2_stage_pair(acc, efac, smem, stash_off: int, ctid, nd: int, q: int, j: int):
    """:func:`w2_epilogue`: this thread's register of matrix ``j`` of token group ``q`` (slab ``j >> 1``, row half
    ``j & 1``): accumulators ``i = 4q + 2(j & 1)`` and ``i + 1`` (tokens ``8q + 2t`` and ``+1``) x ``efac`` as a BF16
    pair, or with ``stash_off >= 0`` the first slab's pair from the stash (:func:`w2_stash_slab`)."""
    s2, i = j >> 1, 4 * q + 2 * (j & 1)
    if stash_off >= 0 and s2 == 0:
        return ld_shared_b32(smem + stash_off + ((i // 2) * CONSUMER_THREADS + ctid) * 4)
    return _bf16_pair(acc, (s2 if stash_off < 0 else 0) * nd + i, efac)


def _bf16_pair(acc, i: int, efac):
    """``acc[i]`` and ``acc[i + 1]`` (x ``efac`` unless None) as one BF16 pair, ``acc[i]`` in the low half."""
    y0, y1 = acc[i], acc[i + 1]
    if efac is not None:
        y0, y1 = y0 * efac, y1 * efac
    return pack_bf16x2(y0, y1)


def w2_stage_chunk_off(stage_off, n, chunk):
    """Shared offset of 16-byte chunk ``chunk`` (weight rows ``8 chunk .. 8 chunk + 7``) of token ``n``'s 256 BF16
    outputs in :func:`w2_epilogue`'s staging: 512 B per token, the chunks XOR-swizzled by ``n % 8`` so that the eight
    tokens of one transposed stmatrix write eight different bank groups (the reader applies the same map)."""
    return stage_off + n * 512 + ((chunk ^ (n & 7)) << 4)


@cute.jit
def w2_epilogue(acc, efac, smem, stage_off: int, dst_off: int, ntok, ctid, dst_of, bm: int, after_loads=None,
                loads_barrier=(1, CONSUMER_THREADS), stash_off: int = -1):
    """W2 epilogue of one 256-row task, inlined; every consumer thread calls it once the task's MMAs are waited.

    BF16 ``acc * efac`` of the task's 256 rows is staged in shared memory ``[bm][256]`` at ``stage_off`` (512 B per
    token, 16-byte chunks swizzled: :func:`w2_stage_chunk_off`; the activation area, free once every warpgroup's last
    wgmma has read it: the first barrier), then leaves in 16-byte stores, 32 per valid token, to ``dst_of(n)`` (the
    address of token n's 256 output rows, 16-byte aligned; it may load, e.g. the ring's ``ring_meta`` row). ``dst_of``
    runs once per token, in thread ``n``, before the staging, and its address is handed over through shared memory at
    ``dst_off`` (8 B per token), so the loads behind it run under the staging instead of before every store.
    ``efac=None`` (role4's shared expert): no factor, the multiply is not emitted. The caller orders the next use of
    either area.

    ``after_loads()``, when given, runs in every consumer thread after the barrier that follows the last ``dst_of``
    load and before the first store; its result is returned. A release there orders every global read of the task
    (the mainloop's, ``dst_of``'s) and no store of it: its fence finds nothing of the task to wait for.
    ``loads_barrier``: that barrier's (id, threads); :data:`SIGNAL_BAR` hands the task to the signal warp there
    (``Role2GemmConfig.signal_warp``), which then releases instead of ``after_loads``. Pass 1 of
    ``Role2GemmConfig.slab_passes = 2`` (``stash_off >= 0``): ``acc`` holds the warpgroup's second slab and the
    first slab's BF16 values wait at ``stash_off`` (:func:`w2_stash_slab`)."""
    wg, warp, _, _, _ = _consumer_lane(ctid)
    dst = Int64(0)
    if ctid < bm:
        if ctid < ntok:
            dst = dst_of(ctid)
    bar_sync(1, CONSUMER_THREADS)  # every warpgroup's last wgmma has read the activation chunk
    w2_stage_rows(acc, efac, smem, stage_off, ctid, wg, warp, bm, stash_off)
    if ctid < bm:
        st_shared_u64(smem + dst_off + ctid * 8, dst)
    bar_sync(*loads_barrier)
    early = after_loads() if after_loads is not None else None
    w2_store_rows(smem, stage_off, dst_off, ntok, ctid, CONSUMER_THREADS, bm)
    return early


def w2_stage_rows(acc, efac, smem, stage_off: int, ctid, wg, warp, bm: int, stash_off: int = -1):
    """:func:`w2_epilogue`'s staging: BF16 ``acc * efac`` of the task's 256 rows into ``[bm][256]`` at ``stage_off``
    (:func:`w2_stage_chunk_off`), every consumer thread (warp-collective ``stmatrix``)."""
    nd = bm // 2
    # one stmatrix per 8 tokens: the four 8 x 8 accumulator fragments (slab s2, row half h) of tokens 8q..8q+7 as
    # BF16 pairs, stored transposed, so each token's 8 weight rows land as one 16-byte chunk (lane 8j + c names token
    # 8q + c's chunk of matrix j); 32 two-byte stores with 4-way bank conflicts before (session 24)
    lane = ctid & 31
    mj, mc = lane >> 3, lane & 7
    chunk = wg * 16 + (mj >> 1) * 8 + 2 * warp + (mj & 1)  # (wg*128 + s2*64 + 16*warp + 8h) / 8 for matrix mj
    for q in range(nd // 4):  # plain Python: unrolled at trace time
        stmatrix_x4_trans(smem + w2_stage_chunk_off(stage_off, 8 * q + mc, chunk),
                          *[_w2_stage_pair(acc, efac, smem, stash_off, ctid, nd, q, j) for j in range(4)])


@cute.jit
def w2_store_rows(smem, stage_off: int, dst_off: int, ntok, tid, threads: int, bm: int):
    """The staged ``[bm][256]`` BF16 rows out, 16 bytes a store, 32 per valid token, to the destinations at ``dst_off``
    (8 B per token), spread over ``threads`` threads (``tid`` in ``[0, threads)``)."""
    units = bm * 32
    for it in cutlass.range_constexpr((units + threads - 1) // threads):
        u = tid + it * threads
        if u < units:
            n = u >> 5
            c = u & 31
            if n < ntok:
                v = ld_shared_v4(smem + w2_stage_chunk_off(stage_off, n, c))
                st_global_v4(ld_shared_u64(smem + dst_off + n * 8) + Int64(16 * c), v[0], v[1], v[2], v[3])


def w2_stash_slab(acc, efac, smem, stash_off: int, ctid, bm: int):
    """W2 after pass 0 of ``Role2GemmConfig.slab_passes = 2``: this thread's BF16 values of the warpgroup's first slab
    (``acc * efac``), two per 32-bit word, into the stash ``[word][thread]`` for :func:`w2_epilogue`."""
    nd = bm // 2
    for j in range(nd // 2):  # plain Python: unrolled at trace time
        st_shared_b32(smem + stash_off + (j * CONSUMER_THREADS + ctid) * 4, _bf16_pair(acc, 2 * j, efac))


def row_table_dst(out, rowidx_addr, rows: int, tile):
    """The dev kernels' W2 destination of a token (:func:`w2_epilogue`'s ``dst_of``): this task's 256 rows of its
    output row ``out[rowidx][rows]`` (BF16), ``rowidx_addr``: the address of the token's Int32 row index."""
    return out + (Int64(ld_global_s32(rowidx_addr)) * rows + Int64(tile * ROWS_PER_CTA)) * 2
