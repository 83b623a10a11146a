"""THE workspace layout: every offset in the symmetric workspace, defined once (paper §4.1-4.6).

Kernels (build side) and the runtime both import this module; nothing else computes an offset.
One :class:`WorkspaceLayout` describes one rank's copy of the single symmetric allocation (every
rank's copy has the same layout; peers are reached through the peer descriptor's signed offsets).

Regions, in allocation order (each 256-byte aligned — TMA needs 16 B, 256 keeps every region on
its own cache lines so signals never share a line with data):

inputs (written by the caller, read locally and by peers during the pull)
  x             [capacity, H]            u8 (E4M3FN bytes)
  x_sf          [capacity, H/128]        f32 (Hopper: FP32 per-128 scales) | i32 (Blackwell: 4 packed UE8M0 per-32 scales)
  topk_idx      [capacity, k]            i32  (global expert id; -1 = no expert)
  topk_weights  [capacity, k]            f32
token ring (role1 -> role2), ring_blocks blocks of up to bm_max token rows
  ring_x        [ring_blocks, bm_max, H]        u8
  ring_sf       [ring_blocks, H/128, sf_rows]   f32/i32, MN-major (sf_rows = bm_max rounded per arch)
  ring_meta     [ring_blocks, bm_max, 4]        i32: routing weight (f32 bits), src_rank, src_token, topk slot
  ring_block    [ring_blocks, 4]                i32: expert, token count, pool block, generation
L2 activation ring (role2 W1 epilogue -> role2 W2)
  l2_x          [ring_blocks, bm_max, I]        u8
  l2_sf         Hopper: [ring_blocks, bm_max, I/128] u8 (UE8M0 per 128 along I, token-major: the numerics
                reference's requantisation, written by role2's W1 epilogue, read by its W2 staging);
                Blackwell: [ring_blocks, I/128, sf_rows] i32 (4 packed UE8M0 per-32 scales, MN-major).
per-ring-block signals (device-persistent; generation-tagged values, reset in-kernel by role3)
  l1_full_count [ring_blocks] u32   released by role1: == BM*(gen+1) when generation gen is full
  l1_empty_count[ring_blocks] u32   released by role2 when a block's activations are consumed
  l2_full_mask  [ring_blocks] u64   one bit per finished W1 N128 tile (2I/128 <= 64)
  l2_empty_count[ring_blocks] u32   released when a block's L2 activations are consumed
routing / counters
  send_count    [E] u64                 packed (contributors << 32) | tokens, local send counter
  recv_count    [2, E_local, P] u64     per-expert receive counters, double-buffered by parity
  recv_prefix   [2, E_local, P] u32     prefix sums published beside the counts
  src_index     [E_local, P, capacity] i32  routing entries (src_token << 5 | slot) written by peers
  expert_stats  [E_local] u64           optional per-expert receive statistics
persistent control (never reset between replays)
  tag1_barrier  [P] u32 arrivals from each peer + [1] u32 phase   (phase-encoded, paper §4.3 step 5)
  recv_parity   [1] u32                 generation N mod 2 consumed by this replay
  combine_ready [P] u64                 readiness generation published by each peer (release/acquire)
  selftest      [64] u32                handshake self-test state (producer/consumer generations, payload)
combine (role2 -> role3)
  combine       [k + 1, capacity, H] bf16   slot k holds the shared expert's output
dispatch_grid [1] u64                   role1's persistent grid-barrier counter (only grows)
shared experts (role4, SM90; present only when ``spec.shared_experts``, appended so nothing above moves)
  shared_l2_x   [capacity, I] u8        shared W1 -> W2 intermediate (E4M3), written and read by role4
  shared_l2_sf  [capacity, I/128] u8    its UE8M0 scales per 128 along I (numerics reference step 4)
  shared_sync   [2 + ceil(capacity / min BM)] u32   word 0 task ticket, word 1 exit count, then one W1-done
                count per token block; role4's last CTA zeroes them before it exits (persistent otherwise)
  shared_split_count [SHARED_SPLIT_MAX_BLOCKS, 2I/256 + H/256] u32   split-K arrivals per (token block, tile);
                the last of a tile's splits zeroes its word (persistent otherwise)
  shared_partials [SHARED_SPLIT_ROWS * 256 * (2I/256 * s1 + H/256 * s2)] f32   split-K FP32 partials
                (``shared_partial_slot``; s1, s2 = ``heuristics.shared_split_k``, the full splits; a call with more
                rows runs fewer: ``heuristics.shared_split_for_rows``)

role2's activation tensor maps (appended after dispatch_grid, layout version 5; Hopper)
  act_maps      [8 x 128] u8            one cuTensorMap per (BM, ring_x | l2_x) (``act_map_slot``), written once
                at set-up by ``gcmoe_runtime.workspace.act_tma.write_act_maps``; read by role2's act_tma builds
role2's W1 split-K at small loads (appended last, layout version 6, session 21; Hopper; ``heuristics.W1_SPLIT``)
  w1_split_count [W1_SPLIT_MAX_BLOCKS, 2I/256] u32   arrivals per (pool block, W1 tile); the last arrival zeroes
                its word (persistent otherwise)
  w1_partials   [W1_SPLIT_MAX_BLOCKS, 2I/256, W1_SPLIT, 256 * W1_SPLIT_BM] f32   each split's FP32 accumulators,
                thread-major (``w1_partial_slot``)
role2's task trace (appended last, layout version 7, session 23; Hopper; written only by builds with
``role2_ring.TRACE``, a dev instrument: the shipped builds never touch it)
  role2_trace   [ROLE2_TRACE_TASKS, ROLE2_TRACE_WORDS] u64   per task of the replay (task index = the static order's):
                ``%globaltimer`` stamps and coordinates (``TRACE_*`` word indices below); tasks past the first
                ROLE2_TRACE_TASKS write only the last row's spare word; read by ``gcmoe_runtime.bench.task_trace``
role2's task ticket (appended last, layout version 10, session 39; Hopper)
  role2_ticket  [1] u32                 the 384-thread ring builds' producer threads claim each CTA's tasks after
                its first two from it (one relaxed ``atom.add`` each: task 2G + old value); the claim that returns
                ``ntasks - G - 1`` (a launch makes exactly ``ntasks - G``) zeroes it for the next launch
                (role2_ring, "Dynamic tasks", ``STATIC_ROUNDS``)
role2's placement counters (appended last, layout version 11, session 46; Hopper)
  role2_place   [ROLE2_PLACE_WORDS] u32  the two-CTA ring builds' CTAs take their logical index from where they run
                (role2_ring, "Placement"): word ``PLACE_CLASS + c`` counts class ``c``'s CTAs (0: first on its SM,
                1: the rest), ``PLACE_STARTED`` the CTAs started, ``PLACE_SM + smid % ROLE2_PLACE_SMS`` the CTAs
                per SM; the launch's last CTA to start zeroes every word for the next launch

Ring capacity (paper §4.3): max routed assignments A = capacity * P * min(k, E_local); the pool of
logical blocks is ceil(A / BM) + E_local; the live ring holds min(pool, live_model) blocks where
the live model is (compute clusters) * (L1 waves + L2 waves) — the number of blocks the compute
partition can have in flight. The ring is sized for the largest byte need over the BM candidates, so
one workspace serves every BM the heuristic may pick; :meth:`WorkspaceLayout.check_partition`
refuses a partition whose live model exceeds the ring (never start with an undersized ring).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from gcmoe_runtime.abi import PEER_MAX_RANKS
from gcmoe_runtime.artifacts.record import canonical_json, sha256_hex
from gcmoe_runtime.heuristics import (SHARED_SPLIT_MAX_BLOCKS, SHARED_SPLIT_ROWS, W1_SPLIT,  # models live there
                                      W1_SPLIT_BM, W1_SPLIT_MAX_BLOCKS, ring_capacity, shared_split_k)
from gcmoe_runtime.numerics.recipes import SM90_INTERMEDIATE_SCALE_GROUP

#: 2: Hopper l2_sf is UE8M0 per 32 (u8 [rb, bm_max, I/32]); 3: role4 split-K regions appended; 4: Hopper l2_sf and
#: shared_l2_sf are UE8M0 per 128 along I (u8 [.., I/128]; every later offset moves); 5: act_maps appended (role2's
#: activation tensor maps; no offset moves); 6: role2's W1 split-K regions appended on Hopper (no offset moves);
#: 7: role2's task trace appended on Hopper (no offset moves); 8: act_maps holds BM 48's two maps too (slots 8-9,
#: appended: the other BMs' slots keep their places; every region after act_maps moves by 256 bytes); 9: act_maps
#: holds BM 80's two maps too (slots 10-11, appended the same way); 10: role2's task ticket appended on Hopper (no
#: offset moves); 11: role2's placement counters appended on Hopper (no offset moves); 12: role2_trace rows of 16
#: words (the task's top in parts) for 20 480 tasks, the region's bytes unchanged (no offset moves)
LAYOUT_VERSION = 12
#: act_maps: one 128-byte tensor map per (BM in 8 / 16 / 32 / 64 / 48 / 80, ring_x or l2_x): :func:`act_map_slot`
ACT_MAP_BYTES = 128
ACT_MAP_BMS = (8, 16, 32, 64, 48, 80)
ACT_MAP_SLOTS = 2 * len(ACT_MAP_BMS)


def act_map_slot(mode: str, bm: int) -> int:
    """The act_maps slot of role2's ``mode`` ("w1": ``ring_x``, "w2": ``l2_x``) activation map at ``bm``."""
    if mode not in ("w1", "w2") or bm not in ACT_MAP_BMS:
        raise LayoutError(f"act_maps: no slot for mode={mode!r} bm={bm} (modes w1 / w2, bm in {ACT_MAP_BMS})")
    return 2 * ACT_MAP_BMS.index(bm) + (mode == "w2")
