"""Session 35 call C: role2 in the layer, old (call B's bundles) vs new (four K128 steps per MMA call at lag 1), two
alternating runs per arm: `python3 ab_table.py` in this folder -> ab_role2.md (median role2 duration of 20 replays per
run)."""
import json
from pathlib import Path

here = Path(__file__).parent


def role2(run):
    pts = json.load(open(here / "tl" / run / "timeline.json"))["models"][0]["points"]
    return {p["tokens"]: p["summary"]["roles"]["role2"]["dur_us"] for p in pts}


rows = ["| model | T | old runs µs | new runs µs | change |", "|---|---|---|---|---|"]
for tile, old, new in (("GLM-5.2 share", ("g-old-1", "g-old-2"), ("g-new-1", "g-new-2")),
                       ("DSV-4.1-Flash share", ("d-old-1", "d-old-2"), ("d-new-1", "d-new-2")),
                       ("DSV-4.1-Flash P = 1", ("p1-old-1", "p1-old-2"), ("p1-new-1", "p1-new-2"))):
    o = [role2(r) for r in old]
    n = [role2(r) for r in new]
    for t in sorted(o[0]):
        om, nm = sum(x[t] for x in o) / len(o), sum(x[t] for x in n) / len(n)
        rows.append(f"| {tile} | {t} | {' / '.join(f'{x[t]:.1f}' for x in o)} | {' / '.join(f'{x[t]:.1f}' for x in n)} "
                    f"| {100 * (nm / om - 1):+.1f} % |")
text = "# role2 in the layer, (session 35 call C)\n\n" + "\n".join(rows) + "\n"
(here / "ab_role2.md").write_text(text)
print(text)
