"""GPU harness for the SM90 role2 GEMM cubins: load with the driver library API, make data, launch.

Runs on the GPU machine (torch + cuda-bindings; no CuTe DSL, no pydantic): cubins come prebuilt from
``python -m gcmoe_build.kernels.sm90.role2_devbuild build/role2_sm90`` and are loaded with
``cuLibraryLoadData`` / ``cuLibraryGetKernel`` - never JIT. Weights and the reference come from the
runtime's numerics package (quantisers, SM90 transform, tile/scale layouts, FP32 reference steps).
"""
from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
CUBIN_DIR = Path(os.environ.get("GCMOE_ROLE2_CUBINS", REPO / "build" / "role2_sm90"))


def _check(res):
    from cuda.bindings import driver as cu

    if not isinstance(res, tuple):
        res = (res,)
    if res[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {res[0]}")
    return None if len(res) == 1 else (res[1] if len(res) == 2 else res[1:])


def time_launch(fn, reps: int = 30, batch: int = 1, warm: int = 5, sustain_s: float = 0.0,
                window: list | None = None) -> float:
    """Seconds per call of ``fn`` (a launch on torch's current stream): the median over ``reps`` CUDA-event samples
    of ``batch`` back-to-back calls each, after ``warm`` calls and, with ``sustain_s``, after calling it for that many
    seconds more (the board's power controller settles within ~1 s at the 700 W cap, so a sample's clock then no
    longer depends on what ran before it: session 25 call E). ``window``: (start, end) of the timed samples in
    ``time.perf_counter`` seconds is appended to it (for :class:`ClockSampler`)."""
    import statistics
    import time

    import torch

    for _ in range(warm):
        fn()
    if sustain_s > 0:
        end = time.perf_counter() + sustain_s
        while time.perf_counter() < end:
            for _ in range(max(batch, 1)):
                fn()
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(batch):
            fn()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) / 1e3 / batch)
    if window is not None:
        window.append((t0, time.perf_counter()))
    return statistics.median(ts)


class ClockSampler:
    """The GPU's SM clock, board power and clock-event reasons every ``period_s`` from a background thread, through
    NVML (``libnvidia-ml.so.1`` by ctypes: no Python package needed on the device image); ``summary(t0, t1)`` gives
    the mean clock / power and the share of samples held by the software power cap over a ``time.perf_counter``
    window. Without NVML ``available`` is False and every summary is empty. ``index``: the NVML device (the GPU of
    ``CUDA_VISIBLE_DEVICES=0`` on these one-GPU machines)."""

    SM_CLOCK, SW_POWER_CAP, HW_SLOWDOWN = 1, 0x4, 0x8

    def __init__(self, index: int = 0, period_s: float = 0.01):
        import threading

        self.samples: list[tuple[float, int, float, int]] = []  # (perf_counter, SM MHz, W, reasons)
        self.available = False
        try:
            nv = ctypes.CDLL("libnvidia-ml.so.1")
            if nv.nvmlInit_v2() != 0:
                return
            self._h = ctypes.c_void_p()
            if nv.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(self._h)) != 0:
                return
            self._reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                nv.nvmlDeviceGetCurrentClocksThrottleReasons
        except (OSError, AttributeError):
            return
        self._nv, self._period, self.available = nv, period_s, True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _read(self):
        import time

        mhz, mw, why = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        ok = (self._nv.nvmlDeviceGetClockInfo(self._h, ctypes.c_int(self.SM_CLOCK), ctypes.byref(mhz)) == 0
              and self._nv.nvmlDeviceGetPowerUsage(self._h, ctypes.byref(mw)) == 0
              and self._reasons(self._h, ctypes.byref(why)) == 0)
        return (time.perf_counter(), mhz.value, mw.value / 1e3, why.value) if ok else None

    def _run(self):
        while not self._stop.wait(self._period):
            s = self._read()
            if s is not None:
                self.samples.append(s)

    def summary(self, t0: float, t1: float) -> dict:
        win = [s for s in self.samples if t0 <= s[0] <= t1]
        if not win:
            return {}
        n = len(win)
        return {"sm_mhz": sum(s[1] for s in win) / n, "power_w": sum(s[2] for s in win) / n,
                "power_capped": sum(1 for s in win if s[3] & self.SW_POWER_CAP) / n, "samples": n}

    def close(self):
        if self.available:
            self._stop.set()
            self._thread.join(timeout=1.0)


def time_raw_launch(fn, grid: int, threads: int, smem: int, vals, warm: int = 3, reps: int = 10) -> float:
    """Median microseconds of ``reps`` single launches (after ``warm``) of a loaded kernel ``fn`` on ``grid`` CTAs,
    its arguments ``vals`` as ctypes scalars (the dev probes' benches; :func:`time_launch`)."""
    import torch
    from cuda.bindings import driver as cu

    args = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])

    def launch():
        _check(cu.cuLaunchKernel(fn, grid, 1, 1, threads, 1, 1, smem,
                                 cu.CUstream(torch.cuda.current_stream().cuda_stream), ctypes.addressof(args), 0))

    return time_launch(launch, reps=reps, warm=warm) * 1e6


