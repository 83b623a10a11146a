"""Benchmark (not a test): what the layer graph's shape costs per replay when its kernels have nothing to do.

The handshake self-test kernels (``results/runtime/selftest-sm90a.gcmoe``: the role1 / role2 / role3 slots, one warp
each, ``work_ns = 0``: each checks its generation and returns) replayed back to back as the layer's 3-node graph in
six placements:

* ``green2``: role1 on the dispatch green context, role2 and role3 on the compute one, role3 after both (the layer
  graph at P > 1);
* ``green2-serial``: the same with role2 after role1 (the overlap-off ablation's graph);
* ``green2-r3``: the same with role3 after role2 only, one cross-context edge (role1 -> role3) fewer per layer (the
  layer graph at P = 1 since session 56, ``graph.role3_waits_for_role1``; session 55 measured green2 +4.0 µs per
  layer over one context in ``captured-x20``, two cross-context edges per layer; session 56 green2-r3 +1.4);
* ``green1``: every node on the compute green context: one green context, not two;
* ``primary`` / ``primary-serial``: every node in the primary context (baselines (b) / (a)'s graphs);

and three ways of launching it: ``launch`` (``cuGraphLaunch`` of the layer graph per replay), ``captured`` (the
layer as a child graph in a torch CUDA graph, one per replay: what the paper protocol replays), ``captured-x20``
(twenty layers in one torch graph: the host's launch cost amortised, so what is left is the device's). Session 7
measured two green contexts at ~9-10 µs per replay over the primary context at P = 2 with real kernels
(``docs/PERFORMANCE.md`` "Session 7: the fixed cost of two green contexts") and refuted the cross-context edge as its
cause; this separates the graph's own per-replay cost by placement from anything the kernels do (one-warp kernels:
not the cost of distributing a layer kernel's 4-128 CTAs).

    python3 tests/runtime/bench_graph_overhead.py [--replays 2000] [--runs 4] [--json OUT]

Runs every (placement, launch) ``--runs`` times in alternating order (forward, then backward, ...) and prints one
row per configuration: the median device µs per layer over the runs, its runs, its difference from ``primary`` in
the same launch mode, and the host's µs per launch call (a row whose host time reaches its device time is
host-bound: read ``captured-x20``).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[2])]  # gpu_selftest, repo

PLACEMENTS = ("green2", "green2-serial", "green2-r3", "green1", "primary", "primary-serial")
LAUNCHES = ("launch", "captured", "captured-x20")
INNER = {"launch": 1, "captured": 1, "captured-x20": 20}  # layers per launch call
CONFIGS = tuple((p, m) for m in LAUNCHES for p in PLACEMENTS)
REFERENCE = "primary"


def run_order(runs: int) -> list[tuple[str, str]]:
    """Every configuration ``runs`` times: forward, backward, forward, ... (drift hits every configuration alike)."""
    order = []
    for r in range(runs):
        order.extend(CONFIGS if r % 2 == 0 else CONFIGS[::-1])
    return order


def summarise(times: dict[tuple[str, str], list[float]], host: dict[tuple[str, str], list[float]]) -> list[dict]:
    """``times`` / ``host``: configuration -> device µs per layer / host µs per launch call of each run. One row per
    configuration (:data:`CONFIGS`' order): the medians, the runs, and the device median's difference from
    :data:`REFERENCE` in the same launch mode."""
    rows = []
    for p, m in CONFIGS:
        med = statistics.median(times[(p, m)])
        ref = statistics.median(times[(REFERENCE, m)])
        rows.append(dict(placement=p, launch=m, us=med, runs=list(times[(p, m)]), minus_primary_us=med - ref,
                         host_us_per_call=statistics.median(host[(p, m)])))
    return rows


def table(rows: list[dict]) -> str:
    out = ["| placement | launch | µs per layer (median) | runs | - primary (same launch) | host µs per call |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        runs = " / ".join(f"{x:.2f}" for x in r["runs"])
        out.append(f"| {r['placement']} | {r['launch']} | {r['us']:.2f} | {runs} | {r['minus_primary_us']:+.2f} | "
                   f"{r['host_us_per_call']:.2f} |")
    return "\n".join(out)


@dataclass(frozen=True)
class OneGreenContext:
    """What ``LayerGraph`` reads of a partition, with every node on one context (``green1``: the compute one)."""

    device: int
    dispatch_sms: int
    compute_sms: int
    dispatch_ctx: Any
    compute_ctx: Any
    green_key: tuple

    @classmethod
    def of(cls, gp: Any) -> "OneGreenContext":
        return cls(gp.device, gp.dispatch_sms, gp.compute_sms, gp.compute_ctx, gp.compute_ctx, tuple(gp.key()))

    def key(self) -> tuple:
        return ("one-green-context",) + self.green_key


def main() -> None:
    import torch

    from gcmoe_runtime import green
    from gcmoe_runtime.graph import RoleNode, get_layer_graph
    from gpu_selftest import Handshake, environment

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replays", type=int, default=2000, help="replays per run")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.replays < 1 or a.runs < 1:
        raise SystemExit("--replays and --runs must be >= 1")

    hs = Handshake(0)
    vals = hs.values(work_ns=0)
    roles = {r: RoleNode(k, k.args(vals)) for r, k in hs.kernels.items()}
    parts = {"green2": hs.gp, "green1": OneGreenContext.of(hs.gp),
             "primary": green.full_device_partition(0, hs.gp.requested)}
    graphs = {}
    for p in PLACEMENTS:
        base, serial = p.split("-")[0], p.endswith("-serial")
        graphs[p] = get_layer_graph(roles, parts[base], serialize_roots=serial, role3_after_role1=p != "green2-r3")
    stream = torch.cuda.current_stream()
    replay = {}
    for p, g in graphs.items():
        replay[(p, "launch")] = (lambda g=g: g.launch(stream))
        for _ in range(3):
            g.launch(stream)  # instantiated (and warm) before any capture: instantiation is refused during one
    torch.cuda.synchronize()
    captured = []  # kept alive while their replays run
    for p, g in graphs.items():
        for m in LAUNCHES[1:]:
            tg = torch.cuda.CUDAGraph()
            with torch.cuda.graph(tg):
                for _ in range(INNER[m]):
                    g.attach(torch.cuda.current_stream())
            captured.append(tg)
            replay[(p, m)] = tg.replay
    torch.cuda.synchronize()

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times: dict[tuple[str, str], list[float]] = {c: [] for c in CONFIGS}
    host: dict[tuple[str, str], list[float]] = {c: [] for c in CONFIGS}
    layers = 0
    before = hs.state()
    for c in run_order(a.runs):
        fn, inner = replay[c], INNER[c[1]]
        calls = max(1, a.replays // inner)
        for _ in range(max(1, 50 // inner)):
            fn()
            layers += inner
        start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        end.record()
        end.synchronize()
        layers += calls * inner
        times[c].append(start.elapsed_time(end) * 1e3 / (calls * inner))
        host[c].append((t1 - t0) * 1e6 / calls)
    after = hs.state()
    hs.trap.check()
    gens = {k: after[k] - before[k] for k in ("producer_gen", "consumer_gen", "finalize_gen")}
    ok = all(v == layers for v in gens.values()) and after["errors"] == 0  # each layer runs each kernel once
    rows = summarise(times, host)
    print(table(rows))
    print(f"generations advanced {gens} (expected {layers} each), errors {after['errors']}: "
          f"{'ok' if ok else 'MISMATCH'}")
    if a.json:
        rec = dict(time_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), env=environment(),
                   partition=[hs.gp.dispatch_sms, hs.gp.compute_sms], workqueue=hs.gp.workqueue_status,
                   replays=a.replays, runs=a.runs, rows=rows, generations=gens, errors=after["errors"], ok=ok)
        Path(a.json).write_text(json.dumps(rec, indent=1))
    if not ok:
        raise SystemExit("the handshake kernels did not all run once per replay")


if __name__ == "__main__":
    main()
