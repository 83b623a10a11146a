"""Session 47 tables (`../steps/s47-*.steps`): `python3 ab_table.py` here (the repo's environment; matplotlib for the
plot) -> call-{b,c}/arms.md, call-{b,c}/ab_span.png.

Calls B and C: role2's first W1 task's weights into L2 before its ring block is full (B: searched from the receive
counts after the first barrier; C: from the routing at the CTA's start). O = session 46's bundles, N0 = the new bundles
with the prefetch off, N4 / N8 / N16 = the new bundles with that many K128 steps; routed P = 1 `bench timeline`
(median of 20 replays per run), O N0 N4 N8 N16 N16 N8 N4 N0 O per model."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import change_pct, mean, plot_changes, role_us  # noqa: E402


def arms_table(tl, cases, runs, base="O"):
    """Rows of the span per arm (mean of its runs) and every other arm's change against ``base``; bars of each arm's
    change for the plot."""
    arms = list(runs)
    others = [a for a in arms if a != base]
    head = ("| case | T | " + " | ".join(f"{a} span µs" for a in arms) + " | "
            + " | ".join(f"{a} vs {base}" for a in others) + " |")
    lines, bars = [head, "|" + "---|" * (head.count("|") - 1)], []
    for label, pre in cases:
        got = {a: [role_us(tl / f"{pre}-{a}-{i}", "span") for i in idx] for a, idx in runs.items()}
        for t in sorted(got[base][0]):
            ch = [change_pct(got[base], got[a], t) for a in others]
            lines.append(f"| {label} | {t} | " + " | ".join(f"{mean([r[t] for r in got[a]]):.1f}" for a in arms)
                         + " | " + " | ".join(f"{c:+.1f} %" for c in ch) + " |")
            bars += [(f"{pre} T={t} {a}", c) for a, c in zip(others, ch) if a != "N0" or t <= 4]
    return lines, bars


ROUTED = (("P = 1 GLM-5.2 routed", "rglm"), ("P = 1 DSV-4.1-Flash routed", "rdsv"))
FORMS = {"call-b": "searched from the receive counts after the first barrier",
         "call-c": "searched from the routing (topk_idx) at the CTA's start"}
for call, form in FORMS.items():
    tl = here / call / "tl"
    if not tl.is_dir():
        continue
    rows, bars = arms_table(tl, ROUTED, {"O": (1, 10), "N0": (2, 9), "N4": (3, 8), "N8": (4, 7), "N16": (5, 6)})
    text = (f"# session 47 {call.replace('-', ' ')}: the first W1 task's weights into L2, {form} (routed P = 1)\n\n"
            "O = session 46's bundles, N0 = the new bundles with the prefetch off, N4 / N8 / N16 = K128 steps "
            "prefetched (T <= 4; T = 6-8 run no prefetch in any arm). Mean of two runs per arm (O N0 N4 N8 N16 N16 N8 "
            "N4 N0 O); the span, median of 20 replays each run.\n\n" + "\n".join(rows) + "\n")
    (here / call / "arms.md").write_text(text)
    plot_changes([b for b in bars if int(b[0].split("T=")[1].split()[0]) <= 4], here / call / "ab_span.png",
                 f"session 47 {call.replace('-', ' ')}: span against session 46, routed P = 1",
                 xlabel="layer span vs session 46 (%)")
    print(text)


# call E (`../steps/s47-e.steps`): the shipped prefetch (S) against session 46 (O) with every replay cold
# (`bench timeline --cold`), O S S O per model
tl = here / "call-e" / "tl"
if tl.is_dir():
    cold = (("P = 1 GLM-5.2 routed, cold", "cglm"), ("P = 1 DSV-4.1-Flash routed, cold", "cdsv"))
    rows, bars = arms_table(tl, cold, {"O": (1, 4), "S": (2, 3)})
    text = ("# session 47 call e: the shipped prefetch (S) against session 46 (O), every replay after an L2 flush\n\n"
            "`bench timeline --cold`, routed P = 1; mean of two runs per arm (O S S O); the span, median of 20 "
            "replays each run. The prefetch runs at T <= 2.\n\n" + "\n".join(rows) + "\n")
    (here / "call-e" / "arms.md").write_text(text)
    plot_changes(bars, here / "call-e" / "ab_span.png", "session 47 call E: span against session 46, cold replays",
                 xlabel="layer span vs session 46 (%)")
    print(text)
