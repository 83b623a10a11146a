"""Session 44 call A: role3 launched through a programmatic edge from role2 (`exp-s44-programmatic-finalize.diff`,
`../steps/s44-b.steps`) — A = the shipped bundles, K = the bundles with the two `griddepcontrol` instructions but full
edges, B = those bundles with `GCMOE_PROGRAMMATIC_FINALIZE=1` (the programmatic edge). `bench timeline`, median of 20
replays per run; runs alternate in one call (A K B B K A; the GLM-5.2 share A B B A). `python3 ab_table.py` here ->
call-a/arms.md."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import arms_table  # noqa: E402

P1 = {"A": (1, 6), "K": (2, 5), "B": (3, 4)}
SH = {"A": (1, 4), "B": (2, 3)}
CASES = (("glm-5.2", [("P = 1 GLM-5.2", "p1")], P1), ("deepseek-v4.1-flash", [("P = 1 DSV-4.1-Flash", "p1")], P1),
         (None, [("GLM-5.2 share", "sh-glm")], SH))
lines = []
for model, rows, runs in CASES:
    got = arms_table(here / "call-a" / "tl", rows, runs, ("role2", "role3", "span"), ("role3", "span"), model=model)
    lines += got if not lines else got[2:]
text = ("# session 44 call A: role3 through a programmatic edge from role2 (B), the instructions alone (K), shipped (A)"
        "\n\nMean of the runs per arm, change against A; A's role3 and span per run.\n\n" + "\n".join(lines) + "\n")
(here / "call-a" / "arms.md").write_text(text)
print(text)

# call C: role3 in fewer latency rounds (B, `s44-c.steps`) against the shipped bundles (A), order A B B A A B
ABBAAB = {"A": (1, 4, 5), "B": (2, 3, 6)}
CASES_C = (("glm-5.2", [("P = 1 GLM-5.2", "p1")], ABBAAB), ("deepseek-v4.1-flash", [("P = 1 DSV-4.1-Flash", "p1")], ABBAAB),
           (None, [("GLM-5.2 share", "sh-glm"), ("DSV-4.1-Flash share", "sh-dsv")], ABBAAB))
lines = []
for model, rows, runs in CASES_C:
    got = arms_table(here / "call-c" / "tl", rows, runs, ("role3", "span"), ("role3", "span"), model=model)
    lines += got if not lines else got[2:]
text = ("# session 44 call C: role3 in fewer latency rounds (B) against the shipped bundles (A)\n\nMean of the runs per "
        "arm, change against A; A's role3 and span per run.\n\n" + "\n".join(lines) + "\n")
(here / "call-c" / "arms.md").write_text(text)
print(text)
