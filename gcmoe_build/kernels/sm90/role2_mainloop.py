"""The consumers' register-A MMA steps of the SM90 role2 / role4 GEMMs: a K128 step's words (:class:`K128Step`) are
decoded from FP4 to E4M3 in registers (:mod:`.fp4_decode`, the K32 block exponent folded in) and fed as the A operand
of ``wgmma m64nNk32 .e4m3`` (weight rows = M, tokens = N), the partials promoted into the FP32 accumulators with the
token scales (:class:`TokenScales`): :func:`_mma_k128_steps` and its forms (chained per K128, per-K32 groups with a
lag, slab groups, the two warpgroups' turns at the tensor pipe, :func:`pingpong_turns`). Where the words come from is
the caller's (:mod:`.role2_stages`: the producer's shared-memory stages, or the 256-thread variant's register
buffer).
"""
from __future__ import annotations

import cutlass.cute as cute
from cutlass import Int32, Int64, const_expr

from gcmoe_runtime.numerics.sm90_window import FOLD_LOG2, FOLD_LUT_WORDS

from .fp4_decode import byte_at, byte_of, byte_selector, decode_fp4x8_e4m3, fold_lut
from .ptx_mem import bar_arrive, bar_sync, clock32, ld_shared_f32, st_global_u32_if
from .role2_config import CONSUMER_THREADS, PINGPONG_BARS, STAMP_CTAS, STAMP_EVENTS, STAMP_STEPS
from .role2_math import ue8m0_to_f32
from .wgmma_rs import fence_f32, smem_desc, smem_desc_sw128, wgmma_commit, wgmma_fence, wgmma_rs_e4m3, wgmma_wait

FOLD_SCALE = float(2 ** FOLD_LOG2)  # decoded operands are fp4 x 2**(r - 5): the partials carry 2**-5


