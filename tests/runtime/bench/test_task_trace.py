"""bench.task_trace on synthetic trace rows (CPU): decoding the kernel's words, phases, waits, SM occupancy, report
and plot. The kernel side (role2_ring.TRACE) is compiled in tests/build and run on the GPU by `bench tasks`."""
import copy

import pytest

from gcmoe_runtime.bench import task_trace as tt
from gcmoe_runtime.workspace import layout as wsl


def row(claim, ready, start, end, sm, cta, w1, tile=0, split=0, block=0, gen=0, last=None):
    w = [0] * wsl.ROLE2_TRACE_WORDS
    w[wsl.TRACE_CLAIM], w[wsl.TRACE_READY], w[wsl.TRACE_START], w[wsl.TRACE_END] = claim, ready, start, end
    w[wsl.TRACE_WHERE] = sm | cta << 32
    w[wsl.TRACE_WHAT] = int(w1) | tile << 8 | split << 16 | block << 24 | gen << 48
    w[wsl.TRACE_LAST_STAGE] = last or end
    w[wsl.TRACE_CHUNK0] = start + 1000  # 1 µs task top
    w[wsl.TRACE_KLOOP_END] = end - 500  # 0.5 µs after the K loop
    return w


T0 = 1_700_000_000_000_000_000  # %globaltimer is ns since an epoch: large values


def sample():
    """Two SMs, one CTA each: W1 tasks 0-10 µs and 0-12 µs; W2 tasks claimed at 1 µs, ready when W1 ends (12 µs)."""
    us = lambda x: T0 + int(x * 1000)  # noqa: E731
    rows = [row(us(0), us(0), us(0.5), us(10), sm=3, cta=0, w1=True, tile=0),
            row(us(0), us(0), us(0.5), us(12), sm=7, cta=1, w1=True, tile=1),
            row(us(1), us(12), us(12.2), us(20), sm=3, cta=0, w1=False, tile=0),
            row(us(1), us(12), us(12.5), us(22), sm=7, cta=1, w1=False, tile=1)]
    return rows + [[0] * wsl.ROLE2_TRACE_WORDS] * 3  # unstamped rows (the region is zeroed before the replay)


def test_decode_reads_the_kernels_words_and_skips_unstamped_rows():
    tasks = tt.decode(sample())
    assert [t["task"] for t in tasks] == [0, 1, 2, 3]
    assert [(t["sm"], t["cta"], t["w1"], t["tile"]) for t in tasks] == [(3, 0, True, 0), (7, 1, True, 1),
                                                                        (3, 0, False, 0), (7, 1, False, 1)]
    bad = sample()
    bad[2][wsl.TRACE_END] = bad[2][wsl.TRACE_START] - 1
    with pytest.raises(ValueError, match="task 2"):
        tt.decode(bad)


def test_summary_phases_waits_and_busy_sms():
    s = tt.summarize(tt.decode(sample()), hidden=512, intermediate=256)
    assert s["tasks"] == 4 and s["sms"] == 2 and s["span_us"] == pytest.approx(22.0)
    assert s["w1"]["last_end_us"] == pytest.approx(12.0) and s["w1"]["first_start_us"] == pytest.approx(0.5)
    assert s["w2"]["wait_ready_us"]["median"] == pytest.approx(11.0) and s["w2"]["wait_ready_us"]["max"] == 11.0
    assert s["w2"]["dur_us"]["median"] == pytest.approx((7.8 + 9.5) / 2)
    # W1 bytes per task: 256 rows x H x (0.5 + 1/32) B over its median duration
    assert s["w1"]["gbps_per_task_median"] == pytest.approx(256 * 512 * (0.5 + 1 / 32) / 10.5 / 1e3)
    # SM 3 busy 0.5-10 and 12.2-20 of 22 µs
    assert s["sm_busy"]["min"] == pytest.approx((9.5 + 7.8) / 22)
    assert s["sm_task_counts"] == {2: 2}
    # work (9.5 + 11.5 + 7.8 + 9.5) over 2 CTAs from the first start (0.5): 19.65 µs against the 22 µs span
    assert s["even_span_us"] == pytest.approx(0.5 + (9.5 + 11.5 + 7.8 + 9.5) / 2)
    parts = dict(s["w2"]["parts_us"])
    assert parts.pop("kloop_q") == pytest.approx([6.3, 6.3, 8.0, 8.0, 8.0])  # nearest rank of (6.3, 8.0)
    assert parts == pytest.approx({"top": 1.0, "kloop": (6.3 + 8.0) / 2, "after": 0.5})
    with pytest.raises(ValueError, match="TRACE"):
        tt.summarize([], 512, 256)


