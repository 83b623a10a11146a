"""The measurement protocol of paper §6.1: graph replay windows, L2 flush, event timing, statistics.

One *window* = `replays_per_window` back-to-back replays of one captured CUDA graph between two CUDA
events; the per-invocation latency is elapsed / replays. Before every window the L2 is flushed (a write
over a buffer several times the L2) and the ranks are synchronised (device sync + barrier).
`warmup_windows` windows are run and dropped, then `measured_windows` are kept. Each rank reports the
median of its measured windows; a point's latency is the slowest rank's median; a speedup is the
per-point ratio latency_baseline / latency_subject, and the mean speedup is the arithmetic mean of the
per-point ratios (not the ratio of means).

The statistics are plain Python (tested on the CPU); the timing path needs torch with CUDA.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Callable, Sequence


@dataclasses.dataclass(frozen=True)
class ProtocolConfig:
    replays_per_window: int = 100
    warmup_windows: int = 10
    measured_windows: int = 30
    l2_flush_bytes: int = 256 << 20   # H200 L2 is 50 MiB (60 MiB on some parts): 4x over

    def __post_init__(self) -> None:
        for f in ("replays_per_window", "measured_windows", "l2_flush_bytes"):
            if getattr(self, f) < 1:
                raise ValueError(f"protocol {f}={getattr(self, f)} must be >= 1")
        if self.warmup_windows < 0:
            raise ValueError(f"protocol warmup_windows={self.warmup_windows} must be >= 0")

    @property
    def is_paper(self) -> bool:
        return (self.replays_per_window, self.warmup_windows, self.measured_windows) == (100, 10, 30)


PAPER = ProtocolConfig()


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of no windows")
    return float(statistics.median(xs))


def slowest_rank(per_rank_medians: Sequence[float]) -> float:
    if not per_rank_medians:
        raise ValueError("no rank medians")
    return float(max(per_rank_medians))


def speedups(baseline: Sequence[float], subject: Sequence[float]) -> list[float]:
    """Per-point ratios baseline/subject (>1: subject faster)."""
    if len(baseline) != len(subject):
        raise ValueError(f"speedups: {len(baseline)} baseline points vs {len(subject)} subject points")
    for b, s in zip(baseline, subject):
        if not (b > 0 and s > 0):
            raise ValueError(f"speedups: latencies must be positive, got {b} and {s}")
    return [b / s for b, s in zip(baseline, subject)]


def mean_of_ratios(baseline: Sequence[float], subject: Sequence[float]) -> float:
    r = speedups(baseline, subject)
    if not r:
        raise ValueError("mean of ratios over no points")
    return sum(r) / len(r)


# ----------------------------------------------------------------------------------------------
# GPU timing path (torch imported lazily so the statistics above stay importable anywhere)


#: how an :class:`L2Flusher` evicts the L2: ``write`` (the protocol's: zeroes its buffer, so the L2 is left full of
#: the buffer's dirty lines, written back as the next kernel's reads evict them) or ``read`` (reduces the buffer: the
#: L2 is left holding clean lines, nothing to write back)
FLUSH_MODES = ("write", "read")


class L2Flusher:
    """Evicts L2 by writing (or, ``mode="read"``, reading) a buffer larger than it."""

    def __init__(self, nbytes: int, device, mode: str = "write"):
        import torch

        if mode not in FLUSH_MODES:
            raise ValueError(f"L2 flush mode={mode!r} must be one of {FLUSH_MODES}")
        self.mode = mode
        self.buf = torch.zeros(nbytes // 4, dtype=torch.int32, device=device)
        self.sink = torch.zeros((), dtype=torch.int64, device=device)

    def __call__(self) -> None:
        import torch

        if self.mode == "write":
            self.buf.zero_()
        else:
            torch.sum(self.buf, dim=0, dtype=torch.int64, out=self.sink)


def capture_graph(step: Callable[[], None], warm_steps: int = 2):
    """Capture one invocation of `step` as a CUDA graph (warm-up on a side stream first, as torch requires)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm_steps):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    torch.cuda.synchronize()
    return g


@dataclasses.dataclass
class WindowTimes:
    warmup_us: list[float]
    measured_us: list[float]

    @property
    def median_us(self) -> float:
        return median(self.measured_us)


def measure_windows(replay: Callable[[], None], cfg: ProtocolConfig, flush: Callable[[], None],
                    barrier: Callable[[], None] | None = None) -> WindowTimes:
    """Run the protocol's windows for one replayable invocation on the current device and stream."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out: list[float] = []
    for _ in range(cfg.warmup_windows + cfg.measured_windows):
        flush()
        torch.cuda.synchronize()
        if barrier is not None:
            barrier()
        start.record()
        for _ in range(cfg.replays_per_window):
            replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1000.0 / cfg.replays_per_window)
    return WindowTimes(warmup_us=out[:cfg.warmup_windows], measured_us=out[cfg.warmup_windows:])


def measure_windows_host(call: Callable[[], None], cfg: ProtocolConfig,
                         barrier: Callable[[], None] | None = None) -> WindowTimes:
    """CPU dry run of the window loop (host clock around eager calls): exercises the harness without a
    GPU; its numbers are not performance measurements."""
    import time

    out: list[float] = []
    for _ in range(cfg.warmup_windows + cfg.measured_windows):
        if barrier is not None:
            barrier()
        t0 = time.perf_counter()
        for _ in range(cfg.replays_per_window):
            call()
        out.append((time.perf_counter() - t0) * 1e6 / cfg.replays_per_window)
    return WindowTimes(warmup_us=out[:cfg.warmup_windows], measured_us=out[cfg.warmup_windows:])
