"""CLI: ``python -m gcmoe_runtime.accuracy`` — run the 47-case suite, print the Table-11-shaped table, write JSON.

Examples::

    python -m gcmoe_runtime.accuracy --config test-tiny --out results/accuracy/test-tiny.json
    python -m gcmoe_runtime.accuracy --config glm-5.2 --cpu-experts 32 --world 1 --capacity 32
    torchrun --nproc-per-node 2 -m gcmoe_runtime.accuracy --config test-tiny --per-rank \\
        --impl mypkg.harness:make_impl --device cuda --out results/accuracy/run.json
    python -m gcmoe_runtime.accuracy --merge run.rank0.json run.rank1.json --out run.json

``--impl`` is a built-in name (reference, bf16-reference, bf16-reference-original) or ``module:factory`` where
``factory(layer, rank=..., world=..., device=...)`` returns the implementation callable (see suite.py); a factory
may also expose ``graph_impl`` on the returned object for the graph-vs-eager metric.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

import torch

from .config import PRESETS, cpu_variant, make_layer_weights
from .report import format_table, merge_results, result_document, write_json
from .suite import BUILTIN_IMPLEMENTATIONS, run_suite


def _config(args):
    if args.config not in PRESETS:
        raise SystemExit(f"--config {args.config!r}: choose one of {sorted(PRESETS)}")
    cfg = PRESETS[args.config]
    if args.cpu_experts or args.world or args.capacity:
        import dataclasses
        if args.cpu_experts:
            cfg = cpu_variant(cfg, experts=args.cpu_experts, world=args.world or 1, capacity=args.capacity)
        else:
            cfg = dataclasses.replace(cfg, world=args.world or cfg.world, capacity=args.capacity or cfg.capacity)
    if args.act_recipe:
        import dataclasses
        cfg = dataclasses.replace(cfg, act_recipe=args.act_recipe)
    return cfg


def _impl(args, layer, rank, world, device):
    if args.impl in BUILTIN_IMPLEMENTATIONS:
        return BUILTIN_IMPLEMENTATIONS[args.impl](layer)
    if ":" not in args.impl:
        raise SystemExit(f"--impl {args.impl!r}: a built-in ({sorted(BUILTIN_IMPLEMENTATIONS)}) or module:factory")
    mod, attr = args.impl.split(":", 1)
    return getattr(importlib.import_module(mod), attr)(layer, rank=rank, world=world, device=device)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gcmoe_runtime.accuracy", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="test-tiny", help=f"preset: {sorted(PRESETS)}")
    ap.add_argument("--cpu-experts", type=int, help="global expert count for a reduced production run")
    ap.add_argument("--world", type=int, help="P, ranks modelled (default: the preset's)")
    ap.add_argument("--capacity", type=int, help="tokens per rank capacity")
    ap.add_argument("--act-recipe", choices=("fp32_k128", "ue8m0_k32"))
    ap.add_argument("--impl", default="reference")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--per-rank", action="store_true", help="torchrun mode: this process runs rank $RANK only")
    ap.add_argument("--no-repeat", action="store_true", help="skip the repeat call")
    ap.add_argument("--cases", nargs="*", help="run only these case names")
    ap.add_argument("--out", help="JSON path (per-rank mode appends .rank<r>)")
    ap.add_argument("--table", help="also write the table to this text file")
    ap.add_argument("--merge", nargs="*", help="merge per-rank JSON files instead of running")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    if args.merge:
        docs = [json.load(open(p)) for p in args.merge]
        doc = merge_results(docs)
    else:
        cfg = _config(args)
        rank = world = None
        ranks = None
        device = args.device
        if args.per_rank:
            rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
            if world != cfg.world:
                raise SystemExit(f"--per-rank: WORLD_SIZE={world} but config models P={cfg.world} (use --world)")
            ranks = [rank]
            if device == "cuda":
                device = f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}"
                torch.cuda.set_device(device)
        layer = make_layer_weights(cfg)
        if device != "cpu":
            layer = layer.to(device)
        impl = _impl(args, layer, rank, world, device)
        log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
        res = run_suite(cfg, impl, layer=layer, ranks=ranks, device=device, repeat=not args.no_repeat,
                        graph_impl=getattr(impl, "graph_impl", None), case_names=args.cases, log=log)
        doc = result_document(res)
        if args.per_rank and args.out:
            args.out = f"{args.out}.rank{rank}"
    table = format_table(doc)
    print(table)
    if args.out:
        write_json(doc, args.out)
    if args.table:
        tmp = args.table + ".tmp"
        with open(tmp, "w") as f:
            f.write(table + "\n")
        os.replace(tmp, args.table)
    return 0 if doc["summary"]["rank_cases_passed"] == doc["summary"]["rank_cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
