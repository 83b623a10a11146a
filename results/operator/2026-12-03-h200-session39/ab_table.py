"""Session 39: role2 in the layer (`bench timeline`, median role2 duration of 20 replays per run), old (the bundles of
0087bcd7, static task split) against new (dynamic task claims, `exp-s39a-dynamic-claims.diff`, shipped in 204e67ce),
runs alternating in one call (README.md). Call A: both rank shares at the heuristic's tiles; call B: the GLM-5.2 share
forced onto BM 48. `python3 ab_table.py` in this folder -> call-*/ab_role2.md and, with matplotlib, ab_role2.png;
also the forced-tile table of the heuristic's steps (call-b/boundaries.md)."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import AB_TABLE_HEAD, ab_rows, plot_changes, role_us, write_ab_table  # noqa: E402

#: call -> (title, [(row label, short label, old runs, new runs)])
CALLS = {
    "call-a": ("session 39 call A: dynamic task claims, the heuristic's tiles", [
        ("GLM-5.2 share, heuristic tiles", "GLM", ("glm-old-1", "glm-old-2"), ("glm-new-1", "glm-new-2")),
        ("DSV-4.1-Flash share, heuristic tiles", "DSV", ("dsv-old-1", "dsv-old-2"), ("dsv-new-1", "dsv-new-2")),
    ]),
    "call-b": ("session 39 call B: dynamic task claims, BM 48 forced", [
        ("GLM-5.2 share, BM 48 forced", "GLM BM48", ("b48-old-1", "b48-old-2"), ("b48-new-1", "b48-new-2")),
    ]),
}
TITLE = "Session 39, H200, role2 in the layer (P = 8 shares): dynamic claims vs static split"


bars = []  # (label, change %) for the plot
for call, (title, cases) in CALLS.items():
    rows = list(AB_TABLE_HEAD)
    for label, short, old, new in cases:
        case_rows, changes = ab_rows(here / call / "tl", label, old, new)
        rows += case_rows
        bars += [(f"{call[-1].upper()} {short} T={t}", change) for t, change in changes]
    write_ab_table(here / call / "ab_role2.md", title, rows)

# the heuristic's BM steps with claims: each forced tile, one run (call B), the heuristic's pick marked
sys.path.insert(0, str(here.parents[2]))
from gcmoe_runtime.heuristics import choose_tile  # noqa: E402

SHAPES = {"GLM-5.2": dict(top_k=8, experts=32, hidden=6144, intermediate=2048),
          "DSV-4.1-Flash": dict(top_k=6, experts=48, hidden=5120, intermediate=2304)}
rows = ["| share | T | role2 µs per forced BM (* = the heuristic's pick) | pick fastest? |", "|---|---|---|---|"]
for share, prefix in (("GLM-5.2", "f-glm-"), ("DSV-4.1-Flash", "f-dsv-")):
    runs = {int(p.name[len(prefix):]): role_us(p) for p in sorted((here / "call-b" / "tl").glob(prefix + "*"))}
    for t in sorted({t for r in runs.values() for t in r}):
        pick = choose_tile("sm_90a", t, ranks=1, compute_sms=128, **SHAPES[share]).bm
        got = {bm: r[t] for bm, r in sorted(runs.items()) if t in r}
        cells = ", ".join(f"{bm}{'*' if bm == pick else ''}: {us:.1f}" for bm, us in got.items())
        best = min(got, key=got.get)
        verdict = "yes" if best == pick else f"no: BM {best} {100 * (got[best] / got[pick] - 1):+.1f} %"
        rows.append(f"| {share} | {t} | {cells} | {verdict if pick in got else '-'} |")
(here / "call-b" / "boundaries.md").write_text("# The heuristic's BM steps with dynamic claims (session 39 call B, "
                                               "one run per tile, routing seed 0)\n\n" + "\n".join(rows) + "\n")
print("\n".join(rows))

if bars:
    plot_changes(bars, here / "ab_role2.png", TITLE)