class TokenScales:
    """The FP32 activation scales of this thread's BM/4 tokens for each K32 of one K128 step, read from
    the staged shared-memory table ``[group][BM]`` when first needed (W2 has a group per K32: loading
    all four up front costs BM registers at BM = 64)."""

    def __init__(self, asc_smem, kl128, t, bm: int, group: int, n: int | None = None):
        self.asc_smem, self.kl128, self.t, self.bm, self.group = asc_smem, kl128, t, bm, group
        self.n = bm if n is None else n  # the MMA's N: the tokens read (a narrow step of a wider block, ``mma_n``)
        self._cache = {}

    def __getitem__(self, q: int):
        kk = q if self.group == 32 else 0
        if kk not in self._cache:
            row = self.kl128 * (128 // self.group) + kk
            self._cache[kk] = [ld_shared_f32(self.asc_smem + (row * self.bm + 8 * (i >> 1) + 2 * self.t + (i & 1)) * 4)
                               for i in range(self.n // 4)]
        return self._cache[kk]


class K128Step:
    """One K128 step of :func:`_mma_k128_steps`: ``fetch()`` returns its 20 words (called once, when the step's
    first MMA is decoded: for the pipelined variant that is the stage's full-barrier wait and its shared loads),
    ``ascl`` its :class:`TokenScales`, ``kl128`` its K128 index within the staged activation chunk, ``release`` (or
    None) is called once the MMA of K32 ``release_q`` is issued (every load consumed: the stage may be overwritten),
    ``issued`` (or None) once all its MMAs are issued and committed (work that should run under them: the next
    activation chunk's copies, :func:`for_each_chunk`); ``stamp`` (or None, dev) records an event of
    :data:`STAMP_EVENTS`; ``final`` (or None): an Int32, 1 on the consumer's last step of the launch, where
    :func:`pingpong_turns`' last hand-over is skipped."""

    def __init__(self, fetch, ascl, kl128, release=None, release_q: int = 3, issued=None):
        self.fetch, self.ascl, self.kl128, self.release, self.release_q = fetch, ascl, kl128, release, release_q
        self.issued = issued
        self.final = None
        self.stamp = None  # ``Role2GemmConfig.step_stamps``: stamp(event index of STAMP_EVENTS)
        self._words = None

    @property
    def words(self):
        if self._words is None:
            self._words = self.fetch()
        return self._words


def step_stamper(buf, cta, nwg: int, wg, first_thread, gs):
    """``Role2GemmConfig.step_stamps`` (dev) and the K-loop probe: a :attr:`K128Step.stamp` that stores ``%clock`` at
    ``buf[cta][wg][gs][event]`` (u32; ``nwg`` warpgroup rows per CTA, :data:`STAMP_STEPS` steps, the events of
    :data:`STAMP_EVENTS`) from ``first_thread`` (Int32 != 0) of a CTA below :data:`STAMP_CTAS`, for stream steps below
    :data:`STAMP_STEPS`: one predicated store, no branch."""
    def stamp(event: int):
        ok = first_thread * Int32(cta < STAMP_CTAS) * Int32(gs < STAMP_STEPS)
        slot = ((cta * nwg + wg) * STAMP_STEPS + gs) * len(STAMP_EVENTS) + event
        st_global_u32_if(buf + Int64(slot) * 4, clock32(), ok)
    return stamp


def _k128_mma(words, ascl, acc, act_smem, kl128, bm: int, lag: int, a_regs=None, scale_word: int = 16,
              fold: bool = True, block_k128: bool = False, scales_before_wait: bool = False):
    """One K128 step on its own (every MMA waited before returning): :func:`_mma_k128_steps` of one step."""
    _mma_k128_steps([K128Step(lambda: words, ascl, kl128)], acc, act_smem, bm, lag,
                    a_regs=None if a_regs is None else (lambda step, q: a_regs(q)), scale_word=scale_word, fold=fold,
                    block_k128=block_k128, scales_before_wait=scales_before_wait)


def _mma_k128_steps(steps, acc, act_smem, bm: int, lag: int, a_regs=None, scale_word: int = 16, fold: bool = True,
                    overlap: bool = True, prescaled: bool = False, sw128: bool = False, slab_groups: int = 0,
                    block_k128: bool = False, nslab: int = 2, decode: bool = True, turns=None,
                    mma_n: int | None = None, k_interleave_tig=None, scales_before_wait: bool = False,
                    words_ahead: bool = False, promote_fmas: bool = True):
    """Consecutive K128 steps of one consumer warpgroup (:class:`K128Step`), each 4 x (2 x 4 A registers, 2 wgmma),
    into ``acc``; the promotions (partial x scales -> ``acc``) of one step wait only for its own MMAs while the
    next step's are in flight, so the tensor-core drain is paid once per call, not once per K128.

    A step's ``words``: 20 Int32 = slab 0 codes (8 words: K32 q in words 2q, 2q+1), slab 1 codes, slab 0 scales
    (2 words: K32 q, row half hh in byte 2q+hh), slab 1 scales. ``ascl[q]``: the token scales of the thread's BM/4
    tokens for K32 ``q`` (the same list for all q when the activation scale is per K128).

    FP4 weights (``a_regs=None``): each K32 block's exponent is folded into the decode (:mod:`.fp4_decode`), so
    no weight scale is applied here. With one token scale per K128 (W1) the four K32 MMAs of a step chain on one
    accumulator, one commit group per step, and the partial is FMA'd once, ``acc += partial * 2**FOLD_LOG2 *
    token scale``, after the next step's group is issued (``lag`` 0: before it); with a token scale per K32 (W2's
    UE8M0 intermediate) each K32 gets a fresh partial and group, ``lag`` of them in flight (across step boundaries)
    while an earlier one is FMA'd. Other weight formats (role4's FP8) pass ``a_regs(step, q)``: the 8 A registers of
    K32 ``q`` (slab 0's 4, then slab 1's; no decode), and ``scale_word``: the index of slab 0's first scale word in
    ``words``; their UE8M0 block scale multiplies each K32 partial with the token scale. ``fold=False`` (FP4, an
    experiment): the r = 0 table for every block and a per-K32 partial multiplied by ``2**(r+5)`` x token scale.
    ``overlap=False``: each step on its own, as :func:`_k128_mma` (the 256-thread variant: its register weight
    stream and, at two CTAs per SM, its 128-register cap leave no room for a second step's partials and words).
    ``prescaled``: the staged token scales already carry ``2**FOLD_LOG2`` (``Role2GemmConfig.staged_fold_scale``).
    ``sw128``: the chunk is ``[K128][BM][128 B]`` in the 128-byte swizzle a tensor-map copy writes
    (``Role2GemmConfig.act_tma``), else ``[K16][BM][16 B]`` core matrices. ``slab_groups`` (chained per K128 only,
    ``Role2GemmConfig.slab_groups``): one commit group per (step, slab) instead of per step, that many in flight,
    ``lag`` unused. ``block_k128`` (``a_regs`` only): the weight scale is constant over each slab's K128 step (role4's
    1x128x128 recipe, whose block code the host transform repeats to every row and K32 of its block): the four K32
    MMAs chain on one partial and one FMA per K128 applies the scale of K32 0, as for FP4. ``nslab`` (FP4 only): the
    warpgroup's slabs in this call, 1 with ``Role2GemmConfig.slab_passes = 2``: a step's words are then that slab's
    8 code words and 2 scale words, one wgmma per K32, ``acc`` holds that slab's BM / 2 values. ``decode=False``
    (FP4, the timing probe ``Role2GemmConfig.dev_no_decode``): the raw code words are the A registers.
    ``turns`` (``Role2GemmConfig.pingpong``; one token scale per K128 without slab groups): ``(take, hand_over)``;
    each K128 step's A fragments are decoded first, then ``take()`` waits for this warpgroup's turn, the step's
    wgmmas are issued and committed behind one fence, and ``hand_over(step)`` gives the turn to the other warpgroup, so
    the two warpgroups' bursts alternate on the tensor pipe while the other decodes and promotes. ``mma_n`` (default
    ``bm``; a multiple of 8 up to ``bm``): the wgmmas' N — a block of at most ``mma_n`` tokens in a BM-wide chunk and
    accumulator (``Role2RingConfig.narrow_n``): only the first ``mma_n // 2`` values of each slab's ``acc`` are
    promoted (the rest keep what they hold) and the steps' token scales are read for ``mma_n`` tokens.
    ``k_interleave_tig`` (``Role2GemmConfig.k_interleave``; None: the plain K order): the thread's ``lane % 4`` (an
    Int32), the K32 block all four of its K32 slices come from; a step's words then hold one scale word per slab
    (:func:`_read_k128_stage`) and each slab's table pair is built once per step from its bytes ``2t``, ``2t + 1``.
    ``scales_before_wait`` (``Role2GemmConfig.scales_before_wait``; chained per K128, drained steps): a step's token
    (and weight) scales are loaded before its ``wgmma.wait_group``, so their shared-memory latency runs under its MMAs
    instead of after them; the FMAs and their order are unchanged (bit-identical outputs). ``words_ahead``
    (``Role2GemmConfig.dev_words_ahead``, chained per K128): the next step of this call waits for its stage and loads
    its words right after this step's MMAs are issued, before this step's promote. ``promote_fmas=False`` (chained per
    K128; the timing probe :mod:`.kloop_probe` only): each step's MMAs are waited for and only the first value of each
    slab's partial is added (ptxas drops a wgmma none of whose outputs is read), so the outputs are meaningless and the
    time is the step's without its promote FMAs.

    Chained per K128 (with or without slab groups), a step's (a slab group's) four K32 A fragments are decoded first
    and one ``wgmma.fence`` precedes its wgmmas: a fence orders every earlier register write of the warp, and the A
    registers stay live until the group's wait either way. A fence per K32 held the warps at ``WARPGROUP.ARRIVE``
    (10-12 % of the two-CTA BM 32 form's stall samples, session 27; session 28 call B)."""
    if not overlap and len(steps) > 1:
        for step in steps:
            _mma_k128_steps([step], acc, act_smem, bm, lag, a_regs, scale_word, fold, prescaled=prescaled,
                            sw128=sw128, slab_groups=slab_groups, block_k128=block_k128, nslab=nslab, mma_n=mma_n,
                            scales_before_wait=scales_before_wait)
        return
    nd = bm // 2  # the accumulator's values per slab (its layout), whatever N the wgmmas run at
    mn = bm if mma_n is None else mma_n
    if mn % 8 or not 8 <= mn <= bm:
        raise ValueError(f"_mma_k128_steps mma_n: a multiple of 8 in [8, bm={bm}] (got {mn})")
    nv = mn // 2  # values each wgmma writes per slab
    per_k128 = (block_k128 if a_regs is not None else fold) and steps[0].ascl.group == 128
    if turns is not None and not (per_k128 and not slab_groups):
        raise ValueError("_mma_k128_steps turns: the per-K128 chain without slab groups only")
    if not promote_fmas and not (per_k128 and not slab_groups):
        raise ValueError("_mma_k128_steps promote_fmas=False: the per-K128 chain without slab groups only")
    r0 = (Int32(FOLD_LUT_WORDS[0]), Int32(FOLD_LUT_WORDS[1]))
    il = k_interleave_tig is not None
    if il and not (fold and decode and a_regs is None):
        raise ValueError("_mma_k128_steps k_interleave_tig: the folded FP4 decode only")
    # the interleaved tables' byte selectors (rows g, g + 8 of the thread's K32 block) and, per (step, slab), the
    # table pairs built at the step's first decode (trace-time cache: a step's K32 slices are decoded in one block)
    sels = [byte_selector((k_interleave_tig & 1) * 2 + hh) for hh in range(2)] if il else None
    luts_of = {}

    def slab_luts(step, q, sl):
        words = step.words
        if not il:
            sw = words[8 * nslab + sl * 2 + q // 2]
            return [fold_lut(byte_of(sw, (q % 2) * 2 + hh)) if fold else r0 for hh in range(2)]
        if (id(step), sl) not in luts_of:
            luts_of[(id(step), sl)] = [fold_lut(byte_at(words[8 * nslab + sl], sels[hh])) for hh in range(2)]
        return luts_of[(id(step), sl)]

    def slab_regs(step, q, sl):  # the 4 A registers of slab ``sl``, K32 ``q``: its codes through the folded table
        words = step.words
        if const_expr(not decode):
            return [words[sl * 8 + 2 * q + (r & 1)] for r in range(4)]
        luts = slab_luts(step, q, sl)
        a = []
        for r in range(2):
            lo, hi = decode_fp4x8_e4m3(words[sl * 8 + 2 * q + r], luts[0], luts[1])
            a.append(lo)
            a.append(hi)
        return a

    def regs(step, q):
        if a_regs is not None:
            return a_regs(step, q)
        return [r for sl in range(nslab) for r in slab_regs(step, q, sl)]

    def mark(step, event: str):  # Role2GemmConfig.step_stamps (dev): trace-time no-op without a stamp
        if step.stamp is not None:
            step.stamp(STAMP_EVENTS.index(event))

    d0s = {}  # id(step) -> its K32 0 descriptor (trace-time cache: the steps are unrolled, K32 0 comes first)

    def b_desc(step, q):
        """The B descriptor of ``step``'s K32 ``q``: K32 0's built once, then stepped (+2 in the 14-bit start address
        field per 32 bytes swizzled, ``2 * bm`` per core-matrix column unswizzled; the field never carries: shared
        addresses stay below 228 KB), not rebuilt per K32."""
        if id(step) not in d0s:
            d0s[id(step)] = (smem_desc_sw128(act_smem + step.kl128 * bm * 128) if sw128 else
                             smem_desc(act_smem + step.kl128 * 8 * bm * 16, bm * 16, 128))
        return d0s[id(step)] + Int64(q * (2 if sw128 else 2 * bm)) if q else d0s[id(step)]

    def issue(step, q):  # per-K32 groups: one fresh wgmma per slab behind its own fence (its A just decoded)
        a = regs(step, q)
        desc = b_desc(step, q)
        wgmma_fence()
        return tuple(wgmma_rs_e4m3(mn, a[4 * sl:4 * sl + 4], desc, None) for sl in range(nslab))

    def issue_step(step):
        """A chained step: its four K32 A fragments decoded, then (``turns``: in this warpgroup's turn) its wgmmas
        behind one fence (:func:`b_desc`'s stepped descriptors), committed; the stage is released after K32
        ``release_q``'s wgmma (``turns``: after the burst, once the turn is handed over)."""
        mark(step, "start")
        if step.stamp is not None:
            step.words  # the stage wait and loads first, so the next stamp closes them
            mark(step, "stage_ready")
        b_desc(step, 0)  # K32 0's descriptor ahead of the decode, where the turns have always built it
        a4 = [regs(step, q) for q in range(4)]
        mark(step, "decoded")
        if turns is not None:
            turns[0]()
            mark(step, "turn")
        wgmma_fence()
        parts = (None,) * nslab
        for q in range(4):
            d = b_desc(step, q)
            parts = tuple(wgmma_rs_e4m3(mn, a4[q][4 * sl:4 * sl + 4], d, parts[sl]) for sl in range(nslab))
            if turns is None and q == step.release_q and step.release is not None:
                step.release()
        wgmma_commit()
        if turns is not None:
            turns[1](step)
            if step.release is not None:
                step.release()
        mark(step, "issued")
        return parts

    def folded(ts):  # the token scales times the decode's 2**FOLD_LOG2, unless staging already applied it
        return ts if prescaled else [v * FOLD_SCALE for v in ts]

    def block_scales(step, q):  # the UE8M0 weight scales of K32 ``q``'s rows (slab 0 row halves, slab 1): FP32
        rs = []
        for sl in range(2):
            sw = step.words[scale_word + sl * 2 + q // 2]
            for hh in range(2):
                b = (sw >> (8 * ((q % 2) * 2 + hh))) & 0xFF
                # the stored byte 133 + r is 2**(r+6): role4's FP8 wants that, the r = 0 FP4 table 2**(r+5)
                rs.append(ue8m0_to_f32(b if a_regs is not None else b - 1))
        return rs

    def fma(parts, tsc, rs=None):
        for i in range(nv):
            ts = tsc[(i >> 2) * 2 + (i & 1)]
            hrow = (i >> 1) & 1
            sc = [ts if rs is None else rs[2 * sl + hrow] * ts for sl in range(nslab)]
            for sl in range(nslab):
                acc[sl * nd + i] = acc[sl * nd + i] + fence_f32(parts[sl][i]) * sc[sl]

    if per_k128 and slab_groups:
        # Groups in the order (step 0, slab 0), (step 0, slab 1), (step 1, slab 0), ...: before a group is issued,
        # the oldest pending group is waited for and promoted once ``slab_groups`` are pending. At 2 the group two
        # back (the same slab, one step earlier) is promoted while the other slab's stays in flight: the tensor
        # cores hold one slab's K128 chain while the warp promotes and decodes the other, with one partial set (two
        # slabs) live, not two. At 1 each group is drained before the next is decoded: one slab's partial and A
        # registers live (the other warps on the scheduler fill the tensor pipe: two CTAs per SM).
        pend = []  # (slab, partial, step) of the groups issued and not yet promoted, oldest first

        def promote_slab(pending: int):
            sl, p, step = pend.pop(0)
            wgmma_wait(pending)
            tsc = folded(step.ascl[0])
            for i in range(nv):
                acc[sl * nd + i] = acc[sl * nd + i] + fence_f32(p[i]) * tsc[(i >> 2) * 2 + (i & 1)]

        for step in steps:
            for sl in range(2):
                if len(pend) == slab_groups:
                    promote_slab(slab_groups - 1)
                p = None
                a4 = [slab_regs(step, q, sl) for q in range(4)]
                wgmma_fence()
                for q in range(4):
                    p = wgmma_rs_e4m3(mn, a4[q], b_desc(step, q), p)
                    if sl == 1 and q == step.release_q and step.release is not None:
                        step.release()  # slab 1's decode of K32 release_q: every shared load consumed
                wgmma_commit()
                pend.append((sl, p, step))
            if step.issued is not None:
                step.issued()
        while pend:
            promote_slab(len(pend) - 1)
        return
    if per_k128:
        def step_scales(step):  # (token scales, weight block scales or None: FP4's are folded into the decode)
            return (folded(step.ascl[0]), None) if a_regs is None else (step.ascl[0], block_scales(step, 0))

        def promote(done, pending: int):
            parts, step = done
            early = step_scales(step) if scales_before_wait else None  # their latency runs under the step's MMAs
            wgmma_wait(pending)
            mark(step, "mma_done")
            if promote_fmas:
                fma(parts, *(early or step_scales(step)))
            else:
                for sl in range(nslab):
                    acc[sl * nd] = acc[sl * nd] + fence_f32(parts[sl][0])
            mark(step, "promoted")

        done = None  # (partials, step) of the previous step, its group still pending
        for i, step in enumerate(steps):
            parts = issue_step(step)
            if step.issued is not None:
                step.issued()
            if words_ahead and i + 1 < len(steps):
                steps[i + 1].words  # its stage wait and loads, emitted here: under this step's MMAs
            if done is not None:
                promote(done, 1)
            done = (parts, step)
            if lag == 0:  # no room for a second partial set (BM 64): drain each step
                promote(done, 0)
                done = None
        if done is not None:
            promote(done, 0)
        return
    # one group per K32 unit u = 4 * step + q; ``lag`` units stay in flight while unit u - lag is promoted
    # (lag + 1 partial sets live): the MMAs of unit u overlap the scale FMAs of u - lag.
    n = 4 * len(steps)
    parts = [None] * n
    for u in range(n + lag):
        if u < n:
            parts[u] = issue(steps[u // 4], u % 4)
            if u % 4 == steps[u // 4].release_q and steps[u // 4].release is not None and a_regs is None and fold:
                steps[u // 4].release()
            wgmma_commit()
            if u % 4 == 3 and steps[u // 4].issued is not None:
                steps[u // 4].issued()
        if u >= lag:
            p = u - lag
            wgmma_wait(min(u, n - 1) - p)  # groups newer than p that may stay pending
            step, q = steps[p // 4], p % 4
            if a_regs is None and fold:
                fma(parts[p], folded(step.ascl[q]))
            else:
                rs = block_scales(step, q)  # before the token scales' loads: the order the shipped builds have
                fma(parts[p], step.ascl[q], rs)
                if q == 3 and step.release is not None:  # its scale words were read until now
                    step.release()


def pingpong_turns(wg):
    """:func:`_mma_k128_steps`' ``turns`` of consumer warpgroup ``wg`` (``Role2GemmConfig.pingpong``): wait at its own
    barrier of :data:`PINGPONG_BARS`, hand the turn over by arriving at the other's. Warpgroup 1 skips its hand-over
    at a step whose :attr:`K128Step.final` is 1 (predicated, no branch): after :func:`pingpong_open`'s first turn
    that leaves both barriers balanced at exit without :func:`pingpong_close`."""
    mine = Int32(PINGPONG_BARS[0]) + wg
    other = Int32(PINGPONG_BARS[1]) - wg

    def hand_over(step):
        bar_arrive(other, CONSUMER_THREADS, None if step.final is None else 1 - Int32(wg == 1) * step.final)

    return (lambda: bar_sync(mine, CONSUMER_THREADS), hand_over)


def pingpong_open(wg, has_work=None):
    """Before a consumer's first task (``Role2GemmConfig.pingpong``): warpgroup 1 hands warpgroup 0 the first turn
    (``has_work``, an Int32: only when the consumer has a step to run, for a kernel that closes by
    :attr:`K128Step.final` instead of :func:`pingpong_close`). Predicated, not branched on ``wg``."""
    bar_arrive(PINGPONG_BARS[0], CONSUMER_THREADS, Int32(wg == 1) if has_work is None else Int32(wg == 1) * has_work)


@cute.jit
def pingpong_close(wg):
    """After a consumer's last task: both warpgroups issued the same bursts, so warpgroup 1's last hand-over is still
    open on warpgroup 0's barrier; warpgroup 0 completes it, so no named barrier is left mid-phase at exit. (The
    ring closes by :attr:`K128Step.final` instead: any barrier after its task loop, even a branch-free one, took its
    K loops off the uniform datapath — session 35.)"""
    if wg == 0:
        bar_sync(Int32(PINGPONG_BARS[0]), CONSUMER_THREADS)
