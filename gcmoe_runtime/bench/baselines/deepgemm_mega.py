"""Baseline `deepgemm-mega-fp8` (issue 7 item 2(c), the paper's own baseline): DeepGEMM's Hopper Mega MoE
(`fp8_mega_moe`, PyPI `sgl-deep-gemm==0.1.5.post1` + `apache-tvm-ffi==0.1.11`, the newest wheel that loads under
the GPU machine's torch 2.11: results/bench/peers/deepgemm-survey.md) on the same routed work as the others.

It is a whole fused EP layer (its own NVLink dispatch, both grouped GEMMs, SwiGLU, combine, in ONE persistent
kernel over a torch symmetric-memory buffer), so this adapter does not use `routed.routed_step`: it stages the
point's inputs in DeepGEMM's buffer and calls the layer.

API used (read in the wheel `sgl_deep_gemm-0.1.5.post1-py3-none-manylinux2014_x86_64.whl`, sha256 1ee11f78...1ea493;
the C++ host code is compiled into `deep_gemm/_C.so` and not shipped as source, so its checks are cited by their
assertion strings in `_C.so` and the kernel header):

* `deep_gemm/__init__.py` `get_symm_buffer_for_sm90_mega_moe(group, num_experts, num_max_tokens_per_rank,
  num_topk, hidden, intermediate_hidden, use_fp8_dispatch=True, activation='swiglu')`: aligns
  `num_max_tokens_per_rank` to `_C.get_token_alignment_for_mega_moe()` (384) and builds `SM90SymmBuffer`, which
  allocates `_C.get_symm_buffer_size_for_sm90_mega_moe(...)` bytes with `torch.distributed._symmetric_memory.empty`
  and `symm_mem.rendezvous(buffer, group=group)` for ANY group size (so P = 1 needs a process group too: a one-rank
  group made here), zeroes it, `group.barrier()`, and exposes views `x` (E4M3 [max, H]), `x_sf` (FP32 [max, H/128]),
  `topk_idx` (int64 [max, k]), `topk_weights` (FP32 [max, k]). (`get_symm_buffer_for_mega_moe` dispatches to it on
  capability 9.x; we call the SM90 function directly.)
* `deep_gemm/__init__.py` `transform_weights_for_mega_moe_sm90((l1, l1_sf), (l2, l2_sf))`: interleaves W1's rows
  gate/up in groups of 8 (`[g0..7, u0..7, g8..15, ...]`) and leaves both scale tensors and W2 unchanged; the
  kernel reads L1 scales as [gate blocks | up blocks] (`include/deep_gemm/impls/sm90_fp8_mega_moe.cuh`, `gate_n`,
  `up_n = kIntermediateHidden/128 + gate_n`).
* weights: E4M3 [G, N, K] K-major contiguous with FP32 scales [G, N/128, K/128] = amax/448 per 128x128 block
  (`_C.so`: `get_major_type_ab(l1_weights) == cute::UMMA::Major::K`, `l1_weights.scalar_type() ==
  torch::kFloat8_e4m3fn`, `check_sf_layout(..., 128, 128, num_experts_per_rank, ..., kFloat)` with the SM90 SFB
  contiguity check). Quantised with DeepGEMM's own `deep_gemm/utils/math.py` `per_block_cast_to_fp8(w,
  use_ue8m0=False, gran_k=128)`, expert by expert, as its Hopper test does (sgl-project/DeepGEMM
  `tests/test_mega_moe_hopper.py` `_quantize_grouped_fp8_block_128_128`, same recipe; read at commit 4ea6dae, a
  nearby source tree: the release branch of 0.1.5.post1 is not in the public mirror).
* activations: E4M3 with FP32 scale amax/448 per 1x128 along K. That is DeepGEMM's recipe (`per_token_cast_to_fp8(x,
  use_ue8m0=False, gran_k=128)` in its test; `sm90_mega_moe_pre_dispatch_kernel`: raw amax/448) and the project's
  `quantize_e4m3_fp32_k128`, which gc-moe and humming get too, so the same bytes go in.
* the layer: `deep_gemm/__init__.py` `fp8_mega_moe(y, (l1, l1_sf), (l2, l2_sf), sym_buffer,
  cumulative_local_expert_recv_stats=None, recipe=(128, 128, 128), activation='swiglu', activation_clamp,
  fast_math=True)` -> `_C.fp8_mega_moe`. `y` is BF16 [num_tokens, H]; num_tokens = y.size(0) <= the buffer's
  max; the kernel reads rows [0, num_tokens) of the staged inputs, skips ids < 0, applies the routing weight to
  the SwiGLU output before requantising it (E4M3, FP32 scale per 1x64), writes each slot's L2 output (BF16) to
  its source rank and reduces the top-k slots in FP32 into BF16 `y` (tokens with no valid slot get 0).
  Checks (`_C.so`): `arch_major == 9`, `hidden % 128 == 0 and intermediate_hidden % 128 == 0`,
  `intermediate_hidden / 64 <= 64` (I <= 4096), `num_experts % num_ranks == 0`; kernel: `kNumTopk <= 32`.
  SwiGLU (kernel `sm90_fp8_mega_moe_swiglu`): gate clamped above at `activation_clamp`, up to [-clamp, clamp],
  silu(gate) * up, i.e. the project's SwiGLU (alpha 1.0, clamp 10.0).
* canonical call sequence (its test `_run_accuracy_scenario`): quantise, `transform_weights_for_mega_moe_sm90`,
  `get_symm_buffer_for_mega_moe`, copy x / x_sf / topk_idx / topk_weights into `buffer.<view>[:num_tokens]`,
  `fp8_mega_moe(y, ...)`. `step()` does exactly the four copies + the call, so the staging copies are timed (a
  caller must write its inputs into DeepGEMM's buffer; SGLang does it with `mega_moe_pre_dispatch_sm90`).
* re-entry: the kernel cleans its workspace counters itself and passes an NVLink barrier before the combine
  (after every rank's pulls of this rank's rows), so back-to-back replays may restage the inputs.
* environment: JIT (nvcc from `CUDA_HOME`/`CUDA_PATH`, else `nvcc` on PATH, else /usr/local/cuda:
  `deep_gemm/cuda_helpers.py` `find_cuda_home`; `import deep_gemm` asserts one exists; `DG_JIT_USE_NVRTC`
  switches to NVRTC), `DG_JIT_CACHE_DIR`, `DG_PRINT_CONFIGS`, `DG_COMM_KERNEL_DEBUG` (zeroes the buffer after
  every call: must stay unset), `DG_SM90_FP8_SWAP...` (a swap-AB switch; the name is truncated in `_C.so`).
  **Multicast**: DeepGEMM 0.1.5.post1 has no switch of its own; its SM90 kernel, layout and comm headers contain
  no `multimem` (it uses plain peer loads/stores through the rendezvous pointers). torch's
  `TORCH_SYMM_MEM_DISABLE_MULTICAST` is set to 1 here before the allocation if unset (ci/gpu_env.sh also sets
  `NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1`); describe() records all three.
* CUDA-graph capture: the Python wrapper does no host synchronisation; the host side (config heuristics, JIT on
  first use per config, TMA descriptors passed by value) is in `_C.so`; the harness's two eager warm-up steps
  (`protocol.capture_graph`) compile before capture. Capturability itself is NOT verified (no GPU here).

Layouts: world == ep (P = 2): the bench's NCCL group, `num_experts = E`, each rank stages its own T tokens with
global ids. world == 1, ep == 1: a one-rank group, `num_experts = E`. world == 1 < ep (one rank's share): a
one-rank group with `num_experts = E/ep` (this rank's experts), all ep*T resident tokens staged, ids of other
ranks' experts set to -1 (weight 0): exactly the local work the other baselines do for the share.

Routed experts only (its Mega MoE fuses no shared expert): with --shared it is recorded as skipped. Never run on
a GPU from this repository yet (docs/PEERS.md).
"""
from __future__ import annotations

