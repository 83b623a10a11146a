"""The layer timeline's bookkeeping (gcmoe_runtime.bench.timeline): replays from kernel records, medians, report."""
import pytest

from gcmoe_runtime.bench.timeline import markdown, plot, replay_timelines, role_of, summarize


def _records(period=100.0, n=3, jitter=0.0):
    """n replays: role1 and role4 start together, role2 after role4, role3 last; an L2-flush kernel in between."""
    ev = []
    for i in range(n):
        t = 1000.0 + i * period + (jitter if i == 1 else 0.0)
        ev += [("gcmoe_sm90_role1_dispatch_abc", t, t + 30), ("gcmoe_sm90_role4_shared_def", t + 1, t + 35),
               ("gcmoe_sm90_role2_ring_0123", t + 35, t + 80), ("gcmoe_sm90_role3_finalize_9", t + 80, t + 90),
               ("void at::native::vectorized_elementwise_kernel<zero>", t + 95, t + 96)]
    return ev[::-1]  # any order


def test_role_of_names_only_gcmoe_role_kernels():
    assert role_of("gcmoe_sm90_role2_ring_w1w2_bm8_abc") == "role2"
    assert role_of("gcmoe_sm90_role4_shared_x") == "role4"
    assert role_of("void at::native::kernel") is None
    assert role_of("gcmoe_sm90_role5_x") is None


def test_replays_are_relative_to_their_first_kernel():
    tl = replay_timelines(_records())
    assert len(tl) == 3
    for i, r in enumerate(tl):
        assert r["t0"] == 1000.0 + 100.0 * i
        assert r["role1"] == (0.0, 30.0) and r["role4"] == (1.0, 35.0)
        assert r["role2"] == (35.0, 80.0) and r["role3"] == (80.0, 90.0)


def test_summary_medians_span_and_period():
    s = summarize(replay_timelines(_records(jitter=7.0)))
    assert s["replays"] == 3
    assert s["roles"]["role2"] == {"start_us": 35.0, "end_us": 80.0, "dur_us": 45.0}
    assert s["span_us"] == 90.0
    assert s["period_us"] == pytest.approx(100.0, abs=7.0)  # periods 107 and 93: median of two = their mean
    assert list(s["roles"]) == ["role1", "role4", "role2", "role3"]


def test_an_incomplete_last_replay_is_dropped_and_bad_records_refused():
    ev = _records(n=2) + [("gcmoe_sm90_role1_dispatch_abc", 5000.0, 5030.0)]
    assert len(replay_timelines(ev)) == 2
    with pytest.raises(ValueError, match="end"):
        replay_timelines([("gcmoe_sm90_role1_dispatch", 10.0, 5.0)])
    with pytest.raises(ValueError, match="no complete replay"):
        summarize(replay_timelines([("other_kernel", 0.0, 1.0)]))


