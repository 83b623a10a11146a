"""The SM90 role2 / role4 activation chunks: a task's block of token rows and their scales staged in shared memory a
K chunk at a time (:func:`for_each_chunk`): plain loads into one buffer, ``cp.async`` of the next chunk into a second
one while the current one is multiplied, or tensor-map boxes on an mbarrier per buffer (:class:`ActTma`); the token
scales staged as FP32 ``[group][BM]`` tables; the in-place permutation into the interleaved K order
(:func:`interleave_chunk`); the ``l2_full_mask`` bits a W2 chunk waits for (:func:`w1_tile_bits`).
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, const_expr

from gcmoe_runtime.numerics.sm90_layout import k128_word_source
from gcmoe_runtime.numerics.sm90_window import FOLD_LOG2

from .ptx_mem import (bar_sync, cp_async_16_zfill, cp_async_4_zfill, cp_async_wait_all, fence_proxy_async_global,
                      fence_proxy_async_shared, globaltimer, ld_global_f32, ld_global_f32_if, ld_global_u8,
                      ld_global_u8_if, ld_global_v4, ld_global_word_if, ld_shared_v4, mbar_arrive_expect_tx,
                      mbar_wait_or_trap, st_shared_f32, st_shared_v4, tma_load_2d)
from .ring_sync import st_relaxed_gpu_u64
from .role2_config import CONSUMER_THREADS, Role2GemmConfig
from .role2_math import bits_float, min_u32, sel_f32, ue8m0_to_f32


def _rounds(n: int) -> int:
    """Rounds of one unit per consumer thread that cover ``n`` units."""
    return -(-n // CONSUMER_THREADS)


def _thread_unit(ctid, r, n: int, partial: bool):
    """This consumer thread's unit of round ``r`` (``ctid + r * CONSUMER_THREADS``) of ``n``; in a ``partial`` round
    the thread past the end repeats unit ``n - 1`` (same bytes, same slot), so no unit needs a branch."""
    u = ctid + r * CONSUMER_THREADS
    return cutlass.min(u, n - 1) if partial else u


def _thread_units(ctid, n: int):
    """This consumer thread's units of ``n``, round by round (trace-time loop; :func:`_thread_unit`)."""
    for it in range(_rounds(n)):
        yield _thread_unit(ctid, it, n, (it + 1) * CONSUMER_THREADS > n)