REGION_ALIGN = 256

DTYPE_BYTES = {"u8": 1, "i32": 4, "u32": 4, "f32": 4, "u64": 8, "bf16": 2}
MAX_EXPERTS = 2048  # paper Appendix A: static signal sizing
MAX_COMBINE_SLOTS = 32  # k + 1 shared <= 32: one warp lane per combine slot
SELFTEST_WORDS = 64
#: role4's shared_sync words before the per-token-block W1-done counts (ticket, exit count)
SHARED_SYNC_TICKET = 0
SHARED_SYNC_EXIT = 1
SHARED_SYNC_BLOCKS = 2

#: Selftest region word indices (handshake self-test kernels).
SELFTEST_COUNTER = 0  # generation-tagged counter released by the producer
SELFTEST_PRODUCER_GEN = 1  # producer's persistent replay count
SELFTEST_CONSUMER_GEN = 2  # consumer's persistent replay count
SELFTEST_FINALIZE_GEN = 3  # finalize's persistent replay count
SELFTEST_ERRORS = 4  # payload mismatches seen by the consumer
SELFTEST_PAYLOAD = 8  # producer writes payload words [8, 8 + SELFTEST_PAYLOAD_WORDS)
SELFTEST_PAYLOAD_WORDS = 32

# role2's task trace (dev builds with ``role2_ring.TRACE``): one row of u64 words per task, by static task index
ROLE2_TRACE_TASKS = 20480  # GLM-5.2 P = 1 T = 256: ~14 000 tasks (x ROLE2_TRACE_WORDS: the bytes of layout v7-11)
ROLE2_TRACE_WORDS = 16
#: role2_place (role2_ring, "Placement"; host mirror ``role2_ring_config.placed_cta``): word indices
PLACE_CLASS = 0  # two words: CTAs of class 0 (the first on their SM) and class 1 (the rest) started so far
PLACE_STARTED = 2  # CTAs started so far (the one that reads grid - 1 zeroes the region)
PLACE_SM = 4  # ROLE2_PLACE_SMS words: CTAs started on each SM (indexed by %smid modulo ROLE2_PLACE_SMS)
ROLE2_PLACE_SMS = 256  # >= the SM count of any Hopper / Blackwell part; an alias would only merge two SMs' classes
ROLE2_PLACE_WORDS = PLACE_SM + ROLE2_PLACE_SMS
TRACE_CLAIM = 0  # the producer thread begins the task's acquires (l1_full, header)
TRACE_READY = 1  # ... has them all (a W2 task: every W1 mask bit of its block) and publishes the record
TRACE_START = 2  # consumer thread 0 has the record (the task's top)
TRACE_END = 3  # consumer thread 0 is past the task's last barrier (its epilogue issued)
TRACE_WHERE = 4  # smid | cta << 32 (the logical index where role2 places its CTAs, role2_ring "Placement")
TRACE_WHAT = 5  # is1 (0 W2, 1 W1) | tile << 8 | split index << 16 | pool block << 24 | generation << 48
TRACE_LAST_STAGE = 6  # the producer has issued the task's last weight stage
TRACE_CHUNK0 = 7  # consumer thread 0: the task's first activation chunk landed (every consumer past its barrier)
TRACE_KLOOP_END = 8  # ... the task's K loop is done (every wgmma waited), before the epilogue (or split hand-over)
# the task's top (TRACE_START -> TRACE_CHUNK0) in parts, consumer thread 0 each (layout v12, session 48):
TRACE_TOP_BAR = 9  # past the top's barrier (every consumer done with the previous task's buffers)
TRACE_CHUNK0_ISSUED = 10  # has issued the first chunk's copy (a W2 task: after its W1 bits' wait)
TRACE_CHUNK0_SCALES = 11  # has the first chunk's token scales (its global loads) stored to shared memory
TRACE_CHUNK0_LANDED = 12  # its wait for the first chunk's copy is over (mbarrier / cp.async), before the barrier
TRACE_SPARE = 15  # unused; the sink of tasks past ROLE2_TRACE_TASKS (role2_ring's trace_addr)


