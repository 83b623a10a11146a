"""A fake CUDA driver for CPU tests: real cuda-bindings types/enums, simulated handles and resources.

It models what the runtime relies on: an SM resource with count/min-partition/alignment, a split
that honours the alignment, green contexts/streams/events with live-object accounting (so tests
can prove teardown destroys everything), kernel parameter info, graphs with nodes and edges.
"""
from __future__ import annotations

import itertools

from cuda.bindings import driver as cu

from gcmoe_runtime.driver import CudaDriverError


class FakeDriver:
    def __init__(self, sms=132, min_part=8, align=8, cc_major=9, workqueue=False, param_info=None):
        self.cu = cu
        self.sms, self.min_part, self.align, self.cc_major = sms, min_part, align, cc_major
        self.workqueue = workqueue
        self.param_info = param_info or {}  # kernel name -> [(offset, size)]
        self.calls = []
        self.live = {}  # handle int -> kind
        self._ids = itertools.count(0x1000)
        self.graph_nodes = {}  # graph int -> list of (node int, params, deps)
        self.node_attrs = {}
        self.edge_data = {}  # node int -> [(edge type, from port)] per dependency, when edge data was given
        self.libraries = {}
        self.fail = {}  # call name -> CUresult to raise

    def _new(self, kind, ctor):
        h = next(self._ids)
        self.live[h] = kind
        return ctor(h)

    def _drop(self, h, kind):
        assert self.live.get(int(h)) == kind, f"destroying {kind} {int(h):#x} that is not live"
        del self.live[int(h)]

    def call(self, name, *args):
        self.calls.append(name)
        if name in self.fail:
            code = self.fail[name]
            raise CudaDriverError(name, int(code), code.name)
        return getattr(self, name)(*args)

    def live_count(self, kind=None):
        return sum(1 for k in self.live.values() if kind is None or k == kind)

    # --- device / resources ---
    def cuDeviceGet(self, ordinal):
        return cu.CUdevice(ordinal)

    def cuDeviceGetAttribute(self, attr, dev):
        assert attr == cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
        return self.cc_major

    def cuCtxGetCurrent(self):
        return cu.CUcontext(0xC0)

    def cuDeviceGetDevResource(self, dev, rtype):
        if rtype == cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM:
            r = cu.CUdevResource()
            r.type = rtype
            r.sm.smCount, r.sm.minSmPartitionSize, r.sm.smCoscheduledAlignment = self.sms, self.min_part, self.align
            return r
        if not self.workqueue:
            e = cu.CUresult.CUDA_ERROR_INVALID_RESOURCE_TYPE
            raise CudaDriverError("cuDeviceGetDevResource", int(e), e.name)
        r = cu.CUdevResource()
        r.type = rtype
        return r

    def cuDevSmResourceSplitByCount(self, n, res, flags, min_count):
        assert n == 1
        count = max(self.min_part, (min_count + self.align - 1) // self.align * self.align)
        g = cu.CUdevResource()
        g.type = res.type
        g.sm.smCount = count
        rem = cu.CUdevResource()
        rem.type = res.type
        rem.sm.smCount = res.sm.smCount - count
        return [g], 1, rem

    def cuDevResourceGenerateDesc(self, resources, n):
        assert len(resources) == n
        self.last_desc_resources = list(resources)
        return cu.CUdevResourceDesc(next(self._ids))

    def cuGreenCtxCreate(self, desc, dev, flags):
        return self._new("green", cu.CUgreenCtx)

    def cuGreenCtxGetDevResource(self, g, rtype):
        r = cu.CUdevResource()
        r.wqConfig.sharingScope = cu.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED
        r.wqConfig.wqConcurrencyLimit = 1
        return r

    def cuCtxFromGreenCtx(self, g):
        assert self.live.get(int(g)) == "green"
        return cu.CUcontext(int(g) + 0x100000)

    def cuGreenCtxStreamCreate(self, g, flags, prio):
        assert flags == cu.CUstream_flags.CU_STREAM_NON_BLOCKING
        return self._new("stream", cu.CUstream)

    def cuEventCreate(self, flags):
        return self._new("event", cu.CUevent)

    def cuGreenCtxRecordEvent(self, g, ev):
        assert self.live.get(int(g)) == "green" and self.live.get(int(ev)) == "event"

    def cuEventSynchronize(self, ev):
        assert self.live.get(int(ev)) == "event"

    def cuStreamDestroy(self, s):
        self._drop(s, "stream")

    def cuEventDestroy(self, ev):
        self._drop(ev, "event")

    def cuGreenCtxDestroy(self, g):
        self._drop(g, "green")

    # --- libraries ---
    def cuLibraryLoadData(self, code, *rest):
        lib = self._new("library", cu.CUlibrary)
        self.libraries[int(lib)] = bytes(code)
        return lib

    def cuLibraryUnload(self, lib):
        self._drop(lib, "library")

    def cuLibraryGetKernel(self, lib, name):
        name = name.decode()
        if name not in self.param_info:
            e = cu.CUresult.CUDA_ERROR_NOT_FOUND
            raise CudaDriverError("cuLibraryGetKernel", int(e), e.name)
        k = cu.CUkernel(next(self._ids))
        self.kernel_names = getattr(self, "kernel_names", {})
        self.kernel_names[int(k)] = name
        return k

    def cuKernelGetParamInfo(self, k, i):
        info = self.param_info[self.kernel_names[int(k)]]
        if i >= len(info):
            e = cu.CUresult.CUDA_ERROR_INVALID_VALUE
            raise CudaDriverError("cuKernelGetParamInfo", int(e), e.name)
        return info[i]

    def cuKernelGetFunction(self, k):
        return cu.CUfunction(int(k))

    def cuOccupancyMaxActiveBlocksPerMultiprocessor(self, fn, threads, smem):
        """An H100/H200-like SM: 2048 threads, 64 K registers at the kernel's ``regs`` (default 128), 227 KB
        of shared memory; ``occupancy`` (kernel name -> n) overrides."""
        name = self.kernel_names[int(fn)]
        if name in getattr(self, "occupancy", {}):
            return self.occupancy[name]
        return min(2048 // threads, 65536 // (threads * 128), (227 * 1024) // max(smem, 1))

    def cuKernelSetAttribute(self, attr, value, k, dev):
        self.kernel_attrs = getattr(self, "kernel_attrs", [])
        self.kernel_attrs.append((attr, value, self.kernel_names[int(k)], dev))

    # --- graphs ---
    def cuGraphCreate(self, flags):
        g = self._new("graph", cu.CUgraph)
        self.graph_nodes[int(g)] = []
        return g

    def cuGraphAddNode(self, g, deps, edata, n, params):
        node = cu.CUgraphNode(next(self._ids))
        k = params.kernel
        rec = dict(kern=int(k.kern), ctx=int(k.ctx), grid=(k.gridDimX, k.gridDimY, k.gridDimZ),
                   block=(k.blockDimX, k.blockDimY, k.blockDimZ), smem=k.sharedMemBytes, params=k.kernelParams)
        self.graph_nodes[int(g)].append((int(node), rec, [int(d) for d in (deps or [])][:n]))
        if edata is not None:  # per dependency: (edge type, from port)
            self.edge_data[int(node)] = [(int(e.type), int(e.from_port)) for e in edata][:n]
        return node

    def cuGraphKernelNodeSetAttribute(self, node, attr, v):
        self.node_attrs[int(node)] = (attr, (v.clusterDim.x, v.clusterDim.y, v.clusterDim.z))

    def cuGraphInstantiate(self, g, flags):
        return self._new("exec", cu.CUgraphExec)

    def cuGraphLaunch(self, ex, stream):
        self.launched = getattr(self, "launched", 0) + 1

    def cuGraphExecDestroy(self, ex):
        self._drop(ex, "exec")

    def cuGraphDestroy(self, g):
        self._drop(g, "graph")


def _ctx_methods():
    def cuCtxPushCurrent(self, ctx):
        self.ctx_stack = getattr(self, "ctx_stack", []) + [int(ctx)]

    def cuCtxPopCurrent(self):
        self.ctx_stack.pop()

    def cuCtxSetLimit(self, limit, value):
        self.limits = getattr(self, "limits", [])
        self.limits.append((self.ctx_stack[-1], limit, value))

    for f in (cuCtxPushCurrent, cuCtxPopCurrent, cuCtxSetLimit):
        setattr(FakeDriver, f.__name__, f)


_ctx_methods()
