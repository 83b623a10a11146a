"""Hopper window repack of MXFP4 scales (paper §4.4 "Hopper path", Table 2: "×64 headroom").

The contract with the SM90 role2 kernel (one place):

* **Decoder.** The in-register decoder turns an E2M1 code ``s eem`` into the E4M3 byte ``s 0eem 00`` (a shift and
  two masks). That byte's value is exactly ``fp4(code) / 64`` for all 16 codes (E2M1 subnormal 0.5 lands on the
  E4M3 subnormal 2**-7): the decoded operand lives 2**6 below the FP4 value.
* **×64 headroom.** Stored block scales therefore carry a factor 64 = 2**HEADROOM_LOG2.
* **Window.** Per expert (per weight matrix), over the blocks that hold a non-zero code, ``s_max``/``s_min`` are
  the largest/smallest UE8M0 exponents; the window base is ``base = max(s_min, s_max - WINDOW_STEPS)``, so every
  stored relative exponent ``r = max(s, base) - base`` lies in ``[0, WINDOW_STEPS]`` (at most 11 exponent
  steps). The stored scale byte is UE8M0 ``127 + r + 6`` (value ``2**(r + 6)``, the ×64 included): a fixed,
  checkpoint-independent range ``[2**6, 2**17]`` for the kernel's per-K32 scale FMA.
* **Shift.** A block with ``s < base`` keeps scale exponent ``base``; its codes are re-encoded through the
  lookup table ``shift_lut(d)[code] = E2M1-round(fp4(code) * 2**-d)`` with ``d = base - s`` (an exact
  power-of-two shift followed by round-to-nearest-even onto the E2M1 grid — lossy for d >= 1).
* **Compensating factor.** FP32 per expert ``2**(base - 127)``, applied once to the accumulator.

Dequantisation identity: ``fp4(code') / 64 * 2**(r + 6) * 2**(base - 127) = fp4(code') * 2**(max(s, base) - 127)``.
Hence **exactness**: if an expert's scale spread ``s_max - s_min <= WINDOW_STEPS`` no block is shifted and the
dequantised values are bit-identical; otherwise only the shifted blocks (all at least 2**12 below the expert's
largest block scale) can change, and :func:`window_change_report` lists every changed value.
Blocks with only zero codes do not widen the window; they store r = 0. An expert with no non-zero code has base 127.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .formats import FP4_CODE_VALUES, UE8M0_BIAS, fp4_code_table, fp4_encode, fp4_unpack, ue8m0_to_float

WINDOW_STEPS = 11
HEADROOM_LOG2 = 6


def decoder_e4m3_byte(codes: torch.Tensor) -> torch.Tensor:
    """The decoder's bit mapping (uint8 E2M1 code -> uint8 E4M3 byte): ``(c & 8) << 4 | (c & 7) << 2``."""
    c = codes.to(torch.uint8)
    return ((c & 8) << 4) | ((c & 7) << 2)


def shift_lut(d: int, device=None) -> torch.Tensor:
    """uint8[16]: E2M1 code -> code of ``fp4(code) * 2**-d``, magnitude rounded to nearest even, sign kept
    (a negative value that rounds to zero becomes -0, code 8). ``shift_lut(0)`` is the identity."""
    if d < 0:
        raise ValueError(f"shift_lut: shift must be >= 0, got {d}")
    mags = torch.tensor(FP4_CODE_VALUES[:8], dtype=torch.float32, device=device) * 2.0 ** -d
    mag_codes = fp4_encode(mags)  # non-negative inputs: codes 0..7
    c = torch.arange(16, device=device, dtype=torch.uint8)
    return (c & 8) | mag_codes[(c & 7).long()]


