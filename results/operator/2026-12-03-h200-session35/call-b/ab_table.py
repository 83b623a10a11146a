"""Session 35 call B: role2 in the layer, old (session 34's bundles) vs new (the turns' new close), two alternating
runs per arm: `python3 ab_table.py` in this folder -> ab_role2.md (median role2 duration of 20 replays per run)."""
import json
from pathlib import Path

here = Path(__file__).parent


def role2(run):
    pts = json.load(open(here / "tl" / run / "timeline.json"))["models"][0]["points"]
    return {p["tokens"]: p["summary"]["roles"]["role2"]["dur_us"] for p in pts}


rows = ["| tile | T | old runs µs | new runs µs | change |", "|---|---|---|---|---|"]
for tile, old, new in (("heuristic", ("g-old-1", "g-old-2"), ("g-new-1", "g-new-2")),
                       ("BM 64 forced", ("g64-old",), ("g64-new",))):
    o = [role2(r) for r in old]
    n = [role2(r) for r in new]
    for t in sorted(o[0]):
        om, nm = sum(x[t] for x in o) / len(o), sum(x[t] for x in n) / len(n)
        rows.append(f"| {tile} | {t} | {' / '.join(f'{x[t]:.1f}' for x in o)} | {' / '.join(f'{x[t]:.1f}' for x in n)} "
                    f"| {100 * (nm / om - 1):+.1f} % |")
text = "# role2 in the layer, GLM-5.2 share (session 35 call B)\n\n" + "\n".join(rows) + "\n"
(here / "ab_role2.md").write_text(text)
print(text)
