"""GPU: role4, the SM90 fused shared expert, from a gcmoe-build bundle through the runtime only
(loader, green partition, single-rank workspace), against the numerics reference's shared-expert partial.

1. ``test_role4_alone``: for each shared recipe the bundle has a role4 build of (1x128x128 chains its K32 MMAs per
   K128, 1x1x32 scales each K32: session 15; the test model's bundle holds 1x128x128, DSV-4.1-Flash's 1x1x32 build runs
   in the layer suite), every compiled BM and T in {0, 1, 5, 8, 37, 64, 129, 256}: the whole combine buffer is poisoned (0xFFFF = BF16
   NaN) before every launch; afterwards lane k rows < T hold the shared partial (rel. L2 < 1e-2 against
   ``reference_moe_forward(..., shared=...)[1][:, k]``), every other lane and every row >= T is still poison,
   the intermediate ``shared_l2_x/_sf`` matches reference steps 3-4 (E4M3 bytes / UE8M0 codes, < 2% / < 1%
   mismatching), ``shared_sync`` and the split-K counts are back to zero (self-reset), and for T in {37, 256} ten
   launches are bit-identical. T <= 64 runs split-K (W1 in 2 for this shape; the partials are poisoned with NaN
   before every launch), larger T unsplit.
2. ``test_layer_shared_p1`` / ``_p2``: the layer role1 -> role2 -> role3 + role4 through the public API with
   SHARED=1 (tests/runtime/operator/gpu_accuracy.py: eager, graph, repeats).

Bundle: ``results/operator/bundles/test-tiny-sm90a.gcmoe`` (GCMOE_ROLE4_BUNDLE overrides; build commands in
results/operator/NEXT.md, section "role4"). Run: ``python3 -m pytest -q -m gpu tests/build/kernels/sm90/test_role4_gpu.py``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.build.kernels.sm90.layer_suite import ROOT, run_layer_suite

BUNDLE = Path(os.environ.get("GCMOE_ROLE4_BUNDLE", ROOT / "results" / "operator" / "bundles" / "test-tiny-sm90a.gcmoe"))
E, K, H, I, CAP = 16, 4, 512, 256, 256
TOKENS = (0, 1, 5, 8, 37, 64, 129, 256)
REPEAT_T = (37, 256)
TIMEOUT_NS = 5_000_000_000


class _Setup:
    def __init__(self):
        import torch

        from gcmoe_runtime import green
        from gcmoe_runtime.loader import KernelLoader
        from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout
        from gcmoe_runtime.workspace.symmetric import get_workspace
        from gcmoe_runtime.workspace.trap import TrapRecord

        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")
        self.loader = KernelLoader.open(str(BUNDLE))
        self.gp = green.get_partition(0, 4)
        self.layout = WorkspaceLayout.build(LayoutSpec(
            arch="sm_90a", world_size=1, num_experts=E, topk=K, hidden=H, intermediate=I, capacity=CAP,
            bm_candidates=(8, 16, 32, 64), compute_sms=self.gp.compute_sms, shared_experts=True))
        self.ws = get_workspace(self.layout, None, 0)
        self.trap = TrapRecord()
        self.bms = sorted({r.variant["bm"] for r in self.loader.bundle.records if r.role == "role4"})


@pytest.fixture(scope="module")
def setup():
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md, section role4)"
    return _Setup()


def _weights(recipe, seed):
    import torch

    from gcmoe_runtime.numerics.quant import quantize_fp8_weight

    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(2 * I, H, generator=g) * (2.0 / H ** 0.5)
    w2 = torch.randn(H, I, generator=g) * (1.0 / I ** 0.5)
    q1, s1 = quantize_fp8_weight(w1, recipe)
    q2, s2 = quantize_fp8_weight(w2, recipe)
    return q1, s1, q2, s2


def _launch(s, lk, T, sw):
    from gcmoe_runtime.operator.values import kernel_args, role_values

    vals = role_values(s.ws, ntok=T, err=s.trap.address, timeout_ns=TIMEOUT_NS)
    vals.update(dict(zip(("shared_w1", "shared_w1_scale", "shared_w2", "shared_w2_scale"),
                         (t.data_ptr() for t in sw.args()))))
    s.loader.launch(lk, s.gp.compute_sms, kernel_args(lk, vals), s.gp.compute_stream, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("recipe", [(1, 128, 128), (1, 1, 32)])
def test_role4_alone(setup, recipe):
    import torch

    from gcmoe_runtime.numerics.quant import quantize_e4m3_fp32_k128, quantize_e4m3_ue8m0
    from gcmoe_runtime.numerics.reference import (FloatExperts, SharedWeights, SwiGLUSpec, _bf16,
                                                  dequantize_activations, reference_moe_forward, swiglu)
    from gcmoe_runtime.numerics.recipes import SM90_INTERMEDIATE_SCALE_GROUP
    from gcmoe_runtime.numerics.transforms_sm90_shared import transform_shared_sm90

    from gcmoe_build.kernels.sm90.role4_shared import RECIPES

    s = setup
    name = next(n for n, r in RECIPES.items() if r == recipe)
    built = {r.variant["recipe_shared"] for r in s.loader.bundle.records if r.role == "role4"}
    if name not in built:
        pytest.skip(f"{BUNDLE.name} holds role4 for recipe {sorted(built)} only, not {name}")
    q1, s1, q2, s2 = _weights(recipe, seed=5)
    sw = transform_shared_sm90(q1.cuda(), s1.cuda(), q2.cuda(), s2.cuda(), recipe)
    shared = SharedWeights(q1.cuda(), s1.cuda(), q2.cuda(), s2.cuda(), recipe)
    none = FloatExperts(torch.zeros(1, 2, 2, device="cuda"), torch.zeros(1, 2, 1, device="cuda"))
    comb = s.ws.view("combine").view(torch.int16)
    l2x, l2sf, sync = s.ws.view("shared_l2_x"), s.ws.view("shared_l2_sf"), s.ws.view("shared_sync")
    counts, partials = s.ws.view("shared_split_count"), s.ws.view("shared_partials")
    assert int(sync.abs().sum()) == 0, "shared_sync must start at zero (fresh workspace)"
    assert int(counts.abs().sum()) == 0, "shared_split_count must start at zero (fresh workspace)"
    gen = torch.Generator(device="cuda").manual_seed(7)
    report = []
    for bm in s.bms:
        lk = s.loader.kernel("role4", arch="sm_90a", bm=bm, recipe_shared=name)
        for T in TOKENS:
            x = torch.randn((CAP, H), generator=gen, device="cuda") * 3.0
            xq, xs = quantize_e4m3_fp32_k128(x)
            s.ws.view("x").copy_(xq.view(torch.uint8))
            s.ws.view("x_sf").copy_(xs)
            outs = []
            for rep in range(10 if T in REPEAT_T else 1):
                comb.fill_(-1)  # 0xFFFF: BF16 NaN everywhere
                l2x.fill_(0x7F)
                l2sf.fill_(0xFF)
                partials.fill_(float("nan"))  # a partial read before it was written this launch shows as NaN
                _launch(s, lk, T, sw)
                torch.cuda.synchronize()
                s.trap.check()
                assert int(sync.abs().sum()) == 0, f"BM={bm} T={T}: shared_sync not reset: {sync.tolist()}"
                assert int(counts.abs().sum()) == 0, f"BM={bm} T={T}: split-K counts not reset: {counts.tolist()}"
                outs.append(comb.clone())
            for o in outs[1:]:
                assert torch.equal(o, outs[0]), f"BM={bm} T={T}: repeats not bit-identical"
            got = outs[0]
            untouched = torch.ones_like(got, dtype=torch.bool)
            untouched[K, :T] = False
            assert bool((got[untouched] == -1).all()), f"BM={bm} T={T}: wrote outside lane k rows < T"
            if T == 0:
                continue
            idx = torch.full((T, K), -1, dtype=torch.int32, device="cuda")
            _, parts = reference_moe_forward(xq[:T], xs[:T], idx, torch.zeros(T, K, device="cuda"), none,
                                             shared=shared, spec=SwiGLUSpec(1.0, 10.0), return_partials=True)
            ref = parts[:, K].float()
            lane = got[K, :T].view(torch.bfloat16).float()
            assert bool(torch.isfinite(lane).all()), f"BM={bm} T={T}: unwritten or non-finite shared partial"
            rel = float((lane - ref).norm() / ref.norm().clamp_min(1e-30))
            exact = float((lane == ref).float().mean())
            # intermediate: reference steps 3-4
            sw1, _ = shared.fp32()
            a = swiglu(_bf16(dequantize_activations(xq[:T], xs[:T]) @ sw1.t()), SwiGLUSpec(1.0, 10.0))
            qr, cr = quantize_e4m3_ue8m0(a, SM90_INTERMEDIATE_SCALE_GROUP, name="ref")
            bmis = float((l2x[:T] != qr.view(torch.uint8)).float().mean())
            smis = float((l2sf[:T] != cr).float().mean())
            report.append((bm, T, rel, exact, bmis, smis))
            assert rel < 1e-2 and bmis < 0.02 and smis < 0.01, (recipe, bm, T, rel, exact, bmis, smis)
    print("role4", recipe, "(bm, T, rel_l2, exact_frac, l2x_byte_mismatch, l2sf_mismatch):", report)


def _run_layer(tmp_path, world):
    return run_layer_suite(BUNDLE, 1, tmp_path, world)


@pytest.mark.gpu
def test_layer_shared_p1(tmp_path):
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md, section role4)"
    assert len(_run_layer(tmp_path, 1)) == 1


@pytest.mark.gpu
@pytest.mark.multigpu
def test_layer_shared_p2(tmp_path):
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md, section role4)"
    assert len(_run_layer(tmp_path, 2)) == 2
