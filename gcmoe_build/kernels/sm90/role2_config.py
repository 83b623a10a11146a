"""What one SM90 role2 GEMM variant is: :class:`Role2GemmConfig` (the compile-time shape every role2 / role4 kernel
builder reads: BM, K, rows, thread-count variant, CTAs per SM, the shipped and dev options) and the CTA's fixed
layout — 256 weight rows of four 64-row slabs, two consumer warpgroups (:func:`_consumer_lane`), one producer
warpgroup, the weight stage's bytes, the named barriers, the ``setmaxnreg`` splits, the per-task shared-memory areas
(:func:`task_smem_offsets`). One place for these facts; the kernels' code lives in :mod:`.role2_mainloop` (the MMA
steps), :mod:`.role2_stages` (the weight stage ring), :mod:`.role2_chunks` (the activation chunks) and
:mod:`.role2_epilogue` (W1 / W2 epilogues).
"""
from __future__ import annotations

from dataclasses import dataclass

from gcmoe_runtime.numerics.recipes import SM90_INTERMEDIATE_SCALE_GROUP

from .role_common import SMEM_LIMIT
from .task_queue import TASK_SLOTS_BYTES

ROWS_PER_CTA = 256
CONSUMER_THREADS = 256  # two MMA warpgroups
PRODUCER_THREADS = 128  # pipelined variant: one producer warpgroup (one thread issues bulk copies)
#: persistent pipelined kernels with ``Role2GemmConfig.signal_warp``: the named barrier at which the consumers hand
#: a finished task to the signal warp (warp 1 of the producer warpgroup), over the consumers and that warp
SIGNAL_BAR = 2
SIGNAL_BAR_THREADS = CONSUMER_THREADS + 32
#: the signal warp's threads (warp 1 of the producer warpgroup; its lane 0 issues the releases)
SIGNAL_WARP_TIDS = (32, 64)
#: the named barriers of ``Role2GemmConfig.pingpong``: warpgroup w waits on PINGPONG_BARS[w] for its turn and hands
#: the turn over by arriving on the other's (0: every thread, 1: the consumers, SIGNAL_BAR: the signal warp's hand-over)
PINGPONG_BARS = (3, 4)
SUPPORTED_BM = (8, 16, 32, 48, 64, 80)
#: ``Role2GemmConfig.epilogue_warpgroup`` (dev): the epilogue warpgroup's threads (the CTA's last 128), its named
#: barrier, the BMs it is built for, and the ``setmaxnreg`` split of the four warpgroups (producer, each consumer,
#: epilogue): 128 * (24 + 2 * 216 + 56) = 512 * 128, the launch allocation at 512 threads. Session 60's SASS (GLM-5.2 /
#: DSV-4.1-Flash BM 64): the ring kernel's consumers spill 80-114 instructions at 200 (4-6 in its MMA loops, every
#: K-loop wgmma descriptor through R2UR), 17 outside the loops at 208, none at 216; its epilogue warpgroup (both
#: GEMMs' epilogues) spills 8 at 56 (off the K loop), the dev kernel's none; the producer thread uses <= 19. At 200 /
#: 216 the dev kernel's BM 32 / 64 loops are spill-free; BM 48's lag-1 loops (two partial sets) spill 40-54 / 4
#: instructions each and run 510 instructions instead of 480, so BM 48 is not built.
EPILOGUE_THREADS = 128
EPILOGUE_BAR = 5
EPILOGUE_WG_BM = (32, 64)
PRODUCER_REGS_EPI, CONSUMER_REGS_EPI, EPILOGUE_REGS = 24, 216, 56
#: u32 words of task fields an epilogue warpgroup's hand-over carries (:mod:`.role2_handover`; the kernel's choice of
#: what its epilogue needs; field 0 < 0 is the end marker)
HANDOVER_FIELDS = 8


def handover_bytes(bm: int) -> int:
    """Shared-memory bytes of the epilogue warpgroup's hand-over area (:mod:`.role2_handover`): the data (``bm / 2``
    BF16 pairs per consumer thread = W2's ``[bm][256]`` BF16 staging), its two mbarriers, the task fields."""
    return 512 * bm + 16 + 4 * HANDOVER_FIELDS


