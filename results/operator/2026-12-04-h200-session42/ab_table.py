"""Session 42: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), runs alternating in
one call (README.md). Call B: timing probes of the FP4 decode's table work against the shipped role2 — B = one
folded-table pair per K128 step and slab (`exp-s42-lut-per-step.diff`), C = no table work (`exp-s42-lut-const.diff`);
outputs wrong in both. `python3 ab_table.py` here -> call-b/arms_role2.md and, with matplotlib, ab_role2.png."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import ARM_TABLE_HEAD, arm_rows, plot_changes, write_ab_table  # noqa: E402

#: (row label, short label, run prefix, runs of A / B / C)
CASES = [
    ("GLM-5.2 share", "GLM share", "sh-glm", (1, 6, 7), (2, 5, 8), (3, 4, 9)),
    ("DSV-4.1-Flash share", "DSV share", "sh-dsv", (1, 6, 7), (2, 5, 8), (3, 4, 9)),
    ("GLM-5.2 P = 1", "GLM P1", "p1-glm", (1, 6), (2, 5), ()),
]

rows, bars = list(ARM_TABLE_HEAD), []
for label, short, pre, a, b, c in CASES:
    arms = [(name, tuple(f"{pre}-{x}-{i}" for i in runs)) for name, x, runs in (("per-step", "B", b), ("const", "C", c))
            if runs]
    case_rows, changes = arm_rows(here / "call-b" / "tl", label, tuple(f"{pre}-A-{i}" for i in a), arms)
    rows += case_rows
    bars += [(f"{short} T={t}", ch) for arm, t, ch in changes if arm == "per-step"]
write_ab_table(here / "call-b" / "arms_role2.md", "session 42 call B: decode-table probes against the shipped role2",
               rows)
plot_changes(bars, here / "ab_role2.png", "Session 42, H200, role2 in the layer: tables per K128 step (probe) vs "
             "per K32")
