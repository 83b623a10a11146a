"""Where role2's time goes inside one replay, task by task: reads the workspace's ``role2_trace`` that role2 builds
with ``role2_ring.TRACE`` write (``ci/build_trace_bundles.sh``; a dev instrument, never in a shipped bundle).

``python -m gcmoe_runtime.bench tasks --model M [--shared] [--tokens 1,2] --out DIR`` (one GPU, world 1, the bundles
``GCMOE_BENCH_BUNDLES`` names, which must be trace builds): for each T the gc-moe operator is prepared as the sweep
prepares it and replayed a few times; then, ``--replays`` times, the trace region is zeroed, the L2 flushed and one
replay recorded. Each task row holds ``%globaltimer`` stamps (``gcmoe_runtime.workspace.layout``: ``TRACE_*``): when the
producer thread began its acquires (claim), had them (ready: a W2 task's wait for its block's W1 tiles ends here),
issued its last weight stage; when consumer thread 0 took the task (start) and finished it (end), and the parts of
the task's top between (:data:`TOP_PARTS`, builds since session 48); the SM, CTA and the task's coordinates. Writes
``tasks.json.gz`` (every replay's summary and the tasks of the median one), ``tasks.md`` (per point: phases, waits,
per-task stream rates, a task's parts and its top's, how busy the SMs were) and ``tasks.png`` (a Gantt chart per
point: one row per CTA, grouped by SM).

Why: the layer's timeline (``bench timeline``) shows role2 as one bar; its T = 1-2 gap to the byte floor (0.45-0.61,
results/operator/NEXT.md item 2) is in how W1 and W2 tasks share the grid, which only per-task times show.
"""
from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from gcmoe_runtime.workspace import layout as wsl

#: bytes a task streams per weight row and K element: E2M1 codes + one UE8M0 scale per 32 (the routed recipe)
WEIGHT_BYTES_PER_ELEM = 0.5 + 1 / 32
ROWS_PER_TASK = 256


def decode(rows: Iterable[Sequence[int]]) -> list[dict]:
    """Trace rows (``ROLE2_TRACE_WORDS`` u64 each, as the kernel wrote them into a zeroed region) -> one dict per
    stamped task (a row whose start and end are set), times in ns as written. Raises on a row stamped out of order
    (end before start, ready before claim): a torn or stale region, not a trace."""
    out = []
    for task, w in enumerate(rows):
        w = [int(x) for x in w]
        claim, ready, start, end = (w[wsl.TRACE_CLAIM], w[wsl.TRACE_READY], w[wsl.TRACE_START], w[wsl.TRACE_END])
        if start == 0 and end == 0:
            continue
        if not (0 < claim <= ready and 0 < start <= end):
            raise ValueError(f"role2_trace task {task}: stamps out of order or missing "
                             f"(claim {claim}, ready {ready}, start {start}, end {end})")
        where, what = w[wsl.TRACE_WHERE], w[wsl.TRACE_WHAT]
        out.append({"task": task, "claim": claim, "ready": ready, "start": start, "end": end,
                    "last_stage": w[wsl.TRACE_LAST_STAGE], "chunk0": w[wsl.TRACE_CHUNK0],
                    **{name: w[word] for name, word in TOP_WORDS.items()},
                    "kloop_end": w[wsl.TRACE_KLOOP_END], "sm": where & 0xFFFFFFFF, "cta": (where >> 32) & 0xFFFFFFFF,
                    "w1": bool(what & 0xFF), "tile": (what >> 8) & 0xFF, "split": (what >> 16) & 0xFF,
                    "block": (what >> 24) & 0xFFFFFF, "gen": (what >> 48) & 0xFFFF})
    return out


#: a task's top in parts (builds since session 48; older traces leave these words 0): decode name -> trace word
TOP_WORDS = {"top_bar": wsl.TRACE_TOP_BAR, "issued": wsl.TRACE_CHUNK0_ISSUED, "scales": wsl.TRACE_CHUNK0_SCALES,
             "landed": wsl.TRACE_CHUNK0_LANDED}
#: :func:`top_parts`' parts, in the order consumer thread 0 passes them: the record in hand -> past the top's barrier
#: (bar) -> the first chunk's copy issued (issue: a W2 task's wait for its W1 bits is here) -> its token scales stored
#: (scales: global loads) -> the copy's wait over (land) -> every consumer past the chunk's barrier (sync)
TOP_PARTS = ("bar", "issue", "scales", "land", "sync")


