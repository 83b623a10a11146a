"""Sessions 32-33: role2 time in the one-GPU P = 8 shares per forced tile (routing seed 0, mean of two alternating
runs), with the BM the expected-cost rule (``heuristics.cheapest_sm90_bm``) and the old m-hat + sigma rule pick at each
T -> plots/ladder.png.

``python3 plot_ladder.py`` from the repository root or anywhere (reads the calls' ``timeline.md`` files)."""
import re
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
S32 = HERE.parent / "2026-12-03-h200-session32"
sys.path.insert(0, str(HERE.parents[2]))
from gcmoe_runtime import heuristics as h  # noqa: E402

#: share -> [(tile label, BM, timeline folders)]
SERIES = {
    "rank-share-glm-5.2-p8": [
        ("BM 8", 8, [HERE / f"call-b/tl/ga8-{r}" for r in (1, 2)]),
        ("BM 16", 16, [HERE / f"call-b/tl/{a}16-{r}" for a in ("ga", "gb") for r in (1, 2)]),
        ("BM 32", 32, [HERE / f"call-b/tl/gb32-{r}" for r in (1, 2)] + [S32 / f"call-c/tl/f32-{r}" for r in (1, 2)]
         + [HERE / f"call-a/tl/g32-{r}" for r in (1, 2)]),
        ("BM 48", 48, [S32 / f"call-c/tl/f48{a}-{r}" for a in "ab" for r in (1, 2)]
         + [HERE / f"call-a/tl/g48-{r}" for r in (1, 2)]),
        ("BM 64", 64, [S32 / f"call-{c}/tl/f64-{r}" for c in "bc" for r in (1, 2)]),
        ("BM 80", 80, [S32 / f"call-b/tl/f80-{r}" for r in (1, 2)])],
    "rank-share-deepseek-v4.1-flash-p8": [
        ("BM 16", 16, [HERE / f"call-b/tl/da16-{r}" for r in (1, 2)]),
        ("BM 32", 32, [HERE / f"call-b/tl/{a}32-{r}" for a in ("da", "db") for r in (1, 2)]
         + [HERE / f"call-a/tl/d32-{r}" for r in (1, 2)]),
        ("BM 48", 48, [HERE / f"call-b/tl/db48-{r}" for r in (1, 2)] + [HERE / f"call-a/tl/d48-{r}" for r in (1, 2)])]}
SHAPE = {"rank-share-glm-5.2-p8": dict(ranks=1, top_k=8, experts=32, hidden=6144, intermediate=2048),
         "rank-share-deepseek-v4.1-flash-p8": dict(ranks=1, top_k=6, experts=48, hidden=5120, intermediate=2304)}


def role2_us(folder: Path) -> dict[int, float]:
    out = {}
    for line in (folder / "timeline.md").read_text().splitlines():
        if re.match(r"^\| \d", line):
            cells = line.split("|")
            out[int(cells[1])] = float(cells[4].split("(")[1].rstrip(") "))
    return out


def old_rule_bm(T: int, shape: dict) -> int:
    """The rule before session 33: the smallest candidate covering m-hat + sigma (one block up to 80)."""
    m = T * shape["ranks"] * shape["top_k"] / shape["experts"]
    cover = m + (m * (1 - shape["top_k"] / shape["experts"])) ** 0.5
    return next((c for c in h.SM90_BM_CANDIDATES if c >= cover), h.SM90_BM_CANDIDATES[-1])


def main() -> None:
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, (share, series) in zip(axes, SERIES.items()):
        best = defaultdict(dict)
        for label, bm, folders in series:
            acc = defaultdict(list)
            for f in folders:
                for t, us in role2_us(f).items():
                    acc[t].append(us)
            ts = sorted(acc)
            ys = [sum(acc[t]) / len(acc[t]) for t in ts]
            ax.plot(ts, ys, "o-", label=label, ms=4)
            for t, y in zip(ts, ys):
                best[t][bm] = y
        labels = {"new": "new rule", "old": "old rule (m̂ + σ)"}  # each label on its first marker only
        for t, per_bm in sorted(best.items()):
            new = h.choose_sm90_tile(t, compute_sms=128, **SHAPE[share]).bm
            old = old_rule_bm(t, SHAPE[share])
            if new in per_bm:
                ax.plot(t, per_bm[new], "k*", ms=11, label=labels.pop("new", None))
            if old in per_bm and old != new:
                ax.plot(t, per_bm[old], "rx", ms=9, mew=2, label=labels.pop("old", None))
        ax.set_title(f"{share} (one H200, routing seed 0)")
        ax.set_xlabel("tokens per rank T")
        ax.set_ylabel("role2 µs (mean of two runs)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = HERE / "plots" / "ladder.png"
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
