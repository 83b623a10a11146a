"""The epilogue warpgroup of the SM90 role2 kernels (``Role2GemmConfig.epilogue_warpgroup``: the dev persistent kernel's
forms and the ring kernel's variant parameter ``epilogue_wg``, shipped at BM 64 in session 60): the consumers'
hand-over of a finished task and the epilogue warpgroup's side of it — W1's SwiGLU, amax and FP8 requantisation, W2's
BF16 stores, and the task's releases — so the consumers go on with the next task's K loop while the epilogue runs
(the K-loop probe's ``wg2cw`` / ``wg2cwh``, session 59).

The hand-over area (``Role2GemmConfig.handover_off``, ``role2_config.handover_bytes``): ``512 * bm`` bytes of data, then
the full mbarrier (every consumer thread arrives once its share is written), the empty mbarrier (every epilogue thread
arrives once it has read what it needs), and up to ``role2_config.HANDOVER_FIELDS`` task fields (u32, written by
consumer thread 0; the kernel decides which: the dev kernel ``(task, tokens)``, the ring kernel the task's coordinates).
The data is BF16 pairs of ``acc x efac`` — the rounding both epilogues begin with (``_w1_epilogue``'s ``bf16_round``,
``w2_epilogue``'s ``_bf16_pair``), so the outputs are bit-identical to the consumers' own epilogues:

* **W1**: consumer thread ``c``'s ``bm / 2`` pairs (element ``2j``, ``2j + 1`` of its accumulator) as ``bm / 8``
  16-byte words at ``(q * 256 + c) * 16`` (``q``: the word's group of four pairs): conflict-free on both sides.
  Epilogue thread ``e`` reads the pairs of consumer threads ``e`` and ``e + 128`` (the same warp and lane in both
  consumer warpgroups: the same 16 tokens, four I-columns each), so a token's amax over the task's 128 I-columns
  has four partials (one per warp), not the consumers' eight. Each value is computed once: the first pass writes
  the FP32 values back over the words it read (four values, 16 bytes, only that thread's), the second reads them
  after the scales. The E4M3 bytes, a token's four in one register, are staged ``[bm][W1_STAGE_STRIDE]`` in the
  hand-over area once every epilogue thread has read its values (in W2's interleaved K order one word per token,
  :func:`w1_packed_stage_offset`), then leave in 16-byte stores.
* **W2**: the consumers stage the BF16 rows in ``w2_epilogue``'s ``[bm][256]`` layout (``w2_stage_rows``) straight
  into the hand-over area, which the epilogue warpgroup stores out (``w2_store_rows``).

The hand-over of the consumers' ``li``-th task (in the dev kernel also, after their last, an end marker: field 0 < 0;
the ring kernel's fields say which task was the CTA's last instead) waits for the empty barrier's phase ``li - 1``
(parity ``(li & 1) ^ 1``: a fresh barrier's "previous" phase counts as complete) and completes the full barrier's phase
``li``; the epilogue warpgroup waits for full phase ``li`` and completes empty phase ``li``. mbarrier arrive / wait
order the shared-memory writes before them for the waiters (release / acquire at CTA scope), both ways.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, const_expr

from .ptx_mem import (bar_sync, ld_global_f32, ld_shared_f32, ld_shared_v4, mbar_arrive, mbar_init, st_shared_f32,
                      st_shared_u64, st_shared_u8, st_shared_v4)
from .ring_sync import ld_shared_b32, st_shared_b32
from .role2_config import CONSUMER_THREADS, EPILOGUE_BAR, EPILOGUE_THREADS
from .role2_epilogue import (W1_STAGE_STRIDE, _bf16_pair, swiglu_value, w1_store_rows, w1_token_scales, w2_stage_rows,
                             w2_store_rows)
from .role2_math import bits_float, fabs, float_bits, fmax, sel_f32, shfl_bfly_f32, to_e4m3x4

#: W1's amax partials per token in the epilogue warpgroup (one per warp) and, after them, the routing weights
#: ``[bm]`` FP32, in the kernel's amax area; W2's destination table ``[bm]`` u64 sits at the same offset
W1_PARTIALS = 4


def handover_layout(off: int, bm: int) -> dict:
    """Shared offsets of the hand-over area at ``off`` (16-byte aligned): ``data``, ``full``, ``empty`` (mbarriers),
    ``info`` (the task fields)."""
    data_end = off + 512 * bm
    return dict(data=off, full=data_end, empty=data_end + 8, info=data_end + 16)


def init_handover(smem, lay: dict):
    """One thread, before the CTA's first barrier: the full (every consumer thread) and empty (every epilogue
    thread) mbarriers."""
    mbar_init(smem + lay["full"], CONSUMER_THREADS)
    mbar_init(smem + lay["empty"], EPILOGUE_THREADS)


def _hand_over_data(acc, efac, smem, lay: dict, ctid, wg, warp, w1: bool, bm: int):
    """This consumer thread's share of the data: W1's BF16 pairs as 16-byte words, W2's rows staged."""
    if w1:
        for q in range(bm // 8):  # plain Python: unrolled at trace time
            st_shared_v4(smem + lay["data"] + (q * CONSUMER_THREADS + ctid) * 16,
                         *[_bf16_pair(acc, 8 * q + 2 * r, efac) for r in range(4)])
    else:
        w2_stage_rows(acc, efac, smem, lay["data"], ctid, wg, warp, bm)


@cute.jit
def hand_over_task(acc, efac, smem, lay: dict, ctid, wg, warp, li, fields, w1: bool, bm: int, wait,
                   end: bool = False):
    """Consumers, once the task's MMAs are waited: wait until the epilogue warpgroup has read hand-over ``li - 1``
    (``wait(mbarrier, parity)``: the kernel's bounded wait), write this thread's share (``efac``: the expert factor;
    ``w1``: the task's GEMM), consumer thread 0 the task's ``fields`` (at most ``role2_config.HANDOVER_FIELDS``
    Int32), and arrive on the full barrier. ``end``: the end marker after the consumers' last task (``fields[0]`` < 0;
    ``acc`` / ``efac`` unused)."""
    wait(smem + lay["empty"], (li & 1) ^ 1)
    if const_expr(not end):
        _hand_over_data(acc, efac, smem, lay, ctid, wg, warp, w1, bm)
    if ctid == 0:
        for j, f in enumerate(fields):  # plain Python over the trace-time tuple
            st_shared_b32(smem + lay["info"] + 4 * j, f)
    mbar_arrive(smem + lay["full"])


def _bf16_lo(word):
    """The low BF16 of a pair as FP32."""
    return bits_float(word << 16)


def _bf16_hi(word):
    """The high BF16 of a pair as FP32."""
    return bits_float(word & Int32(-65536))


def w1_word_map(bm: int):
    """The W1 hand-over's layout, the one place both sides read it: per 16-byte word ``q`` of a consumer thread (its
    accumulator elements ``8q .. 8q + 7``, pair ``r`` = elements ``8q + 2r``, ``+1`` in word ``r``), the tuple
    ``(q, slab, [(r_gate, r_up, m), ...])``: the element's 64-row slab and, for each gate / up word pair, the index
    ``m`` of its tokens ``8m + 2t`` (low halves) and ``8m + 2t + 1`` (high halves) — ``_w1_epilogue``'s element
    ``i`` of slab ``slab`` is a gate when ``(i >> 1) & 1 == 0``, for token ``8 (i >> 2) + 2t + (i & 1)``, its up value
    element ``i + 2``."""
    nd = bm // 2
    out = []
    for q in range(bm // 8):
        slab, i0 = (8 * q) // nd, (8 * q) % nd
        out.append((q, slab, [(r, r + 1, (i0 >> 2) + (r >> 1)) for r in (0, 2)]))
    return out


def _w1_word_addr(smem, lay: dict, e, wgc: int, q: int):
    """Epilogue thread ``e``'s hand-over word ``q`` of consumer warpgroup ``wgc`` (consumer thread ``e + 128 wgc``)."""
    return smem + lay["data"] + (q * CONSUMER_THREADS + wgc * EPILOGUE_THREADS + e) * 16


def _w1_word_values(pairs):
    """A hand-over word's four values, in the order :func:`epilogue_w1`'s first pass writes their FP32 back into the
    word: ``(m, b, r_gate, r_up)`` — token ``8m + 2t + b``, its gate / up BF16 in words ``r_gate`` / ``r_up`` of the
    pairs (low half ``b = 0``, high half ``b = 1``; :func:`w1_word_map`)."""
    return [(m, b, rg, ru) for rg, ru, m in pairs for b in range(2)]


def _fold_max(amax: dict, key, a):
    """``amax[key] = max(amax[key], a)``, or ``a`` for the key's first value (trace-time bookkeeping)."""
    amax[key] = fmax(amax[key], a) if key in amax else a


@cute.jit
def epilogue_w1(smem, lay: dict, amax_off: int, e, ntok, tile, rw_addr, q_addr, sf_addr, bm: int, alpha: float,
                clamp: float, fast_math: bool, k_interleave: bool):
    """The epilogue warpgroup's W1 task (numerics reference steps 3-4, as ``_w1_epilogue``): the routing weights into
    shared memory; a first pass over the thread's hand-over words computes each value once (SwiGLU x routing weight,
    zero past ``ntok``), folds the amax partials (a thread's four columns of a token, then its 8 lanes of ``g``,
    then one partial per warp) and writes the FP32 values back over the word's four BF16 pairs (a word holds four
    values either way, and only this thread reads it: no barrier); one thread per token its UE8M0 scale and
    inverse; a second pass reads the values back, scales them to E4M3 bytes, held in registers until every thread
    is done reading, then staged (:func:`_w1_stage_bytes`) and stored 16 bytes at a time. Arrives on the empty
    barrier after its last read of the area; the caller releases after its next barrier."""
    warp = e // 32
    lane = e % 32
    g, t = lane // 4, lane % 4
    rw_off = amax_off + W1_PARTIALS * bm * 4
    if e < bm:
        st_shared_f32(smem + rw_off + e * 4, ld_global_f32(rw_addr(e)))
    bar_sync(EPILOGUE_BAR, EPILOGUE_THREADS)
    amax = {}
    for wgc in cutlass.range_constexpr(2):
        for q, slab, pairs in w1_word_map(bm):
            addr = _w1_word_addr(smem, lay, e, wgc, q)
            v = ld_shared_v4(addr)
            ys = []
            for m, b, rg, ru in _w1_word_values(pairs):
                half = _bf16_hi if b else _bf16_lo
                n = 8 * m + 2 * t + b
                y = swiglu_value(half(v[rg]), half(v[ru]), alpha, clamp, fast_math,
                                 ld_shared_f32(smem + rw_off + n * 4), rounded=True)
                y = sel_f32(Int32(n < ntok), y, Float32(0.0))
                _fold_max(amax, (m, b), fabs(y))
                ys.append(float_bits(y))
            st_shared_v4(addr, *ys)
    for key in amax:
        mx = amax[key]
        mx = fmax(mx, shfl_bfly_f32(mx, 4))
        mx = fmax(mx, shfl_bfly_f32(mx, 8))
        mx = fmax(mx, shfl_bfly_f32(mx, 16))
        if g == 0:
            st_shared_f32(smem + amax_off + (warp * bm + 8 * key[0] + 2 * t + key[1]) * 4, mx)
    bar_sync(EPILOGUE_BAR, EPILOGUE_THREADS)
    w1_token_scales(smem, amax_off, W1_PARTIALS, ntok, tile, e, bm, sf_addr)
    bar_sync(EPILOGUE_BAR, EPILOGUE_THREADS)
    # second pass: the words of one token group (both slabs, both consumer warpgroups) at a time, each token's four
    # columns s = 2 wgc + slab (the thread's I-columns 32 s + 8 warp + g) packed into one register, byte s
    groups = {}
    for q, slab, pairs in w1_word_map(bm):
        groups.setdefault(tuple((m, b) for m, b, _, _ in _w1_word_values(pairs)), []).append((q, slab))
    packed = {}
    for tokens, words in groups.items():  # plain Python: trace-time dict
        vs = [None] * 4
        for wgc in cutlass.range_constexpr(2):
            for q, slab in words:
                vs[2 * wgc + slab] = ld_shared_v4(_w1_word_addr(smem, lay, e, wgc, q))
        for k, (m, b) in enumerate(tokens):
            inv = ld_shared_f32(smem + amax_off + (8 * m + 2 * t + b) * 4)
            packed[(m, b)] = to_e4m3x4(*[bits_float(v[k]) * inv for v in vs])
    bar_sync(EPILOGUE_BAR, EPILOGUE_THREADS)  # every thread's values are read: the bytes may be staged over them
    _w1_stage_bytes(smem, lay["data"], packed, warp, g, t, k_interleave)
    bar_sync(EPILOGUE_BAR, EPILOGUE_THREADS)
    w1_store_rows(smem, lay["data"], ntok, tile, e, EPILOGUE_THREADS, bm, q_addr, transposed=k_interleave)
    mbar_arrive(smem + lay["empty"])


def w1_packed_stage_offset(warp, g):
    """Byte offset within a staged W1 row of the word where :func:`epilogue_w1`'s thread of warp ``warp``, lane group
    ``g`` stages a token's four bytes in W2's interleaved K order (byte ``s``: its column ``s``): word ``g & 3`` of
    the 16-byte unit ``2 warp + (g >> 2)``, which holds the thread's four columns
    (``k128_epilogue_position(s, warp, g)`` = ``16 (2 warp + (g >> 2)) + 4 s + (g & 3)``) with the unit's 4 x 4
    bytes transposed; ``w1_store_rows(..., transposed=True)`` transposes them back on their way out. Conflict-free:
    the warp's 32 words of one token step fall on banks ``4n + 8 warp + g`` (``n = 8m + 2t + b``)."""
    return 16 * (2 * warp + (g >> 2)) + 4 * (g & 3)


def _w1_stage_bytes(smem, stage_off: int, packed: dict, warp, g, t, k_interleave: bool):
    """:func:`epilogue_w1`'s E4M3 bytes into the ``[bm][W1_STAGE_STRIDE]`` staging: ``packed[(m, b)]`` holds token
    ``8m + 2t + b``'s bytes of the thread's columns ``s`` = 0..3 (byte ``s``): in W2's interleaved K order one word
    (:func:`w1_packed_stage_offset`); in the plain order (the ablation's: columns ``32 s + 8 warp + g``, 32 apart)
    each byte where it goes."""
    for (m, b), word in packed.items():  # plain Python: trace-time dict
        row = smem + stage_off + (8 * m + 2 * t + b) * W1_STAGE_STRIDE
        if const_expr(k_interleave):
            st_shared_b32(row + w1_packed_stage_offset(warp, g), word)
        else:
            for s in range(4):
                st_shared_u8(row + s * 32 + 8 * warp + g, word >> (8 * s))


@cute.jit
def epilogue_w2(smem, lay: dict, dst_off: int, e, ntok, dst_of, bm: int, after_loads=None):
    """The epilogue warpgroup's W2 task (as ``w2_epilogue`` after its staging): each token's destination
    (``dst_of(n)``, in thread ``n``) into the table at ``dst_off``, a barrier, ``after_loads()`` in thread 0 (e.g. the
    task's release: every read of the task is done; None: nothing), the staged rows out, then the empty barrier."""
    dst = Int64(0)
    if e < bm:
        if e < ntok:
            dst = dst_of(e)
        st_shared_u64(smem + dst_off + e * 8, dst)
    bar_sync(EPILOGUE_BAR, EPILOGUE_THREADS)
    if const_expr(after_loads is not None):
        if e == 0:
            after_loads()
    w2_store_rows(smem, lay["data"], dst_off, ntok, e, EPILOGUE_THREADS, bm)
    mbar_arrive(smem + lay["empty"])


@cute.jit
def epilogue_warpgroup_loop(smem, lay: dict, nfields: int, e, wait, run_task, finish_task=None, go=None,
                            is_last=None):
    """The epilogue warpgroup (``e`` in ``[0, 128)``): each hand-over in turn. ``run_task(fields)`` (the hand-over's
    ``nfields`` task fields, Int32) emits the task's epilogue (:func:`epilogue_w1`, :func:`epilogue_w2`, which arrive
    on the empty barrier after their last read of the area); then every epilogue thread meets at the epilogue
    barrier — the task's stores are done, and the next task may rewrite the epilogue's tables — and thread 0 runs
    ``finish_task(fields)`` (None: nothing), e.g. W1's release: a release operation is cumulative over the stores that
    barrier ordered before it. ``wait(mbarrier, parity)``: the kernel's bounded wait.

    How the loop ends: by default at the consumers' end marker (field 0 < 0, :func:`hand_over_task`'s ``end``); or,
    with ``go`` (Int32: whether the CTA has any task) and ``is_last(fields)`` (Int32: the task was the CTA's last), at
    the last task's hand-over — the ring kernel's form, whose consumers may not add anything after their task loop
    (it took the K loops off the uniform datapath)."""
    marker = is_last is None
    li = Int32(0)
    head = Int32(-1)  # field 0 of the hand-over in hand; < 0: none (the end marker, or no task / the last was run)
    if const_expr(marker):
        head = _next_head(smem, lay, li, wait)
    else:  # the first hand-over is waited for only where the CTA has a task
        if go != 0:
            head = _next_head(smem, lay, li, wait)
    while head >= 0:
        fields = [head] + [ld_shared_b32(smem + lay["info"] + 4 * j) for j in range(1, nfields)]
        _run_and_finish(fields, e, run_task, finish_task)
        li = li + 1
        head = Int32(-1)
        if const_expr(marker):
            head = _next_head(smem, lay, li, wait)
        else:
            if is_last(fields) == 0:
                head = _next_head(smem, lay, li, wait)
    if const_expr(marker):
        mbar_arrive(smem + lay["empty"])  # the end marker is read (nothing waits for it: symmetry of the phases)


def _next_head(smem, lay: dict, li, wait):
    """Wait for hand-over ``li`` and read its field 0."""
    wait(smem + lay["full"], li & 1)
    return ld_shared_b32(smem + lay["info"])


@cute.jit
def _run_and_finish(fields, e, run_task, finish_task):
    """:func:`epilogue_warpgroup_loop`'s body: the task's epilogue, the epilogue barrier, thread 0's finish."""
    run_task(fields)
    bar_sync(EPILOGUE_BAR, EPILOGUE_THREADS)
    if const_expr(finish_task is not None):
        if e == 0:
            finish_task(fields)
