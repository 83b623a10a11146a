"""Blackwell (SM100-family) weight transform: K128 tile prepack, gate/up interleave, UTCCP scale order (§4.4).

Rearranges already-quantised weights only, on their device (caller's stream). Per matrix ``[E, rows, K]``:

* **Payload**: row-major ``[E, rows, K*b]`` bytes (``b`` = bytes per value: FP4 packed 1/2, FP8 1) ->
  K128-tile-contiguous ``[E, K/128, rows, 128*b]``: within one K128 tile every row's segment (64 B for FP4,
  128 B for FP8) is contiguous, so one 4-D TMA box (128, 128, 1, 1) over (K, rows, kb, experts) reads one
  8 KB (16 KB for FP8) contiguous range.
* **Gate/up**: W1 rows interleaved in 8-row groups (``gate_up``), applied to payload and scales alike.
* **Scales**: UE8M0 K32 codes ``[E, rows, K/32]`` -> four packed per int32 (``formats.pack_ue8m0_x4``) ->
  MN-major ``[E, K/128, rows]`` with rows permuted inside every 128-row group into the order
  ``tcgen05.cp .32x128b.warpx4`` consumes: canonical row ``u`` goes to ``128*(u//128) + 4*(u%32) + (u%128)//32``
  (the same row order as paper Eq. 3; ``utccp_row``). One K128 stage = 128 rows x 4 B = 512 B.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .formats import pack_ue8m0_x4, unpack_ue8m0_x4
from .gate_up import deinterleave_gate_up, interleave_gate_up
from .quant import expand_block_scales
from .reference import RoutedWeights, SharedWeights


def utccp_row(u: torch.Tensor) -> torch.Tensor:
    """Destination row of canonical row ``u`` inside the 128-row UTCCP groups."""
    return 128 * (u // 128) + 4 * (u % 32) + (u % 128) // 32


def prepack_k128(payload: torch.Tensor, values_per_byte: int) -> torch.Tensor:
    """``[E, rows, K/vpb]`` bytes -> ``[E, K/128, rows, 128/vpb]``."""
    seg = 128 // values_per_byte
    e, rows, kbytes = payload.shape
    if kbytes % seg:
        raise ValueError(f"prepack_k128: K={kbytes * values_per_byte} must be a multiple of 128")
    return payload.reshape(e, rows, kbytes // seg, seg).permute(0, 2, 1, 3).contiguous()


def unprepack_k128(tiles: torch.Tensor) -> torch.Tensor:
    e, kb, rows, seg = tiles.shape
    return tiles.permute(0, 2, 1, 3).reshape(e, rows, kb * seg).contiguous()


def permute_scales_utccp(codes: torch.Tensor) -> torch.Tensor:
    """UE8M0 codes ``uint8 [E, rows, K/32]`` -> int32 ``[E, K/128, rows]`` in UTCCP row order."""
    e, rows, g = codes.shape
    if rows % 128:
        raise ValueError(f"UTCCP scale order: rows={rows} must be a multiple of 128")
    packed = pack_ue8m0_x4(codes).permute(0, 2, 1)  # [E, K/128, rows]
    out = torch.empty_like(packed)
    out[:, :, utccp_row(torch.arange(rows, device=codes.device))] = packed
    return out.contiguous()


def unpermute_scales_utccp(perm: torch.Tensor) -> torch.Tensor:
    rows = perm.shape[2]
    packed = perm[:, :, utccp_row(torch.arange(rows, device=perm.device))]
    return unpack_ue8m0_x4(packed.permute(0, 2, 1).contiguous())


@dataclass
class Sm100Matrix:
    tiles: torch.Tensor         # uint8 [E, K/128, rows, 64] (FP4) or [E, K/128, rows, 128] (FP8 viewed as uint8)
    scales: torch.Tensor        # int32 [E, K/128, rows], UTCCP order
    values_per_byte: int
    gate_up_interleaved: bool

    def canonical(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(row-major payload bytes ``[E, rows, K/vpb]``, UE8M0 codes ``[E, rows, K/32]``) in canonical row order."""
        p, s = unprepack_k128(self.tiles), unpermute_scales_utccp(self.scales)
        if self.gate_up_interleaved:
            p, s = deinterleave_gate_up(p), deinterleave_gate_up(s)
        return p, s


def transform_matrix_sm100(payload: torch.Tensor, codes: torch.Tensor, gate_up: bool,
                           values_per_byte: int) -> Sm100Matrix:
    if gate_up:
        payload, codes = interleave_gate_up(payload), interleave_gate_up(codes)
    return Sm100Matrix(prepack_k128(payload, values_per_byte), permute_scales_utccp(codes), values_per_byte, gate_up)


def transform_weights_sm100(routed: RoutedWeights) -> tuple[Sm100Matrix, Sm100Matrix]:
    """Routed MXFP4 (W1 interleaved, W2) in the Blackwell layout."""
    return (transform_matrix_sm100(routed.w1, routed.w1_scale, True, 2),
            transform_matrix_sm100(routed.w2, routed.w2_scale, False, 2))


def transform_shared_sm100(shared: SharedWeights) -> tuple[Sm100Matrix, Sm100Matrix]:
    """FP8 shared-expert weights; (1,128,128) block scales are first expanded to per-row K32 codes."""
    def one(w, s, gate_up):
        if tuple(shared.recipe) == (1, 128, 128):
            s = expand_block_scales(s)
        return transform_matrix_sm100(w.view(torch.uint8)[None], s[None], gate_up, 1)
    return one(shared.w1, shared.w1_scale, True), one(shared.w2, shared.w2_scale, False)
