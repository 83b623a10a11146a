"""FP32 quantised reference layer (Eq. 1 as the operator computes it) and the BF16 ideal reference."""
import pytest
import torch

from gcmoe_runtime.numerics.quant import (
    dequantize_e4m3_fp32_k128, dequantize_e4m3_ue8m0, dequantize_mxfp4, quantize_e4m3_fp32_k128,
    quantize_e4m3_ue8m0, quantize_e4m3_ue8m0_k32_packed, quantize_fp8_weight, quantize_mxfp4,
)
from gcmoe_runtime.numerics.reference import (
    INTERMEDIATE_SCALE_GROUP, FloatExperts, RoutedWeights, SharedWeights, SwiGLUSpec, bf16_reference_moe_forward,
    combine_partials, reference_moe_forward, swiglu,
)

H, I, E, K = 256, 128, 6, 3


def _layer(seed=0, shared=True):
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(E, 2 * I, H, generator=g) / H ** 0.5
    w2 = torch.randn(E, H, I, generator=g) / I ** 0.5
    routed = RoutedWeights(*quantize_mxfp4(w1), *quantize_mxfp4(w2))
    sh = None
    if shared:
        s1 = torch.randn(2 * I, H, generator=g) / H ** 0.5
        s2 = torch.randn(H, I, generator=g) / I ** 0.5
        sh = SharedWeights(*quantize_fp8_weight(s1), *quantize_fp8_weight(s2), recipe=(1, 128, 128))
    return routed, sh, (w1, w2)


def _inputs(t, seed=1, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(t, H, generator=g) * scale).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(t)]) if t else torch.zeros(0, K, dtype=torch.long)
    w = torch.softmax(torch.randn(t, K, generator=g), -1)
    return x, idx, w


def _manual(x_q, x_s, idx, g, routed, shared, spec):
    """Independent per-token, per-slot re-implementation in FP64 of the documented steps."""
    x = dequantize_e4m3_fp32_k128(x_q, x_s).double()
    t = x.shape[0]
    lanes = []
    def expert(xr, w1, w2, gw):
        h = (xr @ w1.double().t()).float().to(torch.bfloat16).float()
        a = swiglu(h[None], spec)[0] * gw
        grp = INTERMEDIATE_SCALE_GROUP["fp32_k128"]
        q, c = quantize_e4m3_ue8m0(a[None], grp)
        return (dequantize_e4m3_ue8m0(q, c, grp)[0].double() @ w2.double().t()).float().to(torch.bfloat16)
    out = torch.zeros(t, H, dtype=torch.bfloat16)
    for r in range(t):
        acc = torch.zeros(H, dtype=torch.float32)
        for j in range(idx.shape[1]):
            e = int(idx[r, j])
            if e < 0:
                continue
            w1, w2 = dequantize_mxfp4(routed.w1[e], routed.w1_scale[e]), dequantize_mxfp4(routed.w2[e], routed.w2_scale[e])
            acc += expert(x[r], w1, w2, float(g[r, j])).float()
        if shared is not None:
            s1, s2 = shared.fp32()
            acc += expert(x[r], s1, s2, 1.0).float()
        out[r] = acc.to(torch.bfloat16)
    return out


