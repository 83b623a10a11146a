"""The activation tensor maps of role2's ``act_tma`` kernels: one fact, used by the runtime and the dev harness.

A role2 task reads its ring block's activations ``[BM tokens][K]`` (E4M3 bytes, rows of K bytes, blocks back to
back: ``ring_x`` / ``l2_x`` in :mod:`.layout`, or the dev harness's ``act``) a K chunk at a time. With
``Role2GemmConfig.act_tma`` each chunk arrives as ``KC/128`` boxes of ``[BM rows x 128 bytes]`` through one tensor
map over the whole ring (box ``j`` of chunk ``kc`` of block ``b`` at coordinates ``(kc*KC + 128 j, b*BM)``), in the
128-byte swizzle the kernel's wgmma descriptors expect (``gcmoe_build.kernels.sm90.wgmma_rs.smem_desc_sw128``).
The map is not a kernel parameter: its 128 bytes sit in global memory (64-byte aligned) and the kernel gets their
address (the ring kernel: the workspace's ``act_maps`` region, :func:`write_act_maps`), so the by-value ABI of the
ring kernel does not change shape.
"""
from __future__ import annotations

from typing import Any

from gcmoe_runtime.abi import TENSORMAP_BYTES
from gcmoe_runtime.artifacts.record import TensorMapEncoding
from gcmoe_runtime.tensormap import encode, prepare
from gcmoe_runtime.workspace.layout import ACT_MAP_BMS, act_map_slot

#: K bytes of one box: a 128-byte swizzle row (one K128 of E4M3)
BOX_K = 128


def act_encoding(bm: int, tensor: str = "act") -> TensorMapEncoding:
    """The encoding of a ring of ``bm``-token blocks: UINT8, rank 2 (K, rows), box (128, bm), 128-byte swizzle."""
    if bm not in ACT_MAP_BMS:
        raise ValueError(f"act tensor map: bm={bm} must be one of {ACT_MAP_BMS} (whole 8-row swizzle atoms, "
                         f"box rows <= 256)")
    return TensorMapEncoding(param="act_map", tensor=tensor, dtype="CU_TENSOR_MAP_DATA_TYPE_UINT8", rank=2,
                             box=(BOX_K, bm), element_strides=(1, 1), swizzle="CU_TENSOR_MAP_SWIZZLE_128B")


def encode_act_map(address: int, rows: int, k: int, bm: int, drv: Any = None, stride: int | None = None) -> bytes:
    """The 128 map bytes for ``rows`` activation rows of ``k`` bytes at ``address``, read in boxes of ``bm`` rows from
    blocks that start every ``stride`` rows (default ``bm``; the ring's ``bm_stride``: its largest BM): ``rows`` whole
    blocks, ``bm <= stride``, ``k`` a multiple of 128. (Until session 36 ``rows`` had to be whole ``bm`` boxes, which a
    ring of two 64-row blocks is not for BM 48: the capped-ring GPU test failed on it.)"""
    stride = bm if stride is None else stride
    if k % BOX_K:
        raise ValueError(f"act tensor map: K={k} must be a multiple of {BOX_K}")
    if bm > stride:
        raise ValueError(f"act tensor map: bm={bm} boxes overrun blocks of stride={stride} rows")
    if rows % stride:
        raise ValueError(f"act tensor map: rows={rows} must be whole blocks of {stride} rows")
    out = encode(prepare(act_encoding(bm), address, (rows, k), (k, 1)), drv)
    assert len(out) == TENSORMAP_BYTES
    return out


def write_act_maps(layout: Any, buf: Any, drv: Any = None) -> None:
    """Encode the ring's activation maps of every BM candidate (``ring_x`` for W1, ``l2_x`` for W2, whole rings:
    ``ring_blocks * bm_max`` rows, blocks at ``bm_stride = bm_max`` rows) for the workspace at ``buf`` (this rank's
    uint8 device tensor) into its ``act_maps`` region. Hopper layouts only (Blackwell's role2 has no such build)."""
    import torch

    if layout.spec.blackwell:
        return
    rows = layout.ring_blocks * layout.bm_max
    base = layout.offset("act_maps")
    for bm in sorted(set(layout.spec.bm_candidates) & set(ACT_MAP_BMS)):
        for mode, region, k in (("w1", "ring_x", layout.spec.hidden), ("w2", "l2_x", layout.spec.intermediate)):
            raw = encode_act_map(buf.data_ptr() + layout.offset(region), rows, k, bm, drv, stride=layout.bm_max)
            off = base + act_map_slot(mode, bm) * TENSORMAP_BYTES
            buf[off:off + TENSORMAP_BYTES].copy_(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
