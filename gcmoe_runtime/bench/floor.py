"""Ceilings measured in the same run: streaming HBM read bandwidth, and the NVLink flag round trip.

* Read bandwidth: torch reductions over a multi-GiB FP32 tensor (random, never zeros), each timed with
  CUDA events, median of `reps`; every variant is recorded and the best is the ceiling used by the floor
  (DESIGN.md §4 measured 4.38 TB/s for a dedicated streaming kernel: a torch reduction may land a little
  under it, which makes our floor slightly conservative, i.e. higher).
* NVLink round trip (needs 2 visible GPUs with peer access): one thread on GPU a stores flag=i into GPU
  b's memory (st.release.sys), GPU b's thread spins (ld.acquire.sys) until it sees i and stores i back
  into GPU a's flag; a's thread waits for it. Round trip = (t_end - t_after_first) / (iters - 1) from
  %globaltimer on GPU a. The kernel is hand-written PTX loaded with cuModuleLoadData (driver JIT: a
  bench tool, not the serve path). Each spin has a timeout: on expiry the kernel records the iteration
  and traps (the launch then fails with an illegal-instruction error, reported as a timeout).
"""
from __future__ import annotations

import ctypes
import statistics

PINGPONG_PTX = r"""
.version 8.0
.target sm_90
.address_size 64

.visible .entry gcmoe_bench_pingpong(
    .param .u64 p_my_flag,
    .param .u64 p_peer_flag,
    .param .u32 p_iters,
    .param .u32 p_initiator,
    .param .u64 p_timeout_ns,
    .param .u64 p_out
)
{
    .reg .pred %p<8>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<16>;

    ld.param.u64 %rd1, [p_my_flag];
    ld.param.u64 %rd2, [p_peer_flag];
    ld.param.u32 %r1, [p_iters];
    ld.param.u32 %r2, [p_initiator];
    ld.param.u64 %rd3, [p_timeout_ns];
    ld.param.u64 %rd4, [p_out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd4, %rd4;
    mov.u32 %r3, 1;
    setp.ne.u32 %p1, %r2, 0;
LOOP:
    setp.gt.u32 %p2, %r3, %r1;
    @%p2 bra DONE;
    @!%p1 bra WAIT;
    st.release.sys.global.u32 [%rd2], %r3;
WAIT:
    mov.u64 %rd5, %globaltimer;
SPIN:
    ld.acquire.sys.global.u32 %r4, [%rd1];
    setp.ge.u32 %p3, %r4, %r3;
    @%p3 bra GOT;
    mov.u64 %rd6, %globaltimer;
    sub.u64 %rd7, %rd6, %rd5;
    setp.gt.u64 %p4, %rd7, %rd3;
    @%p4 bra TIMEOUT;
    bra SPIN;
GOT:
    @%p1 bra AFTER;
    st.release.sys.global.u32 [%rd2], %r3;
AFTER:
    setp.eq.u32 %p5, %r3, 1;
    and.pred %p6, %p5, %p1;
    @!%p6 bra NEXT;
    mov.u64 %rd8, %globaltimer;
    st.global.u64 [%rd4], %rd8;
NEXT:
    add.u32 %r3, %r3, 1;
    bra LOOP;
DONE:
    @!%p1 bra EXIT;
    mov.u64 %rd9, %globaltimer;
    st.global.u64 [%rd4+8], %rd9;
EXIT:
    ret;
TIMEOUT:
    cvt.u64.u32 %rd10, %r3;
    st.volatile.global.u64 [%rd4+16], %rd10;
    membar.sys;
    trap;
}
"""


def read_variants(x, rows, out0, out1) -> dict:
    """The streaming-read reductions timed by `measure_read_bandwidth` (each reads every byte of x once)."""
    import torch

    return {
        "sum_all_fp32": lambda: torch.sum(x, dim=0, out=out0),
        "sum_rows_fp32": lambda: torch.sum(rows, dim=1, out=out1),
        "amax_all_fp32": lambda: torch.amax(x, dim=0, out=out0),
    }


def measure_read_bandwidth(device, nbytes: int = 4 << 30, reps: int = 15) -> dict:
    """Streaming-read GB/s of torch reductions over `nbytes` of FP32 (median of `reps` timed runs)."""
    import torch

    n = nbytes // 4
    x = torch.empty(n, dtype=torch.float32, device=device).uniform_(-1.0, 1.0)
    rows = x.view(-1, 8192)
    out0 = torch.empty((), dtype=torch.float32, device=device)
    out1 = torch.empty(rows.shape[0], dtype=torch.float32, device=device)
    variants = read_variants(x, rows, out0, out1)
    res: dict = {"bytes": n * 4, "reps": reps, "variants": {}}
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for name, fn in variants.items():
        for _ in range(3):
            fn()
        times = []
        for _ in range(reps):
            torch.cuda.synchronize(device)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        med = statistics.median(times)
        res["variants"][name] = {"median_s": med, "gbps": n * 4 / med / 1e9}
    best = max(res["variants"], key=lambda k: res["variants"][k]["gbps"])
    res["best_variant"] = best
    res["gbps"] = res["variants"][best]["gbps"]
    del x, rows
    torch.cuda.empty_cache()
    return res