def test_quantiles_are_nearest_rank_and_show_two_modes():
    assert tt.quantiles([3.0, 1.0, 2.0], (0.0, 0.5, 0.99)) == [1.0, 2.0, 3.0]
    narrow, wide = [30.0 + 0.1 * i for i in range(40)], [35.0 + 0.1 * i for i in range(60)]
    q = tt.quantiles(narrow + wide)
    assert q[0] < 31 and q[-1] > 35 and len(q) == len(tt.KLOOP_QUANTILES)  # both modes, which one median hides


def test_split_w1_tasks_count_their_share_of_the_bytes():
    us = lambda x: T0 + int(x * 1000)  # noqa: E731
    rows = [row(us(0), us(0), us(0), us(5), sm=1, cta=0, w1=True, split=0),
            row(us(0), us(0), us(0), us(5), sm=1, cta=1, w1=True, split=1)]
    s = tt.summarize(tt.decode(rows), hidden=512, intermediate=256)
    assert s["w1"]["bytes_per_task"] == 256 * 512 * (0.5 + 1 / 32) / 2 and "w2" not in s


def test_compact_point_keeps_the_median_replay_relative():
    tasks = tt.decode(sample())
    slow = [dict(t, end=t["end"] + 5000) for t in tasks]  # a replay 5 µs longer
    reps = [{"summary": tt.summarize(ts, 512, 256), "tasks": ts} for ts in (tasks, slow, slow)]
    p = tt.compact_point(1, reps)
    assert len(p["summaries"]) == 3 and p["median"]["span_us"] == pytest.approx(27.0)
    back = tt.point_tasks(p)
    assert [t["task"] for t in back] == [0, 1, 2, 3] and back[0]["claim"] == 0 and back[3]["end"] == 27000
    assert back[2]["ready"] == 12000 and back[2]["w1"] == 0 and back[1]["sm"] == 7


def test_markdown_and_plot(tmp_path):
    tasks = tt.decode(sample())
    reps = [{"summary": tt.summarize(tasks, 512, 256), "tasks": tasks}] * 3
    res = {"gpu": "test", "date": "2026-12-02", "command": "bench tasks", "shared": False, "replays": 3,
           "tile": [8, 384, 2], "models": [{"model": "tiny", "points": [tt.compact_point(1, reps)]}]}
    md = tt.markdown(res)
    assert "| tiny | 1 | 4 | 22.0 | 2 / 0.5 / 11.0 / 12.0 |" in md and "11.0 / 11.0" in md
    assert "| 19.6 (0.89) |" in md  # the even span and its ratio to the span
    assert "| tiny | 1 | 1.0 / 9.0 / 0.5 | 1.0 / 7.2 / 0.5 |" in md
    assert "| tiny | 1 | 8.0 / 8.0 / 10.0 / 10.0 / 10.0 | 6.3 / 6.3 / 8.0 / 8.0 / 8.0 |" in md  # the K loops' spread
    # a trace recorded before session 37: no quantiles in its summaries, so no spread table
    before = copy.deepcopy(reps[0]["summary"])
    for w in ("w1", "w2"):
        del before[w]["parts_us"]["kloop_q"]
    del before["even_span_us"]
    point = {**tt.compact_point(1, reps), "median": tt.median_summary([before] * 3)}
    md_before = tt.markdown({**res, "models": [{"model": "tiny", "points": [point]}]})
    assert "K loops' spread" not in md_before and md_before.count("| - |") == 1  # no even span either
    pytest.importorskip("matplotlib")
    tt.plot(res, tmp_path / "tasks.png")
    assert (tmp_path / "tasks.png").stat().st_size > 1000


