"""Kernel argument buffers packed from the recorded parameter schema (paper §5, DESIGN.md §3).

A kernel's formals are described by the artifact's ``ParamSpec`` tuple (order, name, kind, size,
alignment, offset). :func:`validate_schema` checks the schema itself, :func:`check_against_driver`
compares it with what ``cuKernelGetParamInfo`` reports for the loaded kernel, and
:func:`pack_args` builds the by-value argument buffer. :class:`KernelArgs` keeps that buffer and
a ``void*[]`` of pointers into it alive, which is what ``cuLaunchKernel``/graph kernel nodes take
as ``kernelParams`` (the driver copies each parameter by value at launch / node creation).
"""
from __future__ import annotations

import ctypes
import struct
from typing import Any, Mapping, Sequence

from gcmoe_runtime.abi import (
    PARAM_KINDS,
    PEER_DESC_ALIGN,
    PEER_DESC_BYTES,
    SCALAR_SIZES,
    TENSORMAP_ALIGN,
    TENSORMAP_BYTES,
)
from gcmoe_runtime.artifacts.record import ParamSpec

_KIND_SIZE = {**SCALAR_SIZES, "tensormap": TENSORMAP_BYTES, "peer_desc": PEER_DESC_BYTES}
_KIND_ALIGN = {**SCALAR_SIZES, "tensormap": TENSORMAP_ALIGN, "peer_desc": PEER_DESC_ALIGN}
_STRUCT = {"ptr": "<Q", "u32": "<I", "s32": "<i", "u64": "<Q", "s64": "<q", "f32": "<f"}
assert set(_KIND_SIZE) == set(PARAM_KINDS)


class ParamSchemaError(ValueError):
    """The recorded schema is inconsistent, or disagrees with the loaded kernel."""


def validate_schema(kernel: str, params: Sequence[ParamSpec]) -> None:
    """Indices 0..n-1 in order, sizes/alignments per kind, aligned and non-overlapping offsets."""
    end = 0
    for i, p in enumerate(params):
        where = f"kernel {kernel!r} param #{i} {p.name!r} ({p.kind})"
        if p.index != i:
            raise ParamSchemaError(f"{where}: index {p.index} != position {i}")
        if p.size != _KIND_SIZE[p.kind]:
            raise ParamSchemaError(f"{where}: size {p.size} != {_KIND_SIZE[p.kind]} for its kind")
        if p.align < _KIND_ALIGN[p.kind]:
            raise ParamSchemaError(f"{where}: alignment {p.align} < required {_KIND_ALIGN[p.kind]}")
        # Offsets are the driver's (cuKernelGetParamInfo). The parameter bank itself starts 16 bytes
        # past a 64-byte boundary on sm_90a, so ptxas puts a 64-aligned param at 48 mod 64 (measured
        # on H200); relative to the buffer start only 16-byte alignment is guaranteed.
        if p.offset % min(p.align, 16):
            raise ParamSchemaError(f"{where}: offset {p.offset} not a multiple of its alignment {p.align}")
        if p.offset < end:
            raise ParamSchemaError(f"{where}: offset {p.offset} overlaps the previous parameter (ends at {end})")
        end = p.offset + p.size
    if len({p.name for p in params}) != len(params):
        raise ParamSchemaError(f"kernel {kernel!r}: duplicate parameter names")


def check_against_driver(kernel: str, params: Sequence[ParamSpec], driver_info: Sequence[tuple[int, int]]) -> None:
    """Compare the schema with ``cuKernelGetParamInfo`` (offset, size) per index."""
    if len(driver_info) != len(params):
        raise ParamSchemaError(
            f"kernel {kernel!r}: the cubin has {len(driver_info)} parameters, the artifact record "
            f"lists {len(params)} — record and cubin disagree; rebuild the bundle"
        )
    for p, (off, size) in zip(params, driver_info):
        if (off, size) != (p.offset, p.size):
            raise ParamSchemaError(
                f"kernel {kernel!r} param #{p.index} {p.name!r} ({p.kind}): record says offset "
                f"{p.offset} size {p.size}, cuKernelGetParamInfo says offset {off} size {size}"
            )


def _as_bytes(kernel: str, p: ParamSpec, value: Any) -> bytes:
    where = f"kernel {kernel!r} param {p.name!r} ({p.kind})"
    if p.kind in ("tensormap", "peer_desc"):
        raw = bytes(value)
        if len(raw) != p.size:
            raise ParamSchemaError(f"{where}: got {len(raw)} bytes, expected {p.size}")
        return raw
    if p.kind == "ptr" and hasattr(value, "data_ptr"):
        value = value.data_ptr()
    if p.kind == "f32":
        return struct.pack("<f", float(value))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParamSchemaError(f"{where}: expected an int, got {type(value).__name__}")
    try:
        return struct.pack(_STRUCT[p.kind], value)
    except struct.error as e:
        raise ParamSchemaError(f"{where}: value {value} does not fit: {e}") from None


def pack_args(kernel: str, params: Sequence[ParamSpec], values: Mapping[str, Any]) -> bytes:
    """The packed parameter buffer; every formal must be given, unknown names are refused."""
    names = [p.name for p in params]
    missing = [n for n in names if n not in values]
    extra = sorted(set(values) - set(names))
    if missing or extra:
        raise ParamSchemaError(f"kernel {kernel!r}: missing arguments {missing}, unknown arguments {extra}")
    total = params[-1].offset + params[-1].size if params else 0
    buf = bytearray(total)
    for p in params:
        buf[p.offset : p.offset + p.size] = _as_bytes(kernel, p, values[p.name])
    return bytes(buf)


def signature(params: Sequence[ParamSpec]) -> tuple:
    """A hashable parameter signature for graph cache keys."""
    return tuple((p.name, p.kind, p.size, p.offset) for p in params)


class KernelArgs:
    """A packed argument buffer (64-byte aligned) plus the ``void*[]`` the driver reads."""

    def __init__(self, kernel: str, params: Sequence[ParamSpec], packed: bytes):
        self.kernel = kernel
        self.params = tuple(params)
        self.packed = bytes(packed)
        n = max(len(packed), 1)
        self._raw = ctypes.create_string_buffer(n + TENSORMAP_ALIGN)
        base = ctypes.addressof(self._raw)
        self.address = (base + TENSORMAP_ALIGN - 1) // TENSORMAP_ALIGN * TENSORMAP_ALIGN
        ctypes.memmove(self.address, packed, len(packed))
        self._ptrs = (ctypes.c_void_p * max(len(params), 1))(*[self.address + p.offset for p in params])

    @classmethod
    def build(cls, kernel: str, params: Sequence[ParamSpec], values: Mapping[str, Any]) -> "KernelArgs":
        return cls(kernel, params, pack_args(kernel, params, values))

    @property
    def kernel_params(self) -> int:
        """Address of the ``void*[]``: the ``kernelParams`` argument of launches and kernel nodes."""
        return ctypes.addressof(self._ptrs)
