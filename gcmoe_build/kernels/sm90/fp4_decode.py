"""In-register FP4 (E2M1) -> E4M3 decode for the SM90 register-A wgmma path, with each K32 block's exponent folded in.

Owns the instruction sequence; the contract it implements lives on the host side, in one place each:
the word's bit order in ``gcmoe_runtime/numerics/sm90_layout.py`` and the table in
``gcmoe_runtime/numerics/sm90_window.py`` (``FOLD_LUT``, ``fold_lut_words``):

* A 32-bit word carries the 8 codes of two A registers: ``lo`` (row g, 4 k columns) and ``hi`` (row g+8, the same
  columns). Magnitudes (``code & 7``) of ``lo`` are the low 16 bits' four nibbles, of ``hi`` the high 16 bits'; the
  signs sit at bit 7 (``lo``) and bit 3 (``hi``) of each byte.
* ``s = x & 0x77777777``, ``lo = prmt(lut_g0, lut_g1, s) | (x & 0x80808080)``, ``hi = prmt(lut_h0, lut_h1, s >> 16)
  | ((x << 4) & 0x80808080)``: the PRMT picks each magnitude's E4M3 byte from an 8-entry table (two registers; it
  reads only the selector's low 16 bits, so one mask serves both rows), the masks put the signs on. The table of a
  row's K32 block with relative exponent ``r`` (stored scale byte - 133) is ``FOLD_LUT_WORDS + r * FOLD_LUT_STEPS``
  (one IMAD per register): every entry is fp4 * 2**(r - 5), exact.

Because the block scale is now inside the operand, the four K32 MMAs of a K128 step can accumulate into one
register set (the FP32 partial is promoted once per K128, as DeepGEMM's FP8 GEMMs do), and the per-K32 scale
FMAs of the first decoder (E4M3 = fp4/64, then ``partial * 2**(r+6) * token scale``) are gone.
"""
from __future__ import annotations

from cutlass import Int32
from cutlass.cutlass_dsl import dsl_user_op

from gcmoe_runtime.numerics.sm90_window import FOLD_LUT_STEPS, FOLD_LUT_WORDS, STORED_BIAS

from .wgmma_rs import _asm, _v

# outputs are written last: every input is read before either result register is defined. PRMT reads only the low
# 16 bits of its selector, so one mask serves both rows (``u = s >> 16`` needs no second AND); ALU-pipe ops per word:
# LOP3 (the mask), 2 PRMT, 2 LOP3 (the sign ORs, each fused with its AND); ``s >> 16`` written as ``mul.hi`` and the
# ``x << 4`` run on the FMA pipe (IMAD.HI, IMAD.SHL; SASS of session 58), off the ALU pipe the decode keeps busiest.
_DECODE_PTX = (
    "{\n.reg .b32 s, u, m, v;\n"
    "and.b32 s, $2, 0x77777777;\n"
    "mul.hi.u32 u, s, 65536;\n"
    "and.b32 m, $2, 0x80808080;\n"
    "shl.b32 v, $2, 4;\nand.b32 v, v, 0x80808080;\n"
    "prmt.b32 s, $3, $4, s;\n"
    "prmt.b32 u, $5, $6, u;\n"
    "or.b32 $0, s, m;\nor.b32 $1, u, v;\n}"
)


@dsl_user_op
def decode_fp4x8_e4m3(word, lut_g, lut_h, *, loc=None, ip=None):
    """8 packed E2M1 codes (Int32) -> (lo, hi): two A registers of 4 E4M3 bytes, row g's through ``lut_g``
    (two Int32: table entries 0-3, 4-7) and row g+8's through ``lut_h``."""
    lo, hi = _asm(_DECODE_PTX, "=r,=r,r,r,r,r,r",
                  [_v(word), _v(lut_g[0]), _v(lut_g[1]), _v(lut_h[0]), _v(lut_h[1])], 2, volatile=False)
    return Int32(lo), Int32(hi)


#: prmt selector of :func:`byte_of` (OR the byte index): result byte 0 = byte k of the word, bytes 1-3 = byte 4 (of 0)
_BYTE_OF_SELECTOR = 0x4440


@dsl_user_op
def byte_of(word, k: int, *, loc=None, ip=None):
    """Byte ``k`` (0-3) of ``word``, zero-extended: one PRMT where ``(word >> 8k) & 0xFF`` costs SHF + LOP3 (both on
    the ALU pipe, which the decode keeps busiest)."""
    return Int32(_asm(f"prmt.b32 $0, $1, 0, {_BYTE_OF_SELECTOR | int(k)};", "=r,r", [_v(word)], 1, volatile=False)[0])


def byte_selector(k):
    """The run-time selector of :func:`byte_at` for byte ``k`` (an Int32 in 0..3, e.g. from the lane index)."""
    return Int32(_BYTE_OF_SELECTOR) | k


@dsl_user_op
def byte_at(word, selector, *, loc=None, ip=None):
    """Byte ``selector & 3`` of ``word``, zero-extended, with a run-time ``selector`` (:func:`byte_selector`): the
    K-interleaved decode's scale byte, which depends on the thread's lane (``Role2GemmConfig.k_interleave``)."""
    return Int32(_asm("prmt.b32 $0, $1, 0, $2;", "=r,r,r", [_v(word), _v(selector)], 1, volatile=False)[0])


def fold_lut(scale_byte):
    """The two table registers of a K32 block from its stored UE8M0 scale byte (Int32 in 0..255)."""
    r = scale_byte - STORED_BIAS
    return (Int32(FOLD_LUT_WORDS[0]) + r * Int32(FOLD_LUT_STEPS[0]),
            Int32(FOLD_LUT_WORDS[1]) + r * Int32(FOLD_LUT_STEPS[1]))
