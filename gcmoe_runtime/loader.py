"""Kernel loading from a verified bundle through the driver's library API — no JIT, no compiler.

``KernelLoader.open(path)`` verifies the whole bundle (gcmoe_runtime.artifacts.bundle.open_bundle);
``loader.kernel(role, **variant)`` finds the one matching artifact (a missing variant raises
``VariantNotInBundle`` naming the variant and the manifest entry to add — never a compile), loads
its cubin with ``cuLibraryLoadData`` (refusing anything that is not an ELF cubin, so the driver can
never be asked to JIT PTX), resolves the entry with ``cuLibraryGetKernel``, checks the recorded
parameter schema against ``cuKernelGetParamInfo`` and applies the launch facts (dynamic shared
memory; non-portable cluster sizes) per device. Loaded kernels are cached by cubin hash and entry.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from gcmoe_runtime import driver
from gcmoe_runtime.artifacts.bundle import Bundle, BundleError, VariantNotInBundle, open_bundle
from gcmoe_runtime.artifacts.record import ArtifactRecord
from gcmoe_runtime.params import KernelArgs, ParamSchemaError, check_against_driver, validate_schema

__all__ = ["KernelLoader", "LoadedKernel", "LoaderError", "VariantNotInBundle", "BundleError"]

ELF_MAGIC = b"\x7fELF"


class LoaderError(RuntimeError):
    pass


@dataclass
class LoadedKernel:
    record: ArtifactRecord
    library: Any  # CUlibrary
    kernel: Any  # CUkernel
    param_info: tuple[tuple[int, int], ...]
    _devices_configured: set = field(default_factory=set, repr=False)

    @property
    def name(self) -> str:
        return self.record.kernel_name

    def args(self, values: Mapping[str, Any]) -> KernelArgs:
        """Pack ``values`` (param name -> value) by the recorded schema."""
        return KernelArgs.build(self.name, self.record.params, values)


def read_param_info(drv: Any, kern: Any, name: str, expected: int) -> tuple[tuple[int, int], ...]:
    """(offset, size) of every formal; also proves there is no formal beyond ``expected``."""
    info = []
    for i in range(expected):
        try:
            off, size = drv.call("cuKernelGetParamInfo", kern, i)
        except driver.CudaDriverError as e:
            raise ParamSchemaError(
                f"kernel {name!r}: the record lists {expected} parameters but the cubin has only {i} ({e})"
            ) from None
        info.append((int(off), int(size)))
    try:
        drv.call("cuKernelGetParamInfo", kern, expected)
    except driver.CudaDriverError:
        pass
    else:
        raise ParamSchemaError(f"kernel {name!r}: the cubin has more than the {expected} recorded parameters")
    return tuple(info)


def configure_kernel(drv: Any, lk: LoadedKernel, device: int) -> None:
    """Set the kernel attributes the launch facts need on ``device`` (once): the dynamic shared
    memory opt-in, and non-portable cluster sizes above 8 CTAs."""
    if device in lk._devices_configured:
        return
    cu = drv.cu
    lf = lk.record.launch
    if lf.dynamic_smem > 0:
        drv.call("cuKernelSetAttribute", cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                 int(lf.dynamic_smem), lk.kernel, device)
    if lf.cluster[0] * lf.cluster[1] * lf.cluster[2] > 8:
        drv.call("cuKernelSetAttribute", cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                 1, lk.kernel, device)
    lk._devices_configured.add(device)


def max_active_ctas_per_sm(drv: Any, lk: LoadedKernel) -> int:
    """CTAs of ``lk`` one SM holds at once with its recorded block size and dynamic shared memory (driver
    occupancy calculator, in the current context; the kernel's shared-memory opt-in must be set first)."""
    lf = lk.record.launch
    fn = drv.call("cuKernelGetFunction", lk.kernel)
    return int(drv.call("cuOccupancyMaxActiveBlocksPerMultiprocessor", fn, lf.block[0] * lf.block[1] * lf.block[2],
                        int(lf.dynamic_smem)))


class KernelLoader:
    """Load and cache kernels from one verified bundle."""

    def __init__(self, bundle: Bundle, drv: Any = None):
        self.bundle = bundle
        self.drv = drv or driver.REAL
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], LoadedKernel] = {}

    @classmethod
    def open(cls, path: str, expected_top_hash: str | None = None, drv: Any = None) -> "KernelLoader":
        return cls(open_bundle(path, expected_top_hash), drv)

    def find(self, role: str, **variant: Any) -> ArtifactRecord:
        return self.bundle.find(role, **variant)

    def kernel(self, role: str, **variant: Any) -> LoadedKernel:
        return self.load(self.find(role, **variant))

    def load(self, rec: ArtifactRecord) -> LoadedKernel:
        key = (rec.cubin_sha256, rec.kernel_name)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            validate_schema(rec.kernel_name, rec.params)
            cubin = self.bundle.cubin(rec.key)
            if not cubin.startswith(ELF_MAGIC):
                raise LoaderError(
                    f"artifact {rec.key[:12]} ({rec.kernel_name}) is not an ELF cubin; the runtime never JIT-compiles"
                )
            lib = self.drv.call("cuLibraryLoadData", cubin, None, None, 0, None, None, 0)
            try:
                kern = self.drv.call("cuLibraryGetKernel", lib, rec.kernel_name.encode())
                info = read_param_info(self.drv, kern, rec.kernel_name, len(rec.params))
                check_against_driver(rec.kernel_name, rec.params, info)
            except Exception:
                self.drv.call("cuLibraryUnload", lib)
                raise
            lk = LoadedKernel(rec, lib, kern, info)
            self._cache[key] = lk
            return lk

    def configure(self, lk: LoadedKernel, device: int) -> None:
        """Apply the launch facts that are kernel attributes, once per device."""
        configure_kernel(self.drv, lk, device)

    def launch(self, lk: LoadedKernel, grid: int, args: KernelArgs, stream: Any, device: int = 0) -> None:
        """Launch one kernel directly (outside a graph) on ``stream``; it runs in the stream's context
        (a green stream's green context). Cluster kernels go through graphs only."""
        lf = lk.record.launch
        if tuple(lf.cluster) != (1, 1, 1):
            raise LoaderError(f"kernel {lk.name}: cluster {lf.cluster} kernels are launched through the layer graph")
        self.configure(lk, device)
        cu = self.drv.cu
        self.drv.call("cuLaunchKernel", cu.CUfunction(int(lk.kernel)), grid, 1, 1, *lf.block,
                      int(lf.dynamic_smem), stream, args.kernel_params, 0)

    def unload_all(self) -> None:
        with self._lock:
            for lk in self._cache.values():
                self.drv.call("cuLibraryUnload", lk.library)
            self._cache.clear()