def _pdiff(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    return float(1 - 2 * (a @ b) / (a @ a + b @ b))


@pytest.mark.parametrize("shared", [False, True])
def test_reference_matches_independent_fp64_reimplementation(shared):
    routed, sh, _ = _layer(shared=shared)
    x, idx, w = _inputs(12)
    xq, xs = quantize_e4m3_fp32_k128(x)
    spec = SwiGLUSpec()
    y = reference_moe_forward(xq, xs, idx, w, routed, sh, spec=spec)
    ref = _manual(xq, xs, idx, w, routed, sh, spec)
    assert y.dtype == torch.bfloat16 and y.shape == (12, H)
    assert _pdiff(y, ref) < 1e-5
    assert (y.float() - ref.float()).abs().max() <= 2 ** -6 * ref.float().abs().max()


def test_swiglu_clamp_semantics():
    spec = SwiGLUSpec(alpha=1.0, clamp=10.0)
    h = torch.tensor([[20.0, -20.0, 1.0, 50.0, -50.0, -3.0]])  # gate | up  (I = 3)
    got = swiglu(h, spec)[0]
    gate = torch.tensor([10.0, -20.0, 1.0])   # gate: upper clamp only
    up = torch.tensor([10.0, -10.0, -3.0])    # up: both sides
    assert torch.allclose(got, gate * torch.sigmoid(gate) * up)
    no = swiglu(h, SwiGLUSpec(alpha=1.702, clamp=None))[0]
    g2 = torch.tensor([20.0, -20.0, 1.0])
    assert torch.allclose(no, g2 * torch.sigmoid(1.702 * g2) * torch.tensor([50.0, -50.0, -3.0]))


def test_combine_is_fp32_in_slot_order():
    p = torch.tensor([[[2.0 ** 24], [1.0], [-(2.0 ** 24)]]], dtype=torch.bfloat16)  # [T=1, lanes=3, H=1]
    assert float(combine_partials(p)) == 0.0                    # (2^24 + 1) rounds to 2^24 in FP32, then 0
    assert float(combine_partials(p[:, [0, 2, 1]])) == 1.0      # another order gives 1


def test_partials_masked_slots_and_shared_lane():
    routed, sh, _ = _layer()
    x, idx, w = _inputs(5)
    idx[1, 2] = -1
    idx[3] = -1
    xq, xs = quantize_e4m3_fp32_k128(x)
    y, parts = reference_moe_forward(xq, xs, idx, w, routed, sh, return_partials=True)
    assert parts.shape == (5, K + 1, H)
    assert not parts[1, 2].float().any() and not parts[3, :K].float().any()
    assert torch.equal(y, combine_partials(parts))
    y_noshared = reference_moe_forward(xq, xs, idx, w, routed, None)
    assert torch.equal(y[3], parts[3, K]) and not y_noshared[3].float().any()
    # the shared lane equals a lone shared-expert computation with routing weight 1
    s_only = reference_moe_forward(xq, xs, torch.full((5, 1), -1), torch.zeros(5, 1), routed, sh, return_partials=True)[1]
    assert torch.equal(s_only[:, 1], parts[:, K])


def test_routing_weight_applied_before_requantisation():
    routed, _, _ = _layer(shared=False)
    x, _, _ = _inputs(4)
    idx = torch.zeros(4, 1, dtype=torch.long)
    xq, xs = quantize_e4m3_fp32_k128(x)
    g = torch.full((4, 1), 0.3)
    _, p = reference_moe_forward(xq, xs, idx, g, routed, None, return_partials=True)
    _, p1 = reference_moe_forward(xq, xs, idx, torch.ones(4, 1), routed, None, return_partials=True)
    # weight in the W1 stage: 0.3 * act is requantised; scaling after W2 would be a different number
    w1, w2 = routed.expert_fp32(0)
    xd = dequantize_e4m3_fp32_k128(xq, xs)
    a = swiglu((xd @ w1.t()).to(torch.bfloat16).float(), SwiGLUSpec()) * 0.3
    q, c = quantize_e4m3_ue8m0(a, 128)
    want = (dequantize_e4m3_ue8m0(q, c, 128) @ w2.t()).to(torch.bfloat16)
    assert torch.equal(p[:, 0], want)
    assert not torch.equal(p[:, 0], (p1[:, 0].float() * 0.3).to(torch.bfloat16))


def test_intermediate_scale_group_follows_the_activation_recipe():
    """Step 4: Hopper (fp32_k128) requantises the intermediate per 128 along I, Blackwell (ue8m0_k32) per 32.
    A power-of-two scale only shifts E4M3's exponent, so the two groups round alike unless a value falls below
    E4M3's normal range (2**-6) under its group's scale: here I-column 0 is ~2**16 x the others, which then turn
    subnormal per 128 but keep their precision in the three groups per 32 without column 0."""
    assert INTERMEDIATE_SCALE_GROUP == {"fp32_k128": 128, "ue8m0_k32": 32}
    q1, _, _ = _layer(shared=False)
    w1, w2 = q1.expert_fp32(0)
    w1 = w1.clone()
    w1[1:I] /= 256.0  # gate and up of every I-column but 0: after SwiGLU ~2**-16 of column 0
    w1[I + 1:] /= 256.0
    routed = FloatExperts(w1[None], w2[None])
    x, _, _ = _inputs(4)
    idx = torch.zeros(4, 1, dtype=torch.long)
    g = torch.ones(4, 1)
    xq, xs = quantize_e4m3_fp32_k128(x)
    xd = dequantize_e4m3_fp32_k128(xq, xs)
    a = swiglu((xd @ w1.t()).to(torch.bfloat16).float(), SwiGLUSpec())
    wants = {}
    for group in (32, 128):
        q, c = quantize_e4m3_ue8m0(a, group)
        wants[group] = (dequantize_e4m3_ue8m0(q, c, group) @ w2.t()).to(torch.bfloat16)
    assert not torch.equal(wants[32], wants[128]), "input does not tell the groups apart"
    _, p = reference_moe_forward(xq, xs, idx, g, routed, None, return_partials=True)
    assert torch.equal(p[:, 0], wants[128])


def test_empty_tokens_and_blackwell_activation_recipe():
    routed, sh, _ = _layer()
    x, idx, w = _inputs(0)
    xq, xs = quantize_e4m3_fp32_k128(x)
    y = reference_moe_forward(xq, xs, idx, w, routed, sh)
    assert y.shape == (0, H) and y.dtype == torch.bfloat16
    x, idx, w = _inputs(6)
    yb = reference_moe_forward(*quantize_e4m3_ue8m0_k32_packed(x), idx, w, routed, sh, act_recipe="ue8m0_k32")
    yh = reference_moe_forward(*quantize_e4m3_fp32_k128(x), idx, w, routed, sh)
    assert 0 < _pdiff(yb, yh) < 5e-3  # two activation quantisations of the same x
    with pytest.raises(ValueError, match="activation recipe"):
        reference_moe_forward(*quantize_e4m3_fp32_k128(x), idx, w, routed, sh, act_recipe="nvfp4")


def test_routing_validation_errors():
    routed, _, _ = _layer(shared=False)
    x, idx, w = _inputs(3)
    xq, xs = quantize_e4m3_fp32_k128(x)
    with pytest.raises(ValueError, match="num_experts"):
        reference_moe_forward(xq, xs, idx + E, w, routed)
    with pytest.raises(ValueError, match=r"\[T=3, k\]"):
        reference_moe_forward(xq, xs, idx[:2], w[:2], routed)
    w[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        reference_moe_forward(xq, xs, idx, w, routed)


def test_bf16_reference_close_to_quantised_reference():
    routed, sh, (w1, w2) = _layer()
    x, idx, w = _inputs(16)
    yq = reference_moe_forward(*quantize_e4m3_fp32_k128(x), idx, w, routed, sh)
    s1, s2 = sh.fp32()
    # on the dequantised weights: only FP8 activation/intermediate rounding separates them
    yd = bf16_reference_moe_forward(x, idx, w, routed, s1, s2)
    assert _pdiff(yq, yd) < 5e-3
    # on the original weights: the FP4 weight error adds on top
    yo = bf16_reference_moe_forward(x, idx, w, FloatExperts(w1, w2), s1, s2)
    assert _pdiff(yq, yo) > _pdiff(yq, yd)
    assert _pdiff(yq, yo) < 5e-2


@pytest.mark.gpu
def test_reference_is_device_agnostic_on_gpu():
    routed, sh, _ = _layer()
    x, idx, w = _inputs(16)
    xq, xs = quantize_e4m3_fp32_k128(x)
    y_cpu = reference_moe_forward(xq, xs, idx, w, routed, sh)
    mv = lambda t: t.cuda()  # noqa: E731
    r = RoutedWeights(mv(routed.w1), mv(routed.w1_scale), mv(routed.w2), mv(routed.w2_scale))
    s = SharedWeights(mv(sh.w1), mv(sh.w1_scale), mv(sh.w2), mv(sh.w2_scale), sh.recipe)
    y_gpu = reference_moe_forward(mv(xq), mv(xs), mv(idx), mv(w), r, s)
    assert y_gpu.is_cuda and _pdiff(y_gpu.cpu(), y_cpu) < 1e-5
