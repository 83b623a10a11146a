"""Redraw the per-run Gantt plots (``timeline.png``) that session 46 dropped from the tree to keep the device carry
under its limit (results/README.md, "Archived raw files").

Every ``bench timeline`` run folder keeps its ``timeline.json`` (or ``.json.gz``) and ``timeline.md``; the plot is a
pure function of the JSON (``gcmoe_runtime.bench.timeline.plot``), so it is redrawn on demand instead of carried:

    python3 ci/redraw_timelines.py results/operator/2026-12-04-h200-session45   # every run folder below it

Runs in the repo's environment (``.venv``: the bench package imports torch) with matplotlib on the path, e.g.
``PYTHONPATH=<a venv's site-packages with matplotlib> .venv/bin/python ci/redraw_timelines.py ...``.
Existing plots are left alone unless ``--force``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ci.raw_json import load_json  # noqa: E402
from gcmoe_runtime.bench.timeline import plot  # noqa: E402


def run_folders(root: Path):
    """Folders below ``root`` holding a timeline run's JSON (plain or gzipped)."""
    seen = set()
    for f in sorted(root.rglob("timeline.json*")):
        if f.name in ("timeline.json", "timeline.json.gz") and f.parent not in seen:
            seen.add(f.parent)
            yield f.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", type=Path)
    ap.add_argument("--force", action="store_true", help="redraw plots that exist")
    args = ap.parse_args(argv)
    drawn = 0
    for root in args.roots:
        for d in run_folders(root):
            out = d / "timeline.png"
            if out.exists() and not args.force:
                continue
            plot(load_json(d / "timeline.json"), out)
            drawn += 1
    print(f"drew {drawn} timeline plot(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
