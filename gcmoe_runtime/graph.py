"""The per-layer child CUDA graph (paper §4.1, §4.6, Figure 2).

Nodes: role1 (dispatch green context) and role2 (compute green context) are concurrent roots —
no edge between them, so the driver runs them side by side on disjoint SMs; role4 (SM90 fused
shared experts), when present, is a root on the compute context and role2 waits for it (paper §4.5's
optional edge): both are persistent over every compute SM and never share one (role2 takes the SM's whole
register file and most of its shared memory), so without the edge role4 trails role2; first, it runs while
role1 pulls the tokens role2 needs (role4 reads the local activations in place), and role2 starts on filled
blocks. role2 reads nothing role4 writes (role4: combine lane k and its own regions), so where
``heuristics.sm90_role4_edge`` says so the edge leaves role4's launch-order port instead (``role4_edge =
"launch_order"``: role2 is launched once every role4 CTA has begun, and its CTAs take SMs as role4's retire;
role4's CTAs never wait for role2's, so role2 is fully resident by role4's end at the latest; session 45).
role3 (compute context) depends on every other node but, at P = 1, role1 (:func:`role3_waits_for_role1`): a graph
edge between the two green contexts costs ~3.5 µs of the layer even when role1 ended long before (session 56: six
real layers per torch graph, GLM-5.2 -3.5..-4.1 µs per layer at T = 1-64 without it, H100), and at P = 1 role2 already
orders role1 before role3. What role3 reads or resets of role1's writes — the send counts (final at role1's first grid
barrier), the receive counts CTA 0 publishes after it, the ring signals — role2 acquires before it ends (it waits for
the counts before its first task and for every row's ``l1_full_count`` release, whose release also covers the warp's
earlier reads). The one role1 access role2 does not order is a warp with no row reading ``send_count`` for its
tables after the barrier: after role3's zeroing it reads a lower total, and its rows (the global cursor's ``g`` below
the total) stay none. At P > 1 the edge stays: role3 publishes role1's tag-1 phase as its combine readiness, and
role1's CTA 0 bumps that phase after publishing the counts role2 waits for, so a rank whose role2 has no task could
publish the previous phase (the peers' combine would time out). The overlap-off ablation (``serialize_roots``) keeps
its chain and edges.

Each node is a kernel node whose ``kern`` is the library ``CUkernel`` and whose ``ctx`` is ``cuCtxFromGreenCtx`` of
its partition; block, cluster dimensions and dynamic
shared memory come from the artifact's launch facts; the grid from the partition
(``dispatch_sms`` / ``compute_sms`` / ``compute_sms*<n>`` / ``finalize_sms`` / ``fixed:<n>``; a ``*<n>`` rule
is checked against the driver's occupancy first: its CTAs must all be resident). Parameters are copied by
value into the nodes, so replays need no host work and no host reset: all state the kernels keep
is device-persistent.

Use :func:`get_layer_graph` (cached by cubin hash, parameter bytes, partition and role4 edge), then
``launch(stream)`` outside capture or ``attach(stream)`` inside a caller's capture (e.g.
``torch.cuda.graph``): the child graph is added to the capturing graph after the stream's current
dependencies, and the stream continues after it (capture-dependency semantics).
``serialize_roots=True`` builds the overlap-off ablation (role2 after role1) with the same kernels.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any, Mapping

from gcmoe_runtime import driver
from gcmoe_runtime.loader import LoadedKernel, configure_kernel, max_active_ctas_per_sm
from gcmoe_runtime.params import KernelArgs

ROLE_PARTITION = {"role1": "dispatch", "role2": "compute", "role3": "compute", "role4": "compute"}


class GraphError(RuntimeError):
    pass


#: How role2 follows role4 (``heuristics.sm90_role4_edge`` picks per call): ``full`` = after role4 has completed;
#: ``launch_order`` = from role4's launch-order port, once every role4 CTA has begun (module docstring).
ROLE4_EDGES = ("full", "launch_order")


def _launch_order_edge(cu: Any) -> Any:
    """Edge data from a kernel node's launch-order port (fires once every CTA of the upstream kernel has begun)."""
    e = cu.CUgraphEdgeData()
    e.from_port = cu.CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER
    return e


@dataclass(frozen=True)
class RoleNode:
    """One role's kernel, packed arguments and (optional) explicit grid size."""

    kernel: LoadedKernel
    args: KernelArgs
    grid: int | None = None  # None: from the launch facts' grid rule


def finalize_sms(compute_sms: int, tokens: int | None) -> int:
    """Paper Table 1: min(compute_sms, 64) at up to 128 tokens per rank, compute_sms above."""
    if tokens is not None and tokens > 128:
        return compute_sms
    return min(compute_sms, 64)


