"""Kernel-alone A/B of ``bench_role2.py --json`` runs (alternating orders of two dev variants in one GPU call): per
shape, tokens per expert and BM, the new variant's mean W1 / W2 time against its base's, all runs pooled. A variant
is "new" when its name ends with ``NEW_SUFFIX``; its base is the name with that suffix replaced by ``OLD_SUFFIX``.

    python3 ci/kernel_ab.py RUN.json[,RUN2.json,...] NEW_SUFFIX OLD_SUFFIX     (e.g. ... ks kef: _pp2ks vs _pp2kef)
        [--old-runs OLD.json,...] [--plot OUT.png --title TITLE]

``--plot`` (matplotlib) draws, per shape, every measured variant's W1 / W2 share of the run's read bandwidth over the
tokens per expert (all runs pooled), against the issue's 70 % line.
"""
from __future__ import annotations

from raw_json import load_json
import sys
from collections import defaultdict


def load(files) -> dict[tuple[str, str, int, int], list[tuple[float, float]]]:
    """(shape, variant, tokens per expert, BM) -> [(W1 µs, W2 µs) per run]."""
    out = defaultdict(list)
    for f in files:
        for r in load_json(f)["rows"]:
            out[(r["shape"], r["variant"], r["tokens_per_expert"], r["bm"])].append((r["w1_us"], r["w2_us"]))
    return out


def pairs(files, new_sfx: str, old_sfx: str, old_files=None):
    """Rows ``(shape, variant, m, bm, (old W1, new W1), (old W2, new W2))`` of mean times, for every new variant whose
    base was measured too: in the same runs, or with ``old_files`` in those (another tree's cubins of the same
    names, e.g. ``NEW_SUFFIX`` ``ksa`` and ``OLD_SUFFIX`` ``ksa`` compare one build across two trees)."""
    runs = load(files)
    bases = load(old_files) if old_files else runs
    mean = lambda xs, i: sum(x[i] for x in xs) / len(xs)  # noqa: E731
    rows = []
    for (sh, v, m, bm), new in sorted(runs.items()):
        base = (sh, v[:len(v) - len(new_sfx)] + old_sfx, m, bm)
        if v.endswith(new_sfx) and base in bases:
            old = bases[base]
            rows.append((sh, v, m, bm, (mean(old, 0), mean(new, 0)), (mean(old, 1), mean(new, 1))))
    return rows


def shares(files) -> dict[tuple[str, str, int, int], tuple[float, float]]:
    """(shape, variant, tokens per expert, BM) -> mean (W1, W2) share of the run's measured read bandwidth."""
    acc = defaultdict(list)
    for f in files:
        for r in load_json(f)["rows"]:
            acc[(r["shape"], r["variant"], r["tokens_per_expert"], r["bm"])].append((r["w1_frac_bw"], r["w2_frac_bw"]))
    return {k: (sum(x[0] for x in v) / len(v), sum(x[1] for x in v) / len(v)) for k, v in acc.items()}


def share_axes(ax, title: str, xlabel: str):
    """One panel of a share-of-bandwidth plot: the issue's 70 % line, log2 tokens per expert, 0-100 %."""
    ax.axhline(70, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 100)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("% of the measured read bandwidth")
    ax.set_title(title)
    ax.legend(fontsize=7)


def plot(files, out: str, title: str):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sh = shares(files)
    shapes = sorted({k[0] for k in sh})
    fig, axes = plt.subplots(1, len(shapes), figsize=(6.5 * len(shapes), 4.5), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        for v in sorted({k[1] for k in sh if k[0] == shape}):
            pts = sorted((m, bm, w) for (s_, v_, m, bm), w in sh.items() if s_ == shape and v_ == v)
            color = None  # one colour per variant: W1 solid, W2 dashed
            for i, (gemm, style) in enumerate((("W1", "o-"), ("W2", "s--"))):
                line, = ax.plot([p[0] for p in pts], [p[2][i] * 100 for p in pts], style, color=color,
                                label=f"{gemm} {v}")
                color = line.get_color()
        share_axes(ax, shape, "tokens per expert (BM = next tile)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", help="comma-separated bench_role2.py --json files")
    ap.add_argument("new_suffix")
    ap.add_argument("old_suffix")
    ap.add_argument("--old-runs", help="comma-separated runs of the base tree (the bases come from these)")
    ap.add_argument("--plot", help="write the share-of-bandwidth plot here (needs matplotlib)")
    ap.add_argument("--title", default="role2 kernel alone")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    old_runs = a.old_runs.split(",") if a.old_runs else None
    for sh, v, m, bm, w1, w2 in pairs(a.runs.split(","), a.new_suffix, a.old_suffix, old_runs):
        print(f"{sh:11} {v:7} m={m:3} BM={bm:3} "
              + "  ".join(f"{n} {o:6.1f}->{x:6.1f} {(x / o - 1) * 100:+5.1f}%" for n, (o, x) in (("W1", w1), ("W2", w2))))
    if a.plot:
        plot(a.runs.split(","), a.plot, a.title)


if __name__ == "__main__":
    main()
