"""role2 on sm_90a: FP8 x MXFP4 grouped GEMMs W1 (+SwiGLU, routing weight, FP8 requant) and W2 (BF16
partials) over token-ring blocks, register-A wgmma with in-register FP4 decode.

What is the issue's target already: packed FP4 weights are decoded to E4M3 in registers
(:mod:`.fp4_decode`) and fed as the A operand of ``wgmma.mma_async m64nBMk32 .e4m3`` (operands
swapped: weight rows = M, tokens = N = BM; SASS ``QGMMA ... R<a>, gdesc[..]``), the MXFP4 block
scales are folded into the decode as exact E4M3 exponent offsets (so W1's four K32 MMAs of a K128
step share one accumulator), weight loads carry an L2 EVICT_FIRST policy. Two thread-count variants (paper §4.4): 256 threads, each consumer thread loading its
fragments straight from HBM into a two-stage register buffer; 384 threads ("pipelined"), a producer
warpgroup streaming K128 stages with 1-D ``cp.async.bulk`` into up to 8 shared-memory stages on
full/empty mbarriers (bounded waits: trap after ``timeout_ns``), ``setmaxnreg`` 40/232 (32/104 when built for two
CTAs per SM: :attr:`Role2GemmConfig.setmaxnreg`).

These two are non-persistent (one CTA per (256-row tile, ring block), no ring handshake: the caller
launches after the blocks are full). The persistent ring-consuming variant is
:mod:`.role2_persistent` (same helpers). Activations are staged by the consumers, a K chunk at a time
(:func:`for_each_chunk`: plain loads into one buffer, or with ``act_buffers=2`` the next chunk's ``cp.async`` into a
second buffer while the current one is multiplied, as the ring kernel does). The epilogues are the ring kernel's
(:func:`_w1_epilogue`, :func:`w2_epilogue`: staged in shared memory, 16-byte stores). Not in these dev kernels: W2
scatter through the peer descriptor into the source rank's combine buffer (W2 writes a plain ``[row, H]`` buffer
through a per-token row table), W1+W2 in one task stream.

Kernel contract (one layer, one rank; byte addresses as Int64 params; layouts from
``gcmoe_runtime.numerics``):

* CTA = 256 weight rows x BM tokens = 4 slabs of 64 rows; consumer warpgroup ``wg`` owns slabs
  ``2wg`` and ``2wg+1`` and issues two wgmma per K32.
* ``w``: code tiles ``uint8 [E, N/64, K/128, 4096]`` (``sm90_layout.permute_tiles``; thread ``t``
  of a warpgroup reads bytes ``[32t, 32t+32)`` of its slab's tile per K128 step), ``ws``: scale tiles
  ``uint8 [E, N/64, K/128, 256]`` (``sm90_layout.permute_scales`` of the transform's stored UE8M0
  scales), ``ef``: FP32 ``[E]`` expert factor. Weight value = decoded E4M3 (= fp4 x 2**(stored-133-5)) x
  2**5 x ``ef`` = fp4/64 x ``2**(stored-127)`` x ``ef`` (the transform's x64 convention). W1 rows are gate/up interleaved in
  8-row groups (``gate_up``): accumulator row halves 0/1 of a thread are gate/up of one I-column.
* Ring block ``b`` (``grid.y``): ``bexp[b]`` expert, ``bntok[b]`` valid tokens (<= BM), activations
  ``act[b][BM][K]`` E4M3; scales W1: FP32 ``[b][BM][H/128]``, W2: UE8M0 ``[b][BM][I/L2_SCALE_GROUP]``. Padded
  tokens are zeroed on the way into shared memory and produce no output, so stale ring contents (even
  NaN) never leak.
* W1 out: ``l2[b][BM][I]`` E4M3 and ``l2s[b][BM][I/L2_SCALE_GROUP]`` UE8M0 (numerics reference steps 3-4:
  ``bf16`` round, clamp, ``gate*sigmoid(alpha*gate)*up*rw``, scale ``2**ceil(log2(amax_GROUP/448))``,
  1 for an all-zero group). W2 out: ``out[rowidx[b][t]][H]`` BF16 for valid tokens.

Per K32 step each warpgroup decodes 2 x 4 A registers (the row's K32 exponent through the table) and
issues 2 wgmma. One token scale per K128 (W1's FP32, W2's UE8M0 per L2_SCALE_GROUP = 128): the 4 K32 steps
chain on one partial, one wait and one FMA ``acc += partial * 32 * asc[token]`` per K128. The per-K32 path of
:func:`_mma_k128_steps` (a fresh partial per K32, FMA'd while the next step's MMAs run, ``lag``) serves role4's FP8
weights (a block scale per K32) and the ``fold_scales=False`` experiment.
"""
from __future__ import annotations

