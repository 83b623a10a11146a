"""Results -> files: the JSON document, a markdown table shaped like paper Tables 5-10 (with the issue's
targets, `targets.py`, and the definitions), or the dispatch-SM ablation table for an ablation run, and PNG
plots like Figures 3-8 (latency and speedup against tokens per rank, log x).

The *subject* is the implementation whose speedup is reported (our operator once it exists; for now any
named implementation). Speedup per point = latency_other / latency_subject; the mean is the arithmetic
mean of the per-point ratios over the points where both ran (paper §6.1).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from . import targets as targets_mod
from .protocol import mean_of_ratios, speedups


def _ok(pt: dict, name: str) -> float | None:
    it = pt["impls"].get(name)
    return it["latency_us"] if it and it.get("status") == "ok" else None


def slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _fmt(v: float | None, nd: int = 2) -> str:
    return "–" if v is None else f"{v:,.{nd}f}".replace(",", " ")


def markdown(res: dict, subject: str) -> str:
    env = res.get("environment") or {}
    proto = res["protocol"]
    lay = res["layout"]
    names = list(res["implementations"])
    others = [n for n in names if n != subject]
    L = [f"# gc-moe decode benchmark — {res['created_utc']}", ""]
    gpu = f"{env.get('gpu')} x{env.get('gpu_count')} ({env.get('sm_count')} SMs)" if env.get("gpu") else "none"
    L.append(f"* GPU: {gpu}; driver "
             f"{(env.get('nvidia_smi') or [{}])[0].get('driver_version')}; torch {env.get('torch')} "
             f"(CUDA {env.get('torch_cuda')}); commit {env.get('git_commit')}")
    L.append(f"* Command: `{res.get('command')}`")
    shared = "routed + shared experts" if lay["shared_experts"] else "routed experts"
    part = (f"one GPU measuring one rank's share at EP={lay['ep']} (E/{lay['ep']} experts, {lay['ep']}T tokens "
            "routed, no communication)" if lay["emulated_share"] else f"P={lay['world']} ranks")
    L.append(f"* Layout: {part}; {shared}; seed {lay['seed']}")
    dev = f" — DEVIATION: {proto['deviation']}" if proto.get("deviation") else ""
    L.append(f"* Protocol: CUDA-graph replay, {proto['replays_per_window']} replays/window, "
             f"{proto['warmup_windows']} warm-up + {proto['measured_windows']} measured windows, L2 flushed "
             f"({proto['l2_flush_bytes'] >> 20} MiB write) and ranks synchronised between windows; per-rank median, "
             f"slowest rank per point{dev}")
    g = res.get("gate")
    L.append("* Idle-GPU gate: " + ("skipped" if g is None else ("passed" if g["passed"] else
                                                                  "FAILED (" + "; ".join(g["reasons"][:3]) + ")")))
    fl = res.get("floor")
    if fl:
        bws = ", ".join(f"cuda:{b['device']} {b['gbps']:.0f} GB/s" for b in fl["read_bandwidth"])
        nv = fl.get("nvlink") or {}
        nvs = f"{nv['round_trip_us']:.3f} µs" if "round_trip_us" in nv else (nv.get("error") or "not measured")
        when = (f"measured earlier in this session ({fl['reused_from']})" if fl.get("reused_from")
                else "measured in this run")
        L.append(f"* Ceilings {when}: streaming read {bws}; NVLink flag round trip {nvs}")
    for n in names:
        L.append(f"* `{n}`: {res['implementations'][n].get('precision')}" + _partition_note(res, n))
    L.append("")
    if res.get("ablation"):
        return "\n".join(L + ablation_markdown(res) + definitions_markdown(res)) + "\n"
    for m in res["models"]:
        sh = m["shape"]
        L.append(f"## {sh['name']} (H {sh['hidden']}, I {sh['intermediate']}, E {sh['experts']}, "
                 f"top-{sh['top_k']}, shared {sh['shared_experts']})")
        L.append("")
        hdr = ["Tokens/rank", "Total tokens", "Floor (µs)"] + [f"{n} (µs)" for n in names]
        hdr += [f"{o}/{subject}" for o in others] + [f"floor/{subject}"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        ratios: dict[str, list[tuple[float, float]]] = {o: [] for o in others}
        fr: list[float] = []
        for pt in m["points"]:
            s = _ok(pt, subject)
            row = [str(pt["T"]), str(pt["total_tokens"]), _fmt(pt.get("floor_us"))]
            for n in names:
                v = _ok(pt, n)
                row.append(_fmt(v) if v is not None else pt["impls"].get(n, {}).get("status", "–"))
            for o in others:
                v = _ok(pt, o)
                if v is not None and s is not None:
                    ratios[o].append((v, s))
                    row.append(f"{v / s:.4f}")
                else:
                    row.append("–")
            if s is not None and pt.get("floor_us"):
                fr.append(pt["floor_us"] / s)
                row.append(f"{pt['floor_us'] / s:.3f}")
            else:
                row.append("–")
            L.append("| " + " | ".join(row) + " |")
        mean_row = ["Mean (per-point ratios)", "", ""] + [""] * len(names)
        for o in others:
            pairs = ratios[o]
            mean_row.append(f"{mean_of_ratios([a for a, _ in pairs], [b for _, b in pairs]):.4f} ({len(pairs)} pts)"
                            if pairs else "–")
        mean_row.append(f"{sum(fr) / len(fr):.3f}" if fr else "–")
        L.append("| " + " | ".join(mean_row) + " |")
        L.append("")
        L.append("Effective throughput (paper Tables 9-10 definitions; aggregate over the ranks that ran):")
        L.append("")
        th = ["Tokens/rank"] + [f"{n} TFLOPS" for n in names] + [f"{n} HBM GB/s" for n in names] + \
             [f"{n} NVLink GB/s" for n in names] + [f"{n} % of read BW" for n in names]
        L.append("| " + " | ".join(th) + " |")
        L.append("|" + "---|" * len(th))
        for pt in m["points"]:
            row = [str(pt["T"])]
            for key, nd in (("tflops", 2), ("hbm_gbps", 1), ("nvlink_gbps", 1)):
                for n in names:
                    it = pt["impls"].get(n, {})
                    row.append(_fmt(it.get(key), nd) if it.get("status") == "ok" else "–")
            for n in names:
                f = targets_mod.stream_fraction(res, pt, n)
                row.append("–" if f is None else f"{f * 100:.1f}")
            L.append("| " + " | ".join(row) + " |")
        L.append("")
        L += _agreement(m, names)
        reasons = _reasons(m)
        if reasons:
            L += ["Not measured:", ""] + [f"* {r}" for r in reasons] + [""]
    L += targets_mod.markdown(targets_mod.evaluate(res, subject))
    if not env.get("gpu"):
        L += ["No GPU in this run: the latencies above are host timings of a dry run, so the targets say "
              "nothing about performance.", ""]
    return "\n".join(L + definitions_markdown(res)) + "\n"


def _partition_note(res: dict, name: str) -> str:
    """'; partition D/C SMs (request R), green contexts ...' from what rank 0 loaded (first model that loaded)."""
    for m in res["models"]:
        d = (m.get("loaded", {}).get(name) or [None])[0]
        if d and d.get("partition"):
            p = d["partition"]
            return (f"; driver-aligned partition {p['dispatch_sms']} dispatch / {p['compute_sms']} compute SMs "
                    f"(request {p['requested']}, {p['total_sms']} SMs, alignment {p['alignment']}), "
                    f"{'green contexts' if p['green_contexts'] else 'no green contexts (primary context)'}, "
                    f"overlap {'on' if d.get('overlap') else 'off'}; {p['workqueue']}")
    return ""


AGREEMENT_MIN_COS = 0.95  # below it two implementations do not compute the same layer (FP4 vs FP8 weights: ~0.976)


def _agreement(m: dict, names: list[str]) -> list[str]:
    """Each implementation's output vs the first one's (same tokens, routing and seeded weights): the worst cosine
    over points and ranks, flagged below AGREEMENT_MIN_COS (one of the two computes something else)."""
    worst: dict[str, float] = {}
    for pt in m["points"]:
        for n in names[1:]:
            for r in pt["impls"].get(n, {}).get("per_rank", []):
                c = r.get("cos_vs_first")
                if c is not None:
                    worst[n] = min(worst.get(n, 1.0), c if c == c else -1.0)  # NaN counts as disagreement
    if not worst:
        return []
    cells = [f"`{n}` {c:.4f}" + (" **DISAGREES**" if c < AGREEMENT_MIN_COS else "") for n, c in worst.items()]
    return [f"Output agreement with `{names[0]}` (worst cosine over points and ranks): " + ", ".join(cells), ""]


def _reasons(m: dict) -> list[str]:
    """One line per (implementation, reason) for skipped/failed points, with the T values it applies to."""
    seen: dict[tuple, list[int]] = {}
    for pt in m["points"]:
        for n, it in pt["impls"].items():
            if it.get("status") != "ok":
                seen.setdefault((n, it.get("status"), it.get("reason")), []).append(pt["T"])
    return [f"`{n}` {st} at T={','.join(map(str, Ts))}: {why}" for (n, st, why), Ts in seen.items()]


def definitions_markdown(res: dict) -> list[str]:
    d = res.get("definitions") or {}
    if not d:
        return []
    return ["## Definitions", ""] + [f"* **{k}**: {v}" for k, v in d.items()] + [
        "* **speedup**: latency_baseline / latency_subject per point; means are arithmetic means of per-point "
        "ratios (paper §6.1)", ""]


def _split_text(d: dict | None) -> str:
    """The driver-aligned split a gc-moe implementation ran at, or the one it could not run (and why)."""
    if not d:
        return "unknown"
    if d.get("partition"):
        return f"{d['partition']['dispatch_sms']}/{d['partition']['compute_sms']}"
    sp = d.get("split") or {}
    if "invalid" in sp:
        return "invalid split"
    if "dispatch_sms" in sp:
        return f"{sp['dispatch_sms']}/{sp['compute_sms']} (not run)"
    return "not loaded"


def ablation_markdown(res: dict) -> list[str]:
    """Dispatch-SM request x overlap on/off, per T: latency table per model, ratios to the reference row."""
    ab = res["ablation"]
    reqs, on, off, ref = ab["requests"], ab["on"], ab["off"] or [None] * len(ab["requests"]), ab["reference"]
    L = [f"Dispatch-SM ablation: requests {', '.join(map(str, reqs))} x overlap on / off; the ratio column is the "
         f"mean over T of latency / latency(`{ref}`) (per-point ratios). The driver-aligned split is what each "
         "implementation's rank 0 got from the driver.", ""]
    for m in res["models"]:
        sh = m["shape"]
        Ts = [pt["T"] for pt in m["points"]]
        L.append(f"## {sh['name']} (H {sh['hidden']}, I {sh['intermediate']}, E {sh['experts']}, top-{sh['top_k']}) "
                 "— dispatch-SM ablation (µs, slowest-rank median)")
        L.append("")
        hdr = ["Request", "Driver split (dispatch/compute)", "Overlap"] + [f"T={t}" for t in Ts] + [f"mean ratio to {ref}"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|" + "---|" * len(hdr))
        for i, r in enumerate(reqs):
            for name, ov in ((on[i], "on"), (off[i], "off")):
                if name is None or name not in res["implementations"]:
                    continue
                split = _split_text((m.get("loaded", {}).get(name) or [None])[0])
                row = [str(r), split, ov]
                pairs = []
                for pt in m["points"]:
                    v = _ok(pt, name)
                    row.append(_fmt(v) if v is not None else pt["impls"].get(name, {}).get("status", "–"))
                    rv = _ok(pt, ref)
                    if v is not None and rv is not None:
                        pairs.append((v, rv))
                row.append(f"{mean_of_ratios([a for a, _ in pairs], [b for _, b in pairs]):.3f}" if pairs else "–")
                L.append("| " + " | ".join(row) + " |")
        L.append("")
        reasons = _reasons(m)
        if reasons:
            L += ["Not measured:", ""] + [f"* {x}" for x in reasons] + [""]
    return L


def plot(res: dict, subject: str, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(res["implementations"])
    others = [n for n in names if n != subject]
    files = []
    for m in res["models"]:
        sh = m["shape"]
        Ts = [pt["T"] for pt in m["points"]]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for n in names:
            xs = [pt["T"] for pt in m["points"] if _ok(pt, n) is not None]
            ys = [_ok(pt, n) for pt in m["points"] if _ok(pt, n) is not None]
            if xs:
                ax1.plot(xs, ys, marker="o", label=n, linewidth=2 if n == subject else 1.2)
        fx = [pt["T"] for pt in m["points"] if pt.get("floor_us")]
        if fx:
            ax1.plot(fx, [pt["floor_us"] for pt in m["points"] if pt.get("floor_us")], "k--", label="floor (bytes/BW)")
        ax1.set_xscale("log", base=2)
        ax1.set_yscale("log")
        ax1.set_xticks(Ts, [str(t) for t in Ts])
        ax1.set_xlabel("tokens per rank")
        ax1.set_ylabel("latency (µs, slowest-rank median)")
        ax1.set_title(f"{sh['name']}: latency")
        ax1.grid(True, which="both", alpha=0.3)
        ax1.legend(fontsize=8)
        plotted = False
        for o in others:
            pairs = [(pt["T"], _ok(pt, o), _ok(pt, subject)) for pt in m["points"]]
            pairs = [(t, a, b) for t, a, b in pairs if a is not None and b is not None]
            if pairs:
                r = speedups([a for _, a, _ in pairs], [b for _, _, b in pairs])
                ax2.plot([t for t, _, _ in pairs], r, marker="o", label=f"{o} / {subject}")
                plotted = True
        fr = [(pt["T"], pt["floor_us"] / _ok(pt, subject)) for pt in m["points"]
              if pt.get("floor_us") and _ok(pt, subject)]
        if fr:
            ax2.plot([t for t, _ in fr], [v for _, v in fr], "k:", marker="x", label=f"floor / {subject}")
            plotted = True
        ax2.axhline(1.0, color="gray", linewidth=0.8)
        ax2.set_xscale("log", base=2)
        ax2.set_xticks(Ts, [str(t) for t in Ts])
        ax2.set_xlabel("tokens per rank")
        ax2.set_ylabel(f"speedup of {subject} (latency ratio)")
        ax2.set_title(f"{sh['name']}: speedup")
        ax2.grid(True, which="both", alpha=0.3)
        if plotted:
            ax2.legend(fontsize=8)
        fig.tight_layout()
        p = out_dir / f"{slug(sh['name'])}.png"
        tmp = p.with_name(p.stem + ".tmp.png")
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        os.replace(tmp, p)
        files.append(p)
    return files


def write_all(res: dict, out_dir: Path, subject: str | None = None, stem: str = "results") -> list[Path]:
    """results JSON + markdown + one PNG per model, each written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    subject = subject or next(iter(res["implementations"]))
    if subject not in res["implementations"]:
        raise ValueError(f"subject {subject!r} is not among the implementations {list(res['implementations'])}")
    res.setdefault("report", {})["subject"] = subject
    if not res.get("ablation"):
        res["targets"] = targets_mod.evaluate(res, subject)
    files = []
    for name, text in ((f"{stem}.json", json.dumps(res, indent=1)), (f"{stem}.md", markdown(res, subject))):
        p = out_dir / name
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, p)
        files.append(p)
    files += plot(res, subject, out_dir)
    return files
