"""Baseline `humming-fp8-mxfp4` (issue 7 item 2(c)): the external peer humming-kernels 0.1.20 (PyPI,
vLLM's JIT/NVRTC quantised-GEMM library) on the same routed work, weights and inputs as the others.

This module owns only the humming side: the MXFP4 weights in humming's layout and the two grouped
GEMMs + the SwiGLU/requant between them. Dispatch/combine is `routed.routed_step` (the torch baselines'
path: gather at P=1, NCCL all-to-all at P>1); weights are the torch baselines' seeded BF16 draw quantised
to MXFP4 exactly as for gc-moe (`impl_gcmoe._quant_routed`); activations are quantised by the project's
`quantize_e4m3_fp32_k128`, as for gc-moe. So the precision matches gc-moe's routed path.

API used (read from the 0.1.20 wheel, humming_kernels-0.1.20-cp310-abi3-manylinux_2_28_x86_64.whl):

* weights: `humming/schema/mxfp4.py` `Mxfp4WeightSchema` documents the MXFP4 checkpoint layout (weight
  uint8 [E, N, K/2], weight_scale uint8 [E, N, K/32]) and `_convert_humming` turns it into humming tensors
  by `.view(torch.int32)` / `.view(torch.float8_e8m0fnu)` with schema `HummingWeightSchema(float4e2m1,
  float8e8m0, group 32)` (`to_humming_schema`); element i of a packed word sits at bit 4i
  (`include/humming/kernel/pack_weight.cuh` `common_pack_weight`), which is our `fp4_pack` order.
  `humming/transform.py` `prepare_and_transform_humming_tensors` then builds the `LayerConfig` (FP8 x
  MXFP4 on SM90 selects `use_fused_e8m0_scale`: E8M0 offsets folded into the weights by the JIT kernel
  `process_mxfp4_w4a8`, a per-expert tensor `weight_scale_2`) and repacks weights/scales (GPU kernels).
* GEMM: `humming/forward.py` `humming_forward(config, inputs=E4M3 rows, input_scale=FP32 per-128 group
  scales, expert_layout=[G+1] int64 row offsets, compute_config={"gemm_type": "grouped_contiguous",
  "use_m_major_input_scale": ...})` -> `humming/ops/gemm.py` `humming_gemm`, the grouped-contiguous MoE
  GEMM of the upstream test `tests/kernels/humming/test_moe.py` (m-major scales: [K/128, round_up(M, 4)]).
  Kernels JIT-compile once per layer config (`humming/kernel/humming.py` `HummingKernel.prepare_kernels`,
  cached); `load_model` calls it so compilation stays out of the timed windows and fails there.
* SwiGLU + E4M3 requant: `humming/forward.py` `may_process_input(config, h, activation_type="binary_split",
  activation_impl=<C expression of a=gate, b=up>)` (`include/humming/kernel/process_input/activation.cuh`:
  gate = first half of the row, up = second), one fused kernel giving GEMM2's FP8 input and scales.

Routed experts only: with shared experts requested it reports itself unsupported (no humming dense path
wired here). Never run on a GPU from this repository yet (docs/PEERS.md).
"""
from __future__ import annotations

import contextlib
import importlib
import json

import torch

from ..impl import Prepared, RankContext, register, register_parametric
from ..routing import Layout, PointInputs
from ..shapes import ModelShape
from .common import ModelHolder, routed_share_mxfp4
from .routed import routed_step

NAME = "humming-fp8-mxfp4"
PINNED = "0.1.20"  # the version read and cited above; another one is run but flagged in describe()
SCALE_LAYOUTS = ("m-major", "row")  # GEMM input-scale layout; m-major is the one humming tunes TMA for
PRECISION = ("E4M3 act (FP32 scale/K128) x MXFP4 weights (E2M1, UE8M0/K32; humming fused-E8M0 W4A8), BF16 GEMM "
             "out, SwiGLU + E4M3 (FP32 scale/K128) requant fused in humming process_input, FP32 combine, BF16 out; "
             "routed experts only")
LOCK_WORDS = 2048  # humming's own per-layer Stream-K lock buffer size (humming/layer.py HummingLayer)


def import_humming():
    """(modules, None) or (None, "why"): the pieces of humming this baseline calls."""
    try:
        mods = {n: importlib.import_module(f"humming{n and '.' + n}")
                for n in ("", "forward", "transform", "schema", "kernel.humming")}
    except Exception as e:  # noqa: BLE001 - ImportError, or OSError/RuntimeError from its native libraries
        return None, f"{type(e).__name__}: {e}"
    return mods, None


def swiglu_c_expr(alpha: float, clamp: float) -> str:
    """The project's SwiGLU (torch_grouped.swiglu) as humming's binary activation: a = gate, b = up."""
    al, cl = f"{float(alpha)!r}f", f"{float(clamp)!r}f"
    g = f"fminf(a, {cl})"
    return f"{g} / (1.0f + expf(-{al} * {g})) * fminf(fmaxf(b, -{cl}), {cl})"


