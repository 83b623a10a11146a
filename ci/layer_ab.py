"""Layer A/B of ``gcmoe_runtime.bench sweep`` folders (alternating runs of an old and a new bundle in one GPU call):
per (model, T) gc-moe's latency in each run and the change of the means. The sessions' plot scripts import
:func:`load` / :func:`ratio`; the command line prints the table.

    python3 ci/layer_ab.py OLD_DIR[,OLD_DIR2,...] NEW_DIR[,NEW_DIR2,...] [--plot OUT.png --title TITLE]

``--plot`` (matplotlib) draws the change of the means per model over T, each run's own ratio to the old mean as dots.
"""
from __future__ import annotations

from raw_json import load_json
import sys
from pathlib import Path


def load(run_dir) -> dict[tuple[str, int], float]:
    """(model, T) -> gc-moe's slowest-rank median latency (µs) in one sweep folder (points that ran)."""
    out = {}
    for mv in load_json(Path(run_dir) / "results.json")["models"]:
        for p in mv["points"]:
            g = p["impls"].get("gc-moe", {})
            if g.get("status") == "ok":
                out[(mv["shape"]["name"], p["T"])] = g["latency_us"]
    return out


def ratio(old_dirs, new_dirs) -> dict[tuple[str, int], float]:
    """(model, T) -> mean of the new runs over mean of the old runs, for the points every run measured."""
    old = [load(d) for d in old_dirs]
    new = [load(d) for d in new_dirs]
    keys = set.intersection(*(set(r) for r in old + new))
    return {k: (sum(r[k] for r in new) / len(new)) / (sum(r[k] for r in old) / len(old)) for k in keys}


def plot(old, new, r, out: str, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for model in sorted({k[0] for k in r}):
        ts = sorted(t for m, t in r if m == model)
        line, = ax.plot(ts, [(r[(model, t)] - 1) * 100 for t in ts], "o-", label=model)
        for run in new:  # each new run against the old runs' mean: the spread the mean hides
            ax.plot(ts, [(run[(model, t)] / (sum(o[(model, t)] for o in old) / len(old)) - 1) * 100 for t in ts],
                    ".", color=line.get_color(), alpha=0.5)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per rank")
    ax.set_ylabel("new / old - 1 (%), gc-moe latency")
    ax.set_title(title, fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", help="comma-separated sweep folders of the old arm")
    ap.add_argument("new", help="comma-separated sweep folders of the new arm")
    ap.add_argument("--plot", help="write a plot of the change here (needs matplotlib)")
    ap.add_argument("--title", default="layer A/B")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    old_dirs, new_dirs = a.old.split(","), a.new.split(",")
    old = [load(d) for d in old_dirs]
    new = [load(d) for d in new_dirs]
    r = ratio(old_dirs, new_dirs)
    for k in sorted(r):
        print(f"{k[0]:20} T={k[1]:4}  old {' '.join(f'{x[k]:7.1f}' for x in old)}  "
              f"new {' '.join(f'{x[k]:7.1f}' for x in new)}  {(r[k] - 1) * 100:+5.1f}%")
    if a.plot:
        plot(old, new, r, a.plot, a.title)


if __name__ == "__main__":
    main()
