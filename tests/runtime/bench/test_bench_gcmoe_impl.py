"""impl_gcmoe on the CPU: names/modes, bundle selection, skip reasons, and the whole harness (sweep, P=1 and
P=2 over gloo, ablation) with the operator call faked (fake_gcmoe). Checks plumbing only: no timings."""
import json
import os
import sys

import pytest
import torch

pytest.importorskip("cuda.bindings")
sys.path.insert(0, os.path.dirname(__file__))

import fake_gcmoe  # noqa: E402
from fake_gcmoe import fake_bundle_file  # noqa: E402

from gcmoe_runtime.bench import impl_gcmoe  # noqa: E402
from gcmoe_runtime.bench.__main__ import main  # noqa: E402
from gcmoe_runtime.bench.impl import RankContext, make  # noqa: E402
from gcmoe_runtime.bench.protocol import ProtocolConfig  # noqa: E402
from gcmoe_runtime.bench.report import write_all  # noqa: E402
from gcmoe_runtime.bench.routing import Layout, build_point  # noqa: E402
from gcmoe_runtime.bench.runner import SweepConfig, run_sweep  # noqa: E402
from gcmoe_runtime.bench.shapes import ModelShape  # noqa: E402
from gcmoe_runtime.numerics.quant import dequantize_e4m3_fp32_k128, quantize_e4m3_fp32_k128  # noqa: E402

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)
FAST = ProtocolConfig(replays_per_window=1, warmup_windows=1, measured_windows=2)
F = "fake_gcmoe:"


@pytest.fixture
def bundles(tmp_path, monkeypatch):
    p = fake_bundle_file(tmp_path / "tiny.gcmoe", TINY, ranks=(1, 2), splits=[(4, 128), (12, 120)])
    monkeypatch.setenv(impl_gcmoe.ENV_BUNDLES, str(tmp_path))
    impl_gcmoe._weights_cache.clear()
    return p


def test_names_modes_and_requests():
    assert {n: (make(n).green_contexts, make(n).overlap) for n in impl_gcmoe.MODES} == {
        "gc-moe": (True, True), "gc-moe-nooverlap": (True, False),
        "gc-moe-serial": (False, False), "gc-moe-streams": (False, True)}
    i = make("gc-moe-serial@16")
    assert (i.name, i.request, i.mode) == ("gc-moe-serial@16", 16, "gc-moe-serial")
    for bad, msg in (("gc-moe@x", "expected an integer"), ("gc-moe@0", ">= 1"), ("gc-moe@", "empty argument")):
        with pytest.raises(ValueError, match=msg):
            make(bad)
    assert make(F + "gc_moe@8").name == "gc-moe@8"
    with pytest.raises(ValueError, match="GCMOE_BENCH_TIMEOUT_S"):
        impl_gcmoe.GcMoeBench("gc-moe", env={"GCMOE_BENCH_TIMEOUT_S": "-1"}).describe()


def test_bundle_selection_and_skip_reasons(bundles, monkeypatch):
    assert impl_gcmoe.find_bundle(TINY, 2, True, (12, 120), [bundles])[0] == bundles
    path, why = impl_gcmoe.find_bundle(TINY, 2, True, (20, 112), [bundles])
    assert path is None and "built splits: [(4, 128), (12, 120)]" in why[0]
    path, why = impl_gcmoe.find_bundle(ModelShape("other", 512, 512, 16, 4), 1, False, (4, 128), [bundles])
    assert path is None and "no role2" in why[0] and "intermediate=512" in why[0]
    one = Layout(1, 1)
    assert make(F + "gc_moe@8").unsupported(TINY, one, True) is None             # 12/120 built
    r = make(F + "gc_moe@16").unsupported(TINY, one, True)                        # 20/112 not built
    assert "split 20/112" in r and "built splits" in r
    assert "compute_sms" in make(F + "gc_moe@120").unsupported(TINY, one, True)   # split fails validation
    assert "world == ep" in make(F + "gc_moe").unsupported(TINY, Layout(1, 4), True)
    monkeypatch.setenv(impl_gcmoe.ENV_BUNDLES, str(bundles.parent / "nothing-here"))
    assert "nothing-here: no such file" in make(F + "gc_moe").unsupported(TINY, one, True)
    if not torch.cuda.is_available():
        assert "CUDA device" in make("gc-moe").unsupported(TINY, one, True)


