"""Scalar device math for the SM90 role2 epilogues (inline PTX, exact where it must be).

Owns the numerics that the FP32 reference must mirror bit-for-bit where the kernel is exact:

* ``ue8m0_to_f32(b)`` = ``2**(b-127)`` built from bits (b = 0 gives 0.0, not 2**-127);
* ``bf16_round(x)``: round-to-nearest-even to BF16 and back (the paper's W1 epilogue rounds the
  FP32 accumulators to BF16 before the clamp);
* ``ue8m0_scale_for(amax)``: the requantisation scale ``2**ceil(log2(amax / 448))`` with
  ``amax / 448`` an IEEE-rounded FP32 division; ``amax == 0`` gives 1.0;
* ``to_e4m3_byte(x)``: ``cvt.rn.satfinite.e4m3x2.f32`` (saturates to +-448, NaN stays NaN); ``to_e4m3x4`` four of
  them in one register (the same conversion, two at a time);
* ``transpose_bytes_4x4(w)``: byte ``j`` of word ``i`` to byte ``i`` of word ``j`` (four PRMTs);
* ``sigmoid(x, fast)``: ``1 / (1 + 2**(-x log2 e))`` with ``ex2.approx`` and an IEEE reciprocal, or with
  ``fast`` (``activation.fast_math``) ``rcp.approx`` (not bit-exact to torch.sigmoid either way: compared with a
  tolerance).
"""
from __future__ import annotations

from cutlass import Int32, Float32
from cutlass.cutlass_dsl import T, dsl_user_op

from .wgmma_rs import _asm, _v


@dsl_user_op
def ue8m0_to_f32(b, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("{\n.reg .b32 t;\nshl.b32 t, $1, 23;\nmov.b32 $0, t;\n}", "=f,r", [_v(b)], 1,
                        T.f32(), volatile=False)[0])


@dsl_user_op
def bf16_round(x, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("{\n.reg .b16 h;\ncvt.rn.bf16.f32 h, $1;\ncvt.f32.bf16 $0, h;\n}", "=f,f",
                        [_v(x, Float32)], 1, T.f32(), volatile=False)[0])


@dsl_user_op
def pack_bf16x2(lo, hi, *, loc=None, ip=None) -> Int32:
    """Two FP32 -> BF16 (round to nearest even) in one Int32, ``lo`` in the low 16 bits."""
    return Int32(_asm("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", [_v(lo, Float32), _v(hi, Float32)], 1,
                      volatile=False)[0])


@dsl_user_op
def sel_f32(pred, a, b, *, loc=None, ip=None) -> Float32:
    """``a if pred != 0 else b`` (pred: Int32)."""
    return Float32(_asm("{\n.reg .pred p;\nsetp.ne.s32 p, $1, 0;\nselp.f32 $0, $2, $3, p;\n}", "=f,r,f,f",
                        [_v(pred), _v(a, Float32), _v(b, Float32)], 1, T.f32(), volatile=False)[0])


@dsl_user_op
def fabs(x, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("abs.f32 $0, $1;", "=f,f", [_v(x, Float32)], 1, T.f32(), volatile=False)[0])


@dsl_user_op
def fmin(a, b, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("min.f32 $0, $1, $2;", "=f,f,f", [_v(a, Float32), _v(b, Float32)], 1, T.f32(),
                        volatile=False)[0])


@dsl_user_op
def fmax(a, b, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("max.f32 $0, $1, $2;", "=f,f,f", [_v(a, Float32), _v(b, Float32)], 1, T.f32(),
                        volatile=False)[0])


@dsl_user_op
def min_u32(a, b, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("min.u32 $0, $1, $2;", "=r,r,r", [_v(a), _v(b)], 1, volatile=False)[0])


@dsl_user_op
def shfl_bfly_f32(x, lane_mask: int, *, loc=None, ip=None) -> Float32:
    return Float32(_asm(f"shfl.sync.bfly.b32 $0, $1, {int(lane_mask)}, 31, -1;", "=f,f", [_v(x, Float32)], 1,
                        T.f32())[0])


