"""CPU: the SM90 shared-expert weight transform (gcmoe_runtime.numerics.transforms_sm90_shared) only rearranges:
it is exactly invertible, every code byte lands where the wgmma A fragment needs it, and the dequantised
transformed weights equal quant.dequantize_fp8_weight of the input, bit for bit, for both recipes."""
from __future__ import annotations

import pytest
import torch

from gcmoe_runtime.numerics.gate_up import gate_up_row_order
from gcmoe_runtime.numerics.quant import dequantize_fp8_weight, expand_block_scales, quantize_fp8_weight
from gcmoe_runtime.numerics.sm90_layout import a_fragment_coord
from gcmoe_runtime.numerics.transforms_sm90_shared import transform_shared_sm90, untransform_shared_sm90

H, IS = 512, 256
RECIPES = [(1, 128, 128), (1, 1, 32)]


def _weights(recipe, seed=0):
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(2 * IS, H, generator=g) * torch.logspace(-3, 2, H)[None, :]
    w2 = torch.randn(H, IS, generator=g)
    q1, s1 = quantize_fp8_weight(w1, recipe)
    q2, s2 = quantize_fp8_weight(w2, recipe)
    return q1, s1, q2, s2


@pytest.mark.parametrize("recipe", RECIPES)
def test_roundtrip_exact(recipe):
    q1, s1, q2, s2 = _weights(recipe)
    sw = transform_shared_sm90(q1, s1, q2, s2, recipe)
    assert sw.w1_tiles.shape == (2 * IS // 64, H // 128, 8192) and sw.w2_tiles.shape == (H // 64, IS // 128, 8192)
    assert sw.w1_scales.shape == (2 * IS // 64, H // 128, 256) and sw.w2_scales.shape == (H // 64, IS // 128, 256)
    c1, e1, c2, e2 = untransform_shared_sm90(sw)
    assert torch.equal(c1, q1.view(torch.uint8)) and torch.equal(c2, q2.view(torch.uint8))
    full = (lambda s: expand_block_scales(s)) if recipe == (1, 128, 128) else (lambda s: s)
    assert torch.equal(e1, full(s1)) and torch.equal(e2, full(s2))
    # same multiset of bytes: nothing quantised, nothing lost
    assert torch.equal(torch.sort(sw.w1_tiles.flatten()).values, torch.sort(q1.view(torch.uint8).flatten()).values)


@pytest.mark.parametrize("recipe", RECIPES)
def test_dequantised_values_equal_reference(recipe):
    q1, s1, q2, s2 = _weights(recipe, seed=1)
    sw = transform_shared_sm90(q1, s1, q2, s2, recipe)
    c1, e1, c2, e2 = untransform_shared_sm90(sw)
    from gcmoe_runtime.numerics.quant import dequantize_e4m3_ue8m0

    ref1, ref2 = dequantize_fp8_weight(q1, s1, recipe), dequantize_fp8_weight(q2, s2, recipe)
    assert torch.equal(dequantize_e4m3_ue8m0(c1.view(torch.float8_e4m3fn), e1, 32), ref1)
    assert torch.equal(dequantize_e4m3_ue8m0(c2.view(torch.float8_e4m3fn), e2, 32), ref2)


def test_fragment_positions():
    """Spot-check the kernel's view: thread t, K128 step kb, K32 q, register r, byte b of slab s is the element
    a_(4r+b) of the fragment; W1 rows are gate/up interleaved; scale byte 2q+hh of row group 8w+g."""
    q1, s1, q2, s2 = _weights((1, 1, 32), seed=2)
    sw = transform_shared_sm90(q1, s1, q2, s2, (1, 1, 32))
    w1i = q1.view(torch.uint8)[gate_up_row_order(2 * IS)]
    s1i = s1[gate_up_row_order(2 * IS)]
    for (s, kb, t, q, r, b) in [(0, 0, 0, 0, 0, 0), (3, 2, 77, 3, 2, 1), (7, 3, 127, 1, 3, 3), (5, 1, 40, 2, 1, 2)]:
        row, col = a_fragment_coord(t, 4 * r + b)
        assert int(sw.w1_tiles[s, kb, 64 * t + 16 * q + 4 * r + b]) == int(w1i[64 * s + row, 128 * kb + 32 * q + col])
    for (s, kb, w, g, q, hh) in [(0, 0, 0, 0, 0, 0), (6, 3, 3, 7, 3, 1), (2, 1, 1, 5, 2, 0)]:
        assert int(sw.w1_scales[s, kb, (8 * w + g) * 8 + 2 * q + hh]) == int(s1i[64 * s + 16 * w + g + 8 * hh, 4 * kb + q])


def test_bad_input_names_the_field():
    q1, s1, q2, s2 = _weights((1, 128, 128))
    with pytest.raises(ValueError, match="w1_scale"):
        transform_shared_sm90(q1, s1[:1], q2, s2, (1, 128, 128))
    with pytest.raises(ValueError, match="recipe"):
        transform_shared_sm90(q1, s1, q2, s2, (1, 64, 64))
    with pytest.raises(ValueError, match="disagree"):
        transform_shared_sm90(q1, s1, q2[:, :128], s2, (1, 128, 128))
