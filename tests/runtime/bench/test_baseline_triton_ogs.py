"""triton-ogs-bf16-mxfp4 baseline: registration, the unsupported path, our weight/routing bookkeeping against
triton_kernels' documented conventions, the P=1 / P=2 plumbing through a CPU stand-in for matmul_ogs, and the
export script on a synthetic Triton repository.

triton_kernels needs triton and a GPU, so the stand-in decodes the MXFP4 views we hand over with the convention
of its `_downcast_to_mxfp.py` (element 2i in the low nibble, E2M1 sign in bit 3, E8M0 bias 127, blocks of 32
along K = axis 1 of [G, K, N]) and computes the ragged GEMMs and its `compute_swiglu` in FP32 on CPU.
"""
import os
import subprocess
import sys
import types

import pytest
import torch

from gcmoe_runtime.bench.baselines import triton_ogs as tb
from gcmoe_runtime.bench.baselines.torch_grouped import SWIGLU_ALPHA, SWIGLU_CLAMP, swiglu
from gcmoe_runtime.bench.impl import RankContext, make, registered
from gcmoe_runtime.bench.routing import Layout, build_point
from gcmoe_runtime.bench.shapes import ModelShape
from gcmoe_runtime.numerics.quant import dequantize_mxfp4, quantize_mxfp4

sys.path.insert(0, os.path.dirname(__file__))
from baseline_runs import captured_output, cos, one_share_output, two_rank_outputs  # noqa: E402

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))



# -- registration and the unsupported path ----------------------------------------------------------
def test_registered_next_to_humming():
    names = registered()
    assert "triton-ogs-bf16-mxfp4" in names and "triton-ogs-bf16-mxfp4@ARG" in names
    impl = make("triton-ogs-bf16-mxfp4")
    assert impl.name == "triton-ogs-bf16-mxfp4" and impl.fused
    assert "BF16 act x MXFP4" in impl.precision and "[-9, 11]" in impl.precision
    assert make("triton-ogs-bf16-mxfp4@unfused").name == "triton-ogs-bf16-mxfp4@unfused"
    with pytest.raises(ValueError, match="mode"):
        make("triton-ogs-bf16-mxfp4@bogus")


def test_unsupported_when_triton_kernels_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_kernels", None)  # `import triton_kernels.x` raises ImportError
    impl = make("triton-ogs-bf16-mxfp4")
    why = impl.unsupported(TINY, Layout(1, 4), False)
    assert why.startswith("triton_kernels not importable: ModuleNotFoundError")
    assert "carry .peers (ci/prepare_triton_kernels.sh)" in why
    assert impl.describe()["source"].startswith("not importable")
    with pytest.raises(RuntimeError, match="not importable"):
        impl.load_model(TINY, Layout(1, 4), RankContext(0, 1, torch.device("cpu")), False)


def test_a_newer_api_is_named_not_guessed(monkeypatch):
    mods = _fake_mods()
    del mods["matmul_ogs"].RoutingData  # e.g. a tree after the matmul_ogs -> matmul refactor
    monkeypatch.setattr(tb.importlib, "import_module", lambda n: mods[n.split(".", 1)[1]])
    why = make("triton-ogs-bf16-mxfp4").unsupported(TINY, Layout(1, 4), False)
    assert "not the v3.6.0 triton_kernels API (missing matmul_ogs.RoutingData)" in why


def test_shared_experts_are_refused_with_a_reason(monkeypatch):
    monkeypatch.setattr(tb, "import_triton_kernels", lambda: (_fake_mods(), None))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    impl = make("triton-ogs-bf16-mxfp4")
    assert "routed experts only" in impl.unsupported(TINY, Layout(1, 4), True)
    assert impl.unsupported(TINY, Layout(1, 4), False) is None


# -- bookkeeping against triton_kernels' conventions -------------------------------------------------
def _decode_k_major(q, s):
    """uint8 [G, K/2, N] + uint8 [G, K/32, N] -> FP32 [G, K, N]: `evens | (odds << 4)` along K, bias 127."""
    codes = torch.stack([q & 0xF, q >> 4], dim=2).reshape(q.shape[0], -1, q.shape[2])
    mag = torch.tensor(E2M1)[(codes & 7).long()]
    val = torch.where((codes & 8) != 0, -mag, mag)
    return val * torch.exp2(s.float() - 127.0).repeat_interleave(32, dim=1)


def test_our_mxfp4_bytes_are_triton_kernels_bytes_k_major():
    w = torch.randn(3, 64, 256) * 0.05
    q, s = quantize_mxfp4(w)
    qk, sk = tb.k_major(q, s)
    assert tuple(qk.shape) == (3, 128, 64) and tuple(sk.shape) == (3, 8, 64)
    assert torch.equal(_decode_k_major(qk, sk), dequantize_mxfp4(q, s).transpose(1, 2))
    with pytest.raises(ValueError):
        tb.k_major(q, s[..., :-1])