def _check(ret, what: str):
    from cuda.bindings import driver as cu

    err = ret[0] if isinstance(ret, tuple) else ret
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {err!r}")
    if isinstance(ret, tuple):
        return ret[1] if len(ret) == 2 else ret[1:]
    return None


def measure_nvlink_roundtrip(dev_a: int = 0, dev_b: int = 1, iters: int = 20000,
                             timeout_ns: int = 2_000_000_000) -> dict:
    """Flag ping-pong round trip between two GPUs of this process (µs)."""
    import torch
    from cuda.bindings import driver as cu

    if torch.cuda.device_count() < 2:
        raise RuntimeError("NVLink round trip needs 2 visible GPUs")
    if not torch.cuda.can_device_access_peer(dev_a, dev_b) or not torch.cuda.can_device_access_peer(dev_b, dev_a):
        raise RuntimeError(f"GPUs {dev_a} and {dev_b} have no peer access")
    _check(cu.cuInit(0), "cuInit")
    funcs, ctxs, keep = {}, {}, []
    for d, peer in ((dev_a, dev_b), (dev_b, dev_a)):
        torch.cuda.set_device(d)
        torch.cuda.current_stream(d)  # makes torch create the primary context
        dev = _check(cu.cuDeviceGet(d), "cuDeviceGet")
        ctx = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        peer_ctx = _check(cu.cuDevicePrimaryCtxRetain(_check(cu.cuDeviceGet(peer), "cuDeviceGet")),
                          "cuDevicePrimaryCtxRetain")
        err = cu.cuCtxEnablePeerAccess(peer_ctx, 0)[0]
        if err not in (cu.CUresult.CUDA_SUCCESS, cu.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED):
            raise RuntimeError(f"cuCtxEnablePeerAccess {d}->{peer} failed: {err!r}")
        mod = _check(cu.cuModuleLoadData(PINGPONG_PTX.encode() + b"\0"), "cuModuleLoadData(pingpong PTX)")
        funcs[d] = _check(cu.cuModuleGetFunction(mod, b"gcmoe_bench_pingpong"), "cuModuleGetFunction")
        ctxs[d] = ctx
        keep.append(mod)
    flag = {d: torch.zeros(64, dtype=torch.int32, device=f"cuda:{d}") for d in (dev_a, dev_b)}
    out = {d: torch.zeros(4, dtype=torch.int64, device=f"cuda:{d}") for d in (dev_a, dev_b)}
    streams = {d: torch.cuda.Stream(device=d) for d in (dev_a, dev_b)}
    torch.cuda.synchronize(dev_a)
    torch.cuda.synchronize(dev_b)

    def launch(d: int, peer: int, initiator: int) -> None:
        vals = [ctypes.c_uint64(flag[d].data_ptr()), ctypes.c_uint64(flag[peer].data_ptr()),
                ctypes.c_uint32(iters), ctypes.c_uint32(initiator), ctypes.c_uint64(timeout_ns),
                ctypes.c_uint64(out[d].data_ptr())]
        arr = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        keep.append((vals, arr))
        _check(cu.cuCtxSetCurrent(ctxs[d]), "cuCtxSetCurrent")
        _check(cu.cuLaunchKernel(funcs[d], 1, 1, 1, 1, 1, 1, 0, streams[d].cuda_stream, ctypes.addressof(arr), 0),
               "cuLaunchKernel(pingpong)")

    launch(dev_b, dev_a, 0)   # responder first, so it is spinning when the first flag lands
    launch(dev_a, dev_b, 1)
    try:
        streams[dev_a].synchronize()
        streams[dev_b].synchronize()
    except RuntimeError as e:
        raise RuntimeError(f"NVLink ping-pong failed (device-side timeout {timeout_ns} ns or fault): {e}") from e
    oa = out[dev_a].tolist()
    if oa[2] or out[dev_b].tolist()[2]:
        raise RuntimeError(f"NVLink ping-pong timed out at iteration {oa[2] or out[dev_b].tolist()[2]}")
    rtt_us = (oa[1] - oa[0]) / (iters - 1) / 1000.0
    return {"dev_a": dev_a, "dev_b": dev_b, "iters": iters, "round_trip_us": rtt_us, "method": "PTX flag ping-pong"}
