import threading

import pytest

from gcmoe_runtime.abi import PEER_DESC_BYTES
from gcmoe_runtime.peer import unpack_peer_descriptor
from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout
from gcmoe_runtime.workspace.symmetric import (
    SymmetricWorkspace,
    WorkspaceBusyError,
    WorkspaceError,
    get_workspace,
)


class FakeEvent:
    instances = []

    def __init__(self):
        self.done = False
        self.stream = None
        FakeEvent.instances.append(self)

    def record_on(self, s):
        self.stream = s

    def query(self):
        return self.done


def layout(p=2):
    return WorkspaceLayout.build(LayoutSpec("sm_90a", p, 8 * p, 2, 256, 256, 16, (8, 16), 128))


def ws(p=2, rank=1):
    bases = [0x7000_0000_0000 + r * 0x10_0000_0000 for r in range(p)]
    return SymmetricWorkspace(layout(p), None, rank, bases, "g", event_factory=FakeEvent)


def test_peer_descriptor_and_addresses_from_layout():
    w = ws()
    assert len(w.peer_desc) == PEER_DESC_BYTES
    d = unpack_peer_descriptor(w.peer_desc, 2)
    assert d.rank == 1 and d.base == w.base and d.peer_base(0) == w.peer_bases[0]
    assert w.address("combine", 0) == w.peer_bases[0] + w.layout.offset("combine")
    assert w.address("l1_full_count") == w.base + w.layout.offset("l1_full_count")


def test_world_size_must_match_layout():
    with pytest.raises(WorkspaceError, match="layout is for P=2 ranks, the group has 3"):
        SymmetricWorkspace(layout(2), None, 0, [0x1000, 0x2000, 0x3000], "g")


def test_same_stream_calls_are_ordered_and_allowed():
    w = ws()
    with w.call(0x10):
        pass
    with w.call(0x10):  # previous still running, but same stream: stream order serialises them
        pass


def test_overlapping_call_on_other_stream_refused_until_previous_completes():
    w = ws()
    with w.call(0x10):
        pass
    with pytest.raises(WorkspaceBusyError, match="still running.*second workspace"):
        with w.call(0x20):
            pass
    FakeEvent.instances[-1].done = True
    with w.call(0x20):
        pass


def test_reentrant_or_concurrent_host_call_refused():
    w = ws()
    inside, release = threading.Event(), threading.Event()

    def first():
        with w.call(0x10):
            inside.set()
            release.wait(5)

    t = threading.Thread(target=first)
    t.start()
    inside.wait(5)
    with pytest.raises(WorkspaceBusyError, match="another call on it is in progress"):
        with w.call(0x10):
            pass
    release.set()
    t.join()
    with w.call(0x10):
        pass


def test_failed_call_releases_the_guard():
    w = ws()
    with pytest.raises(ValueError):
        with w.call(0x10):
            raise ValueError("boom")
    with w.call(0x10):
        pass


def test_setup_refused_under_capture(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(WorkspaceError, match="cannot run under stream capture"):
        get_workspace(layout(1))
