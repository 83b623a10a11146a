"""GPU harness: the public API's set-up and host-side checks (gcmoe_runtime.moe) on real devices.

``python gpu_api_checks.py OUT.jsonl`` (P = 1) or under ``torchrun --nproc-per-node 2``. Creates the
buffer through ``get_symm_buffer_for_gc_moe`` (peer-access check + rendezvous on P = 2), transforms
random MXFP4 weights, then checks that every bad input is refused before launch with the expected
message, and that a well-formed call on a bundle without the ring-consuming role2 stops with an
error naming the missing variant (nothing partial is launched).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
#: a test-model bundle of role1 / role3 only (session 4's build, kept for this harness): the API's host checks, and the
#: last one needs a bundle without a role2 kernel (the shipped bundles hold every role)
BUNDLE = ROOT / "results/operator/test-tiny-role1-role3-only-sm90a.gcmoe"
E, K, H, I, CAP = 16, 4, 512, 256, 256


def main(out):
    from gcmoe_runtime import moe
    from gcmoe_runtime.numerics.quant import quantize_mxfp4

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    group = None
    torch.cuda.set_device(rank)
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
        group = dist.group.WORLD
    dev = torch.device("cuda", rank)
    results = []

    def expect(name, fn, needle):
        try:
            fn()
            results.append({"check": name, "ok": False, "message": "no error raised"})
        except moe.GcMoeError as e:
            results.append({"check": name, "ok": needle in str(e), "message": str(e)[:300]})
        except Exception as e:  # wrong exception type
            results.append({"check": name, "ok": False, "message": f"{type(e).__name__}: {str(e)[:300]}"})

    expect("bad mma_type", lambda: moe.get_symm_buffer_for_gc_moe(group, E, CAP, K, H, I, bundle=str(BUNDLE),
                                                                  mma_type="fp8xfp8"), "mma_type")
    expect("shape not in bundle", lambda: moe.get_symm_buffer_for_gc_moe(group, E, CAP, K, 1024, I,
                                                                         bundle=str(BUNDLE)), "no role1")
    buf = moe.get_symm_buffer_for_gc_moe(group, E, CAP, K, H, I, bundle=str(BUNDLE))
    el = E // world
    g = torch.Generator(device="cpu").manual_seed(rank)
    w1q, w1s = quantize_mxfp4(torch.randn(el, 2 * I, H, generator=g).to(dev))
    w2q, w2s = quantize_mxfp4(torch.randn(el, H, I, generator=g).to(dev))
    w1, w2 = moe.transform_weights_for_gc_moe((w1q, w1s), (w2q, w2s), k_interleave=buf.k_interleave)
    T = 8
    buf.x[:T].copy_(torch.randn(T, H, device=dev).to(torch.float8_e4m3fn))
    buf.x_sf[:T].fill_(1.0)
    buf.topk_idx[:T].copy_(torch.randint(0, E, (T, K), device=dev, dtype=torch.int32))
    buf.topk_weights[:T].fill_(0.25)
    y = torch.empty(T, H, dtype=torch.bfloat16, device=dev)
    expect("T above capacity", lambda: moe.fp8_fp4_gc_moe(torch.empty(CAP + 1, H, dtype=torch.bfloat16, device=dev),
                                                           w1, w2, buf), "exceeds the buffer capacity")
    expect("y dtype", lambda: moe.fp8_fp4_gc_moe(y.float(), w1, w2, buf), "bfloat16")
    expect("y device", lambda: moe.fp8_fp4_gc_moe(y.cpu(), w1, w2, buf), "is on cpu")
    expect("y shape", lambda: moe.fp8_fp4_gc_moe(y[:, :256], w1, w2, buf), "contiguous")
    expect("weights not transformed", lambda: moe.fp8_fp4_gc_moe(y, w1q, w2, buf), "not transformed")
    expect("w1/w2 swapped", lambda: moe.fp8_fp4_gc_moe(y, w2, w1, buf), "holds")
    expect("shared weights without shared buffer", lambda: moe.fp8_fp4_gc_moe(
        y, w1, w2, buf, shared_weights=(y, y, y, y)), "shared_experts")
    buf.topk_idx[3, 1] = E + 3
    expect("expert id out of range", lambda: moe.fp8_fp4_gc_moe(y, w1, w2, buf), "outside [-1, 16)")
    buf.topk_idx[3, 1] = 0
    expect("missing role2 kernel", lambda: moe.fp8_fp4_gc_moe(y, w1, w2, buf), "cannot run this layer")
    ok = all(r["ok"] for r in results)
    rec = {"kind": "api_host_checks", "rank": rank, "P": world, "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ",
           time.gmtime()), "partition": [buf.partition.dispatch_sms, buf.partition.compute_sms],
           "bm_candidates": list(buf.bm_candidates), "checks": results, "ok": ok}
    print("EVIDENCE", json.dumps(rec), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")
    print("RESULT", "PASS" if ok else "FAIL", f"rank={rank}", flush=True)
    if world > 1:
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