def ctas_per_sm(rule: str) -> int:
    """``N`` of a ``compute_sms*N`` rule (a persistent kernel whose CTAs must all be co-resident, N per compute
    SM), else 1."""
    if not rule.startswith("compute_sms*"):
        return 1
    n = rule.split("*", 1)[1]
    if not n.isdigit() or int(n) < 1:
        raise GraphError(f"launch grid rule {rule!r}: 'compute_sms*N' needs an integer N >= 1")
    return int(n)


def resolve_grid(rule: str, partition: Any, tokens: int | None = None) -> int:
    if rule == "dispatch_sms":
        return partition.dispatch_sms
    if rule == "compute_sms" or rule.startswith("compute_sms*"):
        return partition.compute_sms * ctas_per_sm(rule)
    if rule == "finalize_sms":
        return finalize_sms(partition.compute_sms, tokens)
    if rule.startswith("fixed:"):
        n = int(rule.split(":", 1)[1])
        if n < 1:
            raise GraphError(f"launch grid rule {rule!r}: grid must be >= 1")
        return n
    raise GraphError(f"unknown launch grid rule {rule!r}")


def _check_co_resident(drv: Any, lk: LoadedKernel, need: int, role: str) -> None:
    """A persistent kernel launched ``need`` CTAs per SM waits on work of its own other CTAs: every CTA must be
    resident at once, or the kernel would spin until its timeout trap. Refuse to build the node otherwise."""
    got = max_active_ctas_per_sm(drv, lk)
    if got < need:
        lf = lk.record.launch
        raise GraphError(f"{role} ({lk.name}): grid rule {lf.grid!r} needs {need} co-resident CTAs per SM, the "
                         f"driver fits {got} ({lf.block[0]} threads, {lf.dynamic_smem} B dynamic shared memory)")


def role3_waits_for_role1(world_size: int) -> bool:
    """Whether the layer graph keeps the role1 -> role3 edge: at P > 1 only (module docstring)."""
    return world_size > 1


def _edges(roles: Mapping[str, RoleNode], serialize_roots: bool,
           role3_after_role1: bool = True) -> dict[str, list[str]]:
    if "role1" not in roles or "role2" not in roles:
        raise GraphError(f"a layer graph needs role1 and role2; got {sorted(roles)}")
    unknown = set(roles) - set(ROLE_PARTITION)
    if unknown:
        raise GraphError(f"unknown roles {sorted(unknown)}; known: {sorted(ROLE_PARTITION)}")
    deps: dict[str, list[str]] = {"role1": [], "role2": ["role1"] if serialize_roots else []}
    if "role4" in roles:
        if serialize_roots:  # one stream's order: role1, role2, role4
            deps["role4"] = ["role2"]
        else:  # role4 first on the compute SMs, overlapping role1 (module docstring)
            deps["role4"], deps["role2"] = [], ["role4"]
    if "role3" in roles:
        skip = () if role3_after_role1 or serialize_roots else ("role1",)
        deps["role3"] = [r for r in ("role1", "role2", "role4") if r in roles and r not in skip]
    return deps


def _topological(deps: Mapping[str, list[str]]) -> list[str]:
    """The roles in an order where every role comes after the roles it depends on (nodes are added that way)."""
    order: list[str] = []
    while len(order) < len(deps):
        ready = [r for r in sorted(deps) if r not in order and all(d in order for d in deps[r])]
        if not ready:
            raise GraphError(f"layer graph edges form a cycle: {dict(deps)}")
        order.append(ready[0])
    return order


