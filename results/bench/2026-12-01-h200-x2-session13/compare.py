"""Session 13's paper-protocol runs (call E) against session 12's runs of the same configurations: gc-moe's
slowest-rank median per T, and (a)'s ratio (``ci/compare_paper_runs.py``; writes compare.md and compare.png). The
sessions ran on different x2 hosts: the change of the kernels alone is calls D / E's alternating layer A/B
(results/operator/2026-11-30-h200-session13/README.md), not this table.

    python3 compare.py
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "ci"))
from compare_paper_runs import compare  # noqa: E402

PREV = {  # configuration -> session 12's run (call H)
    "paper-glm-p2-routed": "../2026-11-30-h200-x2-session12/paper-glm-p2-routed",
    "paper-dsv-p2-routed": "../2026-11-30-h200-x2-session12/paper-dsv-p2-routed",
}
print(compare(HERE, PREV, "session 12", "session 13",
              "gc-moe layer latency, paper protocol (10 + 30 windows), H200: session 12 vs 13 (different hosts)"))
