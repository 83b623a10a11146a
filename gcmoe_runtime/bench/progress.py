"""Progress display for sweeps: one line per finished (model, T, implementation) with elapsed time and ETA.

Plain lines on stderr rather than a redrawn bar, so that logs captured from the GPU machine stay readable.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, enabled: bool = True, stream: TextIO | None = None, clock=time.monotonic):
        self.total = max(total, 1)
        self.done = 0
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.clock = clock
        self.t0 = clock()

    def line(self, label: str, result: str) -> str:
        el = self.clock() - self.t0
        eta = el / self.done * (self.total - self.done) if self.done else float("nan")
        width = len(str(self.total))
        bar_n = int(20 * self.done / self.total)
        bar = "#" * bar_n + "." * (20 - bar_n)
        return (f"[{bar}] {self.done:>{width}}/{self.total} {label:<40} {result}  "
                f"elapsed {el:6.1f}s eta {eta:6.1f}s")

    def step(self, label: str, result: str = "") -> None:
        self.done += 1
        if self.enabled:
            print(self.line(label, result), file=self.stream, flush=True)
