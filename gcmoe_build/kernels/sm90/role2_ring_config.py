"""The registered role2's host side (:mod:`.role2_ring` is its kernel; the protocol is described there): the
parameter ABI and trap codes, :class:`Role2RingConfig` (a variant's validated shape and the GEMM configurations its
two task kinds run), the per-build rules that choose each tile's options (``*_build``: the signal warp, slab groups,
turns, the narrow N, the shared K loop, steps per MMA call, the W1 split) and the host mirrors of the kernel's
per-replay rules (task claims, CTA placement, the first-W1 prefetch search, the ring counters' targets, the W1 split),
which the CPU protocol models in ``tests/build/kernels/sm90`` run against role1's and role3's. Plain Python: no DSL.
"""
import dataclasses

from gcmoe_runtime.heuristics import (SM90_NARROW_PASS, SM90_PIPELINED_TWO_CTAS_MAX_BM, SM90_TWO_CTAS_MAX_BM, W1_SPLIT,
                                      W1_SPLIT_BM, W1_SPLIT_MAX_BLOCKS, sm90_ctas_per_sm)

from .role_common import int_param, peer_abi_plan, peer_scope

ROLE = "role2"
NAME_PREFIX = "gcmoe_sm90_role2_ring"
RECIPE = "e4m3-fp32k128_x_mxfp4"

#: trap codes (gcmoe_runtime.workspace.trap.TRAP_CODES)
CODE_L1_FULL = 2
CODE_L2_MASK = 9
CODE_L2_EMPTY = 10
CODE_HEADER = 11
CODE_RECV = 12
CODE_STAGE = 13

#: Claims run only in a replay with at least this many tasks per CTA (role2_ring's doc, "Dynamic tasks"; host
#: mirror :func:`claims_run`). Session 40 (calls A, C, D; role2 in the layer, claims against the static split):
#: +1.3..+13 % at 1.6-2.8 tasks per CTA (every CTA claims in the same one or two waves on one contended ticket,
#: with little to balance), -2.0 / -4.4 % at 3.3 / 3.4, +0.4 % at 5.0, -0.7..-6.1 % at 7-9. Session 41 call A: from 5
#: instead, +3.1..+3.6 % at 3.4-4.5 tasks per CTA (-2.6 % at 3.1); from 0, the DSV-4.1-Flash share +14 % at 2.8.
CLAIM_MIN_TASKS_PER_CTA = 3

#: Where claims run, a CTA's first this many tasks are still the static split's (``c, c + G``) and only later ones are
#: claimed (task ``STATIC_ROUNDS * G + old``). Why: with two CTAs per SM a W1 task beside another W1 task runs ~40 %
#: longer than beside a W2 task or an idle sibling (session 41 call A, traces of the DSV-4.1-Flash share at T = 4: 45
#: against 32 µs); the static split puts the second round's W1 tasks on CTAs ``0 ..``, one per SM, where claims hand
#: them to whichever CTAs ask first, often both of one SM (21 of 65 SMs). Session 41 calls A and C (role2 in the layer,
#: against claims from the second task): the GLM-5.2 rank share -3.7 / -2.0 / -0.9 % at T = 4 / 8 / 16 (3.1-5.0 tasks
#: per CTA), the DSV-4.1-Flash share and P = 1 GLM-5.2 within +-1.1 %, P = 1 DSV-4.1-Flash T = 4 +1.4 / +1.6 %.
STATIC_ROUNDS = 2

#: by-value u64 region offsets, in parameter order (names = layout regions with an ``o_`` prefix)
OFFSET_PARAMS = ("ring_x", "ring_sf", "ring_meta", "ring_block", "l2_x", "l2_sf", "l1_full_count",
                 "l1_empty_count", "l2_full_mask", "l2_empty_count", "recv_count", "recv_parity", "combine",
                 "act_maps", "w1_split_count", "w1_partials", "role2_trace", "role2_ticket", "role2_place", "topk_idx")
