"""Session 43: A/B of the layer (`bench timeline`, median of 20 replays per run; runs alternate A B B A A B in one
call, README.md). Call A: role1's proxy fences narrowed (`exp-s43-role1-narrow-fences.diff`, arm B) against the
shipped bundles (A). `python3 ab_table.py` here -> call-a/arms.md."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import arms_table  # noqa: E402

RUNS = {"A": (1, 4, 5), "B": (2, 3, 6)}
WHATS = ("role1", "role2", "span")
lines = []
for model, cases in (("glm-5.2", [("P = 1 GLM-5.2", "p1")]), ("deepseek-v4.1-flash", [("P = 1 DSV-4.1-Flash", "p1")]),
                     (None, [("GLM-5.2 share", "sh-glm"), ("DSV-4.1-Flash share", "sh-dsv")])):
    got = arms_table(here / "call-a" / "tl", cases, RUNS, WHATS, ("role1", "span"), model=model)
    lines += got if not lines else got[2:]
text = ("# session 43 call A: role1's proxy fences narrowed (B) against the shipped bundles (A)\n\n"
        "Mean of three runs per arm, change against A; A's role1 and span per run.\n\n" + "\n".join(lines) + "\n")
(here / "call-a" / "arms.md").write_text(text)
print(text)