class Role2Kernels:
    """All cubins of ``index.json``, loaded lazily through the library API."""

    def __init__(self, cubin_dir: Path = CUBIN_DIR):
        self.dir = Path(cubin_dir)
        self.index = json.loads((self.dir / "index.json").read_text())
        self._fn = {}
        self._maps = {}  # (bm, k, act address, blocks) -> the act_tma kernels' tensor map on the device
        self._tickets = {}  # name -> its task counter (role2_persistent.PARAMS "ticket"): concurrent launches of
        # two dynamic_tasks kernels (the chained W1 / W2 test) must not share one

    def function(self, name: str):
        from cuda.bindings import driver as cu
        import torch

        if name not in self._fn:
            torch.cuda.init()
            torch.empty(1, device="cuda")  # primary context current
            info = self.index[name]
            data = (self.dir / f"{name}.cubin").read_bytes()
            assert data[:4] == b"\x7fELF", f"{name}: not an ELF cubin; the runtime never JIT-compiles"
            lib = _check(cu.cuLibraryLoadData(data, None, None, 0, None, None, 0))
            kern = _check(cu.cuLibraryGetKernel(lib, info["entry"].encode()))
            dev = torch.cuda.current_device()
            _check(cu.cuKernelSetAttribute(
                cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, info["smem"], kern, dev))
            fn = _check(cu.cuKernelGetFunction(kern))
            self._fn[name] = (lib, kern, fn, info)
        return self._fn[name]

    def launch(self, name: str, nblocks: int, ptrs: list[int], stream=None):
        from cuda.bindings import driver as cu
        import torch

        _, _, fn, info = self.function(name)
        stream = stream or torch.cuda.current_stream()
        vals = (ctypes.c_uint64 * len(ptrs))(*ptrs)
        ptr_arr = (ctypes.c_void_p * len(ptrs))(*[ctypes.addressof(vals) + 8 * i for i in range(len(ptrs))])
        _check(cu.cuLaunchKernel(fn, info["row_tiles"], nblocks, 1, info["threads"], 1, 1, info["smem"],
                                 cu.CUstream(stream.cuda_stream), ctypes.addressof(ptr_arr), 0))

    def act_map(self, name: str, act_address: int, nblocks: int):
        """Device address of the activation tensor map of an ``act_tma`` kernel (encoded once per address and block
        count: ``gcmoe_runtime.workspace.act_tma``), 0 for the others."""
        import torch

        from gcmoe_runtime.workspace.act_tma import encode_act_map

        info = self.index[name]
        if not info.get("act_tma"):
            return 0
        key = (info["bm"], info["k"], act_address, nblocks)
        if key not in self._maps:
            raw = encode_act_map(act_address, nblocks * info["bm"], info["k"], info["bm"])
            self._maps[key] = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to("cuda")
        return self._maps[key].data_ptr()

    def launch_persistent(self, name: str, ncta: int, ptrs: list[int], nblocks: int, stream=None):
        """Persistent kernel: 15 u64 addresses (role2_persistent.PARAMS order up to ``err``), then the harness's
        kernel's task counter (``ticket``: zeroed once; a dynamic_tasks launch leaves it zeroed), the activation
        tensor map's address (:meth:`act_map`, of ``ptrs[3]``) and the u32 block count."""
        from cuda.bindings import driver as cu
        import torch

        _, _, fn, info = self.function(name)
        assert info.get("persistent") and len(ptrs) == 15, (name, len(ptrs))
        stream = stream or torch.cuda.current_stream()
        vals = (ctypes.c_uint64 * 17)(*ptrs, self._ticket(name).data_ptr(), self.act_map(name, ptrs[3], nblocks))
        nb = ctypes.c_uint32(nblocks)
        addrs = [ctypes.addressof(vals) + 8 * i for i in range(17)] + [ctypes.addressof(nb)]
        ptr_arr = (ctypes.c_void_p * 18)(*addrs)
        _check(cu.cuLaunchKernel(fn, ncta, 1, 1, info["threads"], 1, 1, info["smem"],
                                 cu.CUstream(stream.cuda_stream), ctypes.addressof(ptr_arr), 0))
        self._keep = (vals, nb, ptr_arr)

    def _ticket(self, name: str):
        """``name``'s ticket formal, allocated zeroed on first use: a u32 task counter, or for a step_stamps build its
        stamp buffer (``[cta][warpgroup][step][event]`` u32)."""
        if name not in self._tickets:
            import torch

            ctas, steps, events = self.index[name].get("step_stamps") or (0, 0, ())
            self._tickets[name] = torch.zeros(max(1, ctas * 2 * steps * len(events)), dtype=torch.int32,
                                              device="cuda")
        return self._tickets[name]

    def stamps(self, name: str):
        """A step_stamps build's stamp buffer as ``[cta][warpgroup][step][event]`` int32 (``%clock`` values; the
        buffer is the launch's ticket formal: fill it before the launch to tell stamped slots from the others)."""
        ctas, steps, events = self.index[name]["step_stamps"]
        self.function(name)
        return self._ticket(name).view(ctas, 2, steps, len(events))

    def ticket_value(self, name: str) -> int:
        """``name``'s task counter after its last launch (0 unless a launch was cut short; a step_stamps build's
        ticket formal is its stamp buffer, not a counter: 0)."""
        if name not in self._tickets or self.index[name].get("step_stamps"):
            return 0
        return int(self._tickets[name].item())


