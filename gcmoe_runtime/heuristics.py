"""Serve-time arithmetic shared by the builder and the runtime (plain Python, no dependencies).

Owns three things, each a pure function of integers:

* the **green partition** (paper §4.2): the compute target ``floor((total - requested) / alignment) * alignment``
  and its validation (>= 32 compute SMs, even compute count, >= 2 dispatch SMs, sum = device SMs);
* the **tile heuristics** that pick the ring block size BM (and, on SM90, the role2 thread variant) from the
  expected tokens per expert (paper §4.4 "Block-size heuristic" and "Hopper path (SM90)");
* the **ring-capacity model** (paper §4.3): ``Tmax * P * min(k, e)`` assignments and
  ``ceil(assignments / BM) + e`` logical ring blocks.

The builder enumerates one role2 variant per tile choice these functions can make for T in [1, capacity];
the runtime calls the very same functions per token count to pick the compiled variant, so the two can
never disagree. gcmoe_runtime never imports gcmoe_build; this module imports nothing of the project.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

# --------------------------------------------------------------------------------------------------
# Architectures and their BM / thread menus
# --------------------------------------------------------------------------------------------------

#: Target architectures the project knows, mapped to their kernel family.
ARCH_FAMILY = {"sm_90a": "sm90", "sm_100a": "sm100", "sm_103a": "sm100"}

#: SM90: BM is the WGMMA N dimension (operand-swapped: weights are the register A operand, m64, and the
#: token block is N), so any multiple of 8 is legal; we compile the power-of-two ladder to 64, 48 (session 29:
#: a one-CTA block that still keeps lag 1's second partial set, which spills at 64; the heuristic's tile at 28-48
#: expected tokens per expert, where one BM 64 block ran at ~50 % of the read bandwidth) and 80 (session 31: one
#: block for an expert of 65-80 tokens, which BM 64 split into a full block and a remainder, streaming its weights
#: twice; BM 80's turns build still keeps every accumulator and partial in registers, BM 96's spills).
SM90_BM_CANDIDATES = (8, 16, 32, 48, 64, 80)
#: role4 (shared experts) builds the power-of-two ladder only: its blocks hold every local token, and 48 was added for
#: the routed spread (above).
SM90_SHARED_BM_CANDIDATES = (8, 16, 32, 64)
#: the largest BM one SM90 ring block uses: an expert's coverage is split into ceil(coverage / this) blocks. 80 (all
#: candidates) is shipped (64 until session 31); a smaller cap trades one large-BM block (one CTA per SM from BM 32 on: two consumer warps
#: per scheduler, ncu session 8) for several BM 16 blocks on the two-CTA build, each streaming the expert's weights
#: again. Measured at 16 (session 8 call F, GLM-5.2 P = 2 T = 256): +7.3 %, so not shipped (an A/B knob for
#: ci/run_with_heuristics.py; the builder enumerates tiles with the shipped value)
SM90_BLOCK_MAX_BM = 80
#: SM90: what one expert's weight pass costs role2 per BM, relative to the two-CTA BM 32 pass, as the heuristic runs
#: each BM (8-32 on the two-CTA build, 48-80 on one CTA; the one-CTA steps are the dear ones: the two-CTA forms issue
#: from twice the warps). Measured in the layer on one H200 (``results/operator/2026-12-03-h200-session33/call-b``,
#: session 32 calls B-C): the P = 8 shares of GLM-5.2 (32 experts) and DSV-4.1-Flash (48) forced onto each tile, role2
#: µs over the routing's expert passes: BM 8 / 16 0.986 (equal passes); BM 16 / 32 0.85 / 0.87-0.89 (GLM-5.2 /
#: DSV-4.1-Flash); BM 48 / 32 1.20 / 1.24; BM 64 / 48 1.21 (GLM-5.2); BM 80 / 64 1.09 (GLM-5.2).
SM90_PASS_COST = {8: 0.86, 16: 0.87, 32: 1.0, 48: 1.22, 64: 1.48, 80: 1.61}
assert set(SM90_PASS_COST) == set(SM90_BM_CANDIDATES)
#: SM90: the narrower wgmma N a BM build's W1 K loop takes for a ring block of at most that many tokens (a branch per
#: task on the block's token count, ``role2_ring_config.narrow_n_build``), with that block pass's cost as above: the BM
#: 80 build runs W1 (two thirds of an expert's weights) of a block of <= 64 tokens at N = 64 (session 36), so an expert
#: below 65 tokens no longer pays all of BM 80's wider MMAs and promotes. Cost measured in the layer (session 36 call
#: A, GLM-5.2 share forced onto each tile, every block narrow at T = 176 / 192): the BM 80 build 4.6 / 4.7 % above BM
#: 64's pass (8.3 % before), 1.48 x 1.047 = 1.55 (predicted 1.52: W1 recovers about two thirds of its share of the gap).
#: The BM 64 build runs W1 of a block of <= 48 tokens at N = 48 the same way (session 36 call B, every block narrow at
#: T = 128: the BM 64 build 3.9 % faster than before, 1.48 x 0.961 = 1.42; predicted 1.40). Neither moves a tile
#: boundary (measured in those calls: BM 48 still 2.4 % faster at T = 160, BM 64 3.5 % faster at 176, BM 64 and 80
#: tie at 208, BM 80 5.9 % faster at 224). The BM 48 build runs W1 of a block of <= 32 tokens at N = 32 (session 36
#: call D, every block narrow at GLM-5.2 share T = 96: 6.1 % faster than before, 1.22 x 0.939 = 1.15; predicted and
#: kept 1.14): it moves the BM 32 -> 48 step one token-count step earlier, as measured there (GLM-5.2 T = 112: BM 48
#: 2.5 % faster than BM 32; DSV-4.1-Flash T = 224: 4.1 %; BM 32 still faster at T = 96 / 208 by 5.2 / 3.7 %).
#: Session 38: where W1 and W2 share one K loop (GLM-5.2's BM 48 / 64 / 80, ``role2_ring_config.shared_loop_build``) W2
#: runs at the narrow N too: every block narrow (call A) the BM 80 build -2.8 / -3.1 % at T = 176 / 192, so 1.55 x 0.970
#: = 1.50; BM 64 -2.3 % at T = 128, 1.42 x 0.977 = 1.39. BM 48 keeps 1.14: DSV-4.1-Flash's BM 48 build (W2 chunk K256
#: beside W1's K512) has no shared loop, and GLM-5.2's -3.2 % at T = 96 (1.10) would move its BM 32 -> 48 step by
#: three tokens (112 -> 109) only.
SM90_NARROW_PASS = {48: (32, 1.14), 64: (48, 1.39), 80: (64, 1.50)}
assert all(bm in SM90_BM_CANDIDATES and n < bm and n % 8 == 0 for bm, (n, _) in SM90_NARROW_PASS.items())
#: SM100 (paper §4.4): 2-CTA tcgen05 MMA, each CTA of the pair owns BM/2 rows; TMEM/SMEM budget caps 240.
SM100_BM_CANDIDATES = (16, 32, 64, 96, 128, 192, 240)
BM_CANDIDATES = {"sm90": SM90_BM_CANDIDATES, "sm100": SM100_BM_CANDIDATES}

#: SM90 role2 thread variants (paper §4.4): one TMA/producer warpgroup + two consumer (decode + WGMMA)
#: warpgroups, or two warpgroups that load and compute themselves.
SM90_THREADS_PIPELINED = 384
SM90_THREADS_NONPIPELINED = 256
#: The 256-thread variant is built for two CTAs per SM (``.minnctapersm 2``: <= 128 registers, activation chunk
#: <= 48 KB) up to this BM; above it the accumulators need more registers and it runs one CTA per SM. The role2
#: build reads this (one fact), the launch facts carry the grid (``compute_sms*2``).
SM90_TWO_CTAS_MAX_BM = 16
#: The 384-thread (pipelined) variant is also built for two CTAs per SM up to this BM (each CTA <= 113 KB of shared
#: memory, 3-5 weight stages, setmaxnreg 32 / 104, W1 and W2 drained per K128 (BM 32: per slab) so that ptxas need not
#: serialise the wgmmas: ``Role2GemmConfig.lag``), and runs that way once a compute SM has at least
#: SM90_PIPELINED_TWO_CTAS_MIN_STEPS K128 weight steps to stream, i.e. each of the two CTAs several tasks. Measured in
#: the layer (P = 2): BM 8 -3..-4 % at T = 4-64 where each CTA has several tasks, +5..+37 % at T = 1-2 where it has
#: one or two and a third of the one-CTA build's stages (session 6; still +2..+30 % at T = 1-2 without the wgmma
#: serialisation, session 7); BM 16 -3.8 / -4.2 % at GLM-5.2 T = 128 / DSV-4.1-Flash T = 256 (session 7 call B).
#: BM 32 fits since session 15 (one slab's commit group at a time: kernel alone -12..-15 % W1, -4..-8 % W2).
SM90_PIPELINED_TWO_CTAS_MAX_BM = 32
#: steps per compute SM from which the two-CTA build runs: GLM-5.2 / DSV-4.1-Flash stream 198-284 steps per SM at
#: T = 2 (where two CTAs lost, P = 2, sessions 6-7) and 321-550 at T = 4 (where they gained), at P = 1, 2 and 8
SM90_PIPELINED_TWO_CTAS_MIN_STEPS = 320
#: the same at P = 1, re-measured on session 19's kernels (call H, alternating layer A/B, routed and + shared): two
#: CTAs -12..-15 % at T = 2 (GLM-5.2 / DSV-4.1-Flash: 284 / 201 steps per SM), -8..-17 % at DSV-4.1-Flash T = 3 (299),
#: +8..+18 % at T = 1 (144 / 101 steps: 128 / 108 W1 tasks for 256 CTAs). With the W1 split-K below (session 21
#: calls A-B, same alternating A/B, two runs per arm): at T = 1 GLM-5.2 (144 steps) -6.3 % routed / -3.0 % + shared,
#: DSV-4.1-Flash (101 steps) +3.7 % / +4.2 % -> the two-CTA build from 125 steps per SM (a threshold between the two
#: measured shapes; the timeline: GLM-5.2's role2 67.6 -> 60.8 µs, DSV-4.1-Flash's 53.4 -> 55.5 µs). P > 1 keeps the
#: rule above until it is re-measured on a multi-GPU machine.
SM90_PIPELINED_TWO_CTAS_MIN_STEPS_P1 = 125
#: SM90 role2 W1 split-K at small loads (session 21): the two-CTA BM 8 ring build with the variant parameter
#: ``w1_split`` = W1_SPLIT (:func:`sm90_w1_split`: only where every replay of T tokens can split, session 22) runs each
#: W1 tile as W1_SPLIT tasks over equal K ranges when a replay's W1 tiles fill at most 1 / W1_SPLIT of its CTAs
#: (GLM-5.2 / DSV-4.1-Flash at P = 1, T = 1: 128 / 108 tiles for 256 CTAs, where half the CTAs had no W1 task), the FP32
#: partials exchanged through the workspace (``w1_split_count``, ``w1_partials``) and summed by the tile's last arrival;
#: at most W1_SPLIT_MAX_BLOCKS pool blocks (the regions' size), one ring generation. (Session 22 split W2 tiles the same
#: way, DSV-4.1-Flash T = 1: +6.9 % against the W1 split alone; removed.)
W1_SPLIT = 2
W1_SPLIT_BM = 8
W1_SPLIT_MAX_BLOCKS = 16
#: SM100 role2 is always 384 threads in a (2,1,1) cluster (paper Table 1).
SM100_ROLE2_THREADS = 384

#: Default dispatch SM request per family (paper Table 2: GC_MOE_SM90_DISPATCH_SMS=4, GC_MOE_DISPATCH_SMS=16).
DEFAULT_DISPATCH_REQUEST = {"sm90": 4, "sm100": 16}

#: Rows of W1/W2 one SM90 role2 CTA tile covers (two consumer warpgroups x m64) and its K step.
SM90_WEIGHT_TILE_ROWS = 128
SM90_WEIGHT_TILE_K = 128
#: SM90: depth (in K128 weight steps) of the 384-thread variant's producer ring; the pipelined variant is
#: chosen once a compute SM has at least this many steps to stream (see choose_sm90_tile). Calibration
#: constant, to be re-measured on H200.
SM90_PIPELINE_STAGES = 4

# Partition rules (paper §4.2).
MIN_COMPUTE_SMS = 32
MIN_DISPATCH_SMS = 2


def arch_family(arch: str) -> str:
    """'sm90' or 'sm100' for a known target arch; ValueError naming the known ones otherwise."""
    try:
        return ARCH_FAMILY[arch]
    except KeyError:
        raise ValueError(f"unknown target arch {arch!r}; known: {sorted(ARCH_FAMILY)}") from None


# --------------------------------------------------------------------------------------------------
# Green partition (paper §4.2)
# --------------------------------------------------------------------------------------------------


class PartitionError(ValueError):
    """An impossible or invalid green-context split. Carries the offending field, its value and the limit."""

    def __init__(self, field: str, value: object, limit: str, reason: str):
        self.field = field
        self.value = value
        self.limit = limit
        self.reason = reason
        super().__init__(f"green partition: {field} = {value!r} {reason} (limit: {limit})")


@dataclass(frozen=True)
class Partition:
    """A driver-aligned green split: role1 runs on dispatch_sms, role2/3/4 on compute_sms."""

    dispatch_sms: int
    compute_sms: int

    @property
    def total_sms(self) -> int:
        return self.dispatch_sms + self.compute_sms


def _require_int(field: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PartitionError(field, value, f"an integer >= {minimum}", "is not an integer")
    if value < minimum:
        raise PartitionError(field, value, f">= {minimum}", f"is below {minimum}")
    return value


def compute_target(total_sms: int, requested_dispatch_sms: int, alignment: int) -> int:
    """The compute partition the driver will give: ``floor((total - requested) / alignment) * alignment``."""
    return ((total_sms - requested_dispatch_sms) // alignment) * alignment


def validate_partition(dispatch_sms: int, compute_sms: int, total_sms: int) -> Partition:
    """Check a split (computed, or read back from the driver): the rules of paper §4.2.

    >= 32 compute SMs (the compute kernel's scheduler and the finalize grid assume a real partition),
    an even compute count (role2 runs 2-CTA clusters on SM100 and pairs CTAs on SM90),
    >= 2 dispatch SMs (role1 needs more than one CTA for its grid-synchronised phases), and
    dispatch + compute == device SMs (the two green contexts tile the device; nothing is left idle).
    """
    _require_int("total_sms", total_sms, 1)
    _require_int("dispatch_sms", dispatch_sms, 0)
    _require_int("compute_sms", compute_sms, 0)
    if compute_sms < MIN_COMPUTE_SMS:
        raise PartitionError("compute_sms", compute_sms, f">= {MIN_COMPUTE_SMS}",
                             f"is below the minimum compute partition of {MIN_COMPUTE_SMS} SMs")
    if compute_sms % 2:
        raise PartitionError("compute_sms", compute_sms, "an even number", "is odd")
    if dispatch_sms < MIN_DISPATCH_SMS:
        raise PartitionError("dispatch_sms", dispatch_sms, f">= {MIN_DISPATCH_SMS}",
                             f"is below the minimum dispatch partition of {MIN_DISPATCH_SMS} SMs")
    if dispatch_sms + compute_sms != total_sms:
        raise PartitionError("dispatch_sms + compute_sms", dispatch_sms + compute_sms, f"== {total_sms}",
                             f"does not equal the device's {total_sms} SMs")
    return Partition(dispatch_sms, compute_sms)


def green_partition(total_sms: int, requested_dispatch_sms: int, alignment: int,
                    min_partition: int = 1) -> Partition:
    """The split the driver produces for a dispatch request (paper §4.2 step 2), validated.

    ``cuDevSmResourceSplitByCount`` is asked for the compute target; the dispatch partition is the
    complement, so it is at least the request and absorbs the alignment remainder
    (132 SMs, alignment 8: request 4 -> 4/128, 8 -> 12/120, 16 -> 20/112).
    """
    _require_int("total_sms", total_sms, 1)
    _require_int("alignment", alignment, 1)
    _require_int("min_partition", min_partition, 1)
    _require_int("requested_dispatch_sms", requested_dispatch_sms, 1)
    if requested_dispatch_sms >= total_sms:
        raise PartitionError("requested_dispatch_sms", requested_dispatch_sms, f"< {total_sms}",
                             f"leaves no SMs for compute on a {total_sms}-SM device")
    compute = compute_target(total_sms, requested_dispatch_sms, alignment)
    if compute < min_partition:
        raise PartitionError("compute_sms", compute, f">= {min_partition} (driver minimum partition)",
                             "is below the driver's minimum partition size")
    return validate_partition(total_sms - compute, compute, total_sms)


# --------------------------------------------------------------------------------------------------
# Tile heuristics (paper §4.4)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TileChoice:
    """What the heuristic picked for one token count, and the numbers it picked it from."""

    bm: int  # ring block size (tokens per block)
    threads: int  # role2 threads per CTA
    blocks_per_expert: int  # ring blocks an expert at the coverage target spans
    expected_tokens: float  # m-hat: expected tokens per local expert
    coverage: float  # the token count BM * blocks_per_expert is sized to cover
    ctas_per_sm: int = 1  # role2 CTAs per compute SM the chosen build runs at (SM90; SM100 pairs CTAs in clusters)
    w1_split: int = 1  # SM90: role2's W1 split-K build (W1_SPLIT: K-range W1 tasks at small loads, sm90_w1_split) or 1

    @property
    def pipelined(self) -> bool:
        return self.threads == SM90_THREADS_PIPELINED


def _check_int(what: str, name: str, value: int, lo: int) -> None:
    """``value`` must be an integer (not a bool) >= ``lo``: else a ValueError naming the rule and the field."""
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{what}: {name} = {value!r} must be an integer >= {lo}")


def _check_shape(tokens: int, ranks: int, top_k: int, experts: int, **more: int) -> None:
    checks = [("tokens", tokens, 0), ("ranks", ranks, 1), ("top_k", top_k, 1), ("experts", experts, 1)]
    checks += [(name, v, 1) for name, v in more.items()]
    for name, v, lo in checks:
        _check_int("tile heuristic", name, v, lo)
    if experts % ranks:
        raise ValueError(f"tile heuristic: experts = {experts} is not divisible by ranks = {ranks}")
    if top_k > experts:
        raise ValueError(f"tile heuristic: top_k = {top_k} exceeds experts = {experts}")


def _sorted_candidates(candidates: Sequence[int], allowed: Sequence[int]) -> tuple[int, ...]:
    cands = tuple(sorted(set(candidates)))
    if not cands:
        raise ValueError("tile heuristic: empty BM candidate list")
    bad = [c for c in cands if c not in allowed]
    if bad:
        raise ValueError(f"tile heuristic: BM candidates {bad} not in {list(allowed)}")
    return cands


def _powi(x: float, n: int) -> float:
    """x**n by binary exponentiation with IEEE multiplies only: unlike libm pow(), bit-identical on every
    machine, so the builder (which enumerates variants) and the runtime (which picks one) always agree."""
    result, base = 1.0, x
    while n:
        if n & 1:
            result *= base
        base *= base
        n >>= 1
    return result


def expected_tokens_per_expert(tokens: int, ranks: int, top_k: int, experts: int) -> float:
    """m-hat = T * P * k / E: under balanced routing every rank sends T*k assignments over E experts."""
    return tokens * ranks * top_k / experts


def expected_blocks(n: int, p: float, bms: Sequence[int]) -> dict[int, float]:
    """E[ceil(X / BM)] per BM for X ~ Binomial(n, p): the ring blocks (= weight passes) one local expert takes."""
    return {bm: _binomial_mean(n, p, lambda k, bm=bm: float(-(-k // bm))) for bm in bms}


def sm90_block_cost(tokens: int, bm: int) -> float:
    """What role2 pays for one ring block of ``tokens`` (1..BM) tokens on the BM build: the BM's pass cost, or the
    narrow pass's where the build has one (:data:`SM90_NARROW_PASS`) and the block fits it."""
    narrow = SM90_NARROW_PASS.get(bm)
    return narrow[1] if narrow is not None and tokens <= narrow[0] else SM90_PASS_COST[bm]


def expert_pass_cost(tokens: int, bm: int) -> float:
    """role2's weight streaming for one local expert of ``tokens`` tokens on the BM build: role1 fills its blocks to
    BM in turn, so ``tokens // BM`` full blocks and one remainder block, each at :func:`sm90_block_cost`."""
    full, rest = divmod(tokens, bm)
    return full * SM90_PASS_COST[bm] + (sm90_block_cost(rest, bm) if rest else 0.0)


def expected_pass_cost(n: int, p: float, bms: Sequence[int]) -> dict[int, float]:
    """E[:func:`expert_pass_cost`] per BM for X ~ Binomial(n, p) tokens of one local expert."""
    return {bm: _binomial_mean(n, p, lambda k, bm=bm: expert_pass_cost(k, bm)) for bm in bms}


def _binomial_mean(n: int, p: float, f) -> float:
    """E[f(X)] for X ~ Binomial(n, p).

    Weights relative to the mode, outward until they fall below 1e-18 of it (no underflow at any n), with IEEE
    multiplies, divides and adds only, in a fixed order: bit-identical on every machine, as :func:`_powi`."""
    if p >= 1.0:
        return f(n)
    if n == 0 or p <= 0.0:
        return f(0)
    odds = p / (1.0 - p)
    mode = min(n, int((n + 1) * p))
    terms = [(mode, 1.0)]
    w, k = 1.0, mode
    while k < n:
        w = w * (n - k) / (k + 1) * odds
        k += 1
        if w < 1e-18:
            break
        terms.append((k, w))
    w, k = 1.0, mode
    while k > 0:
        w = w * k / (n - k + 1) / odds
        k -= 1
        if w < 1e-18:
            break
        terms.append((k, w))
    total = 0.0
    for _, w in terms:
        total += w
    acc = 0.0
    for k, w in terms:
        acc += w * f(k)
    return acc / total


@functools.lru_cache(maxsize=4096)
def cheapest_sm90_bm(n: int, p: float, cands: tuple[int, ...]) -> int:
    """The BM of least expected role2 weight streaming for one local expert of Binomial(n, p) tokens:
    ``E[expert_pass_cost(X, BM)]`` (role1 fills an expert's blocks to BM in turn, and every block streams the
    expert's weights once, at its BM's pass cost or the build's narrow one); ties go to the smaller BM. Cached: the
    runtime asks once per token count."""
    cost = expected_pass_cost(n, p, cands)
    return min(cands, key=lambda bm: (cost[bm], bm))


def _pick_bm(coverage: float, cands: tuple[int, ...], min_blocks: int = 1) -> tuple[int, int]:
    """Blocks from the largest candidate, then the smallest candidate covering coverage/blocks."""
    blocks = max(min_blocks, math.ceil(coverage / cands[-1]) if coverage > 0 else 1)
    per_block = coverage / blocks
    bm = next((c for c in cands if c >= per_block), cands[-1])
    return bm, blocks


def sm90_weight_steps_per_block(hidden: int, intermediate: int) -> int:
    """K128 weight steps role2 streams for one ring block of one expert on SM90: W1 is 2I x H, W2 is H x I."""
    rows, k = SM90_WEIGHT_TILE_ROWS, SM90_WEIGHT_TILE_K
    return (2 * intermediate // rows) * (hidden // k) + (hidden // rows) * (intermediate // k)


def choose_sm90_tile(tokens: int, *, ranks: int, top_k: int, experts: int, hidden: int, intermediate: int,
                     compute_sms: int, candidates: Sequence[int] = SM90_BM_CANDIDATES) -> TileChoice:
    """SM90 token-bound heuristic: BM in {8,16,32,48,64,80} and the 384-thread pipelined or 256-thread variant.

    BM. A local expert's token count X is Binomial(T*P, k/E) (each token picks k distinct experts of E), with
    mean m-hat = T*P*k/E and standard deviation sigma = sqrt(m-hat * (1 - k/E)). role1 fills an expert's blocks to BM
    in turn and role2 streams the expert's weights once per block, so the expert costs ceil(X / BM) passes, each at
    the BM's measured cost (SM90_PASS_COST; a block that fits the build's narrow MMA width at that width's cost,
    SM90_NARROW_PASS): BM is the candidate of least expected cost (:func:`cheapest_sm90_bm`). BM is the WGMMA N, so
    padding columns cost MMA
    issue slots but no weight bytes, and a block above BM streams the expert again: a small BM at small T keeps the
    issue count low, a larger one keeps most experts in one block. (Until session 33 BM was the smallest candidate
    covering m-hat + sigma, the paper's rule, which ignores what a pass costs: at the measured steps it moved to the
    dearer BM one to three token-count steps early, 2-11 % of role2 there; docs/PERFORMANCE.md "Session 33".) The
    blocks an expert at m-hat + sigma spans (``blocks_per_expert``) size the thread and CTA decisions below.

    Threads. Every active expert's weights are streamed once per layer in K128 steps (one step = one
    128-row x 128-K weight tile). Count the steps one compute SM must stream: expected active local experts
    e * (1 - (1 - k/E)^(T*P)), times blocks per expert, times the steps of one block, W1 (2I/128 row tiles x
    H/128) plus W2 (H/128 x I/128), divided by compute_sms. The 384-thread variant spends a warpgroup on a
    producer that runs SM90_PIPELINE_STAGES steps ahead of the two consumer warpgroups (FP4 decode + WGMMA);
    when an SM has fewer steps than that, the producer cannot even fill its ring once, its mbarrier
    hand-offs only add latency, and the 256-thread variant (the two warpgroups issue their own TMA loads;
    smaller register and SMEM footprint, so two CTAs can share an SM) keeps more loads in flight per SM.
    From SM90_PIPELINE_STAGES steps per SM on, the ring reaches steady state and loads overlap decode+MMA.
    Production shapes (GLM-5.2, DeepSeek-V4.1-Flash) have ~1500 steps per active expert, so they pipeline
    from T = 1; the non-pipelined variant serves small models and sparse calls. Measured (H200, session 4):
    the 256-thread variant at two CTAs per SM is 8-10 % faster kernel-alone at BM 8 with every expert busy,
    but as the layer's BM 8 tile it was no faster at T = 2-64 and 13-30 us slower at T = 1 (few tasks, each
    streamed with only two K128 register stages in flight), so production stays pipelined (docs/PERFORMANCE.md).
    CTAs per SM: :func:`sm90_ctas_per_sm` (384-thread tiles up to BM 32 at two CTAs once each has several tasks).
    The stage count is a calibration constant.

    Monotone in T: the active-expert count, the coverage and the blocks at the largest BM never decrease with T, so
    once pipelined, larger T stays pipelined; the expected-cost BM grows with T as the tail of X moves past each
    candidate (checked for T up to 1024 at the shipped shapes, tests/runtime/test_heuristics.py; above the largest
    candidate's coverage BM stays the largest). T = 0 (an empty rank that still
    serves other ranks' tokens) is treated as T = 1 so it maps onto a compiled variant. Only IEEE basic
    operations and sqrt (both correctly rounded) are used, so every machine makes the same choice.
    """
    _check_shape(tokens, ranks, top_k, experts, hidden=hidden, intermediate=intermediate, compute_sms=compute_sms)
    cands = _sorted_candidates(candidates, SM90_BM_CANDIDATES)
    t = max(tokens, 1)
    m_hat = expected_tokens_per_expert(t, ranks, top_k, experts)
    p = top_k / experts
    sigma = math.sqrt(m_hat * (1.0 - p))
    coverage = m_hat + sigma
    usable = tuple(c for c in cands if c <= SM90_BLOCK_MAX_BM) or cands[:1]
    blocks_at_largest = max(1, math.ceil(coverage / usable[-1]))
    # above the largest candidate every BM streams most experts more than once: the largest keeps the fewest blocks
    # (and BM monotone in T, where the expected cost would step back to two blocks of a cheaper BM)
    bm = cheapest_sm90_bm(t * ranks, p, usable) if blocks_at_largest == 1 else usable[-1]
    blocks = max(1, math.ceil(coverage / bm))
    local_experts = experts // ranks
    active_experts = local_experts * (1.0 - _powi(1.0 - p, t * ranks))
    # the thread / CTA thresholds below were measured with the blocks at the largest candidate (monotone in T)
    steps_per_sm = (active_experts * blocks_at_largest * sm90_weight_steps_per_block(hidden, intermediate)
                    / compute_sms)
    threads = SM90_THREADS_PIPELINED if steps_per_sm >= SM90_PIPELINE_STAGES else SM90_THREADS_NONPIPELINED
    ctas = sm90_ctas_per_sm(bm, threads, steps_per_sm, ranks)
    w1_split = sm90_w1_split(bm, threads, ctas, t, ranks=ranks, top_k=top_k, experts=experts,
                             intermediate=intermediate, compute_sms=compute_sms)
    return TileChoice(bm=bm, threads=threads, blocks_per_expert=blocks, expected_tokens=m_hat, coverage=coverage,
                      ctas_per_sm=ctas, w1_split=w1_split)


def sm90_ctas_per_sm(bm: int, threads: int, steps_per_sm: float = 0.0, ranks: int | None = None) -> int:
    """role2 CTAs per compute SM on SM90 for a (BM, threads) tile: the 256-thread variant is built for two up to
    SM90_TWO_CTAS_MAX_BM (one build per tile); the 384-thread variant up to SM90_PIPELINED_TWO_CTAS_MAX_BM takes the
    two-CTA build from SM90_PIPELINED_TWO_CTAS_MIN_STEPS K128 steps per SM (``steps_per_sm`` as choose_sm90_tile
    counts them; the default 0 names the one-CTA build), from SM90_PIPELINED_TWO_CTAS_MIN_STEPS_P1 at ``ranks`` = 1.
    A bundle holds the builds the heuristic can reach: at the production shapes BM 8 both, BM 16 / 32 only the
    two-CTA one (every BM 16 token count streams >= 320 steps per SM)."""
    if threads == SM90_THREADS_NONPIPELINED:
        return 2 if bm <= SM90_TWO_CTAS_MAX_BM else 1
    min_steps = SM90_PIPELINED_TWO_CTAS_MIN_STEPS_P1 if ranks == 1 else SM90_PIPELINED_TWO_CTAS_MIN_STEPS
    return 2 if bm <= SM90_PIPELINED_TWO_CTAS_MAX_BM and steps_per_sm >= min_steps else 1



def sm90_w1_split(bm: int, threads: int, ctas_per_sm: int, tokens: int, *, ranks: int, top_k: int, experts: int,
                  intermediate: int, compute_sms: int) -> int:
    """role2's W1 split-K build (W1_SPLIT) for the 384-thread two-CTA BM W1_SPLIT_BM tile when every replay of
    ``tokens`` tokens per rank can run its W1 tiles split: at most T * P * min(k, E / P) pool blocks (one token each),
    their 2I/256 W1 tiles x W1_SPLIT within the grid (ctas_per_sm x compute_sms CTAs) and at most W1_SPLIT_MAX_BLOCKS
    blocks (the kernel decides again per replay, from the real count); else 1, the build without any split code
    (session 21 call D: the split code cost +0.1..+1.3 % where it does not run; session 22 call B: -0.2..-1.2 % back)."""
    if threads != SM90_THREADS_PIPELINED or ctas_per_sm != 2 or bm != W1_SPLIT_BM:
        return 1
    blocks = tokens * ranks * min(top_k, experts // ranks)
    fits = blocks * (2 * intermediate // 256) * W1_SPLIT <= ctas_per_sm * compute_sms  # role2's 256-row W1 tasks
    return W1_SPLIT if fits and blocks <= W1_SPLIT_MAX_BLOCKS else 1


def choose_sm100_tile(tokens: int, *, ranks: int, top_k: int, experts: int, intermediate: int,
                      compute_sms: int, candidates: Sequence[int] = SM100_BM_CANDIDATES) -> TileChoice:
    """SM100/SM103 block-size heuristic of paper §4.4.

    Cover m-hat + sqrt(m-hat) (Poisson spread, as the paper states it) with the number of blocks at the
    largest candidate, then take the smallest candidate covering cover/blocks; small batches therefore pin
    BM to 16-32. "At least two blocks when the per-rank expert count is small": when one block per local
    expert gives fewer W1 cluster tasks (e * I/128, a 2-CTA cluster pairs two N128 tiles) than the compute
    partition has clusters (compute_sms / 2), split the coverage over two blocks, unless it already fits
    the smallest candidate (splitting cannot shrink a block below it).
    Role2 is always 384 threads on this path.
    """
    _check_shape(tokens, ranks, top_k, experts, intermediate=intermediate, compute_sms=compute_sms)
    cands = _sorted_candidates(candidates, SM100_BM_CANDIDATES)
    t = max(tokens, 1)
    m_hat = expected_tokens_per_expert(t, ranks, top_k, experts)
    coverage = m_hat + math.sqrt(m_hat)
    local_experts = experts // ranks
    few_experts = local_experts * (intermediate // 128) < compute_sms // 2
    min_blocks = 2 if few_experts and coverage > cands[0] else 1
    bm, blocks = _pick_bm(coverage, cands, min_blocks)
    return TileChoice(bm=bm, threads=SM100_ROLE2_THREADS, blocks_per_expert=blocks, expected_tokens=m_hat,
                      coverage=coverage)


def choose_tile(arch: str, tokens: int, *, ranks: int, top_k: int, experts: int, hidden: int,
                intermediate: int, compute_sms: int, candidates: Sequence[int] | None = None,
                capacity: int | None = None) -> TileChoice:
    """The role2 tile for one call: dispatches to the arch family's heuristic.

    With ``capacity`` (the per-rank token capacity the variants were built for), a token count above
    it is an error rather than a choice no compiled variant was enumerated for.
    """
    if capacity is not None and not isinstance(tokens, bool) and isinstance(tokens, int) and tokens > capacity:
        raise ValueError(f"tile heuristic: tokens = {tokens} exceeds the per-rank capacity {capacity} "
                         "the kernels were built for (raise targets[].capacity in the manifest)")
    fam = arch_family(arch)
    cands = BM_CANDIDATES[fam] if candidates is None else candidates
    if fam == "sm90":
        return choose_sm90_tile(tokens, ranks=ranks, top_k=top_k, experts=experts, hidden=hidden,
                                intermediate=intermediate, compute_sms=compute_sms, candidates=cands)
    return choose_sm100_tile(tokens, ranks=ranks, top_k=top_k, experts=experts, intermediate=intermediate,
                             compute_sms=compute_sms, candidates=cands)


def choose_shared_bm(tokens: int, candidates: Sequence[int] = SM90_SHARED_BM_CANDIDATES) -> int:
    """SM90 role4 (shared experts) block size: a shared expert sees every local token, so there is no
    routing spread; the smallest candidate holding all T tokens, the largest one (several blocks) above it.
    Candidates outside role4's ladder (SM90_SHARED_BM_CANDIDATES: role2's BM 48) are ignored."""
    _check_int("shared tile heuristic", "tokens", tokens, 0)
    cands = _sorted_candidates([c for c in candidates if c in SM90_SHARED_BM_CANDIDATES] or candidates,
                               SM90_SHARED_BM_CANDIDATES)
    return _pick_bm(float(max(tokens, 1)), cands)[0]


#: SM90 role4 -> role2 graph edge (session 45, `docs/PERFORMANCE.md`): from role4's launch-order port, so role2's CTAs
#: start on the SMs role4's CTAs leave (8-10 µs before role4's end at small T), and then role2's two-CTA builds take
#: their CTA index from where they run (``role2_ring`` "Placement", the kernel's ``place_ctas``; session 46): CTAs that
#: start as SMs free up pair differently from the launch's own pairing, which the static split of T = 2-5 (fewer than
#: ~3 tasks per CTA) is laid out for; session 45 kept the full edge there (+1..+8 % without the placement). With it,
#: session 46 call C (timeline, against the full edge there): -0.3..-7.8 % at T = 2-5 in P = 1 GLM-5.2 / DSV-4.1-Flash
#: and the DSV-4.1-Flash share, the GLM-5.2 share +1.6..+2.0 % at T = 2-4 and -2.7 % at 5 (call D, paper protocol: the
#: DSV-4.1-Flash share -5.5 / -1.9 % at T = 2 / 4, GLM-5.2 +1.9 / -2.6 %). The full edge from ..._MIN_TOKENS to
#: ..._MAX_TOKENS (empty: nowhere) stays as the A/B knob (``ci/run_with_heuristics.py``).
SM90_ROLE4_FULL_EDGE_MIN_TOKENS = 1
SM90_ROLE4_FULL_EDGE_MAX_TOKENS = 0


def sm90_role4_edge(tokens: int) -> str:
    """The role4 -> role2 edge of a call with ``tokens`` tokens on this rank (``graph.ROLE4_EDGES``): ``"full"`` from
    SM90_ROLE4_FULL_EDGE_MIN_TOKENS to ..._MAX_TOKENS, ``"launch_order"`` elsewhere (read at call time, so
    ``ci/run_with_heuristics.py`` can move the bounds)."""
    _check_int("role4 edge", "tokens", tokens, 0)
    lo, hi = SM90_ROLE4_FULL_EDGE_MIN_TOKENS, SM90_ROLE4_FULL_EDGE_MAX_TOKENS
    return "full" if lo <= tokens <= hi else "launch_order"


#: role2's two-CTA builds take their CTA index from where they run (``role2_ring`` "Placement", kernel parameter
#: ``place_ctas``) only after role4's launch-order port and from this many tokens per rank: at T = 1 the index costs
#: its two atomics at each CTA's start and the launch-order edge gains as much without it (session 46 calls A-C:
#: +0.0..+2.3 % with it against session 45, which ran T = 1 without); at T = 2-5 it lets the launch-order edge run.
SM90_PLACE_CTAS_MIN_TOKENS = 2
#: The values of role2's ``place_ctas`` (one place for the kernel and the runtime): ``blockIdx``; the index from where
#: the CTA runs, its start count's round trip before the first barrier (session 46); the same with that round trip
#: after the barrier, where only the placing thread's warp waits for it (session 49, ``role2_ring`` "Placement").
PLACE_CTAS_BLOCK_IDX, PLACE_CTAS_ON_SM, PLACE_CTAS_START_LATE = 0, 1, 2
#: Whether a placed call asks for the late start count (the A/B knob of session 49's prepared call; 0 = session 46's).
SM90_PLACE_START_LATE = 0


def sm90_place_ctas(tokens: int, role4_edge: str) -> int:
    """role2's ``place_ctas`` (``PLACE_CTAS_*``) in a call with ``tokens`` tokens on this rank whose role4 -> role2
    edge is ``role4_edge`` (``graph.ROLE4_EDGES``): placed after the launch-order port from
    SM90_PLACE_CTAS_MIN_TOKENS, late where SM90_PLACE_START_LATE says so (read at call time)."""
    _check_int("role2 placement", "tokens", tokens, 0)
    if role4_edge != "launch_order" or tokens < SM90_PLACE_CTAS_MIN_TOKENS:
        return PLACE_CTAS_BLOCK_IDX
    return PLACE_CTAS_START_LATE if SM90_PLACE_START_LATE else PLACE_CTAS_ON_SM


#: SM90 role2: the one-GPU 384-thread builds up to this BM carry the first W1 task's weights into L2 while role1 still
#: counts and fills the ring (``role2_ring`` "First weights to L2", kernel parameter ``w1_prefetch_steps``): the BM the
#: heuristic picks at the small loads where a CTA's first task starts several µs after the launch.
SM90_W1_PREFETCH_MAX_BM = 8
#: ... and the calls that ask for it: on one GPU (P = 1: the rank's ``topk_idx`` names the local experts; at P > 1
#: they come from every rank's routing, known only after role1's exchange), up to this many tokens per rank (the
#: routed slots, tokens x top-k, must also fit the warp's 32 lanes), with this many K128 steps (each 4 slabs x (4096
#: code + 256 scale) bytes) of the CTA's first W1 task. Session 47 call C (routed P = 1, timeline against the same
#: bundles with it off): 4 steps -1.0 / -1.0 % at GLM-5.2 T = 1 / 2, -0.8 / -0.5 % at DSV-4.1-Flash, T = 3-4 within
#: -1.5..+0.5 %; 8 steps -0.8 / -2.0 % and -0.3 / +0.5 %, +1.7 % at DSV-4.1-Flash T = 4; 16 worse (up to +3 %). Paper
#: protocol (call D): -0.5 % at T = 1 / 2 on both models; every replay cold (call E): -0.4..+0.1 %.
SM90_W1_PREFETCH_MAX_TOKENS = 2
SM90_W1_PREFETCH_STEPS = 4
#: Under which role4 -> role2 edge (``graph.ROLE4_EDGES``): always under "full" (role2 launched with role1 at the
#: replay's start: the routed layer; role4 -> role2 never is "full" since session 46), and after role4's launch-order
#: port (role2's CTAs start while role4 streams the shared expert) only when this is 1.
SM90_W1_PREFETCH_AFTER_ROLE4 = 0


def sm90_w1_prefetch_steps(tokens: int, ranks: int, role4_edge: str) -> int:
    """K128 steps of each role2 CTA's first W1 task that it brings into L2 before the task's ring block is full (0:
    none) in a call with ``tokens`` tokens on this rank, ``ranks`` ranks and role4 -> role2 edge ``role4_edge``. Read at
    call time, so ``ci/run_with_heuristics.py`` can move the bounds."""
    _check_int("role2 W1 prefetch", "tokens", tokens, 0)
    _check_int("role2 W1 prefetch", "ranks", ranks, 1)
    edge_ok = role4_edge == "full" or (role4_edge == "launch_order" and SM90_W1_PREFETCH_AFTER_ROLE4 == 1)
    on = ranks == 1 and 1 <= tokens <= SM90_W1_PREFETCH_MAX_TOKENS and edge_ok
    return SM90_W1_PREFETCH_STEPS if on else 0


#: SM90, a ``k_interleave`` target (``numerics.sm90_layout`` "K order inside a K128 step"): from this BM role1 writes
#: W1's ring rows in the interleaved order (once per row, in its staging buffer) and role2 reads them as they are;
#: below it role2 permutes each landed activation chunk (once per task that reads it). Session 51 (s50-a, kernel
#: alone, role2 permuting at every BM): W1 -0.1..-5.9 % at BM 8-32 (its K loop waits on the weight stream, the
#: permutation hides), +3.3..+7.2 % at BM 48-80 (issue-bound loops; the permutation on every task's chunk tops),
#: while W2 (written interleaved by W1's epilogue) gained 1-7 % at every BM; in the layer the P = 8 shares lost
#: +2.2 / +4.7 % at GLM-5.2 T = 128 / 256 (BM 64 / 80).
SM90_K_INTERLEAVE_ROLE1_MIN_BM = 48


#: SM90 role2's epilogue warpgroup (session 60; 0 = no build has it): the one-CTA 384-thread tile of this BM gets a
#: fourth warpgroup that runs every task's epilogue and releases while the consumers go on with the next task
#: (``role2_ring``'s variant parameter ``epilogue_wg``, ``gcmoe_build.kernels.sm90.role2_handover``; the BMs that
#: build: ``role2_config.EPILOGUE_WG_BM``). Session 60, H100 (`results/operator/2026-12-05-session60/`): kernel alone
#: at 64 tokens per expert -2.3..-3.6 % (W1 / W2, both production shapes, four alternating runs), the GLM-5.2 share's
#: layer at T = 176-208 (its BM 64 range) role2 -3.3..-4.6 %, the span -3.2..-4.6 % (A E E A); outputs bit-identical
#: (the accuracy suite's 47 cases with BM 64 forced, test-tiny and the share, + shared: every metric equal).
SM90_EPILOGUE_WG_BM = 64


def sm90_epilogue_wg(bm: int, threads: int, ctas_per_sm: int) -> bool:
    """Whether role2's SM90 tile (BM ``bm``, ``threads``, ``ctas_per_sm``) is built with the epilogue warpgroup
    (:data:`SM90_EPILOGUE_WG_BM`)."""
    _check_int("SM90 epilogue warpgroup", "bm", bm, 1)
    return SM90_EPILOGUE_WG_BM != 0 and bm == SM90_EPILOGUE_WG_BM and threads == SM90_THREADS_PIPELINED \
        and ctas_per_sm == 1


def sm90_role1_interleaves_rows(bm: int) -> bool:
    """Whether, in a ``k_interleave`` SM90 build, role1 (not role2) puts W1's ring rows of a BM ``bm`` tile into the
    interleaved K order (the role1 and role2 variants' ``k_interleave`` parameters follow it)."""
    _check_int("SM90 K interleave", "bm", bm, 1)
    return bm >= SM90_K_INTERLEAVE_ROLE1_MIN_BM


#: SM90 role4 split-K: W1 / W2 tasks per token block the split aims for (about the compute SMs of an H200 partition;
#: without a split a block has only 2I/256 W1 and H/256 W2 tasks, 16-24 for the production shapes).
SHARED_SPLIT_TASKS = 128
#: Token rows (blocks x BM) whose split-K partials the workspace holds at the full split; a call with more rows splits
#: less (:func:`shared_split_for_rows`: rows x split stays within SHARED_SPLIT_ROWS x the full split), so a few large
#: token blocks still fill the compute SMs without more scratch.
SHARED_SPLIT_ROWS = 64
#: token blocks the split-K arrival counters hold (``shared_split_count`` rows: SHARED_SPLIT_ROWS at BM 8); a call with
#: more blocks runs unsplit
SHARED_SPLIT_MAX_BLOCKS = SHARED_SPLIT_ROWS // min(SM90_BM_CANDIDATES)


def _shared_split(k128: int, tiles: int) -> int:
    """The largest split d of ``k128`` K128 steps into equal parts of an even number of steps (the K loop takes
    two K128 steps per iteration) with ``tiles * d <= SHARED_SPLIT_TASKS``."""
    best = 1
    for d in range(1, k128 + 1):
        if k128 % d == 0 and (k128 // d) % 2 == 0 and tiles * d <= SHARED_SPLIT_TASKS:
            best = d
    return best


def shared_split_options(full: int, chunks: int) -> list[int]:
    """The splits a role4 GEMM can run, ascending: the divisors of its full split ``full`` that also divide its
    ``chunks`` K chunks (a split task covers whole chunks)."""
    return [d for d in range(1, full + 1) if full % d == 0 and chunks % d == 0]


def shared_split_fits(rows, split: int, full: int):
    """Whether ``rows`` token rows run at ``split`` fit the partials region sized for SHARED_SPLIT_ROWS rows at the
    ``full`` split. Works on Python ints and on the kernel's integers (role4 evaluates it in its split selects)."""
    return rows * split <= SHARED_SPLIT_ROWS * full


def shared_split_for_rows(full: int, chunks: int, rows: int, blocks: int) -> int:
    """The split of a role4 GEMM for a call of ``blocks`` token blocks holding ``rows`` rows (blocks x BM): the largest
    of :func:`shared_split_options` that :func:`shared_split_fits`, 1 above ``SHARED_SPLIT_MAX_BLOCKS`` blocks. The
    kernel computes the same with selects over the options."""
    if blocks > SHARED_SPLIT_MAX_BLOCKS:
        return 1
    return max(d for d in shared_split_options(full, chunks) if d == 1 or shared_split_fits(rows, d, full))


def shared_split_k(hidden: int, intermediate: int) -> tuple[int, int]:
    """SM90 role4 split-K factors ``(s1, s2)`` of the shared expert's W1 (K = H, 2I/256 row tiles) and W2 (K = I,
    H/256 row tiles): each (token block, row tile) becomes ``s`` tasks over K ranges whose FP32 partials the last
    finisher sums in split order (deterministic) before the epilogue. One fact for the kernel (task count, K
    range) and the workspace (partials region size)."""
    for name, v, m in (("hidden", hidden, 256), ("intermediate", intermediate, 128)):
        if isinstance(v, bool) or not isinstance(v, int) or v < m or v % m:
            raise ValueError(f"shared split: {name}={v!r} must be a positive multiple of {m}")
    return _shared_split(hidden // 128, 2 * intermediate // 256), _shared_split(intermediate // 128, hidden // 256)


def reachable_tiles(arch: str, capacity: int, **shape) -> list[TileChoice]:
    """Every distinct (bm, threads, ctas_per_sm, w1_split) the heuristic picks for T in [1, capacity], in order of first
    use.

    On SM90, passing the reachable BMs back as ``candidates`` reproduces every choice for T <= capacity
    (tested), so a runtime may take the candidate list from the BMs it finds compiled in a bundle.
    """
    seen: dict[tuple[int, int, int, int], TileChoice] = {}
    for t in range(1, capacity + 1):
        c = choose_tile(arch, t, **shape)
        seen.setdefault((c.bm, c.threads, c.ctas_per_sm, c.w1_split), c)
    return list(seen.values())


# --------------------------------------------------------------------------------------------------
# Ring capacity (paper §4.3)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RingCapacity:
    local_experts: int  # e = E / P
    assignments: int  # worst-case routed assignments one rank receives: Tmax * P * min(k, e)
    logical_blocks: int  # ceil(assignments / BM) + e: every expert may end in a partial block


def ring_capacity(capacity: int, ranks: int, top_k: int, experts: int, bm: int) -> RingCapacity:
    """The maximum-in-flight ring model: a rank can receive at most min(k, e) assignments per source token
    (a token's k experts are distinct, and at most e of them live on this rank) from each of P ranks'
    Tmax tokens; packing them into BM blocks per expert needs at most ceil(assignments/BM) + e blocks."""
    for name, v in (("capacity", capacity), ("ranks", ranks), ("top_k", top_k), ("experts", experts), ("bm", bm)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"ring capacity: {name} = {v!r} must be an integer >= 1")
    if experts % ranks:
        raise ValueError(f"ring capacity: experts = {experts} is not divisible by ranks = {ranks}")
    e = experts // ranks
    assignments = capacity * ranks * min(top_k, e)
    return RingCapacity(local_experts=e, assignments=assignments, logical_blocks=-(-assignments // bm) + e)