import importlib
import os

import torch

from ..impl import Prepared, RankContext, register
from ..routing import Layout, PointInputs
from ..shapes import ModelShape
from .common import ModelHolder, routed_share

NAME = "deepgemm-mega-fp8"
PACKAGE = "sgl-deep-gemm"
PINNED = "0.1.5.post1"  # the version read and cited above; another one is run but flagged in describe()
RECIPE = (128, 128, 128)
WEIGHT_BLOCK = 128      # weight scale block (N and K)
ACT_GROUP = 128         # activation scale group along K
MAX_INTERMEDIATE = 4096  # `intermediate_hidden / 64 <= 64`
MAX_TOPK = 32           # kernel: kNumTopk <= 32
FAST_MATH = True        # fp8_mega_moe's default
MULTICAST_ENV = ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "NCCL_NVLS_ENABLE", "NVSHMEM_DISABLE_NVLS")
PRECISION = ("E4M3 act (FP32 scale amax/448 per 1x128 along K) x E4M3 weights (FP32 scale amax/448 per 128x128 "
             "block, DeepGEMM per_block_cast_to_fp8), FP32 accumulation; SwiGLU (clamp 10) x routing weight fused "
             "in the L1 epilogue, E4M3 requant (FP32 scale per 1x64); BF16 L2 out per top-k slot, FP32 top-k "
             "reduce, BF16 out; routed experts only; W8A8 (no MXFP4): DeepGEMM has no SM90 FP8 x FP4 Mega MoE")
