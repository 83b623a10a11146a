"""Session 36: role2 in the layer, old vs new bundles, alternating runs per arm (`bench timeline`, median role2 duration
of 20 replays per run), and the new build against the next smaller BM forced (the narrow pass's cost):
`python3 ab_table.py` in this folder -> call-a/ab_role2.md (the BM 80 build's narrow W1 loop, N = 64),
call-b/ab_role2.md (the BM 64 build's, N = 48) and, with matplotlib, ab_role2.png."""
import json
from pathlib import Path

here = Path(__file__).parent
#: call -> (title, forced BM, [(row label, old runs, new runs)], (smaller BM label, its runs))
CALLS = {
    "call-a": ("session 36 call A: the BM 80 build's narrow W1 loop (N = 64)",
               [("GLM-5.2 share, BM 80 forced", ("g80-old-1", "g80-old-2"), ("g80-new-1", "g80-new-2"))],
               ("BM 64 forced", ("g64-1", "g64-2"))),
    "call-b": ("session 36 call B: the BM 64 build's narrow W1 loop (N = 48)",
               [("GLM-5.2 share, BM 64 forced", ("g64-old-1", "g64-old-2"), ("g64-new-1", "g64-new-2"))],
               ("BM 48 forced", ("g48-1", "g48-2"))),
}


def role2(call, run):
    pts = json.load(open(here / call / "tl" / run / "timeline.json"))["models"][0]["points"]
    return {p["tokens"]: p["summary"]["roles"]["role2"]["dur_us"] for p in pts}


def mean(xs):
    return sum(xs) / len(xs)


bars = []  # (label, change %) for the plot
for call, (title, arms, (small_label, small_runs)) in CALLS.items():
    if not (here / call / "tl").is_dir():
        continue
    rows = [f"| case | T | old runs µs | new runs µs | change | {small_label} µs | new vs it |",
            "|---|---|---|---|---|---|---|"]
    small = [role2(call, r) for r in small_runs]
    for label, old, new in arms:
        o = [role2(call, r) for r in old]
        n = [role2(call, r) for r in new]
        for t in sorted(o[0]):
            om, nm = mean([x[t] for x in o]), mean([x[t] for x in n])
            s = [x[t] for x in small if t in x]
            vs = f"{100 * (nm / mean(s) - 1):+.1f} %" if s else "-"
            rows.append(f"| {label} | {t} | {' / '.join(f'{x[t]:.1f}' for x in o)} | "
                        f"{' / '.join(f'{x[t]:.1f}' for x in n)} | {100 * (nm / om - 1):+.1f} % | "
                        f"{' / '.join(f'{x:.1f}' for x in s) or '-'} | {vs} |")
            bars.append((f"{call[-1].upper()}: {label} T={t}", 100 * (nm / om - 1)))
    text = f"# role2 in the layer, {title}\n\n" + "\n".join(rows) + "\n"
    (here / call / "ab_role2.md").write_text(text)
    print(text)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the tables are the result; the plot is a view of them
    plt = None
if plt is not None and bars:
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(bars) + 1.2))
    ax.barh([b[0] for b in bars][::-1], [b[1] for b in bars][::-1],
            color=["tab:green" if b[1] < 0 else "tab:red" for b in bars][::-1])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("role2 time in the layer, new vs old (%)")
    ax.set_title("Session 36, one H200, role2 in the layer, GLM-5.2 share (P = 8 load)\n"
                 "A: BM 80's narrow W1 loop (N = 64); B: BM 64's (N = 48)", fontsize=10)
    fig.tight_layout()
    fig.savefig(here / "ab_role2.png", dpi=110)
