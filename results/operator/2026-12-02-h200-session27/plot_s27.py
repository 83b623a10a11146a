"""Session 27's plots: ``python3 plot_s27.py`` -> ``plots/issue_rate.png`` and ``plots/forms.png``.

issue_rate: each ncu-profiled GLM-5.2 kernel-alone form (calls A-D, ``ncu --set full``): its issue-slot share against
its active warps per scheduler, marker area by instructions executed. Elapsed cycles = instructions / (issue share x
4 x 132) is an identity; what the plot shows is the empirical part the predictions use: the share a form reaches
for its warps per scheduler (~41 % at 2.5, 45-53 % at 4.5), so a form's time follows its instruction count.
forms: share of the read bandwidth of each form of calls C-D against its control, W1 / W2, pooled (mean) over the
call's burst-clock runs, by tokens per expert."""
import json
import statistics as st
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ncu_summary import load  # noqa: E402  (this folder's ncu CSV parser)

HERE = Path(__file__).resolve().parent
PROFILES = {"W1 BM 32 two CTAs": "call-a/json/full_w1_32", "W2 BM 32 two CTAs": "call-a/json/full_w2_32",
            "W1 BM 64 turns": "call-a/json/full_w1_pp", "W2 BM 64 turns": "call-a/json/full_w2_pp",
            "W1 BM 64 no decode": "call-a/json/full_w1_x", "W1 BM 64 slab passes": "call-b/json/full_w1_sp",
            "W2 BM 64 slab passes": "call-b/json/full_w2_sp", "W1 BM 64 four WGs": "call-c/json/full_w1_q",
            "W2 BM 64 four WGs": "call-c/json/full_w2_q", "W1 BM 64 turns + stage tables": "call-d/json/full_w1_l"}


def metric(path, section, name):
    """The first value of metric ``name`` in ``section`` of one export (``ncu_summary.load``'s parse)."""
    return float(next(v for (sec, _, n), v in load(HERE / f"{path}.csv.gz").items()
                      if sec == section and n == name).replace(",", ""))


def issue_rate(ax):
    for label, p in PROFILES.items():
        warps = metric(p, "Scheduler Statistics", "Active Warps Per Scheduler")
        busy = metric(p, "Compute Workload Analysis", "Issue Slots Busy")
        ins = metric(p, "Memory Workload Analysis", "Instructions Executed")
        ax.scatter(warps, busy, s=ins / 1e6 * 3, alpha=0.6)
        ax.annotate(f"{label} ({ins / 1e6:.0f} M)", (warps, busy), fontsize=6.5, xytext=(4, 2),
                    textcoords="offset points")
    ax.set_xlim(2, 6.2)
    ax.set_xlabel("active warps per scheduler")
    ax.set_ylabel("issue slots busy, %")
    ax.set_title("GLM-5.2 kernel alone (ncu): issue share by warps per scheduler\n(marker area: instructions)",
                 fontsize=9)


def forms(axs):
    runs = {"C": ["ka_1", "ka_2"], "D": ["ka_1", "ka_2"]}
    labels = {"_ppksafw": "1 CTA, turns", "_ppksafq": "1 CTA, four WGs", "_pp2ksag1f": "2 CTAs, one slab group",
              "_pp2ksaf": "2 CTAs", "_ppksafwl": "1 CTA, turns + stage tables", "_pp2ksafl": "2 CTAs + stage tables",
              "_pp2ksag1fl": "2 CTAs, one slab group + stage tables"}
    for ax, w in zip(axs, ("w1", "w2")):
        vals = {}
        for call, names in runs.items():
            for n in names:
                for r in json.loads((HERE / f"call-{call.lower()}" / "json" / f"{n}.json").read_text())["rows"]:
                    if r["shape"] != "glm52":
                        continue
                    key = (r["tokens_per_expert"], labels[r["variant"]])
                    vals.setdefault(key, []).append(100 * r[f"{w}_frac_bw"])
        keys = sorted(vals)
        ax.barh(range(len(keys)), [st.mean(vals[k]) for k in keys],
                color=["tab:red" if "tables" in k[1] or "four" in k[1] else "tab:blue" for k in keys])
        ax.set_yticks(range(len(keys)), [f"{m} tok: {lab}" for m, lab in keys], fontsize=6.5)
        ax.axvline(70, color="grey", ls="--", lw=0.8)
        ax.set_xlabel(f"{w.upper()} % of the read bandwidth (burst)")
    axs[0].set_title("calls C-D (BM = tokens per expert): blue = controls, red = this session's forms", fontsize=9)


def main():
    (HERE / "plots").mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    issue_rate(ax)
    fig.tight_layout()
    fig.savefig(HERE / "plots" / "issue_rate.png", dpi=110)
    fig, axs = plt.subplots(1, 2, figsize=(11, 4.5))
    forms(axs)
    fig.tight_layout()
    fig.savefig(HERE / "plots" / "forms.png", dpi=110)


if __name__ == "__main__":
    main()
