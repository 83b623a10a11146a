"""Gate/up row interleave in 8-row groups (paper §4.4 "Weight prepacking"; both architectures).

W1 arrives as ``[.., 2I, ...]`` with gate rows ``[0, I)`` then up rows ``[I, 2I)``. The transformed order puts
8 gate rows, then the 8 matching up rows, and so on: new row ``16q + r`` is gate row ``8q + r`` for r < 8 and up
row ``8q + r - 8`` for r >= 8. With the wgmma/UMMA accumulator fragments (thread rows g and g+8 of a 16-row slab)
each thread then holds the gate and up value of the same output feature, so the SwiGLU epilogue pairs them
without a shuffle.
"""
from __future__ import annotations

import torch

GROUP = 8


def gate_up_row_order(two_i: int, device=None) -> torch.Tensor:
    """LongTensor ``src`` of length 2I: interleaved row n comes from canonical row ``src[n]``."""
    if two_i % (2 * GROUP):
        raise ValueError(f"gate/up interleave: 2I={two_i} must be a multiple of {2 * GROUP}")
    i = two_i // 2
    n = torch.arange(two_i, device=device)
    q, r = n // (2 * GROUP), n % (2 * GROUP)
    return torch.where(r < GROUP, GROUP * q + r, i + GROUP * q + r - GROUP)


def interleave_gate_up(w: torch.Tensor, dim: int = -2) -> torch.Tensor:
    """Reorder the 2I rows along ``dim`` from [gate | up] to 8-row interleaved groups."""
    return w.index_select(dim, gate_up_row_order(w.shape[dim], w.device))


def deinterleave_gate_up(w: torch.Tensor, dim: int = -2) -> torch.Tensor:
    """Inverse of :func:`interleave_gate_up`."""
    src = gate_up_row_order(w.shape[dim], w.device)
    inv = torch.empty_like(src)
    inv[src] = torch.arange(src.numel(), device=w.device)
    return w.index_select(dim, inv)
