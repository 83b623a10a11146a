"""Session 11's paper-protocol runs (call H) against session 10's runs of the same configurations: gc-moe's
slowest-rank median per T, and (a)'s ratio (``ci/compare_paper_runs.py``; writes compare.md and compare.png). The two
sessions ran on different x2 hosts: the change of the kernels alone is call G's alternating layer A/B
(results/operator/2026-11-30-h200-session11/README.md), not this table.

    python3 compare.py
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "ci"))
from compare_paper_runs import compare  # noqa: E402

PREV = {  # configuration -> session 10's run (calls D / E)
    "paper-glm-p2-routed": "../2026-11-30-h200-x2-session10/paper-glm-p2-routed",
    "paper-dsv-p2-routed": "../2026-11-30-h200-x2-session10/paper-dsv-p2-routed",
    "paper-glm-p2-shared": "../2026-11-30-h200-x2-session10/paper-glm-p2-shared",
    "paper-dsv-p2-shared": "../2026-11-30-h200-x2-session10/paper-dsv-p2-shared",
    "paper-glm-p1-routed": "../2026-11-30-h200-x2-session10/paper-glm-p1-routed",
}
print(compare(HERE, PREV, "session 10", "session 11",
              "gc-moe layer latency, paper protocol (10 + 30 windows), H200: session 10 vs 11 (different hosts)"))
