"""Session 44 call F: is the P = 1 DSV-4.1-Flash T = 16 two-mode role2 (363-368 against 407-413 µs, per process: 5 of
12 timeline runs of calls A and C fast) a property of where the weights sit in memory, of the partition / workspace,
or of neither? One process, one model load; a `bench timeline` point (median of 20 replays after an L2 flush) at T =
16 (and T = 8 / 64 beside it), then the routed weights drawn again into fresh memory (the old ones held until the new
ones exist, so the allocator cannot hand back the same blocks) five times, then the whole model reloaded (new
workspace, green contexts) once. A mode that flips with the weights' memory points at placement (DRAM channel
aliasing of the experts' tiles); one fixed per process points at the partition or the process.

    CUDA_VISIBLE_DEVICES=0 GCMOE_BENCH_BUNDLES=results/operator/bundles python3 \\
        results/operator/2026-12-04-h200-session44/mode_probe.py OUT.json
"""
import json
import sys
import time

import torch

from gcmoe_runtime.bench import impl_gcmoe
from gcmoe_runtime.bench.routing import build_point
from gcmoe_runtime.bench.shapes import resolve_model
from gcmoe_runtime.bench.timeline import loaded_gcmoe, one_gpu_run, replay_timelines, summarize, trace_point
from gcmoe_runtime.bench.protocol import capture_graph

TOKENS = (8, 16, 64)


def measure(impl, shape, layout, flush) -> dict:
    out = {}
    for T in TOKENS:
        prep = impl.prepare(build_point(shape, T, layout, 0, 0))
        graph = None if prep.replay is not None else capture_graph(prep.step)
        t0 = time.time()
        s = summarize(replay_timelines(trace_point(prep.replay or graph.replay, flush, 20)))
        out[T] = {"role2_us": round(s["roles"]["role2"]["dur_us"], 1), "span_us": round(s["span_us"], 1),
                  "window": [t0, time.time()]}
        prep.close()
        del graph
    return out


def first_ptr(w) -> int:
    for v in (w if isinstance(w, (list, tuple)) else getattr(w, "__dict__", {}).values()):
        if torch.is_tensor(v):
            return v.data_ptr()
    return w.data_ptr() if torch.is_tensor(w) else -1


