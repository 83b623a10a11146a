"""The green-context pair: a small dispatch partition and a large compute partition (paper §4.2).

Creation, per device / CUDA context / request, cached thread-locally (:func:`get_partition`):

1. query the device's SM resource (SM count, minimum partition size, co-scheduling alignment);
2. compute target = floor((total - requested) / alignment) * alignment (gcmoe_runtime.heuristics,
   the single owner of that arithmetic), split with ``cuDevSmResourceSplitByCount``; the driver
   returns the compute group and the complementary dispatch remainder; the split actually returned
   is validated (>= 32 compute SMs, even compute count, >= 2 dispatch SMs, sum = device SMs);
3. request the balanced workqueue configuration (``CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED``,
   concurrency limit 1) where the driver has the workqueue-config resource and verify it after
   creation; where it does not (R580 / CUDA 13.0 answers CUDA_ERROR_INVALID_RESOURCE_TYPE) say so
   once in the log and in :attr:`GreenPartition.workqueue_status`;
4. one non-blocking green stream per context and a retirement event; :meth:`GreenPartition.destroy`
   records the event on both green contexts, synchronises, and only then destroys.

The dispatch request comes from ``GC_MOE_SM90_DISPATCH_SMS`` (default 4, paper Table 2) on sm_90 and
``GC_MOE_DISPATCH_SMS`` (default 16) on Blackwell, unless given explicitly.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from gcmoe_runtime import driver
from gcmoe_runtime.heuristics import Partition, PartitionError, green_partition, validate_partition

log = logging.getLogger("gcmoe_runtime.green")

ENV_SM90 = "GC_MOE_SM90_DISPATCH_SMS"
ENV_BLACKWELL = "GC_MOE_DISPATCH_SMS"
DEFAULT_SM90 = 4
DEFAULT_BLACKWELL = 16

_warned_no_workqueue: set[int] = set()
_desc_cache: dict[tuple, tuple] = {}
_warn_lock = threading.Lock()
_tls = threading.local()


def requested_dispatch_sms(cc_major: int, env: dict | None = None) -> int:
    """The dispatch request from the environment: SM90 and Blackwell have separate variables."""
    env = os.environ if env is None else env
    name, default = (ENV_SM90, DEFAULT_SM90) if cc_major == 9 else (ENV_BLACKWELL, DEFAULT_BLACKWELL)
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        val = int(raw)
    except ValueError:
        raise PartitionError(name, raw, "an integer >= 2", "is not an integer") from None
    if val < 1:
        raise PartitionError(name, val, ">= 1", "must request at least one dispatch SM")
    return val


class _PartitionSms:
    """The dispatch/compute SM counts of a partition object's validated ``partition`` split."""

    partition: Partition

    @property
    def dispatch_sms(self) -> int:
        return self.partition.dispatch_sms

    @property
    def compute_sms(self) -> int:
        return self.partition.compute_sms


@dataclass
class GreenPartition(_PartitionSms):
    device: int
    requested: int
    partition: Partition
    total_sms: int
    alignment: int
    min_partition: int
    workqueue_balanced: bool
    workqueue_status: str
    dispatch_green: Any
    compute_green: Any
    dispatch_ctx: Any  # CUcontext of the dispatch green context (graph kernel-node ctx)
    compute_ctx: Any
    dispatch_stream: Any
    compute_stream: Any
    retire_event: Any
    _drv: Any = field(repr=False, default=None)
    destroyed: bool = False

    @property
    def green_contexts(self) -> bool:
        return True

    def key(self) -> tuple:
        """Identity used in graph cache keys."""
        return (self.device, self.dispatch_sms, self.compute_sms, int(self.dispatch_green), int(self.compute_green))

    def destroy(self) -> None:
        """Retire: record the event on each green context, synchronise, then destroy."""
        if self.destroyed:
            return
        d = self._drv
        for g in (self.dispatch_green, self.compute_green):
            d.call("cuGreenCtxRecordEvent", g, self.retire_event)
            d.call("cuEventSynchronize", self.retire_event)
        d.call("cuStreamDestroy", self.dispatch_stream)
        d.call("cuStreamDestroy", self.compute_stream)
        d.call("cuEventDestroy", self.retire_event)
        d.call("cuGreenCtxDestroy", self.dispatch_green)
        d.call("cuGreenCtxDestroy", self.compute_green)
        self.destroyed = True


def _ensure_current_context(drv: Any, dev: Any) -> None:
    """Events and streams need a current context: make the device's primary context current if the
    thread has none (torch retains the same primary context, so the two share it)."""
    cur = drv.call("cuCtxGetCurrent")
    if cur is None or int(cur) == 0:
        drv.call("cuCtxSetCurrent", drv.call("cuDevicePrimaryCtxRetain", dev))