@dsl_user_op
def sigmoid(x, fast: bool = False, *, loc=None, ip=None) -> Float32:
    """``fast``: the reciprocal by ``rcp.approx.ftz`` (one MUFU, <= 1 ulp) instead of IEEE ``rcp.rn`` (MUFU, FMA
    refinement and a range check around a slow-path call): the manifest's ``activation.fast_math``."""
    rcp = "rcp.approx.ftz.f32" if fast else "rcp.rn.f32"
    return Float32(_asm(
        "{\n.reg .f32 t;\nmul.f32 t, $1, 0fBFB8AA3B;\nex2.approx.ftz.f32 t, t;\nadd.f32 t, t, 0f3F800000;\n"
        f"{rcp} $0, t;\n}}", "=f,f", [_v(x, Float32)], 1, T.f32(), volatile=False)[0])


@dsl_user_op
def ue8m0_scale_for(amax, *, loc=None, ip=None):
    """Return (scale, inv_scale) = (2**e, 2**-e), e = ceil(log2(amax/448)); amax == 0 -> (1, 1)."""
    r = _asm(
        "{\n.reg .f32 s;\n.reg .b32 b, e, m;\n.reg .pred z, up;\n"
        "div.rn.f32 s, $2, 0f43E00000;\n"          # amax / 448
        "mov.b32 b, s;\nshr.u32 e, b, 23;\nand.b32 e, e, 255;\nand.b32 m, b, 0x7FFFFF;\n"
        "setp.ne.u32 up, m, 0;\n@up add.u32 e, e, 1;\n"
        "max.u32 e, e, 1;\nmin.u32 e, e, 253;\n"      # keep 2**e and 2**-e normal
        "setp.eq.f32 z, $2, 0f00000000;\n@z mov.u32 e, 127;\n"
        "shl.b32 b, e, 23;\nmov.b32 $0, b;\n"
        "sub.u32 e, 254, e;\nshl.b32 b, e, 23;\nmov.b32 $1, b;\n}",
        "=f,=f,f", [_v(amax, Float32)], 2, T.f32(), volatile=False)
    return Float32(r[0]), Float32(r[1])


@dsl_user_op
def to_e4m3_byte(x, *, loc=None, ip=None) -> Int32:
    return Int32(_asm(
        "{\n.reg .b16 h;\n.reg .f32 z;\nmov.f32 z, 0f00000000;\ncvt.rn.satfinite.e4m3x2.f32 h, z, $1;\n"
        "cvt.u32.u16 $0, h;\n}", "=r,f", [_v(x, Float32)], 1, volatile=False)[0])


@dsl_user_op
def to_e4m3x4(x0, x1, x2, x3, *, loc=None, ip=None) -> Int32:
    """Four FP32 -> E4M3 bytes (as :func:`to_e4m3_byte` each), ``x_k`` in byte ``k``."""
    return Int32(_asm(
        "{\n.reg .b16 l, h;\ncvt.rn.satfinite.e4m3x2.f32 l, $2, $1;\ncvt.rn.satfinite.e4m3x2.f32 h, $4, $3;\n"
        "mov.b32 $0, {l, h};\n}", "=r,f,f,f,f", [_v(x, Float32) for x in (x0, x1, x2, x3)], 1, volatile=False)[0])


def transpose_bytes_4x4(w):
    """Words ``w[0..3]`` as a 4 x 4 byte matrix (byte ``j`` of ``w[i]``), transposed: byte ``i`` of result ``j``.
    Two rounds of PRMT (interleave the bytes of two words, then the halves of two words)."""
    lo01, hi01 = _prmt(w[0], w[1], 0x5140), _prmt(w[0], w[1], 0x7362)
    lo23, hi23 = _prmt(w[2], w[3], 0x5140), _prmt(w[2], w[3], 0x7362)
    return [_prmt(lo01, lo23, 0x5410), _prmt(lo01, lo23, 0x7632), _prmt(hi01, hi23, 0x5410),
            _prmt(hi01, hi23, 0x7632)]


@dsl_user_op
def _prmt(a, b, selector: int, *, loc=None, ip=None) -> Int32:
    """``prmt.b32`` of ``a`` (bytes 0-3) and ``b`` (bytes 4-7) with a constant selector."""
    return Int32(_asm(f"prmt.b32 $0, $1, $2, {selector:#x};", "=r,r,r", [_v(a), _v(b)], 1, volatile=False)[0])


@dsl_user_op
def float_bits(x, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("mov.b32 $0, $1;", "=r,f", [_v(x, Float32)], 1, volatile=False)[0])


@dsl_user_op
def bits_float(x, *, loc=None, ip=None) -> Float32:
    """:func:`float_bits`' inverse: the FP32 whose bits are ``x``."""
    return Float32(_asm("mov.b32 $0, $1;", "=f,r", [_v(x)], 1, T.f32(), volatile=False)[0])
