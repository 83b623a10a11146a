"""Session 47: each CTA's first task in a `bench tasks` trace (median replay): when its producer began (claim), held
its block (ready), when the consumers had the record (start), the first chunk (chunk0) and the end of the K loop
(kloop), µs from role2's first claim at the 0 / 25 / 50 / 75 / 100 % quantiles over the CTAs whose first task is W1.
`python3 first_tasks.py CALL_DIR` -> CALL_DIR/first_tasks.md (call A's traces; call C's N0 / N8 pairs)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "ci"))
from raw_json import load_json  # noqa: E402

FIELDS = ("claim", "ready", "start", "chunk0", "kloop_end")


def quantiles(xs):
    xs = sorted(xs)
    return [xs[round(q * (len(xs) - 1))] / 1000 for q in (0, 0.25, 0.5, 0.75, 1)]


def first_w1_rows(trace_dir):
    """(tokens, [first-task W1 rows]) per point of one `bench tasks` folder."""
    for p in load_json(Path(trace_dir) / "tasks.json")["models"][0]["points"]:
        mr = p["median_replay"]
        rows = [dict(zip(mr["fields"], r)) for r in mr["rows"]]
        first = {}
        for r in rows:
            if r["cta"] not in first or r["start"] < first[r["cta"]]["start"]:
                first[r["cta"]] = r
        yield p["tokens"], [r for r in first.values() if r["w1"] == 1], p["median"]["span_us"]


def table(call_dir):
    lines = ["| trace | T | span µs | first W1 tasks | " + " | ".join(f"{f} µs (0/25/50/75/100 %)" for f in FIELDS) + " |",
             "|" + "---|" * (4 + len(FIELDS))]
    for d in sorted((Path(call_dir) / "tasks").iterdir()):
        for t, rows, span in first_w1_rows(d):
            cells = [" / ".join(f"{v:.1f}" for v in quantiles([r[f] for r in rows])) for f in FIELDS]
            lines.append(f"| {d.name} | {t} | {span:.1f} | {len(rows)} | " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    out = Path(sys.argv[1])
    text = ("# Each CTA's first W1 task (median replay; µs from role2's first claim)\n\n"
            + "\n".join(table(out)) + "\n")
    (out / "first_tasks.md").write_text(text)
    print(text)
