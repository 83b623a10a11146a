"""Session 42: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), runs alternating in
one call (README.md). Call B: timing probes of the FP4 decode's table work against the shipped role2 — B = one
folded-table pair per K128 step and slab (`exp-s42-lut-per-step.diff`), C = no table work (`exp-s42-lut-const.diff`);
outputs wrong in both. Calls C, E, F, G: role1 writing ring rows K-interleaved (its cost) and the early pull; call D:
tables read from shared memory (README.md's table). `python3 ab_table.py` here -> call-b/arms_role2.md, ab_role2.png
(with matplotlib), call-d/arms_role2.md and call-{c,e,f,g}/arms.md."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import ARM_TABLE_HEAD, arm_rows, arms_table, plot_changes, write_ab_table  # noqa: E402

#: (row label, short label, run prefix, runs of A / B / C)
CASES = [
    ("GLM-5.2 share", "GLM share", "sh-glm", (1, 6, 7), (2, 5, 8), (3, 4, 9)),
    ("DSV-4.1-Flash share", "DSV share", "sh-dsv", (1, 6, 7), (2, 5, 8), (3, 4, 9)),
    ("GLM-5.2 P = 1", "GLM P1", "p1-glm", (1, 6), (2, 5), ()),
]

rows, bars = list(ARM_TABLE_HEAD), []
for label, short, pre, a, b, c in CASES:
    arms = [(name, tuple(f"{pre}-{x}-{i}" for i in runs)) for name, x, runs in (("per-step", "B", b), ("const", "C", c))
            if runs]
    case_rows, changes = arm_rows(here / "call-b" / "tl", label, tuple(f"{pre}-A-{i}" for i in a), arms)
    rows += case_rows
    bars += [(f"{short} T={t}", ch) for arm, t, ch in changes if arm == "per-step"]
write_ab_table(here / "call-b" / "arms_role2.md", "session 42 call B: decode-table probes against the shipped role2",
               rows)
plot_changes(bars, here / "ab_role2.png", "Session 42, H200, role2 in the layer: tables per K128 step (probe) vs "
             "per K32")


#: (row label, run prefix) of the layer A/Bs of calls C-G
PROBE_CASES = [("GLM-5.2 share", "sh-glm"), ("DSV-4.1-Flash share", "sh-dsv"), ("GLM-5.2 P = 1", "p1-glm")]


def arms_md(call: str, runs: dict[str, tuple[int, ...]], whats: tuple[str, ...], title: str, note: str,
            shown=("span",)) -> None:
    """``call``/arms.md: :func:`timeline_ab.arms_table` of the call's runs, under a title and a note."""
    lines = arms_table(here / call / "tl", PROBE_CASES, runs, whats, shown)
    text = f"# session 42 {title} (mean of the runs, change against A)\n\n{note}\n\n" + "\n".join(lines) + "\n"
    (here / call / "arms.md").write_text(text)
    print(text)


R3 = ("role2", "role1", "span")
arms_md("call-c", {"A": (1, 8), "B": (2, 7), "D": (3, 6), "E": (4, 5)}, R3,
        "call C: the K-interleave probes against the shipped bundles",
        "B: role2 tables per K128 step; D: B + role1 writing ring rows K-interleaved; E: role1's permutation alone.")
# Call D: F (tables read from shared memory) and B against A, order A F B B F A; role2.
rows = list(ARM_TABLE_HEAD)
for label, pre in PROBE_CASES[:2]:
    rows += arm_rows(here / "call-d" / "tl", label, (f"{pre}-A-1", f"{pre}-A-6"),
                     [("smem tables", (f"{pre}-F-2", f"{pre}-F-5")), ("per-step", (f"{pre}-B-3", f"{pre}-B-4"))])[0]
write_ab_table(here / "call-d" / "arms_role2.md", "session 42 call D: tables from shared memory (F) and per K128 step "
               "(B) against the shipped role2", rows)
arms_md("call-e", {"A": (1, 8), "E": (2, 7), "E2": (3, 6), "G": (4, 5)}, ("role1", "span"),
        "call E: role1's permutation under the next pull, and the early pull alone",
        "E: role1 permutes each ring row (call C's probe); E2: E with the next token's pull issued as soon as the row "
        "has landed; G: that early pull alone (correct). P = 1: A and G only.", shown=("role1", "span"))
arms_md("call-f", {"A": (1, 6), "E3": (2, 5), "D3": (3, 4)}, R3,
        "call F: role1's permutation with all of a row's loads before its stores",
        "E3: role1 permutes each ring row, one warp sync per row; D3: E3 + role2's tables per K128 step.")
arms_md("call-g", {"A": (1, 6), "E4": (2, 5), "D4": (3, 4)}, R3,
        "call G: call F's role1 permutation with the shared-only proxy fence",
        "E4: as E3 with `fence.proxy.async.shared::cta` instead of `fence.proxy.async`; D4: E4 + role2's tables per "
        "K128 step.")
