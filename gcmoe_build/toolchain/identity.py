"""The compiler identity record (paper §5, DESIGN.md §3) and the source hashes it binds.

``compiler_identity(arch)`` returns the record and its digest. The record holds:

* ``ptxas``: path, size, version, sha256, package (the locked assembler);
* ``dsl``: version, flavour, frontend hash (the DSL's Python sources by content + its native
  libraries by their wheel RECORD sha256s), NVVM version, the DSL's effective compile-affecting
  settings (locked by ``gcmoe_build.frontend.dsl``) and the ``cute.compile`` options we pass;
* ``kernel_sources``: content hash of ``gcmoe_build/kernels/**`` and every repository module they
  import (transitively, found by reading imports, not by executing them);
* ``pipeline_sources``: content hash of the code that turns DSL output into a cubin
  (``gcmoe_build/frontend``, ``gcmoe_build/abi``, ``gcmoe_build/toolchain``, ``gcmoe_build/compile.py``)
  — the ABI rewrite changes the bytes, so it is part of the compiler;
* ``options``: the effective ptxas options for ``arch`` (kernel-specific whitelisted extras are
  recorded per artifact);
* ``arch``.

The digest is sha256 over the canonical JSON of the record *without host paths* (``ptxas.path``),
so the same toolchain installed in another directory gives the same digest and keys.
"""
from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from gcmoe_runtime.artifacts.record import canonical_json, sha256_hex

from .ptxas import effective_options, locate_ptxas

IDENTITY_FORMAT_VERSION = 1
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Top-level repository packages whose modules count as "our sources" when kernels import them.
REPO_PACKAGES = ("gcmoe_build", "gcmoe_runtime")
PIPELINE_PATHS = ("gcmoe_build/frontend", "gcmoe_build/abi", "gcmoe_build/toolchain", "gcmoe_build/compile.py")
#: Distributions that make up the CuTe DSL (the frontend hash covers their files).
DSL_DISTS = ("nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core",
             "nvidia-cutlass-dsl-libs-cu13")
#: Fields left out of the digest because they name host paths (records written before session 4 carry
#: ``ptxas.path``; new ones hold no host path at all).
HOST_FIELDS = (("ptxas", "path"),)


@dataclass(frozen=True)
class CompilerIdentity:
    record: dict[str, Any]
    digest: str


def _module_file(modname: str) -> Path | None:
    parts = modname.split(".")
    if parts[0] not in REPO_PACKAGES:
        return None
    base = REPO_ROOT.joinpath(*parts)
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports_of(path: Path) -> set[str]:
    """Repository modules imported by ``path`` (absolute and relative imports, at any depth)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(REPO_ROOT).with_suffix("")
    pkg_parts = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import module`
    closure: set[str] = set()
    for m in out:
        parts = m.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c also runs a/__init__ and a/b/__init__
            closure.add(".".join(parts[:i]))
    return {m for m in closure if _module_file(m) is not None}


def source_closure(roots: list[Path]) -> list[Path]:
    """``roots`` plus every repository module they import, transitively; sorted."""
    seen: set[Path] = set()
    todo = [p.resolve() for p in roots]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for m in _imports_of(p):
            f = _module_file(m)
            if f is not None and f.resolve() not in seen:
                todo.append(f.resolve())
    return sorted(seen)


def _hash_files(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(REPO_ROOT).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).hexdigest().encode() + b"\n")
    return h.hexdigest()


def _py_files(rel: str) -> list[Path]:
    p = REPO_ROOT / rel
    return [p] if p.is_file() else sorted(f for f in p.rglob("*.py") if "__pycache__" not in f.parts)


def kernel_source_hash() -> str:
    """Content hash of gcmoe_build/kernels/** and the repository modules they import."""
    return _hash_files(source_closure(_py_files("gcmoe_build/kernels")))


def kernel_source_files() -> list[str]:
    return [f.relative_to(REPO_ROOT).as_posix() for f in source_closure(_py_files("gcmoe_build/kernels"))]


def pipeline_source_hash() -> str:
    files: list[Path] = []
    for rel in PIPELINE_PATHS:
        files += _py_files(rel)
    return _hash_files(source_closure(files))


def _installation_specific(f) -> bool:
    """Files of an installed distribution that differ between two installs of the same wheel: byte code, pip's
    bookkeeping (RECORD, INSTALLER, REQUESTED: whether it was asked for by name, direct_url.json) and anything
    outside the package directories (console scripts in ``bin/``, whose shebang names the interpreter's path)."""
    return (f.suffix == ".pyc" or "__pycache__" in f.parts or f.parts[0] == ".."
            or f.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"))


@lru_cache(maxsize=1)
def dsl_frontend_hash() -> str:
    """Hash of the installed DSL: Python sources by content, other files by their RECORD sha256; files that
    depend on the installation rather than the wheel are left out, so every checkout and venv path agrees."""
    h = hashlib.sha256()
    for name in DSL_DISTS:
        dist = metadata.distribution(name)
        h.update(f"{name}=={dist.version}\n".encode())
        for f in sorted(dist.files or (), key=lambda f: str(f)):
            if _installation_specific(f):
                continue
            if f.suffix == ".py":
                digest = hashlib.sha256(Path(str(dist.locate_file(f))).read_bytes()).hexdigest()
            elif f.hash is not None:
                digest = f"{f.hash.mode}={f.hash.value}"
            else:
                continue
            h.update(f"{f.as_posix()} {digest}\n".encode())
    return h.hexdigest()


def _nvvm_version(ptx_header: str | None = None) -> str:
    """The NVVM release the DSL bundles (from its own version info)."""
    from cutlass.base_dsl.version_info import CUDA_VERSION  # imported after import_dsl

    return f"{CUDA_VERSION.major}.{CUDA_VERSION.minor}"


def compiler_identity(arch: str) -> CompilerIdentity:
    """The identity record for compiling ``arch`` on this machine, and its digest."""
    from gcmoe_build.frontend.dsl import DSL_FLAVOR, DSL_VERSION, dsl_compile_options, dsl_settings, import_dsl

    dsl = import_dsl(arch)
    dsl.envar._arch = arch
    binary = locate_ptxas()
    record = {
        "format_version": IDENTITY_FORMAT_VERSION,
        "arch": arch,
        # no host path: the record is stored in bundles, which must be byte-identical wherever they are built
        "ptxas": {"size": binary.size, "version": binary.version, "sha256": binary.sha256,
                  "package": binary.package},
        "dsl": {"version": DSL_VERSION, "flavor": DSL_FLAVOR, "frontend_hash": dsl_frontend_hash(),
                "cuda_version": _nvvm_version(), "settings": dsl_settings(dsl, arch),
                "compile_options": list(dsl_compile_options(arch))},
        "kernel_sources": kernel_source_hash(),
        "pipeline_sources": pipeline_source_hash(),
        "options": list(effective_options(arch)),
    }
    return CompilerIdentity(record=record, digest=identity_digest(record))


def identity_digest(record: dict[str, Any]) -> str:
    hashed = {k: (dict(v) if isinstance(v, dict) else v) for k, v in record.items()}
    for section, field in HOST_FIELDS:
        hashed.get(section, {}).pop(field, None)
    return sha256_hex(canonical_json(hashed))


def diff_identity(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the fields that differ between two identity records (for audits)."""
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        name = f"{prefix}{key}"
        if isinstance(va, dict) and isinstance(vb, dict):
            out += diff_identity(va, vb, name + ".")
        elif va != vb:
            out.append(name)
    return out
