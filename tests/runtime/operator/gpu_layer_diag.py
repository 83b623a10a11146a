"""GPU diagnostic of one layer call, stage by stage (for when the layer's output disagrees with the reference).

``python gpu_layer_diag.py PRESET CASE [CASE ...]`` (P = 1; PRESET as for gpu_accuracy.py, e.g. glm-5.2@E32; the
bundle is GCMOE_OPERATOR_BUNDLE or the preset's committed one; GCMOE_DIAG_SERIAL=1 runs the roles one after the other
in the primary context, the benchmark's serial baseline, so that compute-sanitizer can run the call). After one eager call it reads the workspace, which keeps the ring data of the replay (role3 resets
only the signals), and checks against the ring contract (gcmoe_runtime.operator.ring) and the numerics reference:

1. role1 — every ring row: ``ring_x``/``ring_sf`` equal the source token's x/x_sf (a ``k_interleave`` bundle: in the
   order its role1 writes, ``l2_x`` read back in the plain order), ``ring_meta`` weight/slot match
   the routing, the block's expert matches ``topk_idx``; every (token, slot) lands exactly once;
2. role2 W1 — ``l2_x``/``l2_sf`` (dequantised) vs the reference intermediate of that row (steps 2-4), in natural I
   order and sorted per row (a permutation shows as "sorted ok, natural bad");
3. role2 W2 — ``combine[slot, token]`` vs (a) the reference partial and (b) the kernel's own intermediate @ W2
   (separates a W2 fault from a W1 one);
4. role3 — y vs the FP32 slot-order sum of the kernel's own combine lanes.
Prints one line per check; nothing here asserts (it is a probe, the suite is the test).
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def main(preset: str, cases: list[str]) -> None:
    from gcmoe_runtime import moe
    from gcmoe_runtime.accuracy.cases import build_rank_inputs, suite_cases
    from gcmoe_runtime.accuracy.config import make_layer_weights, resolve_preset
    from gcmoe_runtime.numerics.quant import dequantize_e4m3_ue8m0, quantize_e4m3_ue8m0
    from gcmoe_runtime.numerics.sm90_layout import deinterleave_k128, interleave_k128
    from gcmoe_runtime.numerics.reference import (SM90_INTERMEDIATE_SCALE_GROUP as G, _bf16, dequantize_activations,
                                                  reference_moe_forward, swiglu)
    from gcmoe_runtime.operator.accuracy_impl import GcMoeImplementation

    torch.cuda.set_device(0)
    cfg = dataclasses.replace(resolve_preset(preset), world=1, shared_experts=0)
    bundle = os.environ.get("GCMOE_OPERATOR_BUNDLE", str(ROOT / f"results/operator/bundles/{preset}-sm90a.gcmoe"))
    serial = os.environ.get("GCMOE_DIAG_SERIAL") == "1"
    buf = moe.get_symm_buffer_for_gc_moe(None, cfg.num_experts, 256, cfg.topk, cfg.hidden, cfg.intermediate,
                                         bundle=bundle, timeout_ns=int(10e9), green_contexts=not serial,
                                         overlap=not serial)
    layer = make_layer_weights(cfg, device="cuda:0")  # production shapes: seconds on the GPU, minutes on the CPU
    impl = GcMoeImplementation(buf, layer, activation_alpha=cfg.alpha, activation_clamp=cfg.clamp)
    ws = buf.ws
    specs = {s.name: (i, s) for i, s in enumerate(suite_cases(cfg))}
    I, H, k = cfg.intermediate, cfg.hidden, cfg.topk
    for name in cases:
        idx, spec = specs[name]
        inp = build_rank_inputs(cfg, layer, spec, idx, ranks=[0])[0]
        T = inp.num_tokens
        for r in ("ring_x", "l2_x", "l2_sf", "combine"):  # poison what the kernels must write
            ws.view(r).fill_(0x7F if ws.view(r).dtype == torch.uint8 else float("nan"))
        buf.kernel_cache.clear()  # so that it holds this call's kernels alone afterwards
        y = impl(inp).float()
        yref, parts = reference_moe_forward(inp.x_q, inp.x_scale, inp.topk_idx, inp.topk_weights, layer.routed,
                                            spec=cfg.swiglu, return_partials=True)
        print(f"== {name}: T={T} y rel_l2={rel(y, yref.float()):.4f}", flush=True)
        if T == 0:
            continue
        xq = inp.x_q.view(torch.uint8)
        # a k_interleave bundle's rows (numerics.sm90_layout): l2_x's always in the interleaved K order, ring_x's
        # where this call's role1 wrote them so (its k_interleave, the large-BM builds; session 51)
        (kernels,) = buf.kernel_cache.values()
        if int(kernels["role1"].record.variant.get("k_interleave", 0)):
            xq = interleave_k128(xq)
        xf = dequantize_activations(inp.x_q, inp.x_scale, "fp32_k128")
        rb_info = ws.view("ring_block").cpu()
        ring_x, ring_sf = ws.view("ring_x").cpu(), ws.view("ring_sf").cpu()
        meta, l2x, l2sf = ws.view("ring_meta").cpu(), ws.view("l2_x").cpu(), ws.view("l2_sf").cpu()
        if buf.k_interleave:
            l2x = deinterleave_k128(l2x)
        comb = ws.view("combine").cpu()
        seen, bad1, w1n, w1s, w2a, w2b = {}, [], [], [], [], []
        n_blocks = 0
        for rb in range(rb_info.shape[0]):
            e, valid, q, gen = rb_info[rb].tolist()
            if valid <= 0 or valid > buf.ws.layout.bm_max or gen != 0 or q != rb:
                continue
            n_blocks += 1
            w1, w2 = layer.routed.expert_fp32(e)
            for i in range(valid):
                wbits, srank, tok, slot = meta[rb, i].tolist()
                wgt = torch.tensor([wbits], dtype=torch.int32).view(torch.float32).item()
                if not (0 <= tok < T and 0 <= slot < k):
                    bad1.append((rb, i, "meta", tok, slot))
                    continue
                seen[(tok, slot)] = seen.get((tok, slot), 0) + 1
                if int(inp.topk_idx[tok, slot]) != e:
                    bad1.append((rb, i, "expert", e, int(inp.topk_idx[tok, slot])))
                if not torch.equal(ring_x[rb, i], xq[tok]):
                    bad1.append((rb, i, "x", int((ring_x[rb, i] != xq[tok]).sum())))
                if not torch.equal(ring_sf[rb, :, i], inp.x_scale[tok].float()):
                    bad1.append((rb, i, "sf"))
                if wgt != float(inp.topk_weights[tok, slot]):
                    bad1.append((rb, i, "w", wgt, float(inp.topk_weights[tok, slot])))
                # W1 reference for this row (steps 2-4)
                h = _bf16(xf[tok:tok + 1] @ w1.t())
                a = swiglu(h, cfg.swiglu) * float(inp.topk_weights[tok, slot])
                qa, ca = quantize_e4m3_ue8m0(a, G, name="a")
                aref = dequantize_e4m3_ue8m0(qa, ca, G)[0]
                akern = dequantize_e4m3_ue8m0(l2x[rb, i:i + 1].view(torch.float8_e4m3fn),
                                              l2sf[rb, i:i + 1], G)[0]
                w1n.append(rel(akern, aref))
                w1s.append(rel(akern.sort().values, aref.sort().values))
                w2a.append(rel(comb[slot, tok], parts[tok, slot]))
                w2b.append(rel(comb[slot, tok], (akern[None] @ w2.t()).to(torch.bfloat16)[0]))
        missing = [(t, s) for t in range(T) for s in range(k) if int(inp.topk_idx[t, s]) >= 0 and (t, s) not in seen]
        dup = [ts for ts, c in seen.items() if c > 1]
        print(f"  role1: {n_blocks} blocks, rows={sum(seen.values())}, missing={len(missing)} dup={len(dup)} "
              f"bad={len(bad1)} {bad1[:6]}")
        if w1n:
            f = lambda v: f"median {sorted(v)[len(v) // 2]:.4f} max {max(v):.4f}"  # noqa: E731
            print(f"  W1 intermediate vs ref: natural {f(w1n)} | sorted {f(w1s)}")
            print(f"  W2 partial vs ref partial: {f(w2a)} | vs own-intermediate @ W2: {f(w2b)}")
        own = torch.zeros(T, H)
        for s in range(k):
            own += comb[s, :T].float()
        print(f"  role3: y vs sum of own combine lanes rel={rel(y, own.to(torch.bfloat16).float()):.4f}", flush=True)
        if w1n and max(w1n) > 0.05:
            rb0 = next(rb for rb in range(rb_info.shape[0]) if rb_info[rb, 1] > 0)
            e, valid, q, gen = rb_info[rb0].tolist()
            _, _, tok, slot = meta[rb0, 0].tolist()
            w1, _ = layer.routed.expert_fp32(e)
            h = _bf16(xf[tok:tok + 1] @ w1.t())
            a = swiglu(h, cfg.swiglu) * float(inp.topk_weights[tok, slot])
            akern = dequantize_e4m3_ue8m0(l2x[rb0, :1].view(torch.float8_e4m3fn), l2sf[rb0, :1], G)[0]
            print("  first row, ref a[:16]:", [round(v, 3) for v in a[0, :16].tolist()])
            print("  first row, kern a[:16]:", [round(v, 3) for v in akern[:16].tolist()])
            print("  ref h[:8] gate / h[I:I+8] up:", [round(v, 3) for v in h[0, :8].tolist()],
                  [round(v, 3) for v in h[0, I:I + 8].tolist()])
            print("  l2_sf codes kern / ref:", l2sf[rb0, 0, :8].tolist(),
                  quantize_e4m3_ue8m0(a, G, name="a")[1][0, :8].tolist())
    print("DIAG DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