#: transformed routed weights (``gcmoe_runtime.moe.GcMoeWeights``: tiles, scales, expert factor)
WEIGHT_PARAMS = ("w1_tiles", "w1_scales", "w1_factor", "w2_tiles", "w2_scales", "w2_factor")
SCALAR_PARAMS_U64 = ("err", "timeout_ns")
#: ``place_ctas`` (two-CTA builds: ``heuristics.PLACE_CTAS_*``, nonzero = take the CTA index from where it runs, 2 =
#: with the late start count; role2_ring's doc "Placement");
#: ``w1_prefetch_steps`` (builds up to ``heuristics.SM90_W1_PREFETCH_MAX_BM``: K128 steps of the first W1 task brought
#: into L2 before its block is full, 0 = none; role2_ring's doc "First weights to L2"); ``ntok``: the rank's tokens
#: (that prefetch reads their ``topk_idx``)
SCALAR_PARAMS_S32 = ("ring_blocks", "bm_stride", "sf_stride", "place_ctas", "w1_prefetch_steps", "ntok")

#: ``{scope}``: the receive counts' acquire at the protocol's scope (``role_common.peer_scope``)
REQUIRED_PTX = ("wgmma.mma_async.sync.aligned", "ld.acquire.gpu.global.u32", "ld.acquire.gpu.global.u64",
                "ld.acquire.{scope}.global.u64", "red.release.gpu.global.or.b64", "red.release.gpu.global.add.u32",
                "atom.release.gpu.global.add.u32", "st.global.v4.u32", "trap")


def l2_empty_target(gen, nt2):
    """``l2_empty_count`` value at which generation ``gen`` of a ring block may be (re)used by W1/W2 of ``gen``:
    every generation adds 1 per W2 task plus 1 when its last W2 task has cleared the W1 bitmap."""
    return (nt2 + 1) * gen


def last_w2_old(gen, nt2):
    """The ``atom.add`` return value that identifies the last W2 task of generation ``gen``."""
    return (nt2 + 1) * gen + (nt2 - 1)


def claimed_task(old, ncta, ntasks):
    """Host mirror of the producer thread's claim (``next_task_of``, role2_ring's doc "Dynamic tasks"): the task a
    claim that read ``old`` from ``role2_ticket`` takes, ``STATIC_ROUNDS * ncta + old``, or -1 (the CTA's last
    claim: no task left)."""
    t = STATIC_ROUNDS * ncta + old
    return t if t < ntasks else -1


def placed_cta(first_on_sm, rank_in_class, ncta):
    """Host mirror of a two-CTA build's logical CTA index (role2_ring's doc, "Placement"): class 0 (the first CTA
    counted in on its SM) takes ``u = rank_in_class`` from the bottom, class 1 ``u = ncta - 1 - rank_in_class`` from the
    top (a permutation whatever the class sizes), then the upper half is reversed, ``u -> ncta - 1 + ncta // 2 - u``
    (a permutation of the upper half): with ``ncta / 2`` CTAs in each class, the SM whose two CTAs were the ``k``-th
    of their classes holds indices ``k`` and ``ncta / 2 + k``, the launch's own pairing."""
    u = rank_in_class if first_on_sm else ncta - 1 - rank_in_class
    h = ncta // 2
    return u if u < h else ncta - 1 + h - u


