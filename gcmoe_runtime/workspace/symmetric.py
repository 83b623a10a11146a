"""The symmetric workspace: one torch symmetric-memory allocation per (process group, layout).

:func:`get_workspace` allocates ``layout.total_bytes`` with ``torch.distributed._symmetric_memory``,
zeroes it (every signal starts at generation 0), writes role2's activation tensor maps into it
(:func:`~gcmoe_runtime.workspace.act_tma.write_act_maps`), and rendezvouses it once — at set-up, never under
stream capture — to learn every rank's base address, from which the 592-byte peer descriptor is
packed (gcmoe_runtime.peer). Multicast is never used (TORCH_SYMM_MEM_DISABLE_MULTICAST=1 is set
here if unset). With ``group=None`` the workspace is a single-rank (P = 1) plain device allocation.

The workspace is single-instance: :meth:`SymmetricWorkspace.call` brackets one operator call and
refuses (WorkspaceBusyError) a call that would overlap one still in flight — another host thread
inside a call, or a call on a different stream while the previous call's completion event has not
fired — instead of letting two replays corrupt the shared signals.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Callable

from gcmoe_runtime.peer import PeerDescriptor, make_peer_descriptor, pack_peer_descriptor
from gcmoe_runtime.workspace.act_tma import write_act_maps
from gcmoe_runtime.workspace.layout import WorkspaceLayout


class WorkspaceError(RuntimeError):
    pass


class WorkspaceBusyError(WorkspaceError):
    """A call would overlap another call in flight on the same workspace."""


class SymmetricWorkspace:
    def __init__(self, layout: WorkspaceLayout, buffer: Any, rank: int, peer_bases: list[int],
                 group_name: str | None, handle: Any = None, event_factory: Callable[[], Any] | None = None):
        if layout.spec.world_size != len(peer_bases):
            raise WorkspaceError(
                f"layout is for P={layout.spec.world_size} ranks, the group has {len(peer_bases)}"
            )
        self.layout = layout
        self.buffer = buffer
        self.rank = rank
        self.world_size = len(peer_bases)
        self.peer_bases = list(peer_bases)
        self.group_name = group_name
        self.handle = handle  # torch symmetric-memory handle (None for P = 1)
        self.peer: PeerDescriptor = make_peer_descriptor(self.peer_bases, rank)
        self.peer_desc: bytes = pack_peer_descriptor(self.peer)
        self._event_factory = event_factory
        self._lock = threading.Lock()
        self._in_call = False
        self._last: tuple[int, Any] | None = None

    @property
    def base(self) -> int:
        return self.peer_bases[self.rank]

    def view(self, name: str) -> Any:
        return self.layout.view(self.buffer, name)

    def address(self, name: str, rank: int | None = None) -> int:
        """Device address of region ``name`` in ``rank``'s copy (default: this rank)."""
        r = self.rank if rank is None else rank
        return self.peer_bases[r] + self.layout.offset(name)

    @contextlib.contextmanager
    def call(self, stream_handle: int, capturing: bool = False):
        """Bracket one operator call on ``stream_handle``; refuse overlapping calls."""
        with self._lock:
            if self._in_call:
                raise WorkspaceBusyError(
                    "gcmoe workspace is single-instance: another call on it is in progress (another thread); "
                    "allocate a second workspace for concurrent layers"
                )
            if not capturing and self._last is not None:
                last_stream, ev = self._last
                if last_stream != stream_handle and not ev.query():
                    raise WorkspaceBusyError(
                        f"gcmoe workspace is single-instance: the previous call on stream {last_stream:#x} is still "
                        f"running and this call is on stream {stream_handle:#x}; order the streams (wait on the "
                        f"previous one) or use a second workspace"
                    )
            self._in_call = True
        try:
            yield self
            if not capturing:
                ev = self._new_event()
                ev.record_on(stream_handle)
                self._last = (stream_handle, ev)
        finally:
            with self._lock:
                self._in_call = False

    def _new_event(self) -> Any:
        if self._event_factory is not None:
            return self._event_factory()
        return _TorchEvent()


class _TorchEvent:
    def __init__(self):
        import torch

        self._ev = torch.cuda.Event()

    def record_on(self, stream_handle: int) -> None:
        import torch

        self._ev.record(torch.cuda.ExternalStream(stream_handle))

    def query(self) -> bool:
        return self._ev.query()


_workspaces: dict[tuple, SymmetricWorkspace] = {}
_ws_lock = threading.Lock()


def get_workspace(layout: WorkspaceLayout, group: Any = None, device: int | None = None) -> SymmetricWorkspace:
    """The workspace for (group, layout, device), allocated and rendezvoused on first use."""
    import torch

    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    dev = torch.cuda.current_device() if device is None else device
    gname = None
    if group is not None:
        gname = group if isinstance(group, str) else group.group_name
    key = (gname, layout.digest(), dev)
    with _ws_lock:
        ws = _workspaces.get(key)
        if ws is not None:
            return ws
        if torch.cuda.is_current_stream_capturing():
            raise WorkspaceError(
                "gcmoe workspace set-up (allocation + rendezvous) cannot run under stream capture; "
                "create it once before torch.cuda.graph"
            )
        with torch.cuda.device(dev):
            if gname is None:
                buf = torch.zeros(layout.total_bytes, dtype=torch.uint8, device=dev)
                write_act_maps(layout, buf)
                torch.cuda.synchronize(dev)
                ws = SymmetricWorkspace(layout, buf, 0, [buf.data_ptr()], None)
            else:
                import torch.distributed as dist
                import torch.distributed._symmetric_memory as symm_mem

                if hasattr(symm_mem, "enable_symm_mem_for_group"):  # needed by older torch; no-op later
                    symm_mem.enable_symm_mem_for_group(gname)
                buf = symm_mem.empty(layout.total_bytes, dtype=torch.uint8, device=dev)
                buf.zero_()
                write_act_maps(layout, buf)
                torch.cuda.synchronize(dev)
                hdl = symm_mem.rendezvous(buf, gname)
                hdl.barrier()  # every rank's signals are zero before anyone publishes to a peer
                bases = [int(p) for p in hdl.buffer_ptrs]
                if bases[hdl.rank] != buf.data_ptr():
                    raise WorkspaceError("symmetric memory: own buffer pointer differs from the rendezvous table")
                if not isinstance(group, str) and dist.get_world_size(group) != hdl.world_size:
                    raise WorkspaceError("symmetric memory: rendezvous world size differs from the group size")
                ws = SymmetricWorkspace(layout, buf, int(hdl.rank), bases, gname, hdl)
        _workspaces[key] = ws
        return ws


def release_workspaces() -> None:
    with _ws_lock:
        _workspaces.clear()
