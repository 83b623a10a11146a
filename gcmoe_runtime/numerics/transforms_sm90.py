"""Hopper (SM90) routed-weight transform: gate/up interleave, window repack, lane-permuted tiles (paper §4.4).

``transform_weights_sm90(routed)`` runs once per weight set on the tensors' device (and the current stream),
only rearranging already-quantised data: it never sees floating-point weights. Outputs, per matrix:

* ``tiles``   uint8 ``[E, N/64, K/128, 4096]`` — E2M1 codes after the window shift, in the tile layout of
  ``sm90_layout`` (W1: rows gate/up interleaved in 8-row groups, ``gate_up``; ``k_interleave``: the K order inside
  each K128 step that the bundle's role2 kernels were built for, ``sm90_layout`` "K order inside a K128 step").
* ``scales``  uint8 ``[E, N, K/32]`` — stored UE8M0 ``2**(r + 6)`` (window-relative, ×64), same row order;
  the kernels read them lane-permuted: ``Sm90Matrix.kernel_scales()``.
* ``expert_factor`` float32 ``[E]`` — ``2**(base - 127)``.

``Sm90Matrix.dequantize()`` reproduces exactly what the kernel multiplies (canonical row order, FP32), and
``inverse_transform_sm90`` recovers canonical packed codes and UE8M0 scales when the window shifted nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .formats import UE8M0_BIAS, fp4_pack
from .gate_up import deinterleave_gate_up, interleave_gate_up
from .reference import RoutedWeights
from .sm90_layout import permute_scales, permute_tiles, unpermute_tiles
from .sm90_window import HEADROOM_LOG2, WindowedScales, window_repack


@dataclass
class Sm90Matrix:
    tiles: torch.Tensor
    scales: torch.Tensor
    expert_factor: torch.Tensor
    gate_up_interleaved: bool
    window: WindowedScales  # canonical-order repack result (for reports/tests; not needed by the kernel)
    k_interleave: bool = False  # the tiles' K order inside each K128 step (sm90_layout)

    def kernel_scales(self) -> torch.Tensor:
        """The scale operand the SM90 role2 kernels read: ``uint8 [E, N/64, K/128, 256]`` (per 64-row slab and
        K128 step, the 256 bytes in lane order; ``sm90_layout.permute_scales`` of ``scales``)."""
        return permute_scales(self.scales)

    def codes_canonical(self) -> torch.Tensor:
        c = unpermute_tiles(self.tiles, self.k_interleave)
        return deinterleave_gate_up(c) if self.gate_up_interleaved else c

    def dequantize(self) -> torch.Tensor:
        """FP32 ``[E, N, K]`` in canonical row order, computed from tiles + stored scales + factor."""
        s = deinterleave_gate_up(self.scales) if self.gate_up_interleaved else self.scales
        w = WindowedScales(self.codes_canonical(), s, self.expert_factor, self.window.base, self.window.shift)
        return w.dequantize()


def transform_matrix_sm90(packed: torch.Tensor, scales: torch.Tensor, gate_up: bool,
                          k_interleave: bool = False) -> Sm90Matrix:
    w = window_repack(packed, scales)
    codes, stored = w.codes, w.stored_scales
    if gate_up:
        codes, stored = interleave_gate_up(codes), interleave_gate_up(stored)
    return Sm90Matrix(permute_tiles(codes, k_interleave), stored.contiguous(), w.expert_factor, gate_up, w,
                      bool(k_interleave))


def transform_weights_sm90(routed: RoutedWeights, k_interleave: bool = False) -> tuple[Sm90Matrix, Sm90Matrix]:
    """(W1 with gate/up interleave, W2) in the SM90 kernel layout (``k_interleave``: the bundle's K order)."""
    return (transform_matrix_sm90(routed.w1, routed.w1_scale, True, k_interleave),
            transform_matrix_sm90(routed.w2, routed.w2_scale, False, k_interleave))


def inverse_transform_sm90(m: Sm90Matrix) -> tuple[torch.Tensor, torch.Tensor]:
    """Canonical (packed codes ``[E, N, K/2]``, UE8M0 scales ``[E, N, K/32]``) from the transformed matrix.

    Exact inverse whenever the window shifted no block; otherwise returns the shifted codes with their window
    scale (the values the kernel computes with)."""
    s = deinterleave_gate_up(m.scales) if m.gate_up_interleaved else m.scales
    base = m.window.base.to(torch.int32)
    canon = s.to(torch.int32) - UE8M0_BIAS - HEADROOM_LOG2 + base[:, None, None]
    return fp4_pack(m.codes_canonical()), canon.to(torch.uint8)


__all__ = ["Sm90Matrix", "transform_weights_sm90", "transform_matrix_sm90", "inverse_transform_sm90"]
