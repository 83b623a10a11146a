"""Session 36: role2 in the layer, old vs new bundles, alternating runs per arm (`bench timeline`, median role2 duration
of 20 replays per run), and the new build against the next smaller BM forced (the narrow pass's cost):
`python3 ab_table.py` in this folder -> call-a/ab_role2.md (the BM 80 build's narrow W1 loop, N = 64),
call-b/ab_role2.md (the BM 64 build's, N = 48), call-d/ab_role2.md (the BM 48 build's, N = 32) and, with matplotlib,
ab_role2.png."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import mean, plot_changes, role_us, runs_cell, write_ab_table  # noqa: E402

#: call -> (title, [(row label, old runs, new runs, smaller BM forced: its label, its runs)])
CALLS = {
    "call-a": ("session 36 call A: the BM 80 build's narrow W1 loop (N = 64)",
               [("GLM-5.2 share, BM 80 forced", ("g80-old-1", "g80-old-2"), ("g80-new-1", "g80-new-2"),
                 "BM 64 forced", ("g64-1", "g64-2"))]),
    "call-b": ("session 36 call B: the BM 64 build's narrow W1 loop (N = 48)",
               [("GLM-5.2 share, BM 64 forced", ("g64-old-1", "g64-old-2"), ("g64-new-1", "g64-new-2"),
                 "BM 48 forced", ("g48-1", "g48-2"))]),
    "call-d": ("session 36 call D: the BM 48 build's narrow W1 loop (N = 32)",
               [("GLM-5.2 share, BM 48 forced", ("g48-old-1", "g48-old-2"), ("g48-new-1", "g48-new-2"),
                 "BM 32 forced", ("g32-1", "g32-2")),
                ("DSV-4.1-Flash share, BM 48 forced", ("d48-old-1", "d48-old-2"), ("d48-new-1", "d48-new-2"),
                 "BM 32 forced", ("d32-1", "d32-2"))]),
}


def role2(call, run):
    return role_us(here / call / "tl" / run)


TITLE = ("Session 36, one H200, role2 in the layer, P = 8 loads on one GPU\n"
         "A: BM 80's narrow W1 loop (N = 64); B: BM 64's (N = 48); D: BM 48's (N = 32)")
bars = []  # (label, change %) for the plot
for call, (title, arms) in CALLS.items():
    if not (here / call / "tl").is_dir():
        continue
    rows = ["| case | T | old runs µs | new runs µs | change | smaller BM forced µs | new vs it |",
            "|---|---|---|---|---|---|---|"]
    for label, old, new, small_label, small_runs in arms:
        o = [role2(call, r) for r in old]
        n = [role2(call, r) for r in new]
        small = [role2(call, r) for r in small_runs]
        for t in sorted(o[0]):
            om, nm = mean([x[t] for x in o]), mean([x[t] for x in n])
            s = [x[t] for x in small if t in x]
            vs = f"{100 * (nm / mean(s) - 1):+.1f} %" if s else "-"
            rows.append(f"| {label} | {t} | {runs_cell(o, t)} | {runs_cell(n, t)} | {100 * (nm / om - 1):+.1f} % | "
                        f"{small_label}: {' / '.join(f'{x:.1f}' for x in s) or '-'} | {vs} |")
            bars.append((f"{call[-1].upper()}: {label} T={t}", 100 * (nm / om - 1)))
    write_ab_table(here / call / "ab_role2.md", title, rows)

if bars:
    plot_changes(bars, here / "ab_role2.png", TITLE)
