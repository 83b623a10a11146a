"""Session 26's BM 64 forms (one CTA unless named), share of the read bandwidth at 64 tokens per expert, W1 and W2,
burst clocks and the steady power cap, pooled per call: ``python3 plot_bm64.py`` -> ``plots/bm64_forms.png``.
Each call's control is the shipped pre-session-26 form (``_ppksaf``); the bars of a call share its run make-up."""
import json
import statistics as st
from pathlib import Path

HERE = Path(__file__).resolve().parent
# call -> (burst runs, cap runs, {variant name in the runs: label})
CALLS = {
    "A": (["ctl_1", "ctl_2", "ctl_3", "ctl_4", "pp_1", "pp_2", "pp_3", "pp_4"], ["ctl_s1", "ctl_s2", "pp_s1", "pp_s2"],
          None),
    "B": (["b_1", "b_2", "b_3", "b_4"], ["s_1", "s_2"],
          {"_ppksa": "control", "_ppksaw": "turns", "_ppksaw2": "turns + next step ahead",
           "_ppksaw24": "... 4 steps per call", "_ppksa4": "4 steps per call"}),
    "C": (["c_1", "c_2", "c_3", "c_4"], ["cs_1", "cs_2"],
          {"_ppksa": "control", "_ppksaw": "turns", "_pp2ksap": "2 CTAs, slab passes",
           "_pp2ksapw": "2 CTAs, slab passes + turns"}),
    "E": (["e_1", "e_2", "e_3", "e_4"], ["es_1", "es_2"],
          {"_ppksa": "control", "_ppksaw": "turns", "_ppksagw": "turns + 2 slab groups"}),
}


def shares(call, runs, names):
    out = {}
    for n in runs:
        for r in json.loads((HERE / f"call-{call.lower()}" / "json" / f"{n}.json").read_text())["rows"]:
            if r["tokens_per_expert"] != 64:
                continue
            if names is None:  # call A: two trees of builds under the same name; the file says which
                label = "control" if n.startswith("ctl") else "turns"
                if r["variant"] != "_ppksa":
                    continue
            else:
                label = names.get(r["variant"])
                if label is None:
                    continue
            out.setdefault((r["shape"], label), []).append((100 * r["w1_frac_bw"], 100 * r["w2_frac_bw"]))
    return {k: (st.mean(v[0] for v in vs), st.mean(v[1] for v in vs)) for k, vs in out.items()}


def main():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 8), sharey=True)
    for col, shape in enumerate(("glm52", "dsv41flash")):
        for row, (regime, idx) in enumerate((("burst clocks", 0), ("steady 700 W cap", 1))):
            ax = axes[row][col]
            xs, labels, x = [], [], 0
            for call, (burst, cap, names) in CALLS.items():
                sh = shares(call, (burst, cap)[idx], names)
                for (shp, label), (w1, w2) in sorted(sh.items(), key=lambda kv: kv[0][1] != "control"):
                    if shp != shape:
                        continue
                    ax.bar(x - 0.2, w1, 0.4, color="tab:blue" if label != "control" else "lightsteelblue")
                    ax.bar(x + 0.2, w2, 0.4, color="tab:orange" if label != "control" else "navajowhite")
                    xs.append(x)
                    labels.append(f"{call}: {label}")
                    x += 1
                x += 0.6
            ax.axhline(70, color="k", ls="--", lw=0.8)
            ax.set_xticks(xs, labels, rotation=60, ha="right", fontsize=7)
            ax.set_title(f"{shape}, {regime}", fontsize=9)
            ax.set_ylim(35, 75)
            ax.set_ylabel("% of the read bandwidth (W1 blue, W2 orange)")
    fig.suptitle("role2 kernel alone, 64 tokens per expert: BM 64 forms of session 26 (pale = the call's control; "
                 "dashed = issue 5's 70 %)", fontsize=10)
    fig.tight_layout()
    (HERE / "plots").mkdir(exist_ok=True)
    fig.savefig(HERE / "plots" / "bm64_forms.png", dpi=110)


if __name__ == "__main__":
    main()
