"""The artifact record: everything the runtime needs to load and launch one compiled kernel.

A record is pure data (JSON). The builder fills it from the compiled PTX; the runtime checks
it against the driver (cuKernelGetParamInfo) before the first launch.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from gcmoe_runtime.abi import PARAM_KINDS

RECORD_FORMAT_VERSION = 1


def canonical_json(obj: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys, no whitespace) used for every hash we take."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ParamSpec:
    """One kernel formal parameter, in ABI order."""

    index: int
    name: str
    kind: str  # one of gcmoe_runtime.abi.PARAM_KINDS
    size: int
    align: int
    offset: int  # as cuKernelGetParamInfo reports it (from the cubin); a 64-aligned first param sits at 48 on sm_90a

    def __post_init__(self) -> None:
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"param {self.name!r}: unknown kind {self.kind!r}; known: {PARAM_KINDS}")


@dataclass(frozen=True)
class TensorMapEncoding:
    """How the runtime must encode one TMA descriptor (cuTensorMapEncodeTiled arguments).

    Global sizes and strides come from the bound tensor at run time; everything that shapes
    the kernel's shared-memory view (dtype, box, swizzle, interleave, fill, L2 promotion) is
    fixed at build time and recorded here.
    """

    param: str  # the ParamSpec.name this descriptor is passed as
    tensor: str  # the workspace/weight tensor it describes
    dtype: str  # CUtensorMapDataType enum name, e.g. "CU_TENSOR_MAP_DATA_TYPE_UINT8"
    rank: int
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: str = "CU_TENSOR_MAP_INTERLEAVE_NONE"
    swizzle: str = "CU_TENSOR_MAP_SWIZZLE_NONE"
    l2_promotion: str = "CU_TENSOR_MAP_L2_PROMOTION_NONE"
    oob_fill: str = "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"


@dataclass(frozen=True)
class LaunchFacts:
    block: tuple[int, int, int]
    cluster: tuple[int, int, int] = (1, 1, 1)
    dynamic_smem: int = 0
    #: how the grid is sized at run time: "dispatch_sms", "compute_sms", "compute_sms*<n>" (n co-resident CTAs
    #: per compute SM), "finalize_sms" or "fixed:<n>"
    grid: str = "fixed:1"


@dataclass(frozen=True)
class ArtifactRecord:
    key: str  # variant key (hex sha256)
    role: str
    arch: str
    kernel_name: str  # stable entry symbol in the cubin
    variant: dict[str, Any]  # the variant's parameters, as hashed into the key
    manifest: str  # source manifest name (for "add this entry" errors)
    compiler_identity: str  # digest of the compiler identity record
    cubin_sha256: str
    cubin_size: int
    ptx_sha256: str
    params: tuple[ParamSpec, ...]
    launch: LaunchFacts
    tensormaps: tuple[TensorMapEncoding, ...] = ()
    format_version: int = RECORD_FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ArtifactRecord":
        d = dict(d)
        if d.get("format_version") != RECORD_FORMAT_VERSION:
            raise ValueError(
                f"artifact record {d.get('key')}: format_version {d.get('format_version')} "
                f"!= supported {RECORD_FORMAT_VERSION}"
            )
        d["params"] = tuple(ParamSpec(**p) for p in d["params"])
        lf = dict(d["launch"])
        lf["block"] = tuple(lf["block"])
        lf["cluster"] = tuple(lf["cluster"])
        d["launch"] = LaunchFacts(**lf)
        d["tensormaps"] = tuple(
            TensorMapEncoding(**{**t, "box": tuple(t["box"]), "element_strides": tuple(t["element_strides"])})
            for t in d.get("tensormaps", ())
        )
        return cls(**d)

    def param_bytes(self) -> int:
        """Total size of the parameter buffer (last offset + size)."""
        if not self.params:
            return 0
        last = self.params[-1]
        return last.offset + last.size