def _stage_act_chunk(smem, act_off: int, row_addr, ctid, kc, ntok, bm: int, kc_len: int):
    """Consumers: copy K chunk ``kc`` (``kc_len`` E4M3 columns) of the block's ``bm`` token rows into
    shared memory as 16-byte units ``[kc_len/16][bm]`` (the wgmma B layout :func:`_k128_mma` reads).
    ``row_addr(tok)``: global address of token row ``tok``'s first byte. Padded tokens are loaded
    anyway (the ring block is allocated) and masked to zero, so stale or NaN bytes of an earlier
    generation never reach the MMA."""
    for u in _thread_units(ctid, bm * kc_len // 16):
        c = u % (kc_len // 16)
        tok = u // (kc_len // 16)
        keep = Int32(0) - Int32(tok < ntok)
        v = ld_global_v4(row_addr(tok) + Int64(kc) * kc_len + Int64(c) * 16)
        st_shared_v4(smem + act_off + (c * bm + tok) * 16, v[0] & keep, v[1] & keep, v[2] & keep, v[3] & keep)


def _token_major_scale_addr(asc, w1: bool, blk, bm: int, nkg: int, kc, ngs: int, tok, kk):
    """The verified kernels' activation scale of token ``tok``, scale group ``kk`` of K chunk ``kc``: its address in
    the token-major table ``[block][bm][nkg]`` (W1 FP32 per 128 along H, W2 UE8M0 byte per :data:`L2_SCALE_GROUP`
    along I; :func:`load_act_scale` reads it)."""
    gidx = (Int64(blk) * bm + Int64(tok)) * nkg + Int64(kc) * ngs + Int64(kk)
    return asc + gidx * 4 if w1 else asc + gidx


def load_act_scale(w1: bool, addr):
    """An activation scale at ``addr`` as FP32: W1's FP32 (per 128 along H), W2's UE8M0 byte (per
    :data:`L2_SCALE_GROUP` along I)."""
    return ld_global_f32(addr) if w1 else ue8m0_to_f32(ld_global_u8(addr))


@cute.jit
def _stage_chunk(smem, act_off: int, asc_off: int, row_addr, scale_at, ctid, kc, ntok, bm: int, kc_len: int,
                 ngs: int):
    """Consumers, per K chunk: wait until the previous chunk is consumed (all its wgmma waited), stage
    the chunk's activations (:func:`_stage_act_chunk`) and its FP32 activation scales ``[ngs][bm]`` at
    ``asc_off`` (``scale_at(tok, kk)``: token ``tok``'s scale of group ``kk``; padded tokens 0), then
    fence the shared stores for the async proxy (wgmma reads them) and barrier."""
    bar_sync(1, CONSUMER_THREADS)
    _stage_act_chunk(smem, act_off, row_addr, ctid, kc, ntok, bm, kc_len)
    nsc = bm * ngs
    for it in cutlass.range_constexpr((nsc + CONSUMER_THREADS - 1) // CONSUMER_THREADS):
        u = ctid + it * CONSUMER_THREADS
        if u < nsc:
            kk = u % ngs
            tok = u // ngs
            sv = scale_at(tok, kk)
            st_shared_f32(smem + asc_off + (kk * bm + tok) * 4, sel_f32(Int32(tok < ntok), sv, Float32(0.0)))
    # shared stores above are read by wgmma (async proxy): each writer fences, then barrier
    fence_proxy_async_shared()
    bar_sync(1, CONSUMER_THREADS)


def _copy_act_unit(buf, row_addr, u, kc, ntok, bm: int, kc_len: int):
    """Consumers: ``cp.async`` 16-byte unit ``u`` of K chunk ``kc`` (:func:`_stage_act_chunk`'s layout) into ``buf``,
    a padded token's unit zero-filled by the copy itself (nothing read). Complete with ``cp_async_wait_all``."""
    c = u % (kc_len // 16)
    tok = u // (kc_len // 16)
    cp_async_16_zfill(buf + (c * bm + tok) * 16, row_addr(tok) + Int64(kc) * kc_len + Int64(c) * 16,
                      Int32(16) * Int32(tok < ntok))


def _copy_act_chunk_async(buf, row_addr, ctid, kc, ntok, bm: int, kc_len: int):
    """Consumers: :func:`_stage_act_chunk`'s copy without stopping: every unit of this thread
    (:func:`_copy_act_unit`)."""
    for u in _thread_units(ctid, bm * kc_len // 16):
        _copy_act_unit(buf, row_addr, u, kc, ntok, bm, kc_len)


def copy_rounds_per_call(cfg: Role2GemmConfig) -> int:
    """Rounds (one 16-byte ``cp.async`` per consumer thread each) of the next activation chunk that each MMA call of
    the current chunk issues (:func:`for_each_chunk`): spread over the first half of its calls (at least the first),
    so the last copies still have half a chunk of MMAs to land under (spread over all the calls, the last ones were
    issued just before the chunk's end and waited for: 10 % of the consumers' stall samples at W1 BM 64, session 10
    call B)."""
    rounds = _rounds(cfg.act_buffer_bytes // 16)
    calls = max(1, cfg.kc // (128 * cfg.mma_steps_per_call) // 2)
    return -(-rounds // calls)


def _load_chunk_scales(scale_addr, w1, ctid, ntok, bm: int, ngs: int):
    """Consumers: this thread's activation scales of one chunk (``scale_addr(tok, kk)``; padded tokens 0, not read),
    at most two, raw (W2: the UE8M0 byte), to keep in registers until :func:`_store_chunk_scales`. Nothing uses a
    value before then, so the loads stay in flight under the current chunk's MMAs. ``w1``: a bool, or an Int32 read
    at run time (a K loop serving both GEMMs, ``role2_ring``'s shared loop): then each value is (the aligned word
    that holds it, the bit offset of W2's byte in it; W1: 0), one load either way (:func:`ld_global_word_if`)."""
    vals = []
    for u in _thread_units(ctid, bm * ngs):
        tok = u // ngs
        addr = scale_addr(tok, u % ngs)
        valid = Int32(tok < ntok)
        if isinstance(w1, bool):
            vals.append(ld_global_f32_if(addr, valid) if w1 else ld_global_u8_if(addr, valid))
        else:  # the word, and where W2's byte sits in it (W1: the whole word, shift 0)
            vals.append((ld_global_word_if(addr, valid), (1 - w1) * ((Int32(addr) & 3) * 8)))
    return vals


def _copy_w1_chunk_scales_async(asc_buf, scale_addr, ctid, ntok, bm: int, ngs: int):
    """Consumers: one chunk's FP32 W1 activation scales (``scale_addr(tok, kk)``) into the ``[ngs][bm]`` table at
    ``asc_buf`` with 4-byte ``cp.async`` (padded tokens zero-filled, nothing read): part of the caller's group, so
    they land with it. A plain load in their place may be scheduled by ptxas after copies issued later (session
    19 call B: role4's scale loads came back behind its whole weight prologue)."""
    for u in _thread_units(ctid, bm * ngs):
        tok = u // ngs
        cp_async_4_zfill(asc_buf + ((u % ngs) * bm + tok) * 4, scale_addr(tok, u % ngs), Int32(4) * Int32(tok < ntok))


def _store_chunk_scales(asc_buf, vals, w1, ctid, bm: int, ngs: int, fold_log2: int = 0):
    """Consumers: :func:`_load_chunk_scales`' values as FP32 into the ``[ngs][bm]`` table at ``asc_buf``, times
    ``2**fold_log2`` (exact; W2 adds to the UE8M0 exponent, saturating at 255: the infinity ``2**(b-127) * 2**f``
    rounds to for ``b + f >= 255``). ``w1`` as there: a run-time Int32 converts both halves of each pair and
    selects."""
    for u, v in zip(_thread_units(ctid, bm * ngs), vals):
        addr = asc_buf + ((u % ngs) * bm + u // ngs) * 4
        if not isinstance(w1, bool):
            word, shift = v
            b = (word >> shift) & 0xFF
            st_shared_f32(addr, sel_f32(w1, bits_float(word) * float(2 ** fold_log2),
                                        ue8m0_to_f32(min_u32(b + Int32(fold_log2), Int32(255)))))
        elif fold_log2 == 0:
            st_shared_f32(addr, v if w1 else ue8m0_to_f32(v))
        elif w1:
            st_shared_f32(addr, v * float(2 ** fold_log2))
        else:
            st_shared_f32(addr, ue8m0_to_f32(min_u32(v + Int32(fold_log2), Int32(255))))


def w1_tile_bits(kc, kc_len: int):
    """The ``l2_full_mask`` bits a W2 task needs before reading K chunk ``kc`` (``kc_len`` I-columns): one bit per
    W1 N128 tile (128 gate/up rows = 64 I-columns), i.e. bits ``[kc * kc_len / 64, (kc + 1) * kc_len / 64)``."""
    return ((Int64(1) << (kc_len // 64)) - Int64(1)) << Int64(kc * (kc_len // 64))


def all_w1_tile_bits(i_cols: int) -> int:
    """Every ``l2_full_mask`` bit of a block with ``i_cols`` I-columns (a task that waits for the whole block), as
    the signed 64-bit value the mask wait compares with (all 64 bits: -1)."""
    if i_cols // 64 > 64:
        raise ValueError(f"role2: {i_cols} I-columns need {i_cols // 64} W1 tile bits > 64 (64-bit l2_full_mask)")
    bits = (1 << (i_cols // 64)) - 1
    return bits - (1 << 64) if bits >= 1 << 63 else bits


class ActTma:
    """Where :func:`for_each_chunk` (``Role2GemmConfig.act_tma``) finds a task's chunks: the tensor map's global
    address ``tmap`` (rows of K bytes: ``gcmoe_runtime.workspace.act_tma``), the task's first row ``row0`` in it
    (Int32), the parities of the two buffers' mbarriers at the task's top ``phases`` (bit ``b``: buffer ``b``'s next
    completion; after each task the caller XORs :func:`act_tma_phase_flips`) and the mbarriers' shared offset."""

    def __init__(self, tmap, row0, phases, bar_off: int):
        self.tmap, self.row0, self.phases, self.bar_off = tmap, row0, phases, bar_off


def _run_chunk(kc, c0):
    """Chunk ``kc`` of a :func:`for_each_chunk` run -> chunk of K (``c0`` None: the whole K, no add at all). A
    module function with ``c0`` passed in: the DSL rejects closures over its values inside staged branches."""
    return kc if c0 is None else c0 + kc


def act_tma_phase_flips(cfg: Role2GemmConfig, nkc: int | None = None) -> int:
    """How one task of ``cfg`` (``nkc`` chunks; default every chunk of K) moves :class:`ActTma`'s ``phases``: bit
    ``b`` flips when the task fills buffer ``b`` an odd number of times (chunk ``kc`` uses buffer ``kc % 2``)."""
    nkc = cfg.k // cfg.kc if nkc is None else nkc
    return ((nkc + 1) // 2 & 1) | ((nkc // 2 & 1) << 1)


def _issue_act_chunk_tma(cfg: Role2GemmConfig, smem, buf, src: ActTma, kc, b):
    """Consumer thread 0: chunk ``kc``'s ``KC/128`` boxes into buffer ``b`` (shared offset ``buf``), completing on
    that buffer's mbarrier."""
    bar = smem + src.bar_off + 8 * b
    mbar_arrive_expect_tx(bar, cfg.act_buffer_bytes)
    for j in range(cfg.kc // 128):  # plain Python: unrolled at trace time
        tma_load_2d(smem + buf + j * cfg.bm * 128, src.tmap, kc * cfg.kc + j * 128, src.row0, bar)


def _interleave_line(addr):
    """One token's K128 line of a tensor-map chunk (128 bytes at ``addr``, 128-byte aligned, in the 128-byte swizzle:
    logical 16-byte chunk ``c`` at ``c ^ addr[7:9]``) into the interleaved K order, in place: physical word ``w`` of
    the line gets original word ``sm90_layout.k128_word_source(w)``. All eight loads before any store (one thread owns
    the line); the word moves themselves are register renames."""
    sw = (addr >> 3) & 0x70  # the swizzle's XOR of the chunk offset: address bits 7-9 moved to bits 4-6
    words = [w for c in range(8) for w in ld_shared_v4(addr + (sw ^ (c << 4)))]
    for c in range(8):
        st_shared_v4(addr + (sw ^ (c << 4)), *[words[k128_word_source(4 * c + t)] for t in range(4)])


@cute.jit
def interleave_chunk(buf, ctid, bm: cutlass.Constexpr, kc_len: cutlass.Constexpr):
    """Consumers (``Role2GemmConfig.k_interleave``): a landed activation chunk ``[kc_len/128][bm][128 B]`` at shared
    offset ``buf`` into the interleaved K order, one K128 line per thread and round (:func:`_interleave_line`), then
    each thread's stores fenced for the async proxy; the caller joins the consumers' barrier before any wgmma reads
    the chunk (:func:`for_each_chunk`)."""
    lines = bm * kc_len // 128
    for r in cutlass.range_constexpr(_rounds(lines)):
        line = ctid + r * CONSUMER_THREADS
        if const_expr((r + 1) * CONSUMER_THREADS <= lines):
            _interleave_line(buf + line * 128)
        else:
            if line < lines:
                _interleave_line(buf + line * 128)
    fence_proxy_async_shared()


def _act_chunk_landed(smem, src: "ActTma", kc, timeout_ns: int):
    """Wait (bounded) until chunk ``kc``'s tensor-map boxes are in its buffer: its mbarrier's parity for chunk ``kc``
    is bit ``kc % 2`` of ``src.phases`` flipped ``kc // 2`` times (async proxy: wgmma reads them as they are; generic
    loads see them too, :func:`interleave_chunk`)."""
    mbar_wait_or_trap(smem + src.bar_off + 8 * (kc & 1), ((src.phases >> (kc & 1)) ^ (kc >> 1)) & 1, timeout_ns)


@cute.jit
def _stamp_top(stamps, part: str, ctid, kc=None):
    """Consumer thread 0 stores ``%globaltimer`` at ``stamps[part]`` (:func:`for_each_chunk`'s task trace; nothing
    where ``stamps`` is None or lacks the part); ``kc``: only in chunk 0."""
    if const_expr(stamps is not None and part in stamps):
        first = Int32(1) if const_expr(kc is None) else Int32(kc == 0)
        if first * Int32(ctid == 0) != 0:
            st_relaxed_gpu_u64(stamps[part], globaltimer())


@cute.jit
def for_each_chunk(cfg: Role2GemmConfig, smem, act_off: int, asc_off: int, row_addr, scale_addr, ctid, ntok, body,
                   wait_chunk=None, c0=None, nkc=None, stamps=None, w1=None):
    """Consumers, one task: stage each K chunk of the block's activations and scales in shared memory and run
    ``body(kc, act_buf, asc_buf, prefetch)`` (the chunk's MMAs; every wgmma waited when it returns) on it.
    ``row_addr(tok)``: token row ``tok``'s first byte; ``scale_addr(kc, tok, kk)``: the address of its scale of group
    ``kk`` of chunk ``kc`` (:func:`load_act_scale`); ``wait_chunk(kc)`` (or None): a bounded wait until chunk ``kc``
    may be read (ring W2: its W1 mask bits). ``prefetch(i)`` (or None): the body's MMA call ``i`` of the chunk passes
    it as its last :class:`K128Step`'s ``issued`` callback.

    ``cfg.act_buffers == 1``: :func:`_stage_chunk` at the top of every chunk (the MMAs wait for the loads). 2: the
    first chunk is copied at the top of the task; while chunk ``kc`` is multiplied, chunk ``kc + 1`` is in flight
    into the other buffer, :func:`copy_rounds_per_call` rounds of ``cp.async`` under each MMA call's last step (all at
    once they queued ahead of the next step's shared loads), after the barrier that ends every thread's use of that
    buffer for chunk ``kc - 1``; its scales are loaded (predicated, unused until then) before ``body`` and stored after
    it; one barrier per chunk. At the last chunk the scale prefetch repeats the chunk and writes the buffer not being
    read (harmless, branch-free); no activation is copied. (Copying the next task's chunk 0 during a task's last
    chunk was measured and removed: no gain, session 12 call A.)

    ``c0`` / ``nkc`` (act_buffers=2 only): run the ``nkc`` chunks from chunk ``c0`` (a split-K task's K range; default
    every chunk of K): activations and scales are read at chunk ``c0 + kc``, ``body`` and the buffers count from 0.

    ``stamps`` (or None; ``role2_ring.TRACE``'s task trace): global addresses where consumer thread 0 stores
    ``%globaltimer`` at the parts of the task's top: ``"top"`` past the top's barrier, ``"issued"`` once it issued the
    first chunk's copy (after ``wait_chunk``), ``"scales"`` once it stored its first-chunk scales, ``"landed"`` when its
    wait for the first chunk's copy is over, ``"first"`` when every thread passed the first chunk's barrier. Each key
    may be left out. act_buffers=2 only.

    ``cfg.act_tma`` (2 buffers): ``row_addr`` is an :class:`ActTma` and consumer thread 0 copies each chunk by tensor
    map (:func:`_issue_act_chunk_tma`: chunk 0 at the task's top, chunk ``kc + 1`` right after chunk ``kc``'s
    barrier, each after a proxy fence that orders the acquire before the async reads); every thread waits on the
    buffer's mbarrier, whose parity for chunk ``kc`` is bit ``kc % 2`` of ``phases`` flipped ``kc // 2`` times.

    ``cfg.k_interleave`` (tensor-map chunks): after a W1 chunk (role1's ring rows) has landed, every consumer permutes
    its share of the chunk's K128 lines in place (:func:`interleave_chunk`) and fences its stores for the async proxy
    before the chunk's barrier, so the wgmmas after it read the interleaved order — unless
    ``cfg.w1_rows_interleaved`` (role1 wrote them so); W2's chunks (``l2_x``) were written in that order by W1's
    epilogue (``sm90_layout.k128_epilogue_position``). (Under the previous chunk's last MMA call
    instead, session 50's SASS: the one-CTA BM 48 / 80 K loops spill 52-60 values, BM 64's none.)

    ``w1`` (act_buffers=2 only; None: ``cfg.mode``'s): an Int32 read at run time, 1 for W1's scale format, 0 for
    W2's (a K loop that serves both GEMMs: ``role2_ring``'s shared loop, whose GEMMs have the same chunks; ``nkc``
    then given, ``c0`` None).
    """
    bm, kcl = cfg.bm, cfg.kc
    if const_expr(w1 is None):
        w1 = cfg.mode == "w1"
    ngs = kcl // cfg.act_scale_group
    if const_expr(nkc is None):
        nkc, c0 = cfg.k // kcl, None
    if const_expr(cfg.act_buffers == 1):
        if const_expr(c0 is not None or not isinstance(w1, bool)):
            raise ValueError("for_each_chunk: a chunk range (c0 / nkc) or a run-time w1 needs act_buffers=2")
        for kc in cutlass.range(nkc, unroll=1):
            if const_expr(wait_chunk is not None):
                wait_chunk(kc)
            _stage_chunk(smem, act_off, asc_off, row_addr, lambda tok, kk: load_act_scale(w1, scale_addr(kc, tok, kk)),
                         ctid, kc, ntok, bm, kcl, ngs)
            body(kc, smem + act_off, smem + asc_off, None)
        return
    ab, sb = cfg.act_buffer_bytes, cfg.asc_buffer_bytes
    sfl = FOLD_LOG2 if cfg.staged_fold_scale else 0  # the promote's 2**FOLD_LOG2, applied here instead
    tma = cfg.act_tma
    units = bm * kcl // 16
    rounds = _rounds(units)
    per_call = copy_rounds_per_call(cfg)
    if const_expr(tma):  # the previous task's generic accesses of the act area (epilogue staging) before the copies
        fence_proxy_async_shared()
    bar_sync(1, CONSUMER_THREADS)  # the previous task's reads of buffer 0 (its MMAs, W2's BF16 staging) are done
    _stamp_top(stamps, "top", ctid)
    k0 = _run_chunk(Int32(0), c0)
    if const_expr(wait_chunk is not None):
        wait_chunk(k0)
    if const_expr(tma):
        if ctid == 0:
            fence_proxy_async_global()  # the acquire (ours or the producer's record hand-off) before the async reads
            _issue_act_chunk_tma(cfg, smem, act_off, row_addr, k0, Int32(0))
    else:
        _copy_act_chunk_async(smem + act_off, row_addr, ctid, k0, ntok, bm, kcl)
    _stamp_top(stamps, "issued", ctid)
    _store_chunk_scales(smem + asc_off, _load_chunk_scales(lambda tok, kk: scale_addr(k0, tok, kk), w1,
                                                           ctid, ntok, bm, ngs), w1, ctid, bm, ngs, sfl)
    _stamp_top(stamps, "scales", ctid)
    if const_expr(isinstance(w1, bool)):  # k_interleave: whether a landed chunk is permuted (W1's: role1's rows)
        permute_gate = Int32(w1)
    else:  # a loop serving both GEMMs: the task's, at run time
        permute_gate = w1
    for kc in cutlass.range(nkc, unroll=1):
        if const_expr(tma):
            _act_chunk_landed(smem, row_addr, kc, cfg.timeout_ns)
            if const_expr(cfg.k_interleave and not cfg.w1_rows_interleaved and w1 is not False):  # W1's chunks
                if permute_gate != 0:
                    interleave_chunk(smem + act_off + (kc & 1) * ab, ctid, bm, kcl)
        else:  # chunk kc's copies (this thread's) landed; fence them for wgmma's async proxy
            cp_async_wait_all()
            fence_proxy_async_shared()
        _stamp_top(stamps, "landed", ctid, kc)
        bar_sync(1, CONSUMER_THREADS)  # every thread's; chunk kc's scales stored; chunk kc - 1's buffer free
        _stamp_top(stamps, "first", ctid, kc)
        cur = kc & 1
        nxt = kc + 1
        if nxt < nkc:
            if const_expr(wait_chunk is not None):
                wait_chunk(_run_chunk(nxt, c0))
            if const_expr(tma):
                if ctid == 0:
                    if const_expr(wait_chunk is not None):
                        fence_proxy_async_global()
                    _issue_act_chunk_tma(cfg, smem, act_off + (1 - cur) * ab, row_addr, _run_chunk(nxt, c0),
                                         1 - cur)
        nxs = nxt - Int32(nxt >= nkc)
        sv = _load_chunk_scales(lambda tok, kk: scale_addr(_run_chunk(nxs, c0), tok, kk), w1, ctid, ntok, bm, ngs)
        nbuf = smem + act_off + (1 - cur) * ab

        def prefetch(i):  # MMA call i of chunk kc: its share of chunk kc + 1's copies
            if nxt < nkc:
                for j in cutlass.range_constexpr(per_call):
                    r = i * per_call + j
                    if r < rounds:
                        _copy_act_unit(nbuf, row_addr, _thread_unit(ctid, r, units, units % CONSUMER_THREADS != 0),
                                       _run_chunk(nxt, c0), ntok, bm, kcl)

        body(kc, smem + act_off + cur * ab, smem + asc_off + cur * sb, None if tma else prefetch)
        _store_chunk_scales(smem + asc_off + (1 - cur) * sb, sv, w1, ctid, bm, ngs, sfl)
