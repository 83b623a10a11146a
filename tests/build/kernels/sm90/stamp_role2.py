"""Where a K128 step's cycles go in the role2 K loop (a measurement on the GPU machine, not a test).

``python3 tests/build/kernels/sm90/stamp_role2.py --variants _ppksafwc --points 64:64 --out DIR`` loads the dev
builds with ``Role2GemmConfig.step_stamps`` (``role2_devbuild --experiments``: ``_ppksafc``, ``_ppksafwc``,
``_pp2ksafc``), runs each point as ``bench_role2.py`` does (every local expert active with ``m`` tokens, the ring
already full), and after warm-up launches once with the stamp buffer poisoned. Consumer thread 0 of each warpgroup of
CTAs 0-3 stamped ``%clock`` at every K128 step's events (``role2_config.STAMP_EVENTS``: start, stage_ready, decoded,
turn, issued, mma_done, promoted; the producer thread's ``produced`` in warpgroup 0's row). Writes ``DIR/<name>.json``
(the raw stamps) and prints, per kernel and warpgroup, the median / p90 cycles of each phase over the steps inside a
task (a task's first step, which waits for its activation chunk and record, apart).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from tests.build.kernels.sm90.bench_role2 import SHAPES  # noqa: E402
from tests.build.kernels.sm90.role2_harness import (RingSignals, Role2Kernels, e4m3_random,  # noqa: E402
                                                    random_packed_experts)

POISON = -1
#: phase name -> (from event, to event); events missing from a build (the turn without pingpong) fall back
PHASES = (("stage_wait", "start", "stage_ready"), ("decode", "stage_ready", "decoded"),
          ("turn_wait", "decoded", "turn"), ("issue", "turn", "issued"),
          ("issued_to_mma_done", "issued", "mma_done"), ("promote", "mma_done", "promoted"))


def _cyc(a: int, b: int) -> int:
    """``b - a`` of two 32-bit ``%clock`` values, wrap-safe."""
    d = (b - a) & 0xFFFFFFFF
    return d - (1 << 32) if d >= 1 << 31 else d


def phases(stamps: list, events: list, steps_per_task: int) -> dict:
    """``{(warpgroup, phase): [cycles, ...]}`` over every stamped CTA's steps inside a task (step 0 of a task under
    ``top:<phase>``), plus ``period`` (start to the next step's start) and ``stage_lead`` (the producer's stamp of
    the step to the consumer's start: > 0 when the stage's copy was issued before the consumer asked)."""
    ev = {e: i for i, e in enumerate(events)}
    out: dict = {}
    for cta in stamps:
        for wg, row in enumerate(cta):
            for gs, st in enumerate(row):
                top = gs % steps_per_task == 0
                for name, a, b in PHASES:
                    if a == "turn" and st[ev["turn"]] == POISON:
                        a = "decoded"
                    if st[ev[a]] == POISON or st[ev[b]] == POISON:
                        continue
                    out.setdefault((wg, ("top:" if top else "") + name), []).append(_cyc(st[ev[a]], st[ev[b]]))
                nxt = row[gs + 1] if gs + 1 < len(row) else None
                if nxt is not None and st[ev["start"]] != POISON and nxt[ev["start"]] != POISON and not (
                        (gs + 1) % steps_per_task == 0):
                    out.setdefault((wg, "period"), []).append(_cyc(st[ev["start"]], nxt[ev["start"]]))
                prod = cta[0][gs][ev["produced"]]
                if prod != POISON and st[ev["start"]] != POISON and not top:
                    out.setdefault((wg, "stage_lead"), []).append(_cyc(prod, st[ev["start"]]))
    return out


def busy_overlap(stamps: list, events: list, steps: range, grain: int = 4) -> list[float]:
    """Share of the time in which 0, 1 or 2 of the stamped warps (warp 0 of each warpgroup: the same scheduler) run
    CUDA-core work — a step's stage wait + decode, or its promote — over ``steps`` of each stamped CTA (averaged over the
    CTAs, sampled every ``grain`` cycles where both warps have stamps). The turns meant to alternate the two: ideally
    no time at 0 or 2."""
    ev = {e: i for i, e in enumerate(events)}
    shares = []
    for cta in stamps:
        t0 = cta[0][steps[0]][ev["start"]]
        busy = []
        for wg in (0, 1):
            iv = []
            for gs in steps:
                st = cta[wg][gs]
                if POISON in (st[ev["start"]], st[ev["decoded"]], st[ev["mma_done"]], st[ev["promoted"]]):
                    continue
                iv += [(_cyc(t0, st[ev["start"]]), _cyc(t0, st[ev["decoded"]])),
                       (_cyc(t0, st[ev["mma_done"]]), _cyc(t0, st[ev["promoted"]]))]
            busy.append(iv)
        if not all(busy):
            continue
        lo = max(min(a for a, _ in iv) for iv in busy)
        hi = min(max(b for _, b in iv) for iv in busy)
        cnt = [0, 0, 0]
        for t in range(lo, hi, grain):
            cnt[sum(any(a <= t < b for a, b in iv) for iv in busy)] += 1
        if sum(cnt):
            shares.append([c / sum(cnt) for c in cnt])
    return [sum(s[k] for s in shares) / len(shares) for k in range(3)] if shares else [0.0, 0.0, 0.0]


def table(name: str, ph: dict) -> list[str]:
    keys = sorted({k[1] for k in ph}, key=lambda n: ([p[0] for p in PHASES] + ["period", "stage_lead"]).index(
        n.split(":")[-1]) + (100 if n.startswith("top:") else 0))
    lines = [f"### {name}", "", "| phase (cycles) | WG 0 median | WG 0 p90 | WG 1 median | WG 1 p90 | steps |",
             "|---|---|---|---|---|---|"]
    for k in keys:
        cells = []
        for wg in (0, 1):
            v = sorted(ph.get((wg, k), []))
            cells += [f"{statistics.median(v):.0f}", f"{v[int(0.9 * (len(v) - 1))]:.0f}"] if v else ["-", "-"]
        lines.append(f"| {k} | " + " | ".join(cells) + f" | {len(ph.get((0, k), []))} |")
    return lines + [""]


def main():
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default="_ppksafwc")
    ap.add_argument("--shapes", default="glm52")
    ap.add_argument("--points", default="64:64", help="comma-separated TOKENS:BM")
    ap.add_argument("--modes", default="w1,w2")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    k = Role2Kernels()
    gen = torch.Generator(device="cuda").manual_seed(7)
    report = [f"# role2 K128 step stamps ({torch.cuda.get_device_name()})", ""]
    for shape in a.shapes.split(","):
        h, i, e = SHAPES[shape]
        w1, s1, w2, s2, ef, bexp = random_packed_experts(torch, e, h, i, gen)
        for pt in a.points.split(","):
            m, bm = (int(x) for x in pt.split(":"))
            ntok = torch.full((e,), m, dtype=torch.int32, device="cuda")
            act = e4m3_random(torch, (e, bm, h), gen)
            asc = torch.full((e, bm, h // 128), 0.01, device="cuda")
            rw = torch.rand((e, bm), device="cuda", generator=gen)
            l2 = e4m3_random(torch, (e, bm, i), gen).view(torch.uint8)
            l2s = torch.full((e, bm, i // 32), 120, dtype=torch.uint8, device="cuda")
            rowidx = torch.arange(e * bm, dtype=torch.int32, device="cuda").view(e, bm)
            dst = torch.empty((e * bm, h), dtype=torch.bfloat16, device="cuda")
            sig = RingSignals(e, bm)
            sig.ready()
            sig.l2_mask.fill_(-1)
            for var in a.variants.split(","):
                for mode in a.modes.split(","):
                    name = f"role2_{mode}_{shape}_bm{bm}{var}"
                    if name not in k.index:
                        print(f"{name}: not built, skipped")
                        continue
                    info = k.index[name]
                    nsm = torch.cuda.get_device_properties(0).multi_processor_count * info.get("ctas_per_sm", 1)
                    if mode == "w1":
                        ptrs = [w1.data_ptr(), s1.data_ptr(), ef.data_ptr(), act.data_ptr(), asc.data_ptr(),
                                bexp.data_ptr(), ntok.data_ptr(), sig.gen.data_ptr(), rw.data_ptr(), l2.data_ptr(),
                                l2s.data_ptr()]
                    else:
                        ptrs = [w2.data_ptr(), s2.data_ptr(), ef.data_ptr(), l2.data_ptr(), l2s.data_ptr(),
                                bexp.data_ptr(), ntok.data_ptr(), sig.gen.data_ptr(), rowidx.data_ptr(),
                                dst.data_ptr(), 0]
                    ptrs += [sig.l1_full.data_ptr(), sig.empty.data_ptr(), sig.l2_mask.data_ptr(), 0]
                    st = k.stamps(name)
                    for _ in range(5):
                        k.launch_persistent(name, nsm, ptrs, e)
                    torch.cuda.synchronize()
                    st.fill_(POISON)
                    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    ev0.record()
                    k.launch_persistent(name, nsm, ptrs, e)
                    ev1.record()
                    torch.cuda.synchronize()
                    us = ev0.elapsed_time(ev1) * 1e3
                    events = info["step_stamps"][2]
                    raw = st.cpu().tolist()
                    steps_per_task = info["k"] // 128 * info.get("slab_passes", 1)
                    ph = phases(raw, events, steps_per_task)
                    (out / f"{name}_m{m}.json").write_text(json.dumps(
                        {"name": name, "tokens_per_expert": m, "experts": e, "us": us, "events": events,
                         "steps_per_task": steps_per_task, "stamps": raw}))
                    report += table(f"{name}, {m} tokens per expert, {e} experts: {us:.1f} µs (one launch)", ph)
                    ov = busy_overlap(raw, events, range(8, min(40, steps_per_task)))
                    report += ["Time with 0 / 1 / 2 stamped warps in stage wait + decode or promote (steps 8-39): "
                               + " / ".join(f"{100 * x:.0f} %" for x in ov), ""]
    text = "\n".join(report)
    (out / "stamps.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
