"""The locked assembler: find the pinned ptxas, lock its options, assemble PTX to a cubin.

ptxas comes only from the pip package ``nvidia-cuda-nvcc==13.4.59`` (the assembler matching the
CuTe DSL's bundled NVVM 13.4.59; its cu13 flavour emits PTX ISA 9.4, which older ptxas rejects).
No PATH lookup, no CUDA_HOME, no user-supplied binary: every build machine runs the same bytes.

Options are ``--gpu-name <arch> -O3`` plus a short whitelist (:data:`WHITELIST`). Relocatable /
separate-compilation flags and user overrides of the locked options are rejected with
:class:`ToolchainOptionError` naming the offending flag.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

PTXAS_PACKAGE = "nvidia-cuda-nvcc"
PTXAS_PACKAGE_VERSION = "13.4.59"
#: ``ptxas --version`` must report exactly this (release 13.4, V13.4.59).
PTXAS_VERSION = "13.4.59"

#: The arches this toolchain assembles for (sm_100a/sm_103a are accepted by the manifest schema
#: and assemble with this ptxas; only sm_90a kernels exist today).
SUPPORTED_ARCHES = ("sm_90a", "sm_100a", "sm_103a")

LOCKED_OPTIONS = ("-O3",)

#: Extra flags a kernel may ask for: name -> allowed values (None: a bare flag, no value).
WHITELIST: dict[str, tuple[str, ...] | None] = {
    "--register-usage-level": tuple(str(i) for i in range(11)),
    "--fmad": ("true", "false"),
    "--warn-on-spills": None,
    "--warn-on-local-memory-usage": None,
    "--warning-as-error": None,
    "--suppress-async-bulk-multicast-advisory-warning": None,
}

#: Flags that produce relocatable / separately linked device code: never allowed.
_RELOCATABLE = {
    "-c", "--compile-only", "-rdc", "--relocatable-device-code", "-ewp",
    "--extensible-whole-program", "--preserve-relocs", "-preserve-relocs", "-dc", "--device-c",
    "-astoolspatch", "--compile-as-tools-patch",
}
#: Flags that would override what this module locks (arch, opt level, output, debug, ...).
_OVERRIDES = {
    "--gpu-name", "-arch", "--opt-level", "-O", "-O0", "-O1", "-O2", "-O3", "--output-file", "-o",
    "--options-file", "-optf", "--device-debug", "-g", "--generate-line-info", "-lineinfo",
    "--maxrregcount", "-maxrregcount", "--entry", "-e", "--input-as-string", "-ias", "--machine", "-m",
}


class ToolchainError(RuntimeError):
    """The pinned assembler is missing, is the wrong version, or failed."""


class ToolchainOptionError(ValueError):
    """A ptxas option outside the locked set + whitelist was requested."""


@dataclass(frozen=True)
class PtxasBinary:
    path: str
    size: int
    sha256: str
    version: str  # e.g. "13.4.59", parsed from ``ptxas --version``
    package: str  # e.g. "nvidia-cuda-nvcc==13.4.59"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@lru_cache(maxsize=1)
def locate_ptxas() -> PtxasBinary:
    """The pinned ptxas, version-checked. Raises ToolchainError with the fix when it is not there."""
    try:
        dist = metadata.distribution(PTXAS_PACKAGE)
    except metadata.PackageNotFoundError:
        raise ToolchainError(
            f"the locked assembler package {PTXAS_PACKAGE}=={PTXAS_PACKAGE_VERSION} is not installed; "
            f"install it with: pip install '{PTXAS_PACKAGE}=={PTXAS_PACKAGE_VERSION}'"
        ) from None
    if dist.version != PTXAS_PACKAGE_VERSION:
        raise ToolchainError(
            f"{PTXAS_PACKAGE} is {dist.version}, the build is locked to {PTXAS_PACKAGE_VERSION} "
            f"(its ptxas matches the CuTe DSL's NVVM); install '{PTXAS_PACKAGE}=={PTXAS_PACKAGE_VERSION}'"
        )
    candidates = [f for f in (dist.files or ()) if f.name == "ptxas" and f.parent.name == "bin"]
    if len(candidates) != 1:
        raise ToolchainError(
            f"{PTXAS_PACKAGE}=={dist.version}: expected exactly one bin/ptxas in its file list, "
            f"found {[str(c) for c in candidates]}"
        )
    path = Path(str(dist.locate_file(candidates[0]))).resolve()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise ToolchainError(f"pinned ptxas {path} is missing or not executable; reinstall {PTXAS_PACKAGE}")
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=False)
    m = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", out.stdout)
    if out.returncode != 0 or not m:
        raise ToolchainError(f"{path} --version failed or was not understood: {out.stdout!r} {out.stderr!r}")
    if m.group(2) != PTXAS_VERSION:
        raise ToolchainError(f"{path} reports V{m.group(2)}, the build is locked to V{PTXAS_VERSION}")
    return PtxasBinary(
        path=str(path), size=path.stat().st_size, sha256=_sha256_file(path), version=m.group(2),
        package=f"{PTXAS_PACKAGE}=={dist.version}",
    )


def _flag_name(token: str) -> tuple[str, str | None]:
    if "=" in token:
        name, value = token.split("=", 1)
        return name, value
    return token, None


def effective_options(arch: str, extra: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """``--gpu-name <arch> -O3`` + whitelisted extras (``--flag=value`` form), in a canonical order."""
    if arch not in SUPPORTED_ARCHES:
        raise ToolchainOptionError(f"ptxas arch {arch!r} is not supported; supported: {SUPPORTED_ARCHES}")
    if isinstance(extra, str):
        raise ToolchainOptionError(f"ptxas extra options must be a list of flags, got the string {extra!r}")
    seen: dict[str, str] = {}
    for token in extra:
        if not isinstance(token, str) or not token.startswith("-"):
            raise ToolchainOptionError(f"ptxas option {token!r}: expected a flag such as '--fmad=true'")
        name, value = _flag_name(token)
        if name in _RELOCATABLE or token in _RELOCATABLE:
            raise ToolchainOptionError(
                f"ptxas option {token!r} asks for relocatable/separately compiled device code; the build "
                "produces whole-program cubins only (the runtime loads them with cuLibraryLoadData)"
            )
        if name in _OVERRIDES or token in _OVERRIDES or re.fullmatch(r"-O\d", name):
            raise ToolchainOptionError(
                f"ptxas option {token!r} overrides a locked option; the locked options are "
                f"'--gpu-name {arch} {' '.join(LOCKED_OPTIONS)}' and cannot be changed"
            )
        if name not in WHITELIST:
            raise ToolchainOptionError(
                f"ptxas option {token!r} is not in the whitelist {sorted(WHITELIST)}"
            )
        allowed = WHITELIST[name]
        if allowed is None and value is not None:
            raise ToolchainOptionError(f"ptxas option {name} takes no value, got {token!r}")
        if allowed is not None and value not in allowed:
            raise ToolchainOptionError(f"ptxas option {name}: value {value!r} not in {allowed}")
        if name in seen and seen[name] != token:
            raise ToolchainOptionError(f"ptxas option {name} given twice with different values")
        seen[name] = token
    return ("--gpu-name", arch, *LOCKED_OPTIONS, *sorted(seen.values()))


#: ptxas advisories that fail a build: each is a kernel that assembles but runs far below what its source asks for.
#: C7512 "wgmma.mma_async instructions are serialized due to insufficient register resources": every wgmma then
#: waits for itself (``WARPGROUP.DEPBAR`` after each ``QGMMA``), on the whole function, silently (session 7 found the
#: shipped two-CTA role2 build so, for a session; ptxas prints it without ``-v``, and the old assemble dropped it).
FORBIDDEN_ADVISORIES = {"C7512": "wgmma serialized for lack of registers"}


def assemble(ptx: str, options: tuple[str, ...], *, what: str = "kernel") -> bytes:
    """Assemble PTX text with the pinned ptxas and the given *effective* options; return the cubin.

    ``options`` must come from :func:`effective_options` (checked again here: nothing else reaches
    the assembler). ``what`` names the kernel in errors. A :data:`FORBIDDEN_ADVISORIES` message from ptxas is an
    error (ToolchainError naming the code and ptxas' line).
    """
    if len(options) < 3 or options[0] != "--gpu-name":
        raise ToolchainOptionError(f"{what}: options {options!r} were not produced by effective_options()")
    if tuple(options) != effective_options(options[1], tuple(options[3:])):
        raise ToolchainOptionError(f"{what}: options {options!r} are not in canonical locked form")
    binary = locate_ptxas()
    with tempfile.TemporaryDirectory(prefix="gcmoe-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        dst = Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        proc = subprocess.run(
            [binary.path, *options, "-o", str(dst), str(src)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise ToolchainError(
                f"{what}: ptxas {binary.version} failed (exit {proc.returncode}) with options "
                f"{' '.join(options)}:\n{proc.stderr.strip() or proc.stdout.strip()}"
            )
        if not dst.is_file() or dst.stat().st_size == 0:
            raise ToolchainError(f"{what}: ptxas exited 0 but wrote no cubin")
        for line in (proc.stdout + proc.stderr).splitlines():
            for code, meaning in FORBIDDEN_ADVISORIES.items():
                if f"({code})" in line:
                    raise ToolchainError(f"{what}: ptxas advisory {code} ({meaning}) is a build error here:\n"
                                         f"{line.strip()}")
        return dst.read_bytes()