def mxfp4_to_humming(q: torch.Tensor, s: torch.Tensor) -> dict[str, torch.Tensor]:
    """Our MXFP4 (packed uint8 [G, N, K/2], UE8M0 uint8 [G, N, K/32]) -> humming's `Mxfp4WeightSchema`
    tensors after `_convert_humming`: weight int32 [G, N, K/8], weight_scale float8_e8m0fnu [G, N, K/32].
    Views only: the bytes are the same (same nibble order, same E8M0 codes)."""
    if q.dtype != torch.uint8 or s.dtype != torch.uint8 or q.dim() != 3 or s.dim() != 3:
        raise ValueError(f"MXFP4 expects uint8 [G, N, K/2] and [G, N, K/32], got {q.dtype}{tuple(q.shape)}, "
                         f"{s.dtype}{tuple(s.shape)}")
    g, n, half_k = q.shape
    if s.shape != (g, n, half_k * 2 // 32) or half_k % 4:
        raise ValueError(f"MXFP4 shapes disagree: weight {tuple(q.shape)}, scales {tuple(s.shape)} (K % 32 == 0)")
    return {"weight": q.contiguous().view(torch.int32), "weight_scale": s.contiguous().view(torch.float8_e8m0fnu)}


def expert_layout(group_sizes: torch.Tensor) -> torch.Tensor:
    """Rows per local expert -> humming's grouped-contiguous `expert_layout`: int64 [G+1], 0 then cumsum."""
    return torch.nn.functional.pad(group_sizes.to(torch.int64).cumsum(0), (1, 0))


def m_major_scales(sa: torch.Tensor) -> torch.Tensor:
    """[M, K/128] FP32 -> [K/128, round_up(M, 4)] (humming's m-major group-scale shape,
    `ProcessInputProblemConfig.get_group_scale_shape`); padding columns are never read."""
    m = sa.shape[0]
    return torch.nn.functional.pad(sa.t(), (0, -m % 4)).contiguous()


class HummingFp8Mxfp4(ModelHolder):
    """humming-kernels grouped FP8 x MXFP4 GEMMs as an `Implementation`; `scales` picks the input-scale
    layout of both GEMMs (`m-major`, the default, or `row`)."""

    def __init__(self, scales: str = "m-major"):
        if scales not in SCALE_LAYOUTS:
            raise ValueError(f"{NAME}@{scales}: scale layout is one of {SCALE_LAYOUTS}")
        self.m_major = scales == "m-major"
        self.name = NAME if self.m_major else f"{NAME}@{scales}"
        self.precision = PRECISION
        self._m: dict | None = None
        self._loaded: dict = {}

    def describe(self) -> dict:
        mods, why = import_humming()
        version = getattr(mods[""], "__version__", "unknown") if mods else None
        d = {"name": self.name, "precision": self.precision, "package": "humming-kernels",
             "version": version if mods else f"not importable: {why}",
             "ops": "humming.forward.humming_forward (grouped_contiguous) x2 + humming.forward.may_process_input "
                    "(SwiGLU + E4M3 requant)",
             "input_scales": "m-major" if self.m_major else "row-major",
             "dispatch": "NCCL all_to_all_single (static splits)" if self._m and self._m["world"] > 1
             else "none (one rank's share; rows resident)"}
        if version and version != PINNED:
            d["version_warning"] = f"read and cited for {PINNED}; running {version}"
        d.update(self._loaded)
        return d

    def unsupported(self, shape: ModelShape, layout: Layout, shared: bool) -> str | None:
        mods, why = import_humming()
        if mods is None:
            return f"humming-kernels not importable: {why}"
        if not torch.cuda.is_available():
            return "humming-fp8-mxfp4 needs a CUDA device"
        if torch.cuda.get_device_capability() < (8, 9):
            return "humming FP8 activations need sm_89 or newer (its support matrix)"
        if shared and shape.shared_experts:
            return "routed experts only: no humming shared-expert path wired (run without --shared)"
        if shape.hidden % 128 or shape.intermediate % 128:
            return "needs H and I multiples of 128 (one FP32 activation scale per 128 along K)"
        return None

    # -- once per model -------------------------------------------------------------------------
    def load_model(self, shape: ModelShape, layout: Layout, ctx: RankContext, shared: bool) -> None:
        self.unload_model()
        mods, why = import_humming()
        if mods is None:
            raise RuntimeError(f"humming-kernels not importable: {why}")
        dev = ctx.device
        g = shape.experts // layout.ep
        H, I = shape.hidden, shape.intermediate
        q1, q2 = routed_share_mxfp4(shape, layout, ctx)  # the torch baselines' draw, quantised as for gc-moe
        compute = json.dumps({"gemm_type": "grouped_contiguous", "use_m_major_input_scale": self.m_major})
        cfg1, t1 = self._transform(mods, q1, 2 * I, H, g, dev)
        cfg2, t2 = self._transform(mods, q2, H, I, g, dev)
        del q1, q2
        kernel = mods["kernel.humming"].HummingKernel
        # a CPU device only ever meets the tests' stand-in for humming
        on_gpu = dev.type == "cuda"
        with torch.cuda.device(dev) if on_gpu else contextlib.nullcontext():
            for cfg in (cfg1, cfg2):  # JIT (NVRTC) now, not inside the timed windows
                kernel.prepare_kernels(cfg.to_str(), compute, None, dev)
        self._m = {"shape": shape, "world": layout.world, "group": ctx.group, "device": dev, "mods": mods,
                   "compute": compute, "l1": (cfg1, t1), "l2": (cfg2, t2),
                   "locks": [torch.zeros(LOCK_WORDS, dtype=torch.int32, device=dev) for _ in range(2)]}
        self._loaded = {"layer_configs": [cfg1.to_str(), cfg2.to_str()], "compute_config": compute,
                        "weight_tensors": {k: [str(v.dtype), list(v.shape)] for k, v in t1.items()}}
        # the SwiGLU/requant kernel compiles on first use: do it here too
        h = torch.zeros(4, 2 * I, dtype=torch.bfloat16, device=dev)
        self._swiglu_quant(h)
        if on_gpu:
            torch.cuda.synchronize(dev)

    @staticmethod
    def _transform(mods, q: tuple[torch.Tensor, torch.Tensor], n: int, k: int, g: int, dev):
        """MXFP4 [G, N, K] -> (humming LayerConfig, kernel tensors) for FP8 (FP32 scale / K128) activations."""
        dtypes, schema = mods[""].dtypes, mods["schema"]
        wschema = schema.HummingWeightSchema(b_dtype=dtypes.float4e2m1, bs_dtype=dtypes.float8e8m0,
                                             weight_scale_group_size=32)  # = Mxfp4WeightSchema.to_humming_schema
        ischema = schema.HummingInputSchema(a_dtype=dtypes.float8e4m3, input_scale_group_size=128)
        return mods["transform"].prepare_and_transform_humming_tensors(
            mxfp4_to_humming(*q), shape_n=n, shape_k=k, weight_schema=wschema, input_schema=ischema,
            num_experts=g, torch_dtype=torch.bfloat16, device=dev)

    def _swiglu_quant(self, h: torch.Tensor):
        from .torch_grouped import SWIGLU_ALPHA, SWIGLU_CLAMP

        m = self._m
        q, gs, _ = m["mods"]["forward"].may_process_input(
            m["l2"][0], h, activation_type="binary_split",
            activation_impl=swiglu_c_expr(SWIGLU_ALPHA, SWIGLU_CLAMP), m_major_scale=self.m_major)
        return q, gs

    # -- per point ------------------------------------------------------------------------------
    def prepare(self, point: PointInputs) -> Prepared:
        from gcmoe_runtime.numerics.quant import quantize_e4m3_fp32_k128

        m = self.model()
        dev, p = m["device"], point.plan
        fwd = m["mods"]["forward"].humming_forward
        xq, xs = quantize_e4m3_fp32_k128(point.activations(dev))  # [R, H] E4M3, [R, H/128] FP32, as gc-moe
        layout_ = expert_layout(p.group_sizes).to(dev)
        M = p.assignments

        def gemm(which: int, a: torch.Tensor, sa: torch.Tensor) -> torch.Tensor:
            cfg, t = m["l1"] if which == 0 else m["l2"]
            return fwd(cfg, inputs=a, weight=t["weight"], weight_scale=t.get("weight_scale"),
                       weight_scale_2=t.get("weight_scale_2"), input_scale=sa, expert_layout=layout_,
                       locks=m["locks"][which], valid_shape_m=M, compute_config=m["compute"])

        def experts(a: torch.Tensor, sa: torch.Tensor | None) -> torch.Tensor:
            """[M, H] E4M3 rows in expert order (+ [M, H/128] scales) -> [M, H] BF16 partials."""
            h = gemm(0, a, m_major_scales(sa) if self.m_major else sa.contiguous())
            q, gs = self._swiglu_quant(h)
            return gemm(1, q, gs)

        step, out = routed_step(point, dev, m["world"], m["group"], xq, xs, experts)
        return Prepared(step=step, output=out, info={"assignments": M, "experts": int(p.group_sizes.numel())})


register(NAME, lambda: HummingFp8Mxfp4())
register_parametric(NAME, lambda arg: HummingFp8Mxfp4(arg))
