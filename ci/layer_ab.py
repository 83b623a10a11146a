"""Layer A/B of ``gcmoe_runtime.bench sweep`` folders (alternating runs of an old and a new bundle in one GPU call):
per (model, T) gc-moe's latency in each run and the change of the means. The sessions' plot scripts import
:func:`load` / :func:`ratio`; the command line prints the table.

    python3 ci/layer_ab.py OLD_DIR[,OLD_DIR2,...] NEW_DIR[,NEW_DIR2,...]
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def load(run_dir) -> dict[tuple[str, int], float]:
    """(model, T) -> gc-moe's slowest-rank median latency (µs) in one sweep folder (points that ran)."""
    out = {}
    for mv in json.load(open(Path(run_dir) / "results.json"))["models"]:
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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    old_dirs, new_dirs = argv[0].split(","), argv[1].split(",")
    old = [load(d) for d in old_dirs]
    new = [load(d) for d in new_dirs]
    r = ratio(old_dirs, new_dirs)
    for k in sorted(r):
        print(f"{k[0]:20} T={k[1]:4}  old {' '.join(f'{x[k]:7.1f}' for x in old)}  "
              f"new {' '.join(f'{x[k]:7.1f}' for x in new)}  {(r[k] - 1) * 100:+5.1f}%")


if __name__ == "__main__":
    main()
