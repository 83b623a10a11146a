"""Session 29: role2's achieved weight bandwidth in the layer for one rank's share of P = 8 (``bench timeline`` runs of
manifests/rank-share-*-p8.yaml), against the streaming read bandwidth measured in the same call (``bench floor``).

``python3 rank_share_table.py FLOOR_JSON TIMELINE_JSON[:LABEL] ...`` prints a markdown table: per (model, T, role2
build) the tokens per expert (mean, max over the point's routing), the active experts' MXFP4 bytes (W1 + W2 + scales,
``bench.models.unique_active_bytes``), role2's median kernel duration, the byte floor at the measured read bandwidth,
and the share of it role2 reaches. Active experts come from the benchmark's own routing (``bench.routing``, the same
seed the timeline used)."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from gcmoe_runtime.bench.models import unique_active_bytes  # noqa: E402
from gcmoe_runtime.bench.routing import Layout, build_point  # noqa: E402
from gcmoe_runtime.bench.shapes import resolve_model  # noqa: E402

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests"


def rows(floor_json: str, timelines: list[str]):
    bw = json.loads(Path(floor_json).read_text())["read_bandwidth"][0]["gbps"] * 1e9
    for spec in timelines:
        path, _, label = spec.partition(":")
        doc = json.loads(Path(path).read_text())
        tile = label or "heuristic"
        for m in doc["models"]:
            shape = resolve_model(str(MANIFESTS / f"{m['model']}.yaml"))
            for p in m["points"]:
                T = p["tokens"]
                plan = build_point(shape, T, Layout(1, 1), 0, doc.get("seed", 0)).plan
                sizes = plan.group_sizes.tolist() if hasattr(plan.group_sizes, "tolist") else list(plan.group_sizes)
                active = sum(1 for s in sizes if s)
                nbytes = unique_active_bytes(shape, active, False)
                dur = p["summary"]["roles"]["role2"]["dur_us"]
                floor_us = nbytes / bw * 1e6
                yield dict(model=m["model"], T=T, tile=tile, mean=sum(sizes) / len(sizes), max=max(sizes),
                           active=active, mb=nbytes / 1e6, role2_us=dur, floor_us=floor_us, share=floor_us / dur,
                           layer_us=p["summary"]["period_us"])


def main(argv):
    out = list(rows(argv[0], argv[1:]))
    print("| model | T | role2 build | tokens / expert mean (max) | active | MB | role2 µs | floor µs | share of read BW | layer period µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in out:
        print(f"| {r['model']} | {r['T']} | {r['tile']} | {r['mean']:.1f} ({r['max']}) | {r['active']} | {r['mb']:.0f} | "
              f"{r['role2_us']:.1f} | {r['floor_us']:.1f} | {100 * r['share']:.1f} % | {r['layer_us']:.1f} |")
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
