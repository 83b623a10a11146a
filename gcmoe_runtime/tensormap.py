"""TMA descriptors: ``cuTensorMapEncodeTiled`` from a recorded encoding plus the bound tensor.

The build records everything that shapes a kernel's shared-memory view (dtype, box, element
strides, interleave, swizzle, L2 promotion, OOB fill; ``TensorMapEncoding``) in the driver's dimension
order — dimension 0 is the innermost, contiguous one. At run time the tensor supplies its address
and its torch-style sizes/strides (outermost first, strides in elements); :func:`prepare` turns
both into the driver's arguments and checks the TMA rules up front so a bad binding fails with the
field and the rule, not an opaque CUDA_ERROR_INVALID_VALUE. :func:`encode` calls the driver and
returns the 128 descriptor bytes, which are passed to the kernel by value (gcmoe_runtime.abi).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Sequence

from gcmoe_runtime.abi import TENSORMAP_BYTES
from gcmoe_runtime.artifacts.record import TensorMapEncoding

#: Bytes per element of each CUtensorMapDataType (packed-4-bit types count their 16-element units).
DTYPE_BYTES = {
    "CU_TENSOR_MAP_DATA_TYPE_UINT8": 1,
    "CU_TENSOR_MAP_DATA_TYPE_UINT16": 2,
    "CU_TENSOR_MAP_DATA_TYPE_UINT32": 4,
    "CU_TENSOR_MAP_DATA_TYPE_INT32": 4,
    "CU_TENSOR_MAP_DATA_TYPE_UINT64": 8,
    "CU_TENSOR_MAP_DATA_TYPE_INT64": 8,
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT16": 2,
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT32": 4,
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT64": 8,
    "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16": 2,
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ": 4,
    "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32": 4,
    "CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ": 4,
}
#: Swizzle span in bytes: the inner box dimension may not exceed it.
SWIZZLE_SPAN = {
    "CU_TENSOR_MAP_SWIZZLE_NONE": None,
    "CU_TENSOR_MAP_SWIZZLE_32B": 32,
    "CU_TENSOR_MAP_SWIZZLE_64B": 64,
    "CU_TENSOR_MAP_SWIZZLE_128B": 128,
}


class TensorMapError(ValueError):
    pass


@dataclass(frozen=True)
class TiledArgs:
    """Arguments of cuTensorMapEncodeTiled, innermost dimension first."""

    dtype: str
    rank: int
    address: int
    global_dim: tuple[int, ...]
    global_strides: tuple[int, ...]  # bytes, dims 1..rank-1
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str


def prepare(enc: TensorMapEncoding, address: int, sizes: Sequence[int], strides: Sequence[int]) -> TiledArgs:
    """Check the TMA rules and produce the driver arguments. ``sizes``/``strides`` are torch order."""
    where = f"tensor map {enc.param!r} over {enc.tensor!r}"
    if enc.dtype not in DTYPE_BYTES:
        raise TensorMapError(f"{where}: dtype {enc.dtype} not supported; known: {sorted(DTYPE_BYTES)}")
    if enc.swizzle not in SWIZZLE_SPAN:
        raise TensorMapError(f"{where}: unknown swizzle {enc.swizzle}")
    if not 1 <= enc.rank <= 5:
        raise TensorMapError(f"{where}: rank {enc.rank} outside 1..5")
    if len(sizes) != enc.rank or len(strides) != enc.rank:
        raise TensorMapError(f"{where}: the bound tensor has {len(sizes)} dims, the encoding expects {enc.rank}")
    if len(enc.box) != enc.rank or len(enc.element_strides) != enc.rank:
        raise TensorMapError(f"{where}: box/element_strides length differs from rank {enc.rank}")
    esize = DTYPE_BYTES[enc.dtype]
    dims = tuple(int(s) for s in reversed(sizes))
    estr = tuple(int(s) for s in reversed(strides))
    if estr[0] != 1:
        raise TensorMapError(f"{where}: innermost dimension must be contiguous (stride 1), got {estr[0]}")
    if address % 16:
        raise TensorMapError(f"{where}: global address {address:#x} is not 16-byte aligned")
    for d, n in enumerate(dims):
        if not 1 <= n <= (1 << 32):
            raise TensorMapError(f"{where}: global dim {d} = {n} outside 1..2^32")
    gstrides = tuple(s * esize for s in estr[1:])
    for d, s in enumerate(gstrides, start=1):
        if s % 16 or s >= (1 << 40):
            raise TensorMapError(f"{where}: stride of dim {d} = {s} bytes must be a multiple of 16 and < 2^40")
    for d, b in enumerate(enc.box):
        if not 1 <= b <= 256:
            raise TensorMapError(f"{where}: box dim {d} = {b} outside 1..256")
        if not 1 <= enc.element_strides[d] <= 8:
            raise TensorMapError(f"{where}: element stride {d} = {enc.element_strides[d]} outside 1..8")
    inner_bytes = enc.box[0] * esize
    if enc.interleave == "CU_TENSOR_MAP_INTERLEAVE_NONE" and inner_bytes % 16:
        raise TensorMapError(f"{where}: inner box {enc.box[0]} x {esize} B = {inner_bytes} B is not a multiple of 16")
    span = SWIZZLE_SPAN[enc.swizzle]
    if span is not None and enc.interleave == "CU_TENSOR_MAP_INTERLEAVE_NONE" and inner_bytes > span:
        raise TensorMapError(f"{where}: inner box {inner_bytes} B exceeds the {enc.swizzle} span of {span} B")
    return TiledArgs(
        dtype=enc.dtype, rank=enc.rank, address=int(address), global_dim=dims, global_strides=gstrides,
        box=tuple(enc.box), element_strides=tuple(enc.element_strides), interleave=enc.interleave,
        swizzle=enc.swizzle, l2_promotion=enc.l2_promotion, oob_fill=enc.oob_fill,
    )


def pack_opaque(words: Sequence[int]) -> bytes:
    """The 128 descriptor bytes from CUtensorMap.opaque (16 u64 words)."""
    if len(words) * 8 != TENSORMAP_BYTES:
        raise TensorMapError(f"CUtensorMap has {len(words)} words, expected {TENSORMAP_BYTES // 8}")
    return struct.pack(f"<{len(words)}Q", *[int(w) & 0xFFFFFFFFFFFFFFFF for w in words])


def encode(args: TiledArgs, drv: Any = None) -> bytes:
    """Encode with the driver; returns the 128 bytes to pass by value."""
    from gcmoe_runtime import driver

    drv = drv or driver.REAL
    cu = drv.cu
    tmap = drv.call(
        "cuTensorMapEncodeTiled",
        getattr(cu.CUtensorMapDataType, args.dtype),
        args.rank,
        args.address,
        [cu.cuuint64_t(d) for d in args.global_dim],
        [cu.cuuint64_t(s) for s in args.global_strides],
        [cu.cuuint32_t(b) for b in args.box],
        [cu.cuuint32_t(e) for e in args.element_strides],
        getattr(cu.CUtensorMapInterleave, args.interleave),
        getattr(cu.CUtensorMapSwizzle, args.swizzle),
        getattr(cu.CUtensorMapL2promotion, args.l2_promotion),
        getattr(cu.CUtensorMapFloatOOBfill, args.oob_fill),
    )
    return pack_opaque([int(w) for w in tmap.opaque])


def encode_for_tensor(enc: TensorMapEncoding, tensor: Any, drv: Any = None) -> bytes:
    """Encode for a torch tensor (address, sizes and strides taken from it)."""
    return encode(prepare(enc, tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride())), drv)