def test_interleave_and_bias_reproduce_our_swiglu_inside_the_clamp_window():
    G, I = 2, 6
    rows = torch.arange(G * 2 * I).reshape(G, 2 * I, 1)
    il = tb.interleave_gate_up(rows)
    assert il[0, :, 0].tolist() == [0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11]
    b = tb.up_bias(G, I, "cpu")
    assert b.shape == (G, 2 * I) and b[0, 0::2].eq(0).all() and b[0, 1::2].eq(-1).all()
    h = torch.cat([torch.linspace(-30, 30, 241)[:, None].expand(-1, I), torch.rand(241, I) * 19 - 9], 1)
    ours = swiglu(h, I)
    theirs = _compute_swiglu(tb.interleave_gate_up(h.t()[None])[0].t() + b[0], SWIGLU_ALPHA, SWIGLU_CLAMP)
    torch.testing.assert_close(theirs, ours, rtol=1e-6, atol=1e-6)
    # outside [-9, 10] for up the two differ: the documented clamp-window caveat
    edge = torch.tensor([[1.0, -9.5]])
    assert not torch.allclose(swiglu(edge, 1), _compute_swiglu(torch.tensor([[1.0, -10.5]]), 1.0, 10.0))


def test_ragged_metadata_and_routing_data_come_from_the_plan(monkeypatch):
    seen = {}
    mods = _fake_mods(seen)
    monkeypatch.setattr(tb, "import_triton_kernels", lambda: (mods, None))
    impl = tb.TritonOgsBf16Mxfp4()
    impl.load_model(TINY, Layout(1, 4), RankContext(0, 1, torch.device("cpu")), False)
    pt = build_point(TINY, 8, Layout(1, 4), 0, seed=3)
    impl.prepare(pt).step()
    hist, n_rows = seen["meta"]
    assert hist.dtype == torch.int32 and torch.equal(hist, pt.plan.group_sizes.to(torch.int32))
    assert n_rows == pt.plan.assignments == int(hist.sum())
    rd = seen["rd"]
    assert rd.gate_scal is None and rd.n_expts_tot == TINY.experts // 4 and rd.n_expts_act == 1
    assert seen["scale_warps"] == tb.SCALE_WARPS and seen["mx_axis"] == {1}


# -- plumbing through a stand-in for matmul_ogs (CPU) --------------------------------------------------
def _compute_swiglu(h, alpha, limit):
    """triton_kernels swiglu_details/_swiglu.py compute_swiglu on interleaved (gate, up) columns, in torch."""
    gate = h[:, 0::2].float().clamp(max=limit)
    up = h[:, 1::2].float().clamp(-limit, limit)
    s = gate / (1 + torch.exp(-alpha * gate))
    return s * (up + 1)


class _Wrapped:
    def __init__(self, data, dtype=None, layout=None):
        self.data, self.dtype, self.layout = data, dtype, layout


def _fake_mods(seen=None):
    seen = {} if seen is None else seen
    ns = types.SimpleNamespace

    class RoutingData:
        def __init__(self, gate_scal, expt_hist, n_expts_tot, n_expts_act, expt_data=None):
            self.gate_scal, self.expt_hist, self.n_expts_tot = gate_scal, expt_hist, n_expts_tot
            self.n_expts_act, self.expt_data = n_expts_act, expt_data

    def make_meta(hist, n_rows):
        seen["meta"] = (hist, n_rows)
        return ("meta", hist.clone())

    def w_layout(mx_axis):
        seen.setdefault("mx_axis", set()).add(mx_axis)
        return "hopper-value", {}

    def s_layout(mx_axis, num_warps):
        seen["scale_warps"] = num_warps
        return "hopper-scale", {}

    def convert_layout(t, layout):
        assert t.data.dtype == torch.uint8
        return _Wrapped(t.data, t.dtype, layout)

    def matmul_ogs(x, w, bias, routing_data, gather_indx=None, scatter_indx=None, precision_config=None,
                   fused_activation=None):
        seen["rd"] = routing_data
        assert gather_indx is None and scatter_indx is None and x.dtype == torch.bfloat16
        assert w.dtype == "FP4" and w.layout == "hopper-value" and precision_config.weight_scale.layout == "hopper-scale"
        wf = _decode_k_major(w.data, precision_config.weight_scale.data)  # [G, K, N]
        offs = torch.nn.functional.pad(routing_data.expt_hist.long().cumsum(0), (1, 0))
        y = torch.zeros(x.shape[0], wf.shape[2])
        for e in range(wf.shape[0]):
            y[offs[e]:offs[e + 1]] = x[offs[e]:offs[e + 1]].float() @ wf[e]
            if bias is not None:
                y[offs[e]:offs[e + 1]] += bias[e]
        if fused_activation is not None:
            assert fused_activation.specs.name == "swiglu" and fused_activation.specs.reduction_n == 2
            y = _compute_swiglu(y, *fused_activation.fn_args)
        return y.to(torch.bfloat16)[None]  # it returns [1, M, N] for 2-D x

    mo = ns(matmul_ogs=matmul_ogs, RoutingData=RoutingData, __file__="fake/triton_kernels/matmul_ogs.py",
            PrecisionConfig=lambda weight_scale, flex_ctx: ns(weight_scale=weight_scale, flex_ctx=flex_ctx),
            FlexCtx=lambda rhs_data: ns(rhs_data=rhs_data),
            FnSpecs=lambda name, fn, args, reduction_n=1: ns(name=name, fn=fn, args=args, reduction_n=reduction_n),
            FusedActivation=lambda specs, fn_args: ns(specs=specs, fn_args=fn_args))
    return {"matmul_ogs": mo,
            "tensor": ns(make_ragged_tensor_metadata=make_meta, wrap_torch_tensor=lambda d, dtype=None: _Wrapped(d, dtype),
                         convert_layout=convert_layout, FP4="FP4"),
            "tensor_details.layout": ns(make_default_matmul_mxfp4_w_layout=w_layout,
                                        make_default_matmul_mxfp4_w_scale_layout=s_layout),
            "numerics": ns(InFlexData=lambda: "flex"), "swiglu": ns(swiglu_fn="swiglu_fn")}