REQUIRED = ("fp8_mega_moe", "get_symm_buffer_for_sm90_mega_moe", "transform_weights_for_mega_moe_sm90")


def import_deepgemm():
    """(deep_gemm module, None) or (None, "why"): every piece of it this baseline calls."""
    try:
        dg = importlib.import_module("deep_gemm")
    except Exception as e:  # noqa: BLE001 - ImportError, OSError from _C.so, AssertionError from find_cuda_home
        return None, f"{type(e).__name__}: {e}"
    missing = [n for n in REQUIRED if not hasattr(dg, n)]
    if not hasattr(getattr(getattr(dg, "utils", None), "math", None), "per_block_cast_to_fp8"):
        missing.append("utils.math.per_block_cast_to_fp8")
    if missing:
        return None, (f"deep_gemm {getattr(dg, '__version__', '?')} lacks {', '.join(missing)} "
                      f"(the SM90 Mega MoE API of {PACKAGE} {PINNED})")
    return dg, None


def shape_limit(shape: ModelShape) -> str | None:
    """The reason `shape` is outside fp8_mega_moe's limits (its host checks and kernel static asserts), or None."""
    if shape.hidden % 128 or shape.intermediate % 128:
        return (f"needs H and I multiples of 128 (fp8_mega_moe: hidden % 128 == 0 and intermediate_hidden % 128 "
                f"== 0); H={shape.hidden}, I={shape.intermediate}")
    if shape.intermediate > MAX_INTERMEDIATE:
        return f"needs I <= {MAX_INTERMEDIATE} (fp8_mega_moe: intermediate_hidden / 64 <= 64); I={shape.intermediate}"
    if shape.top_k > MAX_TOPK:
        return f"needs top-k <= {MAX_TOPK} (sm90_fp8_mega_moe: kNumTopk <= 32); k={shape.top_k}"
    return None