#: one 64-row slab's share of a K128 weight stage: its packed codes (4 KB) + UE8M0 scales (256 B)
SLAB_STAGE_BYTES = 4096 + 256
STAGE_BYTES = 4 * SLAB_STAGE_BYTES  # one K128 step of a CTA's four slabs: packed codes of 256 rows + their scales
MAX_STAGES = 8
#: the W1 epilogue's UE8M0 scale group along I = W2's activation scale group (numerics reference step 4, Hopper):
#: a 256-row W1 task is exactly one group (128 I-columns), which the epilogue and W2's chained mainloop rely on
L2_SCALE_GROUP = SM90_INTERMEDIATE_SCALE_GROUP
assert L2_SCALE_GROUP == 128, L2_SCALE_GROUP
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # setmaxnreg split: 128*40 + 256*232 <= 384 * 168 (see launch_regs)
#: ... and from BM 48 (their accumulators and partials want the registers): 128*24 + 256*240, the same total. The
#: consumers' K loops spill less (GLM-5.2 BM 48 6 / 6 -> 2 / 0 instructions per K512 loop), the producer thread spills
#: 9 around its stage loop; role2 in the layer -1.2..-2.3 % at BM 48-80, but +1.9 % at BM 8 (session 35 call F)
WIDE_CONSUMER_MIN_BM, PRODUCER_REGS_WIDE, CONSUMER_REGS_WIDE = 48, 24, 240
#: ... but a turns build (BM 64 / 80, ``pingpong``) whose producer claims tasks (``producer_claims``) gives the
#: producer 32 (128*32 + 256*232 < 384 * 168): at 24 the claim took both consumer K loops off the uniform datapath
#: (32 R2UR per K256, GLM-5.2 BM 80 638 -> 670 instructions); at 32 / 232 BM 80 has 638 / 676, BM 64 606 / 643
#: (601 / 637 at 24 / 240 without claims; session 39)
PRODUCER_REGS_TURNS, CONSUMER_REGS_TURNS = 32, 232
#: the same split for two pipelined CTAs per SM: 128*32 + 256*104 = 384 * 80. setmaxnreg only moves registers
#: inside the CTA's launch allocation (threads x the per-thread count ptxas was capped at); a consumer increase the
#: producer's decrease does not cover blocks forever (GPU-measured: 24 / 112 hung until the stage-wait trap). The
#: producer warpgroup had 24 until session 13; the signal warp's code beside the producer's made ptxas spill more
#: there, and 32 is what the pool leaves at 104 for the consumers
PRODUCER_REGS_2, CONSUMER_REGS_2 = 32, 104
#: shared memory one CTA may use when two share an SM (228 KB per SM, 1 KB reserved per CTA)
SMEM_LIMIT_2 = 113 * 1024
STAGE_RELEASES = ("read", "fence", "decoded", "decoded_k32_2")
#: ``Role2GemmConfig.step_stamps`` (dev): the stamp buffer (the persistent kernel's ``ticket`` formal) holds u32
#: ``%clock`` values at ``[cta][warpgroup][stream step][event]`` for the first STAMP_CTAS CTAs and STAMP_STEPS steps;
#: the events of one K128 step, in order (``*_mma_k128_steps``' chained path; the producer's in warpgroup 0's row)
STAMP_CTAS, STAMP_STEPS = 4, 256
STAMP_EVENTS = ("start", "stage_ready", "decoded", "turn", "issued", "mma_done", "promoted", "produced")
#: the K32 of a K128 step after whose MMA issue a "decoded_k32_2" stage is released: a thread's 6 shared loads of the
#: step (2 x LDS.128 + LDS.64 per slab) have all been consumed by the decode of K32 2 (code words 0-3 at K32 0, 4-7 at
#: K32 2; scale words at K32 0 and 2), so K32 3 decodes from registers only
EARLY_RELEASE_K32 = 2


