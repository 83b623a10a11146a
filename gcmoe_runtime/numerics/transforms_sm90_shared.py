"""Hopper (SM90) host transform of the FP8 shared-expert weights for role4 (paper §4.5, §2.3).

THE single definition of the role4 weight layout (``gcmoe_build/kernels/sm90/role4_shared.py`` follows it).
The transform only rearranges bytes: E4M3 codes are moved, never re-quantised, and the UE8M0 scale codes are
moved and (for the 1x128x128 recipe) repeated, never changed — :func:`untransform_shared_sm90` inverts it exactly.

Operand: the weights are the **register A operand** of ``wgmma.mma_async.m64nNk32.f32.e4m3.e4m3`` (rows = M,
tokens = N from shared memory), fragment coordinates as in :func:`sm90_layout.a_fragment_coord` (element
``a_i``, ``i = 4r + b``, sits in register ``r``, byte ``b``).

* **Rows.** W1 ``[2Is, H]`` (gate rows then up rows) is gate/up interleaved in 8-row groups
  (:mod:`.gate_up`), so a thread's two accumulator row halves are gate and up of one intermediate column.
* **Code tiles** ``uint8 [N/64, K/128, 128, 4, 4, 4]``: per 64-row slab and K128 step, warpgroup thread
  ``t`` owns 64 contiguous bytes ``[64t, 64t + 64)``; K32 step ``q`` is the 16 bytes ``[16q, 16q + 16)`` =
  its four A registers ``a0..a3`` (byte ``b`` of register ``r`` = element ``4r + b``). One K128 step of
  one slab is 8192 contiguous bytes (four ``ld.global.v4`` per thread).
* **Scale tiles** ``uint8 [N/64, K/128, 32, 8]``: UE8M0 codes per row per K32 (the 1x128x128 recipe's block
  codes are repeated to every row and K32 of their block: exact). Row group ``r8 = 8w + g`` (warp ``w``,
  lane group ``g``) owns 8 bytes; byte ``2q + hh`` is the code of slab row ``16w + g + 8hh`` for K32 ``q``
  (the role2 scale-tile byte order, so the per-K32 scale FMAs are role2's).

Weight value = ``e4m3(code) * 2**(scale_code - 127)`` — exactly ``quant.dequantize_fp8_weight``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from .gate_up import deinterleave_gate_up, interleave_gate_up
from .quant import SHARED_RECIPES, expand_block_scales
from .sm90_layout import a_fragment_coord

SLAB_ROWS = 64
K_STEP = 128
CODE_TILE_BYTES = SLAB_ROWS * K_STEP  # 8192
SCALE_TILE_BYTES = 256


def _check_recipe(recipe) -> tuple:
    r = tuple(int(v) for v in recipe)
    if r not in SHARED_RECIPES:
        raise ValueError(f"shared weights: recipe {tuple(recipe)} not supported; choose one of {SHARED_RECIPES}")
    return r


@functools.lru_cache(maxsize=None)
def _code_index() -> tuple[torch.Tensor, torch.Tensor]:
    """(row, k) within a 64x128 tile of every byte position 0..8191 of a code tile."""
    rows, ks = [], []
    for t in range(128):
        for q in range(4):
            for i in range(16):  # i = 4r + b: register r, byte b, contiguous
                row, col = a_fragment_coord(t, i)
                rows.append(row)
                ks.append(32 * q + col)
    return torch.tensor(rows, dtype=torch.long), torch.tensor(ks, dtype=torch.long)


@functools.lru_cache(maxsize=None)
def _scale_index() -> tuple[torch.Tensor, torch.Tensor]:
    """(row, K32 index) within a 64-row x 4-K32 scale tile of every byte position 0..255."""
    rows, qs = [], []
    for r8 in range(32):
        w, g = divmod(r8, 8)
        for byte in range(8):
            q, hh = divmod(byte, 2)
            rows.append(16 * w + g + 8 * hh)
            qs.append(q)
    return torch.tensor(rows, dtype=torch.long), torch.tensor(qs, dtype=torch.long)


def _as_u8(t: torch.Tensor, name: str) -> torch.Tensor:
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8)
    if t.dtype != torch.uint8:
        raise ValueError(f"shared weights: {name} must be float8_e4m3fn or uint8 codes, got {t.dtype}")
    return t


def per_row_k32_codes(codes: torch.Tensor, recipe, n: int, k: int, name: str) -> torch.Tensor:
    """Scale codes of ``recipe`` -> uint8 ``[n, k/32]`` (one per row per K32; exact repeat for 1x128x128)."""
    recipe = _check_recipe(recipe)
    want = (n, k // 32) if recipe == (1, 1, 32) else (n // 128, k // 128)
    if codes.dtype != torch.uint8 or tuple(codes.shape) != want:
        raise ValueError(f"shared weights: {name} must be uint8 UE8M0 codes {list(want)} for recipe {recipe}, got "
                         f"{codes.dtype} {list(codes.shape)}")
    return codes if recipe == (1, 1, 32) else expand_block_scales(codes)


def tile_codes(w: torch.Tensor) -> torch.Tensor:
    """uint8 ``[N, K]`` -> code tiles ``[N/64, K/128, 8192]`` (pure gather)."""
    n, k = w.shape
    rows, ks = (x.to(w.device) for x in _code_index())
    t = w.reshape(n // SLAB_ROWS, SLAB_ROWS, k // K_STEP, K_STEP).permute(0, 2, 1, 3)  # [S, KB, 64, 128]
    return t[:, :, rows, ks].contiguous()


def untile_codes(tiles: torch.Tensor) -> torch.Tensor:
    s, kb, _ = tiles.shape
    rows, ks = (x.to(tiles.device) for x in _code_index())
    out = torch.empty(s, kb, SLAB_ROWS, K_STEP, dtype=tiles.dtype, device=tiles.device)
    out[:, :, rows, ks] = tiles
    return out.permute(0, 2, 1, 3).reshape(s * SLAB_ROWS, kb * K_STEP)


def tile_scales(codes: torch.Tensor) -> torch.Tensor:
    """uint8 ``[N, K/32]`` -> scale tiles ``[N/64, K/128, 256]`` (pure gather)."""
    n, k32 = codes.shape
    rows, qs = (x.to(codes.device) for x in _scale_index())
    t = codes.reshape(n // SLAB_ROWS, SLAB_ROWS, k32 // 4, 4).permute(0, 2, 1, 3)  # [S, KB, 64, 4]
    return t[:, :, rows, qs].contiguous()


def untile_scales(tiles: torch.Tensor) -> torch.Tensor:
    s, kb, _ = tiles.shape
    rows, qs = (x.to(tiles.device) for x in _scale_index())
    out = torch.empty(s, kb, SLAB_ROWS, 4, dtype=tiles.dtype, device=tiles.device)
    out[:, :, rows, qs] = tiles
    return out.permute(0, 2, 1, 3).reshape(s * SLAB_ROWS, kb * 4)


@dataclass
class SharedSM90Weights:
    """Transformed shared-expert weights (what role4 reads); ``args()`` is the order ``fp8_fp4_gc_moe`` packs
    as ``shared_w1, shared_w1_scale, shared_w2, shared_w2_scale``."""

    w1_tiles: torch.Tensor
    w1_scales: torch.Tensor
    w2_tiles: torch.Tensor
    w2_scales: torch.Tensor
    hidden: int
    intermediate: int  # Is (all fused shared experts)
    recipe: tuple

    def args(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return (self.w1_tiles, self.w1_scales, self.w2_tiles, self.w2_scales)


def transform_shared_sm90(w1: torch.Tensor, w1_scale: torch.Tensor, w2: torch.Tensor, w2_scale: torch.Tensor,
                          recipe=(1, 128, 128)) -> SharedSM90Weights:
    """FP8 shared weights (``reference.SharedWeights`` convention: w1 e4m3 ``[2Is, H]`` gate then up, w2 e4m3
    ``[H, Is]``, UE8M0 codes per ``recipe``) -> the role4 layout. Runs on the tensors' device."""
    recipe = _check_recipe(recipe)
    w1u, w2u = _as_u8(w1, "w1"), _as_u8(w2, "w2")
    if w1u.dim() != 2 or w2u.dim() != 2:
        raise ValueError(f"shared weights: w1 {list(w1.shape)} and w2 {list(w2.shape)} must be 2-D")
    two_i, h = w1u.shape
    if two_i % 2 or tuple(w2u.shape) != (h, two_i // 2):
        raise ValueError(f"shared weights: w1 {list(w1.shape)} = [2Is, H] and w2 {list(w2.shape)} = [H, Is] disagree")
    i = two_i // 2
    if h % 256 or i % 256:
        raise ValueError(f"shared weights: H={h} and Is={i} must be multiples of 256 (role4 tiles: 256 rows, "
                         "K chunks of 256)")
    s1 = per_row_k32_codes(w1_scale, recipe, two_i, h, "w1_scale")
    s2 = per_row_k32_codes(w2_scale, recipe, h, i, "w2_scale")
    return SharedSM90Weights(
        w1_tiles=tile_codes(interleave_gate_up(w1u.contiguous())), w1_scales=tile_scales(interleave_gate_up(s1)),
        w2_tiles=tile_codes(w2u.contiguous()), w2_scales=tile_scales(s2.contiguous()),
        hidden=h, intermediate=i, recipe=recipe)


def untransform_shared_sm90(sw: SharedSM90Weights) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact inverse up to the scale expansion: (w1 codes [2Is, H], w1 per-row K32 codes [2Is, H/32],
    w2 codes [H, Is], w2 per-row K32 codes [H, Is/32]), all uint8, canonical (un-interleaved) row order."""
    return (deinterleave_gate_up(untile_codes(sw.w1_tiles)), deinterleave_gate_up(untile_scales(sw.w1_scales)),
            untile_codes(sw.w2_tiles), untile_scales(sw.w2_scales))


__all__ = ["SharedSM90Weights", "transform_shared_sm90", "untransform_shared_sm90", "tile_codes", "untile_codes",
           "tile_scales", "untile_scales", "per_row_k32_codes"]
