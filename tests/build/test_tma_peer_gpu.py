"""GPU evidence for the by-value ABI: the real selftest_tma_peer kernel, built by this pipeline,
loaded and launched through the runtime's own path (bundle -> KernelLoader -> cuTensorMapEncodeTiled
from the recorded encoding -> peer descriptor -> packed by-value params -> cuLaunchKernel).

The GPU machine has no CuTe DSL, so the kernels come from a bundle built here::

    .venv/bin/python tests/build/test_tma_peer_gpu.py build results/kernels/selftest-tma-peer-sm90a.gcmoe

(swizzle 0/64/128, tiles 2). On the GPU: ``pytest -m gpu tests/build/test_tma_peer_gpu.py``; the
bundles tested are that file plus any in ``GCMOE_TMA_PEER_BUNDLES`` (colon-separated).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BUNDLE = REPO / "results" / "kernels" / "selftest-tma-peer-sm90a.gcmoe"
ROWS = 100  # not a multiple of the 64-row box: the last tile exercises TMA's zero fill


def _bundles() -> list[Path]:
    extra = [Path(p) for p in os.environ.get("GCMOE_TMA_PEER_BUNDLES", "").split(":") if p]
    return [p for p in [DEFAULT_BUNDLE, *extra] if p.is_file()]


def _records():
    from gcmoe_runtime.artifacts.bundle import open_bundle

    out = []
    for path in _bundles():
        for rec in open_bundle(path).records:
            if rec.role == "selftest_tma_peer":
                out.append(pytest.param(path, rec.key, id=f"{path.name}:{rec.variant.get('swizzle', 0)}:{rec.key[:8]}"))
    return out or [pytest.param(None, None, id="no-bundle")]


@pytest.mark.gpu
@pytest.mark.parametrize("path,key", _records())
def test_tma_peer_through_the_runtime(path, key):
    if path is None:
        pytest.fail(f"no bundle with selftest_tma_peer: build {DEFAULT_BUNDLE} (see module docstring)")
    import torch

    from gcmoe_runtime.loader import KernelLoader
    from gcmoe_runtime.peer import make_peer_descriptor, pack_peer_descriptor
    from gcmoe_runtime.tensormap import encode_for_tensor

    torch.zeros(1, device="cuda")  # makes the primary context current
    loader = KernelLoader.open(str(path))
    rec = loader.bundle.record(key)
    (enc,) = rec.tensormaps
    cols = enc.box[0]
    gen = torch.Generator().manual_seed(7)
    a = torch.randint(0, 256, (ROWS, cols), dtype=torch.uint8, generator=gen).cuda()
    lk = loader.load(rec)  # checks the schema against cuKernelGetParamInfo
    tiles = int(rec.launch.grid.split(":")[1])
    out = torch.full((tiles * 128,), -1, dtype=torch.int64, device="cuda")
    bases = [0x7F00_0000_0000 + r * 0x1_0000_0000 for r in range(3)]
    desc = make_peer_descriptor(bases, rank=1)
    args = lk.args({"tma_a": encode_for_tensor(enc, a), "peer": pack_peer_descriptor(desc), "out": out.data_ptr(),
                    "timeout_ns": 2_000_000_000, "rows": ROWS})
    stream = torch.cuda.current_stream()
    loader.launch(lk, tiles, args, stream.cuda_stream, device=torch.cuda.current_device())
    torch.cuda.synchronize()

    got = out.cpu().view(tiles, 128)
    rows = torch.zeros(max(tiles * 64, ROWS), cols, dtype=torch.int64)
    rows[:ROWS] = a.cpu().to(torch.int64)
    want_sums = rows[: tiles * 64].sum(dim=1).view(tiles, 64)
    offsets = torch.tensor(list(desc.offsets) + [0] * (64 - len(desc.offsets)), dtype=torch.int64)
    want_peer = desc.base + offsets + desc.rank
    assert torch.equal(got[:, :64], want_sums), "TMA tile (by-value tensor map) read wrong"
    assert torch.equal(got[:, 64:], want_peer.expand(tiles, 64)), "peer descriptor (by-value) read wrong"
    loader.unload_all()


_TRAP_SCRIPT = r"""
import dataclasses, sys, torch
from gcmoe_runtime.loader import KernelLoader
from gcmoe_runtime.peer import make_peer_descriptor, pack_peer_descriptor
from gcmoe_runtime.tensormap import encode_for_tensor
torch.zeros(1, device="cuda")
loader = KernelLoader.open(sys.argv[1])
rec = loader.bundle.record(sys.argv[2])
lk = loader.load(rec)
(enc,) = rec.tensormaps
half = dataclasses.replace(enc, box=(enc.box[0], enc.box[1] // 2))  # delivers half the bytes the kernel awaits
a = torch.zeros((128, enc.box[0]), dtype=torch.uint8, device="cuda")
out = torch.zeros(256, dtype=torch.int64, device="cuda")
args = lk.args({"tma_a": encode_for_tensor(half, a), "out": out.data_ptr(), "timeout_ns": 50_000_000, "rows": 128,
                "peer": pack_peer_descriptor(make_peer_descriptor([0x7F0000000000], 0))})
loader.launch(lk, 1, args, torch.cuda.current_stream().cuda_stream)
torch.cuda.synchronize()
print("NO TRAP")
"""


@pytest.mark.gpu
def test_bounded_wait_traps_with_a_recognisable_message(tmp_path):
    """The kernel's mbarrier wait is bounded: if the TMA never delivers, it traps after timeout_ns."""
    import subprocess

    recs = [p for p in _records() if p.values[0] is not None]
    if not recs:
        pytest.fail(f"no bundle with selftest_tma_peer: build {DEFAULT_BUNDLE} (see module docstring)")
    path, key = recs[0].values
    script = tmp_path / "trap.py"
    script.write_text(_TRAP_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(path), key], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])})
    assert "NO TRAP" not in proc.stdout
    assert proc.returncode != 0
    assert "GCMOE TIMEOUT site=1" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


def build_bundle(out: Path) -> None:
    """Compile selftest_tma_peer (swizzle 0/64/128) with compile_variant and bundle it."""
    sys.path.insert(0, str(REPO / "tests" / "build" / "abi"))
    from selftest_ptx import DuckVariant

    from gcmoe_runtime.artifacts.bundle import write_bundle
    from gcmoe_runtime.artifacts.store import Store

    from gcmoe_build.compile import compile_variant, identity_for

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(tmp)
        keys = []
        for sw in (0, 64, 128):
            art = compile_variant(DuckVariant("selftest_tma_peer", "sm_90a", {"tiles": 2, "swizzle": sw}))
            store.put_artifact(art.record, art.cubin, identity_for("sm_90a").record, ptx=art.ptx.encode())
            keys.append(art.record.key)
        b = write_bundle(out, store, keys, {})
    print(f"wrote {out}: {len(b.records)} records, top hash {b.top_hash}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit(__doc__)
    build_bundle(Path(sys.argv[2]))
