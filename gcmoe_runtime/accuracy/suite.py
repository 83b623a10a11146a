"""Runs the 47-case accuracy suite against any implementation (paper §6.5).

**Implementation interface** (what the operator's GPU harness provides):

    impl(inputs: RankInputs) -> torch.Tensor   # BF16 [T, H] output of inputs.rank for one case

``RankInputs`` (``cases.py``) carries the rank's quantised activations and scales, global top-k ids and
weights, its BF16 activations, and the layer (``inputs.layer.local(rank)`` are the experts the rank owns).
* **Global mode** (one process, ``ranks=None``): the suite calls ``impl`` once per rank, rank 0..P-1 in order —
  right for references and for anything that needs no collective.
* **Per-rank mode** (torchrun, one process per rank, ``ranks=[rank]``): every process calls ``impl`` for its
  own rank in the same case order, so a collective operator sees matching calls on all ranks. Each process
  produces its rank's records; ``report.merge_results`` joins them.
``graph_impl`` (optional, same signature) is the CUDA-graph replay of the same operator for the
graph-vs-eager metric; with ``repeat=True`` the suite calls the implementation a second time per case for the
repeat metric.

References are computed by the suite itself: the quantised FP32 reference and the BF16 ideal reference, for
all cases of the requested ranks in one batched pass (every token row is independent, so batching changes no
definition — only FP32 summation order inside the GEMMs).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from ..numerics.reference import bf16_reference_moe_forward, reference_moe_forward
from .cases import RankInputs, build_rank_inputs, suite_cases
from .config import LayerWeights, SuiteConfig, make_layer_weights
from .metrics import evaluate_rank_case

Implementation = Callable[[RankInputs], torch.Tensor]


class CachedExperts:
    """Expert-weight provider that dequantises each routed expert once.

    Cached in FP32 while the cache stays under ``fp32_budget_bytes``; beyond that in BF16 where that is exact
    (dequantised MXFP4 values have two significant bits), so production shapes fit in CPU memory."""

    def __init__(self, routed, fp32_budget_bytes: int = 3 << 30):
        self.routed = routed
        self.num_experts = routed.num_experts
        self.budget = fp32_budget_bytes
        self._bytes = 0
        self._cache = {}

    def expert_fp32(self, e: int):
        if e not in self._cache:
            pair = []
            for w in self.routed.expert_fp32(e):
                if self._bytes + 4 * w.numel() > self.budget:
                    b = w.to(torch.bfloat16)
                    w = b if torch.equal(b.float(), w) else w
                self._bytes += w.numel() * w.element_size()
                pair.append(w)
            self._cache[e] = tuple(pair)
        return tuple(w.float() for w in self._cache[e])


def shared_bf16_weights(layer: LayerWeights, weights: str):
    """Shared-expert weights for the BF16 reference: the FP8 checkpoint dequantised, or the BF16 originals."""
    if layer.shared is None:
        return None, None
    return layer.shared.fp32() if weights == "dequantised" else layer.shared_bf16


class ReferenceImplementation:
    """The quantised FP32 reference used as an implementation ("reference vs itself")."""
    name = "fp32-quantised-reference"

    def __init__(self, layer: LayerWeights, experts=None):
        self.layer, self.experts = layer, experts or CachedExperts(layer.routed)

    def __call__(self, inp: RankInputs) -> torch.Tensor:
        return reference_moe_forward(inp.x_q, inp.x_scale, inp.topk_idx, inp.topk_weights, self.experts,
                                     self.layer.shared, spec=self.layer.cfg.swiglu, act_recipe=inp.act_recipe)


class BF16ReferenceImplementation:
    """The BF16 ideal reference used as an implementation (shows what the FP8 steps cost).

    ``weights="dequantised"``: the checkpoint's quantised weights, dequantised (what the operator is given);
    ``weights="original"``: the BF16 weights the synthetic checkpoint was quantised from."""

    def __init__(self, layer: LayerWeights, weights: str = "dequantised", experts=None):
        if weights not in BF16_WEIGHT_SOURCES:
            raise ValueError(f"BF16 reference weights {weights!r}: choose one of {BF16_WEIGHT_SOURCES}")
        self.layer, self.weights = layer, weights
        self.name = f"bf16-ideal-reference({weights} weights)"
        self.routed = (experts or CachedExperts(layer.routed)) if weights == "dequantised" else layer.routed_bf16
        self.shared = shared_bf16_weights(layer, weights)

    def __call__(self, inp: RankInputs) -> torch.Tensor:
        return bf16_reference_moe_forward(inp.x_bf16, inp.topk_idx, inp.topk_weights, self.routed,
                                          self.shared[0], self.shared[1], spec=self.layer.cfg.swiglu)


BF16_WEIGHT_SOURCES = ("dequantised", "original")
BUILTIN_IMPLEMENTATIONS = {
    "reference": ReferenceImplementation,
    "bf16-reference": BF16ReferenceImplementation,
    "bf16-reference-original": lambda layer, **kw: BF16ReferenceImplementation(layer, "original", **kw),
}


def batched_references(layer: LayerWeights, inputs: list, experts=None) -> dict:
    """Reference outputs per RankInputs, each from one batched pass over all inputs:
    ``quant`` (quantised FP32 reference), ``bf16`` (BF16 ideal on the dequantised checkpoint weights — the
    thresholded "vs BF16" target) and ``bf16_orig`` (BF16 ideal on the original BF16 weights — informational:
    it includes the FP4 weight-quantisation loss, as the paper's Table 11 BF16 column does)."""
    cfg = layer.cfg
    if not inputs:
        return {"quant": [], "bf16": [], "bf16_orig": []}
    experts = experts or CachedExperts(layer.routed)
    cat = lambda name: torch.cat([getattr(i, name) for i in inputs])  # noqa: E731
    idx, w, x = cat("topk_idx"), cat("topk_weights"), cat("x_bf16")
    out = {"quant": reference_moe_forward(cat("x_q"), cat("x_scale"), idx, w, experts, layer.shared,
                                          spec=cfg.swiglu, act_recipe=cfg.act_recipe)}
    for key, src, routed in (("bf16", "dequantised", experts), ("bf16_orig", "original", layer.routed_bf16)):
        sw = shared_bf16_weights(layer, src)
        out[key] = bf16_reference_moe_forward(x, idx, w, routed, sw[0], sw[1], spec=cfg.swiglu)
    sizes = [i.num_tokens for i in inputs]
    return {k: list(torch.split(v, sizes)) for k, v in out.items()}


@dataclass
class SuiteResult:
    config: SuiteConfig
    implementation: str
    ranks: list
    records: list = field(default_factory=list)   # one dict per (case, rank)
    seconds: float = 0.0


def run_suite(cfg: SuiteConfig, impl: Optional[Implementation] = None, *, impl_name: Optional[str] = None,
              layer: Optional[LayerWeights] = None, ranks: Optional[list] = None, device="cpu",
              graph_impl: Optional[Implementation] = None, repeat: bool = True,
              case_names: Optional[list] = None, log: Optional[Callable[[str], None]] = None) -> SuiteResult:
    """Run the suite; ``impl`` defaults to the quantised reference (reference vs itself)."""
    t0 = time.time()
    layer = layer or make_layer_weights(cfg)
    if str(device) != "cpu":
        layer = layer.to(device)
    if impl is None:
        impl = ReferenceImplementation(layer)
    name = impl_name or getattr(impl, "name", getattr(impl, "__name__", type(impl).__name__))
    ranks = list(range(cfg.world)) if ranks is None else list(ranks)
    bad = [r for r in ranks if not 0 <= r < cfg.world]
    if bad:
        raise ValueError(f"run_suite: ranks {bad} outside world size {cfg.world}")
    specs = [(i, s) for i, s in enumerate(suite_cases(cfg)) if case_names is None or s.name in case_names]
    if case_names is not None and len(specs) != len(set(case_names)):
        known = {s.name for s in suite_cases(cfg)}
        raise ValueError(f"run_suite: unknown case names {sorted(set(case_names) - known)}")
    per_case = [build_rank_inputs(cfg, layer, s, i, ranks, device) for i, s in specs]
    flat = [inp for case in per_case for inp in case]
    refs = batched_references(layer, flat, getattr(impl, "experts", None))
    result = SuiteResult(cfg, name, ranks)
    for n, inp in enumerate(flat):
        y = impl(inp)
        y_rep = impl(inp) if repeat else None
        y_graph = graph_impl(inp) if graph_impl is not None else None
        m = evaluate_rank_case(y, refs["quant"][n], refs["bf16"][n], shared=bool(cfg.shared_experts),
                               hidden=cfg.hidden, y_repeat=y_rep, y_graph=y_graph, y_bf16_orig=refs["bf16_orig"][n])
        rec = {"case": inp.case, "category": inp.category, "case_index": inp.case_index, "rank": inp.rank,
               "note": inp.note, **m}
        result.records.append(rec)
        if log:
            log(f"{cfg.name} {inp.case} rank{inp.rank} T={inp.num_tokens} "
                f"{'PASS' if m['passed'] else 'FAIL ' + '; '.join(m['failures'])}")
    result.seconds = time.time() - t0
    return result


def run_suite_rank(cfg: SuiteConfig, impl: Implementation, rank: int, world: int, **kwargs) -> SuiteResult:
    """Per-rank mode for torchrun (one process per rank): runs every case for ``rank`` only, calling ``impl`` in
    the same order on every rank. ``world`` must equal the P the config models."""
    if world != cfg.world:
        raise ValueError(f"run_suite_rank: world={world} but config {cfg.name!r} models P={cfg.world}")
    return run_suite(cfg, impl, ranks=[rank], **kwargs)
