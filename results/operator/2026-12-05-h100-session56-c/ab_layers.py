"""The s56-c A/B (A: role3 after every node, R: role3 after role2 / role4 only) from the ``ly/`` runs: a table of
the arms' mean µs per layer and their difference, and ``ab_layers.png``.

    .venv/bin/python results/operator/2026-12-05-h100-session56-c/ab_layers.py
"""
import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = (("GLM-5.2 routed", "lg"), ("DSV-4.1-Flash + shared", "ld"))
ARMS = {"A": ("A-1", "A-4"), "R": ("R-2", "R-3")}


def rows(prefix: str, arm: str) -> dict:
    out = {}
    for run in ARMS[arm]:
        for r in json.loads((HERE / "ly" / f"{prefix}-{run}" / "layers.json").read_text())["rows"]:
            if r.get("impl") == "gc-moe" and "skipped" not in r:
                out.setdefault(r["tokens"], []).append(r)
    return out


def main() -> None:
    lines = ["| case | T | A all (µs / layer) | R all | R - A | A one | R one | R - A |", "|---|---|---|---|---|---|---|---|"]
    diffs = {}
    for name, prefix in CASES:
        a, r = rows(prefix, "A"), rows(prefix, "R")
        for t in sorted(a):
            m = {k: {arm: statistics.mean(x[f"{k}_us"] for x in rs[t]) for arm, rs in (("A", a), ("R", r))}
                 for k in ("all", "one")}
            diffs.setdefault(name, []).append((t, m["all"]["R"] - m["all"]["A"], m["one"]["R"] - m["one"]["A"]))
            lines.append(f"| {name} | {t} | {m['all']['A']:.2f} | {m['all']['R']:.2f} | "
                         f"{m['all']['R'] - m['all']['A']:+.2f} | {m['one']['A']:.2f} | {m['one']['R']:.2f} | "
                         f"{m['one']['R'] - m['one']['A']:+.2f} |")
    print("\n".join(lines))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, d in diffs.items():
        ax.plot([t for t, _, _ in d], [x for _, x, _ in d], "o-", label=f"{name}: 6 layers per graph")
        ax.plot([t for t, _, _ in d], [y for _, _, y in d], "x--", label=f"{name}: one layer per graph")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per rank")
    ax.set_ylabel("R - A (µs per layer)")
    ax.set_title("role1 -> role3 edge dropped (R) vs kept (A), P = 1, H100")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / "ab_layers.png", dpi=100)


if __name__ == "__main__":
    main()
