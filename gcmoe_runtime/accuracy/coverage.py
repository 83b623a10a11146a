"""Which accuracy-suite runs passed, per model x P x routed/shared x kernel build: the coverage table of issue 6.

``python -m gcmoe_runtime.accuracy.coverage JSON_OR_DIR ...`` reads the per-rank documents the GPU harness writes
(``tests/runtime/operator/gpu_accuracy.py``: ``<preset>-s<shared>-P<world>[-bm..t..]-rank<r>.json``) and prints one
markdown row per (model, P, routed/shared, bundle): ranks that passed every case, the worst cosine against the
quantised reference, the forced tiles seen, and the bundle's top hash (``bundle_top_hash``; older documents carry
only the bundle's file name). A configuration is "pass" only when every rank of P passed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load_documents(paths: list[str]) -> list[dict]:
    """Accuracy documents (those with a ``summary`` and a ``config``) under the given files or folders."""
    docs = []
    for p in map(Path, paths):
        for f in sorted(p.rglob("*.json")) if p.is_dir() else [p]:
            try:
                d = json.loads(f.read_text())
            except (OSError, ValueError) as e:
                raise ValueError(f"{f}: not a readable JSON document ({e})") from None
            if isinstance(d, dict) and "summary" in d and "config" in d:
                docs.append(dict(d, _file=str(f)))
    return docs


def coverage_rows(docs: list[dict]) -> list[dict]:
    """One row per (model, P, shared, bundle), ranks merged."""
    groups: dict[tuple, dict] = {}
    for d in docs:
        c, s = d["config"], d["summary"]
        build = d.get("bundle_top_hash") or d.get("bundle") or "unknown"
        key = (c["name"], int(c["world"]), bool(c["shared_experts"]), build)
        g = groups.setdefault(key, {"model": key[0], "world": key[1], "shared": key[2], "build": build,
                                    "passed_ranks": set(), "failed_ranks": set(), "min_cos": 1.0, "tiles": set()})
        ok = s["rank_cases_passed"] == s["rank_cases"]
        for r in d["ranks"]:
            (g["passed_ranks"] if ok else g["failed_ranks"]).add(int(r))
        g["min_cos"] = min(g["min_cos"], min(cat["min_cos_impl_vs_ref"] for cat in s["categories"].values()))
        tile = d.get("forced_tile")
        g["tiles"].add("heuristic" if not tile else "x".join(map(str, tile)))
    rows = []
    for g in sorted(groups.values(), key=lambda g: (g["model"], g["world"], g["shared"], g["build"])):
        # a rank that failed any run (e.g. one forced tile) is not a pass
        g["passed_ranks"] -= g["failed_ranks"]
        g["status"] = "pass" if (not g["failed_ranks"] and g["passed_ranks"] == set(range(g["world"]))) else (
            "FAIL" if g["failed_ranks"] else "incomplete")
        rows.append(g)
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| model | P | experts | status | ranks passed | worst cosine vs reference | tiles | bundle |",
           "|---|---|---|---|---|---|---|---|"]
    for g in rows:
        ranks = ",".join(map(str, sorted(g["passed_ranks"]))) or "-"
        out.append(f"| {g['model']} | {g['world']} | {'routed + shared' if g['shared'] else 'routed'} | {g['status']} "
                   f"| {ranks} | {g['min_cos']:.6f} | {', '.join(sorted(g['tiles']))} | `{str(g['build'])[:16]}` |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", help="accuracy JSON documents or folders holding them")
    a = ap.parse_args(argv)
    try:
        rows = coverage_rows(load_documents(a.paths))
    except ValueError as e:
        print(f"coverage: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("coverage: no accuracy documents found", file=sys.stderr)
        return 2
    sys.stdout.write(markdown(rows))
    return 0 if all(g["status"] == "pass" for g in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
