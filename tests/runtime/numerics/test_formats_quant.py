"""Formats and quantisers: code tables, rounding, packing, round trips, zeros, extremes, subnormals, NaN/Inf."""
import pytest
import torch

from gcmoe_runtime.numerics import formats as F
from gcmoe_runtime.numerics import quant as Q


def test_fp4_table_matches_torch_float4_when_available():
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("torch lacks float4_e2m1fn_x2")
    # The E2M1 code table is the OCP one: the magnitude codes are exactly torch's E2M1 values.
    assert F.FP4_MAGNITUDES == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    assert [F.fp4_code_table()[c].item() for c in range(16)] == list(F.FP4_CODE_VALUES)


def test_fp4_encode_is_round_to_nearest_even_with_saturation():
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 100.0, -0.25, -0.75, -5.0, -1e-9])
    got = F.fp4_decode(F.fp4_encode(mids)).tolist()
    assert got == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 0.0, -1.0, -4.0, 0.0]
    # -tiny rounds to +0 (code 0), never to -0
    assert F.fp4_encode(torch.tensor([-1e-9, -0.0])).tolist() == [0, 0]
    # brute force nearest on a fine grid
    v = torch.linspace(-6.5, 6.5, 26001)
    dec = F.fp4_decode(F.fp4_encode(v))
    grid = F.fp4_code_table()
    best = (grid[None, :] - v.clamp(-6, 6)[:, None]).abs().min(1).values
    assert torch.equal((dec - v.clamp(-6, 6)).abs(), best)


def test_fp4_pack_unpack_roundtrip_and_nibble_order():
    codes = torch.randint(0, 16, (3, 64), dtype=torch.uint8)
    packed = F.fp4_pack(codes)
    assert packed.shape == (3, 32)
    assert torch.equal(F.fp4_unpack(packed), codes)
    assert int(packed[0, 0]) == int(codes[0, 0]) | (int(codes[0, 1]) << 4)
    assert torch.equal(F.fp4_unpack_values(packed), F.fp4_decode(codes))
    with pytest.raises(ValueError, match="even"):
        F.fp4_pack(torch.zeros(3, dtype=torch.uint8))


def test_ue8m0_every_code_exact():
    codes = torch.arange(255, dtype=torch.uint8)
    vals = F.ue8m0_to_float(codes)
    assert torch.equal(vals, torch.tensor([2.0 ** (c - 127) for c in range(255)], dtype=torch.float32))
    if hasattr(torch, "float8_e8m0fnu"):
        assert torch.equal(vals, codes.view(torch.float8_e8m0fnu).float())
    with pytest.raises(ValueError, match="255"):
        F.ue8m0_to_float(torch.tensor([255], dtype=torch.uint8))


def test_ue8m0_ceil_exponent_at_and_around_powers_of_two():
    r = torch.tensor([1.0, 1.0000001, 0.9999999, 2.0 ** -130, 2.0 ** 127, 3.0, 0.0])
    assert F.ue8m0_ceil_exponent(r).tolist() == [0, 1, 0, -127, 127, 2, 0]


def test_pack_ue8m0_x4_roundtrip_high_bytes():
    codes = torch.tensor([[0, 127, 200, 254, 1, 2, 3, 255]], dtype=torch.uint8)
    packed = F.pack_ue8m0_x4(codes)
    assert packed.dtype == torch.int32 and packed.shape == (1, 2)
    assert int(packed[0, 0]) & 0xFF == 0 and (int(packed[0, 0]) >> 16) & 0xFF == 200
    assert torch.equal(F.unpack_ue8m0_x4(packed), codes)


def test_to_e4m3_saturates_instead_of_nan():
    x = torch.tensor([1000.0, -1e6, 448.0, 464.0])
    assert F.to_e4m3(x).float().tolist() == [448.0, -448.0, 448.0, 448.0]


@pytest.mark.parametrize("fn", [Q.quantize_e4m3_fp32_k128, Q.quantize_e4m3_ue8m0_k32_packed, Q.quantize_mxfp4,
                                Q.quantize_fp8_weight])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_input_raises_naming_tensor(fn, bad):
    x = torch.randn(128, 256)
    x[3, 7] = bad
    with pytest.raises(ValueError, match=r"my_tensor.*non-finite.*\[3, 7\]"):
        fn(x, name="my_tensor") if fn is not Q.quantize_fp8_weight else fn(x, (1, 128, 128), name="my_tensor")


def test_shape_errors_name_the_limit():
    with pytest.raises(ValueError, match="multiple of 128"):
        Q.quantize_e4m3_fp32_k128(torch.randn(2, 100), name="x")
    with pytest.raises(ValueError, match="multiple of 32"):
        Q.quantize_mxfp4(torch.randn(2, 48))
    with pytest.raises(ValueError, match="recipe"):
        Q.quantize_fp8_weight(torch.randn(128, 128), (1, 64, 64))


