"""CuTe DSL -> PTX on a machine without a GPU.

Owns everything that touches the DSL's configuration:

* the target arch is always explicit: ``CUTE_DSL_ARCH`` is set before the DSL is first imported
  (without it the DSL silently targets sm_100a on a GPU-less machine), the DSL's arch setting is
  re-pinned before every trace, ``--gpu-arch`` is passed to ``cute.compile`` and the PTX's
  ``.target`` line is checked afterwards;
* the DSL's own compile-affecting settings (debug, lineinfo, assertions, compiler_opt, ...) are
  locked to :data:`LOCKED_DSL_SETTINGS`; an environment that changes one is an error naming the
  ``CUTE_DSL_*`` variable. The effective values are captured for the compiler identity;
* kernels get stable entry names (``set_name_prefix(prefix, remove_cutlass_symbol=True,
  keep_mangled_name=False)`` -> entry ``<prefix>_0``);
* a kernel whose shared-memory allocations exceed its ``launch(smem=...)`` is an error (the DSL
  would only say so at launch time, which we never run);
* every trace dumps into its own fresh temporary directory (the DSL needs it to exist) that is
  removed afterwards, so parallel compiles never see each other's PTX.

Use :func:`import_dsl` (never ``import cutlass`` first) and :func:`trace_to_ptx`.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Arches we let the DSL target (the manifest schema accepts these).
DSL_ARCHES = ("sm_90a", "sm_100a", "sm_103a")
#: The DSL flavour we build with: cu13 emits PTX ISA 9.4 for the locked ptxas 13.4.59.
DSL_FLAVOR = "cu13"
DSL_VERSION = "4.8.1"

#: The DSL's compile-affecting settings (its ``affects_compile`` env vars) and the only values we
#: build with. ``arch`` is set per trace; ``shared_libs`` is checked for the flavour separately.
LOCKED_DSL_SETTINGS: dict[str, Any] = {
    "debug": False,
    "enable_pyir": False,
    "auto_m2s": False,
    "tolerate_m2m": True,
    "lineinfo": False,
    "dryrun": False,
    "warnings_as_errors": False,
    "compiler_opt": "",
    "compiler_backend": "legacy",
    "enable_assertions": False,
    "enable_tvm_ffi": False,
    "loc_tracebacks": 0,
    "use_extension_compiler": False,
}

_lock = threading.Lock()


class FrontendError(RuntimeError):
    """The DSL could not be configured as locked, or its output was not what we asked for."""


@dataclass(frozen=True)
class FrontendResult:
    ptx: str
    entry_name: str  # the stable .entry symbol found in the PTX
    dsl_settings: dict[str, Any]  # effective compile-affecting DSL settings (host-path free)
    seconds: float
    ir: str = ""  # the DSL's MLIR after canonicalize+cse (source of the TMA atom facts)


def _check_arch(arch: str) -> None:
    if arch not in DSL_ARCHES:
        raise FrontendError(f"target arch {arch!r} is not supported by the frontend; supported: {DSL_ARCHES}")


def import_dsl(arch: str):
    """Import the CuTe DSL with an explicit target arch; return the CuTe DSL singleton.

    Safe to call repeatedly and with different arches (the setting is re-pinned per trace).
    """
    _check_arch(arch)
    if "cutlass" not in sys.modules:
        # The DSL reads its settings once, at import; the arch must be set before that.
        os.environ["CUTE_DSL_ARCH"] = arch
        os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")
    import cutlass  # noqa: F401  (import after the environment is set)
    from cutlass.cutlass_dsl import CuTeDSL

    dsl = CuTeDSL._get_dsl()
    if cutlass.__version__ != DSL_VERSION:
        raise FrontendError(f"nvidia-cutlass-dsl is {cutlass.__version__}; the build is locked to {DSL_VERSION}")
    return dsl


def dsl_settings(dsl, arch: str) -> dict[str, Any]:
    """Check the DSL's compile-affecting settings against the lock; return them (host-path free)."""
    env = dsl.envar
    got: dict[str, Any] = {}
    for entry in type(env)._ENV_VAR_SPEC:
        if not entry.affects_compile:
            continue
        got[entry.key_name] = getattr(env, entry.key_name)
    unknown = set(got) - set(LOCKED_DSL_SETTINGS) - {"arch", "shared_libs"}
    if unknown:
        raise FrontendError(
            f"CuTe DSL {DSL_VERSION} has compile-affecting settings the build does not lock: {sorted(unknown)}"
        )
    for key, want in LOCKED_DSL_SETTINGS.items():
        if got.get(key) != want:
            raise FrontendError(
                f"CuTe DSL setting {key}={got.get(key)!r} (environment variable CUTE_DSL_{key.upper()}) "
                f"differs from the locked value {want!r}; unset it for builds"
            )
    if got.get("arch") != arch:
        raise FrontendError(f"CuTe DSL arch is {got.get('arch')!r}, expected {arch!r} (CUTE_DSL_ARCH)")
    libs = str(got.get("shared_libs") or "")
    m = re.search(r"nvidia_cutlass_dsl/(cu\d+)/lib/[^/:]+$", libs)
    if not m or m.group(1) != DSL_FLAVOR:
        raise FrontendError(
            f"CuTe DSL runtime libraries {libs!r} are not the {DSL_FLAVOR} flavour (CUTE_DSL_LIBS); "
            f"install nvidia-cutlass-dsl[{DSL_FLAVOR}]=={DSL_VERSION}"
        )
    got["shared_libs"] = m.group(0)  # drop the host path, keep the flavour/library name
    return dict(sorted(got.items()))


