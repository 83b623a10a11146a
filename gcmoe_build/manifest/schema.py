"""The manifest schema (pydantic v2): a model's MoE shape, its activation, and the build targets.

Structure and types only are pydantic's job here (extra keys forbidden, strict types: no "3" -> 3,
no true -> 1, no 1.5 -> 1). Every value rule -- paper Appendix A and ours -- is checked by
``gcmoe_build.manifest.constraints`` from a model validator, so a Manifest object is always valid,
however it was made. Use ``gcmoe_build.manifest.load_manifest`` to read a file: it turns every
failure into a ManifestError naming file, field, value and limit.

Example (manifests/glm-5.2.yaml)::

    name: glm-5.2
    model: {hidden: 6144, intermediate: 2048, experts: 256, top_k: 8,
            shared_experts: {count: 1, k_group: 128}}
    activation: {kind: swiglu, alpha: 1.0, clamp: 10.0, fast_math: true}
    targets:
      - arch: sm_90a
        device: {name: H200, sms: 132, alignment: 8, min_partition: 8}
        ranks: [1, 2, 8]
        capacity: 256
        dispatch_sms_request: 4
        bm: auto
        recipe: {routed: e4m3-fp32k128_x_mxfp4, shared: 1x128x128}
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, model_validator
from pydantic_core import PydanticCustomError

from gcmoe_runtime.heuristics import (
    BM_CANDIDATES,
    DEFAULT_DISPATCH_REQUEST,
    Partition,
    arch_family,
    green_partition,
)

ARCHS = ("sm_90a", "sm_100a", "sm_103a")


def _bm_spec(value: Any) -> Union[str, list[int]]:
    """``bm: auto`` or a list of integers (membership is checked per arch by the constraints)."""
    if value == "auto" and isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    raise PydanticCustomError("bm_spec", "Input should be 'auto' or a list of integers",
                              {"expected": "'auto' or a list of integers"})


BmSpec = Annotated[Any, PlainValidator(_bm_spec)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SharedExperts(_Strict):
    """Shared experts (paper §4.5): FP8 weights, same H and I as a routed expert, one combine slot each."""

    count: int
    #: Shared weights' K scale group: 128 for the (1,128,128) recipe, 32 for (1,1,32). Null when count is 0.
    k_group: Union[int, None] = None


class ModelShape(_Strict):
    hidden: int  # H
    intermediate: int  # I (per expert; W1 is 2I x H, W2 is H x I)
    experts: int  # E, routed, global
    top_k: int  # k
    shared_experts: SharedExperts = Field(default_factory=lambda: SharedExperts(count=0))


class Activation(_Strict):
    kind: Literal["swiglu"]
    alpha: float  # SwiGLU sigmoid scale: silu(alpha * gate) style, > 0
    clamp: float  # |gate|, |up| clamp applied before the activation, > 0
    #: the sigmoid's reciprocal by rcp.approx (the SM90 role2 / role4 W1 epilogues); its exponent is ex2.approx
    #: either way
    fast_math: bool


class Device(_Strict):
    """The GPU a target is built for: its SM count and the green-context split rules its driver reports."""

    name: str
    sms: int
    alignment: int  # co-scheduling alignment of the SM split (8 on H200 / B300)
    min_partition: int  # minimum SM partition size (8 on H200)


class Recipe(_Strict):
    routed: str  # see limits.ROUTED_RECIPES
    shared: Union[str, None] = None  # see limits.SHARED_RECIPES; null without shared experts


class Target(_Strict):
    arch: Literal["sm_90a", "sm_100a", "sm_103a"]
    device: Device
    ranks: list[int]  # every expert-parallel world size P to build for
    capacity: int  # per-rank token capacity Tmax
    #: Dispatch SMs asked of the driver; the partition is driver-aligned (see ``partition``).
    #: Omitted: the arch default (SM90 4, SM100 16; paper Table 2).
    dispatch_sms_request: Union[int, None] = None
    bm: BmSpec = "auto"
    recipe: Recipe
    #: SM90 only: the routed FP4 tiles' K order inside each K128 step (``gcmoe_runtime.numerics.sm90_layout``, "K order
    #: inside a K128 step"): true gives each role2 consumer thread one K32 scale block per step (one decode table pair
    #: per row and step) at the price of permuting W1's activation rows (role2 per chunk below BM 48, role1 per row
    #: from BM 48: ``heuristics.sm90_role1_interleaves_rows``); the weights must then be transformed with
    #: ``transform_weights_for_gc_moe(..., k_interleave=True)``. Needs every reachable role2 tile to be a 384-thread
    #: one. The SM90 production manifests set it since session 51.
    k_interleave: bool = False

    @property
    def family(self) -> str:
        return arch_family(self.arch)

    @property
    def dispatch_request(self) -> int:
        if self.dispatch_sms_request is None:
            return DEFAULT_DISPATCH_REQUEST[self.family]
        return self.dispatch_sms_request

    @property
    def partition(self) -> Partition:
        """The green split the driver will produce for this device and request (validated)."""
        d = self.device
        return green_partition(d.sms, self.dispatch_request, d.alignment, d.min_partition)

    @property
    def bm_candidates(self) -> tuple[int, ...]:
        if self.bm == "auto":
            return BM_CANDIDATES[self.family]
        return tuple(sorted(self.bm))


class Manifest(_Strict):
    name: str
    model: ModelShape
    activation: Activation
    targets: list[Target]
    #: Also build the tiny self-test kernels (handshake, TMA peer probe) for every target.
    selftest_kernels: bool = False

    @model_validator(mode="after")
    def _envelope(self) -> "Manifest":
        from gcmoe_build.manifest.constraints import check_manifest

        problems = check_manifest(self)
        if problems:
            raise PydanticCustomError(
                "manifest_constraint",
                "{summary}",
                {"summary": "; ".join(f"{'.'.join(map(str, p[0]))} = {p[1]!r} violates {p[2]}" for p in problems),
                 "problems": problems},
            )
        return self
