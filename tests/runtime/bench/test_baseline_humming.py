"""humming-fp8-mxfp4 baseline: registration, the unsupported path, our bookkeeping against humming's documented
layouts, and the P=1 / P=2 plumbing through a CPU stand-in for humming.

humming-kernels 0.1.20 itself does not run on a CPU (LayerConfig and every weight transform load libcuda /
launch JIT kernels), so the stand-in below decodes our humming-format tensors with the convention the wheel
documents (packed word bit 4i = element i, `include/humming/kernel/pack_weight.cuh`; E8M0 bias 127;
m-major scales [K/128, round_up(M, 4)]) and computes the GEMMs in FP32. The real kernels: the gpu test.
"""
import os
import re
import sys
import types

import pytest
import torch

from gcmoe_runtime.bench.baselines import humming as hb
from gcmoe_runtime.bench.baselines.torch_grouped import SWIGLU_ALPHA, SWIGLU_CLAMP, swiglu
from gcmoe_runtime.bench.impl import RankContext, make, registered
from gcmoe_runtime.bench.routing import Layout
from gcmoe_runtime.bench.shapes import ModelShape
from gcmoe_runtime.numerics.quant import dequantize_mxfp4, quantize_e4m3_fp32_k128, quantize_mxfp4

sys.path.insert(0, os.path.dirname(__file__))
from baseline_runs import captured_output, cos, one_share_output, two_rank_outputs  # noqa: E402

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # OCP MX E2M1 magnitudes; code bit 3 is the sign



# -- registration and the unsupported path ----------------------------------------------------------
def test_registered_like_the_torch_baselines():
    names = registered()
    assert "humming-fp8-mxfp4" in names and "humming-fp8-mxfp4@ARG" in names
    impl = make("humming-fp8-mxfp4")
    assert impl.name == "humming-fp8-mxfp4" and impl.m_major
    assert "MXFP4" in impl.precision and "E4M3" in impl.precision
    assert make("humming-fp8-mxfp4@row").name == "humming-fp8-mxfp4@row"
    with pytest.raises(ValueError, match="scale layout"):
        make("humming-fp8-mxfp4@bogus")


def test_unsupported_when_humming_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "humming", None)  # makes `import humming` raise ImportError
    impl = make("humming-fp8-mxfp4")
    why = impl.unsupported(TINY, Layout(1, 4), False)
    assert why.startswith("humming-kernels not importable: ModuleNotFoundError: import of humming halted")
    assert impl.describe()["version"].startswith("not importable")
    with pytest.raises(RuntimeError, match="not importable"):
        impl.load_model(TINY, Layout(1, 4), RankContext(0, 1, torch.device("cpu")), False)


def test_unsupported_reports_native_load_errors(monkeypatch):
    def boom(name):
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(hb.importlib, "import_module", boom)
    why = make("humming-fp8-mxfp4").unsupported(TINY, Layout(1, 4), False)
    assert why == "humming-kernels not importable: OSError: libcuda.so.1: cannot open shared object file"


def test_shared_experts_are_refused_with_a_reason(monkeypatch):
    monkeypatch.setattr(hb, "import_humming", lambda: (_fake_mods(), None))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    impl = make("humming-fp8-mxfp4")
    assert "routed experts only" in impl.unsupported(TINY, Layout(1, 4), True)
    assert impl.unsupported(TINY, Layout(1, 4), False) is None


