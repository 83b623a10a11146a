"""Low-precision number formats: FP4 E2M1, FP8 E4M3FN and UE8M0 — constants, code tables, encode/decode.

This module owns the bit-level facts every other numerics module relies on (paper §2.3, DESIGN.md §3):

* **E2M1 (FP4)**: 4-bit code ``s eem``; magnitudes ``{0, 0.5, 1, 1.5, 2, 3, 4, 6}``; code ``8 | m`` is ``-m``.
  Packed two per byte, **element 2i in the low nibble, element 2i+1 in the high nibble** (the OCP MX / torch
  ``float4_e2m1fn_x2`` convention).
* **E4M3FN (FP8)**: finite-only, max ±448, smallest subnormal 2**-9. Conversions use torch's
  ``float8_e4m3fn`` cast (round-to-nearest-even) after an explicit saturation to ±448, because the bare cast
  turns out-of-range values into NaN.
* **UE8M0**: an unsigned 8-bit biased exponent, value ``2**(code - 127)``; code 255 is NaN and never produced.

Encoders here round; they never validate finiteness — that is the quantisers' job (``quant.py``).
"""
from __future__ import annotations

import torch

FP4_MAX = 6.0
E4M3_MAX = 448.0
UE8M0_BIAS = 127
UE8M0_NAN = 255
#: Smallest and largest exponent a UE8M0 scale may take (code 0 .. 254).
UE8M0_MIN_EXP = -127
UE8M0_MAX_EXP = 127

#: Value of each of the 16 E2M1 codes (index = code). Code 8 is -0.0.
FP4_CODE_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                   -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
#: Non-negative E2M1 magnitudes, index = 3-bit magnitude code.
FP4_MAGNITUDES = FP4_CODE_VALUES[:8]

# Round-to-nearest-even on the E2M1 magnitude grid. Between magnitude codes m and m+1 the midpoint goes to
# the even code: down when m is even (strict '>'), up when m is odd ('>=').
_FP4_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def fp4_code_table(device=None, dtype=torch.float32) -> torch.Tensor:
    """The 16-entry E2M1 decode table as a tensor (index = code)."""
    return torch.tensor(FP4_CODE_VALUES, dtype=dtype, device=device)


def fp4_byte_table(device=None, dtype=torch.float32) -> torch.Tensor:
    """[256, 2] table: packed byte -> (value of low nibble, value of high nibble)."""
    t = fp4_code_table(device, dtype)
    b = torch.arange(256, device=device)
    return torch.stack([t[b & 15], t[b >> 4]], dim=-1)


def fp4_encode(x: torch.Tensor) -> torch.Tensor:
    """Round float values (already divided by their scale) to E2M1 codes (uint8, one code per element).

    Round-to-nearest-even; magnitudes above 6 saturate to 6. Values that round to zero get code 0 (+0),
    whatever their sign.
    """
    mag = x.abs().float()
    bounds = torch.tensor(_FP4_MIDPOINTS, dtype=torch.float32, device=mag.device)
    # bucketize(right=False) counts midpoints strictly below mag: ties go down (right for even lower codes);
    # ties at midpoints whose lower code is odd (0.75, 1.75, 3.5) must go up to the even code.
    code = torch.bucketize(mag, bounds).to(torch.uint8)
    code += ((mag == 0.75) | (mag == 1.75) | (mag == 3.5)).to(torch.uint8)
    neg = (x < 0) & (code != 0)
    return code | (neg.to(torch.uint8) << 3)


def fp4_decode(codes: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """E2M1 codes (uint8 0..15) -> values."""
    return fp4_code_table(codes.device, dtype)[codes.long()]


def fp4_pack(codes: torch.Tensor) -> torch.Tensor:
    """[..., K] codes -> [..., K/2] bytes (element 2i low nibble, 2i+1 high nibble)."""
    if codes.shape[-1] % 2:
        raise ValueError(f"fp4_pack: last dimension must be even, got {codes.shape[-1]}")
    c = codes.to(torch.uint8).reshape(*codes.shape[:-1], codes.shape[-1] // 2, 2)
    return c[..., 0] | (c[..., 1] << 4)


def fp4_unpack(packed: torch.Tensor) -> torch.Tensor:
    """[..., K/2] bytes -> [..., K] codes."""
    p = packed.to(torch.uint8)
    return torch.stack([p & 15, p >> 4], dim=-1).reshape(*p.shape[:-1], p.shape[-1] * 2)


def fp4_unpack_values(packed: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """[..., K/2] bytes -> [..., K] decoded E2M1 values in one table gather."""
    t = fp4_byte_table(packed.device, dtype)
    return t[packed.long()].reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def ue8m0_to_float(codes: torch.Tensor) -> torch.Tensor:
    """UE8M0 codes (uint8) -> float32 powers of two 2**(code-127), exact (2**-127 is an FP32 subnormal)."""
    c = codes.to(torch.int32)
    if bool((c == UE8M0_NAN).any()):
        raise ValueError("ue8m0_to_float: code 255 (NaN) present in a scale tensor")
    return torch.ldexp(torch.ones(c.shape, dtype=torch.float32, device=c.device), c - UE8M0_BIAS)


def ue8m0_ceil_exponent(ratio: torch.Tensor) -> torch.Tensor:
    """Exponent e (int32) of the smallest power of two 2**e >= ratio, clamped to the UE8M0 range.

    ``ratio`` must be finite and >= 0; ratio 0 maps to exponent 0 (scale 1.0 — the all-zero-block convention).
    Uses frexp (exact), not log2 (which can misround near powers of two).
    """
    r = ratio.float()
    mant, exp = torch.frexp(r)  # r = mant * 2**exp, mant in [0.5, 1)
    e = torch.where(mant == 0.5, exp - 1, exp).to(torch.int32)
    e = torch.where(r == 0, torch.zeros_like(e), e)
    return e.clamp(UE8M0_MIN_EXP, UE8M0_MAX_EXP)


def exponent_to_ue8m0(e: torch.Tensor) -> torch.Tensor:
    """int exponent (in [-127, 127]) -> UE8M0 code (uint8)."""
    return (e.to(torch.int32) + UE8M0_BIAS).to(torch.uint8)


def to_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Saturating round-to-nearest-even cast to float8_e4m3fn (NaN input stays NaN; callers reject it)."""
    return x.float().clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def pack_ue8m0_x4(codes: torch.Tensor) -> torch.Tensor:
    """[..., G] UE8M0 bytes -> [..., G/4] int32; byte j of each int32 (little-endian) is group 4i+j."""
    if codes.shape[-1] % 4:
        raise ValueError(f"pack_ue8m0_x4: group count must be a multiple of 4, got {codes.shape[-1]}")
    c = codes.to(torch.int64).reshape(*codes.shape[:-1], codes.shape[-1] // 4, 4)
    v = c[..., 0] | (c[..., 1] << 8) | (c[..., 2] << 16) | (c[..., 3] << 24)
    return torch.where(v >= 2**31, v - 2**32, v).to(torch.int32)


def unpack_ue8m0_x4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_ue8m0_x4`: [..., G/4] int32 -> [..., G] uint8."""
    v = packed.to(torch.int64) & 0xFFFFFFFF
    b = torch.stack([(v >> (8 * j)) & 0xFF for j in range(4)], dim=-1)
    return b.reshape(*packed.shape[:-1], packed.shape[-1] * 4).to(torch.uint8)
