"""What the layer graph costs inside a model's decode step: many layers captured in one torch graph.

``python -m gcmoe_runtime.bench layers --model M [--shared] [--tokens ...] [--layers 20] [--impl ...] --out DIR``
(one GPU, world 1). For each implementation and T the call is prepared on ``--layers`` sets of weights (the loaded
ones and ``GcMoeBench.clone_layers`` copies: other addresses, the same bytes per call, as a model's layers meet the
L2) and captured twice: one layer per torch graph (the paper protocol's replay, here back to back on the loaded
weights) and every layer in one torch graph, in order (a model's decode step without its attention). Both are replayed
back to back, ``--runs`` times in alternating order, timed with CUDA events; per layer µs = a run's time / (replays x
layers per graph). Why: a graph edge between the two green contexts costs its latency on the next node even when
the upstream kernel ended long before (``tests/runtime/bench_graph_overhead.py`` with empty kernels; session 56 with
real ones: the role1 -> role3 edge ~3.5 µs per layer at every T), and the protocol's one-layer replays hide most of it
behind their host-bound launch.

``--role3-after all`` (an A/B arm) builds every layer graph of the process with role3 after every other node, the
graph before session 56 (since then role3 follows role2 and role4 only at P = 1, ``graph.role3_waits_for_role1``);
``role2`` the P = 1 graph whatever the rule says. Run each arm in its own process and compare the same rows.

An instrument, not the protocol: no L2 flush (the one-layer graph reruns the same weights, the many-layer graph
different ones: compare modes within a row kind, not the two kinds' absolute values).
"""
from __future__ import annotations

import datetime
import json
import statistics
from pathlib import Path
from typing import Any, Optional

#: ``--role3-after``: ``shipped`` leaves the runtime's rule (``graph.role3_waits_for_role1``: at P = 1 role3 follows
#: role2 and role4 only); ``all`` puts role3 after every other node (the layer graph before session 56); ``role2``
#: drops the role1 -> role3 edge (the P = 1 graph)
ROLE3_AFTER = ("shipped", "all", "role2")


_SHIPPED_RULE = None  # graph.role3_waits_for_role1 as the runtime has it, kept at the first patch


def patch_role3_edges(after: str) -> None:
    """Apply ``--role3-after`` to every layer graph this process builds from now on (``shipped`` also undoes an
    earlier arm)."""
    global _SHIPPED_RULE
    if after not in ROLE3_AFTER:
        raise ValueError(f"role3_after={after!r}: one of {ROLE3_AFTER}")
    from gcmoe_runtime import graph

    if _SHIPPED_RULE is None:
        _SHIPPED_RULE = graph.role3_waits_for_role1
    graph.role3_waits_for_role1 = {"shipped": _SHIPPED_RULE, "all": lambda world_size: True,
                                   "role2": lambda world_size: False}[after]
    graph.clear_cache()


def _time_replays(replay, n: int) -> float:
    """µs of ``n`` back-to-back replays, CUDA events around them."""
    import torch

    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3


#: GPU time each graph kind replays before its timed runs: session 56's four-run A/B at DSV-4.1-Flash + shared T = 1
#: (~20 ms a run) had every process's first two runs ~8 % slower than its last two in both arms, with a quarter run
#: of warm-up (likely the clocks coming up after the model's load: the first ~40 ms of GPU work)
WARMUP_S = 0.25


def warm_up(replay, count: int, seconds: float = WARMUP_S) -> None:
    """Replay in rounds of ``count`` until ``seconds`` of GPU time have passed (at least one round)."""
    spent = 0.0
    while True:
        spent += _time_replays(replay, count) * 1e-6
        if spent >= seconds:
            return


