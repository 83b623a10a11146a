"""Session 46 tables (`../steps/s46-*.steps`): `python3 ab_table.py` here (the repo's environment; matplotlib for the
plot) -> call-{a,b}/arms.md, call-{a,b}/ab_span.png.

Call A: role2's placement classes. O = session 45's bundles + the shipped edge rule (full edge at T = 2-5), N = the new
bundles + the same rule, L = the new bundles + the launch-order edge at every T; `bench timeline`, median of 20
replays per run; + shared O N L L N O, routed O N N O."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import change_pct, load_json, mean, plot_changes, role_us  # noqa: E402

SHARED = (("P = 1 GLM-5.2 + shared", "glm"), ("P = 1 DSV-4.1-Flash + shared", "dsv"),
          ("GLM-5.2 share + shared", "sglm"), ("DSV-4.1-Flash share + shared", "sdsv"))
ROUTED = (("P = 1 GLM-5.2 routed", "rglm"), ("DSV-4.1-Flash share routed", "rsdsv"))


def arms_table(tl, cases, runs):
    """Rows of span / role2 per arm and the changes of the second arm (N or S) against O (and L vs N, L vs O where L
    ran)."""
    new = list(runs)[1]
    head = "| case | T | " + " | ".join(f"{a} span µs" for a in runs) + " | " + " | ".join(
        f"{a} role2 µs" for a in runs) + f" | {new} vs O | " + ("L vs N | L vs O |" if "L" in runs else "")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    bars = []
    for label, pre in cases:
        got = {(a, w): [role_us(tl / f"{pre}-{a}-{i}", w) for i in idx] for a, idx in runs.items()
               for w in ("span", "role2")}
        for t in sorted(got["O", "span"][0]):
            cells = [f"{mean([r[t] for r in got[a, 'span']]):.1f}" for a in runs]
            cells += [f"{mean([r[t] for r in got[a, 'role2']]):.1f}" for a in runs]
            ch = [change_pct(got["O", "span"], got[new, "span"], t)]
            if "L" in runs:
                ch += [change_pct(got["N", "span"], got["L", "span"], t), change_pct(got["O", "span"], got["L", "span"], t)]
            lines.append(f"| {label} | {t} | " + " | ".join(cells) + " | " + " | ".join(f"{c:+.1f} %" for c in ch) + " |")
            bars.append((f"{pre} T={t}", ch[-1]))
    return lines, bars


TITLES = {"call-a": "role2's placement classes, class 1 filled from the top (pairs (k, G-1-k))",
          "call-b": "role2's placement classes with the upper half reversed (pairs (k, G/2+k)); N, L = this form"}
for call, title in TITLES.items():
    tl = here / call / "tl"
    sh, bars = arms_table(tl, SHARED, {"O": (1, 6), "N": (2, 5), "L": (3, 4)})
    ro, rbars = arms_table(tl, ROUTED, {"O": (1, 4), "N": (2, 3)})
    text = (f"# session 46 {call.replace('-', ' ')}: {title}\n\nMean of two runs per arm; the span and role2's "
            "duration (median of 20 replays each run).\n\n## + shared (O N L L N O)\n\n" + "\n".join(sh)
            + "\n\n## routed (O N N O)\n\n" + "\n".join(ro) + "\n")
    (here / call / "arms.md").write_text(text)
    plot_changes(bars + rbars, here / call / "ab_span.png", f"session 46 {call.replace('-', ' ')}: span, L (N routed) vs O",
                 xlabel="layer span vs session 45 (%)")
    print(text)

# call C (`../steps/s46-c.steps`): S = the form shipped (placed index after role4's launch-order port, that port at
# every T) against O (session 45's bundles and edge rule); + shared and routed O S S O
tl = here / "call-c" / "tl"
sh, bars = arms_table(tl, SHARED, {"O": (1, 4), "S": (2, 3)})
ro, rbars = arms_table(tl, ROUTED, {"O": (1, 4), "S": (2, 3)})
text = ("# session 46 call C: the shipped form (S: placed index after role4's launch-order port, that port at every "
        "T) against session 45 (O)\n\nMean of two runs per arm (O S S O); the span and role2's duration (median of 20 "
        "replays each run).\n\n## + shared\n\n" + "\n".join(sh) + "\n\n## routed\n\n" + "\n".join(ro) + "\n")
(here / "call-c" / "arms.md").write_text(text)
plot_changes(bars + rbars, here / "call-c" / "ab_span.png", "session 46 call C: span, shipped form vs session 45",
             xlabel="layer span vs session 45 (%)")
print(text)


def role_edges(run_dir) -> dict[int, dict]:
    """T -> {role: summary} (median start / end µs from the replay's first kernel) of one timeline run."""
    return {p["tokens"]: p["summary"]["roles"] for p in load_json(Path(run_dir) / "timeline.json")["models"][0]["points"]}


# call C, where the time goes at T = 1-5: role2 starts while role4 runs (S) and role4 ends later beside it
lines = ["| case | T | role4 end O / S µs | role2 start O / S µs | role2 end O / S µs |", "|---|---|---|---|---|"]
for label, pre in SHARED:
    o = [role_edges(tl / f"{pre}-O-{i}") for i in (1, 4)]
    n = [role_edges(tl / f"{pre}-S-{i}") for i in (2, 3)]
    for t in (1, 2, 3, 4, 5):
        cell = lambda role, k: " / ".join(f"{mean([r[t][role][k] for r in arm]):.1f}" for arm in (o, n))
        lines.append(f"| {label} | {t} | {cell('role4', 'end_us')} | {cell('role2', 'start_us')} | "
                     f"{cell('role2', 'end_us')} |")
text = ("# session 46 call C: role4's end, role2's start and end at T = 1-5 (O / S, mean of two runs each)\n\n"
        + "\n".join(lines) + "\n")
(here / "call-c" / "edges.md").write_text(text)
print(text)
