"""GPU correctness of the SM90 role2 GEMM cubins against the FP32 quantised reference
(``gcmoe_runtime.numerics.reference`` steps 2-5, with weights through the real SM90 transform).

Fresh random data per case, outputs poisoned (NaN bytes) before every launch, stale ring rows of
padded tokens filled with NaN, ten repeats bit-identical. Cubins are prebuilt on the build machine
(``python -m gcmoe_build.kernels.sm90.role2_devbuild build/role2_sm90 --shapes ...``) and loaded
through the driver library API; the test skips when they are absent.
"""
from __future__ import annotations

import json
import os

import pytest

from tests.build.kernels.sm90.role2_harness import CUBIN_DIR, Role2Kernels, e4m3_random, sm90_weights

pytestmark = pytest.mark.gpu

E = 4
NBLK = 6
CASES = [(sh, bm, v) for sh in ("test", "glm52", "dsv41flash") for bm in (8, 16, 32, 64) for v in ("", "_p")]


@pytest.fixture(scope="module")
def kernels():
    if not (CUBIN_DIR / "index.json").is_file():
        pytest.skip(f"role2 cubins not built at {CUBIN_DIR} (run gcmoe_build.kernels.sm90.role2_devbuild)")
    return Role2Kernels()


_WEIGHTS = {}


def _weights(mode, e, n, k, seed):
    """Weights are the expensive part: share one set per (mode, shape) across BM and variants."""
    import torch

    key = (mode, n, k)
    if key not in _WEIGHTS:
        _WEIGHTS.clear()
        gen = torch.Generator(device="cuda").manual_seed(seed)
        _WEIGHTS[key] = sm90_weights(e, n, k, mode == "w1", gen)
    return _WEIGHTS[key]


def _blocks(gen, bm):
    import torch

    bexp = torch.randint(0, E, (NBLK,), generator=gen, device="cuda", dtype=torch.int32)
    ntok = torch.randint(1, bm + 1, (NBLK,), generator=gen, device="cuda", dtype=torch.int32)
    ntok[0], ntok[-1] = bm, 1  # a full block and a one-token block always
    return bexp, ntok