def test_report_and_plot(tmp_path):
    res = {"gpu": "H200", "date": "2026-12-01", "command": "x", "replays": 3, "shared": True,
           "models": [{"model": "glm-5.2", "points": [{"tokens": 8, "summary": summarize(replay_timelines(_records()))}]}]}
    md = markdown(res)
    assert "| 8 | 0.0-30.0 (30.0) | 1.0-35.0 (34.0) | 35.0-80.0 (45.0) | 80.0-90.0 (10.0) | 90.0 | 100.0 |" in md
    pytest.importorskip("matplotlib")
    plot(res, tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 1000


def test_cold_report_names_the_flush_and_drops_the_period():
    res = {"gpu": "H200", "date": "2026-12-04", "command": "x", "replays": 3, "shared": False, "cold": True,
           "models": [{"model": "glm-5.2", "points": [{"tokens": 1, "summary": summarize(replay_timelines(_records()))}]}]}
    md = markdown(res)
    assert "each after an L2 flush (cold" in md and "back-to-back" not in md
    assert "| 1 | 0.0-30.0 (30.0) | 1.0-35.0 (34.0) | 35.0-80.0 (45.0) | 80.0-90.0 (10.0) | 90.0 | - |" in md


@pytest.fixture
def fake_profiler(monkeypatch):
    """The CUDA profiler replaced: its events are the kernel records ``(name, start, end)`` appended to the returned
    list inside its context (nothing, unless the test's replays append them); no device synchronisation."""
    import sys
    import types

    recorded = []

    class _Profile:
        def __init__(self, **_):
            pass

        def __enter__(self):
            self.start = len(recorded)
            return self

        def __exit__(self, *_):
            return False

        def events(self):
            return [types.SimpleNamespace(name=n, time_range=types.SimpleNamespace(start=a, end=b), device_type="cuda")
                    for n, a, b in recorded[self.start:]]

    fake_prof = types.SimpleNamespace(ProfilerActivity=types.SimpleNamespace(CUDA="cuda"), profile=_Profile)
    monkeypatch.setitem(sys.modules, "torch.profiler", fake_prof)
    monkeypatch.setattr("torch.cuda.synchronize", lambda: None)
    monkeypatch.setattr("torch.autograd.DeviceType", types.SimpleNamespace(CUDA="cuda"), raising=False)
    return recorded


def test_cold_trace_flushes_before_every_recorded_replay(fake_profiler):
    """``trace_point(cold=True)``: the warm-up replays, one flush, then flush-replay pairs (the first recorded replay
    after the warm-up's flush); back to back: every recorded replay after the one flush."""
    from gcmoe_runtime.bench import timeline

    calls = []
    timeline.trace_point(lambda: calls.append("r"), lambda: calls.append("f"), 3, warm=2, cold=True)
    assert calls == ["r", "r", "f", "r", "f", "r", "f", "r"]
    calls.clear()
    timeline.trace_point(lambda: calls.append("r"), lambda: calls.append("f"), 3, warm=2)
    assert calls == ["r", "r", "f", "r", "r", "r"]


def test_read_flush_is_named_in_the_report():
    res = {"gpu": "H200", "date": "2026-12-04", "command": "x", "replays": 3, "shared": False, "cold": True,
           "flush": "read",
           "models": [{"model": "glm-5.2", "points": [{"tokens": 1, "summary": summarize(replay_timelines(_records()))}]}]}
    assert "each after an L2 flush by reads (cold" in markdown(res)
    res["flush"] = "write"
    assert "each after an L2 flush (cold" in markdown(res)
    res.update(flush="layers", other_layers=3)
    assert "each after 3 other layers' replays (the call on copies of its weights) (cold" in markdown(res)


def test_timeline_cli_takes_the_flush_mode_and_refuses_others(monkeypatch, tmp_path, capsys):
    from gcmoe_runtime.bench import __main__ as cli
    from gcmoe_runtime.bench import timeline

    seen = {}

    def fake_run(models, tokens, shared, replays, out, command, seed, tile, cold, flush, other_layers):
        seen.update(cold=cold, flush=flush, other_layers=other_layers)
        return {"gpu": "-", "date": "-", "command": command, "replays": replays, "shared": shared, "cold": cold,
                "flush": flush, "models": []}

    monkeypatch.setattr(timeline, "run", fake_run)
    assert cli.main(["timeline", "--model", "glm-5.2", "--cold", "--flush", "read", "--out", str(tmp_path)]) == 0
    assert seen == {"cold": True, "flush": "read", "other_layers": 3}
    assert cli.main(["timeline", "--model", "glm-5.2", "--cold", "--flush", "layers", "--other-layers", "5",
                     "--out", str(tmp_path)]) == 0
    assert seen == {"cold": True, "flush": "layers", "other_layers": 5}
    with pytest.raises(SystemExit):
        cli.main(["timeline", "--model", "glm-5.2", "--flush", "evict", "--out", str(tmp_path)])
    assert "invalid choice: 'evict'" in capsys.readouterr().err


def test_layers_flush_keeps_only_layer_zeros_replays(fake_profiler):
    """``--flush layers`` cold: each recorded replay of layer 0 follows the other layers' replays, whose kernels have
    the same names; the timelines are layer 0's alone (here its role2 takes 10 µs, the others' 50)."""
    from gcmoe_runtime.bench import timeline

    clock, recorded = [0.0], fake_profiler

    def layer(role2_us):
        def replay():
            t = clock[0]
            recorded.extend([("gcmoe_sm90_role1_dispatch_x", t, t + 5), ("gcmoe_sm90_role2_ring_x", t + 5,
                                                                          t + 5 + role2_us),
                             ("gcmoe_sm90_role3_finalize_x", t + 5 + role2_us, t + 8 + role2_us)])
            clock[0] = t + 100
        return replay

    runs = [layer(10.0), layer(50.0), layer(50.0), layer(50.0)]
    events, tl = timeline.layer_timelines(runs, None, 4, cold=True, layers=True)
    assert len(events) == 3 * (4 + 3 * 3) and len(tl) == 4  # the first recorded replay follows the warm-up's flush
    assert all(t["role2"] == (5.0, 15.0) for t in tl)
    events, tl = timeline.layer_timelines(runs, None, 4, cold=False, layers=True)  # back to back: no other layers
    assert len(events) == 3 * 4 and len(tl) == 4 and all(t["role2"] == (5.0, 15.0) for t in tl)
