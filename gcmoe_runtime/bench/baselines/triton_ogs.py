"""Baseline `triton-ogs-bf16-mxfp4` (issue 7 item 2(c)): OpenAI's `triton_kernels` `matmul_ogs` (BF16
activations x MXFP4 weights, the MoE GEMM behind gpt-oss in vLLM and SGLang) on the same routed work,
weights and inputs as the other baselines.

This module owns only the triton_kernels side: our MXFP4 weights wrapped in its Hopper layouts and the two
ragged (grouped) GEMMs with the SwiGLU between them. Dispatch/combine is `routed.routed_step` (gather at
P=1, NCCL all-to-all at P>1, FP32 routing-weighted combine), so rows reach `matmul_ogs` already in expert
order and its own gather/scatter (`GatherIndx`/`ScatterIndx`, `gammas`) is not used: the data movement is
the one every baseline shares. Weights: the torch baselines' seeded BF16 draw quantised to MXFP4 exactly as
for gc-moe (`impl_gcmoe._quant_routed`); activations BF16 (matmul_ogs's BF16 x MXFP4 mode).

Source: triton_kernels is not on PyPI (the PyPI `triton-kernels` is unrelated); `ci/prepare_triton_kernels.sh`
exports `python/triton_kernels/triton_kernels` of a Triton tree at tag v3.6.0 (the GPU image runs triton
3.6.0) into `.peers/`, which the GPU call carries and puts on PYTHONPATH. The exact v3.6.0 tree was NOT read
for this module (the Triton snapshot is over the fetch limit); the API below is the 3.6.0 one as its users
call it, cross-checked against stored triton-lang/triton files of the same API generation:

* `triton_kernels/matmul_ogs.py` `matmul_ogs(x, w, bias, routing_data, gather_indx=None, scatter_indx=None,
  precision_config=..., fused_activation=...)`; `RoutingData(gate_scal, expt_hist, n_expts_tot, n_expts_act,
  expt_data)` lives in matmul_ogs.py since 3.6.0 (`triton_kernels.routing` is gone; SGLang PR #24281,
  "Align triton_kernels with Triton 3.6.0"); `PrecisionConfig(weight_scale=..., flex_ctx=FlexCtx(rhs_data=
  InFlexData()))` (vLLM `mxfp4` Triton backend); `FusedActivation(FnSpecs("swiglu", swiglu.swiglu_fn,
  ("alpha", "limit"), reduction_n=2), (alpha, limit))` (reduction_n moved into FnSpecs in 3.6.0).
* `triton_kernels/tensor.py` `make_ragged_tensor_metadata(expert_histogram, n_rows)`, `wrap_torch_tensor`,
  `convert_layout`, `FP4`; `tensor_details/layout.py` `make_default_matmul_mxfp4_w_layout(mx_axis=1)` /
  `make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=8)` (Hopper value/scale swizzles), used as
  vLLM's `_swizzle_mxfp4` does: K-major views [G, K/2, N] of the packed bytes and [G, K/32, N] of the scales.
* Bit convention (`numerics_details/mxfp_details/_downcast_to_mxfp.py` `_compute_quant_and_scale`): E2M1
  codes with the sign in bit 3, element 2i in the low nibble (`evens | (odds << 4)`), scales the biased E8M0
  exponent as uint8 — the same bytes as our `quantize_mxfp4`, so our weights are reinterpreted, not requantised.
* SwiGLU (`swiglu_details/_swiglu.py` `compute_swiglu`): gate/up interleaved (column 2j gate, 2j+1 up),
  gate clamped <= limit, up clamped to [-limit, limit], out = gate*sigmoid(alpha*gate) * (up + 1). We
  interleave W1's rows and add a bias of -1 to the up columns, which gives our SwiGLU (alpha 1, clamp 10)
  except that the up clamp window becomes [-9, 11]. `@unfused` runs our exact SwiGLU in torch instead.

Routed experts only (unsupported with --shared). Never run on a GPU from this repository yet (docs/PEERS.md).
"""
from __future__ import annotations

import importlib
import sys

import torch

from ..impl import Prepared, RankContext, register, register_parametric
from ..routing import Layout, PointInputs
from ..shapes import ModelShape
from .common import ModelHolder, routed_share_mxfp4
from .routed import routed_step

NAME = "triton-ogs-bf16-mxfp4"
TRITON_REF = "v3.6.0"  # the Triton tag whose triton_kernels API this module calls
MODES = ("fused", "unfused")
SCALE_WARPS = 8  # the Hopper scale swizzle's num_warps (vLLM and triton_kernels' bench use 8 on sm_90)
MODULES = ("matmul_ogs", "tensor", "tensor_details.layout", "numerics", "swiglu")
PRECISION = {
    "fused": "BF16 act x MXFP4 weights (E2M1, UE8M0/K32), triton_kernels matmul_ogs (FP32 accumulation), "
             "SwiGLU fused in GEMM1's epilogue (FP32; up clamp window [-9, 11] via bias -1 and its (up + 1)), "
             "BF16 intermediate, BF16 GEMM2 out, FP32 combine, BF16 out; routed experts only",
    "unfused": "BF16 act x MXFP4 weights (E2M1, UE8M0/K32), triton_kernels matmul_ogs (FP32 accumulation), "
               "BF16 GEMM1 out, SwiGLU in torch (FP32, the project's), BF16 intermediate, BF16 GEMM2 out, "
               "FP32 combine, BF16 out; routed experts only"}


