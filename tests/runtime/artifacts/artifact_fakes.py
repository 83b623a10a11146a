"""Fakes for artifact-format tests: small, self-consistent records (pure data, no compiler)."""
from __future__ import annotations

import hashlib

from gcmoe_runtime.artifacts.record import ArtifactRecord, LaunchFacts, ParamSpec, sha256_hex

IDENTITY = {"ptxas_sha256": "0" * 64, "dsl_version": "4.8.1", "options": ["--gpu-name", "sm_90a", "-O3"]}
IDENTITY_DIGEST = sha256_hex(b"test-identity")


def make_artifact(role: str = "role1", bm: int = 64, p: int = 2, manifest: str = "test-tiny.yaml"):
    """A (record, cubin, ptx) triple whose hashes agree; content depends on the parameters."""
    seed = f"{role}-{bm}-{p}".encode()
    cubin = b"\x7fELF" + hashlib.sha512(seed).digest() * 40 + bytes(range(256)) * 8
    ptx = b"// ptx " + seed
    rec = ArtifactRecord(
        key=sha256_hex(b"key-" + seed),
        role=role,
        arch="sm_90a",
        kernel_name=f"gcmoe_{role}",
        variant={"BM": bm, "P": p},
        manifest=manifest,
        compiler_identity=IDENTITY_DIGEST,
        cubin_sha256=sha256_hex(cubin),
        cubin_size=len(cubin),
        ptx_sha256=sha256_hex(ptx),
        params=(ParamSpec(0, "tm_x", "tensormap", 128, 64, 0), ParamSpec(1, "peers", "peer_desc", 592, 8, 128)),
        launch=LaunchFacts(block=(128, 1, 1), dynamic_smem=1024),
    )
    return rec, cubin, ptx


def three_artifacts():
    return [make_artifact("role1", 64, 2), make_artifact("role1", 128, 2), make_artifact("role2", 64, 2)]
