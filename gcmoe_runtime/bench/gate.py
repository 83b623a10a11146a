"""Idle-GPU gate of paper §6.1: every gated GPU at 0% utilisation, with no compute processes and at least
51 200 MiB free, in each of >= 3 samples spanning >= 10 s.

Samplers: NVML through nvidia-ml-py (`pynvml`) when importable, else `nvidia-smi` queries. Both are
optional: with neither, the gate reports that it could not sample (and fails when enforced). Run the gate
*before* this process touches CUDA: our own context would count as a compute process.
"""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
import time
from typing import Callable, Protocol, Sequence


@dataclasses.dataclass(frozen=True)
class GpuSample:
    index: int
    utilization_pct: float
    memory_free_mib: float
    compute_processes: int


@dataclasses.dataclass(frozen=True)
class GateCriteria:
    max_utilization_pct: float = 0.0
    max_compute_processes: int = 0
    min_free_mib: float = 51_200.0
    min_samples: int = 3
    min_span_s: float = 10.0


@dataclasses.dataclass
class GateResult:
    passed: bool
    reasons: list[str]
    sampler: str
    samples: list[dict]          # [{t, gpus: [GpuSample as dict]}]
    criteria: dict

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class Sampler(Protocol):
    name: str

    def sample(self) -> list[GpuSample]: ...


class NvmlSampler:
    name = "nvml"

    def __init__(self):
        import pynvml  # nvidia-ml-py

        self._n = pynvml
        pynvml.nvmlInit()

    def sample(self) -> list[GpuSample]:
        n = self._n
        out = []
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            util = n.nvmlDeviceGetUtilizationRates(h).gpu
            free = n.nvmlDeviceGetMemoryInfo(h).free / (1 << 20)
            procs = len(n.nvmlDeviceGetComputeRunningProcesses(h))
            out.append(GpuSample(i, float(util), float(free), procs))
        return out


class NvidiaSmiSampler:
    name = "nvidia-smi"

    def __init__(self, exe: str | None = None):
        self.exe = exe or shutil.which("nvidia-smi")
        if not self.exe:
            raise RuntimeError("nvidia-smi not found on PATH")

    def _q(self, *args: str) -> list[list[str]]:
        r = subprocess.run([self.exe, *args, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                           timeout=30, check=True)
        return [[c.strip() for c in line.split(",")] for line in r.stdout.strip().splitlines() if line.strip()]

    def sample(self) -> list[GpuSample]:
        gpus = self._q("--query-gpu=index,uuid,utilization.gpu,memory.free")
        apps = self._q("--query-compute-apps=gpu_uuid,pid")
        count: dict[str, int] = {}
        for row in apps:
            if row and row[0]:
                count[row[0]] = count.get(row[0], 0) + 1
        return [GpuSample(int(i), float(u), float(f), count.get(uuid, 0)) for i, uuid, u, f in gpus]


def default_sampler() -> Sampler | None:
    for cls in (NvmlSampler, NvidiaSmiSampler):
        try:
            return cls()
        except Exception:
            continue
    return None


def evaluate(samples: Sequence[tuple[float, Sequence[GpuSample]]], devices: Sequence[int] | None,
             criteria: GateCriteria = GateCriteria()) -> list[str]:
    """Reasons the gate fails (empty list: it passes). `samples` are (time s, readings) pairs."""
    reasons: list[str] = []
    if len(samples) < criteria.min_samples:
        reasons.append(f"only {len(samples)} samples, need >= {criteria.min_samples}")
    if samples:
        span = samples[-1][0] - samples[0][0]
        if span < criteria.min_span_s:
            reasons.append(f"samples span {span:.1f} s, need >= {criteria.min_span_s:g} s")
    for t, readings in samples:
        seen = {g.index: g for g in readings}
        for d in (devices if devices is not None else sorted(seen)):
            g = seen.get(d)
            if g is None:
                reasons.append(f"t={t:.1f}s GPU {d}: no reading")
                continue
            if g.utilization_pct > criteria.max_utilization_pct:
                reasons.append(f"t={t:.1f}s GPU {d}: utilisation {g.utilization_pct:g}% > "
                               f"{criteria.max_utilization_pct:g}%")
            if g.compute_processes > criteria.max_compute_processes:
                reasons.append(f"t={t:.1f}s GPU {d}: {g.compute_processes} compute processes > "
                               f"{criteria.max_compute_processes}")
            if g.memory_free_mib < criteria.min_free_mib:
                reasons.append(f"t={t:.1f}s GPU {d}: {g.memory_free_mib:.0f} MiB free < {criteria.min_free_mib:.0f} MiB")
    return reasons


def run_gate(sampler: Sampler | None, devices: Sequence[int] | None, criteria: GateCriteria = GateCriteria(),
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> GateResult:
    """Take `min_samples` samples evenly over `min_span_s` and evaluate them."""
    if sampler is None:
        return GateResult(False, ["no GPU sampler available (neither NVML nor nvidia-smi)"], "none", [],
                          dataclasses.asdict(criteria))
    n = max(criteria.min_samples, 2)
    interval = criteria.min_span_s / (n - 1)
    t0 = clock()
    taken: list[tuple[float, list[GpuSample]]] = []
    for i in range(n):
        if i:
            target = t0 + i * interval
            while (now := clock()) < target:
                sleep(target - now)
        taken.append((clock() - t0, sampler.sample()))
    reasons = evaluate(taken, devices, criteria)
    return GateResult(not reasons, reasons, sampler.name,
                      [{"t": t, "gpus": [dataclasses.asdict(g) for g in gs]} for t, gs in taken],
                      dataclasses.asdict(criteria))


def visible_devices(env: dict) -> list[int] | None:
    """Physical indices named by CUDA_VISIBLE_DEVICES (None: all); UUID forms are not mapped (None)."""
    v = env.get("CUDA_VISIBLE_DEVICES")
    if v is None or v.strip() == "":
        return None
    try:
        return [int(x) for x in v.split(",") if x.strip()]
    except ValueError:
        return None
