"""The peer descriptor as kernels see it (layout constants: ``gcmoe_runtime.abi``).

In the DSL the descriptor is a ``cute.Pointer`` to Int64 (declare it ``peer_desc`` in the ABI
plan); the ABI rewrite turns that pointer formal into the 592-byte by-value parameter and every
load through it into a generic load of the parameter. So a kernel must only *read* through it, and
only with plain indexing as done here (no stores, atomics or pointer comparisons: the rewrite
rejects them).
"""
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_ptr

from gcmoe_runtime.abi import (
    PEER_BASE_OFFSET,
    PEER_DESC_ALIGN,
    PEER_DESC_BYTES,
    PEER_OFFSETS_OFFSET,
    PEER_RANK_OFFSET,
)


def fake_peer_desc():
    """The trace-time stand-in for the descriptor (no memory behind it; never dereferenced)."""
    return make_ptr(cutlass.Int64, 0, cute.AddressSpace.gmem, assumed_align=PEER_DESC_ALIGN)


class PeerDesc:
    """Trace-time view of the descriptor inside a ``@cute.kernel``."""

    def __init__(self, ptr):
        self._i64 = cute.make_tensor(ptr, cute.make_layout(PEER_DESC_BYTES // 8))
        self._i32 = cute.make_tensor(
            cute.recast_ptr(ptr, dtype=cutlass.Int32), cute.make_layout(PEER_DESC_BYTES // 4)
        )

    def base(self):
        """This rank's symmetric-workspace base address (u64)."""
        return self._i64[PEER_BASE_OFFSET // 8]

    def offset(self, r):
        """Signed byte offset from ``base()`` to rank ``r``'s workspace."""
        return self._i64[PEER_OFFSETS_OFFSET // 8 + r]

    def rank(self):
        """This rank (Int32)."""
        return self._i32[PEER_RANK_OFFSET // 4]

    def peer_address(self, r, byte_offset=0):
        """Address of ``byte_offset`` inside rank ``r``'s workspace."""
        return self.base() + self.offset(r) + cutlass.Int64(byte_offset)
