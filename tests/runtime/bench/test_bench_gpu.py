"""GPU timing path: captured baselines against the FP32 reference, window timing, ceilings."""
import os
import sys

import pytest
import torch

from gcmoe_runtime.bench.impl import RankContext, make
from gcmoe_runtime.bench.protocol import PAPER, L2Flusher, ProtocolConfig, capture_graph, measure_windows
from gcmoe_runtime.bench.routing import Layout, build_point
from gcmoe_runtime.bench.shapes import ModelShape

sys.path.insert(0, os.path.dirname(__file__))
from bench_reference import reference  # noqa: E402

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)


@pytest.mark.gpu
@pytest.mark.parametrize("name,min_cos", [("torch-bf16", 0.999), ("torch-fp8", 0.98)])
@pytest.mark.parametrize("T", [1, 16])
def test_captured_baseline_matches_reference(name, min_cos, T):
    dev = torch.device("cuda:0")
    impl = make(name)
    if impl.unsupported(TINY, Layout(1, 4), True):
        pytest.skip(impl.unsupported(TINY, Layout(1, 4), True))
    impl.load_model(TINY, Layout(1, 4), RankContext(0, 1, dev), True)
    pt = build_point(TINY, T, Layout(1, 4), 0, seed=5)
    prep = impl.prepare(pt)
    g = capture_graph(prep.step)
    prep.output.fill_(float("nan"))
    g.replay()
    g.replay()   # a replay is idempotent (accumulator re-zeroed inside the graph)
    torch.cuda.synchronize()
    ref = reference(TINY, [pt], shared=True, device="cuda:0")
    out = prep.output.float()
    assert torch.isfinite(out).all()
    assert float(torch.nn.functional.cosine_similarity(out.flatten(), ref.flatten(), dim=0)) > min_cos
    cfg = ProtocolConfig(replays_per_window=20, warmup_windows=2, measured_windows=5, l2_flush_bytes=64 << 20)
    wt = measure_windows(g.replay, cfg, L2Flusher(cfg.l2_flush_bytes, dev))
    assert len(wt.measured_us) == 5 and len(wt.warmup_us) == 2 and all(0 < t < 10_000 for t in wt.measured_us)


@pytest.mark.gpu
def test_read_bandwidth_is_plausible():
    from gcmoe_runtime.bench.floor import measure_read_bandwidth

    r = measure_read_bandwidth(torch.device("cuda:0"), nbytes=1 << 30, reps=5)
    assert 500 < r["gbps"] < 10_000, r


@pytest.mark.gpu
@pytest.mark.multigpu
def test_nvlink_roundtrip_is_plausible():
    from gcmoe_runtime.bench.floor import measure_nvlink_roundtrip

    r = measure_nvlink_roundtrip(0, 1, iters=2000)
    assert 0.2 < r["round_trip_us"] < 50, r


def quantized_reference(shape, pt, device, shared=True):
    """FP32 layer over exactly what gc-moe computes with: the seeded draw quantised to MXFP4 (routed) and FP8
    (shared, recipe 1x128x128), E4M3/FP32-K128 activations (P=1, rank 0, seed 0 of impl_gcmoe)."""
    from gcmoe_runtime.bench.baselines.torch_grouped import _weights, swiglu
    from gcmoe_runtime.numerics.quant import (dequantize_e4m3_fp32_k128, dequantize_fp8_weight, dequantize_mxfp4,
                                              quantize_e4m3_fp32_k128, quantize_fp8_weight, quantize_mxfp4)

    dev = torch.device(device)
    w1, w2 = _weights(shape, shape.experts, shape.intermediate, 1000, dev)
    w1 = torch.stack([dequantize_mxfp4(*quantize_mxfp4(w)) for w in w1])
    w2 = torch.stack([dequantize_mxfp4(*quantize_mxfp4(w)) for w in w2])
    x = dequantize_e4m3_fp32_k128(*quantize_e4m3_fp32_k128(pt.activations(dev)))
    ref = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(shape.top_k):
            e = int(pt.topk_ids[t, j])
            ref[t] += pt.topk_weights[t, j] * (w2[e] @ swiglu((w1[e] @ x[t])[None], shape.intermediate)[0])
    if not shared:
        return ref
    s1, s2 = _weights(shape, 1, shape.shared_experts * shape.shared_inter, 5000, dev)
    s1 = dequantize_fp8_weight(*quantize_fp8_weight(s1[0]))
    s2 = dequantize_fp8_weight(*quantize_fp8_weight(s2[0]))
    return ref + (s2 @ swiglu(x @ s1.t(), s1.shape[0] // 2).t()).t()


def _check_gcmoe_mode(name, T, shared):
    """One gc-moe mode (bench/impl_gcmoe.py) captured like the harness does, P=1, against the FP32 reference of the
    same seeded weights; skipped with the reason when no bundle in GCMOE_BENCH_BUNDLES covers test-tiny."""
    dev = torch.device("cuda:0")
    lay = Layout(1, 1)
    impl = make(name)
    why = impl.unsupported(TINY, lay, shared)
    if why:
        pytest.skip(why)
    impl.load_model(TINY, lay, RankContext(0, 1, dev, None, 0), shared)
    pt = build_point(TINY, T, lay, 0, seed=5)
    prep = impl.prepare(pt)
    try:
        g = capture_graph(prep.step)  # its eager warm-up steps run the layer too
        prep.output.fill_(float("nan"))
        g.replay()
        g.replay()
        torch.cuda.synchronize()
    finally:
        prep.close()  # a device-side wait that trapped raises here with its record (code, expected, observed)
    out = prep.output.float()
    assert torch.isfinite(out).all()
    cos = torch.nn.functional.cosine_similarity
    assert float(cos(out.flatten(), quantized_reference(TINY, pt, "cuda:0", shared).flatten(), dim=0)) > 0.995
    assert float(cos(out.flatten(), reference(TINY, [pt], shared=shared, device="cuda:0").flatten(), dim=0)) > 0.97
    d = impl.describe()
    assert d["partition"]["green_contexts"] == (name in ("gc-moe", "gc-moe-nooverlap"))
    impl.unload_model()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gc-moe", "gc-moe-nooverlap", "gc-moe-serial"])
@pytest.mark.parametrize("T", [1, 16])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "routed"])
def test_captured_gcmoe_modes_match_reference(name, T, shared):
    _check_gcmoe_mode(name, T, shared)


