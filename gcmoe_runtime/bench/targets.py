"""The issue's performance targets, evaluated from a results document (no GPU, no re-measuring).

Targets (issue 7), per model of a run, for the report's *subject* (our operator):

1. **faster than every baseline at every measured point**: latency_baseline / latency_subject > 1 at every
   T where the baseline ran. A point where the subject did not run, or a baseline ran but the subject did
   not, is a miss ("not measured"), never a pass. Baselines = every other implementation of the run.
2. **mean speedup >= 1.15x over baseline (a)** (``gc-moe-serial``): the mean of per-point ratios (paper §6.1)
   over the points where both ran; every point of the sweep must have both.
3. **weight streaming >= 70% of the measured HBM read bandwidth at T = 256**: the subject's stream fraction
   at T = 256 = max_r (unique active bytes_r / measured read bandwidth_r) / latency (``models`` owns the bytes,
   the run's floor measurement the bandwidth).

Each result says met / missed / not evaluated and, when missed, by how much.
"""
from __future__ import annotations

from .protocol import mean_of_ratios

BASELINE_A = "gc-moe-serial"
MEAN_SPEEDUP_A = 1.15
STREAM_FRACTION = 0.70
STREAM_T = 256


def _lat(pt: dict, name: str) -> float | None:
    it = pt["impls"].get(name)
    return it["latency_us"] if it and it.get("status") == "ok" else None


def stream_fraction(res: dict, pt: dict, name: str) -> float | None:
    """max_r (bytes_r / read bandwidth_r) / latency of `name` at this point; None without a floor measurement."""
    lat = _lat(pt, name)
    fl = res.get("floor")
    if lat is None or not fl or not pt.get("per_rank_hbm_bytes"):
        return None
    bws = [b["gbps"] for b in fl["read_bandwidth"]]
    per = pt["per_rank_hbm_bytes"]
    if len(bws) < len(per):
        return None
    return max(b / (bw * 1e9) * 1e6 for b, bw in zip(per, bws)) / lat


def evaluate_model(res: dict, model: dict, subject: str) -> dict:
    names = list(res["implementations"])
    baselines = [n for n in names if n != subject]
    pts = model["points"]
    # 1. faster than every baseline at every point
    misses, unmeasured, compared = [], [], 0
    for pt in pts:
        s = _lat(pt, subject)
        for b in baselines:
            v = _lat(pt, b)
            if v is None:
                continue
            if s is None:
                unmeasured.append({"T": pt["T"], "baseline": b,
                                   "why": pt["impls"].get(subject, {}).get("status", "missing")})
                continue
            compared += 1
            if v / s <= 1.0:
                misses.append({"T": pt["T"], "baseline": b, "ratio": v / s, "slower_by_pct": (s / v - 1.0) * 100})
    if compared == 0 and not unmeasured:
        t1 = {"status": "not evaluated", "why": "no baseline ran" if baselines else "no baseline in this run"}
    else:
        t1 = {"status": "met" if not misses and not unmeasured else "missed", "compared_points": compared,
              "misses": misses, "not_measured": unmeasured}
    # 2. mean speedup over (a)
    if BASELINE_A not in names or subject == BASELINE_A:
        t2 = {"status": "not evaluated", "why": f"baseline (a) {BASELINE_A} not in this run"}
    else:
        pairs = [(_lat(pt, BASELINE_A), _lat(pt, subject), pt["T"]) for pt in pts]
        both = [(a, s) for a, s, _ in pairs if a is not None and s is not None]
        lacking = [T for a, s, T in pairs if a is None or s is None]
        if not both:
            t2 = {"status": "not evaluated", "why": "no point where both ran", "lacking_T": lacking}
        else:
            mean = mean_of_ratios([a for a, _ in both], [s for _, s in both])
            ok = mean >= MEAN_SPEEDUP_A and not lacking
            t2 = {"status": "met" if ok else "missed", "value": mean, "target": MEAN_SPEEDUP_A, "points": len(both),
                  "missed_by": max(0.0, MEAN_SPEEDUP_A - mean), "lacking_T": lacking}
    # 3. weight streaming at T = 256
    pt256 = next((pt for pt in pts if pt["T"] == STREAM_T), None)
    if pt256 is None:
        t3 = {"status": "not evaluated", "why": f"T={STREAM_T} not in this sweep"}
    elif _lat(pt256, subject) is None:
        t3 = {"status": "missed", "why": f"{subject} did not run at T={STREAM_T}"}
    else:
        f = stream_fraction(res, pt256, subject)
        if f is None:
            t3 = {"status": "not evaluated", "why": "no HBM read bandwidth measured in this run (floor off)"}
        else:
            t3 = {"status": "met" if f >= STREAM_FRACTION else "missed", "value": f, "target": STREAM_FRACTION,
                  "missed_by": max(0.0, STREAM_FRACTION - f)}
    return {"model": model["shape"]["name"], "subject": subject, "faster_than_every_baseline": t1,
            "mean_speedup_over_a": t2, "weight_streaming_t256": t3}


def evaluate(res: dict, subject: str) -> list[dict]:
    return [evaluate_model(res, m, subject) for m in res["models"]]


def markdown(evals: list[dict]) -> list[str]:
    """Lines of the report's Targets section."""
    L = ["## Targets (issue 7)", "",
         f"Subject vs baselines: faster at every point; mean speedup >= {MEAN_SPEEDUP_A:.2f}x over (a) "
         f"`{BASELINE_A}`; weight streaming >= {STREAM_FRACTION:.0%} of the measured HBM read bandwidth at "
         f"T = {STREAM_T}.", "",
         "| Model | Faster than every baseline | Mean speedup over (a) | Streaming at T=256 |", "|---|---|---|---|"]
    for e in evals:
        t1, t2, t3 = e["faster_than_every_baseline"], e["mean_speedup_over_a"], e["weight_streaming_t256"]
        if t1["status"] == "not evaluated":
            c1 = f"not evaluated ({t1['why']})"
        elif t1["status"] == "met":
            c1 = f"met ({t1['compared_points']} comparisons)"
        else:
            parts = []
            if t1["misses"]:
                worst = min(t1["misses"], key=lambda m: m["ratio"])
                parts.append(f"{len(t1['misses'])} of {t1['compared_points']} comparisons slower; worst "
                             f"T={worst['T']} vs `{worst['baseline']}`: {worst['slower_by_pct']:.1f}% slower "
                             f"(ratio {worst['ratio']:.3f})")
            if t1["not_measured"]:
                parts.append(f"{len(t1['not_measured'])} baseline points without the subject")
            c1 = "MISSED: " + "; ".join(parts)
        if t2["status"] == "not evaluated":
            c2 = f"not evaluated ({t2['why']})"
        else:
            c2 = f"{'met' if t2['status'] == 'met' else 'MISSED'}: {t2['value']:.3f}x over {t2['points']} points"
            if t2["status"] != "met":
                c2 += f" (short by {t2['missed_by']:.3f}x" + (
                    f"; no pair at T={t2['lacking_T']}" if t2["lacking_T"] else "") + ")"
        if "value" in t3:
            c3 = f"{'met' if t3['status'] == 'met' else 'MISSED'}: {t3['value']:.1%}"
            if t3["status"] != "met":
                c3 += f" (short by {t3['missed_by'] * 100:.1f} points)"
        else:
            c3 = f"{'MISSED' if t3['status'] == 'missed' else 'not evaluated'} ({t3['why']})"
        L.append(f"| {e['model']} | {c1} | {c2} | {c3} |")
    L.append("")
    return L