def _shift_all(codes: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    """Apply shift_lut(d[block]) to codes [..., NB, 32] with per-block shifts d [..., NB] (d >= 0)."""
    dmax = int(d.max()) if d.numel() else 0
    cap = min(dmax, 8)  # shift_lut(d) is all zeros for d >= 5; 8 keeps the table small and exact
    luts = torch.stack([shift_lut(j, codes.device) for j in range(cap + 1)])  # [cap+1, 16]
    if codes.dim() < 3:
        return luts[d.clamp(max=cap).long()[..., None], codes.long()]
    # expert by expert: the int64 gather indices are 8x the codes, and a whole production layer on one GPU
    # (256 experts x 2I x H) would need ~50 GiB of them at once
    out = torch.empty_like(codes)
    for e in range(codes.shape[0]):
        out[e] = luts[d[e].clamp(max=cap).long()[..., None], codes[e].long()]
    return out


@dataclass
class WindowedScales:
    """Result of the window repack of one weight matrix set ``[E, N, K]``."""
    codes: torch.Tensor          # uint8 [E, N, K] E2M1 codes after shifting (unpacked)
    stored_scales: torch.Tensor  # uint8 [E, N, K/32] UE8M0 bytes 127 + r + 6
    expert_factor: torch.Tensor  # float32 [E] 2**(base - 127)
    base: torch.Tensor           # int32 [E] window base exponent (UE8M0 code)
    shift: torch.Tensor          # int32 [E, N, K/32] d = max(0, base - s)

    def dequantize(self) -> torch.Tensor:
        """Values the kernel computes with: decoded/64 * stored scale * expert factor (FP32, exact)."""
        e, n, k = self.codes.shape
        # The kernel's order: per-K32 scale on the decoded operand first, the per-expert factor last — this
        # order never overflows FP32 (|dec * stored| <= 6/64 * 2**17), the other one can for extreme bases.
        dec = fp4_code_table(self.codes.device)[self.codes.long()] / 2.0 ** HEADROOM_LOG2
        v = dec.reshape(e, n, k // 32, 32) * ue8m0_to_float(self.stored_scales)[..., None]
        return (v * self.expert_factor[:, None, None, None]).reshape(e, n, k)


def window_repack(packed: torch.Tensor, scales: torch.Tensor) -> WindowedScales:
    """Window-repack MXFP4 weights ``packed uint8 [E, N, K/2]``, ``scales uint8 [E, N, K/32]`` (canonical)."""
    if packed.dim() != 3 or scales.dim() != 3 or scales.shape[2] * 16 != packed.shape[2] \
            or scales.shape[:2] != packed.shape[:2]:
        raise ValueError(f"window_repack: packed {tuple(packed.shape)} / scales {tuple(scales.shape)} must be "
                         "[E, N, K/2] / [E, N, K/32]")
    e, n, kb = scales.shape
    codes = fp4_unpack(packed).reshape(e, n, kb, 32)
    s = scales.to(torch.int32)
    nonzero = (codes & 7).amax(dim=-1) > 0  # [E, N, KB]
    big, small = torch.iinfo(torch.int32).max, torch.iinfo(torch.int32).min
    s_max = torch.where(nonzero, s, torch.full_like(s, small)).amax(dim=(1, 2))
    s_min = torch.where(nonzero, s, torch.full_like(s, big)).amin(dim=(1, 2))
    any_nz = nonzero.any(dim=2).any(dim=1)
    base = torch.where(any_nz, torch.maximum(s_min, s_max - WINDOW_STEPS), torch.full_like(s_max, UE8M0_BIAS))
    eff = torch.where(nonzero, torch.maximum(s, base[:, None, None]), base[:, None, None].expand_as(s))
    shift = torch.where(nonzero, eff - s, torch.zeros_like(s))
    r = eff - base[:, None, None]
    new_codes = _shift_all(codes, shift).reshape(e, n, kb * 32)
    stored = (r + UE8M0_BIAS + HEADROOM_LOG2).to(torch.uint8)
    factor = torch.ldexp(torch.ones(e, device=packed.device), (base - UE8M0_BIAS).to(torch.int32))
    return WindowedScales(new_codes, stored, factor, base, shift)


@dataclass
class WindowChange:
    expert: int
    row: int
    k: int
    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before


@dataclass
class WindowReport:
    """Exactly which dequantised values the window repack changed (empty when bit-identical)."""
    spread: list          # per expert s_max - s_min over non-zero blocks (0 for all-zero experts)
    shifted_blocks: int   # number of (expert, row, K32) blocks that were shifted
    changes: list         # WindowChange per changed value
    max_abs_change: float

    @property
    def bit_identical(self) -> bool:
        return not self.changes


def window_change_report(packed: torch.Tensor, scales: torch.Tensor, repacked: WindowedScales | None = None,
                         limit: int | None = None) -> WindowReport:
    """Compare the canonical MXFP4 dequantisation with the window-repacked one, bit for bit."""
    from .quant import dequantize_mxfp4

    w = repacked if repacked is not None else window_repack(packed, scales)
    before = dequantize_mxfp4(packed, scales)
    after = w.dequantize()
    diff = before.view(torch.int32) != after.view(torch.int32)
    idx = diff.nonzero()
    if limit is not None:
        idx = idx[:limit]
    changes = [WindowChange(int(a), int(b), int(c), float(before[a, b, c]), float(after[a, b, c]))
               for a, b, c in idx.tolist()]
    codes = fp4_unpack(packed).reshape(*scales.shape, 32)
    nz = (codes & 7).amax(dim=-1) > 0
    s = scales.to(torch.int32)
    spread = []
    for ex in range(s.shape[0]):
        v = s[ex][nz[ex]]
        spread.append(int(v.max() - v.min()) if v.numel() else 0)
    mac = float((after - before).abs().max()) if before.numel() else 0.0
    return WindowReport(spread, int((w.shift > 0).sum()), changes, mac)
