"""Session 37 call D: the SM90 heuristic's BM boundaries over routing seeds 1 and 2 (seed 0: sessions 33-36), role2 in
the layer on session 36's shipped bundles, each share forced onto the tiles either side of each boundary:
`python3 boundary_table.py` -> call-d/boundaries.md (the heuristic's pick from `gcmoe_runtime.heuristics`)."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
sys.path.insert(0, str(here.parents[2]))
from timeline_ab import role_us  # noqa: E402

from gcmoe_runtime.heuristics import choose_sm90_tile  # noqa: E402

SHARES = {"GLM-5.2 share": ("g", dict(ranks=1, top_k=8, experts=32, hidden=6144, intermediate=2048)),
          "DSV-4.1-Flash share": ("d", dict(ranks=1, top_k=6, experts=48, hidden=5120, intermediate=2304))}
lines = ["# The heuristic's BM boundaries over routing seeds 1 / 2 (role2 µs in the layer, forced tiles)", "",
         "| share | T | heuristic BM | seed | " + " | ".join(f"BM {b}" for b in (32, 48, 64, 80)) + " | fastest |",
         "|---|---|---|---|---|---|---|---|---|"]
agree = total = 0
for name, (p, shape) in SHARES.items():
    for seed in (1, 2):
        runs = {bm: role_us(here / "call-d" / "tl" / f"{p}{bm}-s{seed}") for bm in (32, 48, 64, 80)
                if (here / "call-d" / "tl" / f"{p}{bm}-s{seed}").is_dir()}
        for t in sorted({t for r in runs.values() for t in r}):
            have = {bm: r[t] for bm, r in runs.items() if t in r}
            if len(have) < 2:
                continue
            pick = choose_sm90_tile(t, compute_sms=128, **shape).bm
            best = min(have, key=have.get)
            total += 1
            agree += pick == best
            cells = " | ".join(f"{have[b]:.1f}" if b in have else "-" for b in (32, 48, 64, 80))
            gap = f" (pick +{100 * (have[pick] / have[best] - 1):.1f} %)" if pick != best and pick in have else ""
            lines.append(f"| {name} | {t} | {pick} | {seed} | {cells} | BM {best}{gap} |")
lines += ["", f"The heuristic's pick is the fastest measured tile at {agree} of {total} (share, T, seed) points."]
(here / "call-d" / "boundaries.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
