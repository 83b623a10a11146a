"""The gc-moe operator as benchmark implementations: the subject and its own-kernel baselines (issue 7).

Every mode runs the same bundle, kernels, weights and inputs through the public API
(``gcmoe_runtime.moe``); only where the layer graph's nodes run and how they are ordered differ:

============================  ==============  =====================================================
name                          green contexts  roles
============================  ==============  =====================================================
``gc-moe``                    yes             role1 beside role2 (concurrent roots) — the subject
``gc-moe-nooverlap``          yes             serialised role1 -> role2 -> role4 -> role3 (ablation)
``gc-moe-serial``  (a)        no              serialised, all in the primary context: one stream
                                              of the full device, overlap off
``gc-moe-streams`` (b)        no              concurrent roots in the primary context: plain
                                              streams, no isolation (paper §3 straw man i)
============================  ==============  =====================================================

``NAME@R`` sets the dispatch-SM request R (e.g. ``gc-moe@16``); without it the request is
``GC_MOE_SM90_DISPATCH_SMS`` or 4 (paper Table 2). Baselines (a)/(b) run the kernels built for that
request's driver-aligned split (it fixes their grids: dispatch/compute SM counts are compile-time
for role1/role3), but every CTA may land on any SM. Baseline (b) has no guarantee that role1 finds
free SMs while role2's persistent CTAs spin on the ring: a device-side wait then traps after
``GCMOE_BENCH_TIMEOUT_S`` (default 10 s) and the point is recorded as failed — the CUDA context is
then unusable, so run (b) in its own invocation (results/bench/NEXT.md does, and so does its GPU test,
where that trap is an expected failure).

Bundles: ``GCMOE_BENCH_BUNDLES`` lists bundle files or folders (``*.gcmoe``), separated by
``os.pathsep``; default ``<repo>/build/bundles``. The request's driver-aligned split is read from the driver
first (``green.full_device_partition``: no green contexts are created for it); the first bundle whose
records hold role1, role2, role3 (and role4 with shared experts) for (P, H, I, E, k, capacity) *and* that
split is used. A request whose split fails validation, or that no bundle was built for, is reported
as skipped with the reason (and the splits the bundles do hold). Weights: the torch baselines' seeded BF16 draw
(``baselines.torch_grouped._weights``), quantised to MXFP4 (routed) and to the model's FP8 shared
recipe, so every implementation's output is comparable (cosine) at each point.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Optional

import torch

from gcmoe_runtime.numerics.recipes import SM90_INTERMEDIATE_SCALE_GROUP
from .impl import Prepared, RankContext, register, register_parametric
from .routing import Layout, PointInputs
from .shapes import ModelShape

MODES = {  # name -> (green contexts, overlap)
    "gc-moe": (True, True),
    "gc-moe-nooverlap": (True, False),
    "gc-moe-serial": (False, False),
    "gc-moe-streams": (False, True),
}
ROLE_TEXT = {
    "gc-moe": "green contexts (dispatch | compute), role1 concurrent with role2/role4, then role3",
    "gc-moe-nooverlap": "green contexts (dispatch | compute), roles serialised: role1 -> role2 -> role4 -> role3",
    "gc-moe-serial": "baseline (a): no green contexts, roles serialised in the primary context (full device)",
    "gc-moe-streams": "baseline (b): no green contexts, role1 concurrent with role2/role4 in the primary context",
}
PRECISION = ("E4M3 act (FP32 scale/K128) x MXFP4 weights (E2M1, UE8M0/K32), FP32 accumulate; SwiGLU x routing "
             f"weight requantised to E4M3 (UE8M0 scale/K{SM90_INTERMEDIATE_SCALE_GROUP}); BF16 out; "
             "shared experts E4M3 weights (model's UE8M0 recipe)")
ENV_BUNDLES = "GCMOE_BENCH_BUNDLES"
ENV_TIMEOUT = "GCMOE_BENCH_TIMEOUT_S"
DEFAULT_BUNDLE_DIR = Path(__file__).resolve().parents[2] / "build" / "bundles"  # git-ignored
ARCH = "sm_90a"

# One model's transformed weights stay cached between the modes/requests of a sweep (the ablation
# loads the same model 14 times); replaced when the model, rank or seed changes.
_weights_cache: dict[tuple, tuple] = {}


def parse_request(arg: str | int | None) -> int | None:
    if arg is None:
        return None
    try:
        r = int(arg)
    except (TypeError, ValueError):
        raise ValueError(f"dispatch-SM request {arg!r}: expected an integer (e.g. gc-moe@16)") from None
    if r < 1:
        raise ValueError(f"dispatch-SM request {r}: must be >= 1")
    return r


def bundle_paths(env: dict | None = None) -> list[Path]:
    env = os.environ if env is None else env
    raw = env.get(ENV_BUNDLES) or str(DEFAULT_BUNDLE_DIR)
    out: list[Path] = []
    for part in raw.split(os.pathsep):
        if not part:
            continue
        p = Path(part)
        out += sorted(p.glob("*.gcmoe")) if p.is_dir() else [p]
    return out


def bundle_covers(records: Any, shape: ModelShape, world: int, shared: bool, split: tuple[int, int]) -> str | None:
    """None when the records hold role1/2/3 (+ role4) for this shape, P and (dispatch, compute) split,
    else what is missing (with the splits that exist for the shape)."""
    base = {"ranks": world, "hidden": shape.hidden, "experts": shape.experts, "top_k": shape.top_k,
            "capacity": shape.capacity}
    part = {"dispatch_sms": split[0], "compute_sms": split[1]}
    need = [("role1", base), ("role2", {**base, "intermediate": shape.intermediate}), ("role3", base)]
    if shared and shape.shared_experts:
        need.append(("role4", {"hidden": shape.hidden, "intermediate": shape.intermediate,
                               "capacity": shape.capacity}))
    for role, want in need:
        pool = [r for r in records if r.role == role and r.arch == ARCH
                and all(r.variant.get(k) == v for k, v in want.items())]
        if not any(all(r.variant.get(k) == v for k, v in part.items()) for r in pool):
            have = sorted({(r.variant.get("dispatch_sms"), r.variant.get("compute_sms")) for r in pool})
            return (f"no {role} ({ARCH}) for " + " ".join(f"{k}={v}" for k, v in want.items())
                    + f" at split {split[0]}/{split[1]}" + (f" (built splits: {have})" if have else ""))
    return None


def find_bundle(shape: ModelShape, world: int, shared: bool, split: tuple[int, int],
                paths: list[Path]) -> tuple[Path | None, list[str]]:
    """The first bundle that covers the shape and split, and why each earlier one did not."""
    from gcmoe_runtime.artifacts.bundle import open_bundle

    why: list[str] = []
    for p in paths:
        if not p.is_file():
            why.append(f"{p}: no such file")
            continue
        try:
            b = open_bundle(p)
        except Exception as e:  # a damaged bundle is reported, not used
            why.append(f"{p}: {type(e).__name__}: {e}")
            continue
        miss = bundle_covers(b.records, shape, world, shared, split)
        if miss is None:
            return p, why
        why.append(f"{p.name}: {miss}")
    return None, why


def _quant_routed(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[G, N, K] BF16 -> MXFP4 (packed uint8 [G, N, K/2], UE8M0 uint8 [G, N, K/32]), expert by expert."""
    from gcmoe_runtime.numerics.quant import quantize_mxfp4

    g, n, k = w.shape
    q = torch.empty(g, n, k // 2, dtype=torch.uint8, device=w.device)
    s = torch.empty(g, n, k // 32, dtype=torch.uint8, device=w.device)
    for e in range(g):
        q[e], s[e] = quantize_mxfp4(w[e])
    return q, s


class GcMoeBench:
    """One mode of the gc-moe operator as an `Implementation`. ``api``: the operator module (default
    ``gcmoe_runtime.moe``); ``split``: ``(device, request) -> partition`` (default
    ``green.full_device_partition``). CPU tests pass stand-ins for both."""

    def __init__(self, mode: str, request: str | int | None = None, api: Any = None, env: dict | None = None,
                 split: Any = None):
        if mode not in MODES:
            raise ValueError(f"gc-moe mode {mode!r}: one of {sorted(MODES)}")
        self.mode = mode
        self.request = parse_request(request)
        self.green_contexts, self.overlap = MODES[mode]
        self.name = mode if self.request is None else f"{mode}@{self.request}"
        self.precision = PRECISION
        self._api = api
        self._split_fn = split
        self._env = os.environ if env is None else env
        self._m: dict | None = None
        self._loaded: dict = {}

    # -- the interface ----------------------------------------------------------------------------
    def describe(self) -> dict:
        d = {"name": self.name, "precision": self.precision, "mode": self.mode, "roles": ROLE_TEXT[self.mode],
             "green_contexts": self.green_contexts, "overlap": self.overlap,
             "dispatch_request": self.request if self.request is not None else
             f"env GC_MOE_SM90_DISPATCH_SMS or default 4 ({self._env.get('GC_MOE_SM90_DISPATCH_SMS') or 'unset'})",
             "device_wait_timeout_s": self._timeout_s()}
        d.update(self._loaded)
        return d

    def unsupported(self, shape: ModelShape, layout: Layout, shared: bool) -> str | None:
        if layout.emulated:
            return (f"gc-moe runs real expert parallelism only (world == ep); one GPU measuring one rank's share "
                    f"at EP={layout.ep} would need kernels built for E/{layout.ep} experts and no peers")
        if self._api is None:
            if not torch.cuda.is_available():
                return "gc-moe needs a CUDA device (sm_90a)"
            if torch.cuda.get_device_capability() != (9, 0):
                return f"gc-moe's bundles are sm_90a; this GPU is sm_{''.join(map(str, torch.cuda.get_device_capability()))}"
        paths = bundle_paths(self._env)
        if not paths:
            return f"no bundles found ({ENV_BUNDLES}={self._env.get(ENV_BUNDLES) or DEFAULT_BUNDLE_DIR})"
        try:
            split = self._device_split()
        except ValueError as e:  # PartitionError: the request's split fails the rules of paper §4.2
            self._loaded = {"split": {"requested": self.request, "invalid": str(e)}}
            return f"dispatch-SM request {self.request}: {e}"
        self._loaded = {"split": {"requested": self.request, "dispatch_sms": split[0], "compute_sms": split[1]}}
        path, why = find_bundle(shape, layout.world, shared, split, paths)
        if path is None:
            return (f"no bundle holds {shape.name} at P={layout.world}{' with shared experts' if shared else ''} "
                    f"for split {split[0]}/{split[1]} (request {self.request or 'default'}): " + "; ".join(why)
                    + " (build the model's or the ablation manifest: docs/BENCHMARK.md)")
        return None

    def _device_split(self) -> tuple[int, int]:
        """(dispatch, compute) SMs the driver gives this request on the current device (no green contexts)."""
        fn = self._split_fn
        if fn is None:
            from gcmoe_runtime.green import full_device_partition as fn
        gp = fn(torch.cuda.current_device() if self._api is None else 0, self.request)
        return gp.dispatch_sms, gp.compute_sms

    def load_model(self, shape: ModelShape, layout: Layout, ctx: RankContext, shared: bool) -> None:
        self.unload_model()
        api = self._api
        if api is None:
            from gcmoe_runtime import moe as api  # noqa: N813
        path, why = find_bundle(shape, layout.world, shared, self._device_split(), bundle_paths(self._env))
        if path is None:
            raise RuntimeError("no bundle: " + "; ".join(why))
        dev = ctx.device
        use_shared = bool(shared and shape.shared_experts)
        buf = api.get_symm_buffer_for_gc_moe(
            ctx.group, shape.experts, shape.capacity, shape.top_k, shape.hidden, shape.intermediate,
            bundle=str(path), shared_experts=use_shared, dispatch_sms=self.request,
            device=dev.index if dev.type == "cuda" else None, timeout_ns=int(self._timeout_s() * 1e9),
            green_contexts=self.green_contexts, overlap=self.overlap)
        w1, w2, sw = self._weights(api, shape, layout, ctx, use_shared, buf.k_interleave)
        gp = buf.partition
        self._loaded = {"bundle": str(path), "split": self._loaded.get("split"), "partition": {
            "requested": gp.requested, "dispatch_sms": gp.dispatch_sms, "compute_sms": gp.compute_sms,
            "total_sms": gp.total_sms, "alignment": gp.alignment, "green_contexts": gp.green_contexts,
            "workqueue": gp.workqueue_status}}
        self._m = {"api": api, "buf": buf, "w1": w1, "w2": w2, "shared": sw, "shape": shape, "device": dev}

    def unload_model(self) -> None:
        self._m = None

    def force_tile(self, tile: Optional[tuple]) -> None:
        """Run role2's ``tile`` = (BM, threads[, ctas_per_sm[, w1_split]]) at every T instead of the heuristic's
        (``moe.get_symm_buffer_for_gc_moe(tile=...)``; the loaded bundle must hold that variant): for instruments
        that compare builds at one point (``bench.task_trace``)."""
        if self._m is None:
            raise RuntimeError(f"{self.name}: force_tile() before load_model()")
        buf = self._m["buf"]
        buf.forced_tile = self._m["api"].check_forced_tile(tile, buf.bm_candidates)
        buf.kernel_cache.clear()

    def clone_layers(self, n: int) -> None:
        """``n`` more layers on the loaded buffer, ``prepare(point, layer=1..n)``: copies of the loaded weights at other
        addresses — a model's other layers as the L2 meets them (the same bytes per call, other lines), for
        instruments that replay them between one layer's recorded replays (``bench timeline --flush layers``)."""
        if self._m is None:
            raise RuntimeError(f"{self.name}: clone_layers() before load_model()")
        if not (isinstance(n, int) and n >= 1):
            raise ValueError(f"{self.name}: clone_layers n={n!r} must be an integer >= 1")
        m = self._m
        m["layers"] = [tuple(None if w is None else _clone_tensors(w) for w in (m["w1"], m["w2"], m["shared"]))
                       for _ in range(n)]

    def workspace(self) -> Any:
        """The loaded model's symmetric workspace (``gcmoe_runtime.workspace.symmetric``): for instruments that read
        a region after a replay (``bench.task_trace``)."""
        if self._m is None:
            raise RuntimeError(f"{self.name}: workspace() before load_model()")
        return self._m["buf"].ws

    def prepare(self, point: PointInputs, layer: int = 0) -> Prepared:
        """The call on ``point``; ``layer`` k >= 1: with the k-th weights of :meth:`clone_layers` (the same buffer)."""
        from gcmoe_runtime.numerics.quant import quantize_e4m3_fp32_k128

        from .baselines.torch_grouped import SWIGLU_ALPHA, SWIGLU_CLAMP

        m = self._m
        if m is None:
            raise RuntimeError(f"{self.name}: prepare() before load_model()")
        layers = m.get("layers", [])
        if not (isinstance(layer, int) and 0 <= layer <= len(layers)):
            raise ValueError(f"{self.name}: layer={layer!r}: 0 or one of the {len(layers)} clone_layers() layers")
        api, buf, dev, shape = m["api"], m["buf"], m["device"], m["shape"]
        T, lo = point.tokens_per_rank, point.own_token_lo
        if point.plan.resident_tokens != T:
            raise RuntimeError(f"{self.name}: {point.plan.resident_tokens} resident rows, expected own T={T}")
        xq, xs = quantize_e4m3_fp32_k128(point.activations(dev))
        buf.x[:T].copy_(xq)
        buf.x_sf[:T].copy_(xs)
        buf.topk_idx[:T].copy_(point.topk_ids[lo:lo + T].to(dev, torch.int32))
        buf.topk_weights[:T].copy_(point.topk_weights[lo:lo + T].to(dev, torch.float32))
        y = torch.empty(T, shape.hidden, dtype=torch.bfloat16, device=dev)
        w1, w2, sw = layers[layer - 1] if layer else (m["w1"], m["w2"], m["shared"])

        def step() -> None:
            api.fp8_fp4_gc_moe(y, w1, w2, buf, shared_weights=sw, activation_alpha=SWIGLU_ALPHA,
                               activation_clamp=SWIGLU_CLAMP)

        part = self._loaded["partition"]
        info = {"mode": self.mode, "dispatch_sms": part["dispatch_sms"], "compute_sms": part["compute_sms"],
                "green_contexts": part["green_contexts"], "overlap": self.overlap}
        return Prepared(step=step, output=y, info=info, close=buf.check_errors)

    # -- helpers ------------------------------------------------------------------------------------
    def _timeout_s(self) -> float:
        raw = self._env.get(ENV_TIMEOUT, "10")
        try:
            v = float(raw)
        except ValueError:
            raise ValueError(f"{ENV_TIMEOUT}={raw!r}: expected seconds (a number > 0)") from None
        if not v > 0:
            raise ValueError(f"{ENV_TIMEOUT}={raw!r}: must be > 0")
        return v

    def _weights(self, api: Any, shape: ModelShape, layout: Layout, ctx: RankContext, shared: bool,
                 k_interleave: bool = False) -> tuple:
        from gcmoe_runtime.numerics.quant import quantize_fp8_weight

        from .baselines.torch_grouped import _weights as draw

        key = (shape, layout, ctx.rank, ctx.seed, shared, str(ctx.device), id(api), k_interleave)
        hit = _weights_cache.get(key)
        if hit is not None:
            return hit
        _weights_cache.clear()
        n = shape.experts // layout.ep
        # the torch baselines' draw (same seeds), so outputs compare across implementations
        w1, w2 = draw(shape, n, shape.intermediate, 1000 + 7 * ctx.seed + ctx.rank, ctx.device)
        q1 = _quant_routed(w1)
        del w1
        q2 = _quant_routed(w2)
        del w2
        sw = None
        if shared:
            recipe = (1, 128, 128) if shape.shared_k_group == 128 else (1, 1, 32)
            s1, s2 = draw(shape, 1, shape.shared_experts * shape.shared_inter, 5000 + ctx.seed + ctx.rank, ctx.device)
            a, sa = quantize_fp8_weight(s1[0], recipe, "shared w1")
            b, sb = quantize_fp8_weight(s2[0], recipe, "shared w2")
            # role4's tiled layout (the raw tensors computed NaN / garbage in the 2026-11-30 run)
            t1, t2, sw = api.transform_weights_for_gc_moe(q1, q2, shared_weights=(a, sa, b, sb), shared_recipe=recipe,
                                                          k_interleave=k_interleave)
            del a, sa, b, sb
        else:
            t1, t2 = api.transform_weights_for_gc_moe(q1, q2, k_interleave=k_interleave)
        del q1, q2
        _weights_cache[key] = (t1, t2, sw)
        return t1, t2, sw


def _clone_tensors(obj: Any) -> Any:
    """A copy of a weights dataclass (``moe.GcMoeWeights``, ``SharedSM90Weights``) whose tensor fields are cloned."""
    return dataclasses.replace(obj, **{f.name: getattr(obj, f.name).clone() for f in dataclasses.fields(obj)
                                       if isinstance(getattr(obj, f.name), torch.Tensor)})


for _mode in MODES:  # noqa: B023 - each lambda binds its own mode
    register(_mode, (lambda m: lambda: GcMoeBench(m))(_mode))
    register_parametric(_mode, (lambda m: lambda arg: GcMoeBench(m, arg))(_mode))