def import_triton_kernels():
    """(modules, None) or (None, "why"): the pieces of triton_kernels this baseline calls, 3.6.0's API."""
    try:
        mods = {n: importlib.import_module(f"triton_kernels.{n}") for n in MODULES}
    except Exception as e:  # noqa: BLE001 - ImportError, or triton's own errors at import (no driver, ...)
        return None, f"{type(e).__name__}: {e}"
    missing = [f"{m}.{a}" for m, attrs in (("matmul_ogs", ("matmul_ogs", "RoutingData", "PrecisionConfig",
                                                           "FlexCtx", "FusedActivation", "FnSpecs")),
                                           ("tensor", ("make_ragged_tensor_metadata", "wrap_torch_tensor",
                                                       "convert_layout", "FP4")),
                                           ("tensor_details.layout", ("make_default_matmul_mxfp4_w_layout",
                                                                      "make_default_matmul_mxfp4_w_scale_layout")))
               for a in attrs if not hasattr(mods[m], a)]
    if missing:
        return None, f"not the {TRITON_REF} triton_kernels API (missing {', '.join(missing)})"
    return mods, None


def interleave_gate_up(t: torch.Tensor) -> torch.Tensor:
    """[G, 2I, ...] rows (gate | up) -> rows (g0, u0, g1, u1, ...): triton_kernels' swiglu pairs columns."""
    g, n = t.shape[:2]
    return t.reshape(g, 2, n // 2, *t.shape[2:]).transpose(1, 2).reshape(t.shape).contiguous()


def up_bias(g: int, inter: int, device) -> torch.Tensor:
    """FP32 [G, 2I] bias: -1 on the (interleaved) up columns, so that its (up + 1) becomes our up."""
    b = torch.zeros(g, inter, 2, dtype=torch.float32, device=device)
    b[..., 1] = -1.0
    return b.reshape(g, 2 * inter)


def k_major(q: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Our MXFP4 [G, N, K/2] bytes + [G, N, K/32] scales -> the [G, K/2, N] / [G, K/32, N] views matmul_ogs
    reads (w[e] is K x N, MX blocks along K = axis 1), as vLLM's `_swizzle_mxfp4` transposes."""
    if q.dtype != torch.uint8 or s.dtype != torch.uint8 or q.dim() != 3 or s.shape != (*q.shape[:2], q.shape[2] // 16):
        raise ValueError(f"MXFP4 expects uint8 [G, N, K/2] and [G, N, K/32], got {q.dtype}{tuple(q.shape)}, "
                         f"{s.dtype}{tuple(s.shape)}")
    return q.transpose(-2, -1), s.transpose(-2, -1)


class TritonOgsBf16Mxfp4(ModelHolder):
    """triton_kernels matmul_ogs ragged BF16 x MXFP4 GEMMs as an `Implementation`; `mode` is `fused` (the
    default: SwiGLU in GEMM1's epilogue) or `unfused` (the project's SwiGLU in torch between the GEMMs)."""

    def __init__(self, mode: str = "fused"):
        if mode not in MODES:
            raise ValueError(f"{NAME}@{mode}: mode is one of {MODES}")
        self.fused = mode == "fused"
        self.name = NAME if self.fused else f"{NAME}@{mode}"
        self.precision = PRECISION[mode]
        self._m: dict | None = None
        self._loaded: dict = {}

    def describe(self) -> dict:
        mods, why = import_triton_kernels()
        triton = sys.modules.get("triton")
        d = {"name": self.name, "precision": self.precision, "package": "triton_kernels (Triton source tree)",
             "api_ref": TRITON_REF, "triton": getattr(triton, "__version__", None),
             "source": mods["matmul_ogs"].__file__ if mods else f"not importable: {why}",
             "ops": "triton_kernels.matmul_ogs.matmul_ogs x2 (ragged by expert, no gather/scatter)"
                    + (" + fused swiglu" if self.fused else " + torch SwiGLU"),
             "dispatch": "NCCL all_to_all_single (static splits)" if self._m and self._m["world"] > 1
             else "none (one rank's share; rows resident)"}
        if d["triton"] and not d["triton"].startswith(TRITON_REF[1:4]):
            d["version_warning"] = f"API read for triton {TRITON_REF}; running triton {d['triton']}"
        d.update(self._loaded)
        return d

    def unsupported(self, shape: ModelShape, layout: Layout, shared: bool) -> str | None:
        mods, why = import_triton_kernels()
        if mods is None:
            return (f"triton_kernels not importable: {why}; carry .peers (ci/prepare_triton_kernels.sh) "
                    "with PYTHONPATH=$PWD/.peers")
        if not torch.cuda.is_available():
            return f"{NAME} needs a CUDA device"
        if torch.cuda.get_device_capability() < (9, 0):
            return "triton_kernels' MXFP4 weight layouts are for sm_90 and newer (Hopper value/scale swizzles)"
        if shared and shape.shared_experts:
            return "routed experts only: no triton_kernels shared-expert path wired (run without --shared)"
        if shape.hidden % 32 or shape.intermediate % 32:
            return "needs H and I multiples of 32 (one MXFP4 scale per 32 along K)"
        return None

    # -- once per model -------------------------------------------------------------------------
    def load_model(self, shape: ModelShape, layout: Layout, ctx: RankContext, shared: bool) -> None:
        from .torch_grouped import SWIGLU_ALPHA, SWIGLU_CLAMP

        self.unload_model()
        mods, why = import_triton_kernels()
        if mods is None:
            raise RuntimeError(f"triton_kernels not importable: {why}")
        dev, g, I = ctx.device, shape.experts // layout.ep, shape.intermediate
        # the torch baselines' draw, quantised as for gc-moe: every output is comparable
        (q1, s1), (q2, s2) = routed_share_mxfp4(shape, layout, ctx)
        if self.fused:  # its swiglu reads (gate, up) pairs; MX blocks run along K, so rows move whole
            q1, s1 = interleave_gate_up(q1), interleave_gate_up(s1)
        mo = mods["matmul_ogs"]
        l1, p1 = self._wrap(mods, q1, s1)
        l2, p2 = self._wrap(mods, q2, s2)
        del q1, s1, q2, s2
        act = mo.FusedActivation(mo.FnSpecs("swiglu", mods["swiglu"].swiglu_fn, ("alpha", "limit"), reduction_n=2),
                                 (SWIGLU_ALPHA, SWIGLU_CLAMP)) if self.fused else None
        self._m = {"shape": shape, "world": layout.world, "group": ctx.group, "device": dev, "mods": mods,
                   "w1": l1, "pc1": p1, "w2": l2, "pc2": p2, "act": act, "experts": g,
                   "b1": up_bias(g, I, dev) if self.fused else None}
        self._loaded = {"weight_layouts": [type(getattr(getattr(l1, "storage", None), "layout", None)).__name__,
                                           type(getattr(getattr(p1.weight_scale, "storage", None), "layout",
                                                        None)).__name__]}

    @staticmethod
    def _wrap(mods, q: torch.Tensor, s: torch.Tensor):
        """Our MXFP4 -> (triton_kernels Tensor in the Hopper value layout, PrecisionConfig with its scales)."""
        t, lay, mo = mods["tensor"], mods["tensor_details.layout"], mods["matmul_ogs"]
        qk, sk = k_major(q, s)
        vl, vopts = lay.make_default_matmul_mxfp4_w_layout(mx_axis=1)
        sl, sopts = lay.make_default_matmul_mxfp4_w_scale_layout(mx_axis=1, num_warps=SCALE_WARPS)
        w = t.convert_layout(t.wrap_torch_tensor(qk, dtype=t.FP4), vl, **vopts)
        ws = t.convert_layout(t.wrap_torch_tensor(sk), sl, **sopts)
        return w, mo.PrecisionConfig(weight_scale=ws, flex_ctx=mo.FlexCtx(rhs_data=mods["numerics"].InFlexData()))

    # -- per point ------------------------------------------------------------------------------
    def prepare(self, point: PointInputs) -> Prepared:
        from .torch_grouped import swiglu

        m = self.model()
        dev, p, mods = m["device"], point.plan, m["mods"]
        mo, I = mods["matmul_ogs"], m["shape"].intermediate
        x = point.activations(dev)  # [R, H] BF16
        M = p.assignments
        hist = p.group_sizes.to(device=dev, dtype=torch.int32)
        # static per point (routing is fixed at capture), so the metadata kernel runs here, not per call
        meta = mods["tensor"].make_ragged_tensor_metadata(hist, M) if M else None
        rd = mo.RoutingData(None, hist, m["experts"], 1, meta)  # n_expts_act 1: routed.py combines

        def gemm(a, w, pc, bias=None, act=None):
            y = mo.matmul_ogs(a, w, bias, rd, precision_config=pc, fused_activation=act)
            return y.reshape(-1, y.shape[-1])

        def experts(a: torch.Tensor, sa) -> torch.Tensor:
            """[M, H] BF16 rows in expert order -> [M, H] BF16 partials."""
            if self.fused:
                h = gemm(a, m["w1"], m["pc1"], m["b1"], m["act"])
            else:
                h = swiglu(gemm(a, m["w1"], m["pc1"]), I).to(torch.bfloat16)
            return gemm(h, m["w2"], m["pc2"])

        step, out = routed_step(point, dev, m["world"], m["group"], x, None, experts)
        return Prepared(step=step, output=out, info={"assignments": M, "experts": int(hist.numel())})


register(NAME, lambda: TritonOgsBf16Mxfp4())
register_parametric(NAME, lambda arg: TritonOgsBf16Mxfp4(arg))
