"""Session 47 call D: S (the shipped tree) against O (session 46's bundles), paper protocol, one lease: gc-moe's
slowest-rank median per T, each run and the mean change. `python3 compare.py` here -> compare.md."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from compare_paper_runs import points  # noqa: E402

ARMS = {"GLM-5.2 P = 1 routed": (("glm-O-1", "glm-O-4"), ("glm-S-2", "glm-S-3")),
        "DSV-4.1-Flash P = 1 routed": (("dsv-O-2",), ("dsv-S-1",))}
lines = ["| configuration | T | O runs µs | S runs µs | S vs O |", "|---|---|---|---|---|"]
for label, (o_runs, s_runs) in ARMS.items():
    o = [points(here / r) for r in o_runs]
    s = [points(here / r) for r in s_runs]
    for t in sorted(o[0]):
        om, sm = sum(r[t] for r in o) / len(o), sum(r[t] for r in s) / len(s)
        lines.append(f"| {label} | {t} | {' / '.join(f'{r[t]:.1f}' for r in o)} | {' / '.join(f'{r[t]:.1f}' for r in s)}"
                     f" | {100 * (sm / om - 1):+.1f} % |")
text = ("# Session 47 call D: paper protocol, S (role2's first W1 weights into L2 at routed P = 1 T <= 2) against O "
        "(session 46)\n\nOne lease; GLM-5.2 O S S O, DSV-4.1-Flash S O (`results/operator/steps/s47-d.steps`).\n\n"
        + "\n".join(lines) + "\n")
(here / "compare.md").write_text(text)
print(text)
