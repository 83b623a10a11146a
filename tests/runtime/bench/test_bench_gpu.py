"""GPU timing path: captured baselines against the FP32 reference, window timing, ceilings."""
import os
import sys

import pytest
import torch

from gcmoe_runtime.bench.impl import RankContext, make
from gcmoe_runtime.bench.protocol import L2Flusher, ProtocolConfig, capture_graph, measure_windows
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


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gc-moe", "gc-moe-nooverlap", "gc-moe-serial", "gc-moe-streams"])
@pytest.mark.parametrize("T", [1, 16])
def test_captured_gcmoe_modes_match_reference(name, T):
    """Each gc-moe mode (bench/impl_gcmoe.py) captured like the harness does, P=1, against the FP32 reference of
    the same seeded weights; skipped with the reason when no bundle in GCMOE_BENCH_BUNDLES covers test-tiny."""
    dev = torch.device("cuda:0")
    lay = Layout(1, 1)
    impl = make(name)
    why = impl.unsupported(TINY, lay, True)
    if why:
        pytest.skip(why)
    impl.load_model(TINY, lay, RankContext(0, 1, dev, None, 0), True)
    pt = build_point(TINY, T, lay, 0, seed=5)
    prep = impl.prepare(pt)
    g = capture_graph(prep.step)
    prep.output.fill_(float("nan"))
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    prep.close()  # raises if a device-side wait trapped
    ref = reference(TINY, [pt], shared=True, device="cuda:0")
    out = prep.output.float()
    assert torch.isfinite(out).all()
    assert float(torch.nn.functional.cosine_similarity(out.flatten(), ref.flatten(), dim=0)) > 0.98
    d = impl.describe()
    assert d["partition"]["green_contexts"] == name in ("gc-moe", "gc-moe-nooverlap")
    impl.unload_model()
