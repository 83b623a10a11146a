"""Kernel-alone A/B of ``bench_role2.py --json`` runs (alternating orders of two dev variants in one GPU call): per
shape, tokens per expert and BM, the new variant's mean W1 / W2 time against its base's, all runs pooled. A variant
is "new" when its name ends with ``NEW_SUFFIX``; its base is the name with that suffix replaced by ``OLD_SUFFIX``.

    python3 ci/kernel_ab.py RUN.json[,RUN2.json,...] NEW_SUFFIX OLD_SUFFIX     (e.g. ... ks kef: _pp2ks vs _pp2kef)
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict


def load(files) -> dict[tuple[str, str, int, int], list[tuple[float, float]]]:
    """(shape, variant, tokens per expert, BM) -> [(W1 µs, W2 µs) per run]."""
    out = defaultdict(list)
    for f in files:
        for r in json.load(open(f))["rows"]:
            out[(r["shape"], r["variant"], r["tokens_per_expert"], r["bm"])].append((r["w1_us"], r["w2_us"]))
    return out


def pairs(files, new_sfx: str, old_sfx: str):
    """Rows ``(shape, variant, m, bm, (old W1, new W1), (old W2, new W2))`` of mean times, for every new variant whose
    base was measured too."""
    runs = load(files)
    mean = lambda xs, i: sum(x[i] for x in xs) / len(xs)  # noqa: E731
    rows = []
    for (sh, v, m, bm), new in sorted(runs.items()):
        base = (sh, v[:len(v) - len(new_sfx)] + old_sfx, m, bm)
        if v.endswith(new_sfx) and base in runs:
            old = runs[base]
            rows.append((sh, v, m, bm, (mean(old, 0), mean(new, 0)), (mean(old, 1), mean(new, 1))))
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    for sh, v, m, bm, w1, w2 in pairs(argv[0].split(","), argv[1], argv[2]):
        print(f"{sh:11} {v:7} m={m:3} BM={bm:3} "
              + "  ".join(f"{n} {o:6.1f}->{x:6.1f} {(x / o - 1) * 100:+5.1f}%" for n, (o, x) in (("W1", w1), ("W2", w2))))


if __name__ == "__main__":
    main()
