"""Thin, checked CUDA driver calls (cuda-bindings).

Every driver call in the runtime goes through :func:`call`, so a failure always names the
call and the CUresult (``cuGreenCtxCreate failed: CUDA_ERROR_INVALID_VALUE (1): invalid
argument``) instead of surfacing as a tuple nobody looked at. The bindings are imported lazily:
importing the runtime on a machine without cuda-bindings works, and the first call says what is
missing. Tests substitute a fake driver object exposing the same ``call`` surface.
"""
from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_cu = None
_initialised = False


class CudaDriverError(RuntimeError):
    """A driver call returned something other than CUDA_SUCCESS."""

    def __init__(self, call: str, code: int, name: str, detail: str = ""):
        self.call = call
        self.code = code
        self.result_name = name
        msg = f"{call} failed: {name} ({code})"
        if detail:
            msg += f": {detail}"
        super().__init__(msg)


def bindings():
    """The ``cuda.bindings.driver`` module (imported on first use)."""
    global _cu
    if _cu is None:
        try:
            from cuda.bindings import driver as cu  # noqa: PLC0415 - lazy on purpose
        except ImportError as e:  # pragma: no cover - depends on the machine
            raise RuntimeError(
                "gcmoe_runtime needs the 'cuda-bindings' package (pip install cuda-bindings)"
            ) from e
        _cu = cu
    return _cu


def result_name(code: Any) -> tuple[int, str, str]:
    """(integer code, enum name, driver description) of a CUresult."""
    cu = bindings()
    try:
        res = cu.CUresult(int(code))
        name = res.name
    except ValueError:
        return int(code), f"CUresult_{int(code)}", ""
    err, desc = cu.cuGetErrorString(res)
    detail = desc.decode() if (err == cu.CUresult.CUDA_SUCCESS and isinstance(desc, bytes)) else ""
    return int(code), name, detail


def check(call_name: str, ret: Any) -> Any:
    """Check a cuda-bindings return tuple ``(CUresult, *values)``; return the value(s)."""
    if not isinstance(ret, tuple):
        ret = (ret,)
    err, vals = ret[0], ret[1:]
    if int(err) != 0:
        code, name, detail = result_name(err)
        raise CudaDriverError(call_name, code, name, detail)
    if not vals:
        return None
    return vals[0] if len(vals) == 1 else vals


def call(name: str, *args: Any) -> Any:
    """Call ``cuda.bindings.driver.<name>(*args)`` and check its CUresult."""
    fn = getattr(bindings(), name, None)
    if fn is None:
        raise RuntimeError(f"cuda-bindings has no driver function {name!r} (too old a version?)")
    return check(name, fn(*args))


def init() -> None:
    """cuInit(0) once per process."""
    global _initialised
    with _lock:
        if not _initialised:
            call("cuInit", 0)
            _initialised = True


class Driver:
    """The real driver, as an object, so modules can take a fake one in tests."""

    def call(self, name: str, *args: Any) -> Any:
        init()
        return call(name, *args)

    @property
    def cu(self):
        return bindings()


#: The process-wide real driver.
REAL = Driver()
