"""CPU checks that the role2 SM90 kernel reads the runtime's SM90 weight layout the way it should.

An emulator walks every consumer thread of a CTA exactly as ``role2_gemm`` does (its 32 bytes of a
``sm90_layout`` code tile per slab and K128 step, words ``2q``/``2q+1`` for K32 ``q``, the decode rule
of ``fp4_decode``, the wgmma A-fragment layout documented in ``wgmma_rs``, the 8 scale bytes of a
``permute_scales`` tile) and rebuilds the weights each slab feeds the MMA: they must equal the codes
(value x 2**-6) and scales given to the layout functions. Also checks the W1 epilogue's column
formula against the gate/up interleave.
"""
from __future__ import annotations

import pytest
import torch

from gcmoe_runtime.numerics.formats import fp4_code_table
from gcmoe_runtime.numerics.gate_up import gate_up_row_order
from gcmoe_runtime.numerics.sm90_layout import permute_scales, permute_tiles, unpermute_scales

E2M1_VALUES = fp4_code_table(dtype=torch.float64)


def e4m3_value(byte: int) -> float:
    s = -1.0 if byte & 0x80 else 1.0
    e, m = (byte >> 3) & 0xF, byte & 0x7
    return s * (m / 8.0) * 2.0 ** -6 if e == 0 else s * (1 + m / 8.0) * 2.0 ** (e - 7)


def decode_word(word: int) -> tuple[int, int]:
    """Host mirror of fp4_decode's PTX (shift/and/or) on one 32-bit word."""
    lo = ((word << 4) & 0x80808080) | ((word << 2) & 0x1C1C1C1C)
    hi = (word & 0x80808080) | ((word >> 2) & 0x1C1C1C1C)
    return lo & 0xFFFFFFFF, hi & 0xFFFFFFFF


def test_decode_is_exact_for_all_codes():
    for code in range(16):
        lo, hi = decode_word(code | (code << 4))
        assert e4m3_value(lo & 0xFF) == float(E2M1_VALUES[code]) * 2.0**-6
        assert e4m3_value(hi & 0xFF) == float(E2M1_VALUES[code]) * 2.0**-6


@pytest.mark.parametrize("k", [128, 256])
def test_kernel_reads_rebuild_the_weights(k):
    gen = torch.Generator().manual_seed(k)
    e, rows = 1, 256  # one CTA: 4 slabs of 64 rows (warpgroup wg, slot sl -> slab 2*wg + sl)
    codes = torch.randint(0, 16, (e, rows, k), generator=gen, dtype=torch.uint8)
    scales = torch.randint(100, 140, (e, rows, k // 32), generator=gen, dtype=torch.uint8)
    tiles = permute_tiles(codes).numpy()
    stiles = permute_scales(scales).numpy()
    assert torch.equal(unpermute_scales(permute_scales(scales)), scales)
    want = E2M1_VALUES[codes.long()].numpy() * 2.0**-6
    got = torch.full((rows, k), float("nan"), dtype=torch.float64).numpy()
    got_scale = torch.full((rows, k // 32), -1, dtype=torch.int32).numpy()
    for ctid in range(256):
        wg, tw = divmod(ctid, 128)
        warp, lane = divmod(tw, 32)
        g, t = divmod(lane, 4)
        for sl in range(2):
            slab = 2 * wg + sl
            for kb in range(k // 128):
                words = tiles[0, slab, kb, 32 * tw:32 * tw + 32].view("<u4")
                sbytes = stiles[0, slab, kb, 8 * (8 * warp + g):8 * (8 * warp + g) + 8]
                for q in range(4):
                    regs = []
                    for r in range(2):
                        regs += list(decode_word(int(words[2 * q + r])))
                    for ri, reg in enumerate(regs):  # a0..a3: rows g / g+8, k 4t.. / 16+4t..
                        row = slab * 64 + 16 * warp + g + (8 if ri in (1, 3) else 0)
                        kk = kb * 128 + 32 * q + 4 * t + (16 if ri >= 2 else 0)
                        for j in range(4):
                            got[row, kk + j] = e4m3_value((reg >> (8 * j)) & 0xFF)
                    for hh in range(2):  # kernel: byte (q % 2) * 2 + hh of word q // 2
                        byte = 4 * (q // 2) + (q % 2) * 2 + hh
                        got_scale[slab * 64 + 16 * warp + g + 8 * hh, kb * 4 + q] = sbytes[byte]
    assert (got == want[0]).all()
    assert (got_scale == scales[0].numpy()).all()


def test_w1_epilogue_columns_follow_the_gate_up_interleave():
    two_i = 512
    src = gate_up_row_order(two_i)
    for ntile in range(two_i // 256):
        for slab in range(4):
            for warp in range(4):
                for g in range(8):
                    row = ntile * 256 + slab * 64 + 16 * warp + g
                    col = ntile * 128 + slab * 32 + 8 * warp + g  # role2_gemm W1 epilogue
                    assert int(src[row]) == col  # gate of column col
                    assert int(src[row + 8]) == two_i // 2 + col  # its up row is the row-half 1 partner
