"""Small self-consistent bundles for loader/graph CPU tests (records + fake ELF cubins)."""
from __future__ import annotations

import hashlib

from gcmoe_runtime.artifacts.bundle import write_bundle
from gcmoe_runtime.artifacts.record import ArtifactRecord, LaunchFacts, ParamSpec, sha256_hex
from gcmoe_runtime.artifacts.store import Store

IDENTITY = {"test": "runtime-loader"}
IDENTITY_DIGEST = sha256_hex(b"runtime-loader-identity")

PARAMS = (
    ParamSpec(0, "tm_x", "tensormap", 128, 64, 0),
    ParamSpec(1, "peers", "peer_desc", 592, 8, 128),
    ParamSpec(2, "ws", "u64", 8, 8, 720),
    ParamSpec(3, "n", "u32", 4, 4, 728),
)


def record(role, bm=16, launch=None, params=PARAMS, cubin=None, kernel_name=None):
    seed = f"{role}-{bm}".encode()
    cubin = cubin if cubin is not None else b"\x7fELF" + hashlib.sha512(seed).digest() * 4
    rec = ArtifactRecord(
        key=sha256_hex(b"key-" + seed), role=role, arch="sm_90a", kernel_name=kernel_name or f"gcmoe_{role}_0",
        variant={"bm": bm, "P": 2}, manifest="test-tiny.yaml", compiler_identity=IDENTITY_DIGEST,
        cubin_sha256=sha256_hex(cubin), cubin_size=len(cubin), ptx_sha256=sha256_hex(b"ptx" + seed),
        params=params, launch=launch or LaunchFacts(block=(128, 1, 1)),
    )
    return rec, cubin


def make_bundle(tmp_path, artifacts):
    store = Store(tmp_path / "store")
    for rec, cubin in artifacts:
        store.put_artifact(rec, cubin, IDENTITY)
    out = tmp_path / "test.gcmoe"
    write_bundle(out, store, [r.key for r, _ in artifacts], {"test-tiny.yaml": b"name: test-tiny\n"})
    return out