def clocks_during(samples: list[str], window: list[float]) -> dict:
    """SM clock (MHz), power (W) and the active clock-event reasons nvidia-smi sampled inside ``window``."""
    got = []
    for line in samples:
        f = [x.strip() for x in line.split(",")]
        try:
            t = time.mktime(time.strptime(f[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + f[0].split(".")[1])
        except (ValueError, IndexError):
            continue
        if window[0] - 0.05 <= t <= window[1] + 0.05:
            got.append((float(f[1].split()[0]), float(f[2].split()[0]), f[3]))
    if not got:
        return {}
    return {"sm_mhz": sorted({g[0] for g in got}), "power_w": [min(g[1] for g in got), max(g[1] for g in got)],
            "reasons": sorted({g[2] for g in got})}


def main(path: str) -> None:
    import subprocess
    import tempfile

    log = tempfile.NamedTemporaryFile("w+", suffix=".csv", delete=False)
    smi = subprocess.Popen(["nvidia-smi", "-i", "0", "--query-gpu=timestamp,clocks.sm,power.draw,"
                            "clocks_event_reasons.active", "--format=csv,noheader", "-lms", "20"], stdout=log,
                           stderr=subprocess.DEVNULL)
    try:
        run(path, log.name)
    finally:
        smi.terminate()


def segments(ws) -> dict:
    """For each weight tensor: the caching allocator's segment it lies in (address, size) and its offset there."""
    segs = [(s["address"], s["total_size"]) for s in torch.cuda.memory_snapshot()]
    out = {}
    for w in ws:
        for part in ("tiles", "scales"):
            p = getattr(w, part).data_ptr()
            hit = [(a, n) for a, n in segs if a <= p < a + n]
            out[f"{w.name}.{part}"] = {"ptr": hex(p), "segment": hex(hit[0][0]) if hit else None,
                                       "segment_mib": hit[0][1] >> 20 if hit else None,
                                       "offset_mib": (p - hit[0][0]) / 2 ** 20 if hit else None}
    return out


def run(path: str, smi_log: str) -> None:
    if len(sys.argv) > 2 and sys.argv[2] == "swap":
        return run_swap(path, smi_log)
    shape = resolve_model("deepseek-v4.1-flash")
    layout, ctx, flush, _ = one_gpu_run(False, 20, "mode_probe")
    impl = loaded_gcmoe(shape, layout, ctx, False)
    rows = []

    def record(what):
        m = impl._m
        r = {"what": what, "w1_ptr": hex(first_ptr(m["w1"])), "w2_ptr": hex(first_ptr(m["w2"])),
             "t": time.time(), **{f"T{T}": v for T, v in measure(impl, shape, layout, flush).items()}}
        rows.append(r)
        print(json.dumps(r), flush=True)

    record("load")
    for i in range(5):
        old = impl._m["w1"], impl._m["w2"]
        impl_gcmoe._weights_cache.clear()
        w1, w2, _ = impl._weights(impl._m["api"], shape, layout, ctx, False)
        impl._m.update(w1=w1, w2=w2)  # the layer graph is keyed by parameter bytes: new pointers, new graph
        del old
        record(f"weights redrawn {i + 1}")
    hold = impl  # the old model stays allocated while the new one loads
    impl_gcmoe._weights_cache.clear()
    impl = loaded_gcmoe(shape, layout, ctx, False)
    del hold
    record("model reloaded")
    time.sleep(0.3)
    samples = open(smi_log).read().splitlines()
    for r in rows:
        for T in TOKENS:
            r[f"T{T}"]["clocks"] = clocks_during(samples, r[f"T{T}"]["window"])
        print(r["what"], {T: (r[f"T{T}"]["role2_us"], r[f"T{T}"]["clocks"]) for T in TOKENS}, flush=True)
    with open(path, "w") as f:
        json.dump({"rows": rows, "smi_samples": samples}, f, indent=1)



def run_swap(path: str, smi_log: str) -> None:
    """Calls H-J. ``swap``: the first load's weights (A) against a clone of them in fresh memory (B, same bytes),
    A B A B in one process (a mode that follows the copy is placement, not time or values); ``swap redraw`` (I): a
    redraw R (byte equality with A checked), its clone, A, R — nothing freed; ``swap free`` (J): A, R, then R twice
    after A is freed."""
    import dataclasses

    shape = resolve_model("deepseek-v4.1-flash")
    layout, ctx, flush, _ = one_gpu_run(False, 20, "mode_probe swap")
    impl = loaded_gcmoe(shape, layout, ctx, False)
    a = impl._m["w1"], impl._m["w2"]
    b = tuple(dataclasses.replace(w, tiles=w.tiles.clone(), scales=w.scales.clone(),
                                  expert_factor=w.expert_factor.clone()) for w in a)
    plan = (("A", a), ("B", b), ("A", a), ("B", b))
    if len(sys.argv) > 3 and sys.argv[3] == "redraw":  # call I: a redraw (R), its clone (R2), and whether R == A
        impl_gcmoe._weights_cache.clear()
        r = impl._weights(impl._m["api"], shape, layout, ctx, False)[:2]
        r2 = tuple(dataclasses.replace(w, tiles=w.tiles.clone(), scales=w.scales.clone(),
                                       expert_factor=w.expert_factor.clone()) for w in r)
        same = {f"{x.name}.{part}": bool(torch.equal(getattr(x, part), getattr(y, part)))
                for x, y in zip(a, r) for part in ("tiles", "scales", "expert_factor")}
        print("redraw bytes equal to the first load's:", same, flush=True)
        plan = (("A", a), ("R", r), ("R2", r2), ("A", a), ("R", r))
    rows = []

    def rec(what, ws):
        impl._m.update(w1=ws[0], w2=ws[1])
        r = {"what": what, "segments": segments(ws), "t": time.time(),
             **{f"T{T}": v for T, v in measure(impl, shape, layout, flush).items()}}
        rows.append(r)
        print(json.dumps(r), flush=True)

    if len(sys.argv) > 3 and sys.argv[3] == "free":  # call J: R measured with A alive, then after A is freed
        impl_gcmoe._weights_cache.clear()
        r = impl._weights(impl._m["api"], shape, layout, ctx, False)[:2]
        rec("A", a)
        rec("R", r)
        impl._m.update(w1=r[0], w2=r[1])
        del a, b, plan  # the first load's weights and their clone unreferenced: back to the allocator's cache
        rec("R after A freed", r)
        rec("R after A freed", r)
    else:
        for what, ws in plan:
            rec(what, ws)
    time.sleep(0.3)
    samples = open(smi_log).read().splitlines()
    for r in rows:
        for T in TOKENS:
            r[f"T{T}"]["clocks"] = clocks_during(samples, r[f"T{T}"]["window"])
        print(r["what"], {T: (r[f"T{T}"]["role2_us"], r[f"T{T}"]["clocks"].get("sm_mhz")) for T in TOKENS},
              flush=True)
        print("  segments", r["segments"], flush=True)
    with open(path, "w") as f:
        json.dump({"rows": rows, "smi_samples": samples}, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