@dataclass(frozen=True)
class Role2GemmConfig:
    """Compile-time shape of one role2 GEMM kernel (one variant).

    ``pipelined=False``: the 256-thread variant; each consumer thread loads its weights straight
    into a 2-stage register buffer (one K128 ahead). ``pipelined=True``: the 384-thread variant; a
    producer warpgroup streams K128 weight stages (16 KB codes + 1 KB scales, contiguous in the
    packed layout) with 1-D ``cp.async.bulk`` into a ring of shared-memory stages guarded by
    full/empty mbarriers, and the consumers read their 16-byte fragments with ``ld.shared.v4``.
    """

    mode: str  # "w1" or "w2"
    k: int  # contraction length: H for W1, I for W2
    rows: int  # weight rows per expert: 2I for W1, H for W2
    bm: int  # tokens per ring block (= wgmma N)
    alpha: float = 1.0
    clamp: float = 10.0
    #: the manifest's ``activation.fast_math``: W1's sigmoid takes ``rcp.approx`` for its reciprocal
    #: (:func:`.role2_math.sigmoid`); the exponent is ``ex2.approx`` either way
    fast_math: bool = False
    pipelined: bool = False
    timeout_ns: int = 2_000_000_000  # bound of every mbarrier wait (trap on expiry)
    #: K32 MMA steps kept in flight while earlier partials are scaled (None: :attr:`lag`'s rule). 2-3 are dev-harness
    #: experiments for BM <= 16.
    mma_lag: int | None = None
    #: CTAs per SM the kernel is built to fit (``.minnctapersm``; activation chunk <= 48 KB at 2): 2 gives each SM
    #: scheduler four consumer warps instead of two. The 256-thread variant caps at 128 registers then, the pipelined
    #: one moves 32 / 104 with setmaxnreg and has 3-5 weight stages (heuristics.sm90_ctas_per_sm picks the build).
    ctas_per_sm: int = 1
    #: True: the block exponent is folded into the decode (the shipped kernels). False (an A/B experiment of the
    #: dev harness): decode through the r = 0 table and multiply each K32 partial by 2**(r+5) x token scale.
    fold_scales: bool = True
    #: when a consumer releases a weight stage (arrives on its empty barrier), pipelined variants: "decoded" after
    #: the step's last MMA is issued (every word consumed, so its ld.shared completed), "fence" after a
    #: ``fence.proxy.async`` right after the reads, "read" right after the ld.shared are issued: a race (the arrive
    #: can overtake the reads and the producer's bulk copy overwrite the stage first; GPU-measured in session 6 with
    #: two CTAs per SM: 17 of 24 two-CTA dev checks not bit-identical; "fence" and "decoded" 24 / 24 correct),
    #: "decoded_k32_2" one K32 earlier, after K32 2's MMA issue (every load consumed: :data:`EARLY_RELEASE_K32`)
    stage_release: str = "decoded"
    #: activation chunk buffers in shared memory (the act budget is split between them): 1 stages each K chunk
    #: synchronously at its top (barrier, loads, stores, barrier: the MMAs wait); 2 copies chunk kc+1 with
    #: ``cp.async`` while chunk kc is multiplied (:func:`for_each_chunk`), so only a task's first chunk is exposed
    act_buffers: int = 1
    #: dev harness measurement only (never in a bundle): the producer issues no copies and the consumers do not wait
    #: for the stages, so the kernel times the consumers' mainloop (decode, QGMMA, promote) on whatever the stage
    #: buffers hold, plus the activation staging and the epilogue; its outputs are meaningless
    dev_compute_only: bool = False
    #: dev harness measurement only (never in a bundle): each wgmma's A registers are the stage's raw code words (no
    #: fold table, no FP4 decode), so the kernel times everything but the decode's CUDA-core work (its LOP3 / PRMT /
    #: IMAD chains and their register traffic) on the real weight stream; its outputs are meaningless. What a decode
    #: moved off the MMA warps (a decode warpgroup writing E4M3 tiles to shared memory) could gain at most.
    dev_no_decode: bool = False
    #: dev harness experiment (session 57, never in a bundle yet): in the per-K128 chain, the next step of the same
    #: :func:`_mma_k128_steps` call has its stage wait and word loads issued right after this step's MMAs, so their
    #: shared-memory latency (the no-decode probe's longer "stage wait") runs under them instead of at the next step's
    #: start (``mma_steps_per_call`` 4: three steps of four get it, 2: one of two)
    dev_words_ahead: bool = False
    #: K128 steps per :func:`_mma_k128_steps` call (the K loop's body): the tensor cores drain once per call, so 4
    #: halves the drains of 2 (pipelined only; the chunk must hold a whole number of calls; the ring's one-CTA lag-1
    #: builds take 4: ``role2_ring_config.steps_per_call_build``)
    mma_steps_per_call: int = 2
    #: persistent kernels: claim each next task from a counter in global memory instead of the static split (CTA c
    #: takes c, c + G, ...): :mod:`.task_queue` (two task slots after the stage barriers)
    dynamic_tasks: bool = False
    #: persistent kernels: the producer thread acquires each task (W2: all its W1 mask bits) and hands the consumers
    #: a record (task, expert, tokens, factor) through the task slots (:mod:`.task_queue`): no global acquire or
    #: metadata load on the consumers' path
    task_records: bool = False
    #: persistent kernels, W2: the task's release (its reads of the ring are done) runs inside the epilogue, after
    #: the destinations are loaded and before the stores, so its fence has no stores of the task to wait for
    #: (:func:`w2_epilogue`'s ``after_loads``; the ring kernel always does this)
    w2_early_release: bool = False
    #: the promote's ``x 2**FOLD_LOG2`` applied when a chunk's token scales are staged (2 per thread per chunk)
    #: instead of in every K128 step's promote (BM / 4 FMULs per step, on the path right after the wgmma wait);
    #: exact: a power of two (W2's UE8M0 byte + FOLD_LOG2, saturating at the infinity the product gave before)
    staged_fold_scale: bool = False
    #: persistent kernels: each task's releases run on the signal warp (warp 1 of the producer warpgroup, idle
    #: otherwise), which joins the consumers' barrier that ends the task's reads / stores (:data:`SIGNAL_BAR`) and
    #: then releases while the consumers go on. Consumer thread 0 ran them before: its ``MEMBAR.GPU`` (~0.3 µs, the
    #: release operation's) held the other consumer warps at their next barrier (session 13's membar probe: a
    #: MEMBAR stalls only its own warp, inline it cost 2-7 % of a BM 8 task stream). Needs the static split
    #: (the signal warp follows the consumers' task sequence by arithmetic), so not with dynamic_tasks.
    signal_warp: bool = False
    #: persistent kernels with ``act_buffers=2``: each activation chunk arrives as ``KC/128`` tensor-map boxes of
    #: [BM rows x 128 bytes] (``cp.async.bulk.tensor``, 128-byte swizzle), issued by consumer thread 0 and awaited on
    #: an mbarrier per buffer, instead of ``BM x KC / 16`` ``cp.async`` spread over the consumers (their address
    #: math, registers and memory-pipe stalls; session 12: 4.5 % of W1 BM 64's samples). wgmma reads the swizzled
    #: chunk (:func:`.wgmma_rs.smem_desc_sw128`). A padded token's row is copied as it is in the ring (stale, maybe
    #: NaN): only its own accumulator column sees it, and every epilogue masks by the token count.
    act_tma: bool = False
    #: one wgmma commit group per (K128 step, 64-row slab) instead of per step (:func:`_mma_k128_steps`), this many
    #: in flight (0: off, one group per step). 2: each slab's partial is promoted while the other slab's MMAs run, in
    #: the registers of one partial set (lag 1's overlap at half a step; session 15: BM 64 -0.3..-2 %, not shipped).
    #: 1: each slab's group is drained and promoted before the next slab is decoded, so one slab's partial and A
    #: registers are live, not two: what lets BM 32 fit the 104 registers of two CTAs per SM
    slab_groups: int = 0
    #: persistent pipelined kernels: 2 = each consumer warpgroup multiplies its two 64-row slabs one after the other,
    #: each over the whole K (a task runs the K loop twice, the producer streams stages of the pass's two slabs, 8.5 KB
    #: each), so one slab's accumulators, partial and A registers are live, not two: what lets BM 64 fit the 104
    #: registers of two CTAs per SM. Pass 0's epilogue values wait in shared memory (:attr:`stash_bytes`): W1's
    #: SwiGLU outputs (the task's amax group spans both passes), W2's BF16 rows. The activation chunks are read twice.
    slab_passes: int = 1
    #: dev experiment: the activation budget over both chunk buffers in KB instead of :attr:`act_budget`'s rule (0)
    act_kb: int = 0
    #: persistent pipelined kernels: the two consumer warpgroups take turns issuing their wgmmas (named barriers
    #: :data:`PINGPONG_BARS`, as FlashAttention-3 orders its warpgroups' GEMMs against their softmax): each burst's A
    #: fragments are decoded before the turn is taken, so one warpgroup decodes and promotes while the other's MMAs
    #: run, instead of both decoding, then both waiting on the tensor pipe (:func:`_mma_k128_steps`' ``turns``)
    pingpong: bool = False
    #: the ring kernel's producer thread claims the CTA's tasks after the first (``role2_ring``, "Dynamic tasks");
    #: only the register split reads it here (:data:`PRODUCER_REGS_TURNS`)
    producer_claims: bool = False
    #: dev harness measurement only (never in a bundle; persistent pipelined kernels, static split): consumer thread
    #: 0 of each warpgroup and the producer thread of CTAs ``< STAMP_CTAS`` store ``%clock`` at each K128 step's
    #: events (:data:`STAMP_EVENTS`) into the ``ticket`` buffer: where a step's cycles go (stage wait, decode, turn,
    #: MMA latency, promote). ~30 instructions per step and warp more: compare against the build without it
    step_stamps: bool = False
    #: the routed tiles' K order inside each K128 step (``gcmoe_runtime.numerics.sm90_layout``, "K order inside a K128
    #: step"; the manifest target's ``k_interleave``, session 50): each quad thread's four K32 slices of a step come
    #: from one K32 scale block, so it builds one decode table pair per row and step, not per K32 (session 42 call B's
    #: count: -72 consumer instructions per K256), and reads one scale word per slab instead of two. W1's activations
    #: follow by an in-place permutation of each landed chunk in shared memory (:func:`interleave_chunk`) unless
    #: ``w1_rows_interleaved``; W2's are written in the interleaved order by W1's epilogue
    #: (``sm90_layout.k128_epilogue_position``). Tensor-map chunks only (the swizzled layout it permutes)
    k_interleave: bool = False
    #: with ``k_interleave``: W1's activation rows arrive in the interleaved order already (role1 permuted them,
    #: ``heuristics.sm90_role1_interleaves_rows``; session 51), so no chunk is permuted here
    w1_rows_interleaved: bool = False
    #: session 60 (the ring kernel's BM 64 build since then, ``heuristics.SM90_EPILOGUE_WG_BM``; dev forms
    #: ``_ppksafwre`` ...): a fourth warpgroup runs every task's epilogue
    #: (:mod:`.role2_handover`): the consumers hand their accumulators over through shared memory as BF16 pairs of
    #: ``acc x efac`` — the rounding both epilogues start with, so the outputs are bit-identical — on full / empty
    #: mbarriers and go on with the next task's K loop while the epilogue warpgroup requantises (W1) or stores (W2)
    #: and releases. The K-loop probe measured the shape of it (session 59, ``wg2cw``): +5-6 % (W1-like) / +10-11 %
    #: (W2-like) of the BM 64 loop. Persistent one-CTA builds (the epilogue's task fields travel in the hand-over),
    #: without the signal warp (the epilogue warpgroup releases)
    epilogue_warpgroup: bool = False
    #: dev experiment (session 60, never in a bundle): at most this many weight stages (0: as many as fit, up to
    #: MAX_STAGES). The K-loop probe ran 7 stages 3-5 % slower than 6 (``wg2ce7`` / ``wg2ce6``), and the BM 64 epilogue
    #: warpgroup builds have 7: does the count matter in role2 itself?
    dev_stages_cap: int = 0

    def __post_init__(self):
        if self.mode not in ("w1", "w2"):
            raise ValueError(f"role2 mode must be 'w1' or 'w2', got {self.mode!r}")
        if self.bm not in SUPPORTED_BM:
            raise ValueError(f"role2 BM={self.bm} not supported; supported: {SUPPORTED_BM}")
        if self.k % 256:
            raise ValueError(f"role2 {self.mode}: K={self.k} must be a multiple of 256")
        if self.rows % ROWS_PER_CTA:
            raise ValueError(f"role2 {self.mode}: rows={self.rows} must be a multiple of {ROWS_PER_CTA}")
        if self.mode == "w1" and (self.rows // 2) % 128:
            raise ValueError(f"role2 w1: I={self.rows // 2} must be a multiple of 128")
        if self.mma_lag is not None and not 0 <= self.mma_lag <= 3:
            raise ValueError(f"role2 mma_lag={self.mma_lag} must be in 0..3")
        if self.ctas_per_sm not in (1, 2):
            raise ValueError(f"role2 ctas_per_sm={self.ctas_per_sm}: must be 1 or 2")
        if self.stage_release not in STAGE_RELEASES:
            raise ValueError(f"role2 stage_release={self.stage_release!r}: must be one of {STAGE_RELEASES}")
        if self.dev_compute_only and not self.pipelined:
            raise ValueError("role2 dev_compute_only: only the pipelined (producer-fed) kernel has stages to skip")
        if self.dev_no_decode and not (self.pipelined and self.fold_scales):
            raise ValueError("role2 dev_no_decode: a timing probe of the pipelined kernel's folded decode, so "
                             "pipelined=True, fold_scales=True")
        if self.mma_steps_per_call not in (2, 4) or (self.mma_steps_per_call == 4 and not self.pipelined):
            raise ValueError(f"role2 mma_steps_per_call={self.mma_steps_per_call}: 2, or 4 for the pipelined kernel")
        if self.staged_fold_scale and not (self.fold_scales and self.act_buffers == 2):
            raise ValueError("role2 staged_fold_scale: needs fold_scales=True (the x 2**FOLD_LOG2 it moves) and "
                             "act_buffers=2 (the staging path that applies it)")
        if (self.dynamic_tasks or self.task_records) and (not self.pipelined or self.dev_compute_only):
            raise ValueError("role2 dynamic_tasks / task_records: the producer of the pipelined kernel hands out the "
                             "tasks (and its weight-stage waits order the task slots' reuse), so pipelined=True, "
                             "dev_compute_only=False")
        if self.signal_warp and (not self.pipelined or self.dev_compute_only or self.dynamic_tasks):
            raise ValueError("role2 signal_warp: a warp of the pipelined kernel's producer warpgroup follows the "
                             "static task split, so pipelined=True, dev_compute_only=False, dynamic_tasks=False")
        if self.act_tma and not (self.pipelined and self.act_buffers == 2):
            raise ValueError("role2 act_tma: the tensor-map chunk copies replace act_buffers=2's cp.async prefetch of "
                             "the pipelined kernel, so pipelined=True, act_buffers=2")
        if self.slab_groups not in (0, 1, 2):
            raise ValueError(f"role2 slab_groups={self.slab_groups}: commit groups in flight must be 0 (off), 1 or 2")
        if self.slab_groups and not (self.pipelined and self.fold_scales):
            raise ValueError("role2 slab_groups: the per-slab commit groups chain a K128 step on one partial, which "
                             "the folded FP4 decode of the pipelined kernel gives, so pipelined=True, "
                             "fold_scales=True")
        if self.slab_passes not in (1, 2):
            raise ValueError(f"role2 slab_passes={self.slab_passes}: must be 1 or 2")
        if self.slab_passes == 2 and not (self.pipelined and self.fold_scales and self.act_buffers == 2
                                          and not self.slab_groups and self.mma_steps_per_call == 2):
            raise ValueError("role2 slab_passes=2: one slab per warpgroup and pass, chained per K128 from the "
                             "producer's stages, so pipelined=True, fold_scales=True, act_buffers=2, slab_groups=0, "
                             "mma_steps_per_call=2")
        if self.act_buffers not in (1, 2):
            raise ValueError(f"role2 act_buffers={self.act_buffers}: must be 1 or 2")
        if self.dev_words_ahead and not (self.pipelined and self.fold_scales and not self.slab_groups
                                         and self.slab_passes == 1):
            raise ValueError("role2 dev_words_ahead: the producer's stages read per K128 step (the chained path), so "
                             "pipelined=True, fold_scales=True, slab_groups=0, slab_passes=1")
        if self.pingpong and not (self.pipelined and self.fold_scales and not self.dev_compute_only
                                  and not self.slab_groups):
            raise ValueError("role2 pingpong: the turns order the per-K128 wgmma bursts of the persistent pipelined "
                             "kernel's folded FP4 decode, so pipelined=True, fold_scales=True, "
                             "dev_compute_only=False, slab_groups=0")
        if self.step_stamps and not (self.pipelined and not self.dynamic_tasks and not self.slab_groups
                                     and self.fold_scales and not self.dev_compute_only):
            raise ValueError("role2 step_stamps: the chained K128 steps of the persistent pipelined kernel, whose "
                             "stamp buffer is the ticket formal, so pipelined=True, dynamic_tasks=False, "
                             "slab_groups=0, fold_scales=True, dev_compute_only=False")
        if self.k_interleave and not (self.pipelined and self.act_tma and self.fold_scales
                                      and not self.dev_no_decode):
            raise ValueError("role2 k_interleave: the interleaved decode tables fold each K32 block's exponent and "
                             "the chunk permutation works on tensor-map chunks, so pipelined=True, act_tma=True, "
                             "fold_scales=True, dev_no_decode=False")
        if self.epilogue_warpgroup and not (self.pipelined and self.ctas_per_sm == 1 and self.act_tma
                                            and self.slab_passes == 1 and not self.signal_warp
                                            and self.bm in EPILOGUE_WG_BM):
            raise ValueError(f"role2 epilogue_warpgroup: a fourth warpgroup beside the persistent one-CTA kernel's "
                             f"producer and consumers, so pipelined=True, ctas_per_sm=1, act_tma=True, slab_passes=1, "
                             f"signal_warp=False (it releases) and BM in {EPILOGUE_WG_BM}; got BM={self.bm}")
        if self.w1_rows_interleaved and not self.k_interleave:
            raise ValueError("role2 w1_rows_interleaved: only with k_interleave (the rows' order is that layout's)")
        if self.kc % (128 * self.mma_steps_per_call):
            raise ValueError(f"role2 mma_steps_per_call={self.mma_steps_per_call}: K chunk {self.kc} is not a "
                             f"multiple of {128 * self.mma_steps_per_call}")
        if self.act_buffers == 2 and self.bm * (self.kc // self.act_scale_group) > 2 * CONSUMER_THREADS:
            raise ValueError(f"role2 act_buffers=2: BM={self.bm} x {self.kc // self.act_scale_group} scale groups "
                             f"per chunk > {2 * CONSUMER_THREADS} (two prefetched scales per consumer thread)")

    @property
    def lag(self) -> int:
        if self.mma_lag is not None:
            return self.mma_lag
        if self.pipelined and self.ctas_per_sm == 2:
            # at 104 consumer registers two K128 steps' A operands (2 x 32 registers) cannot both stay live while
            # their MMAs run (W1 and W2 both chain per K128): ptxas would serialise every wgmma of the kernel
            # (advisory C7512, a build error; the session-6 two-CTA build shipped so)
            return 0
        # BM 48's second partial set still fits the one-CTA build's registers (no spill in its K loops; BM 64's
        # spills 70 values per K256, hence its drain per step and the turns)
        return 1 if self.bm <= 48 else 0

    @property
    def scales_before_wait(self) -> bool:
        """A drained step's (lag 0) scales are loaded before its wgmma wait (:func:`_mma_k128_steps`), where the
        registers they hold across it fit: one CTA per SM up to BM 64, two CTAs per SM only at BM <= 16 (session 57:
        the 8 post-wait ``LDS.64`` of a BM 64 step go; GLM-5.2's share at T = 192, BM 64, -2.3 % on an H100. At BM 80
        the spills outside the loop grew and the layer was +5 %; at lag 1 two partial sets are live and the BM 48
        loops spilled; the BM 64 two-CTA slab passes spilled in the MMA loop)."""
        return self.lag == 0 and self.bm <= 64 and (self.ctas_per_sm == 1 or self.bm <= 16)

    @property
    def threads(self) -> int:
        return (CONSUMER_THREADS + (PRODUCER_THREADS if self.pipelined else 0)
                + (EPILOGUE_THREADS if self.epilogue_warpgroup else 0))

    @property
    def act_budget(self) -> int:
        """Shared-memory bytes of one activation chunk buffer (the total budget over :attr:`act_buffers`)."""
        if self.act_kb:
            total = self.act_kb * 1024
        elif self.ctas_per_sm == 2:
            total = 48 * 1024
        elif self.pipelined:
            # 64 KB, or a K512 chunk per buffer where a block needs more (BM 80: 80 KB; session 31: at 64 KB its chunk
            # was K256, twice BM 64's chunk waits and copies per task)
            total = max(64 * 1024, self.act_buffers * 512 * self.bm)
        else:
            total = 96 * 1024
        return total // self.act_buffers

    @property
    def kc(self) -> int:
        """K chunk staged in shared memory: the largest multiple of 256 dividing K within budget."""
        best = 256
        for kc in range(256, self.k + 1, 256):
            if self.k % kc == 0 and self.bm * kc <= self.act_budget:
                best = kc
        return best

    @property
    def act_scale_group(self) -> int:
        """K extent of one activation scale: W1 reads FP32 per 128 (Hopper activation recipe), W2 reads
        the W1 epilogue's UE8M0 per :data:`L2_SCALE_GROUP` along I (numerics reference step 4)."""
        return 128 if self.mode == "w1" else L2_SCALE_GROUP

    @property
    def act_buffer_bytes(self) -> int:
        """One activation chunk buffer: ``[kc/16][bm]`` 16-byte units."""
        return self.bm * self.kc

    @property
    def asc_buffer_bytes(self) -> int:
        """The FP32 token scales of one chunk: ``[kc/group][bm]``."""
        return 4 * self.bm * (self.kc // self.act_scale_group)

    @property
    def misc_bytes(self) -> int:
        epi = 4 * self.bm * 16  # amax partials: 4 slabs x 4 warps per token
        return (self.act_buffers * (self.act_buffer_bytes + self.asc_buffer_bytes) + epi + self.act_bar_bytes
                + self.handover_bytes + self.stash_bytes)

    @property
    def handover_bytes(self) -> int:
        """:attr:`epilogue_warpgroup`'s hand-over area (after the chunk buffers' mbarriers; :func:`handover_bytes`)."""
        return handover_bytes(self.bm) if self.epilogue_warpgroup else 0

    @property
    def handover_off(self) -> int:
        """Shared offset of the hand-over area (16-byte aligned: every area before it is)."""
        return self.misc_bytes - self.stash_bytes - self.handover_bytes

    @property
    def slabs_per_pass(self) -> int:
        """64-row slabs each consumer warpgroup multiplies at once (:attr:`slab_passes`)."""
        return 2 // self.slab_passes

    @property
    def stage_bytes(self) -> int:
        """One weight stage: the code tiles (4 KB) and UE8M0 scale tiles (256 B) of one K128 step of the slabs of
        a pass (:data:`STAGE_BYTES` for all four)."""
        return 2 * self.slabs_per_pass * SLAB_STAGE_BYTES

    @property
    def stash_bytes(self) -> int:
        """Shared memory for pass 0's epilogue values (:attr:`slab_passes` = 2; the end of :attr:`misc_bytes`):
        BM / 4 FP32 SwiGLU outputs (W1) or BM / 2 BF16 rows (W2) per consumer thread, ``[value][thread]``."""
        return CONSUMER_THREADS * self.bm if self.slab_passes == 2 else 0

    @property
    def act_bar_bytes(self) -> int:
        """The act_tma chunk buffers' mbarriers (one per buffer), after the amax partials."""
        return 8 * self.act_buffers if self.act_tma else 0

    @property
    def occupancy_launch(self) -> dict:
        """The launch keywords that build ``ctas_per_sm`` into the cubin: ``.minnctapersm`` (the pipelined variant
        needs the register cap for ``setmaxnreg``; the 256-thread one caps at 128 registers for two CTAs, none for
        one) and, for two CTAs, a full shared-memory carveout (else the DSL asks the absent driver for it)."""
        min_blocks = self.ctas_per_sm if self.pipelined else (2 if self.ctas_per_sm == 2 else 0)
        return dict(min_blocks_per_mp=min_blocks, preferred_smem_carveout=100 if self.ctas_per_sm == 2 else None)

    @property
    def smem_limit(self) -> int:
        return SMEM_LIMIT if self.ctas_per_sm == 1 else SMEM_LIMIT_2

    @property
    def launch_regs(self) -> int:
        """Registers per thread a CTA is launched with under ``.minnctapersm ctas_per_sm``: the register file
        (65 536) over ctas x threads, rounded down to the allocation unit of 8."""
        return 65536 // (self.ctas_per_sm * self.threads) // 8 * 8

    @property
    def setmaxnreg(self) -> tuple[int, int]:
        """(producer, consumer) registers per thread after ``setmaxnreg`` (pipelined variant); their sum over the
        CTA's threads never exceeds its launch allocation (checked)."""
        if self.ctas_per_sm == 2:
            prod, cons = PRODUCER_REGS_2, CONSUMER_REGS_2
        elif self.epilogue_warpgroup:
            prod, cons = PRODUCER_REGS_EPI, CONSUMER_REGS_EPI
        elif self.pingpong and self.producer_claims:
            prod, cons = PRODUCER_REGS_TURNS, CONSUMER_REGS_TURNS
        elif self.bm >= WIDE_CONSUMER_MIN_BM:
            prod, cons = PRODUCER_REGS_WIDE, CONSUMER_REGS_WIDE
        else:
            prod, cons = PRODUCER_REGS, CONSUMER_REGS
        if (PRODUCER_THREADS * prod + CONSUMER_THREADS * cons + EPILOGUE_THREADS * self.epilogue_regs
                > self.threads * self.launch_regs):
            raise ValueError(f"role2 setmaxnreg {prod}/{cons} exceeds the launch allocation of {self.launch_regs} "
                             f"registers per thread at {self.ctas_per_sm} CTA(s) per SM")
        return prod, cons

    @property
    def epilogue_regs(self) -> int:
        """The epilogue warpgroup's registers after ``setmaxnreg`` (:attr:`epilogue_warpgroup`; 0 without one)."""
        return EPILOGUE_REGS if self.epilogue_warpgroup else 0

    @property
    def stages(self) -> int:
        if not self.pipelined:
            return 0
        free = (self.smem_limit - 1024 - self.misc_bytes - 2 * 8 * MAX_STAGES
                - self.queue_bytes)
        return max(2, min(self.dev_stages_cap or MAX_STAGES, MAX_STAGES, free // self.stage_bytes))

    @property
    def queue_bytes(self) -> int:
        """Shared memory after the stage barriers: the task slots (dynamic_tasks, task_records)."""
        return TASK_SLOTS_BYTES if self.dynamic_tasks or self.task_records else 0

    @property
    def smem_bytes(self) -> int:
        if not self.pipelined:
            return self.misc_bytes
        return (1024 * ((self.misc_bytes + 1023) // 1024) + self.stages * self.stage_bytes + 2 * 8 * self.stages
                + self.queue_bytes)

    @property
    def row_tiles(self) -> int:
        return self.rows // ROWS_PER_CTA


def task_smem_offsets(w1: Role2GemmConfig, w2: Role2GemmConfig) -> dict:
    """Byte offsets of the per-task shared-memory areas of a W1+W2 task-stream kernel (role2's ring consumer,
    role4): the activation chunk ``act`` (also W2's BF16 staging ``[BM][256]``), the token scales ``asc``, the
    W1 epilogue's amax partials ``amax`` (4 slabs x 4 warps per token), a 16-byte ``info`` word; ``misc`` = the end.
    Each GEMM's :attr:`~Role2GemmConfig.act_buffers` buffers sit back to back in ``act`` / ``asc`` (its own strides,
    :func:`for_each_chunk`): the areas are sized for the larger of the two."""
    bm = w1.bm
    act = max(w1.act_buffers * w1.act_buffer_bytes, w2.act_buffers * w2.act_buffer_bytes, bm * 512)
    asc = max(w1.act_buffers * w1.asc_buffer_bytes, w2.act_buffers * w2.asc_buffer_bytes)
    o = dict(act=0, asc=act)
    o["amax"] = o["asc"] + asc
    o["info"] = o["amax"] + 4 * bm * 16
    o["misc"] = o["info"] + 16
    if w1.act_tma or w2.act_tma:  # the chunk buffers' mbarriers (Role2GemmConfig.act_bar_bytes)
        o["actbar"] = o["misc"]
        o["misc"] = o["actbar"] + max(w1.act_bar_bytes, w2.act_bar_bytes)
    return o


def _consumer_lane(ctid):
    """A consumer thread's coordinates from its index ``ctid`` in ``[0, 256)``: (warpgroup, warp in the
    warpgroup, ``g`` = lane // 4, ``t`` = lane % 4, thread in the warpgroup)."""
    wg = ctid // 128
    warp = (ctid // 32) % 4
    lane = ctid % 32
    return wg, warp, lane // 4, lane % 4, ctid % 128
