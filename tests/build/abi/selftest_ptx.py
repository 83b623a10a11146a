"""Real CuTe DSL output for the build tests, generated once per test session (process-level cache).

``selftest_trace(arch)`` builds the ``selftest_tma_peer`` kernel and traces it to PTX with the real
DSL; the ABI / toolchain / compile tests mutate and assemble copies of that PTX.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from gcmoe_runtime.artifacts.record import canonical_json, sha256_hex


@dataclass(frozen=True)
class DuckVariant:
    """Stands in for gcmoe_build.variants.Variant: role, arch, params, manifest, key()."""

    role: str
    arch: str
    params: dict = field(default_factory=dict, hash=False)
    manifest: str = "tests"

    def key(self, identity_digest: str, source_hash: str) -> str:
        return sha256_hex(canonical_json({"identity": identity_digest, "source": source_hash, "role": self.role,
                                          "arch": self.arch, "params": dict(self.params)}))


def selftest_variant(arch: str = "sm_90a", tiles: int = 2) -> DuckVariant:
    return DuckVariant("selftest_tma_peer", arch, {"tiles": tiles})


@lru_cache(maxsize=None)
def selftest_trace(arch: str = "sm_90a") -> tuple[Any, Any]:
    """(KernelBuild, FrontendResult) for selftest_tma_peer on ``arch``."""
    from gcmoe_build.frontend import trace_to_ptx
    from gcmoe_build.kernels import build_kernel

    kb = build_kernel(selftest_variant(arch))
    return kb, trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, arch)
