"""Session 29 call B: one eager layer call of an accuracy case at P = 1, to find which configuration fails and how.

``GCMOE_OPERATOR_BUNDLE=B [TILE=BM:THREADS[:CTAS]] [SERIAL=1] python3 crash_probe.py PRESET CASE`` (PRESET as for
tests/runtime/operator/gpu_accuracy.py, e.g. glm-5.2@E32). Prints the role2 tile, the tokens per expert, and either
the output's error against the FP32 reference or the failure (with the trap record when a device wait timed out).
SERIAL=1: the roles one after the other in the primary context (no green contexts), so compute-sanitizer can run it.
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


def main(preset: str, case: str) -> None:
    torch.cuda.set_device(0)
    cfg = dataclasses.replace(resolve_preset(preset), world=1, shared_experts=0)
    serial = os.environ.get("SERIAL") == "1"
    tile = tuple(int(v) for v in os.environ["TILE"].split(":")) if os.environ.get("TILE") else None
    buf = moe.get_symm_buffer_for_gc_moe(None, cfg.num_experts, 256, cfg.topk, cfg.hidden, cfg.intermediate,
                                         bundle=os.environ["GCMOE_OPERATOR_BUNDLE"], timeout_ns=int(5e9),
                                         green_contexts=not serial, overlap=not serial, tile=tile)
    print(f"layout: ring_blocks={buf.ws.layout.ring_blocks} bm_max={buf.ws.layout.bm_max} "
          f"partition={buf.partition.dispatch_sms}/{buf.partition.compute_sms}", flush=True)
    layer = make_layer_weights(cfg, device="cuda:0")
    impl = GcMoeImplementation(buf, layer, activation_alpha=cfg.alpha, activation_clamp=cfg.clamp)
    specs = {s.name: (i, s) for i, s in enumerate(suite_cases(cfg))}
    idx, spec = specs[case]
    inp = build_rank_inputs(cfg, layer, spec, idx, ranks=[0], device="cuda:0")[0]
    T = inp.num_tokens
    ids = inp.topk_idx[inp.topk_idx >= 0].flatten()
    per = torch.bincount(ids, minlength=cfg.num_experts).tolist()
    print(f"{case}: T={T} tile={moe.select_tile(buf, T)} tokens/expert min {min(per)} max {max(per)} "
          f"active {sum(1 for p in per if p)}", flush=True)
    try:
        y = impl(inp)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - report, then re-raise
        print(f"FAIL {type(e).__name__}: {str(e)[:300]}", flush=True)
        try:
            buf.trap.check()
        except Exception as t:  # noqa: BLE001
            print(f"TRAP {t}", flush=True)
        raise
    out = reference_moe_forward(inp.x_q, inp.x_scale, inp.topk_idx, inp.topk_weights, layer.routed, spec=cfg.swiglu)
    yref = out[0] if isinstance(out, tuple) else out
    err = float((y.float() - yref.float()).norm() / yref.float().norm().clamp_min(1e-30))
    print(f"OK {case}: rel_l2 {err:.5f} nan {int(torch.isnan(y.float()).sum())}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
