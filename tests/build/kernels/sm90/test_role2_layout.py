"""CPU checks of the role2 SM90 weight layout against the kernel's register semantics.

An emulator walks every thread of a CTA exactly as ``role2_gemm`` does (16-byte word per K32,
decode rule of ``fp4_decode``, the wgmma A-fragment layout documented in ``wgmma_rs``, the scale
byte order) and rebuilds the weight tile each warpgroup feeds the MMA; it must equal the codes the
packer was given, value x 2**-6, with the same per-row K32 scales.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.build.kernels.sm90.role2_harness import L

E4M3_BIAS = 7


def e4m3_value(byte: int) -> float:
    s = -1.0 if byte & 0x80 else 1.0
    e = (byte >> 3) & 0xF
    m = byte & 0x7
    if e == 0:
        return s * (m / 8.0) * 2.0 ** (1 - E4M3_BIAS)
    return s * (1 + m / 8.0) * 2.0 ** (e - E4M3_BIAS)


def decode_word(word: int) -> tuple[int, int]:
    """Host mirror of fp4_decode's PTX (shift/and/or), on a 32-bit word."""
    lo = ((word << 4) & 0x80808080) | ((word << 2) & 0x1C1C1C1C)
    hi = (word & 0x80808080) | ((word >> 2) & 0x1C1C1C1C)
    return lo & 0xFFFFFFFF, hi & 0xFFFFFFFF


def test_decode_is_exact_for_all_codes():
    for code in range(16):
        word = code | (code << 4)
        lo, hi = decode_word(word)
        assert e4m3_value(lo & 0xFF) == L.FP4_VALUES[code] * 2.0**-6
        assert e4m3_value(hi & 0xFF) == L.FP4_VALUES[code] * 2.0**-6


@pytest.mark.parametrize("k", [128, 256])
def test_packed_fragments_rebuild_the_weights(k):
    rng = np.random.default_rng(k)
    e, rows = 2, 512
    codes = rng.integers(0, 16, size=(e, rows, k), dtype=np.uint8)
    scales = rng.integers(100, 140, size=(e, rows, k // 32), dtype=np.uint8)
    w, ws = L.pack_weights(codes, scales)
    nt = rows // 256
    w = w.reshape(e, nt, k // 32, 256, 16)
    ws = ws.reshape(e, nt, k // 128, 8, 8, 16)
    for ex in range(e):
        for tile in range(nt):
            rebuilt = np.full((256, k), np.nan)
            rscale = np.full((256, k // 32), -1)
            for tid in range(256):
                wg, warp, lane = tid // 128, (tid // 32) % 4, tid % 32
                g, t = lane // 4, lane % 4
                for k32 in range(k // 32):
                    words = w[ex, tile, k32, tid].view("<u4")
                    regs = []
                    for x in words:
                        lo, hi = decode_word(int(x))
                        regs += [lo, hi]
                    for slot in range(2):
                        a = regs[4 * slot:4 * slot + 4]
                        for ri, reg in enumerate(a):  # wgmma A fragment: a0..a3
                            row = 16 * warp + g + (8 if ri in (1, 3) else 0)
                            kb = 4 * t + (16 if ri >= 2 else 0)
                            for j in range(4):
                                rebuilt[wg * 128 + slot * 64 + row, k32 * 32 + kb + j] = \
                                    e4m3_value((reg >> (8 * j)) & 0xFF)
                    sb = ws[ex, tile, k32 // 4, wg * 4 + warp, g]
                    for slot in range(2):
                        for hh in range(2):
                            rscale[wg * 128 + slot * 64 + 16 * warp + g + 8 * hh, k32] = sb[(k32 % 4) * 4 + slot * 2 + hh]
            want = L.FP4_VALUES[codes[ex, tile * 256:(tile + 1) * 256]] * 2.0**-6
            np.testing.assert_array_equal(rebuilt, want)
            np.testing.assert_array_equal(rscale, scales[ex, tile * 256:(tile + 1) * 256])


def test_w1_row_order_puts_gate_and_up_in_one_warpgroup():
    e, i, k = 1, 256, 4
    gate = np.arange(e * i * k).reshape(e, i, k)
    up = -gate
    r = L.w1_rows_from_gate_up(gate, up)
    # tile 1, warpgroup 1: slot A rows 384..447 = gate 192..255, slot B rows 448..511 = up 192..255
    np.testing.assert_array_equal(r[0, 384:448], gate[0, 192:256])
    np.testing.assert_array_equal(r[0, 448:512], up[0, 192:256])


def test_pack_rejects_bad_shapes():
    with pytest.raises(ValueError, match="multiple of 256"):
        L.pack_weights(np.zeros((1, 128, 128), np.uint8), np.zeros((1, 128, 4), np.uint8))
    with pytest.raises(ValueError, match="4-bit"):
        L.pack_weights(np.full((1, 256, 128), 16, np.uint8), np.zeros((1, 256, 4), np.uint8))