def test_prepare_stages_own_rows_and_routing(bundles):
    impl = make(F + "gc_moe_serial@8")
    lay = Layout(1, 1)
    impl.load_model(TINY, lay, RankContext(0, 1, torch.device("cpu"), None, 3), shared=True)
    d = impl.describe()
    assert d["partition"]["dispatch_sms"] == 12 and d["partition"]["compute_sms"] == 120
    assert d["partition"]["green_contexts"] is False and d["overlap"] is False and d["bundle"] == str(bundles)
    buf = impl._m["buf"]
    assert buf.timeout_ns == 10 * 10**9 and buf.shared_experts and buf.overlap is False
    pt = build_point(TINY, 8, lay, 0, 3)
    prep = impl.prepare(pt)
    prep.step()
    prep.close()
    assert buf.calls == 1 and buf.checked == 1
    assert torch.equal(buf.topk_idx[:8], pt.topk_ids[:8].to(torch.int32))
    xq, xs = quantize_e4m3_fp32_k128(pt.activations("cpu"))
    assert torch.equal(prep.output, dequantize_e4m3_fp32_k128(xq, xs).to(torch.bfloat16))
    assert prep.info["dispatch_sms"] == 12 and prep.info["mode"] == "gc-moe-serial"
    # the transformed weights are reused by the next mode of the same model (the ablation loads it 14 times)
    w1 = impl._m["w1"]
    other = make(F + "gc_moe@4")
    other.load_model(TINY, lay, RankContext(0, 1, torch.device("cpu"), None, 3), shared=True)
    assert other._m["w1"] is w1 and other._m["buf"].partition.green_contexts


@pytest.mark.parametrize("world", [1, 2])
def test_cpu_dry_run_sweep_with_fake_operator(bundles, tmp_path, world):
    impls = [F + "gc_moe", F + "gc_moe_serial", F + "gc_moe_streams", "torch-bf16"]
    cfg = SweepConfig(models=[TINY], impls=impls, layout=Layout(world, world), tokens=(1, 4), shared=True,
                      protocol=FAST, device="cpu", command="test")
    res = run_sweep(cfg)
    m = res["models"][0]
    for pt in m["points"]:
        for n in ("gc-moe", "gc-moe-serial", "gc-moe-streams", "torch-bf16"):
            assert pt["impls"][n]["status"] == "ok", (n, pt["impls"][n])
            assert all(r["output_finite"] for r in pt["impls"][n]["per_rank"])
    parts = [d["partition"] for d in m["loaded"]["gc-moe"]]
    assert len(parts) == world and all((p["dispatch_sms"], p["compute_sms"]) == (4, 128) for p in parts)
    assert [d["partition"]["green_contexts"] for d in m["loaded"]["gc-moe-streams"]] == [False] * world
    files = write_all(res, tmp_path / "out")
    md = (tmp_path / "out" / "results.md").read_text()
    assert "## Targets (issue 7)" in md and "## Definitions" in md and "stream_fraction" in md
    assert "driver-aligned partition 4 dispatch / 128 compute SMs (request 4" in md
    saved = json.loads(files[0].read_text())
    t = saved["targets"][0]
    assert t["mean_speedup_over_a"]["status"] in ("met", "missed") and t["mean_speedup_over_a"]["points"] == 2
    assert t["weight_streaming_t256"]["status"] == "not evaluated"  # T=256 not in this sweep


def test_cpu_ablation_cli_reports_every_request(bundles, tmp_path, capsys):
    out = tmp_path / "abl"
    rc = main(["ablation", "--model", "test-tiny", "--cpu-dry-run", "--shared", "--tokens", "1,2",
               "--requests", "4,8,16,120", "--on", F + "gc_moe", "--off", F + "gc_moe_nooverlap",
               "--replays", "1", "--warmup", "0", "--measured", "2", "--out", str(out)])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["ablation"]["requests"] == [4, 8, 16, 120] and "targets" not in res
    assert res["ablation"]["reference"] == "gc-moe@4" and res["ablation"]["off"][1] == "gc-moe-nooverlap@8"
    pts = res["models"][0]["points"]
    assert all(pt["impls"][n]["status"] == "ok" for pt in pts for n in ("gc-moe@4", "gc-moe@8", "gc-moe-nooverlap@8"))
    assert "split 20/112" in pts[0]["impls"]["gc-moe@16"]["reason"]
    assert "compute_sms" in pts[0]["impls"]["gc-moe-nooverlap@120"]["reason"]
    md = (out / "results.md").read_text()
    assert "| 8 | 12/120 | on |" in md and "| 8 | 12/120 | off |" in md and "| 16 | 20/112 (not run) | on | skipped" in md
    assert "| 120 | invalid split | off | skipped" in md
    assert "mean ratio to gc-moe@4" in md and "`gc-moe@120` skipped at T=1,2" in md


