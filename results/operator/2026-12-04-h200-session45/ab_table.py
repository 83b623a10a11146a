"""Session 45 call A (`../steps/s45-a.steps`): role4 on the dispatch partition after role1, beside role2 (D, forced at
every T with ci/run_with_heuristics.py; the change is `exp-s45-role4-on-dispatch.diff`) against the shipped placement
(C: role4 on the compute SMs before role2), `bench timeline --shared`, median of 20 replays per run, order C D D C.
`python3 ab_table.py` here -> call-a/arms.md."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import change_pct, load_json, mean, role_us  # noqa: E402

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