def smem_exceeds_launch(host_ir: str) -> bool:
    """True when the DSL's host launcher keeps its "shared memory usage ... may exceed" report.

    The DSL compares the kernel's (static) shared-memory allocations with ``launch(smem=...)`` and
    folds the comparison; the report survives lowering only when usage exceeds the allocation. We
    never run the DSL's launcher, so we look for it in the lowered host module instead.
    """
    names = re.findall(r'llvm\.mlir\.global internal constant @(\w+)\("[^"]*may exceed available memory', host_ir)
    return any(re.search(rf"addressof @{re.escape(n)}\b", host_ir) for n in names)


def dsl_compile_options(arch: str) -> tuple[str, ...]:
    """The code-affecting ``cute.compile`` options of every trace (keep/dump options only add files)."""
    return ("--gpu-arch", arch)


_ENTRY_RE = re.compile(r"^\.(?:visible|weak)\s+\.entry\s+([A-Za-z_$][\w$]*)\s*\(", re.M)
_TARGET_RE = re.compile(r"^\.target\s+([\w,\s]+?)\s*$", re.M)


def trace_to_ptx(host_fn, kernel_fn, args: tuple, name_prefix: str, arch: str) -> FrontendResult:
    """Trace ``host_fn(*args)`` (a ``@cute.jit`` that launches exactly one ``@cute.kernel``,
    ``kernel_fn``) for ``arch`` and return its PTX.

    ``args`` are fake tensors / pointers / constexprs (no GPU memory). The kernel's entry symbol is
    ``<name_prefix>_0``; anything else (another name, several entries, another target) is an error.
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name_prefix or ""):
        raise FrontendError(f"kernel name prefix {name_prefix!r} must be a C identifier")
    dsl = import_dsl(arch)
    import cutlass.cute as cute

    with _lock:  # the DSL's settings and a kernel's name options are process-global
        dsl.envar._arch = arch
        settings = dsl_settings(dsl, arch)
        kernel_fn.set_name_prefix(name_prefix, remove_cutlass_symbol=True, keep_mangled_name=False)
        with tempfile.TemporaryDirectory(prefix="gcmoe-dsl-") as dump:
            # The IR (after canonicalize+cse) carries the TMA atoms' facts (format, box bits, smem
            # swizzle) that the recorded TensorMapEncodings are checked against; the DSL writes it to
            # its dump_dir, which is pointed at our private directory for this one trace.
            saved = (dsl.envar.keep_ir_clean, dsl.envar.dump_dir)
            dsl.envar.keep_ir_clean, dsl.envar.dump_dir = True, dump
            t0 = time.perf_counter()
            try:
                compiled = cute.compile(
                    host_fn, *args, options=" ".join((*dsl_compile_options(arch), "--keep-ptx", "--dump-dir", dump))
                )
            except Exception as exc:
                raise FrontendError(f"CuTe DSL failed to compile kernel {name_prefix!r} for {arch}: {exc}") from exc
            finally:
                dsl.envar.keep_ir_clean, dsl.envar.dump_dir = saved
            seconds = time.perf_counter() - t0
            ptx_files = sorted(Path(dump).rglob("*.ptx"))
            ir_files = sorted(Path(dump).rglob("*_clean.mlir"))
            if len(ptx_files) != 1 or len(ir_files) != 1:
                raise FrontendError(
                    f"kernel {name_prefix!r}: expected one PTX and one IR file from the DSL, found "
                    f"{[p.name for p in ptx_files + ir_files]}"
                )
            ptx = ptx_files[0].read_text()
            ir = ir_files[0].read_text()
    if smem_exceeds_launch(str(compiled.ir_module)):
        raise FrontendError(
            f"kernel {name_prefix!r}: its shared-memory allocations exceed the dynamic shared memory its "
            "launch(smem=...) gives it (the DSL's own launch-time check would fire); raise smem"
        )
    entries = _ENTRY_RE.findall(ptx)
    want = f"{name_prefix}_0"
    if entries != [want]:
        raise FrontendError(f"kernel {name_prefix!r}: expected exactly one entry {want!r} in the PTX, found {entries}")
    targets = _TARGET_RE.findall(ptx)
    if [t.strip() for t in targets] != [arch]:
        raise FrontendError(f"kernel {name_prefix!r}: PTX .target is {targets}, expected {arch!r}")
    return FrontendResult(ptx=ptx, entry_name=want, dsl_settings=settings, seconds=seconds, ir=ir)
