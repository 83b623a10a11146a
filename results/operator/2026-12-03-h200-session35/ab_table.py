"""Session 35: role2 in the layer, old vs new bundles, alternating runs per arm (`bench timeline`, median role2
duration of 20 replays per run): `python3 ab_table.py` in this folder -> call-b/ab_role2.md (the turns builds' new
close: old = session 34's bundles), call-c/ab_role2.md (four steps per MMA call at lag 1: old = call B's),
call-f/ab_role2.md (setmaxnreg 24 / 240: old = the shipped s35e) and, with matplotlib, ab_role2.png (calls B and C)."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import plot_changes, role_us  # noqa: E402

#: call -> (title, [(row label, old runs, new runs)])
CALLS = {
    "call-b": ("session 35 call B",
               [("GLM-5.2 share", ("g-old-1", "g-old-2"), ("g-new-1", "g-new-2")),
                ("GLM-5.2 share BM 64 forced", ("g64-old",), ("g64-new",))]),
    "call-c": ("session 35 call C",
               [("GLM-5.2 share", ("g-old-1", "g-old-2"), ("g-new-1", "g-new-2")),
                ("DSV-4.1-Flash share", ("d-old-1", "d-old-2"), ("d-new-1", "d-new-2")),
                ("DSV-4.1-Flash P = 1", ("p1-old-1", "p1-old-2"), ("p1-new-1", "p1-new-2"))]),
    "call-f": ("session 35 call F",
               [("GLM-5.2 share", ("g-old-1", "g-old-2"), ("g-new-1", "g-new-2")),
                ("DSV-4.1-Flash P = 1", ("p1-old-1", "p1-old-2"), ("p1-new-1", "p1-new-2"))]),
}


def role2(call, run):
    return role_us(here / call / "tl" / run)


bars = []  # (label, change %) for the plot
for call, (title, arms) in CALLS.items():
    plot = call != "call-f"  # the plot shows what shipped
    rows = ["| case | T | old runs µs | new runs µs | change |", "|---|---|---|---|---|"]
    for label, old, new in arms:
        o = [role2(call, r) for r in old]
        n = [role2(call, r) for r in new]
        for t in sorted(o[0]):
            om, nm = sum(x[t] for x in o) / len(o), sum(x[t] for x in n) / len(n)
            rows.append(f"| {label} | {t} | {' / '.join(f'{x[t]:.1f}' for x in o)} | "
                        f"{' / '.join(f'{x[t]:.1f}' for x in n)} | {100 * (nm / om - 1):+.1f} % |")
            if plot:
                bars.append((f"{call[-1].upper()}: {label} T={t}", 100 * (nm / om - 1)))
    text = f"# role2 in the layer, {title}\n\n" + "\n".join(rows) + "\n"
    (here / call / "ab_role2.md").write_text(text)
    print(text)

plot_changes(bars, here / "ab_role2.png", "Session 35, one H200, role2 in the layer\n"
             "B: the turns builds' new close; C: four steps per MMA call at lag 1")
