"""Baseline (e) of issue 7: torch's in-box grouped GEMMs over the same routed work — the naive path.

Two implementations, same structure, captured in one CUDA graph per point by the harness:

* `torch-fp8`  — `torch._scaled_grouped_mm`, FP8 E4M3 rowwise: activations E4M3 with one FP32 scale per
  token row (given pre-quantised, like the caller's quantised input of our operator), weights E4M3 with
  one FP32 scale per output row per expert; BF16 GEMM outputs; SwiGLU in FP32 then a rowwise E4M3
  requant of the intermediate; FP32 combine, BF16 output. Shared expert (when on): `torch._scaled_mm`
  with the same rowwise scaling.
* `torch-bf16` — `torch._grouped_mm`, BF16 activations and weights, BF16 GEMM outputs, FP32 combine.

Weights for both come from one seeded BF16 draw (the FP8 ones are its rowwise quantisation), so the two
outputs are directly comparable. Note the weights are FP8 (1 B/element) or BF16 (2 B), against our
MXFP4 (0.53 B): the baselines stream 1.9x / 3.8x the bytes of the floor.

Per layer call (one rank): the shared dispatch/combine of `routed.routed_step` (gather at P=1, NCCL
all-to-all of rows + FP32 row scales at P>1) around GEMM1, SwiGLU(+requant), GEMM2.

SwiGLU: gate clamped to <= clamp, up clamped to [-clamp, clamp], act = gate*sigmoid(alpha*gate)*up with
alpha = 1.0, clamp = 10.0 (paper §6.1). Elementwise cost is what matters for timing here; the project's
FP32 reference layer (elsewhere) is the numerics authority.
"""
from __future__ import annotations

import torch

from ..impl import Prepared, RankContext, register
from ..routing import Layout, PointInputs
from ..shapes import ModelShape
from .common import ModelHolder, routed_share
from .routed import FP8, routed_step, take_rows  # noqa: F401  (take_rows: re-exported for importers)

FP8_MAX = 448.0
SWIGLU_ALPHA = 1.0
SWIGLU_CLAMP = 10.0


def swiglu(h: torch.Tensor, inter: int) -> torch.Tensor:
    """[M, 2I] (gate | up) -> [M, I] in FP32."""
    gate = h[:, :inter].float().clamp(max=SWIGLU_CLAMP)
    up = h[:, inter:].float().clamp(-SWIGLU_CLAMP, SWIGLU_CLAMP)
    return gate * torch.sigmoid(SWIGLU_ALPHA * gate) * up


def quant_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rowwise E4M3: q = x / s with s = amax(row)/448 (FP32, [rows])."""
    s = x.abs().amax(dim=-1).float().clamp_min(1e-12) / FP8_MAX
    return (x.float() / s.unsqueeze(-1)).to(FP8), s


def _weights(shape: ModelShape, n: int, inter: int, seed: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded BF16 W1 [n, 2I, H] and W2 [n, H, I] (output-major rows, K contiguous)."""
    g = torch.Generator(device=device).manual_seed(seed)
    h = shape.hidden
    w1 = torch.randn(n, 2 * inter, h, generator=g, device=device, dtype=torch.bfloat16) * (h ** -0.5)
    w2 = torch.randn(n, h, inter, generator=g, device=device, dtype=torch.bfloat16) * (inter ** -0.5)
    return w1, w2