def measure_point(preps: list, replays: int, runs: int) -> dict:
    """One (implementation, T): the one-layer and all-layer graphs' µs per layer over ``runs`` alternating runs."""
    from .protocol import capture_graph

    one = capture_graph(preps[0].step)
    many = capture_graph(lambda: [p.step() for p in preps])
    n = len(preps)
    kinds = {"one": (one.replay, replays * n, 1), "all": (many.replay, replays, n)}  # the same layers per run
    for replay, count, _ in kinds.values():
        warm_up(replay, count)
    per_layer: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(runs):
        for k in (kinds if r % 2 == 0 else list(kinds)[::-1]):
            replay, count, layers = kinds[k]
            per_layer[k].append(_time_replays(replay, count) / (count * layers))
    for p in preps:
        if p.close:
            p.close()
    row = {f"{k}_us": statistics.median(v) for k, v in per_layer.items()}
    row.update({f"{k}_runs": [round(x, 3) for x in v] for k, v in per_layer.items()})
    row["all_minus_one_us"] = row["all_us"] - row["one_us"]
    return row


def run(model, tokens: list[int], shared: bool, layers: int, impls: list[str], replays: int, runs: int, out: Path,
        command: str, role3_after: str = "shipped", seed: int = 0) -> dict:
    """Every (implementation, T) of ``model`` at world 1; writes ``layers.json`` / ``layers.md`` / ``layers.png``."""
    import torch

    from .impl import RankContext, make
    from .routing import Layout, build_point

    if not (isinstance(layers, int) and layers >= 2):
        raise ValueError(f"layers={layers!r}: an integer >= 2 (one layer per graph is the other row kind)")
    patch_role3_edges(role3_after)
    device = torch.device("cuda:0")
    torch.cuda.set_device(0)
    layout = Layout(world=1, ep=1)
    ctx = RankContext(rank=0, world=1, device=device, seed=seed)
    result: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(), "model": model.name, "shared": shared, "layers": layers,
        "replays": replays, "runs": runs, "role3_after": role3_after, "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "rows": []}
    for name in impls:
        impl = make(name)
        why = impl.unsupported(model, layout, shared)
        if why:
            result["rows"].append({"impl": name, "skipped": why})
            continue
        impl.load_model(model, layout, ctx, shared)
        impl.clone_layers(layers - 1)
        for T in tokens:
            point = build_point(model, T, layout, 0, seed)
            row = measure_point([impl.prepare(point, layer=k) for k in range(layers)], replays, runs)
            row.update(impl=name, tokens=T)
            result["rows"].append(row)
            print(f"{name} T={T}: one {row['one_us']:.2f} all {row['all_us']:.2f} µs per layer", flush=True)
        impl.unload_model()
    out.mkdir(parents=True, exist_ok=True)
    (out / "layers.json").write_text(json.dumps(result, indent=1))
    (out / "layers.md").write_text(markdown(result))
    _plot(result, out / "layers.png")
    return result


def markdown(result: dict) -> str:
    lines = [f"# {result['model']}{' + shared' if result['shared'] else ''}: {result['layers']} layers per torch graph "
             f"({result['gpu']}, {result['date']}, role3 after {result['role3_after']})", "",
             f"`{result['command']}`", "",
             "| impl | T | one layer per graph (µs) | all layers in one graph (µs per layer) | all - one | runs (all) "
             "|",
             "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        if "skipped" in r:
            lines.append(f"| {r['impl']} | - | skipped: {r['skipped']} | | | |")
            continue
        lines.append(f"| {r['impl']} | {r['tokens']} | {r['one_us']:.2f} | {r['all_us']:.2f} | "
                     f"{r['all_minus_one_us']:+.2f} | {' / '.join(f'{x:.2f}' for x in r['all_runs'])} |")
    return "\n".join(lines) + "\n"


def _plot(result: dict, path: Path) -> Optional[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for name in dict.fromkeys(r["impl"] for r in result["rows"] if "skipped" not in r):
        rows = [r for r in result["rows"] if r.get("impl") == name and "skipped" not in r]
        ts = [r["tokens"] for r in rows]
        ax.plot(ts, [r["all_us"] for r in rows], "o-", label=f"{name}: {result['layers']} layers per graph")
        ax.plot(ts, [r["one_us"] for r in rows], "x--", label=f"{name}: one layer per graph")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per rank")
    ax.set_ylabel("µs per layer")
    ax.set_title(f"{result['model']}: layer graphs in a model step (role3 after {result['role3_after']})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