@dataclass
class _SmQuery:
    """Step 1-2 inputs: the device's SM resource and the aligned split wanted for the request."""

    dev: Any
    requested: int
    sm: Any  # the device's SM resource (split input)
    total: int
    alignment: int
    min_partition: int
    want: Partition


def _query_sms(drv: Any, device: int, requested: int | None) -> _SmQuery:
    """Make a context current, read the SM resource and compute the wanted split (raises PartitionError
    with field/value/limit)."""
    cu = drv.cu
    dev = drv.call("cuDeviceGet", device)
    _ensure_current_context(drv, dev)
    major = drv.call("cuDeviceGetAttribute", cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    req = requested_dispatch_sms(int(major)) if requested is None else requested
    sm = drv.call("cuDeviceGetDevResource", dev, cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM)
    total = int(sm.sm.smCount)
    align = int(sm.sm.smCoscheduledAlignment) or 1
    minp = int(sm.sm.minSmPartitionSize) or 1
    return _SmQuery(dev, req, sm, total, align, minp, green_partition(total, req, align, minp))


def _split_sms(drv: Any, q: _SmQuery) -> tuple[Any, Any, Partition]:
    """``cuDevSmResourceSplitByCount`` for the wanted compute count: (dispatch remainder, compute group,
    the validated split the driver actually returned)."""
    groups, n, remaining = drv.call("cuDevSmResourceSplitByCount", 1, q.sm, 0, q.want.compute_sms)
    if int(n) != 1:
        raise PartitionError("compute groups", int(n), "== 1",
                             f"(driver split {q.total} SMs for target {q.want.compute_sms})")
    compute_res = groups[0]
    return remaining, compute_res, validate_partition(int(remaining.sm.smCount), int(compute_res.sm.smCount), q.total)


def _workqueue_resource(drv: Any, dev: Any) -> tuple[Any | None, str]:
    """The balanced workqueue-config resource, or None with the reason it is unavailable."""
    cu = drv.cu
    rtype = getattr(cu.CUdevResourceType, "CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG", None)
    if rtype is None:
        return None, "cuda-bindings lacks CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG"
    try:
        wq = drv.call("cuDeviceGetDevResource", dev, rtype)
    except driver.CudaDriverError as e:
        return None, f"driver does not support the workqueue-config resource ({e.result_name})"
    wq.wqConfig.sharingScope = cu.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED
    wq.wqConfig.wqConcurrencyLimit = 1
    return wq, "balanced workqueues requested"


def _verify_workqueue(drv: Any, green: Any) -> bool:
    cu = drv.cu
    res = drv.call("cuGreenCtxGetDevResource", green, cu.CUdevResourceType.CU_DEV_RESOURCE_TYPE_WORKQUEUE_CONFIG)
    return (res.wqConfig.sharingScope == cu.CUdevWorkqueueConfigScope.CU_WORKQUEUE_SCOPE_GREEN_CTX_BALANCED
            and int(res.wqConfig.wqConcurrencyLimit) == 1)


def create_partition(device: int, requested: int | None = None, balanced_workqueues: bool = True,
                     drv: Any = None) -> GreenPartition:
    """Create (uncached) the dispatch/compute green-context pair on ``device``.

    Measured on R580 (results/runtime/README.md): a bare cuGreenCtxCreate + cuGreenCtxDestroy loses
    4 MiB of device memory per green context inside the driver, whatever else is done; this function
    adds nothing to that, and :func:`get_partition` creates the pair once per device/context/request.
    """
    drv = drv or driver.REAL
    cu = drv.cu
    q = _query_sms(drv, device, requested)
    dev = q.dev

    wq, wq_status = (None, "balanced workqueues disabled by the caller")
    if balanced_workqueues:
        wq, wq_status = _workqueue_resource(drv, dev)
        if wq is None:
            with _warn_lock:
                if device not in _warned_no_workqueue:
                    _warned_no_workqueue.add(device)
                    log.warning("gcmoe: device %d: %s; green contexts are created without balanced workqueues "
                                "(concurrency then rests on the driver's default placement)", device, wq_status)

    # Resource descriptors live as long as the process (driver contract), so generate them once per
    # (device, split, workqueue choice) and reuse them for every later pair.
    dkey = (id(drv), device, q.want.compute_sms, wq is not None)
    cached = _desc_cache.get(dkey)
    if cached is None or cached[2] is not drv:  # id() of a driver object that is gone may be reused (fakes)
        remaining, compute_res, got = _split_sms(drv, q)
        descs = [drv.call("cuDevResourceGenerateDesc", [res, wq] if wq is not None else [res],
                          2 if wq is not None else 1) for res in (remaining, compute_res)]
        cached = _desc_cache[dkey] = (got, descs, drv)
    got, descs, _ = cached

    made: list[tuple[str, Any]] = []
    try:
        greens = []
        for desc in descs:
            g = drv.call("cuGreenCtxCreate", desc, dev, cu.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM)
            made.append(("green", g))
            greens.append(g)
        balanced = False
        if wq is not None:
            balanced = all(_verify_workqueue(drv, g) for g in greens)
            wq_status = "balanced workqueues verified" if balanced else "balanced workqueues requested but not in effect"
            if not balanced:
                log.warning("gcmoe: device %d: %s", device, wq_status)
        ctxs = [drv.call("cuCtxFromGreenCtx", g) for g in greens]
        streams = []
        for g in greens:
            s = drv.call("cuGreenCtxStreamCreate", g, cu.CUstream_flags.CU_STREAM_NON_BLOCKING, 0)
            made.append(("stream", s))
            streams.append(s)
        ev = drv.call("cuEventCreate", cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
    except Exception:
        for kind, h in reversed(made):
            try:
                drv.call("cuStreamDestroy" if kind == "stream" else "cuGreenCtxDestroy", h)
            except Exception:  # noqa: BLE001 - best-effort cleanup; the original error is raised
                pass
        raise
    return GreenPartition(
        device=device, requested=q.requested, partition=got, total_sms=q.total, alignment=q.alignment,
        min_partition=q.min_partition, workqueue_balanced=balanced, workqueue_status=wq_status,
        dispatch_green=greens[0], compute_green=greens[1], dispatch_ctx=ctxs[0], compute_ctx=ctxs[1],
        dispatch_stream=streams[0], compute_stream=streams[1], retire_event=ev, _drv=drv,
    )


@dataclass
class FullDevicePartition(_PartitionSms):
    """The whole device in its primary context, no green contexts (benchmark baselines, issue 7).

    Baseline (a) "roles serialised on one stream of the full device" and baseline (b) "plain streams without
    isolation" (paper §3, straw man i) run the very kernels built for a green split. ``partition`` is that
    driver-aligned split: it selects the kernel variants and sets their grids (dispatch/compute SM counts are
    compile-time for role1/role3). Every graph node binds to ``context`` (the primary context), so the
    hardware may place any CTA on any SM. Same attributes as :class:`GreenPartition` where
    ``gcmoe_runtime.graph`` and ``gcmoe_runtime.moe`` read them; nothing to destroy.
    """

    device: int
    requested: int
    partition: Partition
    total_sms: int
    alignment: int
    min_partition: int
    context: Any  # CUcontext: the device's primary context
    workqueue_balanced: bool = False
    workqueue_status: str = "no green contexts: primary context, full device"
    destroyed: bool = False

    @property
    def green_contexts(self) -> bool:
        return False

    @property
    def dispatch_ctx(self) -> Any:
        return self.context

    @property
    def compute_ctx(self) -> Any:
        return self.context

    def key(self) -> tuple:
        """Identity used in graph cache keys (never equal to a green pair's)."""
        return ("full-device", self.device, self.dispatch_sms, self.compute_sms, int(self.context))

    def destroy(self) -> None:
        self.destroyed = True  # the primary context belongs to the process: nothing to release


def full_device_partition(device: int, requested: int | None = None, drv: Any = None) -> FullDevicePartition:
    """The driver-aligned split for ``requested`` (as :func:`create_partition` computes and validates it,
    through ``cuDevSmResourceSplitByCount``) without creating green contexts: the primary context."""
    drv = drv or driver.REAL
    q = _query_sms(drv, device, requested)
    _, _, got = _split_sms(drv, q)
    return FullDevicePartition(device=device, requested=q.requested, partition=got, total_sms=q.total,
                               alignment=q.alignment, min_partition=q.min_partition,
                               context=drv.call("cuCtxGetCurrent"))


def _cache() -> dict:
    c = getattr(_tls, "partitions", None)
    if c is None:
        c = _tls.partitions = {}
    return c


def get_partition(device: int, requested: int | None = None, balanced_workqueues: bool = True,
                  drv: Any = None) -> GreenPartition:
    """The cached pair for (device, current CUDA context, request) on this thread."""
    drv = drv or driver.REAL
    ctx = drv.call("cuCtxGetCurrent")
    key = (device, int(ctx) if ctx is not None else 0, requested, balanced_workqueues)
    c = _cache()
    gp = c.get(key)
    if gp is None or gp.destroyed:
        gp = c[key] = create_partition(device, requested, balanced_workqueues, drv)
    return gp


def release_all() -> None:
    """Destroy this thread's cached partitions (retire-event ordered)."""
    c = _cache()
    for gp in c.values():
        gp.destroy()
    c.clear()