def quantize_weights(dg, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """BF16 [G, N, K] -> (E4M3 [G, N, K], FP32 [G, N/128, K/128]) with DeepGEMM's `per_block_cast_to_fp8`
    (use_ue8m0=False, gran_k=128), expert by expert (bounded temporaries)."""
    g, n, k = w.shape
    q = torch.empty(g, n, k, dtype=torch.float8_e4m3fn, device=w.device)
    s = torch.empty(g, n // WEIGHT_BLOCK, k // WEIGHT_BLOCK, dtype=torch.float32, device=w.device)
    cast = dg.utils.math.per_block_cast_to_fp8
    for e in range(g):
        qe, se = cast(w[e], use_ue8m0=False, gran_k=WEIGHT_BLOCK)
        q[e].copy_(qe)
        s[e].copy_(se)
    return q, s


def staged_routing(point: PointInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """The resident rows' top-k ids and weights as DeepGEMM's buffer takes them (int64 / FP32 [R, k]).

    world == ep: global expert ids (DeepGEMM's num_experts = E). One emulated share (world == 1 < ep): this
    rank's experts renumbered from 0 (num_experts = E/ep), every other id -1 with weight 0 (skipped by the
    kernel: `if (expert_idx >= 0)`)."""
    p, lay = point.plan, point.layout
    lo, r = p.resident_token_lo, p.resident_tokens
    ids = point.topk_ids[lo:lo + r].to(torch.int64)
    w = point.topk_weights[lo:lo + r].to(torch.float32)
    if lay.emulated:
        local = (ids >= p.expert_lo) & (ids < p.expert_lo + p.local_experts)
        ids = torch.where(local, ids - p.expert_lo, torch.full_like(ids, -1))
        w = torch.where(local, w, torch.zeros_like(w))
    return ids.contiguous(), w.contiguous()


def _one_rank_group(dev):
    """(group, created_here): a process group of size 1 for SM90SymmBuffer at P = 1 (it rendezvouses over a group
    for any size). NCCL on a GPU, gloo on the CPU (the tests' stand-in)."""
    import torch.distributed as dist

    if dist.is_initialized():
        if dist.get_world_size() != 1:
            raise RuntimeError(f"{NAME}: a {dist.get_world_size()}-rank default process group exists in a world-1 run")
        return dist.group.WORLD, False
    if dev.type == "cuda":
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=dev)
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return dist.group.WORLD, True


class DeepGemmMegaFp8(ModelHolder):
    """DeepGEMM 0.1.5.post1 `fp8_mega_moe` (SM90) as an `Implementation`."""

    def __init__(self):
        self.name = NAME
        self.precision = PRECISION
        self._m: dict | None = None
        self._loaded: dict = {}
        self._own_group = False

    def describe(self) -> dict:
        dg, why = import_deepgemm()
        version = getattr(dg, "__version__", "unknown") if dg else None
        d = {"name": self.name, "precision": self.precision, "package": PACKAGE,
             "version": version if dg else f"not importable: {why}",
             "ops": "deep_gemm.fp8_mega_moe (SM90 fused EP layer: NVLink pull dispatch, L1 + SwiGLU + requant, L2, "
                    "NVLink scatter, top-k combine), recipe (128, 128, 128), fast_math=True, activation_clamp=10.0",
             "weights": "per_block_cast_to_fp8 (E4M3, FP32 amax/448 per 128x128) of the baselines' seeded BF16 "
                        "draw; transform_weights_for_mega_moe_sm90 (W1 gate/up interleaved by 8)",
             "step": "copy E4M3 x, FP32 x_sf, int64 topk_idx, FP32 topk_weights into the symmetric buffer, then "
                     "fp8_mega_moe (the copies are timed)",
             "multicast": "off: no DeepGEMM switch exists and its SM90 kernel uses no multimem; env "
                          + ", ".join(f"{k}={os.environ.get(k)}" for k in MULTICAST_ENV)}
        if version and version != PINNED:
            d["version_warning"] = f"read and cited for {PINNED}; running {version}"
        d.update(self._loaded)
        return d

    def unsupported(self, shape: ModelShape, layout: Layout, shared: bool) -> str | None:
        dg, why = import_deepgemm()
        if dg is None:
            return f"deep_gemm ({PACKAGE} {PINNED}) not importable: {why}"
        if not torch.cuda.is_available():
            return f"{NAME} needs a CUDA device"
        cap = torch.cuda.get_device_capability()
        if cap[0] != 9:
            return (f"fp8_mega_moe is DeepGEMM's SM90 Mega MoE (it asserts arch_major == 9); this device is "
                    f"sm_{cap[0]}{cap[1]}")
        if shared and shape.shared_experts:
            return "routed experts only: DeepGEMM's Mega MoE fuses no shared expert (run without --shared)"
        return shape_limit(shape)

    # -- once per model -------------------------------------------------------------------------
    def load_model(self, shape: ModelShape, layout: Layout, ctx: RankContext, shared: bool) -> None:
        self.unload_model()
        dg, why = import_deepgemm()
        if dg is None:
            raise RuntimeError(f"deep_gemm ({PACKAGE} {PINNED}) not importable: {why}")
        lim = shape_limit(shape)
        if lim:
            raise RuntimeError(lim)
        dev = ctx.device
        os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")  # torch's symmetric memory: never multicast
        e_loc = shape.experts // layout.ep
        H, I, k = shape.hidden, shape.intermediate, shape.top_k
        w1, w2 = routed_share(shape, layout, ctx)  # the other baselines' seeded BF16 draw
        l1 = quantize_weights(dg, w1)
        del w1
        l2 = quantize_weights(dg, w2)
        del w2
        t1, t2 = dg.transform_weights_for_mega_moe_sm90(l1, l2)
        del l1, l2
        if layout.world > 1:
            group, own_group = ctx.group, False
        else:
            group, own_group = _one_rank_group(dev)
        self._own_group = own_group
        if dev.type == "cuda":
            import torch.distributed._symmetric_memory as symm_mem

            if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed by older torch; no-op later
                symm_mem.enable_symm_mem_for_group(group.group_name)
        num_experts = e_loc * layout.world  # E at P = world = ep; this rank's E/ep for one emulated share
        max_tokens = shape.capacity * (layout.ep if layout.emulated else 1)  # resident rows at the largest T
        buf = dg.get_symm_buffer_for_sm90_mega_moe(group, num_experts, max_tokens, k, H, I,
                                                   use_fp8_dispatch=True, activation="swiglu")
        self._m = {"shape": shape, "layout": layout, "device": dev, "dg": dg, "l1": t1, "l2": t2, "buf": buf,
                   "group": group}
        self._loaded = {"num_experts": num_experts, "experts_per_rank": e_loc,
                        "ranks": group.size(), "num_max_tokens_per_rank": int(buf.num_max_tokens_per_rank),
                        "group": "the bench's process group" if layout.world > 1
                        else "one-rank process group made by this adapter (SM90SymmBuffer needs one)",
                        "weight_tensors": {"l1": [str(t1[0].dtype), list(t1[0].shape), list(t1[1].shape)],
                                           "l2": [str(t2[0].dtype), list(t2[0].shape), list(t2[1].shape)]}}
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def unload_model(self) -> None:
        m, self._m = self._m, None
        if m is not None:
            buf = m.pop("buf")
            if m["device"].type == "cuda":
                torch.cuda.synchronize(m["device"])
            buf.destroy()
            del buf, m
        super().unload_model()
        if getattr(self, "_own_group", False):
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
            self._own_group = False

    # -- per point ------------------------------------------------------------------------------
    def prepare(self, point: PointInputs) -> Prepared:
        from gcmoe_runtime.numerics.quant import quantize_e4m3_fp32_k128

        from .torch_grouped import SWIGLU_CLAMP

        m = self.model()
        dev, dg, buf, p = m["device"], m["dg"], m["buf"], point.plan
        R, H = p.resident_tokens, point.shape.hidden
        if R > buf.num_max_tokens_per_rank:
            raise ValueError(f"{R} resident tokens exceed the buffer's {buf.num_max_tokens_per_rank}")
        xq, xs = quantize_e4m3_fp32_k128(point.activations(dev))  # [R, H] E4M3, [R, H/128] FP32, as gc-moe
        ids, w = staged_routing(point)
        ids, w = ids.to(dev), w.to(dev)
        y = torch.zeros(R, H, dtype=torch.bfloat16, device=dev)
        l1, l2 = m["l1"], m["l2"]

        def step() -> None:
            buf.x[:R].copy_(xq)
            buf.x_sf[:R].copy_(xs)
            buf.topk_idx[:R].copy_(ids)
            buf.topk_weights[:R].copy_(w)
            dg.fp8_mega_moe(y, l1, l2, buf, cumulative_local_expert_recv_stats=None, recipe=RECIPE,
                            activation="swiglu", activation_clamp=SWIGLU_CLAMP, fast_math=FAST_MATH)

        return Prepared(step=step, output=y,
                        info={"assignments": p.assignments, "experts": int(p.group_sizes.numel()),
                              "staged_tokens": R, "valid_slots": int((ids >= 0).sum())})


register(NAME, lambda: DeepGemmMegaFp8())
