"""torch grouped-GEMM baseline (BF16 path) on the CPU: same function as an FP32 per-assignment reference,
for one rank's share and for P=2 over gloo all-to-all."""
import os
import sys

import pytest
import torch

from gcmoe_runtime.bench.impl import RankContext, make
from gcmoe_runtime.bench.routing import Layout, build_point
from gcmoe_runtime.bench.shapes import ModelShape

sys.path.insert(0, os.path.dirname(__file__))
from bench_reference import reference  # noqa: E402
from baseline_runs import cos, two_rank_outputs  # noqa: E402

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)



@pytest.mark.parametrize("shared", [False, True])
def test_bf16_share_matches_reference(shared):
    if not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch lacks _grouped_mm")
    impl = make("torch-bf16")
    impl.load_model(TINY, Layout(1, 4), RankContext(0, 1, torch.device("cpu")), shared)
    pt = build_point(TINY, 8, Layout(1, 4), 0, seed=0)
    prep = impl.prepare(pt)
    prep.output.fill_(float("nan"))
    prep.step()
    ref = reference(TINY, [pt], shared=shared)
    out = prep.output.float()
    assert torch.isfinite(out).all()
    assert cos(out, ref) > 0.999
    assert float((out - ref).norm() / ref.norm()) < 1e-2


def test_bf16_two_ranks_over_gloo_matches_reference(tmp_path):
    out, pts = two_rank_outputs(tmp_path, TINY, "torch-bf16", shared=True)
    ref = reference(TINY, pts, shared=True)
    assert cos(out, ref) > 0.999
