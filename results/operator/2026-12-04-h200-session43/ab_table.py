"""Session 43: A/Bs of the layer (`bench timeline`, median of 20 replays per run; runs alternate in one call,
README.md). Call A: role1's proxy fences narrowed (B, `../2026-12-04-h200-session42/exp-s43-role1-narrow-fences.diff`)
against the shipped bundles (A). Call D: role3's chunks per token (B, `exp-s43-role3-chunks.diff`); call E: the same
with every slot's load in one round (B, `exp-s43-role3-chunks-one-round.diff`). `python3 ab_table.py` here ->
call-a/arms.md, call-d/arms.md, call-e/arms.md and (with matplotlib) ab_span_role3.png."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import arms_table, plot_changes  # noqa: E402

ABBAAB = {"A": (1, 4, 5), "B": (2, 3, 6)}
CASES = (("glm-5.2", [("P = 1 GLM-5.2", "p1")], ABBAAB), ("deepseek-v4.1-flash", [("P = 1 DSV-4.1-Flash", "p1")], ABBAAB),
         (None, [("GLM-5.2 share", "sh-glm"), ("DSV-4.1-Flash share", "sh-dsv")], ABBAAB))


def write(call: str, title: str, whats: tuple[str, ...], shown: tuple[str, ...], cases=CASES) -> None:
    lines = []
    for model, rows, runs in cases:
        got = arms_table(here / call / "tl", rows, runs, whats, shown, model=model)
        lines += got if not lines else got[2:]
    text = (f"# session 43 {title}\n\nMean of the runs per arm, change against A; A's {' and '.join(shown)} per "
            "run.\n\n" + "\n".join(lines) + "\n")
    (here / call / "arms.md").write_text(text)
    print(text)


write("call-a", "call A: role1's proxy fences narrowed (B) against the shipped bundles (A)", ("role1", "role2", "span"),
      ("role1", "span"))
P1S = {"d": (None, [("P = 1 GLM-5.2 + shared", "p1s")], ABBAAB), "e": (None, [("P = 1 GLM-5.2 + shared", "p1s")],
                                                                      {"A": (1, 4), "B": (2, 3)})}
write("call-d", "call D: role3's chunks per token (B) against the shipped bundles (A)", ("role3", "span"),
      ("role3", "span"), CASES + (P1S["d"],))
write("call-e", "call E: role3's chunks per token + one load round (B) against the shipped bundles (A)",
      ("role3", "span"), ("role3", "span"), CASES + (P1S["e"],))

# call E's span change per case and T as bars (the plot needs matplotlib; the table is the result)
SHORT = {"P = 1 GLM-5.2": "GLM P1", "P = 1 DSV-4.1-Flash": "DSV P1", "GLM-5.2 share": "GLM share",
         "DSV-4.1-Flash share": "DSV share", "P = 1 GLM-5.2 + shared": "GLM P1+sh"}
bars = []
for line in (here / "call-e" / "arms.md").read_text().splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if len(cells) == 6 and cells[0] in SHORT:
        bars.append((f"{SHORT[cells[0]]} T={cells[1]}", float(cells[5].rstrip(" %"))))
plot_changes(bars, here / "ab_span_role3.png", "Session 43 call E, H200: the layer's span, role3 chunks + one load "
             "round vs shipped", xlabel="span change, new vs old (%)")
