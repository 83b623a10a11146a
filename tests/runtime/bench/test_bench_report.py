"""Report generation from synthetic measurements: slowest rank, mean of ratios, markdown, PNG."""
import json

import pytest

from gcmoe_runtime.bench.report import write_all
from gcmoe_runtime.bench.routing import Layout
from gcmoe_runtime.bench.runner import SweepConfig, assemble
from gcmoe_runtime.bench.shapes import ModelShape

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)
TS = (1, 2, 4)


def _rank(lat_a, lat_b, counts, cos=(0.99, 0.98, 0.97)):
    pts = {}
    for T, a, b, c in zip(TS, lat_a, lat_b, cos):
        pts[T] = {"counts": dict(counts, shared_tokens=0), "impls": {
            "subj": {"status": "ok", "measured_us": [a, a + 1, a - 1], "warmup_us": [a], "median_us": a},
            "base": {"status": "ok", "measured_us": [b], "warmup_us": [], "median_us": b, "cos_vs_first": c},
            "peer": {"status": "skipped", "reason": "wheel does not load"}}}
    return [{"model": TINY.name, "points": pts}]


@pytest.fixture
def results():
    cfg = SweepConfig(models=[TINY], impls=["subj", "base", "peer"], layout=Layout(2, 2), tokens=TS,
                      command="test", impl_names=["subj", "base", "peer"])
    r0 = _rank([10.0, 20.0, 40.0], [12.0, 30.0, 44.0], {"assignments": 8, "active_experts": 4, "remote_sent": 3})
    r1 = _rank([11.0, 19.0, 40.0], [11.0, 30.0, 48.0], {"assignments": 4, "active_experts": 2, "remote_sent": 1})
    floor = {"read_bandwidth": [{"device": 0, "gbps": 4000.0}, {"device": 1, "gbps": 4000.0}],
             "nvlink": {"round_trip_us": 1.25}}
    info = {n: {"precision": f"{n} precision"} for n in ("subj", "base", "peer")}
    return assemble(cfg, [r0, r1], {"gpu": "fake"}, None, floor, info)


def test_slowest_rank_and_models(results):
    pts = results["models"][0]["points"]
    assert pts[0]["impls"]["subj"]["latency_us"] == 11.0 and pts[0]["impls"]["subj"]["slowest_rank"] == 1
    assert pts[2]["impls"]["base"]["latency_us"] == 48.0
    assert pts[0]["impls"]["peer"]["status"] == "skipped"
    e = 208_896
    assert pts[0]["floor_us"] == pytest.approx(4 * e / 4000e9 * 1e6 + 1.25)
    assert pts[0]["model"]["flops"] == 6 * 12 * 512 * 256
    assert pts[0]["impls"]["subj"]["tflops"] == pytest.approx(6 * 12 * 512 * 256 / 11e-6 / 1e12)
    assert pts[0]["model"]["nvlink_bytes"] == 4 * (512 + 16 + 1024)


def test_files(results, tmp_path):
    files = write_all(results, tmp_path, subject="subj", stem="r")
    names = sorted(f.name for f in files)
    assert names == ["r.json", "r.md", "test-tiny.png"]
    md = (tmp_path / "r.md").read_text()
    mean = (12 / 11 + 30 / 20 + 48 / 40) / 3
    assert f"{mean:.4f} (3 pts)" in md
    assert "| 1 | 2 |" in md and "skipped" in md and "base/subj" in md
    assert (tmp_path / "test-tiny.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "r.json").read_text())["report"]["subject"] == "subj"
    with pytest.raises(ValueError, match="subject"):
        write_all(results, tmp_path, subject="nope")


def test_output_agreement_is_reported_and_disagreement_flagged(results, tmp_path):
    write_all(results, tmp_path, subject="subj", stem="r")
    assert "Output agreement with `subj` (worst cosine over points and ranks): `base` 0.9700" in \
        (tmp_path / "r.md").read_text()
    for rank in results["models"][0]["points"][1]["impls"]["base"]["per_rank"]:
        rank["cos_vs_first"] = float("nan")  # the 2026-11-30 shared run: untransformed weights gave NaN
    write_all(results, tmp_path, subject="subj", stem="r")
    assert "`base` -1.0000 **DISAGREES**" in (tmp_path / "r.md").read_text()


def test_non_finite_output_is_not_a_latency():
    cfg = SweepConfig(models=[TINY], impls=["subj", "base"], layout=Layout(1, 1), tokens=(1,), command="t",
                      impl_names=["subj", "base"])
    rank = _rank([10.0], [12.0], {"assignments": 4, "active_experts": 4, "remote_sent": 0})
    rank[0]["points"][1]["impls"]["subj"].update(status="invalid", reason="non-finite output (NaN/Inf) after replay")
    res = assemble(cfg, [rank], {"gpu": "fake"}, None, None, {n: {"precision": n} for n in ("subj", "base")})
    item = res["models"][0]["points"][0]["impls"]["subj"]
    assert item["status"] == "invalid" and "latency_us" not in item and "non-finite" in item["reason"]