def top_parts(tasks: list[dict]) -> dict:
    """The median µs of each of :data:`TOP_PARTS` over ``tasks`` (decoded, every top word stamped); the parts of one
    task add up to its top (start -> chunk0)."""
    marks = ("start", "top_bar", "issued", "scales", "landed", "chunk0")
    return {part: statistics.median((t[b] - t[a]) / 1e3 for t in tasks)
            for part, a, b in zip(TOP_PARTS, marks, marks[1:])}


TASK_FIELDS = ("task", "claim", "ready", "start", "end", "last_stage", "sm", "cta", "w1", "tile", "split", "block",
               "gen", "chunk0", "kloop_end", "top_bar", "issued", "scales", "landed")


def compact_point(tokens: int, recorded: list[dict]) -> dict:
    """One point's record for ``tasks.json.gz``: every replay's summary and their medians, and the tasks of the replay
    whose span is the median, as rows of ``TASK_FIELDS`` with times in ns from that replay's first claim (the whole
    trace of every replay is ~1 MB per point: not worth keeping)."""
    rep = sorted(recorded, key=lambda r: r["summary"]["span_us"])[len(recorded) // 2]
    t0 = min(t["claim"] for t in rep["tasks"])
    rel = {"claim", "ready", "start", "end", "last_stage", "chunk0", "kloop_end", *TOP_WORDS}
    rows = [[(t[f] - t0 if t[f] else -1) if f in rel else int(t[f]) for f in TASK_FIELDS] for t in rep["tasks"]]
    return {"tokens": tokens, "summaries": [r["summary"] for r in recorded],
            "median": median_summary([r["summary"] for r in recorded]),
            "median_replay": {"fields": list(TASK_FIELDS), "rows": rows}}


def point_tasks(point: dict) -> list[dict]:
    """The median replay's tasks of a :func:`compact_point` record, as :func:`decode` dicts (times relative)."""
    f = point["median_replay"]["fields"]
    return [dict(zip(f, r)) for r in point["median_replay"]["rows"]]


#: the quantiles of the K-loop times :func:`markdown` prints: a build whose blocks run two loops (a narrow N beside BM,
#: ``role2_ring_config.narrow_n_build``) shows two modes, which a median hides (session 37: the wide mode of BM 48's W1
#: tasks moved 9-16 %, the narrow one 2-3 %)
KLOOP_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def quantiles(xs: list[float], qs=KLOOP_QUANTILES) -> list[float]:
    """Nearest-rank quantiles ``qs`` of ``xs`` (non-empty)."""
    xs = sorted(xs)
    return [xs[min(len(xs) - 1, int(len(xs) * q))] for q in qs]


def _union_us(intervals: list[tuple[float, float]]) -> float:
    tot, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                tot += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    return tot + ((cur_b - cur_a) if cur_b is not None else 0.0)


def summarize(tasks: list[dict], hidden: int, intermediate: int) -> dict:
    """One replay's tasks -> phases and waits (µs from the first claim), per-task stream rates and SM occupancy."""
    if not tasks:
        raise ValueError("no stamped task: was the bundle built with role2_ring.TRACE (ci/build_trace_bundles.sh)?")
    t0 = min(t["claim"] for t in tasks)
    us = lambda ns: (ns - t0) / 1e3  # noqa: E731
    med = statistics.median
    res: dict[str, Any] = {"tasks": len(tasks), "span_us": us(max(t["end"] for t in tasks)),
                           "sms": len({t["sm"] for t in tasks}), "ctas": len({t["cta"] for t in tasks})}
    for name, sel, k in (("w1", True, hidden), ("w2", False, intermediate)):
        ts = [t for t in tasks if t["w1"] == sel]
        if not ts:
            continue
        splits = max(t["split"] for t in ts) + 1 if sel else 1
        nbytes = ROWS_PER_TASK * k * WEIGHT_BYTES_PER_ELEM / splits
        durs = [(t["end"] - t["start"]) / 1e3 for t in ts]
        kloops = [(t["kloop_end"] - t["chunk0"]) / 1e3 for t in ts]
        res[name] = {
            "n": len(ts), "first_start_us": us(min(t["start"] for t in ts)),
            "last_end_us": us(max(t["end"] for t in ts)),
            "median_end_us": med(us(t["end"]) for t in ts),
            "dur_us": {"median": med(durs), "min": min(durs), "max": max(durs)},
            "gbps_per_task_median": nbytes / med(durs) / 1e3,
            "wait_ready_us": {"median": med((t["ready"] - t["claim"]) / 1e3 for t in ts),
                              "max": max((t["ready"] - t["claim"]) / 1e3 for t in ts)},
            "ready_to_start_us": {"median": med((t["start"] - t["ready"]) / 1e3 for t in ts)},
            # a task's parts (builds since session 23's second trace): top (record -> first chunk landed), K loop,
            # after it (epilogue / split hand-over, the release barrier)
            "parts_us": ({"top": med((t["chunk0"] - t["start"]) / 1e3 for t in ts),
                          "kloop": med(kloops),
                          "after": med((t["end"] - t["kloop_end"]) / 1e3 for t in ts),
                          "kloop_q": quantiles(kloops)}
                         if all(t["chunk0"] and t["kloop_end"] for t in ts) else None),
            "bytes_per_task": nbytes,
        }
        if all(t.get(w, 0) > 0 for t in ts for w in TOP_WORDS):  # stamped (0 raw, -1 relative: not)
            res[name]["top_parts_us"] = top_parts(ts)
    per_sm: dict[int, list] = {}
    for t in tasks:
        per_sm.setdefault(t["sm"], []).append((us(t["start"]), us(t["end"])))
    busy = [_union_us(v) / res["span_us"] for v in per_sm.values()] if res["span_us"] > 0 else [0.0]
    res["sm_busy"] = {"mean": statistics.fmean(busy), "min": min(busy), "max": max(busy)}
    counts = [len(v) for v in per_sm.values()]
    res["sm_task_counts"] = {n: counts.count(n) for n in sorted(set(counts))}  # tasks per SM -> SMs
    # the span were the tasks' work (start -> end) spread evenly over the CTAs that ran one, from the first start: what
    # balance alone could give (session 37: 6-13 % below the span at BM 48-80; counts, durations, fills and tails)
    res["even_span_us"] = (us(min(t["start"] for t in tasks))
                           + sum(t["end"] - t["start"] for t in tasks) / 1e3 / res["ctas"])
    sib = sibling_durations(tasks)
    if sib:
        res["sibling"] = sib
    return res


#: a task counts as beside a busy / an idle SM sibling when the SM's other CTA ran a task through more than / less
#: than this share of it (between: neither)
SIBLING_SHARE = 0.9


def sibling_cover(task: dict, same_sm: list[dict], w1: bool | None = None) -> float:
    """The share of ``task``'s start -> end during which another CTA of its SM (``same_sm``: the SM's tasks, the
    task itself may be among them) ran a task (with ``w1``: a W1 task / a W2 task only)."""
    cover = sum(max(0, min(task["end"], o["end"]) - max(task["start"], o["start"]))
                for o in same_sm if o["cta"] != task["cta"] and (w1 is None or o["w1"] == w1))
    return cover / max(1, task["end"] - task["start"])


def sibling_durations(tasks: list[dict]) -> dict[str, dict[str, float]]:
    """Two CTAs per SM (session 39's ``sibling.md``: a task ran ~25 % faster while the SM's other CTA was idle, so
    where a schedule places its tasks matters beside how many each CTA runs): per GEMM, the tasks whose SM sibling
    was busy through more than :data:`SIBLING_SHARE` of them, or idle through as much, their count and median
    duration (µs): ``{"w1_busy": {"n", "dur_us"}, "w1_idle": ..., "w2_busy": ..., "w2_idle": ...}`` (the keys with
    tasks); and every W1 task by whether the sibling ran W1 tasks through more than half of it, ``w1_pair_w1`` /
    ``w1_pair_other`` (session 41: a second-round W1 task beside another W1 task ran ~40 % longer than one whose
    sibling had moved on to W2 tasks, so where the claims put those tasks mattered); empty for one CTA per SM."""
    by_sm: dict[int, list[dict]] = {}
    for t in tasks:
        by_sm.setdefault(t["sm"], []).append(t)
    groups: dict[str, list[float]] = {}
    for on_sm in by_sm.values():
        if len({t["cta"] for t in on_sm}) < 2:
            continue
        for t in on_sm:
            if t["end"] <= t["start"]:
                continue
            dur = (t["end"] - t["start"]) / 1e3
            if t["w1"]:
                pair = "w1_pair_w1" if sibling_cover(t, on_sm, True) > 0.5 else "w1_pair_other"
                groups.setdefault(pair, []).append(dur)
            cover = sibling_cover(t, on_sm)
            state = "busy" if cover > SIBLING_SHARE else "idle" if cover < 1 - SIBLING_SHARE else None
            if state:
                groups.setdefault(f"{'w1' if t['w1'] else 'w2'}_{state}", []).append(dur)
    return {k: {"n": len(v), "dur_us": statistics.median(v)} for k, v in sorted(groups.items())}


def markdown(result: dict) -> str:
    lines = [f"# role2 per task — {result['gpu']}, {result['date']}", "", f"Command: `{result['command']}`", "",
             "µs from the replay's first task claim (the producer thread beginning a task's acquires); median over the "
             f"{result['replays']} recorded replays of each point (each after a trace reset and an L2 flush). W1 / W2: "
             "tasks, first start, median end, last end, median task (start -> end) and its weight stream per CTA, the "
             "producer's wait for the task's acquires (ready - claim; W2: its block's W1 tiles). SM busy: the part of "
             "role2's span an SM had a task in its consumers (mean / min). Even span: the first start plus the tasks' "
             "work spread evenly over the CTAs (what balance alone could give), and its ratio to the span.", "",
             "| model | T | tasks | span | W1 n / first start / median end / last end | W1 task µs (GB/s) "
             "| W2 n / first start / median end / last end | W2 task µs (GB/s) | W2 wait median / max | SM busy "
             "mean / min | even span (/ span) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for model in result["models"]:
        for p in model["points"]:
            s = p["median"]
            w1, w2 = s.get("w1"), s.get("w2")

            def phase(w):
                return (f"{w['n']:.0f} / {w['first_start_us']:.1f} / {w['median_end_us']:.1f} / {w['last_end_us']:.1f}"
                        if w else "-")

            def task(w):
                return f"{w['dur_us']:.1f} ({w['gbps']:.1f})" if w else "-"

            lines.append(f"| {model['model']}{' + shared' if result['shared'] else ''} | {p['tokens']} | "
                         f"{s['tasks']:.0f} | {s['span_us']:.1f} | {phase(w1)} | {task(w1)} | {phase(w2)} | {task(w2)} | "
                         + (f"{w2['wait_median_us']:.1f} / {w2['wait_max_us']:.1f}" if w2 else "-")
                         + f" | {s['sm_busy_mean']:.2f} / {s['sm_busy_min']:.2f} | "
                         + (f"{s['even_span_us']:.1f} ({s['even_span_us'] / s['span_us']:.2f}) |"
                            if "even_span_us" in s else "- |"))
    parts = [(model["model"], p) for model in result["models"] for p in model["points"]
             if any("parts_us" in p["median"].get(k, {}) for k in ("w1", "w2"))]
    if parts:
        lines += ["", "A task's parts (median µs): top = record in hand -> its first activation chunk landed; K loop = "
                  "-> every wgmma waited; after = -> past its last barrier (epilogue or split hand-over, release).", "",
                  "| model | T | W1 top / K loop / after | W2 top / K loop / after |", "|---|---|---|---|"]
        for name, p in parts:
            cell = lambda w: ("{top:.1f} / {kloop:.1f} / {after:.1f}".format(**w["parts_us"])  # noqa: E731
                              if w and "parts_us" in w else "-")
            lines.append(f"| {name} | {p['tokens']} | {cell(p['median'].get('w1'))} | {cell(p['median'].get('w2'))} |")
    tops = [(model["model"], p) for model in result["models"] for p in model["points"]
            if any("top_parts_us" in p["median"].get(k, {}) for k in ("w1", "w2"))]
    if tops:
        lines += ["", "A task's top in parts (median µs, consumer thread 0): bar = record in hand -> past the top's "
                  "barrier; issue = -> the first chunk's copy issued (W2: its W1 bits' wait); scales = -> its token "
                  "scales stored; land = -> the copy's wait over; sync = -> every consumer past the chunk's barrier.",
                  "", "| model | T | W1 " + " / ".join(TOP_PARTS) + " | W2 " + " / ".join(TOP_PARTS) + " |",
                  "|---|---|---|---|"]
        for name, p in tops:
            tcell = lambda w: (" / ".join(f"{w['top_parts_us'][k]:.2f}" for k in TOP_PARTS)  # noqa: E731
                               if w and "top_parts_us" in w else "-")
            lines.append(f"| {name} | {p['tokens']} | {tcell(p['median'].get('w1'))} | "
                         f"{tcell(p['median'].get('w2'))} |")
    quant = [(name, p) for name, p in parts
             if any("kloop_q" in p["median"].get(k, {}).get("parts_us", {}) for k in ("w1", "w2"))]
    if quant:
        qs = " / ".join(f"{round(100 * q)}" for q in KLOOP_QUANTILES)
        lines += ["", f"The K loops' spread (µs at the {qs} % quantiles, each the median over the replays): a build "
                  "with a narrow loop beside BM's shows both modes.", "",
                  "| model | T | W1 K loop | W2 K loop |", "|---|---|---|---|"]
        for name, p in quant:
            qcell = lambda w: (" / ".join(f"{x:.1f}" for x in w["parts_us"]["kloop_q"])  # noqa: E731
                               if w and "kloop_q" in w.get("parts_us", {}) else "-")
            lines.append(f"| {name} | {p['tokens']} | {qcell(p['median'].get('w1'))} | "
                         f"{qcell(p['median'].get('w2'))} |")
    sib = [(model["model"], p) for model in result["models"] for p in model["points"] if p["median"].get("sibling")]
    if sib:
        lines += ["", "Two CTAs per SM: median task µs (tasks) with the SM's other CTA busy through more than "
                  f"{round(100 * SIBLING_SHARE)} % of the task, or idle through as much (where tasks land on the SMs "
                  "matters beside how many each CTA runs); W1 beside W1 / other: every W1 task by whether the other "
                  "CTA ran W1 tasks through more than half of it.", "",
                  "| model | T | W1 sibling busy | W1 sibling idle | W2 sibling busy | W2 sibling idle | W1 beside W1 "
                  "| W1 beside other |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, p in sib:
            cells = [(lambda g: f"{g['dur_us']:.1f} ({g['n']:.0f})" if g else "-")(p["median"]["sibling"].get(k))
                     for k in ("w1_busy", "w1_idle", "w2_busy", "w2_idle", "w1_pair_w1", "w1_pair_other")]
            lines.append(f"| {name} | {p['tokens']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def median_summary(summaries: list[dict]) -> dict:
    """Medians over replays of the numbers :func:`markdown` prints."""
    med = statistics.median
    out: dict[str, Any] = {"tasks": med(s["tasks"] for s in summaries), "span_us": med(s["span_us"] for s in summaries),
                           "sm_busy_mean": med(s["sm_busy"]["mean"] for s in summaries),
                           "sm_busy_min": med(s["sm_busy"]["min"] for s in summaries)}
    if all("even_span_us" in s for s in summaries):  # traces recorded before session 37 have none
        out["even_span_us"] = med(s["even_span_us"] for s in summaries)
    sib_keys = set.intersection(*(set(s.get("sibling", {})) for s in summaries))  # two-CTA builds, session 40 on
    if sib_keys:
        out["sibling"] = {k: {"n": med(s["sibling"][k]["n"] for s in summaries),
                              "dur_us": med(s["sibling"][k]["dur_us"] for s in summaries)} for k in sorted(sib_keys)}
    for k in ("w1", "w2"):
        ws = [s[k] for s in summaries if k in s]
        if ws:
            out[k] = {"n": med(w["n"] for w in ws), "first_start_us": med(w["first_start_us"] for w in ws),
                      "median_end_us": med(w["median_end_us"] for w in ws),
                      "last_end_us": med(w["last_end_us"] for w in ws), "dur_us": med(w["dur_us"]["median"] for w in ws),
                      "gbps": med(w["gbps_per_task_median"] for w in ws),
                      "wait_median_us": med(w["wait_ready_us"]["median"] for w in ws),
                      "wait_max_us": med(w["wait_ready_us"]["max"] for w in ws)}
            if all("top_parts_us" in w for w in ws):
                out[k]["top_parts_us"] = {part: med(w["top_parts_us"][part] for w in ws) for part in TOP_PARTS}
            if all(w.get("parts_us") for w in ws):
                out[k]["parts_us"] = {part: med(w["parts_us"][part] for w in ws) for part in ("top", "kloop", "after")}
                if all("kloop_q" in w["parts_us"] for w in ws):  # traces recorded before session 37 have none
                    out[k]["parts_us"]["kloop_q"] = [med(w["parts_us"]["kloop_q"][i] for w in ws)
                                                     for i in range(len(KLOOP_QUANTILES))]
    return out


def plot(result: dict, path: Path) -> None:
    """A Gantt chart per (model, T) of the replay whose span is the median: one row per CTA, grouped by SM (the SMs in
    ``%smid`` order, an SM's two CTAs side by side), W1 tasks blue, W2 orange, a W2 task's wait for its block's W1
    tiles (claim -> ready) as a thin grey line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(m["model"], p) for m in result["models"] for p in m["points"]]
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 3.4 * len(panels)), squeeze=False)
    for ax, (model, p) in zip(axes[:, 0], panels):
        tasks = point_tasks(p)
        lanes = sorted({(t["sm"], t["cta"]) for t in tasks})
        row = {lane: i for i, lane in enumerate(lanes)}
        for t in tasks:
            y = row[(t["sm"], t["cta"])]
            if not t["w1"] and t["ready"] > t["claim"]:
                ax.plot([t["claim"] / 1e3, t["ready"] / 1e3], [y, y], color="0.8", lw=0.4, zorder=1)
            ax.barh(y, (t["end"] - t["start"]) / 1e3, left=t["start"] / 1e3, height=0.8,
                    color="tab:blue" if t["w1"] else "tab:orange", lw=0, zorder=2)
        ax.set_ylim(-1, len(lanes))
        ax.set_ylabel(f"CTA ({len(lanes)}), by SM")
        ax.set_xlabel("µs from the first task claim")
        s = p["median"]
        ax.set_title(f"{model}{' + shared' if result['shared'] else ''}, T = {p['tokens']}"
                     + (f", tile {':'.join(map(str, result['tile']))}" if result.get("tile") else "")
                     + f": role2 tasks (W1 blue, W2 orange, W2 waiting for W1 grey); span {s['span_us']:.1f} µs")
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run(models: list, tokens: list[int], shared: bool, replays: int, out: Path, command: str, seed: int = 0,
        tile: Optional[tuple] = None) -> dict:
    """Record ``replays`` traced replays of every (model, T) at world 1; write the JSON, markdown and plot.
    ``tile``: role2's (BM, threads[, ctas_per_sm[, w1_split]]) at every T instead of the heuristic's."""
    import torch

    from .protocol import capture_graph
    from .routing import build_point
    from .timeline import loaded_gcmoe, one_gpu_run

    layout, ctx, flush, result = one_gpu_run(shared, replays, command, seed=seed, tile=list(tile) if tile else None)
    for shape in models:
        impl = loaded_gcmoe(shape, layout, ctx, shared, tile)
        trace = impl.workspace().view("role2_trace")
        entry: dict[str, Any] = {"model": shape.name, "loaded": impl.describe(), "points": []}
        for T in tokens:
            prep = impl.prepare(build_point(shape, T, layout, 0, seed))
            graph = None if prep.replay is not None else capture_graph(prep.step)
            replay = prep.replay or graph.replay
            for _ in range(3):
                replay()
            recorded = []
            for _ in range(replays):
                torch.cuda.synchronize()
                trace.zero_()
                flush()
                torch.cuda.synchronize()
                replay()
                torch.cuda.synchronize()
                tasks = decode(trace.cpu().tolist())
                recorded.append({"summary": summarize(tasks, shape.hidden, shape.intermediate), "tasks": tasks})
            prep.close()
            del graph
            point = compact_point(T, recorded)
            entry["points"].append(point)
            print(f"{shape.name} T={T}: role2 span {point['median']['span_us']:.1f} us, "
                  f"{point['median']['tasks']:.0f} tasks", flush=True)
        impl.unload_model()
        result["models"].append(entry)
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / "tasks.json.gz", "wt") as f:  # 10-15 000 task rows per point at T = 256
        json.dump(result, f)
    (out / "tasks.md").write_text(markdown(result))
    plot(result, out / "tasks.png")
    return result
