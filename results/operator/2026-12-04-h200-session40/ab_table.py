"""Session 40: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), old (the bundles of
0087bcd7, static task split) against new (the shipped bundles: dynamic claims, and since 8cdb6aaa the one-CTA BM 8
build's zero-task consumer barrier), runs alternating in one call (README.md). Call A: the DSV-4.1-Flash share forced
onto BM 8 one-CTA (8:384:1) at T = 1 / 2 / 4. Call C: P = 1 at the heuristic's tiles, T = 1-16, old = the static
split (0087bcd7's bundles), new = claims at every load (031d6569's). Call D: old = claims at every load (031d6569's
bundles, build/bundles_claims), new = claims from 3 tasks per CTA (4385a7ff), P = 1 and both P = 8 shares at the
heuristic's tiles. `python3 ab_table.py` in this folder -> call-*/ab_role2.md and, with matplotlib, ab_role2.png."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import AB_TABLE_HEAD, ab_rows, plot_changes, write_ab_table  # noqa: E402

#: call -> (title, [(row label, short label, old runs, new runs)])
CALLS = {
    "call-a": ("session 40 call A: the one-CTA BM 8 build (8:384:1), static split vs claims", [
        ("DSV-4.1-Flash share, 8:384:1", "DSV share BM8c1", ("t1-old-1", "t1-old-2"), ("t1-new-1", "t1-new-2")),
    ]),
    "call-c": ("session 40 call C: P = 1, static split (old) vs claims at every load (new)", [
        ("GLM-5.2 P = 1", "GLM P1", ("p1-glm-old-1", "p1-glm-old-2"), ("p1-glm-new-1", "p1-glm-new-2")),
        ("DSV-4.1-Flash P = 1", "DSV P1", ("p1-dsv-old-1", "p1-dsv-old-2"), ("p1-dsv-new-1", "p1-dsv-new-2")),
    ]),
    "call-d": ("session 40 call D: claims at every load (old) vs claims from 3 tasks per CTA (new)", [
        ("GLM-5.2 P = 1", "GLM P1", ("p1-glm-old-1", "p1-glm-old-2"), ("p1-glm-new-1", "p1-glm-new-2")),
        ("DSV-4.1-Flash P = 1", "DSV P1", ("p1-dsv-old-1", "p1-dsv-old-2"), ("p1-dsv-new-1", "p1-dsv-new-2")),
        ("GLM-5.2 share", "GLM share", ("sh-glm-old-1", "sh-glm-old-2"), ("sh-glm-new-1", "sh-glm-new-2")),
        ("DSV-4.1-Flash share", "DSV share", ("sh-dsv-old-1", "sh-dsv-old-2"), ("sh-dsv-new-1", "sh-dsv-new-2")),
    ]),
}
TITLE = "Session 40, H200, role2 in the layer: call D, claims from 3 tasks per CTA vs at every load"

bars = []  # call D's (label, change %) for the plot

for call, (title, cases) in CALLS.items():
    rows = list(AB_TABLE_HEAD)
    for label, short, old, new in cases:
        case_rows, changes = ab_rows(here / call / "tl", label, old, new)
        rows += case_rows
        if call == "call-d":
            bars += [(f"{short} T={t}", change) for t, change in changes]
    write_ab_table(here / call / "ab_role2.md", title, rows)

if bars:
    plot_changes(bars, here / "ab_role2.png", TITLE)
