"""Session 10's paper-protocol runs against the previous full-protocol runs of the same configurations: gc-moe's
slowest-rank median per T, and (a)'s ratio (``ci/compare_paper_runs.py``; writes compare.md and compare.png).

    python3 compare.py
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "ci"))
from compare_paper_runs import compare  # noqa: E402

PREV = {  # configuration -> the previous full-protocol run (session 8 at P = 2, session 5 at P = 1)
    "paper-glm-p2-routed": "../2026-11-30-h200-x2-session8/call-d/paper-glm-p2-routed",
    "paper-dsv-p2-routed": "../2026-11-30-h200-x2-session8/call-e/paper-dsv-p2-routed",
    "paper-glm-p2-shared": "../2026-11-30-h200-x2-session8/call-e/paper-glm-p2-shared",
    "paper-dsv-p2-shared": "../2026-11-30-h200-x2-session8/call-e/paper-dsv-p2-shared",
    "paper-glm-p1-routed": "../2026-11-30-h200-x2-session5/call-b/paper-glm-p1-routed",
    "paper-dsv-p1-routed": "../2026-11-30-h200-x2-session5/call-b/paper-dsv-p1-routed",
}
print(compare(HERE, PREV, "previous", "session 10",
              "gc-moe layer latency, paper protocol (10 + 30 windows), H200"))
