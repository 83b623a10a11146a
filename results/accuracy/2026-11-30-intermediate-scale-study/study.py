"""CPU study (no GPU): what the W2 input's scale granularity costs in accuracy.

The shipped numerics contract requantises the SwiGLU intermediate to E4M3 with one UE8M0 scale per 32 values along I
(`gcmoe_runtime.numerics.reference`, step 4). On Hopper that forces role2's W2 GEMM to start a fresh partial and an
FMA set per K32 (docs/PERFORMANCE.md, session 5: W2 is the weakest stream at BM >= 16). The alternatives measured here
would let W2 chain its four K32 MMAs per K128 as W1 does: an FP32 scale per 128 (amax / 448, the Hopper activation
recipe of the layer input) or a UE8M0 scale per 128.

For each suite case and rank (the 47-case suite of `gcmoe_runtime.accuracy`, same inputs and weights), the reference
layer is evaluated with each intermediate recipe and compared with the BF16 ideal reference on the dequantised
checkpoint weights (the suite's thresholded "cosine vs BF16") and with the shipped contract's output.

    python results/accuracy/2026-11-30-intermediate-scale-study/study.py test-tiny
    python results/accuracy/2026-11-30-intermediate-scale-study/study.py glm-5.2 --cpu-experts 16
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from gcmoe_runtime.accuracy.cases import build_rank_inputs, suite_cases  # noqa: E402
from gcmoe_runtime.accuracy.config import PRESETS, cpu_variant, make_layer_weights  # noqa: E402
from gcmoe_runtime.accuracy.metrics import cosine, relative_l2  # noqa: E402
from gcmoe_runtime.accuracy.suite import CachedExperts, batched_references  # noqa: E402
from gcmoe_runtime.numerics import reference as ref  # noqa: E402
from gcmoe_runtime.numerics.quant import (dequantize_e4m3_fp32_k128, dequantize_e4m3_ue8m0,  # noqa: E402
                                          quantize_e4m3_fp32_k128, quantize_e4m3_ue8m0)


def _requant(recipe: str, a: torch.Tensor) -> torch.Tensor:
    """The intermediate as W2 sees it (dequantised to FP32) under one recipe."""
    if recipe == "ue8m0_k32":  # shipped until session 8 (since: ue8m0_k128 on Hopper)
        q, c = quantize_e4m3_ue8m0(a, 32, name="a")
        return dequantize_e4m3_ue8m0(q, c, 32)
    if recipe == "ue8m0_k128":
        q, c = quantize_e4m3_ue8m0(a, 128, name="a")
        return dequantize_e4m3_ue8m0(q, c, 128)
    if recipe == "fp32_k128":
        q, s = quantize_e4m3_fp32_k128(a, name="a")
        return dequantize_e4m3_fp32_k128(q, s)
    raise ValueError(recipe)


RECIPES = ("ue8m0_k32", "ue8m0_k128", "fp32_k128")


@contextmanager
def intermediate_recipe(recipe: str):
    """Run the reference with ``recipe`` in place of step 4 (same steps 1-3 and 5-6)."""
    orig = ref._quantised_expert

    def expert(x, w1, w2, g, spec, group=None):  # the reference's own group is replaced by ``recipe``
        h = ref._bf16(x @ w1.t())
        a = ref.swiglu(h, spec) * g[:, None]
        return (_requant(recipe, a) @ w2.t()).to(torch.bfloat16)

    ref._quantised_expert = expert
    try:
        yield
    finally:
        ref._quantised_expert = orig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("--cpu-experts", type=int, default=0)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    cfg = PRESETS[a.config]
    if a.cpu_experts:
        cfg = cpu_variant(cfg, experts=a.cpu_experts, world=1, capacity=32)
    torch.set_num_threads(2)
    t0 = time.time()
    layer = make_layer_weights(cfg)
    experts = CachedExperts(layer.routed)
    specs = list(enumerate(suite_cases(cfg)))
    flat = [inp for i, s in specs for inp in build_rank_inputs(cfg, layer, s, i, list(range(cfg.world)), "cpu")]
    refs = batched_references(layer, flat, experts)
    outs = {}
    for recipe in RECIPES:
        with intermediate_recipe(recipe):
            cat = lambda name: torch.cat([getattr(i, name) for i in flat])  # noqa: E731
            y = ref.reference_moe_forward(cat("x_q"), cat("x_scale"), cat("topk_idx"), cat("topk_weights"), experts,
                                          layer.shared, spec=cfg.swiglu, act_recipe=cfg.act_recipe)
        outs[recipe] = list(torch.split(y, [i.num_tokens for i in flat]))
    rows = []
    for n, inp in enumerate(flat):
        if inp.num_tokens == 0:
            continue
        r = {"case": inp.case, "rank": inp.rank, "tokens": inp.num_tokens}
        for recipe in RECIPES:
            y = outs[recipe][n]
            r[f"{recipe}_cos_bf16"] = cosine(y, refs["bf16"][n])
            r[f"{recipe}_rel_bf16"] = relative_l2(y, refs["bf16"][n])
            r[f"{recipe}_cos_shipped"] = cosine(y, refs["quant"][n])
        rows.append(r)
    summary = {"config": cfg.name, "rank_cases": len(rows), "seconds": round(time.time() - t0, 1)}
    for recipe in RECIPES:
        for metric in ("cos_bf16", "rel_bf16", "cos_shipped"):
            vals = [r[f"{recipe}_{metric}"] for r in rows]
            summary[f"{recipe}_{metric}_worst"] = min(vals) if metric.startswith("cos") else max(vals)
            summary[f"{recipe}_{metric}_mean"] = sum(vals) / len(vals)
    print(json.dumps(summary, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
