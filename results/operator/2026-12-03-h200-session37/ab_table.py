"""Session 37: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), GLM-5.2 share forced
onto BM 80 / 64 / 48, old (session 36's shipped bundles) against the experiments' arms, runs alternating (README.md
names each arm's diff and bundle): call A new (the shared K loop: W2 at the narrow N too) and, for BM 64, b / c (its
narrow loop at lag 1, two / four steps per call, on the shared loop); call B d (three loops, BM 64's narrow W1 loop
at lag 1, four steps); call C new, e (the shared loop, W2 always at BM) and f (the shared loop, is1 not made
warp-uniform). `python3 ab_table.py` in this folder -> call-{a,b,c}/ab_role2.md and, with matplotlib,
ab_role2.png (call A's arms)."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import ARM_TABLE_HEAD, arm_rows, plot_changes, write_ab_table  # noqa: E402

#: call -> (title, [(row label, old runs, [(arm label, runs)])]): each arm against the old runs
CALLS = {
    "call-a": ("session 37 call A: the shared K loop (W1 and W2 at the narrow N)", [
        ("GLM-5.2 share, BM 80 forced", ("g80-old-1", "g80-old-2"), [("new", ("g80-new-1", "g80-new-2"))]),
        ("GLM-5.2 share, BM 64 forced", ("g64-old-1", "g64-old-2"),
         [("new", ("g64-new-1", "g64-new-2")), ("b: narrow lag 1, 2 steps", ("g64-b-1", "g64-b-2")),
          ("c: narrow lag 1, 4 steps", ("g64-c-1", "g64-c-2"))]),
        ("GLM-5.2 share, BM 48 forced", ("g48-old-1", "g48-old-2"), [("new", ("g48-new-1", "g48-new-2"))]),
    ]),
    "call-b": ("session 37 call B: d = three loops, BM 64's narrow W1 loop at lag 1 (four steps per call)", [
        ("GLM-5.2 share, BM 64 forced", ("g64-old-1", "g64-old-2"), [("d", ("g64-d-1", "g64-d-2"))]),
    ]),
    "call-c": ("session 37 call C: the shared loop's diagnostics (e: W2 always at BM; f: is1 not warp-uniform)", [
        (f"GLM-5.2 share, BM {bm} forced", (f"g{bm}-old-1", f"g{bm}-old-2"),
         [(arm, (f"g{bm}-{arm}-1", f"g{bm}-{arm}-2")) for arm in ("new", "e", "f")]) for bm in (48, 80)
    ]),
}


TITLE = "Session 37, one H200, role2 in the layer, GLM-5.2 P = 8 share on one GPU: forced tiles, vs session 36"
bars = []  # (label, change %) for the plot
for call, (title, cases) in CALLS.items():
    if not (here / call / "tl").is_dir():
        continue
    rows = list(ARM_TABLE_HEAD)
    for label, old, arms in cases:
        case_rows, changes = arm_rows(here / call / "tl", label, old, arms)
        rows += case_rows
        if call == "call-a":
            bars += [(f"{label.split(', ')[1][:5]} {arm.split(':')[0]} T={t}", c) for arm, t, c in changes]
    write_ab_table(here / call / "ab_role2.md", title, rows)

if bars:
    plot_changes(bars, here / "ab_role2.png", TITLE)
