"""Compare two bundles record by record, matched on (manifest, role, variant parameters): which records' cubin, launch
facts, parameters or tensor maps differ (a kernel change must touch only the records of the kernels it changed).

    python3 ci/compare_bundles.py OLD.gcmoe NEW.gcmoe
"""
from __future__ import annotations

import json
import sys

from gcmoe_runtime.artifacts.bundle import open_bundle


def _ident(r):
    return (r.manifest, r.role, json.dumps(r.variant, sort_keys=True))


def compare(old_path: str, new_path: str) -> int:
    old, new = open_bundle(old_path), open_bundle(new_path)
    a = {_ident(r): r for r in old.records}
    b = {_ident(r): r for r in new.records}
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
    compare(sys.argv[1], sys.argv[2])
