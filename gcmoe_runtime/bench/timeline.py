"""Where one layer replay's time goes: each role kernel's start and end inside the graph, from the CUDA profiler.

``python -m gcmoe_runtime.bench timeline --model M [--shared] [--tokens ...] --out DIR`` (one GPU, world 1): for each
T the gc-moe operator (green contexts, overlap on) is prepared as the sweep prepares it, warmed up, the L2 flushed,
and ``--replays`` back-to-back replays of its layer graph are recorded with ``torch.profiler`` (CUDA activity records:
CUPTI timestamps of every kernel, graph nodes included). Each replay's kernels are placed relative to the first
kernel of that replay; the medians over replays give a per-role timeline (start, end, duration), the span (first
start to last end) and the replay period (start to next start: what the protocol's per-invocation latency measures,
launch gaps included). Why: the protocol times the whole layer; which role is on its critical path, and how much of
role4 hides behind role1, decide what to optimise next (results/operator/NEXT.md). Writes ``timeline.json``,
``timeline.md`` and ``timeline.png``.

This is an instrument, not the protocol: the profiler adds its own overhead per kernel (compare the period with the
sweep's latency at the same point), and back-to-back replays leave the weights of one replay in L2 for the next only as
far as 50 MB of L2 allows (the routed weights of every production point are larger). ``--cold`` flushes the L2 before
every recorded replay instead (the protocol's flusher, between the replays, outside their spans; the period then holds
the flush and is not reported): the layer as a model's decode step meets it, its weights evicted by the other layers
since its last call (session 47: routed P = 1 spans 6-9 % longer than back to back at T = 1-8; part of it may be the
flush's own dirty lines written back while the replay starts). ``--flush read`` evicts by reading the flush buffer
instead of writing it, leaving clean lines: the cold replay without that write-back. ``--flush layers
--other-layers N`` replays N more layers instead (the same call on copies of the weights, on the same buffer): what a
model's decode step runs between two calls of one layer, whose weights are read EVICT_FIRST as this one's are.
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any, Iterable, Optional

from .protocol import FLUSH_MODES

ROLES = ("role1", "role4", "role2", "role3")
_ROLE_RE = re.compile(r"gcmoe_sm90_(role[1-4])_")


def role_of(kernel_name: str) -> str | None:
    """The role a kernel belongs to, from its entry name (``gcmoe_sm90_role2_ring_...``); None for other kernels."""
    m = _ROLE_RE.search(kernel_name)
    return m.group(1) if m else None


def replay_timelines(events: Iterable[tuple[str, float, float]]) -> list[dict]:
    """Kernel records ``(name, start_us, end_us)`` -> one dict per replay: ``{role: (start, end)}`` relative to the
    replay's first kernel, and ``t0`` (its absolute start). The i-th kernel of each role belongs to replay i (the graph
    launches each role once per replay); replays where a role is missing at the end are dropped."""
    per_role: dict[str, list[tuple[float, float]]] = {}
    for name, start, end in events:
        role = role_of(name)
        if role is not None:
            if end < start:
                raise ValueError(f"kernel {name}: end {end} before start {start}")
            per_role.setdefault(role, []).append((float(start), float(end)))
    if not per_role:
        return []
    for v in per_role.values():
        v.sort()
    n = min(len(v) for v in per_role.values())
    out = []
    for i in range(n):
        t0 = min(v[i][0] for v in per_role.values())
        out.append({"t0": t0, **{r: (v[i][0] - t0, v[i][1] - t0) for r, v in per_role.items()}})
    return out


def summarize(timelines: list[dict]) -> dict:
    """Medians over replays: per role start / end / duration (µs), the span (first start to last end) and the period
    (one replay's start to the next's)."""
    if not timelines:
        raise ValueError("no complete replay in the profile (no gcmoe role kernels recorded)")
    roles = [r for r in ROLES if r in timelines[0]]
    med = statistics.median
    res: dict[str, Any] = {"replays": len(timelines), "roles": {}}
    for r in roles:
        res["roles"][r] = {"start_us": med(t[r][0] for t in timelines), "end_us": med(t[r][1] for t in timelines),
                           "dur_us": med(t[r][1] - t[r][0] for t in timelines)}
    res["span_us"] = med(max(t[r][1] for r in roles) for t in timelines)
    periods = [b["t0"] - a["t0"] for a, b in zip(timelines, timelines[1:])]
    res["period_us"] = med(periods) if periods else None
    return res


def markdown(result: dict) -> str:
    """The per-model tables of a :func:`run` result."""
    cold = result.get("cold", False)
    before = {"write": "an L2 flush", "read": "an L2 flush by reads",
              "layers": f"{result.get('other_layers')} other layers' replays (the call on copies of its weights)"}[
        result.get("flush", "write")]
    lines = [f"# Layer timeline per role — {result['gpu']}, {result['date']}", "",
             f"Command: `{result['command']}`", "",
             "Each cell: start-end (µs) relative to the replay's first kernel, median over "
             + (f"{result['replays']} replays, each after {before} (cold; the period holds it: not reported)"
                if cold else f"{result['replays']} back-to-back replays after {before}")
             + " (torch.profiler / CUPTI; the profiler adds per-kernel overhead: compare the period with the sweep's "
             "latency).", ""]
    for model in result["models"]:
        lines += [f"## {model['model']}" + (" + shared" if result["shared"] else ""), "",
                  "| T | " + " | ".join(ROLES) + " | span µs | period µs |",
                  "|---|" + "---|" * (len(ROLES) + 2)]
        for p in model["points"]:
            s = p["summary"]
            cells = [f"{s['roles'][r]['start_us']:.1f}-{s['roles'][r]['end_us']:.1f} ({s['roles'][r]['dur_us']:.1f})"
                     if r in s["roles"] else "-" for r in ROLES]
            per = f"{s['period_us']:.1f}" if s["period_us"] is not None and not cold else "-"
            lines.append(f"| {p['tokens']} | " + " | ".join(cells) + f" | {s['span_us']:.1f} | {per} |")
        lines.append("")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    """One Gantt panel per model: a row of role bars per T (median start-end)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"role1": "tab:blue", "role4": "tab:green", "role2": "tab:orange", "role3": "tab:red"}
    models = result["models"]
    fig, axes = plt.subplots(len(models), 1, figsize=(11, 1.2 + 0.9 * max(len(m["points"]) for m in models)
                                                       * len(models)), squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        for y, p in enumerate(model["points"]):
            s = p["summary"]["roles"]
            for k, r in enumerate([r for r in ROLES if r in s]):
                ax.barh(y + (k - 1.5) * 0.2, s[r]["end_us"] - s[r]["start_us"], left=s[r]["start_us"], height=0.18,
                        color=colors[r], label=r if y == 0 else None)
        ax.set_yticks(range(len(model["points"])), [f"T={p['tokens']}" for p in model["points"]])
        ax.set_xlabel("µs from the replay's first kernel (median)")
        ax.set_title(model["model"] + (" + shared" if result["shared"] else ""))
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def trace_point(replay, flush, replays: int, warm: int = 3, cold: bool = False) -> list[tuple[str, float, float]]:
    """Kernel records of ``replays`` back-to-back ``replay()`` calls after ``warm`` unrecorded ones and an L2 flush
    (``cold``: each after an L2 flush)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warm):
        replay()
    flush()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(replays):
            if cold and i:
                flush()
            replay()
        torch.cuda.synchronize()
    return [(e.name, float(e.time_range.start), float(e.time_range.end)) for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA]


def layer_timelines(runs: list, flush, replays: int, cold: bool, layers: bool) -> tuple[list, list[dict]]:
    """Layer 0's replays (``runs[0]``) traced as :func:`trace_point` does: ``(events, timelines)``. ``layers``: the
    other layers' replays (``runs[1:]``) take the flush's place — before the recording and, ``cold``, before every
    recorded replay of layer 0, whose kernels then come every ``len(runs)``-th replay of the same names."""
    between = (lambda: [r() for r in runs[1:]]) if layers else flush
    events = trace_point(runs[0], between, replays, cold=cold)
    return events, replay_timelines(events)[::len(runs) if layers and cold else 1]


def one_gpu_run(shared: bool, replays: int, command: str, **extra) -> tuple:
    """What the one-GPU instruments (this module, ``task_trace``) share: the device, world-1 layout and rank context,
    an L2 flusher (the protocol's; ``flush=MODE`` in ``extra``: another :data:`~.protocol.FLUSH_MODES`) and the result
    header; returns ``(layout, ctx, flush, result)``."""
    import datetime
    import torch

    from .impl import RankContext
    from .protocol import L2Flusher, PAPER
    from .routing import Layout

    device = torch.device("cuda:0")
    torch.cuda.set_device(0)
    layout = Layout(world=1, ep=1)
    ctx = RankContext(rank=0, world=1, device=device, seed=extra.pop("seed", 0))
    mode = extra.get("flush", "write")
    flush = L2Flusher(PAPER.l2_flush_bytes, device, mode if mode in FLUSH_MODES else "write")
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None)  # what the flush must exceed
    result: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "l2_bytes": l2, "shared": shared, "replays": replays,
                              "command": command, **extra,
                              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                              "models": []}
    return layout, ctx, flush, result


def loaded_gcmoe(shape, layout, ctx, shared: bool, tile: Optional[tuple] = None):
    """The gc-moe implementation (green contexts, overlap on) with ``shape`` loaded, or SystemExit with the reason;
    ``tile``: role2's (BM, threads[, ctas_per_sm[, w1_split]]) forced at every T instead of the heuristic's."""
    from .impl import make

    impl = make("gc-moe")
    why = impl.unsupported(shape, layout, shared)
    if why:
        raise SystemExit(f"{shape.name}: {why}")
    impl.load_model(shape, layout, ctx, shared)
    if tile:
        impl.force_tile(tuple(tile))
    return impl


#: ``--flush`` choices: the protocol flusher's modes, and ``layers`` (``other_layers`` more layers replayed instead)
TIMELINE_FLUSHES = FLUSH_MODES + ("layers",)


def run(models: list, tokens: list[int], shared: bool, replays: int, out: Path, command: str, seed: int = 0,
        tile: Optional[tuple] = None, cold: bool = False, flush: str = "write", other_layers: int = 3) -> dict:
    """Trace every (model, T) at world 1 with the gc-moe implementation; write the JSON, markdown and plot.
    ``tile``: role2's (BM, threads[, ctas_per_sm[, w1_split]]) at every T instead of the heuristic's; ``cold``: an L2
    flush before every recorded replay; ``flush``: how (:data:`TIMELINE_FLUSHES`): ``layers`` replays
    ``other_layers`` more layers instead — the same call on copies of the weights, the same buffer
    (``GcMoeBench.clone_layers``) — as a model's decode step runs its other layers between two calls of one."""
    from .protocol import capture_graph
    from .routing import build_point

    if flush not in TIMELINE_FLUSHES:
        raise ValueError(f"timeline flush={flush!r} must be one of {TIMELINE_FLUSHES}")
    layers = flush == "layers"
    if layers and not (isinstance(other_layers, int) and other_layers >= 1):
        raise ValueError(f"timeline other_layers={other_layers!r} must be an integer >= 1")
    extra = {"other_layers": other_layers} if layers else {}
    layout, ctx, flusher, result = one_gpu_run(shared, replays, command, seed=seed, tile=list(tile) if tile else None,
                                               cold=cold, flush=flush, **extra)
    for shape in models:
        impl = loaded_gcmoe(shape, layout, ctx, shared, tile)
        if layers:
            impl.clone_layers(other_layers)
        entry: dict[str, Any] = {"model": shape.name, "loaded": impl.describe(), "points": []}
        for T in tokens:
            point = build_point(shape, T, layout, 0, seed)
            preps = [impl.prepare(point, layer=k) for k in range(other_layers + 1 if layers else 1)]
            graphs = [None if p.replay is not None else capture_graph(p.step) for p in preps]  # as the sweep does
            runs = [p.replay or g.replay for p, g in zip(preps, graphs)]
            events, tl = layer_timelines(runs, flusher, replays, cold, layers)
            entry["points"].append({"tokens": T, "summary": summarize(tl),
                                    "kernels": sorted({n for n, _, _ in events})})
            for p in preps:
                p.close()
            del graphs
            print(f"{shape.name} T={T}: span {entry['points'][-1]['summary']['span_us']:.1f} us", flush=True)
        impl.unload_model()
        result["models"].append(entry)
    out.mkdir(parents=True, exist_ok=True)
    (out / "timeline.json").write_text(json.dumps(result, indent=1))
    (out / "timeline.md").write_text(markdown(result))
    plot(result, out / "timeline.png")
    return result
