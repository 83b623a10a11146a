"""Session 38: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), GLM-5.2 share forced
onto BM 80 / 64 / 48, old (session 36's shipped bundles, `results/operator/bundles`) against the arms, runs
alternating (README.md names each arm's diff and bundle): call A new = the shared K loop with one scale load per unit
(`exp-s37g-shared-loop-one-load.diff`). `python3 ab_table.py` in this folder -> call-*/ab_role2.md and, with
matplotlib, ab_role2.png."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import ARM_TABLE_HEAD, arm_rows, plot_changes, write_ab_table  # noqa: E402

#: call -> (title, [(row label, old runs, [(arm label, runs)])]): each arm against the old runs
CALLS = {
    "call-a": ("session 38 call A: the shared K loop, one scale load per unit (W1 and W2 at the narrow N)", [
        (f"GLM-5.2 share, BM {bm} forced", (f"g{bm}-old-1", f"g{bm}-old-2"), [("new", (f"g{bm}-new-1", f"g{bm}-new-2"))])
        for bm in (80, 64, 48)
    ]),
}


TITLE = "Session 38, one H200, role2 in the layer, GLM-5.2 P = 8 share on one GPU: forced tiles, vs session 36"
bars = []  # (label, change %) for the plot
for call, (title, cases) in CALLS.items():
    if not (here / call / "tl").is_dir():
        continue
    rows = list(ARM_TABLE_HEAD)
    for label, old, arms in cases:
        case_rows, changes = arm_rows(here / call / "tl", label, old, arms)
        rows += case_rows
        bars += [(f"{call[-1].upper()} {label.split(', ')[1][:5]} {arm} T={t}", c) for arm, t, c in changes]
    write_ab_table(here / call / "ab_role2.md", title, rows)

if bars:
    plot_changes(bars, here / "ab_role2.png", TITLE)
