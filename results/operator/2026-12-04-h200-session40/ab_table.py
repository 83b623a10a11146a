"""Session 40: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), old (the bundles of
0087bcd7, static task split) against new (the shipped bundles: dynamic claims, and since 8cdb6aaa the one-CTA BM 8
build's zero-task consumer barrier), runs alternating in one call (README.md). Call A: the DSV-4.1-Flash share forced
onto BM 8 one-CTA (8:384:1) at T = 1 / 2 / 4. `python3 ab_table.py` in this folder -> call-a/ab_role2.md."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import change_pct, role_us, runs_cell, write_ab_table  # noqa: E402

#: call -> (title, [(row label, old runs, new runs)])
CALLS = {
    "call-a": ("session 40 call A: the one-CTA BM 8 build (8:384:1), static split vs claims", [
        ("DSV-4.1-Flash share, 8:384:1", ("t1-old-1", "t1-old-2"), ("t1-new-1", "t1-new-2")),
    ]),
}

for call, (title, cases) in CALLS.items():
    rows = ["| case | T | old runs µs | new runs µs | change |", "|---|---|---|---|---|"]
    for label, old, new in cases:
        o = [role_us(here / call / "tl" / r) for r in old]
        n = [role_us(here / call / "tl" / r) for r in new]
        for t in sorted(o[0]):
            rows.append(f"| {label} | {t} | {runs_cell(o, t)} | {runs_cell(n, t)} | {change_pct(o, n, t):+.1f} % |")
    write_ab_table(here / call / "ab_role2.md", title, rows)
