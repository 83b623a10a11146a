"""Session 58: does a warpgroup's promote slow down while the other warpgroup's wgmmas run? From call 2's (H200) stamped
BM 64 forms (``stamps/*.json.gz``, GLM-5.2, 64 tokens per expert): for each stamped K128 step
of warpgroup w, the promote's cycles (``mma_done`` -> ``promoted``) against the cycles of that interval during which
the other warpgroup's MMAs were in flight (its ``issued`` -> ``mma_done``). Prints the medians per 50-cycle overlap
bucket and, with matplotlib, writes ``promote_overlap.png``.

    python3 results/operator/2026-12-05-session58/promote_overlap.py        # from the repository root
"""
import gzip
import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
EVENTS = ("start", "stage_ready", "decoded", "turn", "issued", "mma_done", "promoted", "produced")
ISSUED, MMA_DONE, PROMOTED = (EVENTS.index(e) for e in ("issued", "mma_done", "promoted"))
FORMS = ("ppksafwr4c", "ppksafwra4c")


def stamped(step) -> bool:
    """A stamped step (zeros: not stamped) whose consumer events are in order and within one step's time."""
    return step[0] > 0 and all(step[i] <= step[i + 1] for i in range(PROMOTED)) and step[PROMOTED] - step[0] < 20000


def promote_points(path: Path):
    """(warpgroup, cycles overlapped with the other warpgroup's MMAs, promote cycles) per stamped step."""
    with gzip.open(path, "rt") as f:
        stamps = json.load(f)["stamps"]
    out = []
    for cta in stamps:
        for wg in (0, 1):
            mmas = [(s[ISSUED], s[MMA_DONE]) for s in cta[1 - wg] if stamped(s)]
            for s in cta[wg]:
                if stamped(s):
                    p0, p1 = s[MMA_DONE], s[PROMOTED]
                    overlap = sum(max(0, min(p1, b) - max(p0, a)) for a, b in mmas)
                    out.append((wg, overlap, p1 - p0))
    return out


def main():
    series = {}
    for call in ("call-2-h200",):  # call 1's (H100) %clock values wrap inside some steps: not used
        for form in FORMS:
            for mode in ("w1", "w2"):
                path = HERE / call / "stamps" / f"role2_{mode}_glm52_bm64_{form}_m64.json.gz"
                pts = promote_points(path)
                series[(call, form, mode)] = pts
                print(f"{call} {form} {mode}:")
                for wg in (0, 1):
                    buckets = {}
                    for w, o, d in pts:
                        if w == wg:
                            buckets.setdefault(50 * (o // 50), []).append(d)
                    row = ", ".join(f"{k}-{k + 49}: {statistics.median(v):.0f} (n={len(v)})"
                                    for k, v in sorted(buckets.items()))
                    print(f"  WG {wg} promote cycles by overlap bucket: {row}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, form in zip(axes, FORMS):
        for (call, f, mode), pts in series.items():
            if f != form:
                continue
            for wg, marker in ((0, "o"), (1, "x")):
                xs = [o for w, o, _ in pts if w == wg]
                ys = [d for w, _, d in pts if w == wg]
                ax.scatter(xs, ys, s=6, alpha=0.35, marker=marker, label=f"{mode.upper()} WG {wg}")
        ax.set_title(f"_{form} (H200, GLM-5.2, BM 64)")
        ax.set_xlabel("promote cycles overlapped by the other warpgroup's MMAs")
        ax.set_ylim(0, 800)
        ax.legend(markerscale=3, fontsize=8)
    axes[0].set_ylabel("promote cycles (mma_done -> promoted)")
    fig.tight_layout()
    fig.savefig(HERE / "promote_overlap.png", dpi=110)


if __name__ == "__main__":
    main()
