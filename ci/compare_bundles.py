"""Compare two bundles record by record, matched on (manifest, role, variant parameters): which records' cubin, launch
facts, parameters or tensor maps differ (a kernel change must touch only the records of the kernels it changed).

    python3 ci/compare_bundles.py OLD.gcmoe NEW.gcmoe [--drop-param NAME ...]

``--drop-param NAME`` matches records without that variant parameter (a parameter one side's builds do not carry
yet, e.g. ``w1_split`` against a bundle built before session 22): two records of one side that differ only in it are
told apart by its value (``NAME=VALUE`` in the name), and the one whose value is the parameter's default ``1`` is
matched against the other side's record without it.
"""
from __future__ import annotations

import argparse
import json

from gcmoe_runtime.artifacts.bundle import open_bundle


def _ident(r, drop=()):
    v = {k: x for k, x in r.variant.items() if k not in drop}
    extra = "".join(f" {k}={r.variant[k]}" for k in drop if r.variant.get(k, 1) != 1)
    return (r.manifest, r.role + extra, json.dumps(v, sort_keys=True))


def compare(old_path: str, new_path: str, drop=()) -> int:
    old, new = open_bundle(old_path), open_bundle(new_path)
    a = {_ident(r, drop): r for r in old.records}
    b = {_ident(r, drop): r for r in new.records}
    changed = 0
    for k in sorted(set(a) | set(b)):
        ra, rb = a.get(k), b.get(k)
        name = f"{k[0]} {k[1]} {k[2][:110]}"
        if ra is None or rb is None:
            print(f"{'only new' if ra is None else 'only old'}: {name}")
            changed += 1
            continue
        diff = [f for f in ("cubin_sha256", "launch", "params", "tensormaps") if getattr(ra, f) != getattr(rb, f)]
        if diff:
            changed += 1
            print(f"differs ({', '.join(diff)}): {name}")
    print(f"{len(b)} records, {changed} differ; top {old.top_hash[:8]} -> {new.top_hash[:8]}")
    return changed


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--drop-param", action="append", default=[], metavar="NAME")
    args = ap.parse_args()
    compare(args.old, args.new, tuple(args.drop_param))
