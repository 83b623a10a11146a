"""Quantisers and dequantisers for every operand format of the operator (paper §2.3, Table 2; DESIGN.md §3).

Owned recipes (all block along the last, contraction dimension K unless said otherwise):

========================  ==========================================  =========================================
what                      payload                                      scale
========================  ==========================================  =========================================
Hopper activations        E4M3FN ``[T, K]``                            FP32 ``[T, K/128]`` = amax/448
Blackwell activations     E4M3FN ``[T, K]``                            UE8M0 per 32, four packed per int32 ``[T, K/128]``
routed weights (MXFP4)    E2M1, two per byte ``[..., N, K/2]``         UE8M0 per 32 ``[..., N, K/32]``
shared weights (1,1,32)   E4M3FN ``[..., N, K]``                       UE8M0 per 1x32 ``[..., N, K/32]``
shared weights (1,128,128) E4M3FN ``[..., N, K]``                      UE8M0 per 128x128 ``[..., N/128, K/128]``
========================  ==========================================  =========================================

Conventions (one place):

* **Scale choice.** UE8M0 scales are the smallest power of two with ``amax / scale <= format max``
  (448 for E4M3, 6 for E2M1), so no value saturates. FP32 K128 scales are ``amax / 448`` exactly.
* **All-zero blocks** get scale 1.0 (FP32 1.0, UE8M0 code 127) and an all-zero payload, so they dequantise to 0.
* **Tiny blocks.** FP32 scales are clamped below at 2**-126 (smallest normal FP32) so they never become subnormal;
  UE8M0 exponents are clamped to [-127, 127]. Values then round (possibly to zero) in the payload format.
* **NaN / Inf** anywhere in the input raises ``ValueError`` naming the tensor; nothing is returned. So does a
  magnitude >= 2**127 (its rounded payload times a power-of-two scale could overflow FP32 on dequantisation).
* Everything runs on the input's device; no host synchronisation beyond the finiteness check.
"""
from __future__ import annotations

import torch

from .formats import (
    E4M3_MAX, FP4_MAX, exponent_to_ue8m0, fp4_encode, fp4_pack, fp4_unpack_values, pack_ue8m0_x4,
    to_e4m3, ue8m0_ceil_exponent, ue8m0_to_float, unpack_ue8m0_x4,
)

FP32_MIN_NORMAL = 2.0 ** -126
SHARED_RECIPES = ((1, 1, 32), (1, 128, 128))


def _pow2(e: torch.Tensor) -> torch.Tensor:
    """Exact FP32 2**e for integer e in [-127, 127] (multiplying by it is an exact exponent shift)."""
    return torch.ldexp(torch.ones(e.shape, dtype=torch.float32, device=e.device), e.to(torch.int32))


MAX_INPUT_MAGNITUDE = 2.0 ** 127


def check_finite(x: torch.Tensor, name: str) -> None:
    """Raise ValueError if ``x`` holds NaN or Inf (quantising them would silently poison the layer), or a
    magnitude >= 2**127 (its quantised form could round up past the FP32 range when dequantised)."""
    if not x.is_floating_point():
        return
    if not bool(torch.isfinite(x).all()):
        bad = (~torch.isfinite(x)).nonzero()[0].tolist()
        raise ValueError(f"{name}: non-finite value (NaN or Inf) at index {bad}; refusing to quantise")
    if x.numel() and float(x.abs().max()) >= MAX_INPUT_MAGNITUDE:
        bad = (x.abs() >= MAX_INPUT_MAGNITUDE).nonzero()[0].tolist()
        raise ValueError(f"{name}: magnitude >= 2**127 at index {bad}; beyond what the quantised formats "
                         "dequantise to finite FP32")


