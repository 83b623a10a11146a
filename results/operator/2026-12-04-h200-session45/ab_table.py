"""Session 45 call A (`../steps/s45-a.steps`): role4 on the dispatch partition after role1, beside role2 (D, forced at
every T with ci/run_with_heuristics.py; the change is `exp-s45-role4-on-dispatch.diff`) against the shipped placement
(C: role4 on the compute SMs before role2), `bench timeline --shared`, median of 20 replays per run, order C D D C.
`python3 ab_table.py` here -> call-a/arms.md."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import change_pct, load_json, mean, plot_changes, role_us  # noqa: E402

RUNS = {"C": (1, 4), "D": (2, 3)}
CASES = (("P = 1 GLM-5.2 + shared", "glm"), ("P = 1 DSV-4.1-Flash + shared", "dsv"), ("GLM-5.2 share + shared", "sglm"),
         ("DSV-4.1-Flash share + shared", "sdsv"))


def role4_end(run_dir) -> dict[int, float]:
    """T -> role4's median end (µs from the replay's first kernel)."""
    pts = load_json(Path(run_dir) / "timeline.json")["models"][0]["points"]
    return {p["tokens"]: p["summary"]["roles"]["role4"]["end_us"] for p in pts}


lines = ["| case | T | C role4 µs | D role4 µs | D role4 end µs | C role2 µs | D role2 µs | C span µs | D span µs | "
         "span D vs C |", "|---|---|---|---|---|---|---|---|---|---|"]
tl = here / "call-a" / "tl"
for label, pre in CASES:
    got = {(a, w): [role_us(tl / f"{pre}-{a}-{i}", w) for i in RUNS[a]] for a in RUNS for w in ("role4", "role2", "span")}
    end = [role4_end(tl / f"{pre}-D-{i}") for i in RUNS["D"]]
    for t in sorted(got["C", "span"][0]):
        m = {k: mean([r[t] for r in v]) for k, v in got.items()}
        lines.append(f"| {label} | {t} | {m['C', 'role4']:.1f} | {m['D', 'role4']:.1f} | {mean([e[t] for e in end]):.1f} | "
                     f"{m['C', 'role2']:.1f} | {m['D', 'role2']:.1f} | {m['C', 'span']:.1f} | {m['D', 'span']:.1f} | "
                     f"{change_pct(got['C', 'span'], got['D', 'span'], t):+.1f} % |")
text = ("# session 45 call A: role4 on the dispatch SMs after role1 (D) against role4 on the compute SMs before role2 "
        "(C)\n\nMean of two runs per arm (C D D C); role4 / role2 durations, role4's end (D), the span.\n\n"
        + "\n".join(lines) + "\n")
(here / "call-a" / "arms.md").write_text(text)
print(text)

# call B (`../steps/s45-b.steps`): the role4 -> role2 edge kind (GCMOE_ROLE4_EDGE), F full (shipped), L launch_order,
# M launch_order_prog, P programmatic; order F L M P P M L F
RUNS_B = {"F": (1, 8), "L": (2, 7), "M": (3, 6), "P": (4, 5)}
CASES_B = CASES[:3]
lines = ["| case | T | F span µs (runs) | F role2 start µs | L role2 start µs | F role4 µs | L role4 µs | L span | M span | "
         "P span |", "|---|---|---|---|---|---|---|---|---|---|"]
tl = here / "call-b" / "tl"


def role_start(run_dir, role: str) -> dict[int, float]:
    pts = load_json(Path(run_dir) / "timeline.json")["models"][0]["points"]
    return {p["tokens"]: p["summary"]["roles"][role]["start_us"] for p in pts}


for label, pre in CASES_B:
    got = {(a, w): [role_us(tl / f"{pre}-{a}-{i}", w) for i in RUNS_B[a]] for a in RUNS_B for w in ("role4", "span")}
    start = {a: [role_start(tl / f"{pre}-{a}-{i}", "role2") for i in RUNS_B[a]] for a in ("F", "L")}
    for t in sorted(got["F", "span"][0]):
        runs = " / ".join(f"{r[t]:.1f}" for r in got["F", "span"])
        lines.append(f"| {label} | {t} | {runs} | {mean([r[t] for r in start['F']]):.1f} | "
                     f"{mean([r[t] for r in start['L']]):.1f} | {mean([r[t] for r in got['F', 'role4']]):.1f} | "
                     f"{mean([r[t] for r in got['L', 'role4']]):.1f} | "
                     + " | ".join(f"{change_pct(got['F', 'span'], got[a, 'span'], t):+.1f} %" for a in "LMP") + " |")
text = ("# session 45 call B: the role4 -> role2 edge from role4's launch-order port (L: default type, M: programmatic "
        "type) or its programmatic port (P) against the full edge (F)\n\nMean of two runs per arm (F L M P P M L F); "
        "role2's start and role4's duration (F, L); the span's change against F.\n\n" + "\n".join(lines) + "\n")
(here / "call-b" / "arms.md").write_text(text)
print(text)


def span_table(call: str, runs: dict[str, tuple[int, ...]], old: str, new: str, title: str):
    """Per case and T, the span of each run of arm ``old`` and arm ``new`` and the change of their means; writes
    ``call-<call>/arms.md``; returns the (label, change %) bars."""
    lines = [f"| case | T | {old} span µs (runs) | {new} span µs (runs) | {new} vs {old} |", "|---|---|---|---|---|"]
    bars = []
    for label, pre in CASES:
        got = {a: [role_us(here / f"call-{call}" / "tl" / f"{pre}-{a}-{i}", "span") for i in runs[a]] for a in runs}
        for t in sorted(got[old][0]):
            change = change_pct(got[old], got[new], t)
            lines.append(f"| {label} | {t} | " + " | ".join(" / ".join(f"{r[t]:.1f}" for r in got[a]) for a in (old, new))
                         + f" | {change:+.1f} % |")
            bars.append((f"{label.replace(' + shared', '')} T={t}", change))
    text = f"# {title}\n\nTwo runs per arm, the span.\n\n" + "\n".join(lines) + "\n"
    (here / f"call-{call}" / "arms.md").write_text(text)
    print(text)
    return bars


# call C (`../steps/s45-c.steps`): F full against L launch_order at more loads and the DSV-4.1-Flash share; order F L L F
span_table("c", {"F": (1, 4), "L": (2, 3)}, "F", "L", "session 45 call C: the launch-order role4 -> role2 edge (L) "
           "against the full edge (F), + shared (F L L F)")
# call D (`../steps/s45-d.steps`): the shipped rule S (heuristics.sm90_role4_edge) against the full edge everywhere F
# (ci/run_with_heuristics.py), order S F F S
bars = span_table("d", {"F": (2, 3), "S": (1, 4)}, "F", "S", "session 45 call D: the shipped rule (S: role2 after "
                  "role4's launch-order port except at T = 2-5) against the full edge everywhere (F), + shared (S F F S)")
plot_changes(bars, here / "call-d" / "ab_span.png", "session 45 call D, + shared: role2 after role4's launch-order port\n"
             "outside T = 2-5 (S) vs the full edge (F)", "the layer's span, S vs F (%)")
