"""The issue's targets from a results document: met / missed / not evaluated, and by how much (arithmetic only)."""
import pytest

from gcmoe_runtime.bench import targets


def _res(lat: dict, Ts=(1, 256), bytes_per_rank=(4_300_000_000,), read_gbps=(4300.0,), floor=True):
    """lat: impl -> {T: latency µs or None (skipped)}."""
    pts = []
    for T in Ts:
        impls = {}
        for n, by_t in lat.items():
            v = by_t.get(T)
            impls[n] = {"status": "ok", "latency_us": v} if v is not None else {"status": "skipped", "reason": "x"}
        pts.append({"T": T, "impls": impls, "per_rank_hbm_bytes": list(bytes_per_rank)})
    return {"implementations": {n: {} for n in lat}, "models": [{"shape": {"name": "m"}, "points": pts}],
            "floor": {"read_bandwidth": [{"gbps": g} for g in read_gbps]} if floor else None}


def test_all_met():
    # 4.3e9 B at 4300 GB/s = 1000 µs of streaming; 1250 µs at T=256 -> 80 %
    res = _res({"gc-moe": {1: 10.0, 256: 1250.0}, "gc-moe-serial": {1: 12.0, 256: 1500.0},
                "torch-fp8": {1: 50.0, 256: 5000.0}})
    e = targets.evaluate(res, "gc-moe")[0]
    assert e["faster_than_every_baseline"]["status"] == "met"
    assert e["faster_than_every_baseline"]["compared_points"] == 4
    assert e["mean_speedup_over_a"]["status"] == "met" and e["mean_speedup_over_a"]["value"] == pytest.approx(1.2)
    assert e["weight_streaming_t256"]["value"] == pytest.approx(0.8) and e["weight_streaming_t256"]["status"] == "met"


def test_misses_say_by_how_much():
    res = _res({"gc-moe": {1: 10.0, 256: 2000.0}, "gc-moe-serial": {1: 11.0, 256: 2200.0},
                "torch-fp8": {1: 8.0, 256: 5000.0}})
    e = targets.evaluate(res, "gc-moe")[0]
    t1 = e["faster_than_every_baseline"]
    assert t1["status"] == "missed" and len(t1["misses"]) == 1
    assert t1["misses"][0]["T"] == 1 and t1["misses"][0]["slower_by_pct"] == pytest.approx(25.0)
    t2 = e["mean_speedup_over_a"]
    assert t2["status"] == "missed" and t2["value"] == pytest.approx(1.1) and t2["missed_by"] == pytest.approx(0.05)
    t3 = e["weight_streaming_t256"]
    assert t3["value"] == pytest.approx(0.5) and t3["missed_by"] == pytest.approx(0.2)
    md = "\n".join(targets.markdown([e]))
    assert "25.0% slower (ratio 0.800)" in md and "short by 0.050x" in md and "short by 20.0 points" in md


def test_unmeasured_subject_is_a_miss_not_a_pass():
    res = _res({"gc-moe": {1: 10.0}, "gc-moe-serial": {1: 12.0, 256: 1500.0}})
    e = targets.evaluate(res, "gc-moe")[0]
    assert e["faster_than_every_baseline"]["status"] == "missed"
    assert e["faster_than_every_baseline"]["not_measured"] == [{"T": 256, "baseline": "gc-moe-serial", "why": "skipped"}]
    assert e["mean_speedup_over_a"]["status"] == "missed" and e["mean_speedup_over_a"]["lacking_T"] == [256]
    assert e["weight_streaming_t256"]["status"] == "missed"


def test_not_evaluated_cases():
    e = targets.evaluate(_res({"gc-moe": {1: 10.0, 256: 20.0}}, floor=False), "gc-moe")[0]
    assert e["faster_than_every_baseline"]["status"] == "not evaluated"
    assert e["mean_speedup_over_a"]["status"] == "not evaluated"
    assert e["weight_streaming_t256"]["status"] == "not evaluated"
    e = targets.evaluate(_res({"gc-moe": {1: 10.0}, "torch-bf16": {1: 20.0}}, Ts=(1,)), "gc-moe")[0]
    assert "T=256 not in this sweep" in e["weight_streaming_t256"]["why"]


def test_stream_fraction_uses_the_most_loaded_rank():
    pt = {"T": 256, "impls": {"s": {"status": "ok", "latency_us": 100.0}}, "per_rank_hbm_bytes": [100_000_000, 300_000_000]}
    res = {"floor": {"read_bandwidth": [{"gbps": 4000.0}, {"gbps": 5000.0}]}}
    # rank 0: 25 µs, rank 1: 60 µs -> 0.6
    assert targets.stream_fraction(res, pt, "s") == pytest.approx(0.6)