def _quant_weights(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[G, N, K] BF16 -> E4M3 [G, N, K] and FP32 [G, N] scales, expert by expert (bounded temporaries)."""
    q = torch.empty_like(w, dtype=FP8)
    s = torch.empty(w.shape[:2], dtype=torch.float32, device=w.device)
    for e in range(w.shape[0]):
        q[e], s[e] = quant_rows(w[e])
    return q, s


class TorchGrouped(ModelHolder):
    """One torch grouped-GEMM baseline; `fp8=True` for `_scaled_grouped_mm`, else `_grouped_mm` BF16."""

    def __init__(self, fp8: bool):
        self.fp8 = fp8
        self.name = "torch-fp8" if fp8 else "torch-bf16"
        self.precision = (
            "E4M3 act (FP32 scale/token row) x E4M3 weights (FP32 scale/output row), BF16 GEMM out, FP32 combine"
            if fp8 else "BF16 act x BF16 weights, BF16 GEMM out, FP32 combine")
        self._m: dict | None = None

    def describe(self) -> dict:
        return {"name": self.name, "precision": self.precision,
                "ops": "torch._scaled_grouped_mm" if self.fp8 else "torch._grouped_mm",
                "dispatch": "NCCL all_to_all_single (static splits)" if self._m and self._m["world"] > 1
                else "none (one rank's share; rows resident)"}

    def unsupported(self, shape: ModelShape, layout: Layout, shared: bool) -> str | None:
        if not hasattr(torch, "_grouped_mm") or (self.fp8 and not hasattr(torch, "_scaled_grouped_mm")):
            return f"torch {torch.__version__} lacks the grouped GEMM ops"
        if self.fp8:
            if not torch.cuda.is_available():
                return "FP8 grouped GEMM needs a CUDA device"
            if torch.cuda.get_device_capability() < (9, 0):
                return "FP8 grouped GEMM needs sm_90 or newer"
        if shape.hidden % 16 or shape.intermediate % 16:
            return "grouped GEMM needs H and I multiples of 16"
        return None

    # -- once per model -------------------------------------------------------------------------
    def load_model(self, shape: ModelShape, layout: Layout, ctx: RankContext, shared: bool) -> None:
        self.unload_model()
        dev = ctx.device
        g = shape.experts // layout.ep
        # the same seed for both baselines and every rank's share (rank offsets the draw)
        w1, w2 = routed_share(shape, layout, ctx)
        m: dict = {"shape": shape, "layout": layout, "ctx": ctx, "world": layout.world, "shared": shared,
                   "device": dev, "group": ctx.group}
        if self.fp8:
            q1, s1 = _quant_weights(w1)
            q2, s2 = _quant_weights(w2)
            del w1, w2
            # column-major B: [G, K, N] views of the [G, N, K] K-contiguous tensors
            m.update(b1=q1.transpose(1, 2), sb1=s1, b2=q2.transpose(1, 2), sb2=s2)
        else:
            m.update(b1=w1.transpose(1, 2), b2=w2.transpose(1, 2))
        if shared and shape.shared_experts:
            ws1, ws2 = _weights(shape, 1, shape.shared_experts * shape.shared_inter, 5000 + ctx.seed + ctx.rank, dev)
            ws1, ws2 = ws1[0], ws2[0]
            if self.fp8:
                q1, s1 = quant_rows(ws1)
                q2, s2 = quant_rows(ws2)
                m.update(sw1=q1.t(), ssw1=s1.unsqueeze(0), sw2=q2.t(), ssw2=s2.unsqueeze(0))
            else:
                m.update(sw1=ws1.t(), sw2=ws2.t())
        self._m = m

    # -- per point ------------------------------------------------------------------------------
    def prepare(self, point: PointInputs) -> Prepared:
        m = self.model()
        shape, dev, p = m["shape"], m["device"], point.plan
        H, I = shape.hidden, shape.intermediate
        x = point.activations(dev)
        if self.fp8:
            xq, xs = quant_rows(x)
        else:
            xq, xs = x, None
        offs = torch.cumsum(p.group_sizes, 0).to(torch.int32).to(dev)
        own_lo = point.own_token_lo - p.resident_token_lo
        T = point.tokens_per_rank
        use_shared = m["shared"] and shape.shared_experts > 0

        def experts(a: torch.Tensor, sa: torch.Tensor | None) -> torch.Tensor:
            """[M, H] rows in expert order -> [M, H] BF16 partials (unweighted)."""
            if self.fp8:
                h = torch._scaled_grouped_mm(a, m["b1"], sa, m["sb1"], offs=offs, out_dtype=torch.bfloat16)
                q, s = quant_rows(swiglu(h, I))
                return torch._scaled_grouped_mm(q, m["b2"], s, m["sb2"], offs=offs, out_dtype=torch.bfloat16)
            h = torch._grouped_mm(a, m["b1"], offs=offs)
            return torch._grouped_mm(swiglu(h, I).to(torch.bfloat16), m["b2"], offs=offs)

        def shared_expert(out_acc: torch.Tensor) -> None:
            a = xq[own_lo:own_lo + T]
            Is = shape.shared_experts * shape.shared_inter
            if self.fp8:
                h = torch._scaled_mm(a, m["sw1"], scale_a=xs[own_lo:own_lo + T].unsqueeze(1), scale_b=m["ssw1"],
                                     out_dtype=torch.bfloat16)
                q, s = quant_rows(swiglu(h, Is))
                y = torch._scaled_mm(q, m["sw2"], scale_a=s.unsqueeze(1), scale_b=m["ssw2"], out_dtype=torch.bfloat16)
            else:
                y = swiglu(a @ m["sw1"], Is).to(torch.bfloat16) @ m["sw2"]
            out_acc[own_lo:own_lo + T] += y.float()

        step, out = routed_step(point, dev, m["world"], m["group"], xq, xs, experts,
                                shared_expert if use_shared else None)
        M = p.assignments
        return Prepared(step=step, output=out, info={"assignments": M, "offs_groups": int(offs.numel())})


register("torch-fp8", lambda: TorchGrouped(fp8=True))
register("torch-bf16", lambda: TorchGrouped(fp8=False))
