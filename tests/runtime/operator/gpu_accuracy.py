"""GPU harness (issue 6 step 4, for when the bundle holds the ring-consuming role2): the 47-case accuracy
suite through the public API (eager + torch.cuda.graph), per-rank mode.

``python gpu_accuracy.py PRESET SHARED OUTDIR`` (P = 1) or ``torchrun --nproc-per-node 2 gpu_accuracy.py ...``;
PRESET in gcmoe_runtime.accuracy.config.PRESETS (test-tiny, glm-5.2, deepseek-v4.1-flash), or PRESET@E<n> (its shapes
at n experts, ``config.resolve_preset``: glm-5.2@E32 is one rank's share of P = 8), SHARED 0|1; the bundle is
``results/operator/bundles/<manifest>-sm90a.gcmoe`` unless GCMOE_OPERATOR_BUNDLE is set (required for @E<n>). Writes
OUTDIR/<preset>-s<SHARED>-P<P>-rank<r>.json (merge with gcmoe_runtime.accuracy.report.merge_results).
Bundles with the registered role2: results/operator/bundles/*.gcmoe (set GCMOE_OPERATOR_BUNDLE; see
results/operator/NEXT.md). GCMOE_TIMEOUT_S bounds every device wait (default here 20 s). Weights are generated on
the GPU. Each document names the bundle's top hash (which cubins ran); ``python -m gcmoe_runtime.accuracy.coverage
OUTDIR`` tables them. GPU results: results/operator/2026-11-30-h200-x2-session3/.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
MANIFEST_OF = {"test-tiny": "test-tiny", "glm-5.2": "glm-5.2", "deepseek-v4.1-flash": "deepseek-v4.1-flash"}
BUILT_CAPACITY = 256  # targets[].capacity of every shipped manifest


def main(preset: str, shared: int, outdir: str) -> None:
    from gcmoe_runtime import moe
    from gcmoe_runtime.accuracy.config import make_layer_weights, resolve_preset
    from gcmoe_runtime.accuracy.report import result_document, write_json
    from gcmoe_runtime.accuracy.suite import run_suite
    from gcmoe_runtime.operator.accuracy_impl import GcMoeImplementation

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.cuda.set_device(rank)
    group = None
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
        group = dist.group.WORLD
    cfg = dataclasses.replace(resolve_preset(preset), world=world, shared_experts=int(shared))
    bundle = os.environ.get("GCMOE_OPERATOR_BUNDLE")
    if bundle is None:
        if preset not in MANIFEST_OF:
            raise SystemExit(f"preset {preset}: no shipped bundle; set GCMOE_OPERATOR_BUNDLE")
        bundle = str(ROOT / "results/operator/bundles" / f"{MANIFEST_OF[preset]}-sm90a.gcmoe")
    # GCMOE_FORCE_TILE=BM:THREADS[:CTAS[:SPLIT]] runs that role2 variant at every token count (each compiled variant
    # in turn)
    forced = os.environ.get("GCMOE_FORCE_TILE")
    tile = tuple(int(v) for v in forced.split(":")) if forced else None
    buf = moe.get_symm_buffer_for_gc_moe(group, cfg.num_experts, BUILT_CAPACITY, cfg.topk, cfg.hidden,
                                         cfg.intermediate, bundle=bundle, shared_experts=bool(shared), tile=tile,
                                         timeout_ns=int(float(os.environ.get("GCMOE_TIMEOUT_S", "20")) * 1e9))
    layer = make_layer_weights(cfg, device=f"cuda:{rank}")  # seconds here; a production layer takes a CPU minutes
    eager = GcMoeImplementation(buf, layer, activation_alpha=cfg.alpha, activation_clamp=cfg.clamp)
    graph = GcMoeImplementation(buf, layer, graph=True, activation_alpha=cfg.alpha, activation_clamp=cfg.clamp)
    res = run_suite(cfg, eager, impl_name="gc-moe", layer=layer, ranks=[rank], device=f"cuda:{rank}",
                    graph_impl=graph, repeat=True, log=print)
    doc = result_document(res, {"bundle": Path(bundle).name, "bundle_top_hash": buf.loader.bundle.top_hash,
                                "partition": [buf.partition.dispatch_sms,
                                                                            buf.partition.compute_sms],
                                "forced_tile": list(tile) if tile else None})
    suffix = (f"-bm{tile[0]}t{tile[1]}" + (f"c{tile[2]}" if len(tile) > 2 else "")
              + (f"s{tile[3]}" if len(tile) > 3 else "")) if tile else ""
    write_json(doc, os.path.join(outdir, f"{preset}-s{shared}-P{world}{suffix}-rank{rank}.json"))
    s = doc["summary"]
    print("RESULT", "PASS" if s["rank_cases_passed"] == s["rank_cases"] else "FAIL", f"rank={rank}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