def test_sibling_durations_split_tasks_by_the_sm_siblings_work():
    """Two CTAs on SM 1: W1 tasks 0-10 µs side by side (both busy); W2 tasks 10-14 and 10-20 (the short one busy
    throughout, the long one 40 %: neither); a CTA alone on SM 2 (no sibling: not counted). Then the W2 tasks at
    16-19 and 10-15: apart, both beside an idle sibling."""
    us = lambda x: T0 + int(x * 1000)  # noqa: E731
    rows = [row(us(0), us(0), us(0), us(10), sm=1, cta=0, w1=True),
            row(us(0), us(0), us(0), us(10), sm=1, cta=1, w1=True),
            row(us(0), us(10), us(10), us(14), sm=1, cta=0, w1=False),
            row(us(0), us(10), us(10), us(20), sm=1, cta=1, w1=False),
            row(us(0), us(0), us(0), us(30), sm=2, cta=2, w1=True)]
    sib = tt.sibling_durations(tt.decode(rows))
    w1w1 = {"n": 2, "dur_us": pytest.approx(10.0)}  # the W1 tasks side by side: busy, and beside W1
    assert sib == {"w1_busy": w1w1, "w1_pair_w1": w1w1, "w2_busy": {"n": 1, "dur_us": pytest.approx(4.0)}}
    rows[2] = row(us(0), us(10), us(16), us(19), sm=1, cta=0, w1=False)
    rows[3] = row(us(0), us(10), us(10), us(15), sm=1, cta=1, w1=False)
    sib = tt.sibling_durations(tt.decode(rows))
    assert sib == {"w1_busy": w1w1, "w1_pair_w1": w1w1, "w2_idle": {"n": 2, "dur_us": pytest.approx(4.0)}}
    assert tt.sibling_durations(tt.decode(sample())) == {}  # one CTA per SM
    # a W1 task 20-30 µs beside the sibling's W1 task 20-24 then W2 task 24-31: W1 for 40 % of it, so beside other
    beside = rows + [row(us(0), us(20), us(20), us(30), sm=1, cta=0, w1=True),
                     row(us(0), us(20), us(20), us(24), sm=1, cta=1, w1=True),
                     row(us(0), us(24), us(24), us(31), sm=1, cta=1, w1=False)]
    sib = tt.sibling_durations(tt.decode(beside))
    assert sib["w1_pair_other"] == {"n": 1, "dur_us": pytest.approx(10.0)}
    assert sib["w1_pair_w1"] == {"n": 3, "dur_us": pytest.approx(10.0)}  # the 20-24 task: its sibling ran W1
    s = tt.summarize(tt.decode(rows), 512, 256)
    res = {"gpu": "test", "date": "2026-12-04", "command": "bench tasks", "shared": False, "replays": 3,
           "tile": [8, 384, 2], "models": [{"model": "tiny", "points": [tt.compact_point(
               4, [{"summary": s, "tasks": tt.decode(rows)}] * 3)]}]}
    assert "| tiny | 4 | 10.0 (2) | - | - | 4.0 (2) | 10.0 (2) | - |" in tt.markdown(res)


def test_top_in_parts_when_the_build_stamps_them():
    """Builds since session 48 stamp the top's parts (layout ``TRACE_TOP_BAR`` .. ``TRACE_CHUNK0_LANDED``): their
    medians add up to the top (start -> chunk0); older traces (words 0) have no ``top_parts_us``."""
    rows = sample()
    assert "top_parts_us" not in tt.summarize(tt.decode(rows), hidden=512, intermediate=256)["w1"]
    for r in rows[:4]:  # start + 0.1 / 0.3 / 0.6 / 0.9 µs, chunk0 at start + 1 µs
        for word, dt in ((wsl.TRACE_TOP_BAR, 100), (wsl.TRACE_CHUNK0_ISSUED, 300), (wsl.TRACE_CHUNK0_SCALES, 600),
                         (wsl.TRACE_CHUNK0_LANDED, 900)):
            r[word] = r[wsl.TRACE_START] + dt
    tasks = tt.decode(rows)
    s = tt.summarize(tasks, hidden=512, intermediate=256)
    want = {"bar": 0.1, "issue": 0.2, "scales": 0.3, "land": 0.3, "sync": 0.1}
    for k in ("w1", "w2"):
        assert s[k]["top_parts_us"] == pytest.approx(want)
        assert sum(s[k]["top_parts_us"].values()) == pytest.approx(s[k]["parts_us"]["top"])
    point = tt.compact_point(1, [{"summary": s, "tasks": tasks}])
    assert point["median"]["w1"]["top_parts_us"] == pytest.approx(want)
    # the kept replay's rows hold the words relative to its first claim, and summarize again the same
    again = tt.summarize(tt.point_tasks(point), hidden=512, intermediate=256)
    assert again["w2"]["top_parts_us"] == pytest.approx(want)
    md = tt.markdown({"gpu": "H200", "date": "-", "command": "x", "shared": False, "replays": 1,
                      "models": [{"model": "glm-5.2", "points": [point]}]})
    assert "| glm-5.2 | 1 | 0.10 / 0.20 / 0.30 / 0.30 / 0.10 | 0.10 / 0.20 / 0.30 / 0.30 / 0.10 |" in md
    old = copy.deepcopy(point)
    del old["median"]["w1"]["top_parts_us"], old["median"]["w2"]["top_parts_us"]
    assert "top in parts" not in tt.markdown({"gpu": "H200", "date": "-", "command": "x", "shared": False,
                                              "replays": 1, "models": [{"model": "glm-5.2", "points": [old]}]})