class LayerGraph:
    """A built child graph and its executable instance."""

    def __init__(self, roles: Mapping[str, RoleNode], partition: Any, *, tokens: int | None = None,
                 serialize_roots: bool = False, role4_edge: str = "full", role3_after_role1: bool = True,
                 drv: Any = None):
        self.drv = drv or driver.REAL
        self.partition = partition
        self.deps = _edges(roles, serialize_roots, role3_after_role1)
        self.role4_edge = role4_edge
        if self.role4_edge not in ROLE4_EDGES:
            raise GraphError(f"role4_edge={self.role4_edge!r}: one of {', '.join(ROLE4_EDGES)}")
        cu = self.drv.cu
        self.graph = self.drv.call("cuGraphCreate", 0)
        self.nodes: dict[str, Any] = {}
        for role in _topological(self.deps):
            rn = roles[role]
            lf = rn.kernel.record.launch
            configure_kernel(self.drv, rn.kernel, partition.device)
            ctx = partition.dispatch_ctx if ROLE_PARTITION[role] == "dispatch" else partition.compute_ctx
            grid = rn.grid if rn.grid is not None else resolve_grid(lf.grid, partition, tokens)
            if rn.grid is None and ctas_per_sm(lf.grid) > 1:
                _check_co_resident(self.drv, rn.kernel, ctas_per_sm(lf.grid), role)
            p = cu.CUgraphNodeParams()
            p.type = cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
            k = p.kernel
            k.kern = rn.kernel.kernel
            k.ctx = ctx
            if grid % lf.cluster[0]:
                raise GraphError(f"{role} ({rn.kernel.name}): grid {grid} is not a multiple of cluster {lf.cluster}")
            k.gridDimX, k.gridDimY, k.gridDimZ = grid, lf.cluster[1], lf.cluster[2]
            k.blockDimX, k.blockDimY, k.blockDimZ = lf.block
            k.sharedMemBytes = int(lf.dynamic_smem)
            k.kernelParams = rn.args.kernel_params
            deps = [self.nodes[d] for d in self.deps[role]]
            edata = None
            if role == "role2" and self.deps[role] == ["role4"] and self.role4_edge == "launch_order":
                edata = [_launch_order_edge(cu)]
            node = self.drv.call("cuGraphAddNode", self.graph, deps or None, edata, len(deps), p)
            if tuple(lf.cluster) != (1, 1, 1):
                v = cu.CUkernelNodeAttrValue()
                v.clusterDim.x, v.clusterDim.y, v.clusterDim.z = lf.cluster
                self.drv.call("cuGraphKernelNodeSetAttribute", node,
                              cu.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, v)
            self.nodes[role] = node
        # instantiated on the first launch(): cuGraphInstantiate is refused while any stream of the process is
        # capturing, and a graph first met inside torch.cuda.graph is only ever attach()ed as a child node
        self.exec = None

    def launch(self, stream: Any) -> None:
        """Replay outside capture (``stream``: CUstream, int handle or torch stream)."""
        if self.exec is None:
            self.exec = self.drv.call("cuGraphInstantiate", self.graph, 0)
        self.drv.call("cuGraphLaunch", self.exec, _stream(self.drv, stream))

    def attach(self, stream: Any) -> Any:
        """Add the graph as a child node to ``stream``'s active capture; the stream continues after it."""
        cu = self.drv.cu
        s = _stream(self.drv, stream)
        info = self.drv.call("cuStreamGetCaptureInfo", s)
        status, parent, deps, ndeps = info[0], info[2], info[3], int(info[-1])
        if status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE:
            raise GraphError("attach() needs a stream under active capture; use launch() outside capture")
        deps = list(deps or [])[:ndeps]
        node = self.drv.call("cuGraphAddChildGraphNode", parent, deps or None, len(deps), self.graph)
        self.drv.call("cuStreamUpdateCaptureDependencies", s, [node], None, 1,
                      cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES)
        return node

    def run(self, stream: Any) -> None:
        """attach() when ``stream`` is capturing, launch() otherwise."""
        cu = self.drv.cu
        s = _stream(self.drv, stream)
        status = self.drv.call("cuStreamIsCapturing", s)
        if status == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE:
            self.attach(s)
        else:
            self.launch(s)

    def destroy(self) -> None:
        if self.exec is not None:
            self.drv.call("cuGraphExecDestroy", self.exec)
        self.drv.call("cuGraphDestroy", self.graph)


def _stream(drv: Any, stream: Any) -> Any:
    cu = drv.cu
    if stream is None:
        return cu.CUstream(0)
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
        return cu.CUstream(int(stream.cuda_stream))
    if isinstance(stream, int):
        return cu.CUstream(stream)
    return stream


def cache_key(roles: Mapping[str, RoleNode], partition: Any, tokens: int | None, serialize_roots: bool,
              role4_edge: str = "full", role3_after_role1: bool = True) -> tuple:
    """(cubin hash, entry, parameter bytes) per role + the partition identity and the edges' options."""
    parts = []
    for role in sorted(roles):
        rn = roles[role]
        parts.append((role, rn.kernel.record.cubin_sha256, rn.kernel.name,
                      hashlib.sha256(rn.args.packed).hexdigest(), rn.grid))
    return (tuple(parts), partition.key(), tokens, serialize_roots, role4_edge, role3_after_role1)


_cache: dict[tuple, LayerGraph] = {}
_cache_lock = threading.Lock()


def get_layer_graph(roles: Mapping[str, RoleNode], partition: Any, *, tokens: int | None = None,
                    serialize_roots: bool = False, role4_edge: str = "full", role3_after_role1: bool = True,
                    drv: Any = None) -> LayerGraph:
    """The cached graph for these kernels, arguments, partition and edges (built on first use)."""
    key = cache_key(roles, partition, tokens, serialize_roots, role4_edge, role3_after_role1)
    with _cache_lock:
        g = _cache.get(key)
        if g is None:
            g = _cache[key] = LayerGraph(roles, partition, tokens=tokens, serialize_roots=serialize_roots,
                                         role4_edge=role4_edge, role3_after_role1=role3_after_role1, drv=drv)
        return g


def clear_cache() -> None:
    with _cache_lock:
        for g in _cache.values():
            g.destroy()
        _cache.clear()
