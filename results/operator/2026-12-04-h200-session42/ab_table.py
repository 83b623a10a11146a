"""Session 42: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), runs alternating in
one call (README.md). Call B: timing probes of the FP4 decode's table work against the shipped role2 — B = one
folded-table pair per K128 step and slab (`exp-s42-lut-per-step.diff`), C = no table work (`exp-s42-lut-const.diff`);
outputs wrong in both. `python3 ab_table.py` here -> call-b/arms_role2.md and, with matplotlib, ab_role2.png."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import ARM_TABLE_HEAD, arm_rows, plot_changes, write_ab_table  # noqa: E402

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

# Call C: B (tables per step), D (B + role1 writing each ring row K-interleaved), E (role1's permutation alone) against
# A, order A B D E E D B A; role2, role1 and the layer's span (the replay's first kernel start -> last kernel end).
from raw_json import load_json  # noqa: E402


def point_us(run_dir, what: str) -> dict[int, float]:
    """T -> role ``what``'s median duration, or the span (``what == "span"``), of one timeline run (µs)."""
    pts = load_json(Path(run_dir) / "timeline.json")["models"][0]["points"]
    return {p["tokens"]: p["summary"]["span_us"] if what == "span" else p["summary"]["roles"][what]["dur_us"]
            for p in pts}


C_CASES = [("GLM-5.2 share", "sh-glm"), ("DSV-4.1-Flash share", "sh-dsv"), ("GLM-5.2 P = 1", "p1-glm")]
C_RUNS = {"A": (1, 8), "B": (2, 7), "D": (3, 6), "E": (4, 5)}
lines = ["| case | T | A span µs | " + " | ".join(f"{x} {w}" for x in "BDE" for w in ("role2", "role1", "span")) + " |",
         "|---|---|---|" + "---|" * 9]
for label, pre in C_CASES:
    tl = here / "call-c" / "tl"
    got = {(arm, what): [point_us(tl / f"{pre}-{arm}-{i}", what) for i in runs]
           for arm, runs in C_RUNS.items() for what in ("role2", "role1", "span")}
    for t in sorted(got["A", "span"][0]):
        def pct(arm, what):
            a = sum(r[t] for r in got["A", what]) / 2
            return f"{100 * (sum(r[t] for r in got[arm, what]) / 2 / a - 1):+.1f} %"
        a_span = " / ".join(f"{r[t]:.1f}" for r in got["A", "span"])
        lines.append(f"| {label} | {t} | {a_span} | " + " | ".join(pct(x, w) for x in "BDE"
                                                                 for w in ("role2", "role1", "span")) + " |")
text = ("# session 42 call C: the K-interleave probes against the shipped bundles (mean of two runs each, change in %)\n\n"
        "B: role2 tables per K128 step; D: B + role1 writing ring rows K-interleaved; E: role1's permutation alone.\n\n"
        + "\n".join(lines) + "\n")
(here / "call-c" / "arms.md").write_text(text)
print(text)

# Call D: F (tables read from shared memory, `exp-s42-lut-smem.diff`) and B against A, order A F B B F A; role2.
rows = list(ARM_TABLE_HEAD)
for label, pre in C_CASES[:2]:
    rows += arm_rows(here / "call-d" / "tl", label, (f"{pre}-A-1", f"{pre}-A-6"),
                     [("smem tables", (f"{pre}-F-2", f"{pre}-F-5")), ("per-step", (f"{pre}-B-3", f"{pre}-B-4"))])[0]
write_ab_table(here / "call-d" / "arms_role2.md", "session 42 call D: tables from shared memory (F) and per K128 step "
               "(B) against the shipped role2", rows)

# Call E: E (role1's permutation), E2 (E under the next token's early pull), G (the early pull alone, correct) against A,
# order A E E2 G G E2 E A (P = 1 GLM-5.2: A and G only); role2, role1 and the span.
E_RUNS = {"A": (1, 8), "E": (2, 7), "E2": (3, 6), "G": (4, 5)}
lines = ["| case | T | A role1 µs | A span µs | " + " | ".join(f"{x} {w}" for x in ("E", "E2", "G")
                                                         for w in ("role1", "span")) + " |", "|---|---|---|---|" + "---|" * 6]
for label, pre in C_CASES:
    tl = here / "call-e" / "tl"
    arms = [a for a in E_RUNS if (tl / f"{pre}-{a}-{E_RUNS[a][0]}").exists()]
    got = {(arm, what): [point_us(tl / f"{pre}-{arm}-{i}", what) for i in E_RUNS[arm]]
           for arm in arms for what in ("role1", "span")}
    for t in sorted(got["A", "span"][0]):
        def pct(arm, what):
            if arm not in arms:
                return "-"
            a = sum(r[t] for r in got["A", what]) / 2
            return f"{100 * (sum(r[t] for r in got[arm, what]) / 2 / a - 1):+.1f} %"
        cell = lambda what: " / ".join(f"{r[t]:.1f}" for r in got["A", what])  # noqa: E731
        lines.append(f"| {label} | {t} | {cell('role1')} | {cell('span')} | "
                     + " | ".join(pct(x, w) for x in ("E", "E2", "G") for w in ("role1", "span")) + " |")
text = ("# session 42 call E: role1's permutation under the next pull, and the early pull alone (mean of two runs, change "
        "against A)\n\nE: role1 permutes each ring row (call C's probe); E2: E with the next token's pull issued as soon as "
        "the row has landed; G: that early pull alone (correct).\n\n" + "\n".join(lines) + "\n")
(here / "call-e" / "arms.md").write_text(text)
print(text)

# Calls F and G: role1's permutation with all of a row's loads before its stores (E3 / E4: with the full / the
# shared-only proxy fence), alone and with role2's per-step tables (D3 / D4), against A, order A E D D E A; role2,
# role1 and the span.
def rd_table(call: str, e: str, d: str, title: str, note: str) -> None:
    runs = {"A": (1, 6), e: (2, 5), d: (3, 4)}
    lines = ["| case | T | A span µs | " + " | ".join(f"{x} {w}" for x in (e, d) for w in ("role2", "role1", "span"))
             + " |", "|---|---|---|" + "---|" * 6]
    for label, pre in C_CASES[:2]:
        tl = here / call / "tl"
        got = {(arm, what): [point_us(tl / f"{pre}-{arm}-{i}", what) for i in rs]
               for arm, rs in runs.items() for what in ("role2", "role1", "span")}
        for t in sorted(got["A", "span"][0]):
            def pct(arm, what):
                a = sum(r[t] for r in got["A", what]) / 2
                return f"{100 * (sum(r[t] for r in got[arm, what]) / 2 / a - 1):+.1f} %"
            lines.append(f"| {label} | {t} | " + " / ".join(f"{r[t]:.1f}" for r in got["A", "span"]) + " | "
                         + " | ".join(pct(x, w) for x in (e, d) for w in ("role2", "role1", "span")) + " |")
    text = f"# session 42 {title} (mean of two runs, change against A)\n\n{note}\n\n" + "\n".join(lines) + "\n"
    (here / call / "arms.md").write_text(text)
    print(text)


rd_table("call-f", "E3", "D3", "call F: role1's permutation with all of a row's loads before its stores",
         "E3: role1 permutes each ring row, one warp sync per row; D3: E3 + role2's tables per K128 step.")
rd_table("call-g", "E4", "D4", "call G: call F's role1 permutation with the shared-only proxy fence",
         "E4: as E3 with `fence.proxy.async.shared::cta` instead of `fence.proxy.async`; D4: E4 + role2's tables per "
         "K128 step.")
