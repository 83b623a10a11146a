"""Session 30: session 29's rank-share table plus what role2 streams. ``python3 rank_share_streamed.py FLOOR_JSON
TIMELINE_JSON[:BM:THREADS:CTAS] ...`` (no tile: the heuristic's, ``heuristics.choose_tile`` as the runtime calls it)
prints per point the unique active bytes, the bytes role2 streams at its BM (``bench.models.streamed_routed_bytes``:
one pass over an expert's weights per ring block), the share of the read bandwidth on unique bytes (issue 5's
measure) and on streamed bytes (how fast each pass runs)."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from gcmoe_runtime.bench.models import streamed_routed_bytes, unique_active_bytes  # noqa: E402
from gcmoe_runtime.bench.routing import Layout, build_point  # noqa: E402
from gcmoe_runtime.bench.shapes import resolve_model  # noqa: E402
from gcmoe_runtime.heuristics import SM90_BM_CANDIDATES, choose_tile  # noqa: E402

COMPUTE_SMS, CAPACITY = 128, 256  # the H200 split every share ran on; the manifests' capacity


def main(argv):
    bw = json.loads(Path(argv[0]).read_text())["read_bandwidth"][0]["gbps"] * 1e9
    print("| model | T | role2 tile | tokens / expert mean (max) | unique MB | streamed MB | role2 µs | share of read BW "
          "(unique) | (streamed) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for spec in argv[1:]:
        path, _, forced = spec.partition(":")
        doc = json.loads(Path(path).read_text())
        for m in doc["models"]:
            shape = resolve_model(str(ROOT / "manifests" / f"{m['model']}.yaml"))
            for p in m["points"]:
                T = p["tokens"]
                sizes = list(build_point(shape, T, Layout(1, 1), 0, doc.get("seed", 0)).plan.group_sizes.tolist())
                if forced:
                    bm, label = int(forced.split(":")[0]), forced
                else:
                    t = choose_tile("sm_90a", T, ranks=1, top_k=shape.top_k, experts=shape.experts, hidden=shape.hidden,
                                    intermediate=shape.intermediate, compute_sms=COMPUTE_SMS,
                                    candidates=SM90_BM_CANDIDATES, capacity=CAPACITY)
                    bm, label = t.bm, f"{t.bm}:{t.threads}:{t.ctas_per_sm} (heuristic)"
                uniq = unique_active_bytes(shape, sum(1 for s in sizes if s), False)
                streamed = streamed_routed_bytes(shape, sizes, bm)
                dur = p["summary"]["roles"]["role2"]["dur_us"] * 1e-6
                print(f"| {m['model']} | {T} | {label} | {sum(sizes) / len(sizes):.1f} ({max(sizes)}) | {uniq / 1e6:.0f} | "
                      f"{streamed / 1e6:.0f} | {dur * 1e6:.1f} | {100 * uniq / bw / dur:.1f} % | "
                      f"{100 * streamed / bw / dur:.1f} % |")


if __name__ == "__main__":
    main(sys.argv[1:])
