"""Blackwell transform (K128 prepack, gate/up, UTCCP scale order) and shared activation scale staging (Eq. 3)."""
import pytest
import torch

from gcmoe_runtime.numerics.formats import unpack_ue8m0_x4
from gcmoe_runtime.numerics.gate_up import gate_up_row_order
from gcmoe_runtime.numerics.quant import expand_block_scales, quantize_fp8_weight, quantize_mxfp4
from gcmoe_runtime.numerics.reference import RoutedWeights, SharedWeights
from gcmoe_runtime.numerics.shared_scales import (
    shared_scale_row, stage_shared_act_scales, staged_rows, unstage_shared_act_scales,
)
from gcmoe_runtime.numerics.transforms_sm100 import (
    prepack_k128, transform_shared_sm100, transform_weights_sm100, unprepack_k128, utccp_row,
)


def _routed(e=2, h=256, i=128):
    g = torch.Generator().manual_seed(0)
    a, b = quantize_mxfp4(torch.randn(e, 2 * i, h, generator=g))
    c, d = quantize_mxfp4(torch.randn(e, h, i, generator=g))
    return RoutedWeights(a, b, c, d)


def test_k128_prepack_layout_and_inverse():
    p = torch.randint(0, 256, (2, 128, 192), dtype=torch.uint8)  # K = 384
    t = prepack_k128(p, 2)
    assert t.shape == (2, 3, 128, 64)
    assert torch.equal(t[1, 2, 5], p[1, 5, 128:192])
    assert t[0, 1].is_contiguous() and t[0, 1].numel() == 8192  # one tile = one 8 KB contiguous burst
    assert torch.equal(unprepack_k128(t), p)
    with pytest.raises(ValueError, match="multiple of 128"):
        prepack_k128(torch.zeros(1, 128, 48, dtype=torch.uint8), 2)


def test_utccp_row_is_eq3_order_and_bijective():
    u = torch.arange(512)
    r = utccp_row(u)
    assert torch.equal(torch.sort(r).values, u)
    assert torch.equal(r, shared_scale_row(u, 128))  # Eq. 3 with BM = 128 is the same order
    assert r[:5].tolist() == [0, 4, 8, 12, 16] and int(r[32]) == 1 and int(r[130]) == 136


def test_routed_transform_sm100_roundtrip_and_placement():
    rw = _routed()
    m1, m2 = transform_weights_sm100(rw)
    assert m1.tiles.shape == (2, 2, 256, 64) and m1.scales.shape == (2, 2, 256) and m1.scales.dtype == torch.int32
    p, s = m1.canonical()
    assert torch.equal(p, rw.w1) and torch.equal(s, rw.w1_scale)
    p, s = m2.canonical()
    assert torch.equal(p, rw.w2) and torch.equal(s, rw.w2_scale)
    # interleaved row 8 is canonical up row 0; its scales sit at UTCCP row utccp_row(8)
    order = gate_up_row_order(256)
    assert int(order[8]) == 128
    assert torch.equal(m1.tiles[:, 0, 8], rw.w1[:, 128, :64])
    got = unpack_ue8m0_x4(m1.scales[:, 1, int(utccp_row(torch.tensor(8)))][:, None])
    assert torch.equal(got, rw.w1_scale[:, 128, 4:8])


@pytest.mark.parametrize("recipe", [(1, 1, 32), (1, 128, 128)])
def test_shared_transform_sm100(recipe):
    g = torch.Generator().manual_seed(1)
    a, b = quantize_fp8_weight(torch.randn(256, 256, generator=g), recipe)
    c, d = quantize_fp8_weight(torch.randn(256, 128, generator=g), recipe)
    m1, m2 = transform_shared_sm100(SharedWeights(a, b, c, d, recipe))
    assert m1.tiles.shape == (1, 2, 256, 128)  # FP8: 16 KB tiles
    p, s = m1.canonical()
    assert torch.equal(p[0], a.view(torch.uint8))
    assert torch.equal(s[0], b if recipe == (1, 1, 32) else expand_block_scales(b))


@pytest.mark.parametrize("bm", [8, 16, 32, 64, 96, 128, 192, 240])
def test_eq3_rows_unique_within_bound_and_roundtrip(bm):
    t_max = 256
    rows = shared_scale_row(torch.arange(t_max), bm)
    assert rows.unique().numel() == t_max and int(rows.max()) < staged_rows(t_max)
    sc = torch.randint(-2**31, 2**31 - 1, (200, 48), dtype=torch.int32)
    st = stage_shared_act_scales(sc, bm, t_max)
    assert st.shape == (48, staged_rows(t_max))
    assert torch.equal(unstage_shared_act_scales(st, bm, 200), sc)
    used = torch.zeros(staged_rows(t_max), dtype=torch.bool)
    used[shared_scale_row(torch.arange(200), bm)] = True
    assert not st[:, ~used].any()


def test_eq3_hand_values():
    # t = 200, BM = 240: u = 200 -> 0*256 + 1*128 + (200 % 32)*4 + (72 // 32) = 128 + 32 + 2
    assert int(shared_scale_row(torch.tensor(200), 240)) == 162
    # t = 37, BM = 16: block 2, u = 5 -> 2*128 + 20
    assert int(shared_scale_row(torch.tensor(37), 16)) == 276
    with pytest.raises(ValueError, match="exceeds"):
        stage_shared_act_scales(torch.zeros(10, 4, dtype=torch.int32), 16, 8)
