"""GPU harness (issue 6 item 5): the full layer (role1 -> role2 [+ role4] -> role3) under torch.cuda.graph,
replayed N times with changing inputs and no host reset, then a peer that never arrives.

``torchrun --nproc-per-node 2 gpu_layer_robustness.py PRESET SHARED REPLAYS OUT.json`` (or plain ``python`` for
P = 1; the trap part needs P = 2). Per rank: NSETS input sets (token counts differ per set and per rank, the
largest is captured, smaller ones are padded with -1 routing slots so one graph serves all) are staged into the
buffer by device copies inside the captured graph from a slot index the host bumps, so inputs change on every
replay with no host sync. Every ``CHECK_EVERY`` replays (and the last) the output is compared with the FP32
quantised reference of the set just run (cosine >= 0.999 and processed diff like the suite) and ``check_errors``
runs. Then (P = 2) rank 1 stays away while rank 0 calls the layer with a 2 s timeout: rank 0 must raise
``DeviceTimeoutError`` naming the wait, within the timeout plus slack, instead of hanging.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
NSETS, CHECK_EVERY, T_CAP = 8, 1000, 64


def main(preset: str, shared: int, replays: int, out: str) -> None:
    import torch.distributed as dist

    from gcmoe_runtime import moe
    from gcmoe_runtime.accuracy.cases import build_rank_inputs, suite_cases
    from gcmoe_runtime.accuracy.config import PRESETS, make_layer_weights
    from gcmoe_runtime.numerics.reference import reference_moe_forward
    from gcmoe_runtime.operator.accuracy_impl import GcMoeImplementation
    from gcmoe_runtime.workspace.trap import DeviceTimeoutError

    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    group = None
    if world > 1:
        dist.init_process_group("nccl", device_id=dev)
        group = dist.group.WORLD
    cfg = dataclasses.replace(PRESETS[preset], world=world, shared_experts=int(shared))
    bundle = os.environ.get("GCMOE_OPERATOR_BUNDLE", str(ROOT / f"results/operator/bundles/{preset}-sm90a.gcmoe"))
    buf = moe.get_symm_buffer_for_gc_moe(group, cfg.num_experts, 256, cfg.topk, cfg.hidden, cfg.intermediate,
                                         bundle=bundle, shared_experts=bool(shared), timeout_ns=int(5e9))
    layer = make_layer_weights(cfg, device=dev)
    impl = GcMoeImplementation(buf, layer, activation_alpha=cfg.alpha, activation_clamp=cfg.clamp)
    # input sets: the suite's random cases (T differs per case and rank), padded to T_CAP rows
    specs = [(i, s) for i, s in enumerate(suite_cases(cfg)) if s.category in ("default", "asymmetric")]
    sets, refs = [], []
    for i, s in specs:
        inp = build_rank_inputs(cfg, layer, s, i, [rank], dev)[0]
        if inp.num_tokens == 0 or inp.num_tokens > T_CAP or len(sets) == NSETS:
            continue
        T = inp.num_tokens
        x = torch.zeros(T_CAP, cfg.hidden, dtype=torch.uint8, device=dev)
        xs = torch.ones(T_CAP, cfg.hidden // 128, device=dev)
        idx = torch.full((T_CAP, cfg.topk), -1, dtype=torch.int32, device=dev)
        w = torch.zeros(T_CAP, cfg.topk, device=dev)
        x[:T], xs[:T] = inp.x_q.view(torch.uint8), inp.x_scale
        idx[:T], w[:T] = inp.topk_idx.to(torch.int32), inp.topk_weights
        sets.append((x, xs, idx, w, T))
        shared_w = layer.shared if shared else None
        refs.append(reference_moe_forward(inp.x_q, inp.x_scale, inp.topk_idx, inp.topk_weights, layer.routed,
                                          shared_w, spec=cfg.swiglu).float())
    if world > 1:  # every rank needs the same number of sets (collective replays)
        n = torch.tensor([len(sets)], device=dev)
        dist.all_reduce(n, op=dist.ReduceOp.MIN)
        sets, refs = sets[:int(n)], refs[:int(n)]
    stack = [torch.stack([s[j] for s in sets]) for j in range(4)]
    slot = torch.zeros((), dtype=torch.long, device=dev)
    y = torch.empty(T_CAP, cfg.hidden, dtype=torch.bfloat16, device=dev)

    def stage_and_call():
        buf.x[:T_CAP].view(torch.uint8).copy_(stack[0].index_select(0, slot.view(1))[0])
        buf.x_sf[:T_CAP].copy_(stack[1].index_select(0, slot.view(1))[0])
        buf.topk_idx[:T_CAP].copy_(stack[2].index_select(0, slot.view(1))[0])
        buf.topk_weights[:T_CAP].copy_(stack[3].index_select(0, slot.view(1))[0])
        impl._call(y)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, capture_error_mode="thread_local"):
        stage_and_call()
    checks, worst_cos, t0 = [], 1.0, time.time()
    for r in range(replays):
        s = r % len(sets)
        slot.fill_(s)
        g.replay()
        if (r + 1) % CHECK_EVERY == 0 or r == replays - 1:
            torch.cuda.synchronize()
            buf.check_errors()
            T = sets[s][4]
            got, ref = y[:T].float(), refs[s]
            cos = float(torch.nn.functional.cosine_similarity(got.flatten(), ref.flatten(), dim=0))
            diff = float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
            worst_cos = min(worst_cos, cos)
            checks.append({"replay": r + 1, "set": s, "tokens": T, "cosine": cos, "max_rel_diff": diff,
                           "finite": bool(torch.isfinite(got).all())})
    torch.cuda.synchronize()
    wall = time.time() - t0
    ok = all(c["cosine"] >= 0.999 and c["finite"] for c in checks)
    doc = {"preset": preset, "shared": shared, "world": world, "rank": rank, "replays": replays, "sets": len(sets),
           "tokens": [s[4] for s in sets], "wall_s": wall, "us_per_replay": 1e6 * wall / max(replays, 1),
           "checks": checks, "worst_cosine": worst_cos, "replays_ok": ok,
           "device": torch.cuda.get_device_name(dev)}
    print(f"rank {rank}: {replays} replays over {len(sets)} input sets in {wall:.2f} s "
          f"({doc['us_per_replay']:.1f} us/replay incl. staging), {len(checks)} checks, worst cosine "
          f"{worst_cos:.6f}: {'PASS' if ok else 'FAIL'}", flush=True)
    if world > 1:
        dist.barrier()
        trap = {"expected": rank == 0}
        if rank == 0:  # rank 1 stays away: rank 0's device waits must trap, not hang
            buf.timeout_ns = int(2e9)
            t1 = time.time()
            try:
                impl._call(y)
                torch.cuda.synchronize()
                buf.check_errors()
                trap["raised"] = None
            except DeviceTimeoutError as e:
                trap["raised"], trap["decoded"] = f"DeviceTimeoutError: {e}", type(e).__name__
            except Exception as e:  # a sticky CUDA error after the trap is also "reported, not hung"
                trap["raised"] = f"{type(e).__name__}: {e}"
                try:
                    buf.check_errors()
                except DeviceTimeoutError as e2:
                    trap["raised"] += f" | trap record: {e2}"
                    trap["decoded"] = type(e2).__name__
            trap["seconds"] = time.time() - t1
            # the host must get the decoded trap record (the wait that timed out), within the timeout + slack
            trap["ok"] = trap.get("decoded") == "DeviceTimeoutError" and trap["seconds"] < 2 + 10
            print(f"rank 0 timeout probe: {trap}", flush=True)
        else:
            time.sleep(6.0)  # keep this rank's workspace mapped while rank 0 waits for it and traps
        doc["timeout_probe"] = trap
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out.replace(".json", f"-rank{rank}.json")).write_text(json.dumps(doc, indent=1))
    print("RESULT", "PASS" if ok and doc.get("timeout_probe", {}).get("ok", True) else "FAIL", f"rank={rank}",
          flush=True)
    os._exit(0)  # rank 0's context is poisoned by the trap; skip teardown (NCCL / symmetric memory)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
