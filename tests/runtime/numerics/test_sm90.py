"""Hopper transform: decoder mapping, window repack exactness + change report, tile layout, full transform.

The layout tests use only sm90_layout's own functions (permutation + inverse + fragment map), so they keep
holding if the kernel owner redefines the permutation there.
"""
import pytest
import torch

from gcmoe_runtime.numerics import sm90_layout as L
from gcmoe_runtime.numerics.formats import FP4_CODE_VALUES, fp4_code_table, fp4_pack, fp4_unpack
from gcmoe_runtime.numerics.gate_up import deinterleave_gate_up, gate_up_row_order, interleave_gate_up
from gcmoe_runtime.numerics.quant import dequantize_mxfp4, quantize_mxfp4
from gcmoe_runtime.numerics.reference import RoutedWeights
from gcmoe_runtime.numerics.formats import ue8m0_to_float
from gcmoe_runtime.numerics.sm90_window import (
    FOLD_LOG2, HEADROOM_LOG2, STORED_BIAS, WINDOW_STEPS, decoder_fold_byte, fold_lut_words, shift_lut,
    window_change_report, window_repack,
)
from gcmoe_runtime.numerics.transforms_sm90 import inverse_transform_sm90, transform_weights_sm90


def _weights(e, n, k, lo, hi, gen, zero_blocks=0.0):
    codes = torch.randint(0, 16, (e, n, k), dtype=torch.uint8, generator=gen)
    scales = torch.randint(lo, hi + 1, (e, n, k // 32), dtype=torch.uint8, generator=gen)
    if zero_blocks:
        z = torch.rand(e, n, k // 32, generator=gen) < zero_blocks
        codes.view(e, n, k // 32, 32)[z] = 0
    return fp4_pack(codes), scales


def _bits(x):
    return x.contiguous().view(torch.int32)


@pytest.mark.parametrize("r", range(WINDOW_STEPS + 1))
def test_folding_decoder_is_exact_for_every_code_and_relative_exponent(r):
    """fp4 * 2**(r - 5) as an E4M3 normal (never NaN), so decoded * 2**5 = fp4 * 2**r = fp4/64 * stored scale."""
    codes = torch.arange(16, dtype=torch.uint8)
    b = decoder_fold_byte(codes, r)
    assert int((b & 0x7F).max()) <= 0x7C  # 0x7F / 0xFF are E4M3 NaN
    v = b.view(torch.float8_e4m3fn).float()
    assert torch.equal(v * 2.0 ** FOLD_LOG2, torch.tensor(FP4_CODE_VALUES) * 2.0 ** r)
    stored = torch.tensor([STORED_BIAS + r], dtype=torch.uint8)
    assert torch.equal(v * 2.0 ** FOLD_LOG2, torch.tensor(FP4_CODE_VALUES) / 2.0 ** HEADROOM_LOG2
                       * ue8m0_to_float(stored))
    l0, l1 = fold_lut_words(r)  # the kernel's two PRMT words: entries 0-3 and 4-7, little-endian
    assert [(w >> (8 * i)) & 0xFF for w in (l0, l1) for i in range(4)] == b[:8].tolist()
    assert l1 < 2 ** 31  # the kernel's Int32 IMAD never overflows


def test_fold_lut_refuses_r_outside_the_window():
    with pytest.raises(ValueError, match=r"r=12 outside \[0, 11\]"):
        fold_lut_words(WINDOW_STEPS + 1)


def test_shift_lut_is_exact_power_of_two_then_rne():
    assert torch.equal(shift_lut(0), torch.arange(16, dtype=torch.uint8))
    vals = fp4_code_table()
    for d in range(1, 7):
        got = vals[shift_lut(d).long()]
        want = vals * 2.0 ** -d
        exact = torch.isin(want.abs(), vals)
        assert torch.equal(got[exact], want[exact])                    # representable: exact
        assert ((got - want).abs() <= 0.25).all()                      # else nearest E2M1
        assert torch.equal(torch.signbit(got), torch.signbit(vals))    # sign (of zero too) kept


@pytest.mark.parametrize("seed", range(6))
def test_window_bit_identical_for_random_spreads_within_window(seed):
    g = torch.Generator().manual_seed(seed)
    lo = int(torch.randint(0, 254 - WINDOW_STEPS, (1,), generator=g))
    hi = lo + int(torch.randint(0, WINDOW_STEPS + 1, (1,), generator=g))
    p, s = _weights(3, 64, 256, lo, hi, g, zero_blocks=0.1)
    rep = window_change_report(p, s)
    assert rep.bit_identical and rep.shifted_blocks == 0 and max(rep.spread) <= WINDOW_STEPS


@pytest.mark.parametrize("lo,hi", [(0, WINDOW_STEPS), (254 - WINDOW_STEPS, 254), (120, 120), (0, 0), (254, 254)])
def test_window_adversarial_extremes_bit_identical(lo, hi):
    g = torch.Generator().manual_seed(lo + hi)
    p, s = _weights(2, 64, 128, lo, hi, g)
    s[:, 0, 0], s[:, 0, 1] = lo, hi  # force both extremes to be present in every expert
    codes = fp4_unpack(p)
    codes[:, 0, :64] = torch.arange(16, dtype=torch.uint8).repeat(4)  # every code at both extremes
    p = fp4_pack(codes)
    w = window_repack(p, s)
    assert torch.equal(_bits(w.dequantize()), _bits(dequantize_mxfp4(p, s)))
    r = w.stored_scales.int() - 127 - HEADROOM_LOG2
    assert int(r.min()) >= 0 and int(r.max()) <= WINDOW_STEPS


def test_all_zero_blocks_do_not_widen_window():
    g = torch.Generator().manual_seed(3)
    p, s = _weights(1, 64, 128, 100, 105, g)
    codes = fp4_unpack(p).view(1, 64, 4, 32)
    codes[0, 5, 2] = 8  # -0 codes only
    s[0, 5, 2] = 0      # absurd scale on an all-zero block
    p = fp4_pack(codes.view(1, 64, 128))
    rep = window_change_report(p, s)
    assert rep.bit_identical and rep.spread == [5]


def test_beyond_window_report_lists_exactly_the_changed_values():
    g = torch.Generator().manual_seed(11)
    p, s = _weights(2, 64, 128, 110, 118, g)
    s[0, 0, 0] = 140                     # expert 0: spread 30 -> base 129, blocks below shift by 11..19
    s[0, 3, 1] = 127                     # a mid-range block shifted by 2
    w = window_repack(p, s)
    rep = window_change_report(p, s, w)
    before, after = dequantize_mxfp4(p, s), w.dequantize()
    # independent expectation: a value changes iff its block was shifted and the LUT is inexact for its code
    codes = fp4_unpack(p).view(2, 64, 4, 32).long()
    vals = fp4_code_table()
    expected = set()
    for e in range(2):
        base = int(w.base[e])
        for n in range(64):
            for b in range(4):
                sh = max(0, base - int(s[e, n, b]))
                if not sh:
                    continue
                lut = shift_lut(sh)
                for j in range(32):
                    c = int(codes[e, n, b, j])
                    new = torch.tensor(float(vals[lut[c].long()]) * 2.0 ** sh)
                    if new.view(torch.int32) != vals[c].view(torch.int32):
                        expected.add((e, n, 32 * b + j))
    got = {(c.expert, c.row, c.k) for c in rep.changes}
    assert got == expected and got  # exactly the values that change, and some do
    assert all(c.after == float(after[c.expert, c.row, c.k]) and c.before == float(before[c.expert, c.row, c.k])
               for c in rep.changes)
    assert rep.max_abs_change == max(abs(c.delta) for c in rep.changes)
    assert rep.spread[0] == 30 and rep.spread[1] <= 8
    assert not any(c.expert == 1 for c in rep.changes)
    # changed values are tiny relative to the expert's largest block scale (>= 2**12 below it)
    assert rep.max_abs_change <= 6.0 * 2.0 ** (140 - 127 - WINDOW_STEPS - 1)


def test_tile_permutation_is_a_bijection_and_inverts():
    src = L.tile_nibble_source()
    assert torch.equal(torch.sort(src).values, torch.arange(L.TILE_ROWS * L.TILE_K))
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (2, 128, 256), dtype=torch.uint8, generator=g)
    tiles = L.permute_tiles(codes)
    assert tiles.shape == (2, 2, 2, L.TILE_BYTES)
    assert torch.equal(L.unpermute_tiles(tiles), codes)


@pytest.mark.parametrize("k_interleave", [False, True])
def test_tile_permutation_by_expert_chunks_is_the_whole_permutation(monkeypatch, k_interleave):
    """permute_tiles / unpermute_tiles work a few experts at a time (``PERMUTE_CHUNK_CODES``, so a production matrix's
    temporaries fit the GPU): one expert per chunk, two, and a chunk that holds them all give the same bytes."""
    g = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 16, (5, 128, 256), dtype=torch.uint8, generator=g)
    monkeypatch.setattr(L, "PERMUTE_CHUNK_CODES", 1 << 40)
    whole = L.permute_tiles(codes, k_interleave)
    for chunk in (1, 2 * 128 * 256):  # below one expert (-> one per chunk), two experts
        monkeypatch.setattr(L, "PERMUTE_CHUNK_CODES", chunk)
        assert torch.equal(L.permute_tiles(codes, k_interleave), whole)
        assert torch.equal(L.unpermute_tiles(whole, k_interleave), codes)


def test_tile_lane_semantics_match_wgmma_a_fragment():
    g = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 16, (1, 64, 128), dtype=torch.uint8, generator=g)
    tiles = L.permute_tiles(codes)
    for t in range(L.THREADS):
        for j in range(4):
            frag = L.thread_fragment_codes(tiles, t, j)[0, 0, 0]
            want = [int(codes[0, r, 32 * j + c]) for r, c in (L.a_fragment_coord(t, i) for i in range(16))]
            assert frag.tolist() == want
            r_g, r_g8 = (t * 7 + j * 3) % 12, (t * 5 + j) % 12  # every relative exponent 0..11 appears
            dec = L.decode_thread_k32(tiles, t, j, r_g, r_g8)[0, 0, 0]
            rows_r = torch.tensor([r_g8 if (i // 4) % 2 else r_g for i in range(16)], dtype=torch.int32)
            assert torch.equal(dec, decoder_fold_byte(torch.tensor(want, dtype=torch.uint8), rows_r))
    # one thread's K128 data is 32 contiguous bytes (two LDS.128)
    assert L.TILE_BYTES // L.THREADS == 32


def test_wgmma_fragment_map_covers_each_k32_slice_once():
    seen = {(r, c) for t in range(128) for i in range(16) for r, c in [L.a_fragment_coord(t, i)]}
    assert seen == {(r, c) for r in range(64) for c in range(32)}


def test_gate_up_interleave_pairs_rows_g_and_g_plus_8():
    order = gate_up_row_order(64)
    assert order[:16].tolist() == list(range(8)) + list(range(32, 40))
    w = torch.arange(64)[:, None].expand(64, 3)
    assert torch.equal(deinterleave_gate_up(interleave_gate_up(w)), w)
    # a thread's fragment rows g and g+8 hold gate and up of the same feature
    for t in range(128):
        r0, _ = L.a_fragment_coord(t, 0)
        r1, _ = L.a_fragment_coord(t, 4)
        assert int(order[r1]) - int(order[r0]) == 32


@pytest.mark.parametrize("spread", [0, 5, WINDOW_STEPS])
def test_full_transform_exact_and_invertible(spread):
    g = torch.Generator().manual_seed(spread)
    e, h, i = 2, 256, 128
    p1, s1 = _weights(e, 2 * i, h, 120, 120 + spread, g)
    p2, s2 = _weights(e, h, i, 110, 110 + spread, g)
    routed = RoutedWeights(p1, s1, p2, s2)
    m1, m2 = transform_weights_sm90(routed)
    assert m1.tiles.shape == (e, 2 * i // 64, h // 128, 4096) and m1.scales.shape == (e, 2 * i, h // 32)
    assert torch.equal(_bits(m1.dequantize()), _bits(dequantize_mxfp4(p1, s1)))
    assert torch.equal(_bits(m2.dequantize()), _bits(dequantize_mxfp4(p2, s2)))
    for m, (p, s) in ((m1, (p1, s1)), (m2, (p2, s2))):
        ip, is_ = inverse_transform_sm90(m)
        assert torch.equal(ip, p) and torch.equal(is_, s)
    # tiles hold the interleaved rows: tile row 8 of slab 0 is canonical up row 0
    c = L.unpermute_tiles(m1.tiles)
    assert torch.equal(c[:, 8], fp4_unpack(p1)[:, i])


def test_transform_from_real_quantised_weights_is_exact():
    w1 = torch.randn(2, 256, 256) * torch.exp2(torch.randint(-4, 4, (2, 256, 1)).float())
    w2 = torch.randn(2, 256, 128)
    a, b = quantize_mxfp4(w1)
    c, d = quantize_mxfp4(w2)
    m1, m2 = transform_weights_sm90(RoutedWeights(a, b, c, d))
    assert torch.equal(m1.dequantize(), dequantize_mxfp4(a, b)) and torch.equal(m2.dequantize(), dequantize_mxfp4(c, d))


def test_transform_errors_name_shapes():
    with pytest.raises(ValueError, match="N % 64"):
        L.permute_tiles(torch.zeros(1, 32, 128, dtype=torch.uint8))
    with pytest.raises(ValueError, match="K/32"):
        window_repack(torch.zeros(1, 64, 64, dtype=torch.uint8), torch.zeros(1, 64, 3, dtype=torch.uint8))


def test_scale_tiles_roundtrip_and_positions():
    g = torch.Generator().manual_seed(5)
    s = torch.randint(0, 255, (2, 128, 8), dtype=torch.uint8, generator=g)  # N=128, K=256
    t = L.permute_scales(s)
    assert t.shape == (2, 2, 2, L.SCALE_TILE_BYTES)
    assert torch.equal(L.unpermute_scales(t), s)
    for row in range(64):
        for k32 in range(4):
            assert int(t[1, 1, 1, L.scale_tile_position(row, k32)]) == int(s[1, 64 + row, 4 + k32])
    # a thread's two fragment rows (g, g + 8) and four K32 slices are 8 contiguous bytes
    for th in range(128):
        r0, _ = L.a_fragment_coord(th, 0)
        r1, _ = L.a_fragment_coord(th, 4)
        pos = sorted(L.scale_tile_position(r, k) for r in (r0, r1) for k in range(4))
        assert pos == list(range(pos[0], pos[0] + 8)) and pos[0] % 8 == 0


def test_k128_interleave_is_a_bijection_giving_each_quad_thread_one_k32_block():
    for il in (False, True):
        cols = [L.k128_column(j, p, il) for j in range(4) for p in range(32)]
        assert sorted(cols) == list(range(128))
    assert [L.k128_column(j, p) for j in range(4) for p in range(32)] == list(range(128))
    for t in range(L.THREADS):
        tig = t % 4
        blocks = {L.k128_column(j, c, True) // 32 for j in range(4) for i in range(16)
                  for _, c in [L.a_fragment_coord(t, i)]}
        assert blocks == {tig}  # one K32 scale block per thread and step: one decode table pair per row
    # the word form the kernel's shared-memory permutation uses: physical word 8j + 4h + t <- original 8t + 2j + h
    for j in range(4):
        for h in range(2):
            for t in range(4):
                assert L.k128_word_source(8 * j + 4 * h + t) == 8 * t + 2 * j + h
    assert sorted(L.k128_word_source(w) for w in range(32)) == list(range(32))
    # role1's per-lane form (bit operations on the lane) is the same map
    assert [L.k128_word_source_bits(w) for w in range(32)] == [L.k128_word_source(w) for w in range(32)]


def test_interleaved_tiles_and_activations_give_the_same_dot_products():
    """Each K32 MMA pairs slice j's A position p with activation byte 32j + p: with the weights and the activations
    both in the interleaved order, every (row, token) sum runs over the same products as the plain order's."""
    g = torch.Generator().manual_seed(5)
    codes = torch.randint(0, 16, (1, 64, 256), dtype=torch.uint8, generator=g)
    acts = torch.randint(0, 256, (3, 256), dtype=torch.uint8, generator=g)
    tiles = L.permute_tiles(codes, k_interleave=True)
    assert torch.equal(L.unpermute_tiles(tiles, k_interleave=True), codes)
    assert not torch.equal(tiles, L.permute_tiles(codes))
    xi = L.interleave_k128(acts)
    assert torch.equal(xi.reshape(3, 2, 128)[..., 32 * 1 + 16 + 4 * 2 + 1], acts.reshape(3, 2, 128)[..., 64 + 8 + 4 + 1])
    vals = torch.tensor(FP4_CODE_VALUES)
    want = vals[codes[0].long()] @ acts.double().float().T  # [64 rows, 3 tokens], plain K order
    got = torch.zeros(64, 3)
    for kb in range(2):
        for t in range(L.THREADS):
            for j in range(4):
                frag = L.thread_fragment_codes(tiles[:, :, kb:kb + 1], t, j)[0, 0, 0]
                for i in range(16):
                    row, pos = L.a_fragment_coord(t, i)
                    got[row] += vals[int(frag[i])] * xi[:, 128 * kb + 32 * j + pos].float()
    assert torch.allclose(got, want, rtol=0, atol=1e-3)


def test_interleave_k128_refuses_a_partial_line():
    with pytest.raises(ValueError, match="K=96 must be a multiple of 128"):
        L.interleave_k128(torch.zeros(2, 96, dtype=torch.uint8))


def test_full_transform_in_the_interleaved_k_order_dequantizes_the_same():
    g = torch.Generator().manual_seed(9)
    p1, s1 = _weights(2, 256, 256, 118, 124, g)
    p2, s2 = _weights(2, 256, 128, 118, 124, g)
    routed = RoutedWeights(p1, s1, p2, s2)
    plain, inter = transform_weights_sm90(routed), transform_weights_sm90(routed, k_interleave=True)
    for a, b in zip(plain, inter):
        assert b.k_interleave and not a.k_interleave
        assert not torch.equal(a.tiles, b.tiles) and torch.equal(a.scales, b.scales)
        assert torch.equal(_bits(a.dequantize()), _bits(b.dequantize()))
        assert torch.equal(b.tiles, L.permute_tiles(L.unpermute_tiles(a.tiles), k_interleave=True))