# -- bookkeeping against humming's documented layouts ---------------------------------------------------
def _decode_humming_mxfp4(w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """int32 [G, N, K/8] + float8_e8m0fnu [G, N, K/32] -> FP32 [G, N, K] by the wheel's convention."""
    codes = torch.stack([(w >> (4 * i)) & 0xF for i in range(8)], dim=-1).reshape(*w.shape[:-1], -1)
    mag = torch.tensor(E2M1)[(codes & 7).long()]
    val = torch.where((codes & 8) != 0, -mag, mag)
    exp = s.view(torch.uint8).float() - 127.0
    return (val.reshape(*val.shape[:-1], -1, 32) * torch.exp2(exp)[..., None]).reshape(val.shape)


def test_mxfp4_views_match_hummings_mxfp4_schema():
    w = torch.randn(2, 128, 256) * 0.05
    q, s = quantize_mxfp4(w)
    t = hb.mxfp4_to_humming(q, s)
    # Mxfp4WeightSchema.get_tensors_attrs: weight uint8 (N, K/2), scale uint8 (N, K/32); _convert_humming views
    assert t["weight"].dtype == torch.int32 and tuple(t["weight"].shape) == (2, 128, 256 // 8)
    assert t["weight_scale"].dtype == torch.float8_e8m0fnu and tuple(t["weight_scale"].shape) == (2, 128, 256 // 32)
    assert torch.equal(t["weight"].view(torch.uint8), q) and torch.equal(t["weight_scale"].view(torch.uint8), s)
    assert torch.equal(_decode_humming_mxfp4(t["weight"], t["weight_scale"]), dequantize_mxfp4(q, s))
    with pytest.raises(ValueError):
        hb.mxfp4_to_humming(q, s[..., :-1])
    with pytest.raises(ValueError):
        hb.mxfp4_to_humming(q.float(), s)


def test_expert_layout_and_m_major_scales():
    assert hb.expert_layout(torch.tensor([3, 0, 2])).tolist() == [0, 3, 3, 5]
    assert hb.expert_layout(torch.tensor([3, 0, 2])).dtype == torch.int64
    sa = torch.arange(10, dtype=torch.float32).reshape(5, 2)
    mm = hb.m_major_scales(sa)
    assert tuple(mm.shape) == (2, 8) and mm.is_contiguous() and torch.equal(mm[:, :5], sa.t())
    assert tuple(hb.m_major_scales(sa[:4]).shape) == (2, 4)


def _c_to_torch(expr: str):
    """Evaluate humming's C activation expression (fminf/fmaxf/expf, float literals) on tensors a, b."""
    py = re.sub(r"(\d)f\b", r"\1", expr)
    env = {"fminf": lambda x, c: torch.clamp(x, max=c), "fmaxf": lambda x, c: torch.clamp(x, min=c),
           "expf": torch.exp}
    return lambda a, b: eval(py, env, {"a": a, "b": b})  # noqa: S307 - our own generated expression


def test_swiglu_expression_is_the_projects_swiglu():
    expr = hb.swiglu_c_expr(SWIGLU_ALPHA, SWIGLU_CLAMP)
    assert "a" in expr and "b" in expr and "10.0f" in expr
    g = torch.linspace(-30, 30, 241)
    a, b = torch.meshgrid(g, g, indexing="ij")
    got = _c_to_torch(expr)(a.flatten(), b.flatten())
    want = swiglu(torch.stack([a.flatten(), b.flatten()], 1), 1)[:, 0]
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


# -- plumbing through a stand-in for humming (CPU) -------------------------------------------------------
class _Cfg:
    def __init__(self, n, k):
        self.n, self.k = n, k

    def to_str(self):
        return f"fake n={self.n} k={self.k}"


def _fake_transform(tensors, shape_n, shape_k, weight_schema, input_schema, num_experts, torch_dtype, device):
    assert weight_schema == {"b_dtype": "e2m1", "bs_dtype": "e8m0", "weight_scale_group_size": 32}
    assert input_schema == {"a_dtype": "e4m3", "input_scale_group_size": 128}
    w, s = tensors["weight"], tensors["weight_scale"]
    assert tuple(w.shape) == (num_experts, shape_n, shape_k // 8) and tuple(s.shape) == (num_experts, shape_n, shape_k // 32)
    return _Cfg(shape_n, shape_k), {"weight": _decode_humming_mxfp4(w, s), "weight_scale": s}


def _scales_row_major(input_scale, rows, m_major):
    return input_scale[:, :rows].t() if m_major else input_scale


def _fake_forward(cfg, inputs, weight, weight_scale, weight_scale_2, input_scale, expert_layout, locks,
                  valid_shape_m, compute_config):
    import json

    m_major = json.loads(compute_config)["use_m_major_input_scale"]
    rows = inputs.shape[0]
    assert inputs.dtype == torch.float8_e4m3fn and valid_shape_m == rows
    assert expert_layout.dtype == torch.int64 and expert_layout.numel() == weight.shape[0] + 1
    assert int(expert_layout[0]) == 0 and int(expert_layout[-1]) == rows
    if m_major:
        assert tuple(input_scale.shape) == (cfg.k // 128, rows + (-rows % 4))
    x = inputs.float() * _scales_row_major(input_scale, rows, m_major).repeat_interleave(128, 1)
    y = torch.zeros(rows, cfg.n)
    for e in range(weight.shape[0]):
        lo, hi = int(expert_layout[e]), int(expert_layout[e + 1])
        y[lo:hi] = x[lo:hi] @ weight[e].t()
    return y.to(torch.bfloat16)


def _fake_process_input(cfg, h, activation_type, activation_impl, m_major_scale):
    assert activation_type == "binary_split"
    inter = h.shape[1] // 2
    act = _c_to_torch(activation_impl)(h[:, :inter].float(), h[:, inter:].float())
    q, s = quantize_e4m3_fp32_k128(act)
    return q, (hb.m_major_scales(s) if m_major_scale else s), None


def _fake_mods():
    ns = types.SimpleNamespace
    return {"": ns(__version__="0.1.20", dtypes=ns(float4e2m1="e2m1", float8e8m0="e8m0", float8e4m3="e4m3")),
            "schema": ns(HummingWeightSchema=lambda **kw: kw, HummingInputSchema=lambda **kw: kw),
            "transform": ns(prepare_and_transform_humming_tensors=_fake_transform),
            "kernel.humming": ns(HummingKernel=ns(prepare_kernels=lambda *a: None)),
            "forward": ns(humming_forward=_fake_forward, may_process_input=_fake_process_input)}


@pytest.mark.parametrize("scales", ["m-major", "row"])
@pytest.mark.parametrize("T", [1, 8])
def test_one_share_through_the_stand_in_matches_reference(monkeypatch, mxfp4_reference, scales, T):
    monkeypatch.setattr(hb, "import_humming", lambda: (_fake_mods(), None))
    impl = hb.HummingFp8Mxfp4(scales)
    out, pt = one_share_output(impl, TINY, T)
    assert impl.describe()["version"] == "0.1.20" and "version_warning" not in impl.describe()
    assert torch.isfinite(out).all()
    ref = mxfp4_reference(TINY, [pt], shared=False)
    assert cos(out, ref) > 0.995 and float((out - ref).norm() / ref.norm()) < 0.1


def _stand_in():
    return _fake_mods(), None


def test_two_ranks_through_the_stand_in_over_gloo(tmp_path, mxfp4_reference):
    patch = ("gcmoe_runtime.bench.baselines.humming", "import_humming", "test_baseline_humming:_stand_in")
    out, pts = two_rank_outputs(tmp_path, TINY, "humming-fp8-mxfp4", patch=patch)
    assert cos(out, mxfp4_reference(TINY, pts, shared=False)) > 0.995


# -- the real kernels --------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("scales", ["m-major", "row"])
@pytest.mark.parametrize("T", [1, 16])
def test_real_humming_captured_matches_reference(mxfp4_reference, scales, T):
    out, pt = captured_output(hb.HummingFp8Mxfp4(scales), TINY, T)
    assert torch.isfinite(out).all()
    assert cos(out, mxfp4_reference(TINY, [pt], shared=False, device="cuda:0")) > 0.99
