"""Role A/B of ``gcmoe_runtime.bench timeline`` folders (alternating runs of an old and a new bundle in one GPU call):
a role's median duration (or the span) per token count in one run, the A/B and arms tables (`arms_table`: several
arms over several roles at once, session 42), and the bar plot of the changes that the sessions' ``ab_table.py``
scripts draw. (``ci/layer_ab.py`` does the same for ``bench sweep`` latencies.)"""
from __future__ import annotations

from raw_json import load_json
from pathlib import Path


def role_us(run_dir, role: str = "role2", model: str | None = None) -> dict[int, float]:
    """T -> the role's median duration (µs) over the run's replays (``timeline.json``; its first model, or the one
    named ``model`` in a run of several ``--model``); ``role="span"``: the replay's span (first kernel start -> last
    kernel end)."""
    models = load_json(Path(run_dir) / "timeline.json")["models"]
    if model is not None:
        named = [m for m in models if m["model"] == model]
        if not named:
            raise KeyError(f"{run_dir}: no model {model!r} (has {', '.join(m['model'] for m in models)})")
        models = named
    return {p["tokens"]: p["summary"]["span_us"] if role == "span" else p["summary"]["roles"][role]["dur_us"]
            for p in models[0]["points"]}


def mean(xs) -> float:
    return sum(xs) / len(xs)


def change_pct(old_runs: list[dict[int, float]], new_runs: list[dict[int, float]], t: int) -> float:
    """New against old at T: the change of the runs' mean duration, in %."""
    return 100 * (mean([r[t] for r in new_runs]) / mean([r[t] for r in old_runs]) - 1)


#: the head of :func:`ab_rows`' table
AB_TABLE_HEAD = ["| case | T | old runs µs | new runs µs | change |", "|---|---|---|---|---|"]
#: the head of :func:`arm_rows`' table
ARM_TABLE_HEAD = ["| case | arm | T | old runs µs | arm runs µs | change |", "|---|---|---|---|---|---|"]


def _runs(tl_dir, names: tuple[str, ...], model: str | None, role: str = "role2") -> list[dict[int, float]]:
    return [role_us(Path(tl_dir) / r, role, model) for r in names]


def _change_rows(cells: str, o: list[dict[int, float]], n: list[dict[int, float]]):
    """Rows ``cells | T | old runs | new runs | change`` at every T of the first old run, and (T, change %)."""
    rows, changes = [], []
    for t in sorted(o[0]):
        c = change_pct(o, n, t)
        rows.append(f"{cells} {t} | {runs_cell(o, t)} | {runs_cell(n, t)} | {c:+.1f} % |")
        changes.append((t, c))
    return rows, changes


def ab_rows(tl_dir, label: str, old: tuple[str, ...], new: tuple[str, ...], model: str | None = None):
    """Table rows (under :data:`AB_TABLE_HEAD`) of one case: the old runs against the new (run folder names under
    ``tl_dir``; ``model`` as for :func:`role_us`) at every T of the first old run; also returned as (T, change %)."""
    return _change_rows(f"| {label} |", _runs(tl_dir, old, model), _runs(tl_dir, new, model))


def arm_rows(tl_dir, label: str, old: tuple[str, ...], arms: list[tuple[str, tuple[str, ...]]],
             model: str | None = None):
    """Table rows (under :data:`ARM_TABLE_HEAD`) of one case: the old runs (run folder names under ``tl_dir``;
    ``model`` as for :func:`role_us`) against each arm's, at every T of the first old run; also returned as (arm,
    T, change %)."""
    o = _runs(tl_dir, old, model)
    rows, changes = [], []
    for arm, runs in arms:
        r, c = _change_rows(f"| {label} | {arm} |", o, _runs(tl_dir, runs, model))
        rows += r
        changes += [(arm, t, x) for t, x in c]
    return rows, changes


def arms_table(tl_dir, cases: list[tuple[str, str]], runs: dict[str, tuple[int, ...]], whats: tuple[str, ...],
               shown: tuple[str, ...] = ("span",), model: str | None = None, base: str = "A") -> list[str]:
    """A Markdown table of several arms against arm ``base`` over several roles at once: per case and T, the base's
    ``shown`` values (each run) and every other arm's change against it of each of ``whats`` (roles or ``"span"``,
    the mean of the arm's runs, :func:`change_pct`). ``cases``: (row label, run prefix); a run folder is
    ``<prefix>-<arm>-<n>`` under ``tl_dir`` for ``n`` in ``runs[arm]``; a case without the base's runs is left out,
    an arm without runs there is shown as ``-``; ``model`` as for :func:`role_us` (runs of several ``--model``)."""
    arms = [a for a in runs if a != base]
    lines = ["| case | T | " + " | ".join(f"{base} {w} µs" for w in shown) + " | "
             + " | ".join(f"{x} {w}" for x in arms for w in whats) + " |",
             "|---|---|" + "---|" * (len(shown) + len(arms) * len(whats))]
    tl_dir = Path(tl_dir)
    for label, pre in cases:
        if not (tl_dir / f"{pre}-{base}-{runs[base][0]}").exists():
            continue
        have = [a for a in runs if (tl_dir / f"{pre}-{a}-{runs[a][0]}").exists()]
        got = {(a, w): _runs(tl_dir, tuple(f"{pre}-{a}-{i}" for i in runs[a]), model, w)
               for a in have for w in dict.fromkeys(whats + shown)}
        for t in sorted(got[base, whats[0]][0]):
            cells = [f"{change_pct(got[base, w], got[x, w], t):+.1f} %" if x in have else "-"
                     for x in arms for w in whats]
            lines.append(f"| {label} | {t} | " + " | ".join(runs_cell(got[base, w], t) for w in shown) + " | "
                         + " | ".join(cells) + " |")
    return lines


def runs_cell(runs: list[dict[int, float]], t: int) -> str:
    """The table cell of one arm's runs at T: each run's µs, ``a / b``."""
    return " / ".join(f"{r[t]:.1f}" for r in runs)


def write_ab_table(path, title: str, rows: list[str]) -> str:
    """``# role2 in the layer, <title>`` and the table ``rows`` into ``path`` (Markdown); also printed, and returned."""
    text = f"# role2 in the layer, {title}\n\n" + "\n".join(rows) + "\n"
    Path(path).write_text(text)
    print(text)
    return text


def plot_changes(bars, out, title: str, xlabel: str = "role2 time in the layer, new vs old (%)") -> bool:
    """Horizontal bars of (label, change %) top-down into ``out``; False without matplotlib (the tables are the
    result, the plot a view of them)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(bars) + 1.2))
    ax.barh([b[0] for b in bars][::-1], [b[1] for b in bars][::-1],
            color=["tab:green" if b[1] < 0 else "tab:red" for b in bars][::-1])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return True