#: exit status of this file run as a script when baseline (b) starved role1 (trap code 12), and when it skipped
_STARVED, _SKIPPED = 3, 4


@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 16])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "routed"])
def test_streams_baseline_matches_reference_or_starves(T, shared):
    """Baseline (b) (``gc-moe-streams``: no green contexts) in its own process, since its documented failure ends
    the CUDA context: role2's persistent CTAs may hold every SM before role1's CTAs get one, and role2's wait for
    role1's receive counts then traps (code 12; session 57: 3 of 6 runs at routed T = 1 on an H100, with and without
    the P = 1 graph's role1 -> role3 edge). That outcome is an expected failure (the paper's straw man (i)); any other
    trap or a wrong output fails."""
    import subprocess

    r = subprocess.run([sys.executable, os.path.abspath(__file__), str(T), str(int(shared))], capture_output=True,
                       text=True, timeout=300)
    tail = (r.stdout + r.stderr)[-4000:]
    if r.returncode == _SKIPPED:
        pytest.skip(tail.strip().splitlines()[-1])
    if r.returncode == _STARVED:
        pytest.xfail("baseline (b): role1 found no SM beside role2's persistent CTAs (trap code 12)")
    assert r.returncode == 0, tail


@pytest.mark.gpu
@pytest.mark.parametrize("flush", ["write", "read", "layers"])
def test_cold_timeline_runs_with_each_flush(flush, tmp_path):
    """``bench timeline --cold --flush F`` on the test model (P = 1, routed, T = 1): every recorded replay has the role
    kernels, the header names the flush; the read flusher leaves its buffer as it found it; ``layers`` records layer
    0's replays only (as many as asked, the other layers' kernels between them)."""
    from gcmoe_runtime.bench import timeline

    if make("gc-moe").unsupported(TINY, Layout(1, 1), False):
        pytest.skip(make("gc-moe").unsupported(TINY, Layout(1, 1), False))
    res = timeline.run([TINY], [1], False, 3, tmp_path, "test", cold=True, flush=flush, other_layers=2)
    assert res["cold"] is True and res["flush"] == flush
    assert 4 * res["l2_bytes"] <= PAPER.l2_flush_bytes, res["l2_bytes"]  # the flush buffer is >= 4x the L2
    s = res["models"][0]["points"][0]["summary"]
    assert s["replays"] == 3 and {"role1", "role2", "role3"} <= set(s["roles"]) and s["span_us"] > 0
    assert (tmp_path / "timeline.json").is_file()
    if flush == "layers":
        assert res["other_layers"] == 2
        return
    f = L2Flusher(64 << 20, torch.device("cuda:0"), flush)
    f.buf.fill_(3)
    f()
    torch.cuda.synchronize()
    assert int(f.buf.min()) == (0 if flush == "write" else 3)


@pytest.mark.gpu
@pytest.mark.parametrize("role3_after", ["shipped", "all"])
def test_layers_graph_times_both_row_kinds(role3_after, tmp_path):
    """``bench layers`` on the test model (P = 1, routed, T = 1 / 16, two layers): both row kinds timed for every point,
    the report written, no device-side wait trapped (``measure_point`` closes every prepared call); ``all`` restores the
    role1 -> role3 edge for the process and ``shipped`` leaves the runtime's P = 1 rule (no such edge)."""
    from gcmoe_runtime import graph
    from gcmoe_runtime.bench import model_step

    if make("gc-moe").unsupported(TINY, Layout(1, 1), False):
        pytest.skip(make("gc-moe").unsupported(TINY, Layout(1, 1), False))
    rule = graph.role3_waits_for_role1
    try:
        res = model_step.run(TINY, [1, 16], False, 2, ["gc-moe"], 3, 2, tmp_path, "test", role3_after=role3_after)
        assert graph.role3_waits_for_role1(1) is (role3_after == "all")
    finally:
        graph.role3_waits_for_role1 = rule
        graph.clear_cache()
    assert [r["tokens"] for r in res["rows"]] == [1, 16]
    for r in res["rows"]:
        assert r["one_us"] > 0 and r["all_us"] > 0 and len(r["all_runs"]) == 2
    assert (tmp_path / "layers.json").is_file() and (tmp_path / "layers.md").is_file()


if __name__ == "__main__":  # test_streams_baseline_matches_reference_or_starves's child: T, shared (0 / 1)
    from gcmoe_runtime.workspace.trap import DeviceTimeoutError

    try:
        _check_gcmoe_mode("gc-moe-streams", int(sys.argv[1]), sys.argv[2] == "1")
    except pytest.skip.Exception as e:
        print(f"skipped: {e}")
        sys.exit(_SKIPPED)
    except DeviceTimeoutError as e:
        print(e)
        sys.exit(_STARVED if e.code == 12 else 1)
