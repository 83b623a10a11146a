"""In-register FP4 (E2M1) -> E4M3 decode for the SM90 register-A wgmma path.

Owns the bit trick and its contract with the host weight layout
(``gcmoe_runtime/numerics/sm90_layout.py``, the single definition of the tile bytes):

* An E2M1 code ``s e1 e0 m`` placed at E4M3 bits ``7 | 4 3 2`` (sign | exponent low bits,
  mantissa high bit) is an E4M3 byte whose value is exactly ``fp4 * 2**-6`` for all 16 codes
  (normals: ``2**(e-7) (1+m/2)`` vs ``2**(e-1) (1+m/2)``; the subnormal 0.5 lands on the E4M3
  subnormal ``2**-7``; +-0 stay +-0). No lookup table, no PRMT needed: two shifts and two
  LOP3 per output register. The missing ``2**6`` is part of the per-expert factor the kernel
  multiplies in the epilogue (the paper's "x64 convention").
* One 32-bit word of packed codes carries 8 nibbles; byte ``j`` holds the code for output byte
  ``j`` of register ``lo`` in its low nibble and for output byte ``j`` of register ``hi`` in its
  high nibble. So one word decodes to two wgmma A registers (``lo``, ``hi``) and the host packs
  the two A registers that share k columns (rows g and g+8) into one word.
"""
from __future__ import annotations

from cutlass import Int32

from .wgmma_rs import _asm, _v
from cutlass.cutlass_dsl import dsl_user_op

_DECODE_PTX = (
    "{\n.reg .b32 t0, t1;\n"
    "shl.b32 t0, $2, 4;\nand.b32 t0, t0, 0x80808080;\n"
    "shl.b32 t1, $2, 2;\nand.b32 t1, t1, 0x1C1C1C1C;\nor.b32 $0, t0, t1;\n"
    "and.b32 t0, $2, 0x80808080;\n"
    "shr.b32 t1, $2, 2;\nand.b32 t1, t1, 0x1C1C1C1C;\nor.b32 $1, t0, t1;\n}"
)


@dsl_user_op
def decode_fp4x8_e4m3(word, *, loc=None, ip=None):
    """8 packed E2M1 codes (Int32) -> (lo, hi): two registers of 4 E4M3 bytes each, value x 2**-6."""
    lo, hi = _asm(_DECODE_PTX, "=r,=r,r", [_v(word)], 2, volatile=False)
    return Int32(lo), Int32(hi)


def decode_reference(code: int) -> int:
    """Host mirror of the device decode for one 4-bit code: the E4M3 byte it becomes."""
    if not 0 <= code <= 15:
        raise ValueError(f"FP4 code must be in 0..15, got {code}")
    return ((code & 0x8) << 4) | ((code & 0x7) << 2)