def prefetch_search(topk_ids, num_experts, bm, q):
    """Host mirror of the prefetch warp's search (role2_ring's doc, "First weights to L2"; the device function
    ``prefetch_first_w1`` line for line): ``(expert, blocks)`` — the expert whose pool blocks hold block ``q`` (-1 if
    none) and the replay's pool block count — from the rank's routed slots ``topk_ids`` (at most 32; an id outside
    ``0 .. num_experts - 1`` is a dropped slot), numbered as role1 will (``gcmoe_runtime.operator.ring.pool_blocks``:
    each expert's ``ceil(tokens / BM)`` blocks in expert order). One slot per lane; each lane counts the lanes with its
    expert and the lowest of them keeps the expert's blocks; a lane's first block is the blocks of every lower
    expert."""
    n = len(topk_ids)
    if n > 32:
        raise ValueError(f"prefetch_search: {n} routed slots, at most 32 fit the warp")
    e = [topk_ids[lane] if lane < n and 0 <= topk_ids[lane] < num_experts else num_experts for lane in range(32)]
    valid = [lane < n and e[lane] < num_experts for lane in range(32)]
    nb = []
    for lane in range(32):
        same = sum(e[j] == e[lane] for j in range(32))
        below = sum(e[j] == e[lane] and j < lane for j in range(32))
        nb.append((same + bm - 1) // bm if valid[lane] and below == 0 else 0)
    blocks = sum(nb)
    for lane in range(32):
        first = sum(nb[j] for j in range(32) if e[j] < e[lane])
        if nb[lane] and first <= q < first + nb[lane]:
            return e[lane], blocks
    return -1, blocks


def claims_run(srun, ntasks, ncta):
    """Host mirror of the producer's ``CLAIMS_OFF`` word: whether this replay's producers claim their tasks after
    the first (not in a W1 split replay, nor with fewer than :data:`CLAIM_MIN_TASKS_PER_CTA` tasks per CTA: the
    static split then)."""
    return srun == 1 and ntasks >= CLAIM_MIN_TASKS_PER_CTA * ncta


def claim_zeroes_ticket(old, ntasks, ncta):
    """Host mirror: whether the claim that read ``old`` is the launch's last (``ntasks - (STATIC_ROUNDS - 1) *
    ncta`` claims per launch: every CTA with a ``STATIC_ROUNDS``-th static task claims until one fails), which
    stores 0 for the next launch."""
    return old == ntasks - (STATIC_ROUNDS - 1) * ncta - 1


def signal_warp_build(pipelined, bm, ctas_per_sm):
    """Whether a ring build's releases run on the signal warp (role2_ring's doc): the 384-thread builds at two CTAs
    per SM and at BM >= 32, where the layer measured -2..-7 % (session 13 call D, T = 4-256, both production
    shapes, three alternating runs per arm); the one-CTA BM 8 / 16 builds (the heuristic's T = 1-2) keep consumer
    thread 0's release: GLM-5.2 T = 1 ran 3.9 % slower with it in every window (T = 2 and DSV-4.1-Flash T = 1
    neutral), a latency effect the kernel-alone bench does not show (`_ppks` BM 8 -0..-4 %)."""
    return bool(pipelined) and (ctas_per_sm == 2 or bm >= 32)


def slab_groups_build(pipelined, bm, ctas_per_sm):
    """``Role2GemmConfig.slab_groups`` of a ring build: 1 for the 384-thread two-CTA builds above BM 16 (their
    accumulators and a per-step group's partials and A registers do not fit 104 registers; one slab's do), else 0:
    the BM 8 / 16 two-CTA builds measured the same either way (+-1 %, session 15 call C) and the one-CTA builds keep
    lag 1's whole-step overlap (two groups in flight measured -0.3..-2 % at BM 64, call A: not worth a change)."""
    return 1 if pipelined and ctas_per_sm == 2 and bm > 16 else 0


def pingpong_build(pipelined, bm, ctas_per_sm):
    """``Role2GemmConfig.pingpong`` of a ring build: the 384-thread one-CTA BM 64 and BM 80 builds (lag 0: their
    second partial set does not fit), whose two consumer warpgroups otherwise decode, wait and promote in lockstep
    (BM 64 kernel alone W1 -4..-14 %, W2 -3..-10 %: session 26 calls A-B); the one-CTA BM 8-32 builds measured
    -4..+3 % and the two-CTA builds -3..+2 % with turns (call A): no change."""
    return bool(pipelined) and ctas_per_sm == 1 and bm >= 64


def narrow_n_build(pipelined, bm, ctas_per_sm):
    """The narrower wgmma N of a ring build's W1 K loop (``Role2RingConfig.narrow_n``; 0: none): the 384-thread
    one-CTA builds that :data:`heuristics.SM90_NARROW_PASS` gives one (BM 80: 64, BM 64: 48, BM 48: 32). A W1 task of
    a block with at most that many tokens runs a second copy of the K loop at that N — one branch per task on the
    block's token count (every consumer thread reads it from the same task record), the chunks, accumulators and
    epilogue those of BM (columns N..BM keep the zeros the task starts with) — so an expert of <= 64 tokens in the BM
    80 build pays BM 64's MMAs and promotes for two thirds of its weights (kernel alone BM 80 at 64 tokens ran at 51 %
    of the read bandwidth, BM 64 at 58 %: session 35 call E), one of <= 48 in the BM 64 build N = 48's, one of <= 32
    in the BM 48 build (lag 1, four steps per call, kept) N = 32's. W1 only: a second copy of W2's loop too (four K
    loops) took all four off the uniform datapath (every wgmma descriptor through ``R2UR``, 32 per K256; GLM-5.2 BM
    80: W1 n64 640 -> 673, n80 676 -> 710 instructions per K256; session 36), as session 35's barrier after the task
    loop did."""
    narrow = SM90_NARROW_PASS.get(bm)
    return narrow[0] if narrow is not None and pipelined and ctas_per_sm == 1 else 0


def shared_loop_build(narrow_n, w1, w2):
    """Whether a ring build's W1 and W2 tasks share one K loop per wgmma N (role2_ring's doc, "Shared K loop"): the
    builds with a narrow N (:func:`narrow_n_build`) whose two GEMM configurations differ only in their shapes (K,
    rows, the activation): the same K chunk, steps per call, lag, turns and staging, so a task's GEMM changes only
    its chunk count, its tensor map and where its activation scales are read. Else (DSV-4.1-Flash's BM 48, whose W2
    chunk is K256 beside W1's K512; the test model's BM 64) W1 has its narrow loop and W2 runs at BM."""
    if not narrow_n:
        return False
    shape = dict(mode="w1", k=w1.k, rows=w1.rows, alpha=w1.alpha, clamp=w1.clamp, fast_math=w1.fast_math)
    return w1.act_tma and w1.kc == w2.kc and dataclasses.replace(w2, **shape) == w1


def steps_per_call_build(cfg):
    """``Role2GemmConfig.mma_steps_per_call`` of a ring GEMM ``cfg``: 4 — one tensor-core drain per K512 instead of per
    K256 — for the pipelined builds that keep a step's MMAs in flight under the next step's decode (``cfg.lag`` 1: the
    384-thread one-CTA BM 8-48 builds), whose every K256 call otherwise ends in a full drain (session 34's stamps: BM
    48's steps alternate ~880 / ~1 690 cycles); where the K chunk holds whole K512s. 2 elsewhere: at lag 0 (BM 64 / 80,
    the two-CTA builds) every step drains anyway."""
    return 4 if cfg.pipelined and cfg.lag == 1 and cfg.kc % 512 == 0 else 2


def w1_split_build(pipelined, bm, ctas_per_sm, w1_chunks):
    """The W1 split a build may have (role2_ring's doc, "W1 split-K"; the variant parameter ``w1_split``, which
    ``heuristics.sm90_w1_split`` picks): ``heuristics.W1_SPLIT`` for the 384-thread two-CTA BM 8 build, whose T = 1
    replays (P = 1: 128 / 108 W1 tiles for 256 CTAs) left half its CTAs without a W1 task, when its W1 activation
    chunks divide evenly; else 1 (no split code at all)."""
    ok = pipelined and ctas_per_sm == 2 and bm == W1_SPLIT_BM and w1_chunks % W1_SPLIT == 0
    return W1_SPLIT if ok else 1


def w1_split_runs(split, nq, nt1, ctas, ring_blocks):
    """Host mirror of the kernel's per-replay rule: the W1 split a replay of ``nq`` pool blocks runs: the build's
    ``split`` when its W1 tiles x split fit the grid's ``ctas``, in one ring generation of at most
    ``heuristics.W1_SPLIT_MAX_BLOCKS`` blocks (the partials region); else 1."""
    on = split > 1 and nq * nt1 * split <= ctas and nq <= ring_blocks and nq <= W1_SPLIT_MAX_BLOCKS
    return split if on else 1


def _align(n, a):
    return (n + a - 1) // a * a


class Role2RingConfig:
    """Compile-time shape of one role2 variant (validated; errors name the field and the limit)."""

    def __init__(self, params):
        from .role2_config import EPILOGUE_WG_BM, Role2GemmConfig

        p = dict(params)

        def need(name, minimum=1):
            return int_param(p, name, "role2", minimum)

        self.hidden, self.inter, self.experts = need("hidden"), need("intermediate"), need("experts")
        self.topk, self.ranks, self.capacity = need("top_k"), need("ranks"), need("capacity")
        self.bm, self.threads, self.dispatch_sms = need("bm"), need("threads"), need("dispatch_sms")
        if p.get("activation", "swiglu") != "swiglu":
            raise ValueError(f"role2: activation={p.get('activation')!r}; only 'swiglu' is built")
        if p.get("recipe_routed", RECIPE) != RECIPE:
            raise ValueError(f"role2 (sm_90a): recipe_routed={p.get('recipe_routed')!r}; built: {RECIPE!r}")
        if self.threads not in (256, 384):
            raise ValueError(f"role2: threads={self.threads} must be 256 (register weight stream) or 384 "
                             "(producer warpgroup + bulk-copy stages)")
        if self.experts % self.ranks:
            raise ValueError(f"role2: experts={self.experts} not divisible by ranks={self.ranks}")
        if self.topk + 1 > 32:
            raise ValueError(f"role2: top_k={self.topk}: k + 1 must be <= 32 (combine slots)")
        if 2 * self.inter // 128 > 64:
            raise ValueError(f"role2: intermediate={self.inter} gives 2I/128 > 64 W1 tiles (64-bit l2_full_mask)")
        self.alpha = float(p.get("act_alpha", 1.0))
        self.clamp = float(p.get("act_clamp", 10.0))
        self.fast_math = bool(p.get("act_fast_math", False))
        pipe = self.threads == 384
        #: CTAs per SM (role2_ring's doc, "Occupancy"): the variant's ``ctas_per_sm``, else the tile's default build
        self.ctas_per_sm = int(p.get("ctas_per_sm", sm90_ctas_per_sm(self.bm, self.threads)))
        two_max = SM90_PIPELINED_TWO_CTAS_MAX_BM if pipe else SM90_TWO_CTAS_MAX_BM
        if self.ctas_per_sm not in (1, 2) or (self.ctas_per_sm == 2 and self.bm > two_max):
            raise ValueError(f"role2: ctas_per_sm={self.ctas_per_sm} must be 1, or 2 with bm <= {two_max} at "
                             f"threads={self.threads} (got bm={self.bm})")
        if not pipe and self.ctas_per_sm != sm90_ctas_per_sm(self.bm, self.threads):
            raise ValueError(f"role2: ctas_per_sm={self.ctas_per_sm}: the 256-thread BM {self.bm} tile is built "
                             f"for {sm90_ctas_per_sm(self.bm, self.threads)} CTA(s) per SM only")
        # the two GEMMs' checked shapes (K multiple of 256, rows multiple of 256, BM in {8,16,32,64})
        # pipelined builds prefetch the next activation chunk while multiplying the current one (act_buffers=2):
        # W1 and W2 both (session 9, calls E-F: W1 alone was 0.3-1.9 % slower in the layer, though W2's two
        # buffers look 2-8 % slower kernel alone)
        nbuf = 2 if pipe else 1
        # ... and apply the promote's 2**FOLD_LOG2 when they stage the token scales (session 12 call J: kernel alone
        # BM 32 / 64 -0.6..-3.5 %, BM 8 / 16 +-1.5 %); their releases run on the signal warp (role2_ring's doc)
        # ... and their chunks come by tensor map (session 14: kernel alone -4..-25 % from BM 16 up)
        ewg = p.get("epilogue_wg", 0)
        if isinstance(ewg, bool) or ewg not in (0, 1):
            raise ValueError(f"role2: variant param epilogue_wg={ewg!r} must be 0 or 1")
        if ewg and not (pipe and self.ctas_per_sm == 1 and self.bm in EPILOGUE_WG_BM):
            raise ValueError(f"role2: epilogue_wg=1 needs threads=384, ctas_per_sm=1 and bm in {EPILOGUE_WG_BM} (got "
                             f"threads={self.threads}, ctas_per_sm={self.ctas_per_sm}, bm={self.bm})")
        #: the epilogue warpgroup (variant param ``epilogue_wg``, ``heuristics.sm90_epilogue_wg``; role2_ring's doc,
        #: "Epilogue warpgroup"): a fourth warpgroup runs the epilogues and the releases, so no signal warp
        self.epilogue_wg = bool(ewg)
        sig = signal_warp_build(pipe, self.bm, self.ctas_per_sm) and not self.epilogue_wg
        slabs = slab_groups_build(pipe, self.bm, self.ctas_per_sm)
        turns = pingpong_build(pipe, self.bm, self.ctas_per_sm)
        #: the routed tiles' K order (``Role2GemmConfig.k_interleave``; variant param ``k_interleave`` from the
        #: manifest target's ``k_interleave``: 1, this build permutes W1's chunks; 2, role1 wrote W1's ring rows
        #: interleaved, ``heuristics.sm90_role1_interleaves_rows``): the 384-thread builds only
        ki = p.get("k_interleave", 0)
        if isinstance(ki, bool) or ki not in (0, 1, 2):
            raise ValueError(f"role2: variant param k_interleave={ki!r} must be 0, 1 or 2")
        self.k_interleave = ki != 0
        self.w1_rows_interleaved = ki == 2
        if self.k_interleave and not pipe:
            raise ValueError(f"role2: k_interleave={ki} needs threads=384 (tensor-map activation chunks); got "
                             f"threads={self.threads}")
        self.w1 = Role2GemmConfig(mode="w1", k=self.hidden, rows=2 * self.inter, bm=self.bm, alpha=self.alpha,
                                  clamp=self.clamp, pipelined=pipe, ctas_per_sm=self.ctas_per_sm, act_buffers=nbuf,
                                  staged_fold_scale=pipe, signal_warp=sig, act_tma=pipe, slab_groups=slabs,
                                  pingpong=turns, producer_claims=pipe, k_interleave=self.k_interleave,
                                  w1_rows_interleaved=self.w1_rows_interleaved, epilogue_warpgroup=self.epilogue_wg)
        self.w2 = Role2GemmConfig(mode="w2", k=self.inter, rows=self.hidden, bm=self.bm, pipelined=pipe,
                                  ctas_per_sm=self.ctas_per_sm, act_buffers=nbuf, staged_fold_scale=pipe,
                                  signal_warp=sig, act_tma=pipe, slab_groups=slabs, pingpong=turns,
                                  producer_claims=pipe, k_interleave=self.k_interleave,
                                  w1_rows_interleaved=self.w1_rows_interleaved, epilogue_warpgroup=self.epilogue_wg)
        # ... and at lag 1 one drain per K512 (each GEMM by its own chunk)
        self.w1, self.w2 = (dataclasses.replace(c, mma_steps_per_call=steps_per_call_build(c))
                            for c in (self.w1, self.w2))
        #: the narrower wgmma N for blocks that fit it (:func:`narrow_n_build`; 0: one K loop at BM)
        self.narrow_n = narrow_n_build(pipe, self.bm, self.ctas_per_sm)
        #: one K loop per wgmma N serves both GEMMs (:func:`shared_loop_build`), so W2 has the narrow N too
        self.shared_loop = shared_loop_build(self.narrow_n, self.w1, self.w2)
        #: W1 tasks per W1 tile at small loads (role2_ring's doc, "W1 split-K"); the split's non-last tasks skip
        #: their release through the signal warp's record
        self.w1_split = int(p.get("w1_split", 1))
        can = w1_split_build(pipe, self.bm, self.ctas_per_sm, self.hidden // self.w1.kc)
        if turns and can > 1:  # the turns' last step (K128Step.final) is counted over a task's whole K
            raise ValueError("role2: the turns (pingpong_build) and a W1 split cannot share a build")
        if self.w1_split not in (1, can):
            raise ValueError(f"role2: w1_split={self.w1_split} must be 1, or {W1_SPLIT} for the 384-thread two-CTA BM "
                             f"{W1_SPLIT_BM} build whose W1 chunks divide by it (got threads={self.threads}, "
                             f"ctas_per_sm={self.ctas_per_sm}, bm={self.bm}, W1 chunks {self.hidden // self.w1.kc})")
        assert self.w1_split == 1 or sig, "role2: the W1 split needs the signal warp (its skipped releases)"

    @property
    def pipelined(self):
        return self.threads == 384

    @property
    def launch_threads(self):
        """The CTA's threads: the variant's ``threads``, plus the epilogue warpgroup's where it has one."""
        return self.w1.threads

    @property
    def experts_local(self):
        return self.experts // self.ranks

    @property
    def nt1(self):
        return self.w1.row_tiles

    @property
    def nt2(self):
        return self.w2.row_tiles

    def smem_offsets(self):
        from .role2_config import MAX_STAGES, STAGE_BYTES, handover_bytes, task_smem_offsets
        from .task_queue import TASK_SLOT_BYTES, task_slot_count

        bm = self.bm
        o = task_smem_offsets(self.w1, self.w2)
        misc = o.pop("misc")
        if not self.pipelined:
            o.update(stage=misc, bar=misc, stages=0, total=misc)
            return self._with_place_word(o)
        if self.epilogue_wg:  # its hand-over area (role2_handover), after the per-task areas
            o["handover"] = _align(misc, 16)
            misc = o["handover"] + handover_bytes(bm)
        stage = _align(misc, 1024)
        limit = self.w1.smem_limit
        min_nk = min(self.hidden, self.inter) // 128
        free = limit - stage - 2 * 8 * MAX_STAGES - task_slot_count(min_nk, MAX_STAGES) * TASK_SLOT_BYTES
        ns = max(2, min(MAX_STAGES, free // STAGE_BYTES))
        o.update(stage=stage, stages=ns, bar=stage + ns * STAGE_BYTES)
        # the task records (role2_ring's doc, "Task records")
        o.update(slots=o["bar"] + 2 * 8 * ns, nslots=task_slot_count(min_nk, ns))
        o["total"] = o["slots"] + o["nslots"] * TASK_SLOT_BYTES
        if self.w1.signal_warp:  # its two task coordinates records (role2_ring's doc, "Signal warp")
            o["sigrec"] = _align(o["total"], 16)
            o["total"] = o["sigrec"] + 2 * 16
        o = self._with_place_word(o)
        if o["total"] > limit:
            raise ValueError(f"role2: BM={bm} H={self.hidden} I={self.inter} needs {o['total']} B of shared "
                             f"memory > {limit} ({self.ctas_per_sm} CTA(s) per SM)")
        return o

    def _with_place_word(self, o):
        """The two-CTA builds' logical CTA index (role2_ring's doc, "Placement"), appended: nothing else moves."""
        if self.ctas_per_sm == 2:
            o["place"] = _align(o["total"], 16)
            o["total"] = o["place"] + 16
        return o

    @property
    def smem_bytes(self):
        return self.smem_offsets()["total"]


def abi_plan(ranks: int):
    scope = peer_scope(ranks)
    return peer_abi_plan(OFFSET_PARAMS, WEIGHT_PARAMS + SCALAR_PARAMS_U64, SCALAR_PARAMS_S32,
                         tuple(op.format(scope=scope) for op in REQUIRED_PTX))


def grid_rule(ctas_per_sm):
    """Launch grid rule: every CTA co-resident, ``ctas_per_sm`` on each compute SM (the graph checks the
    occupancy before it builds the node)."""
    return "compute_sms" if ctas_per_sm == 1 else f"compute_sms*{ctas_per_sm}"
