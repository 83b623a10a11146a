"""GPU harness: one accuracy case's eager layer call repeated at P = 1 in one execution mode — how often it faults,
and whether every output equals the first (session 30 found a race with it; docs/OPERATOR.md "When a layer call
faults").

``GCMOE_OPERATOR_BUNDLE=B [MODE=gcov|gc|ov|serial] [REPEATS=n] [STACK=bytes] [TILE=BM:THREADS[:CTAS[:SPLIT]]]
[ROUTE_EXPERTS=n] [PRINT_ADDRS=1] [SHARED=1] python3 gpu_repeat_probe.py PRESET CASE`` (PRESET as for
gpu_accuracy.py, e.g. glm-5.2@E32; CASE an accuracy-suite case name, e.g. default_T32). Prints ``RESULT PASS`` when
every call ran, every output is within ``REL_L2_MAX`` of the FP32 reference and bit-identical to the first.

SHARED=1 adds the preset's shared expert (role4; the reference adds it too).

MODE: gcov = green contexts + the overlapped graph (the operator's own mode, ring of the live model); gc = green
contexts, roles serialised (whole-pool ring); ov = the primary context, overlapped (live-model ring); serial = the
primary context, roles serialised (whole-pool ring). STACK: cuCtxSetLimit(CU_LIMIT_STACK_SIZE) on the primary
context before the workspace is built (tests whether a per-launch local-memory resize beside a running role is the
fault; in session 30 it was not). Every call's output is compared with the FP32 reference (rel. L2) and with the
first call (bit-identical?); a CUDA error is printed with the trap record and ends the process (the context is lost).
(Session 30's calls ran it as results/operator/2026-12-02-h200-session30/crash_probe.py.)
"""
import dataclasses
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from gcmoe_runtime import moe  # noqa: E402
from gcmoe_runtime.accuracy.cases import build_rank_inputs, suite_cases  # noqa: E402
from gcmoe_runtime.accuracy.config import make_layer_weights, resolve_preset  # noqa: E402
from gcmoe_runtime.numerics.reference import reference_moe_forward  # noqa: E402
from gcmoe_runtime.operator.accuracy_impl import GcMoeImplementation  # noqa: E402

MODES = {"gcov": (True, True), "gc": (True, False), "ov": (False, True), "serial": (False, False)}
REL_L2_MAX = 0.02  # the suite's quantised-reference errors are <= 0.008 (results/operator/*/json/acc)


def set_stack(nbytes: int) -> None:
    from cuda.bindings import driver as cu

    err = cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_STACK_SIZE, nbytes)[0]
    _, got = cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_STACK_SIZE)
    print(f"stack limit: set {nbytes} -> {err.name}, now {got}", flush=True)


def main(preset: str, case: str) -> None:
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda:0")
    mode = os.environ.get("MODE", "gcov")
    if mode not in MODES:
        raise SystemExit(f"MODE={mode!r}: one of {sorted(MODES)}")
    green, overlap = MODES[mode]
    repeats = int(os.environ.get("REPEATS", "5"))
    if os.environ.get("STACK"):
        set_stack(int(os.environ["STACK"]))
    shared = os.environ.get("SHARED") == "1"
    cfg = dataclasses.replace(resolve_preset(preset), world=1, shared_experts=int(shared))
    tile = tuple(int(v) for v in os.environ["TILE"].split(":")) if os.environ.get("TILE") else None
    buf = moe.get_symm_buffer_for_gc_moe(None, cfg.num_experts, 256, cfg.topk, cfg.hidden, cfg.intermediate,
                                         bundle=os.environ["GCMOE_OPERATOR_BUNDLE"], timeout_ns=int(5e9),
                                         shared_experts=shared, green_contexts=green, overlap=overlap, tile=tile)
    print(f"mode={mode} green={green} overlap={overlap} ring_blocks={buf.ws.layout.ring_blocks} "
          f"bm_max={buf.ws.layout.bm_max} partition={buf.partition.dispatch_sms}/{buf.partition.compute_sms}",
          flush=True)
    if os.environ.get("PRINT_ADDRS"):  # for core_probe.sh: the signal regions' device addresses (cuda-gdb reads them)
        lay = buf.ws.layout
        for r in ("recv_parity", "recv_count", "send_count", "l1_full_count", "l1_empty_count", "l2_full_mask",
                  "l2_empty_count", "ring_block", "dispatch_grid"):
            print(f"ADDR {r} {buf.ws.address(r):#x} {lay.region(r).dtype} {'x'.join(map(str, lay.region(r).shape))}",
                  flush=True)
    layer = make_layer_weights(cfg, device="cuda:0")
    impl = GcMoeImplementation(buf, layer, activation_alpha=cfg.alpha, activation_clamp=cfg.clamp)
    specs = {s.name: (i, s) for i, s in enumerate(suite_cases(cfg))}
    idx, spec = specs[case]
    # ROUTE_EXPERTS=n: route as the same preset at n experts would (ids < n), on this layer (same load, other build)
    route_cfg = dataclasses.replace(cfg, num_experts=int(os.environ["ROUTE_EXPERTS"])) if os.environ.get(
        "ROUTE_EXPERTS") else cfg
    inp = build_rank_inputs(route_cfg, layer, spec, idx, ranks=[0], device="cuda:0")[0]
    T = inp.num_tokens
    ids = inp.topk_idx[inp.topk_idx >= 0].flatten()
    per = torch.bincount(ids.cpu(), minlength=cfg.num_experts).tolist()
    print(f"{case}: T={T} tile={moe.select_tile(buf, T)} tokens/expert min {min(per)} max {max(per)} "
          f"active {sum(1 for p in per if p)}", flush=True)
    out = reference_moe_forward(inp.x_q, inp.x_scale, inp.topk_idx, inp.topk_weights, layer.routed,
                                layer.shared if shared else None, spec=cfg.swiglu, act_recipe=inp.act_recipe)
    yref = (out[0] if isinstance(out, tuple) else out).float().cpu()
    first, bad = None, 0
    for rep in range(repeats):
        try:
            y = impl(inp).float().cpu()  # poisons nothing itself: impl allocates y; the kernels must write every row
        except Exception as e:  # noqa: BLE001 - report, then re-raise
            print(f"FAIL call {rep} {type(e).__name__}: {str(e)[:240]}", flush=True)
            try:
                buf.trap.check()
            except Exception as t:  # noqa: BLE001
                print(f"TRAP {t}", flush=True)
            raise
        err = float((y - yref).norm() / yref.norm().clamp_min(1e-30))
        same = "first" if first is None else ("bit-identical" if torch.equal(y, first) else
                                              f"DIFFERS max|d| {float((y - first).abs().max()):.4g}")
        first = y if first is None else first
        ok = err <= REL_L2_MAX and not torch.isnan(y).any() and not same.startswith("DIFFERS")
        bad += not ok
        print(f"{'OK' if ok else 'BAD'} call {rep} {case}: rel_l2 {err:.5f} nan {int(torch.isnan(y).sum())} {same}",
              flush=True)
    print("RESULT", "PASS" if bad == 0 else f"FAIL ({bad} of {repeats} calls)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
