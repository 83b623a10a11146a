"""CPU checks that the role2 SM90 kernel reads the runtime's SM90 weight layout the way it should.

An emulator walks every consumer thread of a CTA exactly as ``role2_gemm`` does (its 32 bytes of a
``sm90_layout`` code tile per slab and K128 step, words ``2q``/``2q+1`` for K32 ``q``, the decode rule
of ``fp4_decode`` with the row's table from its scale byte, the wgmma A-fragment layout documented in
``wgmma_rs``, the 8 scale bytes of a ``permute_scales`` tile) and rebuilds the weights each slab feeds the
MMA: they must equal the codes x 2**(stored - 133 - 5) given to the layout functions. Also checks the W1
epilogue's column formula against the gate/up interleave.
"""
from __future__ import annotations

import pytest
import torch

from gcmoe_runtime.numerics.formats import fp4_code_table
from gcmoe_runtime.numerics.gate_up import gate_up_row_order
from gcmoe_runtime.numerics.sm90_layout import permute_scales, permute_tiles, unpermute_scales
from gcmoe_runtime.numerics.sm90_window import FOLD_LOG2, FOLD_LUT_STEPS, FOLD_LUT_WORDS, STORED_BIAS, WINDOW_STEPS

E2M1_VALUES = fp4_code_table(dtype=torch.float64)


def e4m3_value(byte: int) -> float:
    s = -1.0 if byte & 0x80 else 1.0
    e, m = (byte >> 3) & 0xF, byte & 0x7
    return s * (m / 8.0) * 2.0 ** -6 if e == 0 else s * (1 + m / 8.0) * 2.0 ** (e - 7)


def _prmt(a: int, b: int, sel: int) -> int:
    """PTX prmt.b32, default mode: result byte k from selector nibble k (only the low 16 bits of ``sel`` count);
    nibble bits 0-2 pick one of the 8 bytes of {b, a}, bit 3 replicates that byte's sign bit instead."""
    table = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]

    def byte(nib: int) -> int:
        v = table[nib & 7]
        return (0xFF if v & 0x80 else 0) if nib & 8 else v

    return sum(byte((sel >> (4 * k)) & 0xF) << (8 * k) for k in range(4))


def lut_words(scale_byte: int) -> tuple[int, int]:
    """Host mirror of fp4_decode.fold_lut (Int32 arithmetic, wrapped)."""
    r = scale_byte - STORED_BIAS
    return ((FOLD_LUT_WORDS[0] + r * FOLD_LUT_STEPS[0]) & 0xFFFFFFFF,
            (FOLD_LUT_WORDS[1] + r * FOLD_LUT_STEPS[1]) & 0xFFFFFFFF)


def decode_word(word: int, lut_g, lut_h) -> tuple[int, int]:
    """Host mirror of fp4_decode's PTX (and/shift, two prmt, or) on one 32-bit word."""
    lo = _prmt(*lut_g, word & 0x7777) | (word & 0x80808080)
    hi = _prmt(*lut_h, (word >> 16) & 0x7777) | ((word << 4) & 0x80808080)
    return lo & 0xFFFFFFFF, hi & 0xFFFFFFFF


@pytest.mark.parametrize("r", range(WINDOW_STEPS + 1))
def test_decode_is_exact_for_all_codes(r):
    lut = lut_words(STORED_BIAS + r)
    for code in range(16):
        mag, sign = code & 7, code >> 3
        word = mag | (mag << 16) | (sign << 7) | (sign << 3)  # lo_0 and hi_0 = code (sm90_layout bit order)
        lo, hi = decode_word(word, lut, lut)
        assert e4m3_value(lo & 0xFF) == float(E2M1_VALUES[code]) * 2.0 ** (r - FOLD_LOG2)
        assert e4m3_value(hi & 0xFF) == float(E2M1_VALUES[code]) * 2.0 ** (r - FOLD_LOG2)