def test_all_zero_rows_defined_scales_and_zero_dequant():
    x = torch.zeros(2, 256)
    q, s = Q.quantize_e4m3_fp32_k128(x)
    assert torch.equal(s, torch.ones(2, 2)) and torch.equal(Q.dequantize_e4m3_fp32_k128(q, s), x)
    q, c = Q.quantize_e4m3_ue8m0(x)
    assert torch.equal(c, torch.full((2, 8), 127, dtype=torch.uint8))
    p, c = Q.quantize_mxfp4(x)
    assert torch.equal(c, torch.full((2, 8), 127, dtype=torch.uint8)) and not p.any()
    q, c = Q.quantize_fp8_weight(torch.zeros(128, 256))
    assert torch.equal(c, torch.full((1, 2), 127, dtype=torch.uint8))


def test_round_trip_error_bounds():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 512, generator=g) * torch.exp2(torch.randint(-20, 20, (64, 1), generator=g).float())
    # E4M3 relative error <= 2**-4 (3 mantissa bits, RNE) for normal values
    for q, deq in [(Q.quantize_e4m3_fp32_k128(x), Q.dequantize_e4m3_fp32_k128),
                   (Q.quantize_e4m3_ue8m0_k32_packed(x), Q.dequantize_e4m3_ue8m0_k32_packed)]:
        y = deq(*q)
        big = x.abs() > x.abs().amax(dim=1, keepdim=True) * 2.0 ** -6  # away from the subnormal range
        assert ((y - x).abs()[big] <= x.abs()[big] * 2.0 ** -4 + 1e-30).all()
    p, s = Q.quantize_mxfp4(x)
    y = Q.dequantize_mxfp4(p, s)
    step = (Q.dequantize_mxfp4(torch.full_like(p, 0x11), s))  # 0.5 * scale: the finest E2M1 step
    assert ((y - x).abs() <= 2 * step * 1.0001).all()         # E2M1 steps are <= 2 units of 0.5*scale


def test_exactly_representable_values_round_trip_bit_exact():
    codes = torch.randint(0, 16, (8, 64), dtype=torch.uint8)
    scales = torch.randint(100, 150, (8, 2), dtype=torch.uint8)
    w = Q.dequantize_mxfp4(F.fp4_pack(codes), scales)
    # a block whose amax is 6*2**e quantises back to exactly the same codes and scale
    w[:, 0] = 6.0 * F.ue8m0_to_float(scales[:, 0])
    w[:, 32] = -6.0 * F.ue8m0_to_float(scales[:, 1])
    p2, s2 = Q.quantize_mxfp4(w)
    assert torch.equal(Q.dequantize_mxfp4(p2, s2), w)


def test_maximum_magnitudes():
    x = torch.zeros(1, 128)
    x[0, 0] = 448.0
    q, s = Q.quantize_e4m3_fp32_k128(x)
    assert float(s[0, 0]) == 1.0 and float(q[0, 0].float()) == 448.0
    big = torch.full((1, 32), 2.0 ** 127 * 0.99)  # the largest magnitudes accepted stay finite
    p, c = Q.quantize_mxfp4(big)
    assert torch.isfinite(Q.dequantize_mxfp4(p, c)).all() and int(c[0, 0]) == 127 + 125
    q, c = Q.quantize_e4m3_ue8m0(big)
    assert torch.isfinite(Q.dequantize_e4m3_ue8m0(q, c)).all()
    with pytest.raises(ValueError, match=r"2\*\*127"):
        Q.quantize_mxfp4(torch.full((1, 32), 3.0e38), name="w")


def test_subnormals():
    # FP32 subnormal activations: scale clamps at 2**-126 (never subnormal), values still round sensibly
    x = torch.full((1, 128), 1e-40)
    q, s = Q.quantize_e4m3_fp32_k128(x)
    assert float(s[0, 0]) == 2.0 ** -126
    y = Q.dequantize_e4m3_fp32_k128(q, s)
    # documented consequence: the payload lands in E4M3 subnormals; error <= half a subnormal step * scale
    assert ((y - x).abs() <= 2.0 ** -10 * 2.0 ** -126).all()
    # E4M3 subnormal payloads: values 2**-9 .. 7*2**-9 relative to the block max survive exactly
    x = torch.zeros(1, 32)
    x[0, 0] = 448.0
    x[0, 1:8] = torch.arange(1, 8) * 2.0 ** -9
    q, c = Q.quantize_e4m3_ue8m0(x)
    assert torch.equal(Q.dequantize_e4m3_ue8m0(q, c), x)
    # E2M1 subnormal (0.5) survives
    w = torch.zeros(1, 32)
    w[0, 0], w[0, 1] = 6.0, 0.5
    assert torch.equal(Q.dequantize_mxfp4(*Q.quantize_mxfp4(w)), w)


@pytest.mark.parametrize("recipe", [(1, 1, 32), (1, 128, 128)])
def test_fp8_shared_weight_recipes(recipe):
    w = torch.randn(256, 384)
    q, c = Q.quantize_fp8_weight(w, recipe)
    assert c.shape == ((256, 12) if recipe == (1, 1, 32) else (2, 3))
    y = Q.dequantize_fp8_weight(q, c, recipe)
    assert torch.nn.functional.cosine_similarity(y.flatten(), w.flatten(), 0) > 0.999
    if recipe == (1, 128, 128):
        e = Q.expand_block_scales(c)
        assert e.shape == (256, 12) and int(e[200, 7]) == int(c[1, 1])
        amax = w[128:, 256:].abs().max() / 448
        assert 2.0 ** (int(c[1, 2]) - 127) >= amax > 2.0 ** (int(c[1, 2]) - 128)