@pytest.mark.parametrize("mode", ["fused", "unfused"])
@pytest.mark.parametrize("T", [1, 8])
def test_one_share_through_the_stand_in_matches_reference(monkeypatch, mxfp4_reference, mode, T):
    monkeypatch.setattr(tb, "import_triton_kernels", lambda: (_fake_mods(), None))
    impl = tb.TritonOgsBf16Mxfp4(mode)
    out, pt = one_share_output(impl, TINY, T)
    assert impl.describe()["source"] == "fake/triton_kernels/matmul_ogs.py"
    assert torch.isfinite(out).all()
    ref = mxfp4_reference(TINY, [pt], shared=False)
    assert cos(out, ref) > 0.999 and float((out - ref).norm() / ref.norm()) < 0.03


def _stand_in():
    return _fake_mods(), None


def test_two_ranks_through_the_stand_in_over_gloo(tmp_path, mxfp4_reference):
    patch = ("gcmoe_runtime.bench.baselines.triton_ogs", "import_triton_kernels", "test_baseline_triton_ogs:_stand_in")
    out, pts = two_rank_outputs(tmp_path, TINY, "triton-ogs-bf16-mxfp4", patch=patch)
    assert cos(out, mxfp4_reference(TINY, pts, shared=False)) > 0.999


# -- the export script ------------------------------------------------------------------------------
def _git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def test_prepare_script_exports_the_package_at_a_ref(tmp_path):
    repo = tmp_path / "triton"
    pkg = repo / "python" / "triton_kernels" / "triton_kernels"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "matmul_ogs.py").write_text("@dataclass\nclass RoutingData:\n    pass\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "v3.6.0 tree")
    _git(repo, "tag", "v3.6.0")
    (pkg / "matmul_ogs.py").write_text("# renamed to matmul\n")  # a later tree without the 3.6.0 API
    _git(repo, "commit", "-qam", "later")
    peers = tmp_path / "peers"
    env = dict(os.environ, GCMOE_PEERS_DIR=str(peers))
    script = os.path.join(ROOT, "ci", "prepare_triton_kernels.sh")
    r = subprocess.run(["bash", script, str(repo / ".git")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (peers / "triton_kernels" / "matmul_ogs.py").read_text().startswith("@dataclass")
    src = (peers / "triton_kernels.SOURCE").read_text()
    assert src.startswith("ref v3.6.0\ncommit ") and _git(repo, "rev-parse", "v3.6.0").strip() in src
    r = subprocess.run(["bash", script, str(repo), "HEAD"], env=env, capture_output=True, text=True)
    assert r.returncode == 1 and "does not define RoutingData" in r.stderr


# -- the real kernels --------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["fused", "unfused"])
@pytest.mark.parametrize("T", [1, 16])
def test_real_matmul_ogs_captured_matches_reference(mxfp4_reference, mode, T):
    out, pt = captured_output(tb.TritonOgsBf16Mxfp4(mode), TINY, T, warm=True)  # Triton JIT outside the capture
    assert torch.isfinite(out).all()
    assert cos(out, mxfp4_reference(TINY, [pt], shared=False, device="cuda:0")) > 0.99
