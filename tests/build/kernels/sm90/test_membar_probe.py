"""The MEMBAR probe (gcmoe_build.kernels.sm90.membar_probe, a dev measurement kernel, never bundled): every mode
builds for two CTAs per SM with the fence it promises and no other (CPU); on a GPU, with cubins from
``python -m gcmoe_build.kernels.sm90.membar_probe DIR`` (``GCMOE_MEMBAR_CUBINS``), every mode finishes and the side
warp counts its fences."""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

#: mode -> (fence.acq_rel.gpu, red.release.gpu, relaxed store) expected in its PTX
EXPECT = {"quiet": (0, 0, 0), "side": (0, 1, 0), "side_store": (0, 1, 1), "side_acqrel": (1, 0, 0),
          "inline": (0, 1, 0), "inline_none": (0, 0, 0)}


@pytest.mark.parametrize("mode", sorted(EXPECT))
def test_probe_modes_carry_their_fence(mode):
    from cutlass import Int32, Int64

    from gcmoe_build.frontend.dsl import import_dsl, trace_to_ptx

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.membar_probe import build_probe

    host, kern = build_probe(mode)
    ptx = trace_to_ptx(host, kern, (Int64(0), Int64(0), Int64(0), Int32(1), Int32(1), Int32(0), Int32(1)),
                       f"membar_probe_{mode}", "sm_90a").ptx
    fence, release, store = EXPECT[mode]
    assert ptx.count("fence.acq_rel.gpu") == fence
    assert ptx.count("red.release.gpu") == release
    assert ptx.count("st.relaxed.gpu") == store
    assert ".minnctapersm 2" in ptx and ptx.count("wgmma.mma_async") == 16
    assert ("nanosleep" in ptx) == mode.startswith("side")
    assert ptx.count("fence.proxy.async.shared::cta") == 1  # the B tile is written before wgmma reads it


def test_unknown_mode_is_refused():
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.membar_probe import build_probe

    with pytest.raises(ValueError, match="mode 'loud'"):
        build_probe("loud")


def test_bench_compares_each_configuration_with_its_reference():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_membar import CONFIGS, summarise

    # quiet 100 us; side modes 1 % slower per 1 000 fences; inline 2 us slower than inline_none at its period
    def fake(mode, period):
        us = 100.0 + mode.startswith("side") * 1.0 + (mode == "inline") * 2.0 + mode.startswith("inline") * period
        return us, 1000.0 if mode.startswith("side") else 512.0 * (mode == "inline")

    times = {c: [fake(c[0], c[1])] for c in CONFIGS}
    rows = {(r["mode"], r["period"], r["gap_ns"]): r for r in summarise(times)}
    assert set(rows) == set(CONFIGS)
    assert rows[("quiet", 1, 0)]["change"] == 0
    assert rows[("side", 1, 0)]["change"] == pytest.approx(0.01) and rows[("side", 1, 0)]["ns_per_fence"] == 1.0
    r = rows[("inline", 8, 0)]
    assert r["change"] == pytest.approx(2.0 / 108.0) and r["ns_per_fence"] == pytest.approx(2e3 / 512)


@pytest.mark.gpu
def test_every_mode_finishes_and_the_side_warp_counts():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU; none visible")
    d = Path(os.environ.get("GCMOE_MEMBAR_CUBINS", "build/membar_probe"))
    if not (d / "index.json").is_file():
        pytest.skip(f"membar probe cubins not built at {d}")
    from cuda.bindings import driver as cu

    from tests.build.kernels.sm90.role2_harness import Role2Kernels

    k = Role2Kernels(d)
    grid = 2 * torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.full((grid * 256 + grid,), float("nan"), dtype=torch.float32, device="cuda")
    buf = torch.randint(0, 1 << 30, ((256 << 20) // 4,), dtype=torch.int32, device="cuda")
    sig = torch.zeros(4, dtype=torch.int32, device="cuda")
    for mode in EXPECT:
        out.fill_(float("nan"))
        sig.zero_()
        _, _, fn, info = k.function(f"membar_probe_{mode}")
        vals = [(ctypes.c_uint64 * 1)(out.data_ptr()), (ctypes.c_uint64 * 1)(buf.data_ptr()),
                (ctypes.c_uint64 * 1)(sig.data_ptr()), (ctypes.c_int32 * 1)(64), (ctypes.c_int32 * 1)(8),
                (ctypes.c_int32 * 1)(100)]
        args = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        r = cu.cuLaunchKernel(fn, grid, 1, 1, info["threads"], 1, 1, info["smem"],
                              cu.CUstream(torch.cuda.current_stream().cuda_stream), ctypes.addressof(args), 0)
        assert r[0] == cu.CUresult.CUDA_SUCCESS, (mode, r)
        torch.cuda.synchronize()
        assert torch.isfinite(out[:grid * 256]).all(), mode  # every worker thread wrote its sum
        if mode.startswith("side"):
            fences = out[grid * 256:]
            assert bool((fences >= 1).all()) and int(sig[1]) == int(fences.sum()), mode
        if mode == "inline":
            assert int(sig[0]) == grid * (64 // 8), mode