class RingSignals:
    """Per-ring-block handshake words as the persistent kernel sees them (paper §4.3): generation,
    l1_full_count, the release counter, the 64-bit l2_full_mask. ``ready`` publishes every block."""

    def __init__(self, nblocks: int, bm: int, gen=None):
        import torch

        self.bm = bm
        self.gen = gen if gen is not None else torch.zeros(nblocks, dtype=torch.int32, device="cuda")
        self.l1_full = torch.zeros(nblocks, dtype=torch.int32, device="cuda")
        self.empty = torch.zeros(nblocks, dtype=torch.int32, device="cuda")
        self.l2_mask = torch.zeros(nblocks, dtype=torch.int64, device="cuda")

    def ready(self):
        self.l1_full.copy_(self.bm * (self.gen + 1))

    def reset(self):
        self.l1_full.zero_()
        self.empty.zero_()
        self.l2_mask.zero_()


def sm90_weights(e: int, n: int, k: int, gate_up: bool, gen, k_interleave: bool = False):
    """Random FP32 weights -> MXFP4 -> the SM90 transform (``k_interleave``: the K order of a build with
    ``Role2GemmConfig.k_interleave``, its index entry's flag). Returns (tiles, scale tiles, expert factor,
    canonical FP32 dequantised weights [E, N, K]) on the GPU. Row magnitudes spread over 2**-3..2**3
    so the K32 scales and the window repack are exercised."""
    import torch

    from gcmoe_runtime.numerics.quant import quantize_mxfp4
    from gcmoe_runtime.numerics.transforms_sm90 import transform_matrix_sm90

    w = torch.randn((e, n, k), generator=gen, device="cuda") * 0.05
    w *= 2.0 ** torch.randint(-3, 4, (e, n, k // 32, 1), generator=gen, device="cuda").float().repeat_interleave(
        32, dim=3).view(e, n, k)
    packed, scales = quantize_mxfp4(w)
    del w
    m = transform_matrix_sm90(packed, scales, gate_up, k_interleave)
    return (m.tiles.contiguous(), m.kernel_scales(), m.expert_factor.float().contiguous(), m.dequantize())


def random_packed_experts(torch, e: int, h: int, i: int, gen):
    """Timing inputs of ``e`` experts of shape (H, I): random packed W1 / W2 codes (every byte is a valid pair of
    codes) and stored scales inside the window the SM90 transform guarantees (``sm90_window``: byte STORED_BIAS + r,
    r in 0..WINDOW_STEPS; the folding decoder assumes it), the expert factors and the identity expert map. Returns
    (w1, s1, w2, s2, ef, bexp) on the GPU. Random bytes: the same inputs serve either K order of the tiles
    (``Role2GemmConfig.k_interleave``)."""
    from gcmoe_runtime.numerics.sm90_window import STORED_BIAS, WINDOW_STEPS

    lo, hi = STORED_BIAS, STORED_BIAS + WINDOW_STEPS + 1
    w1 = torch.randint(0, 256, (e * 2 * i * h // 2,), dtype=torch.uint8, device="cuda", generator=gen)
    s1 = torch.randint(lo, hi, (e * 2 * i * h // 32,), dtype=torch.uint8, device="cuda", generator=gen)
    w2 = torch.randint(0, 256, (e * h * i // 2,), dtype=torch.uint8, device="cuda", generator=gen)
    s2 = torch.randint(lo, hi, (e * h * i // 32,), dtype=torch.uint8, device="cuda", generator=gen)
    ef = torch.full((e,), 64.0, device="cuda")
    bexp = torch.arange(e, dtype=torch.int32, device="cuda")
    return w1, s1, w2, s2, ef, bexp


def e4m3_random(torch, shape, gen, scale=1.0):
    x = torch.randn(shape, generator=gen, device="cuda") * scale
    return x.clamp(-448, 448).to(torch.float8_e4m3fn)
