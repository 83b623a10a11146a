"""Shared-expert activation scale staging (paper §4.5, Eq. 3).

Shared experts read the original activation buffer (no dispatch), but their activation scales must be in the
same MN-major permuted row order the routed path's scale loads consume. The caller stages them once per token
count: token ``t`` with ``u = t mod BM`` goes to row

    row(t) = floor(t / BM) * align(BM, 128) + floor(u / 128) * 128 + (u mod 32) * 4 + floor((u mod 128) / 32)

of a buffer of ``ceil(T_max / 8) * 128`` rows (a bound valid for every candidate BM >= 8). The buffer is
K-block-major: ``staged[g, row(t)] = scales[t, g]`` for each scale column g (packed int32 UE8M0 x4 on
Blackwell; any dtype works). Unused rows are zero.
"""
from __future__ import annotations

import torch


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def staged_rows(t_max: int) -> int:
    return (t_max + 7) // 8 * 128


def shared_scale_row(t: torch.Tensor, bm: int) -> torch.Tensor:
    """Eq. 3 for a tensor of token indices."""
    if bm <= 0:
        raise ValueError(f"shared scale staging: BM must be positive, got {bm}")
    u = t % bm
    return (t // bm) * _align(bm, 128) + (u // 128) * 128 + (u % 32) * 4 + (u % 128) // 32


def stage_shared_act_scales(scales: torch.Tensor, bm: int, t_max: int) -> torch.Tensor:
    """``scales [T, G]`` (T <= t_max) -> ``staged [G, ceil(t_max/8)*128]`` on the same device."""
    t, g = scales.shape
    if t > t_max:
        raise ValueError(f"shared scale staging: T={t} exceeds T_max={t_max}")
    rows = shared_scale_row(torch.arange(t, device=scales.device), bm)
    n = staged_rows(t_max)
    if t and int(rows.max()) >= n:
        raise ValueError(f"shared scale staging: BM={bm} needs row {int(rows.max())} >= buffer rows {n}")
    out = torch.zeros(g, n, dtype=scales.dtype, device=scales.device)
    out[:, rows] = scales.t()
    return out


def unstage_shared_act_scales(staged: torch.Tensor, bm: int, t: int) -> torch.Tensor:
    """Inverse: recover ``[T, G]`` from a staged buffer."""
    rows = shared_scale_row(torch.arange(t, device=staged.device), bm)
    return staged[:, rows].t().contiguous()
