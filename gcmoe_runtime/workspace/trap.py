"""Device-timeout trap records: how a kernel that gives up waiting tells the host why.

A waiting kernel that exceeds its timeout writes a 4-word record — ``magic``, ``code``, ``expected``,
``observed`` — to host-mapped pinned memory with system-scope stores, fences, then executes ``trap``.
The trap kills the CUDA context, but host-mapped memory stays readable, so :meth:`TrapRecord.check`
can turn the opaque launch failure into a recognisable ``DeviceTimeoutError``. Kernels (build side)
import the constants from here.
"""
from __future__ import annotations

from typing import Any

TRAP_MAGIC = 0x474D5430  # "GMT0"
#: code -> what timed out
TRAP_CODES = {
    1: "handshake self-test: consumer waited for the producer's generation-tagged counter",
    2: "l1_full_count: role2 waited for a token-ring block",
    3: "tag-1 barrier: a peer rank never arrived",
    4: "combine readiness: a peer rank never published",
    5: "receive-count arrival check: a (rank, dispatch SM) contribution is missing (expected dispatch_sms*P)",
    6: "l1_empty_count: role1 waited for role2 to release a token-ring block's previous generation",
    7: "grid sync: a CTA of the same kernel never arrived (partition smaller than the grid?)",
    8: "token pull: a bulk copy from a peer into the dispatch staging buffer never completed",
    9: "l2_full_mask: role2 W2 waited for the W1 tiles (mask bits) of a token-ring block",
    10: "l2_empty_count: role2 W1 waited for the previous generation's W2 tasks of a token-ring block",
    11: "token-ring header: role2 found a block header whose (pool block, generation) is not the one it acquired",
    12: "receive counts: role2 waited for role1 to publish this replay's per-expert counts (dispatch_sms arrivals)",
    13: "role2 weight pipeline: a shared-memory stage (mbarrier) never completed",
    14: "role4 shared expert: a W2 task waited for the shared W1 tiles of its token block (shared_sync)",
}


class DeviceTimeoutError(RuntimeError):
    """A device-side wait exceeded its timeout and the kernel trapped."""

    def __init__(self, code: int, expected: int, observed: int):
        self.code, self.expected, self.observed = code, expected, observed
        what = TRAP_CODES.get(code, f"unknown wait (code {code})")
        super().__init__(
            f"gcmoe device timeout (trap): {what}; expected generation {expected}, observed {observed}. "
            f"The CUDA context is no longer usable; restart the process."
        )


class TrapRecord:
    """16 bytes of zeroed, pinned, host-mapped memory; ``address`` is what kernels receive."""

    def __init__(self) -> None:
        import torch

        self._buf = torch.zeros(4, dtype=torch.int32, pin_memory=True)

    @property
    def address(self) -> int:
        return self._buf.data_ptr()  # UVA: the same address is valid on the device

    def words(self) -> tuple[int, int, int, int]:
        return tuple(int(x) & 0xFFFFFFFF for x in self._buf.tolist())  # type: ignore[return-value]

    def check(self) -> None:
        """Raise DeviceTimeoutError if a kernel left a record."""
        magic, code, expected, observed = self.words()
        if magic == TRAP_MAGIC:
            raise DeviceTimeoutError(code, expected, observed)

    @staticmethod
    def decode(words: Any) -> DeviceTimeoutError | None:
        magic, code, expected, observed = (int(w) & 0xFFFFFFFF for w in words)
        return DeviceTimeoutError(code, expected, observed) if magic == TRAP_MAGIC else None
