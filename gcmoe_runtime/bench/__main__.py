"""Command line: `python -m gcmoe_runtime.bench sweep|ablation|floor|gate|report|timeline|tasks|list`."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from .timeline import TIMELINE_FLUSHES


def _tokens(s: str) -> tuple[int, ...]:
    try:
        ts = tuple(int(x) for x in s.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--tokens {s!r}: expected comma-separated integers") from None
    if not ts or any(t < 1 for t in ts):
        raise argparse.ArgumentTypeError(f"--tokens {s!r}: need positive integers")
    return ts


def _tile(s: str | None) -> tuple[int, ...] | None:
    """``--tile BM:THREADS[:CTAS[:SPLIT]]`` of the one-GPU instruments; the runtime validates the values."""
    if not s:
        return None
    try:
        return tuple(int(v) for v in s.split(":"))
    except ValueError:
        raise SystemExit(f"--tile {s!r}: expected BM:THREADS[:CTAS[:SPLIT]] integers") from None


ABLATION_REQUESTS = (4, 8, 12, 16, 20, 24, 32)


def _requests(s: str) -> tuple[int, ...]:
    try:
        rs = tuple(int(x) for x in s.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--requests {s!r}: expected comma-separated integers") from None
    if not rs or any(r < 1 for r in rs) or len(set(rs)) != len(rs):
        raise argparse.ArgumentTypeError(f"--requests {s!r}: need distinct integers >= 1")
    return rs


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", action="append", required=True,
                   help="manifest name (manifests/NAME.yaml), YAML path, or NAME:H=..,I=..,E=..,k=..[,shared=..,kgroup=..]")
    p.add_argument("--world", type=int, default=1, help="processes/GPUs (1, or = --ep)")
    p.add_argument("--ep", type=int, default=None, help="EP degree whose per-rank share is measured (default world)")
    p.add_argument("--tokens", type=_tokens, default=None, help="tokens per rank, default 1,2,4,...,256")
    p.add_argument("--shared", action="store_true", help="include the shared experts")
    p.add_argument("--replays", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--measured", type=int, default=30)
    p.add_argument("--deviation", default=None, help="why the protocol differs from the paper's (required if it does)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gate", choices=("enforce", "record", "skip"), default="enforce")
    p.add_argument("--no-floor", action="store_true")
    p.add_argument("--budget-s", type=float, default=None,
                   help="measurement time for this invocation; points after it are recorded as not measured")
    p.add_argument("--floor-json", default=None,
                   help="reuse ceilings measured earlier in this session (`floor --world P --json F`) instead of "
                        "measuring them again")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--stem", default="results")
    p.add_argument("--cpu-dry-run", action="store_true",
                   help="exercise the whole harness on the CPU (gloo for P>1); timings are not performance")


def parser() -> argparse.ArgumentParser:
    """The command line's parser (also what tests check prepared GPU steps files against)."""
    ap = argparse.ArgumentParser(prog="python -m gcmoe_runtime.bench", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)

    sw = sub.add_parser("sweep", help="run the protocol over models x implementations x T")
    _common(sw)
    sw.add_argument("--impl", action="append", required=True, help="registered name, NAME@ARG, or module:factory")
    sw.add_argument("--subject", default=None, help="implementation whose speedup is reported (default: first --impl)")

    ab = sub.add_parser("ablation", help="dispatch-SM request x overlap on/off, per T (gc-moe with green contexts)")
    _common(ab)
    ab.add_argument("--requests", type=_requests, default=ABLATION_REQUESTS,
                    help="dispatch-SM requests, default " + ",".join(map(str, ABLATION_REQUESTS)))
    ab.add_argument("--on", default="gc-moe", help="implementation for overlap on (takes @REQUEST)")
    ab.add_argument("--off", default="gc-moe-nooverlap", help="implementation for overlap off (takes @REQUEST)")
    ab.add_argument("--no-off", action="store_true", help="overlap on only")

    fl = sub.add_parser("floor", help="measure streaming read bandwidth (+ NVLink round trip) to a JSON file")
    fl.add_argument("--world", type=int, default=1)
    fl.add_argument("--json", type=Path, required=True)
    fl.add_argument("--no-pingpong", action="store_true")

    gt = sub.add_parser("gate", help="run the idle-GPU gate only")
    gt.add_argument("--json", type=Path, default=None)

    rp = sub.add_parser("report", help="re-render markdown + plots from a results JSON")
    rp.add_argument("results", type=Path)
    rp.add_argument("--out", type=Path, default=None)
    rp.add_argument("--subject", default=None)

    tl = sub.add_parser("timeline", help="per-role kernel timeline of one layer replay (world 1, CUDA profiler)")
    tl.add_argument("--model", action="append", required=True, help="as for sweep")
    tl.add_argument("--tokens", type=_tokens, default=(1, 8, 64, 256))
    tl.add_argument("--shared", action="store_true")
    tl.add_argument("--replays", type=int, default=20, help="recorded back-to-back replays per point")
    tl.add_argument("--cold", action="store_true", help="an L2 flush before every recorded replay (the weights cold, "
                    "as in a model's decode step) instead of back-to-back replays")
    tl.add_argument("--flush", choices=TIMELINE_FLUSHES, default="write", help="how the L2 is flushed: write (the "
                    "protocol's: leaves the flush buffer's dirty lines), read (leaves clean lines) or layers (replays "
                    "--other-layers more layers: the same call on copies of the weights, as a model's decode step)")
    tl.add_argument("--other-layers", type=int, default=3, help="with --flush layers: how many")
    tl.add_argument("--seed", type=int, default=0)
    tl.add_argument("--tile", default=None, help="role2 BM:THREADS[:CTAS[:SPLIT]] at every T (a build the bundle holds)")
    tl.add_argument("--out", type=Path, required=True)

    tk = sub.add_parser("tasks", help="role2 task by task inside one replay (trace bundles: ci/build_trace_bundles.sh)")
    tk.add_argument("--model", action="append", required=True, help="as for sweep")
    tk.add_argument("--tokens", type=_tokens, default=(1, 2, 4))
    tk.add_argument("--shared", action="store_true")
    tk.add_argument("--replays", type=int, default=5, help="recorded replays per point (each after a trace reset)")
    tk.add_argument("--seed", type=int, default=0)
    tk.add_argument("--tile", default=None, help="role2 BM:THREADS[:CTAS[:SPLIT]] at every T (a build the bundle holds)")
    tk.add_argument("--out", type=Path, required=True)

    ly = sub.add_parser("layers", help="µs per layer with many layers in one torch graph, as in a model's decode "
                        "step, against one layer per graph (world 1; bench.model_step)")
    ly.add_argument("--model", required=True, help="as for sweep (one model)")
    ly.add_argument("--tokens", type=_tokens, default=(1, 2, 4, 8, 64))
    ly.add_argument("--shared", action="store_true")
    ly.add_argument("--layers", type=int, default=20, help="layers in the many-layer graph (>= 2)")
    ly.add_argument("--impl", action="append", default=None, help="implementations (default gc-moe)")
    ly.add_argument("--replays", type=int, default=20, help="replays of the many-layer graph per run")
    ly.add_argument("--runs", type=int, default=4)
    ly.add_argument("--role3-after", choices=("shipped", "all", "role2"), default="shipped", help="A/B arm: role3 "
                    "after every node (all: the graph before session 56) or after role2 / role4 only (role2) in every "
                    "layer graph of the process (bench.model_step)")
    ly.add_argument("--seed", type=int, default=0)
    ly.add_argument("--out", type=Path, required=True)

    sub.add_parser("list", help="list registered implementations")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)

    if a.cmd == "timeline":
        from .shapes import resolve_model
        from .timeline import markdown, run

        res = run([resolve_model(m) for m in a.model], list(a.tokens), a.shared, a.replays, a.out,
                  "python -m gcmoe_runtime.bench " + shlex.join(sys.argv[1:] if argv is None else argv), a.seed,
                  _tile(a.tile), a.cold, a.flush, a.other_layers)
        print(markdown(res))
        return 0

    if a.cmd == "layers":
        from .model_step import markdown as layers_markdown, run as run_layers
        from .shapes import resolve_model

        res = run_layers(resolve_model(a.model), list(a.tokens), a.shared, a.layers, a.impl or ["gc-moe"], a.replays,
                         a.runs, a.out, "python -m gcmoe_runtime.bench " + shlex.join(sys.argv[1:] if argv is None
                                                                                      else argv),
                         a.role3_after, a.seed)
        print(layers_markdown(res))
        return 0

    if a.cmd == "tasks":
        from .shapes import resolve_model
        from .task_trace import markdown as tasks_markdown, run as run_tasks

        res = run_tasks([resolve_model(m) for m in a.model], list(a.tokens), a.shared, a.replays, a.out,
                        "python -m gcmoe_runtime.bench " + shlex.join(sys.argv[1:] if argv is None else argv), a.seed,
                        _tile(a.tile))
        print(tasks_markdown(res))
        return 0

    if a.cmd == "list":
        from .impl import make, registered

        for n in registered():
            print(f"{n}: " + ("parametric (see its module)" if n.endswith("@ARG") else make(n).precision))
        return 0
    if a.cmd == "gate":
        from . import gate

        r = gate.run_gate(gate.default_sampler(), gate.visible_devices(dict(os.environ)))
        print(json.dumps(r.to_json(), indent=1))
        if a.json:
            a.json.write_text(json.dumps(r.to_json(), indent=1))
        return 0 if r.passed else 3
    if a.cmd == "floor":
        from .runner import measure_floor

        r = measure_floor(a.world, a.json, pingpong=not a.no_pingpong)
        print(json.dumps({"read_gbps": [b["gbps"] for b in r["read_bandwidth"]], "nvlink": r["nvlink"]}))
        return 0
    if a.cmd == "report":
        from .report import write_all

        res = json.loads(a.results.read_text())
        stem = a.results.stem
        files = write_all(res, a.out or a.results.parent, a.subject, stem)
        print("\n".join(map(str, files)))
        return 0

    from .protocol import ProtocolConfig
    from .report import write_all
    from .routing import Layout
    from .runner import PAPER_TOKENS, SweepConfig, run_sweep
    from .shapes import resolve_model

    proto = ProtocolConfig(replays_per_window=a.replays, warmup_windows=a.warmup, measured_windows=a.measured)
    if not proto.is_paper and not a.deviation and not a.cpu_dry_run:
        ap.error("the protocol differs from the paper's (100 replays, 10+30 windows): say why with --deviation")
    ablation = None
    if a.cmd == "ablation":
        from .impl import make

        on = [f"{a.on}@{r}" for r in a.requests]
        off = [] if a.no_off else [f"{a.off}@{r}" for r in a.requests]
        # interleaved (on@r, off@r, ...): a --budget-s cut drops whole requests at the end, not one overlap setting
        a.impl = [x for i in range(len(on)) for x in ([on[i], off[i]] if off else [on[i]])]
        on_names, off_names = [make(x).name for x in on], [make(x).name for x in off]
        a.subject = on_names[a.requests.index(4) if 4 in a.requests else 0]
        ablation = {"requests": list(a.requests), "on": on_names, "off": off_names or None, "reference": a.subject}
    cfg = SweepConfig(models=[resolve_model(m) for m in a.model], impls=a.impl,
                      layout=Layout(world=a.world, ep=a.ep or a.world), tokens=a.tokens or PAPER_TOKENS,
                      shared=a.shared, protocol=proto, seed=a.seed, gate=a.gate, floor=not a.no_floor,
                      command="python -m gcmoe_runtime.bench " + shlex.join(sys.argv[1:] if argv is None else argv),
                      deviation=a.deviation, device="cpu" if a.cpu_dry_run else "cuda", ablation=ablation,
                      floor_json=a.floor_json, budget_s=a.budget_s)
    res = run_sweep(cfg)
    files = write_all(res, a.out, a.subject, a.stem)
    print((a.out / f"{a.stem}.md").read_text())
    print("wrote: " + ", ".join(str(f) for f in files), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