from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, Uint8, Uint32, const_expr

from gcmoe_runtime.numerics.recipes import SM90_INTERMEDIATE_SCALE_GROUP
from gcmoe_runtime.numerics.sm90_layout import k128_epilogue_position, k128_word_source
from gcmoe_runtime.numerics.sm90_window import FOLD_LOG2, FOLD_LUT_WORDS

from .fp4_decode import byte_at, byte_of, byte_selector, decode_fp4x8_e4m3, fold_lut
from .ptx_mem import (bar_arrive, bar_sync, bulk_copy_g2s, cp_async_16_zfill, cp_async_4_zfill,
                      cp_async_wait_all, evict_first_policy, fence_proxy_async_global, fence_proxy_async_shared,
                      globaltimer, ld_global_f32, ld_global_f32_if, ld_global_s32, ld_global_u8,
                      ld_global_u8_if, ld_global_word_if,
                      ld_global_v2_stream, ld_global_v4, ld_global_v4_stream, ld_shared_f32, ld_shared_u64,
                      ld_shared_v2, ld_shared_v4, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_init_fence,
                      mbar_wait_or_trap, setmaxnreg, st_global_u8, st_global_v4, st_shared_f32, st_shared_u64,
                      st_shared_u8, st_shared_v4, stmatrix_x4_trans, tma_load_2d)
from .ring_sync import ld_shared_b32, st_relaxed_gpu_u64, st_shared_b32
from .role_common import SMEM_LIMIT
from .task_queue import TASK_SLOTS_BYTES
from .role2_math import (bf16_round, bits_float, float_bits, fabs, fmax, fmin, min_u32, pack_bf16x2, sel_f32,
                         shfl_bfly_f32, sigmoid, to_e4m3_byte, ue8m0_scale_for, ue8m0_to_f32)
