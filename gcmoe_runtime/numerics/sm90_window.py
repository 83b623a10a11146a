"""Hopper window repack of MXFP4 scales (paper §4.4 "Hopper path", Table 2: "×64 headroom").

The contract with the SM90 role2 kernel (one place):

* **×64 headroom.** Stored block scales carry a factor 64 = 2**HEADROOM_LOG2 (the first decoder turned a code into
  the E4M3 byte ``s 0eem 00`` = fp4/64 and FMA'd each K32 partial with the stored scale). The kernels now fold
  the relative exponent into the decode (``FOLD_LUT`` below: fp4 * 2**(r - 5), times 2**5 with the token scale);
  both read the same stored bytes and compute the same values.
* **Window.** Per expert (per weight matrix), over the blocks that hold a non-zero code, ``s_max``/``s_min`` are
  the largest/smallest UE8M0 exponents; the window base is ``base = max(s_min, s_max - WINDOW_STEPS)``, so every
  stored relative exponent ``r = max(s, base) - base`` lies in ``[0, WINDOW_STEPS]`` (at most 11 exponent
  steps). The stored scale byte is UE8M0 ``127 + r + 6`` (value ``2**(r + 6)``, the ×64 included): a fixed,
  checkpoint-independent range ``[2**6, 2**17]``, i.e. r in 0..11: the folding decoder's table (below) needs it.
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
#: the stored scale byte minus this is the block's relative exponent r (0..WINDOW_STEPS)
STORED_BIAS = UE8M0_BIAS + HEADROOM_LOG2

# ---- The exponent-folding decoder (what the SM90 role2 kernels run) --------------------------------------------
# The kernels fold each K32 block's r into the decode instead of scaling a per-K32 partial: the magnitude code
# c = (code & 7) of a block with relative exponent r becomes the E4M3 byte FOLD_LUT[c] + 8*r (c > 0; 0 stays 0),
# i.e. the value fp4 * 2**(r - FOLD_LOG2), exactly: every entry is an E4M3 normal for r in [0, WINDOW_STEPS]
# (smallest 0.5 * 2**-5 = 2**-6, the least normal; largest 6 * 2**6 = 384 <= 448, byte 0x7C, not NaN). Two
# 32-bit words hold the 8-entry table for PRMT; one IMAD per word turns the r = 0 table into row r's. Then the
# four K32 MMAs of a K128 step share one accumulator (one token scale per K128 for W1), and the kernel multiplies
# by 2**FOLD_LOG2 with the token scale: value = fp4 * 2**(r - 5) * 2**5 = fp4 * 2**r — the same numbers as
# decoded/64 * stored scale (the "x64 convention" below), with at most 11 steps of spread per expert.
FOLD_LOG2 = 5
FOLD_LUT = (0x00, 0x08, 0x10, 0x14, 0x18, 0x1C, 0x20, 0x24)
FOLD_LUT_WORDS = (0x14100800, 0x24201C18)   # little-endian entries 0-3, 4-7 at r = 0
FOLD_LUT_STEPS = (0x08080800, 0x08080808)   # + r * step: +8 (one exponent step) on every non-zero entry


def fold_lut_words(r: int) -> tuple[int, int]:
    """The two PRMT table words of a block with relative exponent ``r`` (what the kernel computes per row/K32)."""
    if not 0 <= r <= WINDOW_STEPS:
        raise ValueError(f"fold_lut_words: r={r} outside [0, {WINDOW_STEPS}] (the window contract)")
    return tuple(b + r * st for b, st in zip(FOLD_LUT_WORDS, FOLD_LUT_STEPS))


def decoder_fold_byte(codes: torch.Tensor, r: torch.Tensor | int) -> torch.Tensor:
    """The folding decoder's mapping (uint8 E2M1 code, relative exponent r) -> uint8 E4M3 byte."""
    c = codes.to(torch.int32)
    lut = torch.tensor(FOLD_LUT, dtype=torch.int32, device=c.device)
    mag = lut[(c & 7).long()]
    mag = torch.where(mag > 0, mag + 8 * torch.as_tensor(r, dtype=torch.int32, device=c.device), mag)
    return (((c & 8) << 4) | mag).to(torch.uint8)


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
