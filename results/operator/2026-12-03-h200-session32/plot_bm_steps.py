"""Session 32 calls B-C: role2 time in GLM-5.2's share (P = 8 load on one H200) per forced tile around each BM step
of the heuristic (32 x2 -> 48, 48 -> 64, 64 -> 80), mean of two alternating runs, with the heuristic's switch marked
-> plots/bm_steps.png.

``python3 plot_bm_steps.py`` (reads the calls' timelines through session 29's rank_share_table.rows)."""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-12-02-h200-session29"))
from rank_share_table import rows  # noqa: E402

#: (call, tile label, timeline folders of its two runs)
SERIES = (("call-c", "BM 32 x2", ("f32-1", "f32-2")), ("call-c", "BM 48", ("f48a-1", "f48a-2", "f48b-1", "f48b-2")),
          ("call-c", "BM 64", ("f64-1", "f64-2")), ("call-b", "BM 64", ("f64-1", "f64-2")),
          ("call-b", "BM 80", ("f80-1", "f80-2")))
#: the heuristic's switches in this share (choose_sm90_tile): first T on the larger tile
SWITCHES = {"32 x2 -> 48": 112, "48 -> 64": 176, "64 -> 80": 232}


def main() -> None:
    pts = {}
    for call, label, runs in SERIES:
        c = HERE / call
        for r in rows(str(c / "json/floor.json"), [str(c / "tl" / run / "timeline.json") for run in runs]):
            pts.setdefault(label, {}).setdefault(r["T"], []).append(r["role2_us"])
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for label, by_t in pts.items():
        ts = sorted(by_t)
        ax.plot(ts, [sum(by_t[t]) / len(by_t[t]) for t in ts], "o-", label=label)
    for name, t in SWITCHES.items():
        ax.axvline(t - 4, color="grey", ls=":", lw=1)
        ax.text(t - 3.5, 232, f"heuristic\n{name}", fontsize=7, color="grey")
    ax.set_xlim(100, 244)
    ax.set_xlabel("tokens per rank T (GLM-5.2 share, 32 local experts)")
    ax.set_ylabel("role2 in the layer (µs, mean of 2 runs)")
    ax.set_title("forced tiles around the heuristic's BM steps (session 32 calls B-C)", fontsize=10)
    ax.legend(fontsize=8)
    (HERE / "plots").mkdir(exist_ok=True)
    fig.tight_layout()
    fig.savefig(HERE / "plots" / "bm_steps.png", dpi=120)


if __name__ == "__main__":
    main()
