"""Install in a fresh interpreter before importing gcmoe_runtime: refuse the CuTe DSL, the builder and
any child process (ptxas/nvcc or anything else), recording every attempt so a test can assert none
happened. Used by test_no_jit.py (CPU) and the GPU evidence script."""
from __future__ import annotations

import importlib.abc
import os
import subprocess
import sys

# The CuTe DSL, its packages and the builder. (torch itself probes for triton at CUDA init; that is
# torch, not the runtime, and triton is not what this guard is about.)
FORBIDDEN_PREFIXES = ("cutlass", "nvidia_cutlass_dsl", "gcmoe_build")
ATTEMPTS: list[str] = []


class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == p or name.startswith(p + ".") for p in FORBIDDEN_PREFIXES):
            ATTEMPTS.append(f"import {name}")
            raise ImportError(f"no-JIT guard: the runtime tried to import {name}")
        return None


#: Programs that compile or assemble device code (or host code): never started by the runtime.
COMPILERS = ("ptxas", "nvcc", "cicc", "nvlink", "fatbinary", "nvdisasm", "cc", "gcc", "g++", "c++", "clang",
             "clang++", "ld", "nvrtc")
#: Every process start, compiler or not, for the record (ctypes.util.find_library runs ldconfig -p).
SPAWNS: list[str] = []


def _program(args) -> str:
    argv = args[0] if args else ""
    if isinstance(argv, (list, tuple)):
        argv = argv[0] if argv else ""
    return os.path.basename(str(argv).split()[0]) if str(argv).strip() else ""


class _GuardedPopen(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        prog = _program(args or (kwargs.get("args"),))
        SPAWNS.append(prog)
        if prog in COMPILERS or kwargs.get("shell"):
            ATTEMPTS.append(f"spawn {prog}")
            raise RuntimeError(f"no-JIT guard: the runtime tried to start {prog!r}")
        super().__init__(*args, **kwargs)


def _deny(what):
    def f(*a, **k):
        ATTEMPTS.append(f"{what} {a[:1]!r}")
        raise RuntimeError(f"no-JIT guard: the runtime tried to start a process ({what})")
    return f


#: Forbidden modules already present at install time: the DSL wheel's .pth file imports its empty
#: namespace package ``nvidia_cutlass_dsl`` at interpreter start-up, before any project code runs.
BASELINE: set[str] = set()


def install() -> None:
    BASELINE.update(_forbidden_now())
    sys.meta_path.insert(0, _Block())
    subprocess.Popen = _GuardedPopen  # type: ignore[misc]
    os.system = _deny("os.system")  # type: ignore[assignment]
    for name in ("execv", "execve", "execvp", "execvpe", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, _deny(f"os.{name}"))


def _forbidden_now() -> set[str]:
    return {m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in FORBIDDEN_PREFIXES)}


def loaded_forbidden() -> list[str]:
    """Forbidden modules imported after install() (the start-up .pth baseline excluded)."""
    return sorted(_forbidden_now() - BASELINE)