from .wgmma_rs import (fence_f32, smem_desc, smem_desc_sw128, wgmma_commit, wgmma_fence, wgmma_rs_e4m3,
                       wgmma_wait)

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
#: one 64-row slab's share of a K128 weight stage: its packed codes (4 KB) + UE8M0 scales (256 B)
SLAB_STAGE_BYTES = 4096 + 256
STAGE_BYTES = 4 * SLAB_STAGE_BYTES  # one K128 step of a CTA's four slabs: packed codes of 256 rows + their scales
MAX_STAGES = 8
FOLD_SCALE = float(2 ** FOLD_LOG2)  # decoded operands are fp4 x 2**(r - 5): the partials carry 2**-5
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
    #: K128 steps per :func:`_mma_k128_steps` call (the K loop's body): the tensor cores drain once per call, so 4
    #: halves the drains of 2 (pipelined only; the chunk must hold a whole number of calls; the ring's one-CTA lag-1
    #: builds take 4: ``role2_ring.steps_per_call_build``)
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
    #: dev experiment (session 53, turns builds): 1 = each K128 burst commits its two slabs' wgmmas as two groups (slab
    #: 0's four K32 chained, then slab 1's), and the step's promote waits for slab 0's group only, promotes it while
    #: slab 1's MMAs run, then waits for slab 1's: part of the own burst's ~250 cycles hidden per step at lag 0 (BM
    #: 64), in the same registers (the two slabs' partials are separate already). 2 = as 1, and slab 1's A fragments
    #: are decoded after slab 0's group is issued (inside the turn, behind a second ``wgmma.fence``), so slab 0's MMAs
    #: run under slab 1's decode too
    burst_halves: int = 0

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
        if self.burst_halves not in (0, 1, 2):
            raise ValueError(f"role2 burst_halves={self.burst_halves}: must be 0 (off), 1 or 2")
        if self.burst_halves and not (self.pingpong and self.lag == 0 and self.slab_passes == 1):
            raise ValueError("role2 burst_halves: splits the turns' per-K128 burst of both slabs at lag 0, so "
                             "pingpong=True, mma_lag 0 (BM 64 / 80), slab_passes=1")
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
    def threads(self) -> int:
        return CONSUMER_THREADS + (PRODUCER_THREADS if self.pipelined else 0)

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
                + self.stash_bytes)

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
        elif self.pingpong and self.producer_claims:
            prod, cons = PRODUCER_REGS_TURNS, CONSUMER_REGS_TURNS
        elif self.bm >= WIDE_CONSUMER_MIN_BM:
            prod, cons = PRODUCER_REGS_WIDE, CONSUMER_REGS_WIDE
        else:
            prod, cons = PRODUCER_REGS, CONSUMER_REGS
        if PRODUCER_THREADS * prod + CONSUMER_THREADS * cons > (PRODUCER_THREADS + CONSUMER_THREADS) * self.launch_regs:
            raise ValueError(f"role2 setmaxnreg {prod}/{cons} exceeds the launch allocation of {self.launch_regs} "
                             f"registers per thread at {self.ctas_per_sm} CTA(s) per SM")
        return prod, cons

    @property
    def stages(self) -> int:
        if not self.pipelined:
            return 0
        free = (self.smem_limit - 1024 - self.misc_bytes - 2 * 8 * MAX_STAGES
                - self.queue_bytes)
        return max(2, min(MAX_STAGES, free // self.stage_bytes))

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


def task_smem_offsets(w1: "Role2GemmConfig", w2: "Role2GemmConfig") -> dict:
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


def _load_k128(wbuf, stage: int, kb, wbases, sbases, policy):
    """Issue the loads of one K128 step into register stage ``stage`` (of 2): for each of the thread's
    two slabs, its 32 bytes of the 4096-byte code tile (two 16-byte EVICT_FIRST loads) and its 8 bytes
    of the 256-byte UE8M0 scale tile (``gcmoe_runtime.numerics.sm90_layout``)."""
    for sl in range(2):
        for h in range(2):
            v = ld_global_v4_stream(wbases[sl] + Int64(kb) * 4096 + 16 * h, policy)
            for r in range(4):
                wbuf[stage * 20 + sl * 8 + h * 4 + r] = v[r]
        sc = ld_global_v2_stream(sbases[sl] + Int64(kb) * 256, policy)
        for r in range(2):
            wbuf[stage * 20 + 16 + sl * 2 + r] = sc[r]


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


def _k128_mma(words, ascl, acc, act_smem, kl128, bm: int, lag: int, a_regs=None, scale_word: int = 16,
              fold: bool = True, block_k128: bool = False):
    """One K128 step on its own (every MMA waited before returning): :func:`_mma_k128_steps` of one step."""
    _mma_k128_steps([K128Step(lambda: words, ascl, kl128)], acc, act_smem, bm, lag,
                    a_regs=None if a_regs is None else (lambda step, q: a_regs(q)), scale_word=scale_word, fold=fold,
                    block_k128=block_k128)


def _mma_k128_steps(steps, acc, act_smem, bm: int, lag: int, a_regs=None, scale_word: int = 16, fold: bool = True,
                    overlap: bool = True, prescaled: bool = False, sw128: bool = False, slab_groups: int = 0,
                    block_k128: bool = False, nslab: int = 2, decode: bool = True, turns=None,
                    mma_n: int | None = None, k_interleave_tig=None, burst_halves: int = 0):
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
    ``burst_halves`` (``Role2GemmConfig.burst_halves``; ``turns`` at lag 0): a step's burst commits slab 0's four
    chained wgmmas and slab 1's as two groups, and its promote takes slab 0 after waiting for one group, slab 1 after
    the other; at 2 slab 1's A fragments are decoded after slab 0's group is issued.

    Chained per K128 (with or without slab groups), a step's (a slab group's) four K32 A fragments are decoded first
    and one ``wgmma.fence`` precedes its wgmmas: a fence orders every earlier register write of the warp, and the A
    registers stay live until the group's wait either way. A fence per K32 held the warps at ``WARPGROUP.ARRIVE``
    (10-12 % of the two-CTA BM 32 form's stall samples, session 27; session 28 call B)."""
    if not overlap and len(steps) > 1:
        for step in steps:
            _mma_k128_steps([step], acc, act_smem, bm, lag, a_regs, scale_word, fold, prescaled=prescaled,
                            sw128=sw128, slab_groups=slab_groups, block_k128=block_k128, nslab=nslab, mma_n=mma_n)
        return
    nd = bm // 2  # the accumulator's values per slab (its layout), whatever N the wgmmas run at
    mn = bm if mma_n is None else mma_n
    if mn % 8 or not 8 <= mn <= bm:
        raise ValueError(f"_mma_k128_steps mma_n: a multiple of 8 in [8, bm={bm}] (got {mn})")
    nv = mn // 2  # values each wgmma writes per slab
    per_k128 = (block_k128 if a_regs is not None else fold) and steps[0].ascl.group == 128
    if turns is not None and not (per_k128 and not slab_groups):
        raise ValueError("_mma_k128_steps turns: the per-K128 chain without slab groups only")
    if burst_halves and not (turns is not None and lag == 0 and nslab == 2 and a_regs is None):
        raise ValueError("_mma_k128_steps burst_halves: the turns' two-slab FP4 bursts at lag 0 only")
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
        if burst_halves == 2:  # slab 0's fragments now, slab 1's once slab 0's group is issued
            a_sl = [[slab_regs(step, q, 0) for q in range(4)]]
        else:
            a4 = [regs(step, q) for q in range(4)]
        mark(step, "decoded")
        if turns is not None:
            turns[0]()
            mark(step, "turn")
        wgmma_fence()
        parts = (None,) * nslab
        if burst_halves:  # slab 0's chain, its group, then slab 1's: the promote waits for them one at a time
            parts = []
            for sl in range(nslab):
                if burst_halves == 2:
                    if sl:
                        a_sl.append([slab_regs(step, q, sl) for q in range(4)])
                        wgmma_fence()
                    frags = a_sl[sl]
                else:
                    frags = [a4[q][4 * sl:4 * sl + 4] for q in range(4)]
                p = None
                for q in range(4):
                    p = wgmma_rs_e4m3(mn, frags[q], b_desc(step, q), p)
                wgmma_commit()
                parts.append(p)
            parts = tuple(parts)
        else:
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

    def fma(parts, tsc, rs=None, slabs=None):
        for i in range(nv):
            ts = tsc[(i >> 2) * 2 + (i & 1)]
            hrow = (i >> 1) & 1
            sc = [ts if rs is None else rs[2 * sl + hrow] * ts for sl in range(nslab)]
            for sl in range(nslab) if slabs is None else slabs:
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
        def promote(done, pending: int):
            parts, step = done
            if burst_halves:  # slab 0 while slab 1's group runs (lag 0: pending is 0)
                tsc = folded(step.ascl[0])
                wgmma_wait(1)
                fma(parts, tsc, slabs=(0,))
                wgmma_wait(0)
                mark(step, "mma_done")
                fma(parts, tsc, slabs=(1,))
                mark(step, "promoted")
                return
            wgmma_wait(pending)
            mark(step, "mma_done")
            if a_regs is None:
                fma(parts, folded(step.ascl[0]))
            else:
                fma(parts, step.ascl[0], block_scales(step, 0))
            mark(step, "promoted")

        done = None  # (partials, step) of the previous step, its group still pending
        for step in steps:
            parts = issue_step(step)
            if step.issued is not None:
                step.issued()
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


def _consumer_lane(ctid):
    """A consumer thread's coordinates from its index ``ctid`` in ``[0, 256)``: (warpgroup, warp in the
    warpgroup, ``g`` = lane // 4, ``t`` = lane % 4, thread in the warpgroup)."""
    wg = ctid // 128
    warp = (ctid // 32) % 4
    lane = ctid % 32
    return wg, warp, lane // 4, lane % 4, ctid % 128


def _issue_k128_stage(smem, bar_off: int, stage_off: int, s, w, ws, slab0, nk, kb, policy, nsl: int = 4,
                      sstride: int = 1):
    """Producer: arm full barrier ``s`` for one K128 stage and bulk-copy the code tiles (4096 B each) and scale
    tiles (256 B each) of ``nsl`` slabs ``slab0 + j * sstride`` into stage ``s`` (codes, then scales, in that order).
    ``slab0``: the first 64-row slab (expert * slabs + tile * 4 [+ pass]), ``nk``: K128 steps per slab, ``kb``: this
    step. All four slabs of the task (the default), or with ``Role2GemmConfig.slab_passes = 2`` the pass's two."""
    full = smem + bar_off + 8 * s
    nbytes = nsl * SLAB_STAGE_BYTES
    mbar_arrive_expect_tx(full, nbytes)
    dst = smem + stage_off + s * nbytes
    for j in range(nsl):  # plain Python: unrolled at trace time
        tile = (slab0 + j * sstride) * nk + Int64(kb)
        bulk_copy_g2s(dst + j * 4096, w + tile * 4096, 4096, full, policy)
        bulk_copy_g2s(dst + nsl * 4096 + j * 256, ws + tile * 256, 256, full, policy)


def _read_k128_stage(stage, wg, tw, warp, g, nslab: int = 2, k_interleave: bool = False):
    """Consumer: this thread's words of a shared-memory K128 stage (``nslab`` slabs per warpgroup), in
    :func:`_mma_k128_steps`' order (each slab's codes, 16 B each half, then each slab's UE8M0 scales, 8 B each;
    ``k_interleave``: 4 B each, the word holding its K32 block's bytes, ``sm90_layout.scale_tile_position``)."""
    words = []
    for sl in range(nslab):
        for h2 in range(2):
            words.extend(ld_shared_v4(stage + (wg * nslab + sl) * 4096 + tw * 32 + 16 * h2))
    for sl in range(nslab):
        sc = stage + 2 * nslab * 4096 + (wg * nslab + sl) * 256 + (warp * 8 + g) * 8
        if k_interleave:  # K32 block t = lane % 4: bytes 2t, 2t + 1 of the 8, in word t // 2
            words.append(ld_shared_b32(sc + ((tw & 3) >> 1) * 4))
        else:
            words.extend(ld_shared_v2(sc))
    return words


def _init_stage_barriers(smem, bar_off: int, ns: int):
    """One thread: the ``ns`` full barriers of the weight stages (one arrival: the producer's expect_tx) and the
    ``ns`` empty barriers (every consumer thread arrives), then the fence that makes them visible to the async
    proxy (the bulk copies complete on them). Plain Python: the loop unrolls at trace time."""
    for s in range(ns):
        mbar_init(smem + bar_off + 8 * s, 1)
        mbar_init(smem + bar_off + 8 * (ns + s), CONSUMER_THREADS)
    mbar_init_fence()


def stage_slot(gs, ns: int):
    """Stream step ``gs`` (an Int32, never negative) -> (its stage ``gs % ns``, the number of earlier uses of that
    stage ``gs // ns``), as Int32. Divided unsigned: a signed ``%`` / ``//`` by a constant costs the sign fix-ups
    (shift, lea.hi, compare, select: ~10 instructions per K128 step on a consumer's path, session 34), an unsigned one
    by a power of two is a mask and a shift."""
    u = Uint32(gs)
    return Int32(u % Uint32(ns)), Int32(u // Uint32(ns))


@cute.jit
def _produce_k128(smem, bar_off: int, stage_off: int, ns: int, gs, wait_empty, w, ws, slab0, nk, kb, policy,
                  nsl: int = 4, sstride: int = 1):
    """Producer, stream step ``gs`` (stage ``gs % ns``): once the stage has been used, wait for its empty
    barrier (``wait_empty(bar, parity)``, a bounded wait), then :func:`_issue_k128_stage` for K128 ``kb``."""
    s = gs % ns  # signed here: stage_slot cost the 32-register producer of the two-CTA builds spills (session 34)
    use = gs // ns
    if gs >= ns:
        wait_empty(smem + bar_off + 8 * (ns + s), (use - 1) & 1)
    _issue_k128_stage(smem, bar_off, stage_off, s, w, ws, slab0, nk, kb, policy, nsl, sstride)


def _consume_k128(smem, bar_off: int, stage_off: int, ns: int, gs, wait_full, wg, tw, warp, g, release: str,
                  nslab: int = 2, stage_bytes: int = STAGE_BYTES, k_interleave: bool = False):
    """Consumer, stream step ``gs``: wait for the stage's full barrier (``wait_full(bar, parity)``), read
    this thread's words of its ``nslab`` slabs (:func:`_read_k128_stage`) and, unless ``release``
    (Role2GemmConfig.stage_release) is "decoded" (then :func:`_release_k128` after the step's MMAs), arrive on the
    empty barrier. Returns the words."""
    s, use = stage_slot(gs, ns)
    wait_full(smem + bar_off + 8 * s, use & 1)
    words = _read_k128_stage(smem + stage_off + s * stage_bytes, wg, tw, warp, g, nslab, k_interleave)
    if release == "fence":
        fence_proxy_async_shared()
    if not release.startswith("decoded"):
        mbar_arrive(smem + bar_off + 8 * (ns + s))
    return words


def _release_k128(smem, bar_off: int, ns: int, gs):
    """Consumer: arrive on stream step ``gs``'s empty barrier (``stage_release="decoded"``)."""
    mbar_arrive(smem + bar_off + 8 * (ns + stage_slot(gs, ns)[0]))


def stage_k128_step(cfg: Role2GemmConfig, smem, bar_off: int, stage_off: int, ns: int, gs, wait_full, lane, ascl,
                    kl128) -> K128Step:
    """The :class:`K128Step` of stream step ``gs`` (an Int32, or a callable returning it where it depends on loop
    state) fed from the producer's shared-memory stages: :func:`_consume_k128` on first use, and the stage released
    as ``cfg.stage_release`` says. ``lane``: the consumer's (warpgroup, thread in warpgroup, warp, g)."""
    step_of = gs if callable(gs) else (lambda: gs)
    wg, tw, warp, g = lane
    release = ((lambda: _release_k128(smem, bar_off, ns, step_of())) if cfg.stage_release.startswith("decoded")
               else None)
    return K128Step(lambda: _consume_k128(smem, bar_off, stage_off, ns, step_of(), wait_full, wg, tw, warp, g,
                                          cfg.stage_release, cfg.slabs_per_pass, cfg.stage_bytes,
                                          cfg.k_interleave), ascl, kl128,
                    release, EARLY_RELEASE_K32 if cfg.stage_release == "decoded_k32_2" else 3)


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


def copy_rounds_per_call(cfg: "Role2GemmConfig") -> int:
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


def act_tma_phase_flips(cfg: "Role2GemmConfig", nkc: int | None = None) -> int:
    """How one task of ``cfg`` (``nkc`` chunks; default every chunk of K) moves :class:`ActTma`'s ``phases``: bit
    ``b`` flips when the task fills buffer ``b`` an odd number of times (chunk ``kc`` uses buffer ``kc % 2``)."""
    nkc = cfg.k // cfg.kc if nkc is None else nkc
    return ((nkc + 1) // 2 & 1) | ((nkc // 2 & 1) << 1)


def _issue_act_chunk_tma(cfg: "Role2GemmConfig", smem, buf, src: ActTma, kc, b):
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
def for_each_chunk(cfg: "Role2GemmConfig", smem, act_off: int, asc_off: int, row_addr, scale_addr, ctid, ntok, body,
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
                gte = fmin(bf16_round(gv), Float32(clamp))
                up = fmax(fmin(bf16_round(uv), Float32(clamp)), Float32(-clamp))
                y = gte * sigmoid(gte * Float32(alpha), fast_math) * up
                if const_expr(rw_addr is not None):
                    y = y * rws[key]
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


@cute.jit
def _w1_quantize_store(ys, smem, amax_off: int, stage_off: int, ntok, tile, ctid, wg, warp, g, t, q_addr, sf_addr,
                       bm: int, partials: int = 16, k_interleave: bool = False):
    """:func:`_w1_epilogue` once every amax partial is written (``partials`` of them per token): the scales, the E4M3
    bytes of ``ys`` (the values of both slabs, in order), their staging and 16-byte stores."""
    nd = bm // 2
    bar_sync(1, CONSUMER_THREADS)
    if ctid < bm:  # token ctid: its group's amax, scale byte, and 1/scale for everyone (in partial 0's slot)
        m = Float32(0.0)
        for p in cutlass.range_constexpr(partials):  # 16: slab p // 4, warp p % 4; 8: warpgroup p // 4, warp p % 4
            m = fmax(m, ld_shared_f32(smem + amax_off + (p * bm + ctid) * 4))
        scale, inv = ue8m0_scale_for(m)
        st_shared_f32(smem + amax_off + ctid * 4, inv)
        if ctid < ntok:
            st_global_u8(sf_addr(ctid, tile), (float_bits(scale) >> 23) & 0xFF)
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
    for it in cutlass.range_constexpr((bm * 8 + CONSUMER_THREADS - 1) // CONSUMER_THREADS):
        u = ctid + it * CONSUMER_THREADS
        if u < bm * 8:
            n = u >> 3
            c = u & 7
            if n < ntok:
                v = ld_shared_v4(smem + stage_off + n * W1_STAGE_STRIDE + c * 16)
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
    address of token n's 256 output rows, 16-byte aligned; it may load, e.g. the ring's ``ring_meta`` row). ``dst_of`` runs once per token, in thread ``n``, before
    the staging, and its address is handed over through shared memory at ``dst_off`` (8 B per token), so the loads
    behind it run under the staging instead of before every store. ``efac=None`` (role4's shared expert): no factor,
    the multiply is not emitted. The caller orders the next use of either area.

    ``after_loads()``, when given, runs in every consumer thread after the barrier that follows the last ``dst_of``
    load and before the first store; its result is returned. A release there orders every global read of the task
    (the mainloop's, ``dst_of``'s) and no store of it: its fence finds nothing of the task to wait for.
    ``loads_barrier``: that barrier's (id, threads); :data:`SIGNAL_BAR` hands the task to the signal warp there
    (``Role2GemmConfig.signal_warp``), which then releases instead of ``after_loads``. Pass 1 of
    ``Role2GemmConfig.slab_passes = 2`` (``stash_off >= 0``): ``acc`` holds the warpgroup's second slab and the
    first slab's BF16 values wait at ``stash_off`` (:func:`w2_stash_slab`)."""
    nd = bm // 2
    wg, warp, _, _, _ = _consumer_lane(ctid)
    dst = Int64(0)
    if ctid < bm:
        if ctid < ntok:
            dst = dst_of(ctid)
    bar_sync(1, CONSUMER_THREADS)  # every warpgroup's last wgmma has read the activation chunk
    # one stmatrix per 8 tokens: the four 8 x 8 accumulator fragments (slab s2, row half h) of tokens 8q..8q+7 as
    # BF16 pairs, stored transposed, so each token's 8 weight rows land as one 16-byte chunk (lane 8j + c names token
    # 8q + c's chunk of matrix j); 32 two-byte stores with 4-way bank conflicts before (session 24)
    lane = ctid & 31
    mj, mc = lane >> 3, lane & 7
    chunk = wg * 16 + (mj >> 1) * 8 + 2 * warp + (mj & 1)  # (wg*128 + s2*64 + 16*warp + 8h) / 8 for matrix mj
    for q in cutlass.range_constexpr(nd // 4):
        stmatrix_x4_trans(smem + w2_stage_chunk_off(stage_off, 8 * q + mc, chunk),
                          *[_w2_stage_pair(acc, efac, smem, stash_off, ctid, nd, q, j) for j in range(4)])
    if ctid < bm:
        st_shared_u64(smem + dst_off + ctid * 8, dst)
    bar_sync(*loads_barrier)
    early = after_loads() if after_loads is not None else None
    units = bm * 32
    for it in cutlass.range_constexpr((units + CONSUMER_THREADS - 1) // CONSUMER_THREADS):
        u = ctid + it * CONSUMER_THREADS
        if u < units:
            n = u >> 5
            c = u & 31
            if n < ntok:
                v = ld_shared_v4(smem + w2_stage_chunk_off(stage_off, n, c))
                st_global_v4(ld_shared_u64(smem + dst_off + n * 8) + Int64(16 * c), v[0], v[1], v[2], v[3])
    return early


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


def build_role2_gemm(cfg: Role2GemmConfig):
    """Return ``(host_fn, kernel_fn)`` for ``cfg``: a ``@cute.jit`` launcher (grid.y = blocks) and the
    ``@cute.kernel`` it launches. Parameters of the kernel, in order (all Int64 addresses unless
    noted): w, ws, ef, act, asc, bexp, bntok, aux (W1: rw FP32 [b][BM]; W2: rowidx Int32 [b][BM]),
    out, outs (W1: l2 scales; W2: unused, pass 0)."""
    if cfg.slab_passes != 1:
        raise ValueError("role2 slab_passes=2 is built by the persistent kernels (role2_persistent, role2_ring)")
    BM, K, KC = cfg.bm, cfg.k, cfg.kc
    NK128 = K // 128
    ND = BM // 2  # accumulator registers per m64 slot per thread
    NT = cfg.row_tiles
    W1 = cfg.mode == "w1"
    PIPE = cfg.pipelined
    P0 = PRODUCER_THREADS if PIPE else 0  # first consumer thread
    CT = CONSUMER_THREADS
    NS = cfg.stages
    I_COLS = cfg.rows // 2
    GS = cfg.act_scale_group
    NGS, NKG = KC // GS, K // GS  # activation scale groups per chunk / in total
    NSLAB = cfg.rows // 64
    ACT_OFF, ASC_OFF = 0, cfg.act_buffers * cfg.act_buffer_bytes
    AMAX_OFF = ASC_OFF + cfg.act_buffers * cfg.asc_buffer_bytes
    assert ASC_OFF >= BM * 512, "the W2 epilogue stages [BM][256] BF16 in the activation area"
    STAGE_OFF = 1024 * ((cfg.misc_bytes + 1023) // 1024)
    BAR_OFF = STAGE_OFF + NS * STAGE_BYTES  # full[NS] then empty[NS], 8 B each
    alpha, clamp = float(cfg.alpha), float(cfg.clamp)
    TMO = int(cfg.timeout_ns)

    @cute.kernel
    def role2_gemm_kernel(w: Int64, ws: Int64, ef: Int64, act: Int64, asc: Int64, bexp: Int64, bntok: Int64,
                          aux: Int64, out: Int64, outs: Int64):
        tid, _, _ = cute.arch.thread_idx()
        ntile, blk, _ = cute.arch.block_idx()
        tid = Int32(tid)
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        expert = ld_global_s32(bexp + Int64(blk) * 4)
        ntok = ld_global_s32(bntok + Int64(blk) * 4)
        policy = evict_first_policy()
        if const_expr(PIPE):
            if tid == 0:
                _init_stage_barriers(smem, BAR_OFF, NS)
            bar_sync(0, P0 + CT)

        if tid < P0:
            # ---------------- producer warpgroup (pipelined variant only) ----------------
            setmaxnreg(cfg.setmaxnreg[0], False)
            if tid == 0:
                if const_expr(not cfg.dev_compute_only):
                    slab0 = Int64(expert) * NSLAB + Int64(ntile) * 4
                    for kb in cutlass.range(NK128, unroll=1):
                        _produce_k128(smem, BAR_OFF, STAGE_OFF, NS, kb,
                                      lambda bar, ph: mbar_wait_or_trap(bar, ph, TMO), w, ws, slab0, NK128, kb, policy)
        else:
            # ---------------- consumer warpgroups ----------------
            if const_expr(PIPE):
                setmaxnreg(cfg.setmaxnreg[1], True)
            ctid = tid - P0
            wg, warp, g, t, tw = _consumer_lane(ctid)
            efac = ld_global_f32(ef + Int64(expert) * 4)
            slabs = [Int64(expert) * NSLAB + Int64(ntile) * 4 + Int64(wg * 2 + sl) for sl in range(2)]
            wbases = [w + slabs[sl] * NK128 * 4096 + Int64(tw) * 32 for sl in range(2)]
            sbases = [ws + slabs[sl] * NK128 * 256 + Int64(warp * 8 + g) * 8 for sl in range(2)]
            acc = cute.make_rmem_tensor((2 * ND,), Float32)
            for i in cutlass.range_constexpr(2 * ND):
                acc[i] = Float32(0.0)
            wbuf = cute.make_rmem_tensor((2 * 20,), Int32)  # 2 K128 stages x (16 weight + 4 scale) words
            if const_expr(not PIPE):
                _load_k128(wbuf, 0, Int32(0), wbases, sbases, policy)

            SPC = cfg.mma_steps_per_call

            def chunk_mma(kc, act_buf, asc_buf, prefetch):
                for k2 in cutlass.range(KC // (128 * SPC), unroll=1):
                    steps = []
                    for h in cutlass.range_constexpr(SPC):
                        kl128 = k2 * SPC + h  # K128 index within the chunk
                        kb = kc * (KC // 128) + kl128
                        # activation scales of this thread's tokens for this K128
                        ascl = TokenScales(asc_buf, kl128, t, BM, GS)
                        if const_expr(PIPE):
                            steps.append(stage_k128_step(cfg, smem, BAR_OFF, STAGE_OFF, NS, kb,
                                                         (lambda bar, ph: None) if cfg.dev_compute_only else
                                                         (lambda bar, ph: mbar_wait_or_trap(bar, ph, TMO)),
                                                         (wg, tw, warp, g), ascl, kl128))
                        else:
                            def fetch(h=h, kb=kb):
                                nxt = kb + 1 - Int32(kb + 1 >= NK128)  # last K128: harmless reload of itself
                                _load_k128(wbuf, 1 - h, nxt, wbases, sbases, policy)
                                return [wbuf[h * 20 + r] for r in range(20)]
                            steps.append(K128Step(fetch, ascl, kl128))
                    if const_expr(prefetch is not None):
                        steps[-1].issued = lambda k2=k2: prefetch(k2)
                    _mma_k128_steps(steps, acc, act_buf, BM, cfg.lag, fold=cfg.fold_scales, overlap=PIPE,
                                    prescaled=cfg.staged_fold_scale, slab_groups=cfg.slab_groups)

            for_each_chunk(cfg, smem, ACT_OFF, ASC_OFF, lambda tok: act + (Int64(blk) * BM + Int64(tok)) * K,
                           lambda kc, tok, kk: _token_major_scale_addr(asc, W1, blk, BM, NKG, kc, NGS, tok, kk),
                           ctid, ntok, chunk_mma)

            # ---------------- epilogues ----------------
            if const_expr(W1):
                _w1_epilogue(acc, smem, AMAX_OFF, ACT_OFF, efac, ntok, ntile, wg, warp, g, t,
                             lambda n: aux + (Int64(blk) * BM + Int64(n)) * 4,
                             lambda n, col: out + (Int64(blk) * BM + Int64(n)) * I_COLS + Int64(col),
                             lambda n, grp: (outs + (Int64(blk) * BM + Int64(n)) * (I_COLS // L2_SCALE_GROUP)
                                             + Int64(grp)), BM, alpha, clamp, fast_math=cfg.fast_math)
            else:
                # token n's output row: out[rowidx[blk][n]][rows], this task's 256 rows
                w2_epilogue(acc, efac, smem, ACT_OFF, AMAX_OFF, ntok, ctid,
                            lambda n: row_table_dst(out, aux + (Int64(blk) * BM + Int64(n)) * 4, cfg.rows, ntile), BM)

    @cute.jit
    def role2_gemm_host(w: Int64, ws: Int64, ef: Int64, act: Int64, asc: Int64, bexp: Int64, bntok: Int64,
                        aux: Int64, out: Int64, outs: Int64, nblocks: Int32):
        role2_gemm_kernel(w, ws, ef, act, asc, bexp, bntok, aux, out, outs).launch(
            grid=[NT, nblocks, 1], block=[cfg.threads, 1, 1], smem=cfg.smem_bytes, **cfg.occupancy_launch)

    return role2_gemm_host, role2_gemm_kernel
