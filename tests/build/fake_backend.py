"""A stand-in for the compile chain, for pipeline/audit unit tests that must run in milliseconds.

Same methods as ``gcmoe_build.pipeline.Backend``; picklable (spawned workers import this module).
A "manifest" here is a JSON file: {"name": ..., "arch": [...], "variants": [{"role":..., ...params}]}.
Roles in ``NO_KERNEL`` have no kernel; a variant with ``"fail": true`` raises in compile.
The end-to-end CLI test uses the real chain instead.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gcmoe_runtime.artifacts.record import ArtifactRecord, LaunchFacts, ParamSpec, canonical_json, sha256_hex

NO_KERNEL = {"role3"}


@dataclass(frozen=True)
class FakeCompiled:
    cubin: bytes
    ptx: str
    record: ArtifactRecord


@dataclass(frozen=True)
class FakeVariant:
    role: str
    arch: str
    params: dict[str, Any]
    manifest: str

    def key(self, identity_digest: str, source_hash: str) -> str:
        return sha256_hex(canonical_json([identity_digest, source_hash, self.role, self.arch, self.params]))


@dataclass
class FakeBackend:
    identity_fields: dict[str, Any] = field(default_factory=lambda: {"ptxas": {"sha256": "1" * 64, "version": "13.4.59"}, "dsl": "4.8.1"})
    salt: bytes = b""  # changes the cubin bytes without changing the identity (a non-reproducible build)
    ptx_salt: str = ""
    delay_s: float = 0.0
    calls_file: str | None = None  # each compile appends a line here (works across processes)

    def variants_of(self, path: Path) -> list[FakeVariant]:
        spec = json.loads(Path(path).read_text())
        out = []
        for arch in spec["arch"]:
            for v in spec["variants"]:
                params = {k: x for k, x in v.items() if k != "role"}
                out.append(FakeVariant(v["role"], arch, params, Path(path).name))
        return out

    def has_kernel(self, role: str) -> bool:
        return role not in NO_KERNEL

    def identity(self, arch: str) -> tuple[str, dict[str, Any]]:
        rec = {**self.identity_fields, "options": ["--gpu-name", arch, "-O3"]}
        return self.identity_digest(rec), rec

    def identity_digest(self, record: dict[str, Any]) -> str:
        return sha256_hex(canonical_json({k: v for k, v in record.items() if k != "host_path"}))

    def source_hash(self) -> str:
        return "5" * 64

    def variant_key(self, variant: FakeVariant) -> str:
        return variant.key(self.identity(variant.arch)[0], self.source_hash())

    def warm_up(self, arches=()) -> None:
        pass

    def compile(self, variant: FakeVariant) -> FakeCompiled:
        if self.calls_file:
            with open(self.calls_file, "a") as f:
                f.write(f"{os.getpid()} {variant.role} {json.dumps(variant.params, sort_keys=True)}\n")
        if variant.params.get("fail"):
            raise ValueError(f"kernel {variant.role}: PTX did not match the expected shape (fake)")
        time.sleep(self.delay_s)
        seed = canonical_json([variant.role, variant.arch, variant.params])
        cubin = b"\x7fELF" + seed * 50 + self.salt
        ptx = f"// fake ptx {seed.decode()}{self.ptx_salt}\n"
        rec = ArtifactRecord(
            key=self.variant_key(variant),
            role=variant.role,
            arch=variant.arch,
            kernel_name=f"gcmoe_{variant.role}_0",
            variant=dict(variant.params),
            manifest=variant.manifest,
            compiler_identity=self.identity(variant.arch)[0],
            cubin_sha256=sha256_hex(cubin),
            cubin_size=len(cubin),
            ptx_sha256=sha256_hex(ptx.encode()),
            params=(ParamSpec(0, "tm", "tensormap", 128, 64, 0),),
            launch=LaunchFacts(block=(128, 1, 1)),
        )
        return FakeCompiled(cubin, ptx, rec)


def write_manifest(path: Path, variants: list[dict[str, Any]], arch=("sm_90a",)) -> Path:
    path.write_text(json.dumps({"name": path.stem, "arch": list(arch), "variants": variants}, indent=1) + "\n")
    return path
