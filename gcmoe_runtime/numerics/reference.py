"""FP32 reference MoE layer (paper Eq. 1) computed the way the operator computes it, plus a BF16 "ideal" reference.

Quantised reference, step by step (this docstring is the one place that defines it; kernels must match it):

1. Activations: dequantise the caller's E4M3 payload with its scales (Hopper: FP32 per 128 along H;
   Blackwell: UE8M0 per 32 along H, four per int32) to FP32.
2. Routed W1 (MXFP4, rows ``[0, I)`` gate, ``[I, 2I)`` up, canonical un-interleaved order) is dequantised
   exactly to FP32; ``h = x @ W1^T`` in FP32.
3. **W1 epilogue** (paper §4.4 "W1 epilogue"): gate and up are rounded FP32 -> BF16 -> FP32, then **clamped**:
   ``gate = min(gate, clamp)`` (upper side only) and ``up = clamp(up, -clamp, clamp)`` — the clamp acts on the
   pre-activation values, the "swiglu limit" convention; then ``act = gate * sigmoid(alpha * gate) * up``
   and ``act *= g[t, j]`` (the routing weight, applied in the W1 stage so W2 needs no per-token scaling).
   All in FP32. Paper values: alpha = 1.0, clamp = 10.0. ``clamp=None`` disables the clamp.
4. **Intermediate requantisation**: E4M3 with UE8M0 scales along I (scale = smallest power of two with
   amax/scale <= 448; an all-zero group gets scale 1), one scale per ``recipes.INTERMEDIATE_SCALE_GROUP`` values of the
   activation recipe's path. Blackwell (``ue8m0_k32``): per 32, the paper's W1 epilogue (its block-scaled MMA reads
   K32 scales). Hopper (``fp32_k128``): per 128 — DESIGN.md §3's "FP8 requant with UE8M0 scales in the W1 epilogue"
   at the K128 granularity of every Hopper activation, so role2's W2 chains the four K32 MMAs of a K128 step on one
   partial like W1 (one promotion per K128, not four). On the 47-case suite per 128 and per 32 give the same
   accuracy (cosine 0.9999999 between the two outputs: ``results/accuracy/2026-11-30-intermediate-scale-study/``).
5. Routed W2 (MXFP4) dequantised; ``p = dequant(intermediate) @ W2^T`` in FP32, rounded to **BF16** (the partial
   the operator scatters to the combine buffer).
6. **Combine**: ``y = sum_j float(p[t, j])`` in FP32 in **slot order j = 0..k-1**, then the optional shared
   expert's BF16 partial in lane k (shared expert: FP8 weights, same steps 2-5 with routing weight 1). Output
   BF16. A slot whose expert id is negative is masked: it contributes nothing.

The BF16 "ideal" reference (:func:`bf16_reference_moe_forward`) evaluates Eq. 1 on BF16 activations and
floating-point weights with BF16 rounding after every GEMM and after the activation, and **no** FP8/FP4
quantisation anywhere (no intermediate requantisation). It is the target of the "cosine vs BF16" metric.

Both run on the device of their inputs. Expert weights are obtained through an ``ExpertWeights`` provider
(anything with ``num_experts`` and ``expert_fp32(e) -> (W1 [2I, H], W2 [H, I])`` in FP32), so callers can cache
or generate weights lazily.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

import torch

from .quant import (
    dequantize_e4m3_fp32_k128, dequantize_e4m3_ue8m0, dequantize_e4m3_ue8m0_k32_packed, dequantize_fp8_weight,
    dequantize_mxfp4, quantize_e4m3_ue8m0,
)

from .recipes import ACT_RECIPES, INTERMEDIATE_SCALE_GROUP, SM90_INTERMEDIATE_SCALE_GROUP  # noqa: F401


@dataclass(frozen=True)
class SwiGLUSpec:
    alpha: float = 1.0
    clamp: Optional[float] = 10.0


class ExpertWeights(Protocol):
    num_experts: int

    def expert_fp32(self, e: int) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass
class RoutedWeights:
    """Canonical MXFP4 routed weights of ``num_experts`` experts (expert ids local to this object).

    w1 ``uint8 [E, 2I, H/2]`` (gate rows then up rows), w1_scale ``uint8 [E, 2I, H/32]``,
    w2 ``uint8 [E, H, I/2]``, w2_scale ``uint8 [E, H, I/32]``.
    """
    w1: torch.Tensor
    w1_scale: torch.Tensor
    w2: torch.Tensor
    w2_scale: torch.Tensor

    def __post_init__(self):
        e, two_i, h2 = self.w1.shape
        if self.w1.dtype != torch.uint8 or self.w2.dtype != torch.uint8:
            raise ValueError("RoutedWeights: w1 and w2 must be packed E2M1 uint8 tensors")
        h, i2 = self.w2.shape[1:]
        if two_i % 2 or two_i // 2 != 2 * i2 or h != 2 * h2 or self.w2.shape[0] != e:
            raise ValueError(f"RoutedWeights: inconsistent shapes w1 {tuple(self.w1.shape)} w2 {tuple(self.w2.shape)}")
        if tuple(self.w1_scale.shape) != (e, two_i, h // 32) or tuple(self.w2_scale.shape) != (e, h, two_i // 64):
            raise ValueError(f"RoutedWeights: scale shapes {tuple(self.w1_scale.shape)}, {tuple(self.w2_scale.shape)} "
                             f"do not match K32 blocks of w1 {tuple(self.w1.shape)}, w2 {tuple(self.w2.shape)}")

    @property
    def num_experts(self) -> int:
        return self.w1.shape[0]

    @property
    def hidden(self) -> int:
        return self.w2.shape[1]

    @property
    def intermediate(self) -> int:
        return self.w1.shape[1] // 2

    def slice(self, lo: int, hi: int) -> "RoutedWeights":
        return RoutedWeights(self.w1[lo:hi], self.w1_scale[lo:hi], self.w2[lo:hi], self.w2_scale[lo:hi])

    def expert_fp32(self, e: int):
        return (dequantize_mxfp4(self.w1[e], self.w1_scale[e]), dequantize_mxfp4(self.w2[e], self.w2_scale[e]))


@dataclass
class SharedWeights:
    """FP8 shared-expert weights: w1 ``e4m3 [2Is, H]`` (gate then up), w2 ``e4m3 [H, Is]``, UE8M0 scale codes in
    the layout of ``recipe`` (see ``quant.quantize_fp8_weight``)."""
    w1: torch.Tensor
    w1_scale: torch.Tensor
    w2: torch.Tensor
    w2_scale: torch.Tensor
    recipe: tuple = (1, 128, 128)

    def fp32(self):
        return (dequantize_fp8_weight(self.w1, self.w1_scale, self.recipe),
                dequantize_fp8_weight(self.w2, self.w2_scale, self.recipe))


@dataclass
class FloatExperts:
    """Floating-point (e.g. BF16 original) expert weights: w1 ``[E, 2I, H]``, w2 ``[E, H, I]``."""
    w1: torch.Tensor
    w2: torch.Tensor

    @property
    def num_experts(self) -> int:
        return self.w1.shape[0]

    def expert_fp32(self, e: int):
        return self.w1[e].float(), self.w2[e].float()


def dequantize_activations(x_q: torch.Tensor, x_scale: torch.Tensor, recipe: str = "fp32_k128") -> torch.Tensor:
    if recipe == "fp32_k128":
        return dequantize_e4m3_fp32_k128(x_q, x_scale)
    if recipe == "ue8m0_k32":
        return dequantize_e4m3_ue8m0_k32_packed(x_q, x_scale)
    raise ValueError(f"activation recipe {recipe!r} unknown; choose one of {ACT_RECIPES}")


def bf16_round(x: torch.Tensor) -> torch.Tensor:
    """FP32 -> BF16 (round to nearest even) -> FP32."""
    return x.to(torch.bfloat16).float()


_bf16 = bf16_round  # kept: gcmoe_build's role2 GPU test imports this name


def swiglu(h: torch.Tensor, spec: SwiGLUSpec) -> torch.Tensor:
    """SwiGLU of ``h = [gate | up]`` (FP32) with the clamp convention of the module docstring."""
    i = h.shape[-1] // 2
    gate, up = h[..., :i], h[..., i:]
    if spec.clamp is not None:
        gate = gate.clamp(max=spec.clamp)
        up = up.clamp(-spec.clamp, spec.clamp)
    return gate * torch.sigmoid(spec.alpha * gate) * up


def _check_routing(topk_idx: torch.Tensor, topk_weights: torch.Tensor, t: int, num_experts: int):
    if topk_idx.dim() != 2 or topk_idx.shape[0] != t or tuple(topk_weights.shape) != tuple(topk_idx.shape):
        raise ValueError(f"routing: topk_idx {tuple(topk_idx.shape)} / topk_weights {tuple(topk_weights.shape)} "
                         f"must both be [T={t}, k]")
    if t and int(topk_idx.max()) >= num_experts:
        raise ValueError(f"routing: expert id {int(topk_idx.max())} >= num_experts {num_experts}")
    if not bool(torch.isfinite(topk_weights).all()):
        raise ValueError("routing: topk_weights holds NaN or Inf")


def _expert_groups(topk_idx: torch.Tensor):
    """Yield (expert, token rows, slot columns) for every expert that received at least one slot."""
    flat = topk_idx.reshape(-1)
    valid = (flat >= 0).nonzero().squeeze(1)
    if valid.numel() == 0:
        return
    experts = flat[valid]
    order = torch.argsort(experts, stable=True)
    valid, experts = valid[order], experts[order]
    uniq, counts = torch.unique_consecutive(experts, return_counts=True)
    k = topk_idx.shape[1]
    start = 0
    for e, c in zip(uniq.tolist(), counts.tolist()):
        sel = valid[start:start + c]
        start += c
        yield e, sel // k, sel % k


def _quantised_expert(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, g: torch.Tensor, spec: SwiGLUSpec,
                      group: int):
    """Steps 2-5 for one expert's tokens: FP32 in, BF16 partial out (``group``: step 4's scale group)."""
    h = _bf16(x @ w1.t())
    a = swiglu(h, spec) * g[:, None]
    q, codes = quantize_e4m3_ue8m0(a, group, name="swiglu intermediate")
    return (dequantize_e4m3_ue8m0(q, codes, group) @ w2.t()).to(torch.bfloat16)


def reference_moe_forward(x_q: torch.Tensor, x_scale: torch.Tensor, topk_idx: torch.Tensor,
                          topk_weights: torch.Tensor, routed: ExpertWeights,
                          shared: Optional[SharedWeights] = None, *, spec: SwiGLUSpec = SwiGLUSpec(),
                          act_recipe: str = "fp32_k128", return_partials: bool = False):
    """Quantised FP32 reference of one MoE layer for the tokens of one rank -> BF16 ``[T, H]``.

    ``topk_idx`` int ``[T, k]`` holds expert ids in ``routed`` numbering (global ids when ``routed`` holds all
    experts), negative = masked slot; ``topk_weights`` FP32 ``[T, k]``. With ``return_partials`` also returns the
    BF16 combine buffer ``[T, k(+1), H]`` (masked slots zero).
    """
    t, hidden = x_q.shape
    _check_routing(topk_idx, topk_weights, t, routed.num_experts)
    k = topk_idx.shape[1]
    lanes = k + (1 if shared is not None else 0)
    partials = torch.zeros(t, lanes, hidden, dtype=torch.bfloat16, device=x_q.device)
    if t:
        x = dequantize_activations(x_q, x_scale, act_recipe)
        group = INTERMEDIATE_SCALE_GROUP[act_recipe]
        g = topk_weights.float()
        for e, rows, slots in _expert_groups(topk_idx):
            w1, w2 = routed.expert_fp32(e)
            partials[rows, slots] = _quantised_expert(x[rows], w1, w2, g[rows, slots], spec, group)
        if shared is not None:
            sw1, sw2 = shared.fp32()
            partials[:, k] = _quantised_expert(x, sw1, sw2, torch.ones(t, device=x.device), spec, group)
    y = combine_partials(partials)
    return (y, partials) if return_partials else y


def combine_partials(partials: torch.Tensor) -> torch.Tensor:
    """Role3 semantics: FP32 accumulation of BF16 lanes in lane (slot) order, BF16 result."""
    acc = torch.zeros(partials.shape[0], partials.shape[2], dtype=torch.float32, device=partials.device)
    for j in range(partials.shape[1]):
        acc += partials[:, j].float()
    return acc.to(torch.bfloat16)


def bf16_reference_moe_forward(x: torch.Tensor, topk_idx: torch.Tensor, topk_weights: torch.Tensor,
                               routed: ExpertWeights, shared_w1: Optional[torch.Tensor] = None,
                               shared_w2: Optional[torch.Tensor] = None, *,
                               spec: SwiGLUSpec = SwiGLUSpec()) -> torch.Tensor:
    """BF16 "ideal" reference: BF16 activations ``x [T, H]``, floating-point weights (``routed`` provider, and
    optional shared ``[2Is, H]``/``[H, Is]``), BF16 rounding after each GEMM and the activation, no FP8/FP4."""
    t, hidden = x.shape
    _check_routing(topk_idx, topk_weights, t, routed.num_experts)
    k = topk_idx.shape[1]
    has_shared = shared_w1 is not None
    partials = torch.zeros(t, k + int(has_shared), hidden, dtype=torch.bfloat16, device=x.device)

    def expert(xs, w1, w2, g):
        a = _bf16(swiglu(_bf16(xs @ w1.t()), spec) * g[:, None])
        return (a @ w2.t()).to(torch.bfloat16)

    if t:
        xf = _bf16(x.float())
        g = _bf16(topk_weights.float())
        for e, rows, slots in _expert_groups(topk_idx):
            w1, w2 = routed.expert_fp32(e)
            partials[rows, slots] = expert(xf[rows], _bf16(w1), _bf16(w2), g[rows, slots])
        if has_shared:
            partials[:, k] = expert(xf, _bf16(shared_w1.float()), _bf16(shared_w2.float()),
                                    torch.ones(t, device=x.device))
    return combine_partials(partials)
