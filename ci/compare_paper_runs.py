"""Compare two sets of paper-protocol bench runs (``gcmoe_runtime.bench sweep`` folders) configuration by
configuration: gc-moe's slowest-rank median per T, the change, and the new run's (a) / gc-moe ratio. Writes
``compare.md`` and, where matplotlib is importable, ``compare.png`` into the new runs' folder. Each results folder's
README gives the command line that wrote its comparison:

    python3 ci/compare_paper_runs.py NEW_FOLDER --old-label "session 13" --new-label "session 15" --title "..." \
        paper-glm-p2-routed=../2026-12-01-h200-x2-session13/paper-glm-p2-routed ...
"""
from __future__ import annotations

import argparse
from raw_json import json_exists, load_json
from pathlib import Path


def points(folder: Path, impl: str = "gc-moe") -> dict[int, float]:
    """T -> slowest-rank median latency (µs) of ``impl`` in one sweep folder (points that ran)."""
    out = {}
    for mv in load_json(folder / "results.json")["models"]:
        for p in mv["points"]:
            g = p["impls"].get(impl, {})
            if g.get("status") == "ok":
                out[p["T"]] = g["latency_us"]
    return out


def _label(cfg: str) -> str:
    """A configuration folder's name without the ``paper-`` prefix the protocol's folders carry."""
    return cfg.removeprefix("paper-")


def compare(here: Path, prev: dict[str, str], old_label: str, new_label: str, title: str) -> str:
    """``prev``: configuration folder (under ``here``) -> the older run's folder (relative to ``here``)."""
    lines = [f"| configuration | T | {old_label} gc-moe µs | {new_label} gc-moe µs | change | {new_label} (a) / gc-moe |",
             "|---|---|---|---|---|---|"]
    series = {}
    for cfg, old_dir in prev.items():
        new, old, serial = points(here / cfg), points(here / old_dir), points(here / cfg, "gc-moe-serial")
        series[cfg] = (old, new)
        for t in sorted(new):
            if t in old:
                ratio = f"{serial[t] / new[t]:.3f}" if t in serial else "-"  # (a) not in the new run
                lines.append(f"| {_label(cfg)} | {t} | {old[t]:.1f} | {new[t]:.1f} | {(new[t] / old[t] - 1) * 100:+.1f} % | "
                             f"{ratio} |")
    table = "\n".join(lines) + "\n"
    (here / "compare.md").write_text(table)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: compare.md only")
        return table
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax in axes.flat[len(series):]:
        ax.axis("off")
    for ax, (cfg, (old, new)) in zip(axes.flat, series.items()):
        ts = sorted(set(old) & set(new))
        ax.plot(ts, [old[t] for t in ts], "o--", label=old_label)
        ax.plot(ts, [new[t] for t in ts], "o-", label=new_label)
        ax.set_xscale("log", base=2)
        ax.set_title(_label(cfg))
        ax.set_xlabel("tokens per rank")
        ax.set_ylabel("µs (slowest-rank median)")
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(here / "compare.png", dpi=110)
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("here", type=Path, help="the new runs' folder (compare.md / compare.png are written there)")
    ap.add_argument("pairs", nargs="+", help="CONFIG=OLD: a configuration folder under HERE and the older run's "
                                             "folder, relative to HERE")
    ap.add_argument("--old-label", required=True)
    ap.add_argument("--new-label", required=True)
    ap.add_argument("--title", required=True)
    a = ap.parse_args(argv)
    prev = {}
    for pair in a.pairs:
        cfg, sep, old = pair.partition("=")
        if not sep or not json_exists(a.here / cfg / "results.json") or not json_exists(a.here / old / "results.json"):
            ap.error(f"pair {pair!r}: expected CONFIG=OLD with a results.json in HERE/CONFIG and HERE/OLD")
        prev[cfg] = old
    print(compare(a.here, prev, a.old_label, a.new_label, a.title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
