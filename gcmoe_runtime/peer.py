"""The 592-byte by-value peer descriptor (paper §4.1, §5; sizes in gcmoe_runtime.abi).

Layout (little-endian, 8-byte aligned): ``base`` (u64, this rank's workspace base address),
``offsets[72]`` (s64, ``peer_base[r] - base`` for r < P, zero after), ``rank`` (s32), 4 bytes of
zero padding. A kernel reaches rank r's copy of any workspace field at ``base + offsets[r] +
field_offset``: the signed delta maps any peer's base without a table of pointers.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

from gcmoe_runtime.abi import PEER_DESC_BYTES, PEER_MAX_RANKS

_FMT = f"<Q{PEER_MAX_RANKS}qi4x"
assert struct.calcsize(_FMT) == PEER_DESC_BYTES

_S64_MIN, _S64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(frozen=True)
class PeerDescriptor:
    base: int
    offsets: tuple[int, ...]  # length P (P <= 72)
    rank: int

    @property
    def world_size(self) -> int:
        return len(self.offsets)

    def peer_base(self, r: int) -> int:
        return self.base + self.offsets[r]


def make_peer_descriptor(peer_bases: Sequence[int], rank: int) -> PeerDescriptor:
    """Descriptor for ``rank`` from every rank's workspace base address (index = rank)."""
    p = len(peer_bases)
    if p < 1:
        raise ValueError("peer descriptor: need at least one rank's base address")
    if p > PEER_MAX_RANKS:
        raise ValueError(
            f"peer descriptor: P={p} ranks exceeds the by-value descriptor's limit of "
            f"{PEER_MAX_RANKS} (592-byte ABI, gcmoe_runtime.abi.PEER_MAX_RANKS)"
        )
    if not 0 <= rank < p:
        raise ValueError(f"peer descriptor: rank {rank} outside [0, {p})")
    bases = [int(b) for b in peer_bases]
    for r, b in enumerate(bases):
        if b <= 0 or b >= (1 << 64):
            raise ValueError(f"peer descriptor: rank {r} base address {b:#x} is not a valid device address")
    base = bases[rank]
    offsets = tuple(b - base for b in bases)
    for r, off in enumerate(offsets):
        if not _S64_MIN <= off <= _S64_MAX:  # pragma: no cover - impossible for 64-bit addresses
            raise ValueError(f"peer descriptor: offset of rank {r} does not fit in s64")
    return PeerDescriptor(base=base, offsets=offsets, rank=rank)


def pack_peer_descriptor(desc: PeerDescriptor) -> bytes:
    """The 592 parameter bytes of ``desc``."""
    offs = list(desc.offsets) + [0] * (PEER_MAX_RANKS - len(desc.offsets))
    return struct.pack(_FMT, desc.base, *offs, desc.rank)


def unpack_peer_descriptor(raw: bytes, world_size: int) -> PeerDescriptor:
    """Inverse of :func:`pack_peer_descriptor` (for tests and device read-back checks)."""
    if len(raw) != PEER_DESC_BYTES:
        raise ValueError(f"peer descriptor: {len(raw)} bytes, expected {PEER_DESC_BYTES}")
    vals = struct.unpack(_FMT, raw)
    base, offs, rank = vals[0], vals[1 : 1 + PEER_MAX_RANKS], vals[-1]
    if any(offs[world_size:]):
        raise ValueError(f"peer descriptor: non-zero offsets beyond P={world_size}")
    return PeerDescriptor(base=base, offsets=tuple(offs[:world_size]), rank=rank)
