"""Session 38 call B: the GLM-5.2 share's BM steps that the narrow BM 64 / 80 pass costs moved (1.42 / 1.55 ->
1.39 / 1.50: 48 -> 64 from T = 174 to 172, 64 -> 80 from 218 to 212), role2 in the layer on the shipped bundles forced
onto the tiles either side (seed 0: the mean of two alternating runs; seed 1: one run): `python3 boundary_table.py`
-> call-b/boundaries.md (the heuristic's pick from `gcmoe_runtime.heuristics`)."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
sys.path.insert(0, str(here.parents[2]))
from timeline_ab import role_us  # noqa: E402

from gcmoe_runtime.heuristics import choose_sm90_tile  # noqa: E402

SHAPE = dict(ranks=1, top_k=8, experts=32, hidden=6144, intermediate=2048, compute_sms=128)
BMS = (48, 64, 80)
tl = here / "call-b" / "tl"
seeds = {0: {bm: [role_us(tl / f"b{bm}-{r}") for r in (1, 2)] for bm in BMS},
         1: {bm: [role_us(tl / f"b{bm}-s1")] for bm in BMS}}
lines = ["# GLM-5.2 share: the moved BM steps (role2 µs in the layer, forced tiles; seed 0: mean of two runs)", "",
         "| T | heuristic BM | seed | " + " | ".join(f"BM {b}" for b in BMS) + " | fastest |", "|---|---|---|---|---|---|---|"]
agree = total = 0
for seed, runs in seeds.items():
    for t in sorted({t for rs in runs.values() for t in rs[0]}):
        have = {bm: sum(r[t] for r in rs) / len(rs) for bm, rs in runs.items() if t in rs[0]}
        pick = choose_sm90_tile(t, **SHAPE).bm
        best = min(have, key=have.get)
        total += 1
        agree += pick == best
        cells = " | ".join(f"{have[b]:.1f}" if b in have else "-" for b in BMS)
        gap = f" (pick +{100 * (have[pick] / have[best] - 1):.1f} %)" if pick != best and pick in have else ""
        lines.append(f"| {t} | {pick} | {seed} | {cells} | BM {best}{gap} |")
lines += ["", f"The heuristic's pick is the fastest measured tile at {agree} of {total} (T, seed) points."]
(here / "call-b" / "boundaries.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
