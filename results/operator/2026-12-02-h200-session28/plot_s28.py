"""Session 28's plot: ``python3 plot_s28.py`` -> ``plots/forms.png``: each experiment's share of the read bandwidth
against its control, W1 and W2, per shape and tokens per expert, from the kernel-alone runs of calls A, B and F
(``call-*/json/ka_*.json``; burst-clock runs as dots, their mean as a bar, the power-capped run ``ka_cap`` as a
cross). Call A: the turn's hand-over position at BM 64 (refuted); call B: one wgmma fence per K128 step (shipped);
call F: the next task's chunk 0 copied during the epilogue (refuted)."""
import json
import statistics as st
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
#: call -> (title, [(control, experiment), ...])
CALLS = {"call-a": ("A: hand-over position (BM 64 turns)",
                    [("_ppksafw", "_ppksafwa"), ("_ppksafw", "_ppksafwh"), ("_ppksafw", "_ppksafwhs")]),
         "call-b": ("B: one wgmma fence per K128 step",
                    [("_pp2ksaf", "_pp2ksafe"), ("_pp2ksag1f", "_pp2ksag1fe"), ("_ppksaf", "_ppksafe")]),
         "call-f": ("F: the next task's chunk 0 during the epilogue", [("_pp2ksag1f", "_pp2ksag1fa")])}


def rows(call):
    out = {}  # (run kind, variant, shape, tokens) -> [(w1, w2)]
    for f in sorted((HERE / call / "json").glob("ka_*.json")):
        kind = "cap" if "cap" in f.stem else "burst"
        for r in json.loads(f.read_text())["rows"]:
            key = (kind, r["variant"], r["shape"], r["tokens_per_expert"])
            out.setdefault(key, []).append((100 * r["w1_frac_bw"], 100 * r["w2_frac_bw"]))
    return out


def main():
    calls = [c for c in CALLS if (HERE / c / "json").is_dir()]
    fig, axes = plt.subplots(len(calls), 2, figsize=(13, 4.2 * len(calls)), squeeze=False)
    for row, call in zip(axes, calls):
        title, pairs = CALLS[call]
        data = rows(call)
        for g, ax in enumerate(row):
            labels, x = [], 0
            for ctl, exp in pairs:
                pts = sorted({(s, m) for (k, v, s, m) in data if v == exp})
                for shape, m in pts:
                    for i, var in enumerate((ctl, exp)):
                        burst = [v[g] for v in data.get(("burst", var, shape, m), [])]
                        cap = [v[g] for v in data.get(("cap", var, shape, m), [])]
                        if burst:
                            ax.bar(x + 0.4 * i, st.mean(burst), 0.38, color="#9ab" if i == 0 else "#d73",
                                   label=("control" if i == 0 else "experiment") if x == 0 else None)
                            ax.plot([x + 0.4 * i] * len(burst), burst, "k.", ms=3)
                        if cap:
                            ax.plot([x + 0.4 * i] * len(cap), cap, "kx", ms=5,
                                    label="power cap" if x == 0 and i == 0 else None)
                    labels.append((x + 0.2, f"{exp}\n{shape[:3]} {m}"))
                    x += 1
            ax.axhline(70, color="g", lw=0.8, ls="--")
            ax.set_xticks([p for p, _ in labels], [t for _, t in labels], fontsize=5.5, rotation=90)
            ax.set_ylabel(f"W{g + 1} % of read bandwidth")
            ax.set_title(f"{title}: W{g + 1}", fontsize=9)
            ax.set_ylim(30, 100)
            ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    (HERE / "plots").mkdir(exist_ok=True)
    fig.savefig(HERE / "plots" / "forms.png", dpi=110)


if __name__ == "__main__":
    main()
