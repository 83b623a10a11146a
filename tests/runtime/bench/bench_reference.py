"""FP32 per-assignment reference for the baseline tests (independent of the grouped-GEMM code path)."""
import torch

from gcmoe_runtime.bench.baselines.torch_grouped import _weights, swiglu


def reference(shape, points, seed_base=1000, shared_seed=5000, shared=False, device="cpu"):
    """Full-layer output for the tokens of `points` (one PointInputs per real rank, or one emulated share)."""
    lay = points[0].layout
    e_loc = shape.experts // lay.ep
    n_owner = lay.world if not lay.emulated else 1
    W = [_weights(shape, e_loc, shape.intermediate, seed_base + r, torch.device(device)) for r in range(n_owner)]
    pt0 = points[0]
    x = torch.cat([p.activations(device).float() for p in points]) if not lay.emulated \
        else pt0.activations(device).float()
    ref = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(shape.top_k):
            e = int(pt0.topk_ids[t, j])
            r, le = divmod(e, e_loc)
            if r >= n_owner:
                continue
            a = swiglu((W[r][0][le].float() @ x[t])[None], shape.intermediate)[0]
            ref[t] += pt0.topk_weights[t, j] * (W[r][1][le].float() @ a)
    if shared:
        T = pt0.tokens_per_rank
        for r in range(n_owner):
            s1, s2 = _weights(shape, 1, shape.shared_experts * shape.shared_inter, shared_seed + r, torch.device(device))
            for t in range(r * T, (r + 1) * T):
                ref[t] += s2[0].float() @ swiglu((s1[0].float() @ x[t])[None], s1.shape[1] // 2)[0]
    return ref