def test_floor_json_is_reused_and_feeds_the_stream_fraction(bundles, tmp_path):
    fl = tmp_path / "floor.json"
    fl.write_text(json.dumps({"read_bandwidth": [{"device": 0, "gbps": 4300.0, "best_variant": "sum"}],
                              "nvlink": None}))
    out = tmp_path / "o"
    assert main(["sweep", "--model", "test-tiny", "--cpu-dry-run", "--tokens", "256", "--impl", F + "gc_moe",
                 "--impl", F + "gc_moe_serial", "--replays", "1", "--warmup", "0", "--measured", "1",
                 "--floor-json", str(fl), "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["floor"]["reused_from"] == str(fl)
    pt = res["models"][0]["points"][0]
    lat = pt["impls"]["gc-moe"]["latency_us"]
    want = pt["per_rank_hbm_bytes"][0] / 4300e9 * 1e6 / lat
    assert res["targets"][0]["weight_streaming_t256"]["value"] == pytest.approx(want)
    assert pt["floor_us"] == pytest.approx(pt["per_rank_hbm_bytes"][0] / 4300e9 * 1e6)
    assert "measured earlier in this session" in (out / "results.md").read_text()


@pytest.mark.parametrize("world", [1, 2])
def test_budget_stops_every_rank_at_the_same_point(bundles, tmp_path, world):
    cfg = SweepConfig(models=[TINY], impls=[F + "gc_moe", "torch-bf16"], layout=Layout(world, world), tokens=(1, 2),
                      protocol=FAST, device="cpu", command="test", budget_s=0.0)
    res = run_sweep(cfg)
    for pt in res["models"][0]["points"]:
        for n in ("gc-moe", "torch-bf16"):
            it = pt["impls"][n]
            assert it["status"] == "skipped" and "time budget" in it["reason"]
            assert len(it["per_rank"]) == world


def test_other_layers_are_copies_of_the_weights_on_the_same_buffer(bundles, monkeypatch):
    """``clone_layers(n)`` (``bench timeline --flush layers``): layer k of ``prepare(point, layer=k)`` runs the same
    call on the same buffer with weights equal to the loaded ones at other addresses (routed and shared)."""
    impl = make(F + "gc_moe@8")
    impl.load_model(TINY, Layout(1, 1), RankContext(0, 1, torch.device("cpu"), None, 3), shared=True)
    pt = build_point(TINY, 4, Layout(1, 1), 0, 3)
    with pytest.raises(ValueError, match="layer=1: 0 or one of the 0 clone_layers"):
        impl.prepare(pt, layer=1)
    with pytest.raises(ValueError, match="n=0 must be an integer >= 1"):
        impl.clone_layers(0)
    impl.clone_layers(2)
    seen = []
    api = fake_gcmoe.API
    real = api.fp8_fp4_gc_moe

    def spy(y, w1, w2, buf, **kw):
        seen.append((w1, w2, kw["shared_weights"], buf))
        return real(y, w1, w2, buf, **kw)

    monkeypatch.setattr(api, "fp8_fp4_gc_moe", spy)
    for k in range(3):
        impl.prepare(pt, layer=k).step()
    m = impl._m
    assert seen[0][:3] == (m["w1"], m["w2"], m["shared"]) and len({id(s[3]) for s in seen}) == 1
    ptrs = set()
    for w1, w2, sw, _ in seen:
        for a, b in ((w1.tiles, m["w1"].tiles), (w2.scales, m["w2"].scales), (sw.w1_tiles, m["shared"].w1_tiles)):
            assert torch.equal(a, b)
            ptrs.add(a.data_ptr())
    assert len(ptrs) == 3 * 3  # three tensors x three layers, each at its own address
    assert seen[1][0].experts == m["w1"].experts and seen[2][2].recipe == m["shared"].recipe
    with pytest.raises(ValueError, match="layer=3"):
        impl.prepare(pt, layer=3)
