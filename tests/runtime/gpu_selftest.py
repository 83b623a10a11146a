"""GPU self-test harness (issue 3 evidence): the handshake kernels from a gcmoe-build bundle, loaded
through the runtime only, on a real green partition with a real workspace.

Used by test_gpu_runtime.py (one GPU), gpu_p2_worker.py (two GPUs, torchrun) and the no-JIT /
trap subprocesses. Evidence records go to the JSON-lines file named by GCMOE_EVIDENCE, if set.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = Path(os.environ.get("GCMOE_SELFTEST_BUNDLE", ROOT / "results/runtime/selftest-sm90a.gcmoe"))
ROLE_KERNELS = {
    "role1": "selftest_handshake_producer",
    "role2": "selftest_handshake_consumer",
    "role3": "selftest_handshake_finalize",
}
TIMEOUT_NS = 10_000_000_000  # 10 s: far above any legitimate wait here


def evidence(kind: str, **data) -> None:
    path = os.environ.get("GCMOE_EVIDENCE")
    rec = {"kind": kind, "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **data}
    print("EVIDENCE", json.dumps(rec, sort_keys=True), flush=True)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(rec, sort_keys=True) + "\n")


def small_layout(world_size: int, compute_sms: int):
    from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout

    return WorkspaceLayout.build(LayoutSpec(
        arch="sm_90a", world_size=world_size, num_experts=8 * world_size, topk=2, hidden=256,
        intermediate=256, capacity=16, bm_candidates=(8, 16), compute_sms=compute_sms))


class Handshake:
    """Loader + partition + workspace + trap record for the handshake graph on one device."""

    def __init__(self, device: int = 0, requested: int | None = None, group=None, world_size: int = 1):
        import torch

        from gcmoe_runtime import green
        from gcmoe_runtime.loader import KernelLoader
        from gcmoe_runtime.workspace.symmetric import get_workspace
        from gcmoe_runtime.workspace.trap import TrapRecord

        torch.cuda.set_device(device)
        torch.zeros(1, device=f"cuda:{device}")  # primary context current on this thread
        self.torch = torch
        self.device = device
        self.loader = KernelLoader.open(str(BUNDLE))
        self.gp = green.get_partition(device, requested)
        layout = small_layout(world_size, self.gp.compute_sms)
        layout.check_partition(self.gp.compute_sms)
        self.ws = get_workspace(layout, group, device)
        self.trap = TrapRecord()
        self.kernels = {r: self.loader.kernel(name, arch="sm_90a") for r, name in ROLE_KERNELS.items()}

    def values(self, work_ns: int = 0, timeout_ns: int = TIMEOUT_NS, ws_addr: int | None = None) -> dict:
        return {"ws": self.ws.address("selftest") if ws_addr is None else ws_addr, "err": self.trap.address,
                "timeout_ns": timeout_ns, "work_ns": work_ns}

    def graph(self, work_ns: int = 0, serialize_roots: bool = False):
        from gcmoe_runtime.graph import RoleNode, get_layer_graph

        vals = self.values(work_ns)
        roles = {r: RoleNode(k, k.args(vals)) for r, k in self.kernels.items()}
        return get_layer_graph(roles, self.gp, serialize_roots=serialize_roots)

    def state(self) -> dict:
        from gcmoe_runtime.workspace import layout as L

        self.torch.cuda.synchronize(self.device)
        w = self.ws.view("selftest").cpu().tolist()
        return {"counter": w[L.SELFTEST_COUNTER], "producer_gen": w[L.SELFTEST_PRODUCER_GEN],
                "consumer_gen": w[L.SELFTEST_CONSUMER_GEN], "finalize_gen": w[L.SELFTEST_FINALIZE_GEN],
                "errors": w[L.SELFTEST_ERRORS]}

    def replay(self, g, n: int, stream=None) -> float:
        """n replays on ``stream``; returns seconds of host time for the launches."""
        torch = self.torch
        s = stream or torch.cuda.Stream(self.device)
        t0 = time.perf_counter()
        for _ in range(n):
            g.launch(s)
        host = time.perf_counter() - t0
        s.synchronize()
        return host

    def device_time_per_replay(self, g, n: int) -> float:
        torch = self.torch
        s = torch.cuda.Stream(self.device)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(5):
            g.launch(s)
        a.record(s)
        for _ in range(n):
            g.launch(s)
        b.record(s)
        b.synchronize()
        return a.elapsed_time(b) * 1e3 / n  # microseconds


def environment() -> dict:
    import torch

    p = torch.cuda.get_device_properties(0)
    return {"gpu": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
            "driver": _driver_version(), "bundle": str(BUNDLE.name)}


def _driver_version() -> str:
    from gcmoe_runtime import driver

    v = driver.REAL.call("cuDriverGetVersion")
    return f"{v // 1000}.{(v % 1000) // 10}"