def run_w1(kernels, shape, bm, seed, variant=""):
    import torch

    from gcmoe_runtime.numerics.quant import quantize_e4m3_fp32_k128, quantize_e4m3_ue8m0
    from gcmoe_runtime.numerics.reference import SwiGLUSpec, _bf16, dequantize_activations, swiglu

    name = f"role2_w1_{shape}_bm{bm}{variant}"
    if name not in kernels.index:
        pytest.skip(f"{name} not built")
    info = kernels.index[name]
    h, rows = info["k"], info["rows"]
    i = rows // 2
    tiles, stiles, efac, wdq = _weights("w1", E, rows, h, seed=11)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    bexp, ntok = _blocks(gen, bm)
    x = torch.randn((NBLK * bm, h), generator=gen, device="cuda") * 3.0
    act, asc = quantize_e4m3_fp32_k128(x)
    act, asc = act.view(NBLK, bm, h).contiguous(), asc.view(NBLK, bm, h // 128).contiguous()
    rw = torch.rand((NBLK, bm), generator=gen, device="cuda")
    nt = ntok.tolist()
    for b in range(NBLK):  # stale ring rows: NaN everywhere the kernel must not look
        act[b, nt[b]:] = torch.tensor(float("nan")).to(torch.float8_e4m3fn)
        asc[b, nt[b]:] = float("nan")
        rw[b, nt[b]:] = float("nan")
    out = torch.empty((NBLK, bm, i), dtype=torch.uint8, device="cuda")
    outs = torch.empty((NBLK, bm, i // 32), dtype=torch.uint8, device="cuda")
    results = []
    for rep in range(10):
        out.fill_(0x7F)  # E4M3 NaN
        outs.fill_(0xFF)  # UE8M0 NaN
        kernels.launch(name, NBLK, [tiles.data_ptr(), stiles.data_ptr(), efac.data_ptr(), act.data_ptr(),
                                    asc.data_ptr(), bexp.data_ptr(), ntok.data_ptr(), rw.data_ptr(), out.data_ptr(),
                                    outs.data_ptr()])
        torch.cuda.synchronize()
        results.append((out.clone(), outs.clone()))
    for o, s in results[1:]:
        assert torch.equal(o, results[0][0]) and torch.equal(s, results[0][1]), f"{name}: repeats not bit-identical"
    spec = SwiGLUSpec(alpha=info["alpha"], clamp=info["clamp"])
    worst = {"rel_l2": 0.0, "byte_mismatch": 0.0, "scale_mismatch": 0.0}
    be = bexp.tolist()
    for b in range(NBLK):
        n = nt[b]
        xa = dequantize_activations(act[b, :n], asc[b, :n], "fp32_k128")
        a = swiglu(_bf16(xa @ wdq[be[b]].t()), spec) * rw[b, :n, None]
        q_ref, c_ref = quantize_e4m3_ue8m0(a, 32, name="ref")
        got_q, got_c = out[b, :n], outs[b, :n]
        assert not (got_q == 0x7F).any() and not (got_c == 0xFF).any(), f"{name} block {b}: unwritten output"
        deq = lambda q, c: q.view(torch.float8_e4m3fn).float() * torch.ldexp(  # noqa: E731
            torch.ones_like(c, dtype=torch.float32), c.int() - 127).repeat_interleave(32, dim=1)
        ref = deq(q_ref.view(torch.uint8), c_ref)
        got = deq(got_q, got_c)
        rel = float((got - ref).norm() / ref.norm().clamp_min(1e-30))
        worst["rel_l2"] = max(worst["rel_l2"], rel)
        worst["byte_mismatch"] = max(worst["byte_mismatch"], float((got_q != q_ref.view(torch.uint8)).float().mean()))
        worst["scale_mismatch"] = max(worst["scale_mismatch"], float((got_c != c_ref).float().mean()))
    return worst


def run_w2(kernels, shape, bm, seed, variant=""):
    import torch

    from gcmoe_runtime.numerics.quant import dequantize_e4m3_ue8m0, quantize_e4m3_ue8m0

    name = f"role2_w2_{shape}_bm{bm}{variant}"
    if name not in kernels.index:
        pytest.skip(f"{name} not built")
    info = kernels.index[name]
    i, h = info["k"], info["rows"]
    tiles, stiles, efac, wdq = _weights("w2", E, h, i, seed=12)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    bexp, ntok = _blocks(gen, bm)
    y = torch.randn((NBLK * bm, i), generator=gen, device="cuda") * 2.0 ** torch.randint(
        -6, 2, (NBLK * bm, 1), generator=gen, device="cuda").float()
    act, codes = quantize_e4m3_ue8m0(y, 32)
    act, codes = act.view(NBLK, bm, i).contiguous(), codes.view(NBLK, bm, i // 32).contiguous()
    nrows_out = NBLK * bm
    rowidx = torch.randperm(nrows_out, generator=gen, device="cuda").to(torch.int32).view(NBLK, bm)
    nt = ntok.tolist()
    for b in range(NBLK):
        act[b, nt[b]:] = torch.tensor(float("nan")).to(torch.float8_e4m3fn)
        codes[b, nt[b]:] = 0xFF
        rowidx[b, nt[b]:] = -1  # a padded token's row index must never be used
    out = torch.empty((nrows_out, h), dtype=torch.bfloat16, device="cuda")
    results = []
    for rep in range(10):
        out.fill_(float("nan"))
        kernels.launch(name, NBLK, [tiles.data_ptr(), stiles.data_ptr(), efac.data_ptr(), act.data_ptr(),
                                    codes.data_ptr(), bexp.data_ptr(), ntok.data_ptr(), rowidx.data_ptr(),
                                    out.data_ptr(), 0])
        torch.cuda.synchronize()
        results.append(out.clone())
    for o in results[1:]:
        assert torch.equal(o.view(torch.int16), results[0].view(torch.int16)), f"{name}: repeats not bit-identical"
    worst = {"rel_l2": 0.0, "unwritten": 0, "bf16_mismatch": 0.0}
    written = torch.zeros(nrows_out, dtype=torch.bool, device="cuda")
    be = bexp.tolist()
    for b in range(NBLK):
        n = nt[b]
        ref = (dequantize_e4m3_ue8m0(act[b, :n], codes[b, :n], 32) @ wdq[be[b]].t()).to(torch.bfloat16).float()
        rows = rowidx[b, :n].long()
        got = out[rows].float()
        worst["unwritten"] += int((~torch.isfinite(got)).sum())
        worst["rel_l2"] = max(worst["rel_l2"], float((got - ref).norm() / ref.norm().clamp_min(1e-30)))
        worst["bf16_mismatch"] = max(worst["bf16_mismatch"], float((got != ref).float().mean()))
        written[rows] = True
    assert torch.isnan(out[~written].float()).all(), f"{name}: wrote rows of padded tokens"
    return worst


def _record(mode, shape, bm, metrics):
    """Append one line of evidence to $GCMOE_ROLE2_RESULTS (JSON lines) when set."""
    path = os.environ.get("GCMOE_ROLE2_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"mode": mode, "shape": shape, "bm": bm, **metrics}) + "\n")


@pytest.mark.parametrize("shape,bm,variant", CASES)
def test_role2_w1_matches_reference(kernels, shape, bm, variant):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    w = run_w1(kernels, shape, bm, seed=1000 + bm, variant=variant)
    _record("w1" + variant, shape, bm, w)
    assert w["rel_l2"] < 2e-2, w
    assert w["byte_mismatch"] < 0.02, w
    assert w["scale_mismatch"] < 0.01, w


@pytest.mark.parametrize("shape,bm,variant", CASES)
def test_role2_w2_matches_reference(kernels, shape, bm, variant):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    w = run_w2(kernels, shape, bm, seed=2000 + bm, variant=variant)
    _record("w2" + variant, shape, bm, w)
    assert w["unwritten"] == 0, w
    assert w["rel_l2"] < 1e-2, w
