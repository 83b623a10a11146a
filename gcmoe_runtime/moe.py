"""The public operator API, Hopper flavour of paper Listing 1 (§5 "Distributed interface").

::

    buffer = get_symm_buffer_for_gc_moe(group, num_experts, capacity, topk, hidden, intermediate,
                                        bundle="model-sm90a.gcmoe")            # once, outside capture
    w1, w2 = transform_weights_for_gc_moe((w1_q, w1_sf), (w2_q, w2_sf),
                                          k_interleave=buffer.k_interleave)    # once per weight set
    buffer.x[:T].copy_(x_fp8); buffer.x_sf[:T].copy_(x_sf)                      # E4M3FN, FP32 per 128
    buffer.topk_idx[:T].copy_(topk_idx); buffer.topk_weights[:T].copy_(topk_weights)
    y = torch.empty((T, hidden), dtype=torch.bfloat16, device=x_fp8.device)
    fp8_fp4_gc_moe(y, w1, w2, buffer)                                           # eager or under capture

One process per GPU, peer-accessible GPUs, a torch.distributed group (``group=None``: one GPU).
The call writes ``y`` in place, replays (or, under ``torch.cuda.graph`` capture, attaches) the cached
per-layer child graph (``gcmoe_runtime.graph``): role1 on the dispatch green context beside role2 on
the compute context, then role3 (+ role4 when shared experts are fused). ``T = y.shape[0]`` may
change from call to call up to the capacity; ``T = 0`` is valid (the rank still takes part in the
exchange). Every check that can fail is made on the host before anything is launched.

Kernel arguments are packed by name from the kernels' recorded schemas: the workspace regions as
``o_<region>`` offsets (``gcmoe_runtime.operator.values``), the transformed weights as
``w1_tiles, w1_scales, w1_factor, w2_tiles, w2_scales, w2_factor`` (and ``shared_w1, shared_w1_scale,
shared_w2, shared_w2_scale``), ``y``, ``ntok``, the activation options ``act_alpha, act_clamp``.

Status: the whole layer (role1, the ring-consuming role2, role3, role4 for shared experts) is GPU-verified through
this API on one and two H200s for the shipped manifests (``results/operator/``: accuracy per model x P x
routed/shared, every forced tile, 10 000 graph replays, the absent-peer trap). A bundle without role4 stops a
``shared_experts=True`` buffer with an error naming the missing variant instead of launching a partial layer.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import torch

from gcmoe_runtime.operator.values import DEFAULT_TIMEOUT_NS, kernel_args, role_values

ARCH = "sm_90a"
MMA_TYPES = ("fp8xfp4",)
ROUTED_RECIPE = "e4m3-fp32k128_x_mxfp4"


class GcMoeError(ValueError):
    """Bad input to the operator API (names the field, the value and the limit)."""


@dataclass
class GcMoeWeights:
    """One transformed routed matrix (SM90 layout, ``gcmoe_runtime.numerics.transforms_sm90``)."""

    name: str  # "w1" | "w2"
    tiles: torch.Tensor
    scales: torch.Tensor
    expert_factor: torch.Tensor
    experts: int
    rows: int  # N: 2I for w1, H for w2
    k: int  # K: H for w1, I for w2
    k_interleave: bool = False  # the tiles' K order inside each K128 step (numerics.sm90_layout)


@dataclass
class GcMoeBuffer:
    """The symmetric workspace of one layer shape plus everything a call needs (built once)."""

    group: Any
    rank: int
    world_size: int
    device: torch.device
    num_experts: int
    capacity: int
    topk: int
    hidden: int
    intermediate: int
    shared_experts: bool
    timeout_ns: int
    loader: Any
    partition: Any
    ws: Any
    trap: Any
    bm_candidates: tuple
    x: torch.Tensor = field(repr=False, default=None)
    x_sf: torch.Tensor = field(repr=False, default=None)
    topk_idx: torch.Tensor = field(repr=False, default=None)
    topk_weights: torch.Tensor = field(repr=False, default=None)
    overlap: bool = True  # False: role2 (and role4) after role1 in the layer graph (ablation / baseline (a))
    forced_tile: Optional[tuple] = None  # (BM, threads, ctas_per_sm, w1_split) for every call instead of the heuristic
    #: the K order the bundle's role2 kernels read the routed tiles in (the manifest target's ``k_interleave``):
    #: transform the weights with ``transform_weights_for_gc_moe(..., k_interleave=buffer.k_interleave)``
    k_interleave: bool = False
    kernel_cache: dict = field(repr=False, default_factory=dict)  # layer_kernels' lookups, per variant choice

    @property
    def layout(self):
        return self.ws.layout

    @property
    def experts_per_rank(self) -> int:
        return self.num_experts // self.world_size

    def check_errors(self) -> None:
        """Raise DeviceTimeoutError if a kernel of this buffer trapped on a device timeout."""
        self.trap.check()


def _capturing() -> bool:
    """True under CUDA stream capture (False on a machine without CUDA, where torch cannot capture)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _need_int(name: str, v: Any, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise GcMoeError(f"gcmoe: {name}={v!r} must be an integer >= {lo}")
    return v


def _group_info(group: Any) -> tuple[int, int]:
    if group is None:
        return 0, 1
    import torch.distributed as dist

    return dist.get_rank(group), dist.get_world_size(group)


def _check_peer_access(group: Any, device: int, world: int) -> None:
    """Every rank on one host with peer access to every other rank's GPU (NVLink)."""
    if world == 1:
        return
    import torch.distributed as dist

    mine = (socket.gethostname(), device, str(getattr(torch.cuda.get_device_properties(device), "uuid", device)))
    every: list = [None] * world
    dist.all_gather_object(every, mine, group=group)
    hosts = {h for h, _, _ in every}
    if len(hosts) > 1:
        raise GcMoeError(f"gcmoe: the group spans hosts {sorted(hosts)}; GC-MoE needs one NVLink domain "
                         "(peer-accessible GPUs of one host)")
    visible = torch.cuda.device_count()
    for r, (_, dev, _) in enumerate(every):
        if dev == device or dev >= visible:
            continue  # a GPU this process cannot see is checked by the symmetric-memory rendezvous
        if not torch.cuda.can_device_access_peer(device, dev):
            raise GcMoeError(f"gcmoe: GPU {device} (this rank) has no peer access to GPU {dev} of rank {r}; "
                             "the group's GPUs must be peer-accessible (NVLink/P2P)")


def _bundle_bms(loader: Any, *, ranks: int, hidden: int, experts: int, topk: int, capacity: int) -> tuple:
    recs = [r for r in loader.bundle.records if r.role == "role1" and r.arch == ARCH
            and all(r.variant.get(k) == v for k, v in (("ranks", ranks), ("hidden", hidden), ("experts", experts),
                                                       ("top_k", topk), ("capacity", capacity)))]
    if not recs:
        raise GcMoeError(f"gcmoe: the bundle has no role1 ({ARCH}) for ranks={ranks} hidden={hidden} "
                         f"experts={experts} top_k={topk} capacity={capacity}; add this shape (and P={ranks} to "
                         "targets[].ranks) to the model manifest and rebuild the bundle")
    return tuple(sorted({int(r.variant["bm"]) for r in recs}))


def _bundle_k_interleave(loader: Any, *, ranks: int, hidden: int, experts: int) -> bool:
    """The routed tiles' K order of the bundle's role2 kernels for this shape: one order for all of them (a bundle is
    built from one manifest target, whose ``k_interleave`` sets every role2 variant's)."""
    got = {bool(int(r.variant.get("k_interleave", 0))) for r in loader.bundle.records
           if r.role == "role2" and r.arch == ARCH and r.variant.get("ranks") == ranks
           and r.variant.get("hidden") == hidden and r.variant.get("experts") == experts}
    if len(got) > 1:
        raise GcMoeError("gcmoe: the bundle's role2 kernels mix k_interleave=0 and 1 for one shape; rebuild it from "
                         "one manifest target")
    return got.pop() if got else False


def _check_row_order(role1: Any, role2: Any) -> None:
    """A ``k_interleave`` build's W1 ring rows are permuted by exactly one party (``numerics.sm90_layout`` "K order
    inside a K128 step"): role1 (its ``k_interleave`` 1) exactly where role2 expects them so (its ``k_interleave``
    2); a bundle that pairs them otherwise would multiply rows in the wrong K order."""
    by_role1 = int(role1.get("k_interleave", 0)) == 1
    expected = int(role2.get("k_interleave", 0)) == 2
    if by_role1 != expected:
        raise GcMoeError(f"gcmoe: the bundle's role1 (k_interleave={role1.get('k_interleave', 0)}) and role2 "
                         f"(k_interleave={role2.get('k_interleave', 0)}) at BM {role2.get('bm')} disagree on who "
                         "puts W1's ring rows in the interleaved K order; rebuild the bundle from one manifest")


def get_symm_buffer_for_gc_moe(group: Any, num_experts: int, capacity: int, topk: int, hidden: int,
                               intermediate: int, *, bundle: str, mma_type: str = "fp8xfp4",
                               shared_experts: bool = False, dispatch_sms: Optional[int] = None,
                               device: Optional[int] = None, timeout_ns: int = DEFAULT_TIMEOUT_NS,
                               green_contexts: bool = True, overlap: bool = True,
                               tile: Optional[tuple] = None) -> GcMoeBuffer:
    """Allocate and rendezvous the symmetric workspace (collective over ``group``; not under capture).

    ``green_contexts=False`` / ``overlap=False`` are the benchmark's baselines (issue 7): the same kernels with
    every node in the primary context (``green.full_device_partition``) and/or the roles serialised.
    ``tile=(BM, threads)``, ``(BM, threads, ctas_per_sm)`` or ``(BM, threads, ctas_per_sm, w1_split)`` forces role2's
    variant for every call instead of the token-bound heuristic (to test or time each compiled variant; the bundle
    must hold it; without ``ctas_per_sm`` the tile's default build, ``heuristics.sm90_ctas_per_sm``; without
    ``w1_split`` the build without split-K code, 1)."""
    from gcmoe_runtime import green
    from gcmoe_runtime.loader import KernelLoader
    from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout
    from gcmoe_runtime.workspace.symmetric import get_workspace
    from gcmoe_runtime.workspace.trap import TrapRecord

    if mma_type not in MMA_TYPES:
        raise GcMoeError(f"gcmoe: mma_type={mma_type!r} is not supported on Hopper; supported: {MMA_TYPES}")
    for n, v in (("num_experts", num_experts), ("capacity", capacity), ("topk", topk), ("hidden", hidden),
                 ("intermediate", intermediate), ("timeout_ns", timeout_ns)):
        _need_int(n, v)
    if _capturing():
        raise GcMoeError("gcmoe: get_symm_buffer_for_gc_moe allocates and rendezvouses memory; call it before "
                         "torch.cuda.graph capture")
    rank, world = _group_info(group)
    if num_experts % world:
        raise GcMoeError(f"gcmoe: num_experts={num_experts} is not divisible by the group size {world}")
    if topk > num_experts:
        raise GcMoeError(f"gcmoe: topk={topk} exceeds num_experts={num_experts}")
    dev = torch.cuda.current_device() if device is None else int(device)
    _check_peer_access(group, dev, world)
    loader = KernelLoader.open(str(bundle))
    bms = _bundle_bms(loader, ranks=world, hidden=hidden, experts=num_experts, topk=topk, capacity=capacity)
    forced = check_forced_tile(tile, bms)
    with torch.cuda.device(dev):
        torch.zeros(1, device=dev)  # primary context current
        gp = green.get_partition(dev, dispatch_sms) if green_contexts else green.full_device_partition(dev, dispatch_sms)
        built = sorted({(r.variant.get("dispatch_sms"), r.variant.get("compute_sms")) for r in loader.bundle.records
                        if r.role == "role1" and r.variant.get("ranks") == world})
        if (gp.dispatch_sms, gp.compute_sms) not in built:
            raise GcMoeError(f"gcmoe: this GPU's green partition is {gp.dispatch_sms}/{gp.compute_sms} dispatch/compute "
                             f"SMs, the bundle's role1 kernels were built for {built}; set the manifest's "
                             "dispatch_sms_request (or GC_MOE_SM90_DISPATCH_SMS) so the two agree and rebuild")
        layout = WorkspaceLayout.build(LayoutSpec(
            arch=ARCH, world_size=world, num_experts=num_experts, topk=topk, hidden=hidden,
            intermediate=intermediate, capacity=capacity, bm_candidates=bms, compute_sms=gp.compute_sms,
            shared_experts=bool(shared_experts), whole_pool=not overlap))
        layout.check_partition(gp.compute_sms)
        ws = get_workspace(layout, group, dev)
    buf = GcMoeBuffer(group=group, rank=rank, world_size=world, device=torch.device("cuda", dev),
                      num_experts=num_experts, capacity=capacity, topk=topk, hidden=hidden,
                      intermediate=intermediate, shared_experts=bool(shared_experts), timeout_ns=int(timeout_ns),
                      loader=loader, partition=gp, ws=ws, trap=TrapRecord(), bm_candidates=bms, overlap=bool(overlap),
                      forced_tile=forced,
                      k_interleave=_bundle_k_interleave(loader, ranks=world, hidden=hidden, experts=num_experts))
    buf.x = ws.view("x").view(torch.float8_e4m3fn)
    buf.x_sf = ws.view("x_sf")
    buf.topk_idx = ws.view("topk_idx")
    buf.topk_weights = ws.view("topk_weights")
    return buf


def transform_weights_for_gc_moe(l1_weights: Sequence[torch.Tensor], l2_weights: Sequence[torch.Tensor],
                                 shared_weights: Optional[Sequence[torch.Tensor]] = None,
                                 shared_recipe: Sequence[int] = (1, 128, 128), k_interleave: bool = False):
    """Canonical MXFP4 ``(w1 uint8 [E, 2I, H/2], w1_scale uint8 [E, 2I, H/32])`` and ``(w2 [E, H, I/2],
    w2_scale [E, H, I/32])`` of this rank's local experts -> the SM90 kernel layout (window repack,
    gate/up interleave, lane-permuted tiles). Runs on the tensors' device and current stream, once
    per weight set, outside capture.

    With ``shared_weights = (w1 e4m3 [2Is, H], w1 UE8M0 codes, w2 e4m3 [H, Is], w2 codes)`` in ``shared_recipe``
    (``quant.quantize_fp8_weight``) also returns the role4 layout
    (``numerics.transforms_sm90_shared.SharedSM90Weights``; pass it as ``fp8_fp4_gc_moe(shared_weights=...)``):
    ``(w1, w2, shared)``. ``k_interleave``: the routed tiles' K order inside each K128 step, the one the bundle's role2
    kernels read (``buffer.k_interleave``; ``numerics.sm90_layout``); the call checks that they agree."""
    if shared_weights is not None:
        from gcmoe_runtime.numerics.transforms_sm90_shared import transform_shared_sm90

        if len(shared_weights) != 4:
            raise GcMoeError("gcmoe: shared_weights are (w1 e4m3, w1 scale codes, w2 e4m3, w2 scale codes)")
        try:
            sh = transform_shared_sm90(*shared_weights, recipe=shared_recipe)
        except ValueError as e:
            raise GcMoeError(f"gcmoe: {e}") from None
        return (*transform_weights_for_gc_moe(l1_weights, l2_weights, k_interleave=k_interleave), sh)
    from gcmoe_runtime.numerics.reference import RoutedWeights
    from gcmoe_runtime.numerics.transforms_sm90 import transform_weights_sm90

    if len(l1_weights) != 2 or len(l2_weights) != 2:
        raise GcMoeError("gcmoe: l1_weights and l2_weights are (packed E2M1 uint8, UE8M0 uint8 scales) pairs")
    try:
        rw = RoutedWeights(l1_weights[0], l1_weights[1], l2_weights[0], l2_weights[1])
    except ValueError as e:
        raise GcMoeError(f"gcmoe: {e}") from None
    devs = {t.device for t in (*l1_weights, *l2_weights)}
    if len(devs) != 1:
        raise GcMoeError(f"gcmoe: weights live on several devices {sorted(map(str, devs))}")
    m1, m2 = transform_weights_sm90(rw, k_interleave=bool(k_interleave))
    e, h, i = rw.num_experts, rw.hidden, rw.intermediate
    return (GcMoeWeights("w1", m1.tiles, m1.kernel_scales(), m1.expert_factor, e, 2 * i, h, bool(k_interleave)),
            GcMoeWeights("w2", m2.tiles, m2.kernel_scales(), m2.expert_factor, e, h, i, bool(k_interleave)))


def _check_call(y: Any, w1: Any, w2: Any, buffer: GcMoeBuffer, activation: str, recipe: str,
                shared: Optional[Sequence[torch.Tensor]]) -> int:
    if not isinstance(buffer, GcMoeBuffer):
        raise GcMoeError(f"gcmoe: buffer must come from get_symm_buffer_for_gc_moe, got {type(buffer).__name__}")
    if not isinstance(y, torch.Tensor) or y.dtype != torch.bfloat16 or y.dim() != 2:
        raise GcMoeError(f"gcmoe: y must be a 2-D torch.bfloat16 tensor [T, hidden], got "
                         f"{getattr(y, 'dtype', type(y).__name__)} {tuple(getattr(y, 'shape', ()))}")
    if y.device != buffer.device:
        raise GcMoeError(f"gcmoe: y is on {y.device}, the buffer on {buffer.device}")
    if y.shape[1] != buffer.hidden or not y.is_contiguous():
        raise GcMoeError(f"gcmoe: y must be contiguous [T, {buffer.hidden}], got {tuple(y.shape)}")
    T = int(y.shape[0])
    if T > buffer.capacity:
        raise GcMoeError(f"gcmoe: T={T} tokens exceeds the buffer capacity {buffer.capacity} "
                         "(allocate the buffer with a larger capacity; the manifest's targets[].capacity bounds it)")
    for w, name, rows, k in ((w1, "w1", 2 * buffer.intermediate, buffer.hidden),
                             (w2, "w2", buffer.hidden, buffer.intermediate)):
        if not isinstance(w, GcMoeWeights):
            raise GcMoeError(f"gcmoe: {name} is not transformed ({type(w).__name__}); pass the output of "
                             "transform_weights_for_gc_moe")
        if w.name != name or (w.experts, w.rows, w.k) != (buffer.experts_per_rank, rows, k):
            raise GcMoeError(f"gcmoe: {name} holds {w.name} [E={w.experts}, {w.rows}, {w.k}], the buffer needs "
                             f"[E={buffer.experts_per_rank} local experts, {rows}, {k}]")
        if w.tiles.device != buffer.device:
            raise GcMoeError(f"gcmoe: {name} is on {w.tiles.device}, the buffer on {buffer.device}")
        if w.k_interleave != buffer.k_interleave:  # same shapes, other K order: silently wrong numbers otherwise
            raise GcMoeError(f"gcmoe: {name} was transformed with k_interleave={w.k_interleave}, the bundle's role2 "
                             f"kernels read k_interleave={buffer.k_interleave} (the manifest target's k_interleave): "
                             "transform_weights_for_gc_moe(..., k_interleave=buffer.k_interleave)")
        # the kernels' operand layouts (numerics.sm90_layout): a wrong shape here means an untransformed or
        # differently-permuted tensor, which would compute silently wrong numbers
        for t, what, want in ((w.tiles, "tiles", (w.experts, rows // 64, k // 128, 4096)),
                              (w.scales, "scales", (w.experts, rows // 64, k // 128, 256))):
            if tuple(t.shape) != want or t.dtype != torch.uint8 or not t.is_contiguous():
                raise GcMoeError(f"gcmoe: {name}.{what} must be contiguous uint8 {list(want)} (the SM90 kernel "
                                 f"layout from transform_weights_for_gc_moe), got {t.dtype} {list(t.shape)}")
    if activation != "swiglu":
        raise GcMoeError(f"gcmoe: activation={activation!r}; only 'swiglu' is built")
    if recipe != ROUTED_RECIPE:
        raise GcMoeError(f"gcmoe: recipe={recipe!r}; the Hopper path is {ROUTED_RECIPE!r}")
    if buffer.shared_experts != (shared is not None):
        raise GcMoeError("gcmoe: shared-expert weights must be given exactly when the buffer was created with "
                         f"shared_experts=True (buffer: {buffer.shared_experts})")
    if shared is not None:
        _check_shared_layout(shared, buffer)
    if not _capturing() and T:
        idx = buffer.topk_idx[:T]
        bad = (idx < -1) | (idx >= buffer.num_experts)
        if bool(bad.any()):
            t, s = (int(v) for v in torch.nonzero(bad)[0])
            raise GcMoeError(f"gcmoe: topk_idx[{t}, {s}] = {int(idx[t, s])} is outside [-1, {buffer.num_experts})")
        if not bool(torch.isfinite(buffer.topk_weights[:T]).all()):
            raise GcMoeError("gcmoe: topk_weights holds a non-finite value")
    return T


def _check_shared_layout(shared: Sequence[Any], buffer: GcMoeBuffer) -> None:
    """The four shared tensors must be role4's tiled layout (``transform_weights_for_gc_moe(...,
    shared_weights=...)``): raw E4M3 weights and UE8M0 codes run without a fault and compute garbage (the
    2026-11-30 benchmark passed them untransformed and got NaN / cosine 0.16)."""
    from gcmoe_runtime.numerics.transforms_sm90_shared import CODE_TILE_BYTES, SCALE_TILE_BYTES

    names = ("shared_w1", "shared_w1_scale", "shared_w2", "shared_w2_scale")
    if len(shared) != 4:
        raise GcMoeError(f"gcmoe: shared_weights must be {names}")
    for t, n, last in zip(shared, names, (CODE_TILE_BYTES, SCALE_TILE_BYTES) * 2):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8 or t.dim() != 3 or t.shape[2] != last \
                or not t.is_contiguous() or t.device != buffer.device:
            raise GcMoeError(
                f"gcmoe: {n} must be a contiguous uint8 [rows/64, K/128, {last}] tensor on {buffer.device} (the role4 "
                f"layout: pass the third result of transform_weights_for_gc_moe(..., shared_weights=...)), got "
                f"{getattr(t, 'dtype', type(t).__name__)} {list(getattr(t, 'shape', ()))}")
    w1, s1, w2, s2 = shared
    h, two_i = buffer.hidden, 2 * w2.shape[1] * 128
    want = {"shared_w1": (two_i // 64, h // 128), "shared_w1_scale": (two_i // 64, h // 128),
            "shared_w2": (h // 64, two_i // 2 // 128), "shared_w2_scale": (h // 64, two_i // 2 // 128)}
    for t, n in zip(shared, names):
        if tuple(t.shape[:2]) != want[n]:
            raise GcMoeError(f"gcmoe: {n} has tiles {list(t.shape[:2])}, expected {list(want[n])} for hidden={h} "
                             f"and shared intermediate {two_i // 2} (from shared_w2)")


def select_tile(buffer: GcMoeBuffer, T: int) -> tuple[int, int, int, int]:
    """role2's (BM, threads, ctas_per_sm, w1_split) for a call on ``T`` tokens: the buffer's forced tile, else the
    token-bound heuristic (``heuristics.choose_tile``)."""
    from gcmoe_runtime.heuristics import choose_tile

    if buffer.forced_tile is not None:
        return buffer.forced_tile
    t = choose_tile(ARCH, max(T, 1), ranks=buffer.world_size, top_k=buffer.topk, experts=buffer.num_experts,
                    hidden=buffer.hidden, intermediate=buffer.intermediate, compute_sms=buffer.partition.compute_sms,
                    candidates=buffer.bm_candidates, capacity=buffer.capacity)
    return t.bm, t.threads, t.ctas_per_sm, t.w1_split


def check_forced_tile(tile: Any, bm_candidates: Sequence[int]) -> Optional[tuple[int, int, int, int]]:
    """Validate ``get_symm_buffer_for_gc_moe(tile=(BM, threads[, ctas_per_sm[, w1_split]]))``: None, or a BM among the
    bundle's candidates, 256 / 384 threads, 1 / 2 CTAs per SM (default: the tile's default build) and W1 split
    1 / ``heuristics.W1_SPLIT`` (default 1); whether the bundle holds that exact variant is checked at the call.
    Returns the (BM, threads, ctas_per_sm, w1_split) tuple."""
    from gcmoe_runtime.heuristics import W1_SPLIT, sm90_ctas_per_sm

    if tile is None:
        return None
    if not (isinstance(tile, (tuple, list)) and len(tile) in (2, 3, 4) and all(isinstance(v, int) for v in tile)):
        raise GcMoeError(f"gcmoe: tile={tile!r} must be (BM, threads), (BM, threads, ctas_per_sm) or (BM, threads, "
                         "ctas_per_sm, w1_split), ints")
    bm, threads = tile[:2]
    if bm not in bm_candidates:
        raise GcMoeError(f"gcmoe: tile BM={bm} is not among the bundle's BM candidates {tuple(bm_candidates)}")
    if threads not in (256, 384):
        raise GcMoeError(f"gcmoe: tile threads={threads} must be 256 or 384")
    ctas = tile[2] if len(tile) >= 3 else sm90_ctas_per_sm(bm, threads)
    if ctas not in (1, 2):
        raise GcMoeError(f"gcmoe: tile ctas_per_sm={ctas} must be 1 or 2")
    split = tile[3] if len(tile) == 4 else 1
    if split not in (1, W1_SPLIT):
        raise GcMoeError(f"gcmoe: tile w1_split={split} must be 1 or {W1_SPLIT}")
    return int(bm), int(threads), int(ctas), int(split)


def layer_kernels(buffer: GcMoeBuffer, tile: tuple[int, int, int, int], shared_bm: int, alpha: float,
                  clamp: float) -> dict:
    """The loaded kernel of every role for one call's variant choice (``tile`` = role2's (BM, threads, ctas_per_sm,
    w1_split), :func:`select_tile`), looked up in the bundle once per choice and buffer (a call repeats the same few
    choices; the lookup scans the bundle's records)."""
    from gcmoe_runtime.artifacts.bundle import BundleError

    bm, threads, ctas, split = tile
    choice = (bm, threads, ctas, split, shared_bm, alpha, clamp)
    hit = buffer.kernel_cache.get(choice)
    if hit is not None:
        return hit
    gp = buffer.partition
    shape = dict(arch=ARCH, ranks=buffer.world_size, top_k=buffer.topk, experts=buffer.num_experts,
                 hidden=buffer.hidden)
    # the partition is a compile-time property of role1/role3 (grid syncs over dispatch_sms CTAs, the
    # arrival check against dispatch_sms * P): only variants built for this very partition may run
    cap = dict(capacity=buffer.capacity, dispatch_sms=gp.dispatch_sms, compute_sms=gp.compute_sms)
    find = buffer.loader.kernel
    try:
        kernels = {
            "role1": find("role1", **shape, **cap, bm=bm),
            "role2": find("role2", **shape, **cap, bm=bm, threads=threads, ctas_per_sm=ctas, w1_split=split,
                          intermediate=buffer.intermediate, act_alpha=alpha, act_clamp=clamp),
        }
        n_shared = 0  # combine lanes beyond the k routed ones that role3 reduces
        if buffer.shared_experts:
            kernels["role4"] = find("role4", arch=ARCH, hidden=buffer.hidden, intermediate=buffer.intermediate,
                                    **cap, bm=shared_bm)
            n_shared = kernels["role4"].record.variant["shared_experts"]
        kernels["role3"] = find("role3", **shape, **cap, shared_experts=n_shared)
    except (LookupError, BundleError) as e:
        raise GcMoeError(f"gcmoe: the bundle cannot run this layer: {e}") from None
    _check_row_order(kernels["role1"].record.variant, kernels["role2"].record.variant)
    buffer.kernel_cache[choice] = kernels
    return kernels


def fp8_fp4_gc_moe(y: torch.Tensor, w1: GcMoeWeights, w2: GcMoeWeights, buffer: GcMoeBuffer, *,
                   recipe: str = ROUTED_RECIPE, activation: str = "swiglu", activation_alpha: float = 1.0,
                   activation_clamp: float = 10.0, shared_weights: Optional[Sequence[torch.Tensor]] = None,
                   expert_stats: bool = False) -> torch.Tensor:
    """One MoE layer on this rank's ``T = y.shape[0]`` tokens from ``buffer.x/x_sf/topk_*``; ``y``
    written in place (and returned). ``shared_weights``: the transformed shared expert (third result of
    ``transform_weights_for_gc_moe(..., shared_weights=...)``) when the buffer fuses shared experts. Collective: every rank of the group calls it."""
    from gcmoe_runtime.graph import RoleNode, get_layer_graph, role3_waits_for_role1
    from gcmoe_runtime.heuristics import choose_shared_bm, sm90_place_ctas, sm90_role4_edge, sm90_w1_prefetch_steps

    if hasattr(shared_weights, "args"):  # transform_weights_for_gc_moe's SharedSM90Weights
        shared_weights = shared_weights.args()
    T = _check_call(y, w1, w2, buffer, activation, recipe, shared_weights)
    gp = buffer.partition
    tile = select_tile(buffer, T)
    kernels = layer_kernels(buffer, tile, choose_shared_bm(max(T, 1), buffer.bm_candidates),
                            float(activation_alpha), float(activation_clamp))
    vals = role_values(buffer.ws, ntok=T, err=buffer.trap.address, timeout_ns=buffer.timeout_ns,
                       y=y.data_ptr(), stats=expert_stats)
    vals.update({"w1_tiles": w1.tiles.data_ptr(), "w1_scales": w1.scales.data_ptr(),
                 "w1_factor": w1.expert_factor.data_ptr(), "w2_tiles": w2.tiles.data_ptr(),
                 "w2_scales": w2.scales.data_ptr(), "w2_factor": w2.expert_factor.data_ptr(),
                 "act_alpha": float(activation_alpha), "act_clamp": float(activation_clamp)})
    if shared_weights is not None:
        names = ("shared_w1", "shared_w1_scale", "shared_w2", "shared_w2_scale")  # _check_call checked them
        vals.update({n: t.data_ptr() for n, t in zip(names, shared_weights)})
    edge = sm90_role4_edge(T) if "role4" in kernels and buffer.overlap else "full"
    # role2's CTAs start as role4's retire after the launch-order port: they take their index from where they run
    vals["place_ctas"] = sm90_place_ctas(T, edge)
    # role2's CTAs bring their first W1 task's weights into L2 while role1 still fills the ring
    vals["w1_prefetch_steps"] = sm90_w1_prefetch_steps(T, buffer.world_size, edge)
    roles = {r: RoleNode(k, kernel_args(k, vals)) for r, k in kernels.items()}
    graph = get_layer_graph(roles, gp, tokens=T, serialize_roots=not buffer.overlap, role4_edge=edge,
                            role3_after_role1=role3_waits_for_role1(buffer.world_size))
    stream = torch.cuda.current_stream(buffer.device)
    capturing = _capturing()
    with buffer.ws.call(int(stream.cuda_stream), capturing=capturing):
        graph.run(stream)
    return y


__all__ = ["GcMoeBuffer", "GcMoeError", "GcMoeWeights", "fp8_fp4_gc_moe", "get_symm_buffer_for_gc_moe",
           "transform_weights_for_gc_moe"]
