"""Session 41: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), runs alternating in
one call (README.md). Call A: the claims policy's arms against the shipped one (c3: claims from the second task in
replays with >= 3 tasks per CTA) — c0 (claims at every load), c5 (from 5 tasks per CTA), r2 (each CTA's first two
tasks static, claims from the third, at every load). Call C: c3 (old) against r2c3 (new, shipped in c6a89c5c: r2 only
where c3 claims), order ABBAAB. `python3 ab_table.py` here -> call-a/arms_role2.md, call-c/ab_role2.md and, with
matplotlib, ab_role2.png (call C)."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import AB_TABLE_HEAD, ARM_TABLE_HEAD, ab_rows, arm_rows, plot_changes, write_ab_table  # noqa: E402

#: (row label, short label, run prefix, model of a several-model run)
CASES = [
    ("GLM-5.2 share", "GLM share", "sh-glm", None),
    ("DSV-4.1-Flash share", "DSV share", "sh-dsv", None),
    ("GLM-5.2 P = 1", "GLM P1", "p1", "glm-5.2"),
    ("DSV-4.1-Flash P = 1", "DSV P1", "p1", "deepseek-v4.1-flash"),
]

rows = list(ARM_TABLE_HEAD)
for label, _, pre, model in CASES:
    arms = [(arm, (f"{pre}-{arm}-1", f"{pre}-{arm}-2")) for arm in ("c0", "c5", "r2")]
    rows += arm_rows(here / "call-a" / "tl", label, (f"{pre}-c3-1", f"{pre}-c3-2"), arms, model)[0]
write_ab_table(here / "call-a" / "arms_role2.md", "session 41 call A: claims-policy arms against the shipped c3", rows)

rows, bars = list(AB_TABLE_HEAD), []
for label, short, pre, model in CASES:
    case_rows, changes = ab_rows(here / "call-c" / "tl", label, tuple(f"{pre}-c3-{i}" for i in (1, 4, 5)),
                                 tuple(f"{pre}-r2c3-{i}" for i in (2, 3, 6)), model)
    rows += case_rows
    bars += [(f"{short} T={t}", change) for t, change in changes]
write_ab_table(here / "call-c" / "ab_role2.md", "session 41 call C: claims from the second task (old, c3) vs the third "
               "(new, r2c3)", rows)
plot_changes(bars, here / "ab_role2.png", "Session 41, H200, role2 in the layer: call C, claims from the third task "
             "vs the second")
