"""Session 44 call E: the paper protocol's share sweeps, session 43's shipped share bundles (O) against session 44's
(N) on one lease (`../steps/s44-e.steps`: GLM-5.2 share O N N O, DSV-4.1-Flash share N O). `python3 sweep_ab.py` here
-> call-e/sweep_ab.md (gc-moe's median µs per T; N against O, mean of each arm's runs)."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from compare_paper_runs import points  # noqa: E402

RUNS = {"GLM-5.2 share": ("glm", {"O": (1, 4), "N": (2, 3)}), "DSV-4.1-Flash share": ("dsv", {"O": (2,), "N": (1,)})}
lines = ["| case | T | O µs (runs) | N µs (runs) | N against O |", "|---|---|---|---|---|"]
for case, (tag, arms) in RUNS.items():
    got = {a: [points(here / "call-e" / "bench" / f"sw-{tag}-{a}-{n}") for n in ns] for a, ns in arms.items()}
    for t in sorted(got["O"][0]):
        o, n = [r[t] for r in got["O"]], [r[t] for r in got["N"]]
        mo, mn = sum(o) / len(o), sum(n) / len(n)
        lines.append(f"| {case} | {t} | {' / '.join(f'{x:.1f}' for x in o)} | {' / '.join(f'{x:.1f}' for x in n)} | "
                     f"{100 * (mn / mo - 1):+.1f} % |")
text = "# session 44 call E: share sweeps, old (O) vs new (N) bundles on one lease\n\n" + "\n".join(lines) + "\n"
(here / "call-e" / "sweep_ab.md").write_text(text)
print(text)
