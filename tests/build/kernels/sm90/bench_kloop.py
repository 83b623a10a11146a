"""Benchmark (not a test): the steady-state BM 64 K loop of role2 in two CTA shapes (the dev probe
:mod:`gcmoe_build.kernels.sm90.kloop_probe`: two consumer warpgroups of two slabs, as shipped, against four of one
slab), each CTA streaming its own K128 weight stages; bytes / time against the streaming read of the same run.

``GCMOE_KLOOP_CUBINS=DIR python3 tests/build/kernels/sm90/bench_kloop.py [--iters 384] [--json OUT]`` on the GPU
machine (DIR from ``python -m gcmoe_build.kernels.sm90.kloop_probe DIR``). Before timing, every form's output is
checked against the weights (poisoned output; all activations 1, so a CTA's accumulators sum to 64 x the dequantised
sum of its tiles: a lost or doubled stage moves it by 1 / (4 x iters)) and the forms against each other. Repeats the
forms in the order given, then reversed (``--rounds``), with the SM clock of each timed window (NVML).
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
from tests.build.kernels.sm90.bench_role2 import stream_read_bw  # noqa: E402
from tests.build.kernels.sm90.role2_harness import ClockSampler, Role2Kernels, time_raw_launch  # noqa: E402
from tests.build.kernels.sm90.stamp_role2 import POISON, phases, table  # noqa: E402

#: E2M1 magnitudes x 2 (integers), the probe's codes being positive (every byte & 0x77)
_MAG2 = (0, 1, 2, 3, 4, 6, 8, 12)
REL_TOL = 1e-4  # FP32 sums over ~10**5 products each; one lost stage of 4 * 384 moves a CTA's sum by 6.5e-4
#: the correctness launches of the probe's GPU test (and of ``stress_kloop.py``, which repeats them): K128 steps per
#: CTA (two turns round the 8 stages) and the epilogue forms' (steps per task, emulated epilogue cycles): two tasks of
#: 8 steps and a 500-cycle epilogue (warpgroup 1 of the staggered form pauses at steps 4 and 12)
CHECK_ITERS, CHECK_TASK = 16, (8, 500)


def make_weights(torch, ntiles: int, gen, device: str = "cuda"):
    """(codes uint8 [ntiles, 4096], scales uint8 [ntiles, 256], per-tile dequantised sums float64): positive codes,
    one relative exponent r in 0..3 per tile (scale byte 133 + r; the probe's sums then need no layout)."""
    codes = torch.randint(0, 256, (ntiles, 4096), dtype=torch.uint8, device=device, generator=gen) & 0x77
    r = torch.randint(0, 4, (ntiles,), device=device, generator=gen)
    scales = (133 + r).to(torch.uint8)[:, None].expand(ntiles, 256).contiguous()
    byte_mag2 = torch.tensor([_MAG2[b & 7] + _MAG2[(b >> 4) & 7] for b in range(256)], dtype=torch.int32,
                             device=device)
    sums = torch.empty(ntiles, dtype=torch.float64, device=device)
    for lo in range(0, ntiles, 16384):  # 16384 x 4096 int32 lookups at a time
        sums[lo:lo + 16384] = byte_mag2[codes[lo:lo + 16384].long()].sum(1).to(torch.float64) / 2
    return codes, scales, sums * torch.pow(2.0, r.to(torch.float64))


def check_inputs(torch, sms: int, iters: int = CHECK_ITERS):
    """The GPU test's weights for ``sms`` CTAs of ``iters`` K128 steps (seed 1) and each CTA's reference sum (all
    activations 1: 64 tokens x its tiles' dequantised sum): ``(codes, scales, ref)``."""
    codes, scales, tile_sums = make_weights(torch, sms * 4 * iters, torch.Generator(device="cuda").manual_seed(1))
    return codes, scales, tile_sums.view(sms, 4 * iters).sum(1) * 64


@functools.cache
def chunk_source(device):
    """The chunk forms' ``act`` formal (made once per device): a K512 activation chunk of E4M3 1.0 (32 KB) and its
    256 token scales, pre-folded (the probe's one-chunk forms fill shared memory with the same values)."""
    import torch

    from gcmoe_runtime.numerics.sm90_window import FOLD_LOG2

    buf = torch.full((32768 + 1024,), 0x38, dtype=torch.uint8, device=device)
    buf[32768:].view(torch.float32).fill_(2.0 ** FOLD_LOG2)
    return buf


def stamp_buffer(torch, info: dict):
    """A stamped form's stamp buffer, poisoned (:data:`POISON` where nothing is stored), ``[cta][warpgroup][step]
    [event]`` flat; the shape comes from the cubins' index (``step_stamps``)."""
    ctas, steps, events = info["step_stamps"]
    return torch.full((ctas * info["warpgroups"] * steps * len(events),), POISON, dtype=torch.int32, device="cuda")


def launch_args(codes, scales, out, iters: int, stamps=None, task: tuple[int, int] = (4, 0)):
    """The probe kernel's formals (w, ws, out, iters, stamps, task_steps, pause, act) as ctypes scalars (``stamps``:
    the stamp buffer, a tensor, for the stamped forms; 0 for the others, which never read it; ``task``: (K128 steps per
    task, the emulated epilogue's cycles), read by the epilogue forms only; ``act``: :func:`chunk_source`)."""
    return [ctypes.c_uint64(codes.data_ptr()), ctypes.c_uint64(scales.data_ptr()), ctypes.c_uint64(out.data_ptr()),
            ctypes.c_int32(iters), ctypes.c_uint64(0 if stamps is None else stamps.data_ptr()),
            ctypes.c_int32(task[0]), ctypes.c_int32(task[1]), ctypes.c_uint64(chunk_source(codes.device).data_ptr())]


def launch_once(torch, k, form: str, codes, scales, iters: int, sms: int, stamps=None, task=(4, 0)):
    """One launch of ``form`` on ``sms`` CTAs with its output poisoned (NaN), waited for: ``(output, index info)``. A
    stamped form always gets a stamp buffer (a scratch one unless ``stamps`` is given): it stores through it."""
    _, _, fn, info = k.function(f"kloop_probe_{form}")
    if stamps is None and info.get("step_stamps"):
        stamps = stamp_buffer(torch, info)
    out = torch.full((sms * info["consumer_threads"],), float("nan"), dtype=torch.float32, device="cuda")
    time_raw_launch(fn, sms, info["threads"], info["smem"], launch_args(codes, scales, out, iters, stamps, task),
                    warm=0, reps=1)
    torch.cuda.synchronize()
    return out, info


def stamped_run(torch, k, form: str, codes, scales, iters: int, sms: int) -> dict:
    """One launch of a stamped form with its stamp buffer poisoned: ``{name, events, steps_per_task, stamps}``
    (``stamps[cta][warpgroup][step][event]``, ``POISON`` where nothing was stored), as ``stamp_role2`` writes."""
    info = k.index[f"kloop_probe_{form}"]
    ctas, steps, events = info["step_stamps"]
    buf = stamp_buffer(torch, info)
    launch_once(torch, k, form, codes, scales, iters, sms, buf)
    st = buf.view(ctas, info["warpgroups"], steps, len(events))[:min(ctas, sms), :, :min(iters, steps)]
    return {"name": f"kloop_probe_{form}", "events": list(events), "steps_per_task": iters, "stamps": st.tolist()}


def checked_sums(torch, k, form: str, codes, scales, ref, iters: int, sms: int, task=(4, 0)):
    """One launch of ``form`` on a poisoned output: its per-CTA sums (float64), after checking every output is written
    and (unless the form is timing only) each CTA's sum is within :data:`REL_TOL` of ``ref`` (ValueError otherwise);
    also the largest error (NaN for a timing-only form). ``task``: the epilogue forms' (steps per task, pause)."""
    out, info = launch_once(torch, k, form, codes, scales, iters, sms, task=task)
    if not torch.isfinite(out).all():
        raise ValueError(f"kloop_probe_{form}: {int((~torch.isfinite(out)).sum())} outputs not written or not finite")
    got = out.view(sms, -1).to(torch.float64).sum(1)
    if info.get("timing_only"):  # no decode or no promote: its outputs are not the GEMM's
        return got, float("nan")
    err = ((got - ref).abs() / ref.abs()).max().item()
    if err > REL_TOL:
        raise ValueError(f"kloop_probe_{form}: a CTA's sum is {err:.2e} off the weights' (> {REL_TOL}): a stage "
                         f"lost or read twice?")
    return got, err


def main():
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=384, help="K128 steps per CTA (a multiple of 4)")
    ap.add_argument("--forms", default="wg2,wg4,wg4n")
    ap.add_argument("--rounds", type=int, default=2, help="passes over the forms, every other one reversed")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--ctas", type=int, default=0,
                    help="CTAs (one per SM; default every SM). Fewer CTAs than SMs keep the stream below the read "
                         "bandwidth, so the K loop's own rate shows on a card whose read would bind it (an H100)")
    ap.add_argument("--task", type=int, default=16,
                    help="the epilogue forms' K128 steps per task (a multiple of 4 dividing --iters)")
    ap.add_argument("--pauses", default="0",
                    help="the epilogue forms' emulated epilogue, cycles per task, comma-separated: each is timed "
                         "(0: the form's reference on the same code; negative: an FMA-heavy epilogue of that many "
                         "cycles); other forms run once")
    ap.add_argument("--json")
    ap.add_argument("--stamps", help="folder: each stamped form's raw stamps (JSON) and phase table; stamped forms "
                                     "are not timed (their stamps cost ~30 instructions per step)")
    a = ap.parse_args()
    if a.iters % 4:
        raise SystemExit(f"--iters {a.iters}: must be a multiple of 4 (the probe's K512 chunk)")
    if a.task % 4 or a.iters % a.task:
        raise SystemExit(f"--task {a.task}: must be a multiple of 4 that divides --iters {a.iters}")
    pauses = [int(p) for p in a.pauses.split(",")]
    k = Role2Kernels(Path(os.environ.get("GCMOE_KLOOP_CUBINS", "build/kloop_probe")))
    forms = a.forms.split(",")
    sms = a.ctas or torch.cuda.get_device_properties(0).multi_processor_count
    ntiles = sms * 4 * a.iters
    gen = torch.Generator(device="cuda").manual_seed(0)
    codes, scales, tile_sums = make_weights(torch, ntiles, gen)
    ref = tile_sums.view(sms, 4 * a.iters).sum(1) * 64  # per CTA: 64 tokens of all-ones activations
    nbytes = ntiles * (4096 + 256)
    print(f"{torch.cuda.get_device_name(0)}: {sms} CTAs x {a.iters} K128 steps, {nbytes / 1e6:.0f} MB of weights")
    # the K loop's own rate per SM, projected onto role2's 128-SM compute partition: its share of the read if the
    # stream did not bind (equal to the measured share when every SM runs and the read does not bind)
    part = 128

    sums = {}
    for form in forms:  # correctness first
        sums[form], err = checked_sums(torch, k, form, codes, scales, ref, a.iters, sms, (a.task, max(pauses, key=abs)))
        print(f"{form}: " + ("timing only (outputs written)" if err != err else
                             f"a CTA's sum against the weights' within {err:.2e} (relative)"))
    checked = [f for f in forms if not k.index[f"kloop_probe_{f}"].get("timing_only")]
    if len(checked) > 1:
        spread = max(((sums[f] - sums[checked[0]]).abs() / ref.abs()).max().item() for f in checked)
        print(f"forms against each other: within {spread:.2e}")
    stamped = [f for f in forms if k.index[f"kloop_probe_{f}"].get("step_stamps")]
    if stamped and not a.stamps:
        raise SystemExit(f"forms {', '.join(stamped)} are stamped: give --stamps DIR")
    for form in stamped:
        raw = stamped_run(torch, k, form, codes, scales, a.iters, sms)
        out_dir = Path(a.stamps)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{raw['name']}.json").write_text(json.dumps(raw))
        lines = table(raw["name"], phases(raw["stamps"], raw["events"], raw["steps_per_task"]))
        (out_dir / f"{raw['name']}.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
    forms = [f for f in forms if f not in stamped]
    if not forms:
        return
    bw = stream_read_bw(torch)
    clocks = ClockSampler()
    rows = []
    print(f"stream read {bw / 1e12:.2f} TB/s")
    runs = [(f, p) for f in forms for p in (pauses if k.index[f"kloop_probe_{f}"].get("epilogue") else [0])]
    print(f"epilogue forms: a task of {a.task} K128 steps, pauses {pauses} cycles")
    print(f"{'form':6} {'pause':>6} {'round':>5} {'us':>8} {'TB/s':>6} {'% read':>7} {'GB/s/SM':>8} {'128 SMs':>8} "
          f"{'SM MHz':>7} {'capped':>6}")
    for rnd in range(a.rounds):
        for form, pause in (runs if rnd % 2 == 0 else runs[::-1]):
            _, _, fn, info = k.function(f"kloop_probe_{form}")
            out = torch.empty(sms * info["consumer_threads"], dtype=torch.float32, device="cuda")
            t0 = time.perf_counter()
            us = time_raw_launch(fn, sms, info["threads"], info["smem"],
                                 launch_args(codes, scales, out, a.iters, task=(a.task, pause)), warm=3, reps=a.reps)
            clk = clocks.summary(t0, time.perf_counter())
            per_sm = nbytes / us * 1e6 / sms
            row = dict(form=form, pause=pause, task_steps=a.task, round=rnd, ctas=sms, us=us, tbps=nbytes / us / 1e6,
                       frac_read=nbytes / us * 1e6 / bw, gbps_per_sm=per_sm / 1e9, frac_read_128=per_sm * part / bw,
                       **clk)
            rows.append(row)
            print(f"{form:6} {pause:6d} {rnd:5d} {us:8.1f} {row['tbps']:6.2f} {100 * row['frac_read']:6.1f}% "
                  f"{row['gbps_per_sm']:8.2f} {100 * row['frac_read_128']:7.1f}% "
                  f"{clk.get('sm_mhz', 0):7.0f} {100 * clk.get('power_capped', 0):5.0f}%")
    clocks.close()
    if a.json:
        Path(a.json).write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(0), sms=sms, iters=a.iters,
                                                bytes=nbytes, read_bps=bw, rows=rows), indent=1))


if __name__ == "__main__":
    main()
