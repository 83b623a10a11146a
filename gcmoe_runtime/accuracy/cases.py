"""The 47 accuracy cases of paper §6.5 (9 default, 23 boundary, 15 asymmetric) and their per-rank inputs.

A case is data (``CaseSpec``): tokens per rank, a routing rule, a routing-weight rule and an activation rule.
``build_rank_inputs`` turns it into the tensors one rank feeds the operator — BF16 activations and their
quantised form, global top-k expert ids and routing weights — deterministically from (config seed, case index,
rank), so P torchrun processes build identical cases without communicating.

Routing is modelled globally: rank r's tokens may pick any of the E experts; expert g lives on rank g // (E/P).
With P = 1 every expert is local, so the "remote only" rule cannot be honoured: it falls back to balanced
routing and the case records that in ``RankInputs.note`` (so do "local only" with P = 1 and rules that need
more experts than exist).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ..numerics.quant import quantize_e4m3_fp32_k128, quantize_e4m3_ue8m0_k32_packed
from .config import LayerWeights, SuiteConfig

CATEGORIES = ("default", "boundary", "asymmetric")


@dataclass(frozen=True)
class CaseSpec:
    name: str
    category: str
    tokens: str = "16"            # "N" on every rank, or a rule: cap, cap-1, cap/2, ramp, alt_empty, ...
    routing: str = "balanced"     # see _routing_probs / build_rank_inputs
    routing_arg: float = 0.0
    weights: str = "softmax"      # softmax | uniform | one_hot | zero | skewed
    acts: str = "normal"          # normal | large | tiny | zero_tokens | outliers | per_token_scale


@dataclass
class RankInputs:
    """What one rank passes to an implementation for one case (the implementation interface's input)."""
    case: str
    category: str
    case_index: int
    rank: int
    world: int
    x_bf16: torch.Tensor          # [T, H] BF16 (pre-quantisation activations; the BF16 reference uses these)
    x_q: torch.Tensor             # [T, H] float8_e4m3fn
    x_scale: torch.Tensor         # [T, H/128] FP32 (fp32_k128) or int32 packed UE8M0 x4 (ue8m0_k32)
    act_recipe: str
    topk_idx: torch.Tensor        # [T, k] int64 global expert ids
    topk_weights: torch.Tensor    # [T, k] FP32
    layer: LayerWeights
    note: str = ""

    @property
    def num_tokens(self) -> int:
        return self.x_q.shape[0]


def default_token_counts(capacity: int) -> list:
    """Nine strictly increasing per-rank token counts from 1 to capacity (1..256 for capacity 256)."""
    out = []
    for i in range(9):
        t = max(round(capacity ** (i / 8)), out[-1] + 1 if out else 1)
        out.append(t)
    if out[-1] > capacity:
        raise ValueError(f"capacity={capacity} too small for nine distinct default token counts (need >= 9)")
    return out


def suite_cases(cfg: SuiteConfig) -> list:
    """The 47 cases, in a fixed order (the index seeds each case's data)."""
    cases = [CaseSpec(f"default_T{t}", "default", str(t)) for t in default_token_counts(cfg.capacity)]
    b = "boundary"
    cases += [
        CaseSpec("T0_all_ranks", b, "0"),
        CaseSpec("T1_all_ranks", b, "1"),
        CaseSpec("T_capacity", b, "cap"),
        CaseSpec("T_capacity_minus_1", b, "cap-1"),
        CaseSpec("T_capacity_all_to_expert0", b, "cap", "include", 0),
        CaseSpec("all_tokens_to_expert0", b, "16", "include", 0),
        CaseSpec("all_tokens_to_last_expert", b, "16", "include", -1),
        CaseSpec("all_tokens_same_expert_set", b, "16", "same_set", 0),
        CaseSpec("remote_experts_only", b, "16", "remote_only"),
        CaseSpec("local_experts_only", b, "16", "local_only"),
        CaseSpec("all_tokens_to_last_rank", b, "16", "one_rank", -1),
        CaseSpec("odd_experts_idle", b, "16", "even_experts"),
        CaseSpec("empty_rank0", b, "empty_rank0"),
        CaseSpec("only_rank0_has_tokens", b, "only_rank0"),
        CaseSpec("uniform_routing_weights", b, "16", weights="uniform"),
        CaseSpec("one_hot_routing_weights", b, "16", weights="one_hot"),
        CaseSpec("zero_routing_weights", b, "16", weights="zero"),
        CaseSpec("large_activations_clamp", b, "16", acts="large"),
        CaseSpec("tiny_activations", b, "16", acts="tiny"),
        CaseSpec("all_zero_tokens", b, "16", acts="zero_tokens"),
        CaseSpec("outlier_channels", b, "16", acts="outliers"),
        CaseSpec("T17_block_boundary", b, "17"),
        CaseSpec("round_robin_routing", b, "cap/2", "sequential"),
    ]
    a = "asymmetric"
    cases += [
        CaseSpec("zipf_0.5", a, "32", "zipf", 0.5),
        CaseSpec("zipf_1.0", a, "32", "zipf", 1.0),
        CaseSpec("zipf_1.5", a, "32", "zipf", 1.5),
        CaseSpec("zipf_2.0", a, "32", "zipf", 2.0),
        CaseSpec("tokens_ramp", a, "ramp"),
        CaseSpec("tokens_alternate_empty", a, "alt_empty"),
        CaseSpec("tokens_one_heavy_rank", a, "one_heavy"),
        CaseSpec("tokens_pow2_by_rank", a, "pow2"),
        CaseSpec("zipf_1.0_tokens_ramp", a, "ramp", "zipf", 1.0),
        CaseSpec("zipf_1.2_rank0_experts_hot", a, "32", "zipf_rank0", 1.2),
        CaseSpec("zipf_1.0_per_token_scale", a, "32", "zipf", 1.0, acts="per_token_scale"),
        CaseSpec("skewed_routing_weights", a, "32", "zipf", 0.8, weights="skewed"),
        CaseSpec("half_tokens_to_expert0", a, "32", "include_half", 0),
        CaseSpec("tokens_random_per_rank", a, "random"),
        CaseSpec("zipf_1.0_reversed_tokens_ramp", a, "ramp", "zipf_reversed", 1.0),
    ]
    counts = {c: sum(1 for x in cases if x.category == c) for c in CATEGORIES}
    assert counts == {"default": 9, "boundary": 23, "asymmetric": 15}, counts
    assert len({c.name for c in cases}) == 47
    return cases


def tokens_per_rank(spec: CaseSpec, cfg: SuiteConfig, index: int) -> list:
    p, cap = cfg.world, cfg.capacity
    rule = spec.tokens
    if rule.isdigit():
        return [min(int(rule), cap)] * p
    if rule == "cap":
        return [cap] * p
    if rule == "cap-1":
        return [cap - 1] * p
    if rule == "cap/2":
        return [max(1, cap // 2)] * p
    if rule == "empty_rank0":
        return [0] + [16] * (p - 1)
    if rule == "only_rank0":
        return [16] + [0] * (p - 1)
    if rule == "ramp":
        return [max(1, cap * (r + 1) // p) for r in range(p)]
    if rule == "alt_empty":
        return [max(1, cap // 4) if r % 2 == 0 else 0 for r in range(p)]
    if rule == "one_heavy":
        return [cap] + [1] * (p - 1)
    if rule == "pow2":
        return [min(cap, 2 ** r) for r in range(p)]
    if rule == "random":
        g = torch.Generator().manual_seed(cfg.seed * 7919 + index)
        return torch.randint(0, cap + 1, (p,), generator=g).tolist()
    raise ValueError(f"case {spec.name}: unknown token rule {rule!r}")


def _rank_of(cfg: SuiteConfig) -> torch.Tensor:
    return torch.arange(cfg.num_experts) // cfg.experts_per_rank


def _ranks_mask(cfg: SuiteConfig, first: int) -> torch.Tensor:
    """Experts of ranks first, first+1, ... (wrapping) until at least k experts are covered."""
    owner = _rank_of(cfg)
    mask = torch.zeros(cfg.num_experts, dtype=torch.bool)
    r = first % cfg.world
    while int(mask.sum()) < cfg.topk:
        mask |= owner == r
        r = (r + 1) % cfg.world
    return mask


def _routing_probs(spec: CaseSpec, cfg: SuiteConfig, rank: int) -> tuple:
    """(expert probability vector [E], note) for the sampling-based rules."""
    e, k = cfg.num_experts, cfg.topk
    ones = torch.ones(e)
    rule = spec.routing
    if rule in ("balanced", "include", "include_half"):
        return ones, ""
    if rule == "remote_only":
        mask = _rank_of(cfg) != rank
        if int(mask.sum()) < k:
            return ones, f"remote_only impossible (P={cfg.world}, {int(mask.sum())} remote experts < k={k}); balanced"
        return mask.float(), ""
    if rule == "local_only":
        mask = _ranks_mask(cfg, rank)
        note = "" if cfg.experts_per_rank >= k else f"E/P={cfg.experts_per_rank} < k={k}: extended to next ranks"
        return mask.float(), note
    if rule == "one_rank":
        return _ranks_mask(cfg, int(spec.routing_arg) % cfg.world).float(), ""
    if rule == "even_experts":
        mask = torch.arange(e) % 2 == 0
        return (mask.float(), "") if int(mask.sum()) >= k else (ones, "too few even experts; balanced")
    if rule in ("zipf", "zipf_reversed", "zipf_rank0"):
        # popularity of the i-th most popular expert ~ 1/(i+1)**s. The order is global (same on every rank):
        # "zipf" a seeded permutation, "zipf_rank0" expert-id order (rank 0's experts hottest),
        # "zipf_reversed" reversed id order (the last rank's experts hottest).
        pop = 1.0 / (torch.arange(e, dtype=torch.float64) + 1) ** spec.routing_arg
        if rule == "zipf":
            order = torch.randperm(e, generator=torch.Generator().manual_seed(cfg.seed + 4241))
            pop = torch.empty_like(pop).index_copy_(0, order, pop)
        elif rule == "zipf_reversed":
            pop = pop.flip(0)
        return pop.float(), ""
    raise ValueError(f"case {spec.name}: unknown routing rule {rule!r}")


def _route(spec: CaseSpec, cfg: SuiteConfig, rank: int, t: int, gen: torch.Generator) -> tuple:
    e, k = cfg.num_experts, cfg.topk
    if t == 0:
        return torch.zeros(0, k, dtype=torch.long), ""
    if spec.routing == "same_set":
        s = int(spec.routing_arg)
        return ((torch.arange(k) + s) % e).repeat(t, 1), ""
    if spec.routing == "sequential":
        return (torch.arange(t)[:, None] * k + torch.arange(k)[None, :]) % e, ""
    probs, note = _routing_probs(spec, cfg, rank)
    if spec.routing in ("include", "include_half"):
        hot = int(spec.routing_arg) % e
        probs = probs.clone()
        probs[hot] = 0
        rest = torch.multinomial(probs.expand(t, e), k - 1, replacement=False, generator=gen) if k > 1 \
            else torch.zeros(t, 0, dtype=torch.long)
        idx = torch.empty(t, k, dtype=torch.long)
        slot = torch.arange(t) % k                    # the hot expert's slot rotates over slots
        for j in range(k):
            sel = slot == j
            idx[sel, j] = hot
            others = [c for c in range(k) if c != j]
            idx[sel.nonzero().squeeze(1)[:, None], torch.tensor(others)[None, :]] = rest[sel]
        if spec.routing == "include_half":         # odd tokens: balanced instead
            odd = torch.arange(t) % 2 == 1
            if bool(odd.any()):
                idx[odd] = torch.multinomial(torch.ones(int(odd.sum()), e), k, replacement=False, generator=gen)
        return idx, note
    return torch.multinomial(probs.expand(t, e), k, replacement=False, generator=gen), note


def _routing_weights(spec: CaseSpec, t: int, k: int, gen: torch.Generator) -> torch.Tensor:
    rule = spec.weights
    if rule == "softmax":
        return torch.softmax(torch.randn(t, k, generator=gen), dim=-1)
    if rule == "skewed":
        return torch.softmax(6.0 * torch.randn(t, k, generator=gen), dim=-1)
    if rule == "uniform":
        return torch.full((t, k), 1.0 / k)
    if rule == "one_hot":
        w = torch.zeros(t, k)
        w[:, 0] = 1.0
        return w
    if rule == "zero":
        return torch.zeros(t, k)
    raise ValueError(f"case {spec.name}: unknown routing-weight rule {rule!r}")


def _activations(spec: CaseSpec, t: int, h: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(t, h, generator=gen)
    rule = spec.acts
    if rule == "large":
        x = x * 64.0
    elif rule == "tiny":
        x = x * 2.0 ** -10
    elif rule == "zero_tokens":
        x[0::2] = 0.0
    elif rule == "outliers":
        ch = torch.randperm(h, generator=gen)[:4]
        x[:, ch] *= 100.0
    elif rule == "per_token_scale":
        x = x * torch.exp2(torch.rand(t, 1, generator=gen) * 8.0 - 4.0)
    elif rule != "normal":
        raise ValueError(f"case {spec.name}: unknown activation rule {rule!r}")
    return x.to(torch.bfloat16)


def build_rank_inputs(cfg: SuiteConfig, layer: LayerWeights, spec: CaseSpec, index: int,
                      ranks: Optional[list] = None, device="cpu") -> list:
    """Per-rank inputs of case ``index`` for ``ranks`` (default all P ranks), on ``device``."""
    counts = tokens_per_rank(spec, cfg, index)
    out = []
    for r in (range(cfg.world) if ranks is None else ranks):
        gen = torch.Generator().manual_seed(((cfg.seed * 1009 + index) * 1013 + r) & 0x7FFFFFFF)
        t = counts[r]
        x = _activations(spec, t, cfg.hidden, gen)
        idx, note = _route(spec, cfg, r, t, gen)
        w = _routing_weights(spec, t, cfg.topk, gen)
        if cfg.act_recipe == "fp32_k128":
            xq, xs = quantize_e4m3_fp32_k128(x, name=f"{spec.name}/rank{r}/x")
        else:
            xq, xs = quantize_e4m3_ue8m0_k32_packed(x, name=f"{spec.name}/rank{r}/x")
        out.append(RankInputs(spec.name, spec.category, index, r, cfg.world, x.to(device), xq.to(device),
                              xs.to(device), cfg.act_recipe, idx.to(device), w.float().to(device), layer, note))
    return out