def _blocks(x: torch.Tensor, group: int, name: str) -> torch.Tensor:
    if x.dim() < 1 or x.shape[-1] % group:
        raise ValueError(f"{name}: last dimension {tuple(x.shape)[-1:]} must be a multiple of {group}")
    return x.float().reshape(*x.shape[:-1], x.shape[-1] // group, group)


# ----------------------------------------------------------------------------------------------- activations
def quantize_e4m3_fp32_k128(x: torch.Tensor, name: str = "x"):
    """Hopper activations: (E4M3 ``[.., K]``, FP32 scales ``[.., K/128]``), scale = amax/448."""
    check_finite(x, name)
    b = _blocks(x, 128, name)
    amax = b.abs().amax(dim=-1)
    scale = torch.where(amax == 0, torch.ones_like(amax), (amax / E4M3_MAX).clamp_min(FP32_MIN_NORMAL))
    q = to_e4m3(b / scale[..., None]).reshape(x.shape)
    return q, scale


def dequantize_e4m3_fp32_k128(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    b = q.float().reshape(*q.shape[:-1], q.shape[-1] // 128, 128)
    return (b * scale.float()[..., None]).reshape(q.shape)


def quantize_e4m3_ue8m0(x: torch.Tensor, group: int = 32, name: str = "x"):
    """E4M3 with one UE8M0 scale per ``group`` along K: (E4M3 ``[.., K]``, codes uint8 ``[.., K/group]``).

    Used for Blackwell activations (group 32, then :func:`pack_ue8m0_x4`) and for the FP8 requantisation of the
    SwiGLU intermediate on both paths (see ``reference.py``).
    """
    check_finite(x, name)
    b = _blocks(x, group, name)
    e = ue8m0_ceil_exponent(b.abs().amax(dim=-1) / E4M3_MAX)
    q = to_e4m3(b * _pow2(-e)[..., None]).reshape(x.shape)
    return q, exponent_to_ue8m0(e)


def dequantize_e4m3_ue8m0(q: torch.Tensor, codes: torch.Tensor, group: int = 32) -> torch.Tensor:
    b = q.float().reshape(*q.shape[:-1], q.shape[-1] // group, group)
    return (b * ue8m0_to_float(codes)[..., None]).reshape(q.shape)


def quantize_e4m3_ue8m0_k32_packed(x: torch.Tensor, name: str = "x"):
    """Blackwell activations: (E4M3 ``[T, K]``, int32 ``[T, K/128]`` holding four UE8M0 K32 scales each)."""
    q, codes = quantize_e4m3_ue8m0(x, 32, name)
    return q, pack_ue8m0_x4(codes)


def dequantize_e4m3_ue8m0_k32_packed(q: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    return dequantize_e4m3_ue8m0(q, unpack_ue8m0_x4(packed), 32)


# ------------------------------------------------------------------------------------------- routed weights
def quantize_mxfp4(w: torch.Tensor, name: str = "w"):
    """MXFP4 routed weights: (packed E2M1 uint8 ``[..., N, K/2]``, UE8M0 codes uint8 ``[..., N, K/32]``)."""
    check_finite(w, name)
    b = _blocks(w, 32, name)
    e = ue8m0_ceil_exponent(b.abs().amax(dim=-1) / FP4_MAX)
    codes = fp4_encode(b * _pow2(-e)[..., None]).reshape(w.shape)
    return fp4_pack(codes), exponent_to_ue8m0(e)


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """Exact dequantisation (every E2M1 x UE8M0 product is representable in FP32) -> ``[..., N, K]``."""
    v = fp4_unpack_values(packed, torch.float32)
    b = v.reshape(*v.shape[:-1], v.shape[-1] // 32, 32) * ue8m0_to_float(scales)[..., None]
    return b.reshape(v.shape).to(dtype)


# ------------------------------------------------------------------------------------------- shared weights
def _check_recipe(recipe) -> tuple:
    recipe = tuple(recipe)
    if recipe not in SHARED_RECIPES:
        raise ValueError(f"shared-weight recipe {recipe} not supported; choose one of {SHARED_RECIPES}")
    return recipe


def quantize_fp8_weight(w: torch.Tensor, recipe=(1, 128, 128), name: str = "w_shared"):
    """FP8 shared-expert weights ``[..., N, K]`` -> (E4M3 ``[..., N, K]``, UE8M0 codes).

    Recipe (1,1,32): codes ``[..., N, K/32]``. Recipe (1,128,128): codes ``[..., N/128, K/128]``, one scale per
    128x128 block (expand with :func:`expand_block_scales` before weight transformation, paper §2.3).
    """
    recipe = _check_recipe(recipe)
    if recipe == (1, 1, 32):
        return quantize_e4m3_ue8m0(w, 32, name)
    check_finite(w, name)
    n, k = w.shape[-2:]
    if n % 128 or k % 128:
        raise ValueError(f"{name}: shape {tuple(w.shape)} must have N and K multiples of 128 for recipe (1,128,128)")
    b = w.float().reshape(*w.shape[:-2], n // 128, 128, k // 128, 128)
    e = ue8m0_ceil_exponent(b.abs().amax(dim=(-3, -1)) / E4M3_MAX)  # [..., N/128, K/128]
    q = to_e4m3(b * _pow2(-e)[..., :, None, :, None]).reshape(w.shape)
    return q, exponent_to_ue8m0(e)


def expand_block_scales(codes_128: torch.Tensor) -> torch.Tensor:
    """(1,128,128) scale codes ``[..., N/128, K/128]`` -> per-row K32 codes ``[..., N, K/32]`` (exact repeat)."""
    return codes_128.repeat_interleave(128, dim=-2).repeat_interleave(4, dim=-1)


def dequantize_fp8_weight(q: torch.Tensor, codes: torch.Tensor, recipe=(1, 128, 128)) -> torch.Tensor:
    recipe = _check_recipe(recipe)
    if recipe == (1, 128, 128):
        codes = expand_block_scales(codes)
    return dequantize_e4m3_ue8m0(q, codes, 32)