def _emulate_consumer_reads(k: int, seed: int, k_interleave: bool):
    """Walk every consumer thread of one CTA (4 slabs of 64 rows: warpgroup wg, slot sl -> slab 2*wg + sl) over the
    tiles of random codes and in-window scales as ``role2_gemm`` reads them (its 32 bytes per slab and step, the
    scale bytes of ``_read_k128_stage``, the decode of ``fp4_decode`` with each row's table, the A-fragment layout of
    ``wgmma_rs``); return (the weights each slab feeds the MMA, the codes x 2**(stored - 133 - 5) to expect).
    Plain: the table of K32 ``q`` from byte ``(q % 2) * 2 + hh`` of scale word ``q // 2``, slice ``q``'s position
    ``p`` is column ``32q + p``. ``k_interleave``: one scale word per slab (word ``t // 2``), one table pair per step
    from its byte ``(t % 2) * 2 + hh``, and slice ``q``'s position ``p`` is column ``k128_column(q, p, True)``."""
    from gcmoe_runtime.numerics.sm90_layout import k128_column

    gen = torch.Generator().manual_seed(seed)
    e, rows = 1, 256
    codes = torch.randint(0, 16, (e, rows, k), generator=gen, dtype=torch.uint8)
    scales = torch.randint(STORED_BIAS, STORED_BIAS + WINDOW_STEPS + 1, (e, rows, k // 32), generator=gen,
                           dtype=torch.uint8)
    tiles = permute_tiles(codes, k_interleave=k_interleave).numpy()
    stiles = permute_scales(scales).numpy()
    assert torch.equal(unpermute_scales(permute_scales(scales)), scales)
    r = (scales.double() - STORED_BIAS).repeat_interleave(32, dim=-1)
    want = (E2M1_VALUES[codes.long()] * 2.0 ** (r - FOLD_LOG2)).numpy()[0]
    got = torch.full((rows, k), float("nan"), dtype=torch.float64).numpy()
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
                    blk = t if k_interleave else q  # the K32 scale block of every position the thread owns
                    luts = [lut_words(int(sbytes[4 * (blk // 2) + (blk % 2) * 2 + hh])) for hh in range(2)]
                    regs = []
                    for rr in range(2):
                        regs += list(decode_word(int(words[2 * q + rr]), *luts))
                    for ri, reg in enumerate(regs):  # a0..a3: rows g / g+8, k 4t.. / 16+4t..
                        row = slab * 64 + 16 * warp + g + (8 if ri in (1, 3) else 0)
                        for j in range(4):
                            kk = kb * 128 + k128_column(q, 4 * t + (16 if ri >= 2 else 0) + j, k_interleave)
                            got[row, kk] = e4m3_value((reg >> (8 * j)) & 0xFF)
    return got, want


@pytest.mark.parametrize("k", [128, 256])
def test_kernel_reads_rebuild_the_weights(k):
    got, want = _emulate_consumer_reads(k, k, k_interleave=False)
    assert (got == want).all()


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


def _run_decode_ptx(word: int, lut_g, lut_h) -> tuple[int, int]:
    """Interpret fp4_decode's inline PTX text itself (and/shr/shl/prmt/or on b32), so the host mirror above
    cannot drift from the instructions the kernel really issues."""
    from gcmoe_build.kernels.sm90.fp4_decode import _DECODE_PTX

    regs = {"$2": word, "$3": lut_g[0], "$4": lut_g[1], "$5": lut_h[0], "$6": lut_h[1]}

    def val(tok: str) -> int:
        return int(tok, 0) if tok[0].isdigit() else regs[tok]

    ops = {"and.b32": lambda a, b: a & b, "or.b32": lambda a, b: a | b, "shr.b32": lambda a, b: a >> b,
           "shl.b32": lambda a, b: (a << b) & 0xFFFFFFFF, "mul.hi.u32": lambda a, b: (a * b) >> 32}
    for line in _DECODE_PTX.replace("{", "").replace("}", "").split(";"):
        line = line.strip()
        if not line or line.startswith(".reg"):
            continue
        op, args = line.split(None, 1)
        dst, *src = [a.strip() for a in args.split(",")]
        if op == "prmt.b32":
            regs[dst] = _prmt(val(src[0]), val(src[1]), val(src[2]))
        else:
            regs[dst] = ops[op](*(val(a) for a in src))
    return regs["$0"], regs["$1"]


def test_decode_ptx_text_matches_the_host_mirror():
    gen = torch.Generator().manual_seed(3)
    words = torch.randint(0, 2**32, (200,), generator=gen, dtype=torch.int64).tolist()
    for n, w in enumerate(words):
        lut_g, lut_h = lut_words(STORED_BIAS + n % 12), lut_words(STORED_BIAS + (n * 5) % 12)
        assert _run_decode_ptx(w, lut_g, lut_h) == decode_word(w, lut_g, lut_h)


def test_prmt_mirror_models_the_sign_replicate_bit():
    # the decoder must clear bit 3 of every selector nibble: with it set PRMT returns 0x00/0xFF, not the entry
    assert _prmt(0x00000080, 0, 0x4448) == 0xFF
    assert _prmt(0x00000070, 0, 0x4448) == 0x00
    assert _prmt(0x00000070, 0, 0x4440) == 0x70
    assert _prmt(0x44332211, 0x88776655, 0xFFFF0000 | 0x7654) == 0x88776655


def test_byte_of_ptx_selects_one_zero_extended_byte():
    from gcmoe_build.kernels.sm90.fp4_decode import _BYTE_OF_SELECTOR

    gen = torch.Generator().manual_seed(5)
    for w in torch.randint(0, 2**32, (50,), generator=gen, dtype=torch.int64).tolist():
        for k in range(4):
            assert _prmt(w, 0, _BYTE_OF_SELECTOR | k) == (w >> (8 * k)) & 0xFF


def test_k_interleaved_kernel_reads_rebuild_the_weights():
    """``Role2GemmConfig.k_interleave``: each thread reads one scale word per slab and step (``_read_k128_stage``),
    builds its rows' table pair once per step and decodes all four K32 slices with it."""
    got, want = _emulate_consumer_reads(256, 3, k_interleave=True)
    assert (got == want).all()


def test_interleave_chunk_permutes_swizzled_lines_as_the_host_mirror(monkeypatch):
    """``role2_chunks._interleave_line`` on an emulated shared memory holding a tensor-map chunk in the 128-byte swizzle
    (logical 16-byte chunk c of the line at address bits ``c ^ addr[7:9]``): read back through the swizzle, every
    line equals ``sm90_layout.interleave_k128`` of the original."""
    import numpy as np

    from gcmoe_build.kernels.sm90 import role2_chunks
    from gcmoe_runtime.numerics.sm90_layout import interleave_k128

    gen = torch.Generator().manual_seed(4)
    bm, nk, base = 16, 3, 2048  # a [K128][BM][128 B] chunk at a 1024-aligned offset
    logical = torch.randint(0, 256, (nk, bm, 128), generator=gen, dtype=torch.uint8)
    mem = np.zeros(base + nk * bm * 128, dtype=np.uint8)

    def chunks():  # (line's K128 index, row, logical 16-byte chunk, its bytes in mem through the swizzle)
        for kb in range(nk):
            for row in range(bm):
                line = base + (kb * bm + row) * 128
                for c in range(8):
                    p = line + ((c ^ ((line >> 7) & 7)) << 4)
                    yield kb, row, c, slice(p, p + 16)

    for kb, row, c, at in chunks():
        mem[at] = logical[kb, row, 16 * c:16 * c + 16].numpy()
    monkeypatch.setattr(role2_chunks, "ld_shared_v4",
                        lambda a: [int(x) for x in mem[a:a + 16].view("<u4")])

    def st(a, *w):
        mem[a:a + 16] = np.array(w, dtype="<u4").view(np.uint8)

    monkeypatch.setattr(role2_chunks, "st_shared_v4", st)
    for line in range(nk * bm):
        role2_chunks._interleave_line(base + line * 128)
    got = torch.empty_like(logical)
    for kb, row, c, at in chunks():
        got[kb, row, 16 * c:16 * c + 16] = torch.from_numpy(mem[at].copy())
    assert torch.equal(got, interleave_k128(logical))


def test_w1_epilogue_writes_l2_x_in_the_order_w2_reads():
    """A ``k_interleave`` build's W1 epilogue puts I-column ``32 slab + 8 warp + g`` of its task's 128 at
    ``sm90_layout.k128_epilogue_position`` (``role2_epilogue._w1_quantize_store``): the byte ``k128_position`` gives it, so
    W2 reads its chunks of ``l2_x`` as they are; each byte of the line once."""
    from gcmoe_runtime.numerics.sm90_layout import (deinterleave_k128, interleave_k128, k128_epilogue_position,
                                                    k128_position)

    got = [k128_epilogue_position(slab, warp, g) for slab in range(4) for warp in range(4) for g in range(8)]
    assert got == [k128_position(32 * slab + 8 * warp + g) for slab in range(4) for warp in range(4) for g in range(8)]
    assert sorted(got) == list(range(128))
    assert [k128_position(c, False) for c in range(128)] == list(range(128))
    x = torch.randint(0, 256, (3, 256), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    assert torch.equal(deinterleave_k128(interleave_k128(x)), x)
    line = interleave_k128(torch.arange(128, dtype=torch.uint8))
    assert [int(line[k128_position(c)]) for c in range(128)] == list(range(128))
