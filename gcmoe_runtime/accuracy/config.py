"""Model configurations the accuracy suite runs, and deterministic generation of one layer's weights.

A ``SuiteConfig`` describes one expert-parallel MoE layer of ``world`` (P) ranks: ``num_experts`` (E) routed
experts split ``E/P`` per rank (expert ``g`` lives on rank ``g // (E/P)``), top-k routing, an optional shared
expert, the activation recipe and the per-rank token capacity. Presets follow paper Table 4 and the test model
of manifests/test-tiny.yaml; ``cpu_variant`` shrinks a production preset to a per-rank expert count for CPU runs.

Weights are generated from ``seed`` (BF16 "originals", i.e. the high-precision checkpoint), then quantised with
``numerics.quant`` — MXFP4 routed, FP8 shared with the configured recipe. Every process generates the identical
layer, so a torchrun job needs no weight exchange.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import torch

from ..numerics.quant import quantize_fp8_weight, quantize_mxfp4
from ..numerics.reference import RoutedWeights, SharedWeights, SwiGLUSpec


@dataclass(frozen=True)
class SuiteConfig:
    name: str
    hidden: int
    intermediate: int
    num_experts: int
    topk: int
    shared_experts: int = 0            # 0 or 1 (fused shared expert in combine lane k)
    shared_intermediate: Optional[int] = None  # default: intermediate
    shared_recipe: tuple = (1, 128, 128)
    world: int = 1
    capacity: int = 64                 # max tokens per rank
    act_recipe: str = "fp32_k128"      # Hopper; "ue8m0_k32" for Blackwell
    alpha: float = 1.0
    clamp: Optional[float] = 10.0
    seed: int = 0

    def __post_init__(self):
        problems = []
        if self.hidden % 128:
            problems.append(f"hidden={self.hidden} must be a multiple of 128")
        if self.intermediate % 128:
            problems.append(f"intermediate={self.intermediate} must be a multiple of 128")
        if self.world < 1 or self.num_experts % self.world:
            problems.append(f"num_experts={self.num_experts} must be divisible by world={self.world}")
        if not 1 <= self.topk <= self.num_experts:
            problems.append(f"topk={self.topk} must be in [1, num_experts={self.num_experts}]")
        if self.topk + self.shared_experts > 32:
            problems.append(f"topk + shared = {self.topk + self.shared_experts} exceeds 32 combine lanes")
        if self.shared_experts not in (0, 1):
            problems.append(f"shared_experts={self.shared_experts} must be 0 or 1")
        if self.capacity < 1:
            problems.append(f"capacity={self.capacity} must be >= 1")
        if self.act_recipe not in ("fp32_k128", "ue8m0_k32"):
            problems.append(f"act_recipe={self.act_recipe!r} must be 'fp32_k128' or 'ue8m0_k32'")
        if problems:
            raise ValueError(f"SuiteConfig {self.name!r}: " + "; ".join(problems))

    @property
    def experts_per_rank(self) -> int:
        return self.num_experts // self.world

    @property
    def swiglu(self) -> SwiGLUSpec:
        return SwiGLUSpec(self.alpha, self.clamp)

    @property
    def shared_i(self) -> int:
        return self.shared_intermediate or self.intermediate

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["shared_recipe"] = list(self.shared_recipe)
        return d


PRESETS = {
    # manifests/test-tiny.yaml numbers (H=512, I=256, E=16, top-4, one shared expert), modelled on 2 ranks.
    "test-tiny": SuiteConfig("test-tiny", 512, 256, 16, 4, shared_experts=1, world=2, capacity=64),
    # Paper Table 4, full size (P=8 as in the paper's runs).
    "glm-5.2": SuiteConfig("glm-5.2", 6144, 2048, 256, 8, shared_experts=1, shared_recipe=(1, 128, 128),
                           world=8, capacity=256),
    "deepseek-v4.1-flash": SuiteConfig("deepseek-v4.1-flash", 5120, 2304, 384, 6, shared_experts=1,
                                       shared_recipe=(1, 1, 32), world=8, capacity=256),
}


def cpu_variant(cfg: SuiteConfig, experts: Optional[int] = None, world: int = 1,
                capacity: Optional[int] = None, shared: Optional[bool] = None) -> SuiteConfig:
    """Production shapes (H, I, k, shared recipe) at a reduced global expert count (default E/8 = one rank's
    share at P=8), modelled on ``world`` ranks, capacity default min(preset capacity, 32) tokens per rank.
    The committed CPU results use E/16 (see results/accuracy/README.md)."""
    e = experts or cfg.num_experts // 8
    return dataclasses.replace(cfg, name=f"{cfg.name}@E{e}P{world}", num_experts=e, world=world,
                               capacity=capacity or min(cfg.capacity, 32),
                               shared_experts=cfg.shared_experts if shared is None else int(shared))


def resolve_preset(spec: str) -> SuiteConfig:
    """``PRESET`` (a key of :data:`PRESETS`) or ``PRESET@E<n>``: that preset's shapes at ``n`` global experts, world and
    capacity kept (``glm-5.2@E32`` is one rank's share of GLM-5.2 at P = 8, the model of
    manifests/rank-share-glm-5.2-p8.yaml). An unknown preset or a bad ``n`` is an error naming the spec."""
    name, sep, e = spec.partition("@E")
    if name not in PRESETS:
        raise ValueError(f"preset {spec!r}: {name!r} is not one of {sorted(PRESETS)}")
    cfg = PRESETS[name]
    if not sep:
        return cfg
    if not e.isdigit() or int(e) < 1:
        raise ValueError(f"preset {spec!r}: the expert count after '@E' must be a positive integer")
    return dataclasses.replace(cfg, name=spec, num_experts=int(e))


class GeneratedExperts:
    """The BF16 original routed weights, regenerated per expert from the seed on demand (never all stored):
    ``expert_fp32(e)`` -> (W1 ``[2I, H]``, W2 ``[H, I]``) as FP32 holding BF16 values, on ``device``."""

    def __init__(self, cfg: "SuiteConfig", device="cpu", gen_device="cpu"):
        self.cfg, self.device, self.num_experts = cfg, device, cfg.num_experts
        self.gen_device = torch.device(gen_device)

    def expert_bf16(self, e: int):
        if not 0 <= e < self.num_experts:
            raise IndexError(f"expert {e} outside [0, {self.num_experts})")
        gen = torch.Generator(device=self.gen_device).manual_seed(self.cfg.seed * 100003 + e)
        h, i = self.cfg.hidden, self.cfg.intermediate
        return _matrix(gen, 2 * i, h), _matrix(gen, h, i)

    def expert_fp32(self, e: int):
        return tuple(w.to(self.device).float() for w in self.expert_bf16(e))


@dataclass
class LayerWeights:
    """One layer: quantised weights the operator consumes and the BF16 originals for the ideal reference."""
    cfg: SuiteConfig
    routed: RoutedWeights                    # MXFP4, all E experts (global ids)
    routed_bf16: GeneratedExperts            # BF16 originals, regenerated on demand
    shared: Optional[SharedWeights] = None   # FP8
    shared_bf16: Optional[tuple] = None      # (w1 [2Is, H], w2 [H, Is]) BF16

    def local(self, rank: int) -> RoutedWeights:
        """The experts rank ``rank`` owns (local ids 0..E/P-1)."""
        e = self.cfg.experts_per_rank
        return self.routed.slice(rank * e, (rank + 1) * e)

    def to(self, device) -> "LayerWeights":
        mv = lambda t: t.to(device)  # noqa: E731
        r = self.routed
        return LayerWeights(
            self.cfg, RoutedWeights(mv(r.w1), mv(r.w1_scale), mv(r.w2), mv(r.w2_scale)),
            GeneratedExperts(self.cfg, device, self.routed_bf16.gen_device),
            None if self.shared is None else SharedWeights(mv(self.shared.w1), mv(self.shared.w1_scale),
                                                           mv(self.shared.w2), mv(self.shared.w2_scale),
                                                           self.shared.recipe),
            None if self.shared_bf16 is None else tuple(mv(t) for t in self.shared_bf16))


def _matrix(gen: torch.Generator, rows: int, cols: int) -> torch.Tensor:
    """A BF16 weight with per-row gains 2**U(-1.5, 1.5) (so K32 scale exponents spread like real checkpoints)."""
    gain = torch.exp2(torch.rand(rows, 1, generator=gen, device=gen.device) * 3.0 - 1.5)
    return (torch.randn(rows, cols, generator=gen, device=gen.device) * (gain / cols ** 0.5)).to(torch.bfloat16)


def make_layer_weights(cfg: SuiteConfig, device="cpu") -> LayerWeights:
    """Deterministic (seeded) weights of one layer, expert by expert, generated and quantised on ``device``.
    The default (CPU) gives the same weights on every machine; a CUDA device gives other (equally seeded and
    reproducible) weights in seconds where the CPU needs many minutes (a whole production layer)."""
    h, i, e = cfg.hidden, cfg.intermediate, cfg.num_experts
    dev = torch.device(device)
    q1 = torch.empty(e, 2 * i, h // 2, dtype=torch.uint8, device=dev)
    s1 = torch.empty(e, 2 * i, h // 32, dtype=torch.uint8, device=dev)
    q2 = torch.empty(e, h, i // 2, dtype=torch.uint8, device=dev)
    s2 = torch.empty(e, h, i // 32, dtype=torch.uint8, device=dev)
    originals = GeneratedExperts(cfg, dev, dev)
    for x in range(e):
        w1, w2 = originals.expert_bf16(x)
        q1[x], s1[x] = quantize_mxfp4(w1, name=f"w1[{x}]")
        q2[x], s2[x] = quantize_mxfp4(w2, name=f"w2[{x}]")
    layer = LayerWeights(cfg, RoutedWeights(q1, s1, q2, s2), originals)
    if cfg.shared_experts:
        gen = torch.Generator(device=dev).manual_seed(cfg.seed * 100003 + 99991)
        sw1, sw2 = _matrix(gen, 2 * cfg.shared_i, h), _matrix(gen, h, cfg.shared_i)
        a, b = quantize_fp8_weight(sw1, cfg.shared_recipe, "shared_w1")
        c, d = quantize_fp8_weight(sw2, cfg.shared_recipe, "shared_w2")
        layer.shared = SharedWeights(a, b, c, d, tuple(cfg.shared_recipe))
        layer.shared_bf16 = (sw1, sw2)
    return layer