def shared_split_blocks(spec: "LayoutSpec") -> int:
    """Token blocks whose role4 tiles may run split (``heuristics.SHARED_SPLIT_MAX_BLOCKS``; at least the blocks of
    ``SHARED_SPLIT_ROWS`` rows at the smallest BM)."""
    return max(1, SHARED_SPLIT_MAX_BLOCKS, SHARED_SPLIT_ROWS // min(spec.bm_candidates))


def shared_partial_slot(w2: bool, block: int, tile: int, split: int, bm: int, hidden: int, intermediate: int,
                        splits: int) -> int:
    """First float of role4's split-K partial of (token block, row tile, split) in ``shared_partials`` for a call that
    runs ``splits`` splits of this GEMM (``heuristics.shared_split_for_rows``): W1 slots ``[blocks][2I/256][splits]``
    from the region's start, W2 slots ``[blocks][H/256][splits]`` from ``SHARED_SPLIT_ROWS x 256 x 2I/256 x s1``, each
    ``BM x 256`` floats (thread-major: float ``i`` of consumer thread ``c`` at ``256 i + c``); blocks x BM x splits
    stays within SHARED_SPLIT_ROWS x the full split, so every slot fits. The kernel evaluates this same function on
    its DSL integers."""
    s1, _ = shared_split_k(hidden, intermediate)
    nt1, nt2 = 2 * intermediate // 256, hidden // 256
    slot = bm * 256
    if not w2:
        return ((block * nt1 + tile) * splits + split) * slot
    return SHARED_SPLIT_ROWS * 256 * nt1 * s1 + ((block * nt2 + tile) * splits + split) * slot


def w1_partial_slot(block: int, tile: int, split: int, nt1: int):
    """First float of role2's W1 split-K partial of (pool block, W1 tile, split) in ``w1_partials``
    (``[W1_SPLIT_MAX_BLOCKS, nt1, W1_SPLIT, 256 * W1_SPLIT_BM]``; the kernel calls this on its DSL integers)."""
    return ((block * nt1 + tile) * W1_SPLIT + split) * (256 * W1_SPLIT_BM)


def shared_partial_floats(hidden: int, intermediate: int) -> int:
    """Size of ``shared_partials``: every split slot of ``SHARED_SPLIT_ROWS`` token rows (the same at every BM)."""
    s1, s2 = shared_split_k(hidden, intermediate)
    return SHARED_SPLIT_ROWS * 256 * (2 * intermediate // 256 * s1 + hidden // 256 * s2)


class LayoutError(ValueError):
    pass


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclass(frozen=True)
class LayoutSpec:
    """Everything the layout depends on. Equal specs give byte-identical layouts."""

    arch: str  # "sm_90a" | "sm_100a" | "sm_103a"
    world_size: int  # P
    num_experts: int  # E (global)
    topk: int  # k
    hidden: int  # H
    intermediate: int  # I
    capacity: int  # per-rank token capacity T_max
    bm_candidates: tuple[int, ...]
    compute_sms: int  # the real compute-partition size the ring is checked against
    shared_experts: bool = False
    cluster_size: int = 2  # role2 cluster (paper Table 1: (2,1,1))
    l1_waves: int = 2  # L1 waves pre-published before the first L2 wave
    l2_waves: int = 1
    # the ring holds the whole logical pool (no block is reused within a replay): needed when role2 does not run
    # beside role1 (overlap off, the serialised baselines), where role1 would wait for a block's previous
    # generation to be consumed by a role2 that starts only after role1 ends (trap code 6)
    whole_pool: bool = False

    def __post_init__(self) -> None:
        def bad(fieldname: str, value: Any, rule: str) -> None:
            raise LayoutError(f"workspace layout: {fieldname}={value!r} {rule}")

        if self.arch not in ("sm_90a", "sm_100a", "sm_103a"):
            bad("arch", self.arch, "is not one of sm_90a, sm_100a, sm_103a")
        if not 1 <= self.world_size <= PEER_MAX_RANKS:
            bad("world_size", self.world_size, f"outside 1..{PEER_MAX_RANKS} (peer descriptor limit)")
        if not 1 <= self.num_experts <= MAX_EXPERTS:
            bad("num_experts", self.num_experts, f"outside 1..{MAX_EXPERTS}")
        if self.num_experts % self.world_size:
            bad("num_experts", self.num_experts, f"is not divisible by world_size {self.world_size}")
        if not 1 <= self.topk <= self.num_experts:
            bad("topk", self.topk, f"outside 1..num_experts ({self.num_experts})")
        if self.topk + 1 > MAX_COMBINE_SLOTS:  # the shared slot is always reserved
            bad("topk", self.topk, f"needs k + 1 <= {MAX_COMBINE_SLOTS} (one warp lane per combine slot)")
        if self.hidden <= 0 or self.hidden % 128:
            bad("hidden", self.hidden, "must be a positive multiple of 128")
        if self.intermediate <= 0 or self.intermediate % 128:
            bad("intermediate", self.intermediate, "must be a positive multiple of 128")
        if 2 * self.intermediate // 128 > 64:
            bad("intermediate", self.intermediate, "gives 2I/128 > 64 W1 tiles (64-bit l2_full_mask)")
        if self.capacity < 1:
            bad("capacity", self.capacity, "must be >= 1")
        if not self.bm_candidates or any(b < 1 or b > 256 or b % 8 for b in self.bm_candidates):
            bad("bm_candidates", self.bm_candidates, "must be non-empty multiples of 8 in 8..256")
        if self.compute_sms < 1:
            bad("compute_sms", self.compute_sms, "must be >= 1")
        if self.cluster_size < 1 or self.l1_waves < 1 or self.l2_waves < 1:
            bad("cluster_size/l1_waves/l2_waves", (self.cluster_size, self.l1_waves, self.l2_waves), "must be >= 1")

    @property
    def experts_per_rank(self) -> int:
        return self.num_experts // self.world_size

    @property
    def blackwell(self) -> bool:
        return self.arch != "sm_90a"


@dataclass(frozen=True)
class RingModel:
    bm: int
    assignments: int
    pool_blocks: int
    live_model: int
    live_blocks: int  # blocks the ring must hold for this BM


def ring_model(spec: LayoutSpec, bm: int, compute_sms: int | None = None) -> RingModel:
    """Paper §4.3 maximum-in-flight model for one BM: the logical pool from heuristics.ring_capacity,
    the live blocks from the actual compute partition (clusters x (L1 + L2 waves))."""
    rc = ring_capacity(spec.capacity, spec.world_size, spec.topk, spec.num_experts, bm)
    sms = spec.compute_sms if compute_sms is None else compute_sms
    assignments, pool = rc.assignments, rc.logical_blocks
    live_model = max(1, sms // spec.cluster_size) * (spec.l1_waves + spec.l2_waves)
    return RingModel(bm, assignments, pool, live_model, pool if spec.whole_pool else min(pool, live_model))


def sf_rows(spec: LayoutSpec, bm: int) -> int:
    """Scale rows per ring block (MN-major): Blackwell's UTCCP wants align(BM, 128) rows
    (paper Eq. 3); Hopper's FP32 scales need 16-byte rows, i.e. a multiple of 4."""
    return _align(bm, 128) if spec.blackwell else _align(bm, 4)


@dataclass(frozen=True)
class Region:
    name: str
    offset: int
    dtype: str
    shape: tuple[int, ...]
    persistent: bool  # survives replays untouched by role3's reset
    doc: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]

    @property
    def end(self) -> int:
        return self.offset + self.nbytes


@dataclass(frozen=True)
class WorkspaceLayout:
    spec: LayoutSpec
    ring_blocks: int
    bm_max: int
    sf_rows_max: int
    regions: dict[str, Region] = field(repr=False)
    total_bytes: int = 0
    version: int = LAYOUT_VERSION

    @classmethod
    def build(cls, spec: LayoutSpec) -> "WorkspaceLayout":
        models = [ring_model(spec, bm) for bm in spec.bm_candidates]
        ring_blocks = max(m.live_blocks for m in models)
        bm_max = max(spec.bm_candidates)
        sfr = max(sf_rows(spec, bm) for bm in spec.bm_candidates)
        P, E, k, H, I, T = spec.world_size, spec.num_experts, spec.topk, spec.hidden, spec.intermediate, spec.capacity
        el = spec.experts_per_rank
        sf_dtype = "i32" if spec.blackwell else "f32"
        rb = ring_blocks
        table = [
            ("x", "u8", (T, H), False, "FP8 activations (caller-written)"),
            ("x_sf", sf_dtype, (T, H // 128), False, "activation scales (caller-written)"),
            ("topk_idx", "i32", (T, k), False, "routing expert ids (caller-written)"),
            ("topk_weights", "f32", (T, k), False, "routing weights (caller-written)"),
            ("ring_x", "u8", (rb, bm_max, H), False, "token ring activations"),
            ("ring_sf", sf_dtype, (rb, H // 128, sfr), False, "token ring scales, MN-major"),
            ("ring_meta", "i32", (rb, bm_max, 4), False, "per-token weight bits, src_rank, src_token, slot"),
            ("ring_block", "i32", (rb, 4), False, "per-block expert, tokens, pool block, generation"),
            ("l2_x", "u8", (rb, bm_max, I), False, "L2 activation ring"),
            # Hopper: the W1 epilogue requantises with UE8M0 per SM90_INTERMEDIATE_SCALE_GROUP along I (numerics
            # reference step 4), token-major
            (("l2_sf", "i32", (rb, I // 128, sfr), False, "L2 activation scales, 4 packed UE8M0/32, MN-major")
             if spec.blackwell else
             ("l2_sf", "u8", (rb, bm_max, I // SM90_INTERMEDIATE_SCALE_GROUP), False,
              "L2 activation scales, UE8M0 per 128 along I")),
            ("l1_full_count", "u32", (rb,), False, "signal: block filled (BM*(gen+1))"),
            ("l1_empty_count", "u32", (rb,), False, "signal: block activations consumed"),
            ("l2_full_mask", "u64", (rb,), False, "signal: finished W1 N128 tiles"),
            ("l2_empty_count", "u32", (rb,), False, "signal: block L2 activations consumed"),
            ("send_count", "u64", (E,), False, "packed (contributors<<32)|tokens per global expert"),
            ("recv_count", "u64", (2, el, P), False, "per-expert receive counters by parity"),
            ("recv_prefix", "u32", (2, el, P), False, "per-expert receive prefix sums by parity"),
            ("src_index", "i32", (el, P, T), False, "routing entries (src_token<<5|slot) from peers"),
            ("expert_stats", "u64", (el,), False, "optional per-expert receive statistics"),
            ("tag1_barrier", "u32", (P + 1,), True, "tag-1 barrier arrivals per peer + phase"),
            ("recv_parity", "u32", (1,), True, "receive-counter parity of the next replay"),
            ("combine_ready", "u64", (P,), True, "combine readiness generation per peer"),
            ("selftest", "u32", (SELFTEST_WORDS,), True, "handshake self-test state"),
            ("combine", "bf16", (k + 1, T, H), False, "combine buffer: k routed slots + shared slot"),
            # appended (issue 6, role1): keeps every earlier offset unchanged
            ("dispatch_grid", "u64", (1,), True, "role1 persistent grid-barrier arrival counter"),
            # appended (session 14, role2's act_tma): keeps every earlier offset unchanged
            ("act_maps", "u8", (ACT_MAP_SLOTS * ACT_MAP_BYTES,), True,
             "role2 activation tensor maps (ring_x, l2_x per BM), written once at set-up (act_tma)"),
        ]
        if spec.shared_experts:
            # appended (issue 5, role4): only with fused shared experts, so no other layout changes at all
            nsb = -(-T // min(spec.bm_candidates))  # token blocks at the smallest BM
            table += [
                ("shared_l2_x", "u8", (T, I), False, "role4 shared W1 -> W2 intermediate, E4M3"),
                ("shared_l2_sf", "u8", (T, I // SM90_INTERMEDIATE_SCALE_GROUP), False,
                 "role4 intermediate scales, UE8M0 per 128 along I"),
                ("shared_sync", "u32", (SHARED_SYNC_BLOCKS + nsb,), True,
                 "role4: task ticket, exit count, per-token-block W1-done counts (role4 resets them itself)"),
                # appended (session 4, role4 split-K): nothing above moves
                ("shared_split_count", "u32", (shared_split_blocks(spec), 2 * I // 256 + H // 256), True,
                 "role4 split-K arrivals per (token block, W1 tile | W2 tile); the last arrival zeroes its word"),
                ("shared_partials", "f32", (shared_partial_floats(H, I),), False,
                 "role4 split-K FP32 partials (W1 slots, then W2 slots), summed by each tile's last arrival"),
            ]
        if not spec.blackwell:
            # appended (session 21, role2's W1 split-K): last, so nothing above moves
            table += [
                ("w1_split_count", "u32", (W1_SPLIT_MAX_BLOCKS, 2 * I // 256), True,
                 "role2 W1 split-K arrivals per (pool block, W1 tile); the last arrival zeroes its word"),
                ("w1_partials", "f32", (W1_SPLIT_MAX_BLOCKS, 2 * I // 256, W1_SPLIT, 256 * W1_SPLIT_BM), False,
                 "role2 W1 split-K FP32 partials, summed by each tile's last arrival"),
                # appended (session 23, role2's task trace; written only by TRACE builds): last, nothing above moves
                ("role2_trace", "u64", (ROLE2_TRACE_TASKS, ROLE2_TRACE_WORDS), False,
                 "role2 task trace (TRACE dev builds only): %globaltimer stamps and coordinates per task"),
                # appended (session 39, role2's dynamic task claims): last, nothing above moves
                ("role2_ticket", "u32", (1,), True,
                 "role2 task ticket: each CTA's producer claims its next task; the launch's last claim zeroes it"),
                # appended (session 46, role2's placement classes): last, nothing above moves
                ("role2_place", "u32", (ROLE2_PLACE_WORDS,), True,
                 "role2 placement counters: class / start / per-SM counts; the launch's last starter zeroes them"),
            ]
        regions: dict[str, Region] = {}
        off = 0
        for name, dt, shape, persistent, doc in table:
            off = _align(off, REGION_ALIGN)
            regions[name] = Region(name, off, dt, tuple(int(s) for s in shape), persistent, doc)
            off = regions[name].end
        total = _align(off, REGION_ALIGN)
        return cls(spec, ring_blocks, bm_max, sfr, regions, total)

    # --- queries ---------------------------------------------------------------------------
    def region(self, name: str) -> Region:
        try:
            return self.regions[name]
        except KeyError:
            raise LayoutError(f"workspace layout has no region {name!r}; regions: {list(self.regions)}") from None

    def offset(self, name: str) -> int:
        return self.region(name).offset

    def blocks_for(self, bm: int) -> int:
        """Ring blocks of ``bm`` tokens that fit (block b at byte b * bm * H in ring_x)."""
        if bm not in self.spec.bm_candidates:
            raise LayoutError(f"BM={bm} is not among this workspace's candidates {self.spec.bm_candidates}")
        return self.ring_blocks

    def check_partition(self, compute_sms: int) -> None:
        """Refuse a compute partition whose in-flight model needs more ring blocks than exist."""
        for bm in self.spec.bm_candidates:
            m = ring_model(self.spec, bm, compute_sms)
            if m.live_blocks > self.ring_blocks:
                raise LayoutError(
                    f"token ring undersized for compute_sms={compute_sms}: BM={bm} needs {m.live_blocks} live "
                    f"blocks, the workspace has {self.ring_blocks} (built for compute_sms={self.spec.compute_sms})"
                )

    def reset_regions(self) -> list[str]:
        """Regions role3 resets in-kernel between replays (all non-persistent signal/counter state)."""
        return ["l1_full_count", "l1_empty_count", "l2_full_mask", "l2_empty_count", "send_count", "expert_stats"]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "spec": asdict(self.spec),
            "ring_blocks": self.ring_blocks,
            "bm_max": self.bm_max,
            "sf_rows_max": self.sf_rows_max,
            "total_bytes": self.total_bytes,
            "regions": {n: {"offset": r.offset, "dtype": r.dtype, "shape": list(r.shape)} for n, r in self.regions.items()},
        }

    def digest(self) -> str:
        """Hash recorded by kernels built against this layout and checked at load."""
        return sha256_hex(canonical_json(self.to_json()))

    # --- torch views (runtime side; torch imported lazily) -----------------------------------
    def view(self, buf: Any, name: str) -> Any:
        """A typed view of region ``name`` into a flat uint8 torch tensor of ``total_bytes``."""
        import torch

        dt = {"u8": torch.uint8, "i32": torch.int32, "u32": torch.int32, "f32": torch.float32,
              "u64": torch.int64, "bf16": torch.bfloat16}
        r = self.region(name)
        if buf.dtype != torch.uint8 or buf.dim() != 1 or buf.numel() < self.total_bytes:
            raise LayoutError(f"workspace view: need a flat uint8 tensor of >= {self.total_bytes} bytes")
        return buf[r.offset : r.end].view(dt[r.dtype]).view(r.shape)
