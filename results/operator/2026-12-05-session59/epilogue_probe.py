"""Session 59: what the K-loop probe says a task's epilogue costs the BM 64 loop, and what hides it. Reads calls 3
and 7 (H100, 66 CTAs, ``json/kloop-epi{16,48}.json``: each epilogue form at pause 0, the light ``%clock`` spin and,
in call 7, the FMA-heavy one) and calls 4-5 (the decoder-warpgroup forms, ``json/kloop-ss*.json``); prints one table
per task size (mean µs per form and pause, the rate against the form's own pause 0 and against the shipped structure
``wg2ce`` at pause 0) and, with matplotlib, writes ``epilogue_probe.png``.

    python3 results/operator/2026-12-05-session59/epilogue_probe.py        # from the repository root
"""
import json
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent
LABELS = {"wg2ce": "shipped: turns,\nchunk barrier,\nboth pause", "wg2ne": "no turns,\nboth pause",
          "wg2nt": "no turns,\nwarpgroup 1 half\na task later",
          "wg2cw": "epilogue\nwarpgroup (200 / 88\nregisters, 6 stages)"}


def means(path: Path) -> dict:
    """``{(form, pause): mean µs}`` over a bench_kloop JSON's rounds."""
    runs = defaultdict(list)
    for row in json.loads(path.read_text())["rows"]:
        runs[(row["form"], row.get("pause", 0))].append(row["us"])
    return {k: statistics.fmean(v) for k, v in runs.items()}


def table(name: str, m: dict) -> list[str]:
    lines = [f"### {name}", "", "| form | pause (cycles) | µs | rate vs its pause 0 | rate vs wg2ce at pause 0 |",
             "|---|---|---|---|---|"]
    for (form, pause), us in sorted(m.items()):
        lines.append(f"| {form} | {pause} | {us:.1f} | {100 * (m[(form, 0)] / us - 1):+.1f} % | "
                     f"{100 * (m[('wg2ce', 0)] / us - 1):+.1f} % |")
    return lines + [""]


def main():
    out = []
    panels = []
    for call, task, pause in (("call-3-h100", 16, 3000), ("call-3-h100", 48, 5300), ("call-7-h100", 16, 3000),
                              ("call-7-h100", 48, 5300)):
        m = means(HERE / call / "json" / f"kloop-epi{task}.json")
        out += table(f"{call}: a task of {task} K128 steps, epilogue {pause} cycles "
                     f"(negative: FMA-heavy)", m)
        if call == "call-7-h100":
            panels.append((task, pause, m))
    for call, name in (("call-4-h100", "kloop-ss"), ("call-5-h100", "kloop-ss2")):
        rows = json.loads((HERE / call / "json" / f"{name}.json").read_text())["rows"]
        per = defaultdict(list)
        for r in rows:
            per[r["form"]].append(r["gbps_per_sm"])
        out += [f"### {call} ({name}): GB/s per SM, 66 CTAs", ""] + [
            f"* {f}: {statistics.fmean(v):.2f} ({len(v)} runs)" for f, v in per.items()] + [""]
    text = "\n".join(out)
    print(text)
    (HERE / "epilogue_probe.txt").write_text(text + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    forms = ("wg2ce", "wg2ne", "wg2nt", "wg2cw")
    for ax, (task, pause, m) in zip(axes, panels):
        base = m[("wg2ce", 0)]
        x = range(len(forms))
        for k, (p, lab, col) in enumerate(((0, "no epilogue", "#9ecae1"), (pause, "light spin", "#3182bd"),
                                           (-pause, "FMA-heavy", "#08519c"))):
            ax.bar([i + (k - 1) * 0.27 for i in x], [100 * base / m[(f, p)] for f in forms], 0.27, label=lab,
                   color=col)
        ax.axhline(100, color="grey", lw=0.8)
        ax.set_xticks(list(x), [LABELS[f] for f in forms], fontsize=8)
        ax.set_title(f"task {task} K128 steps, epilogue {pause} cycles", fontsize=10)
        ax.set_ylim(80, 105)
    axes[0].set_ylabel("K-loop rate, % of the shipped structure without epilogue")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle("Session 59, K-loop probe (H100, 66 CTAs, call 7): what hides a task's epilogue", fontsize=11)
    fig.tight_layout()
    fig.savefig(HERE / "epilogue_probe.png", dpi=110)


if __name__ == "__main__":
    main()
