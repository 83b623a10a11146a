"""torch grouped-GEMM baseline (BF16 path) on the CPU: same function as an FP32 per-assignment reference,
for one rank's share and for P=2 over gloo all-to-all."""
import os
import socket
import sys

import pytest
import torch

from gcmoe_runtime.bench.impl import RankContext, make
from gcmoe_runtime.bench.routing import Layout, build_point
from gcmoe_runtime.bench.shapes import ModelShape

sys.path.insert(0, os.path.dirname(__file__))
from bench_reference import reference  # noqa: E402

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)


def _cos(a, b):
    return float(torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0))


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
    assert _cos(out, ref) > 0.999
    assert float((out - ref).norm() / ref.norm()) < 1e-2


def _worker(rank, port, d):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    impl = make("torch-bf16")
    impl.load_model(TINY, Layout(2, 2), RankContext(rank, 2, torch.device("cpu"), dist.group.WORLD), True)
    prep = impl.prepare(build_point(TINY, 4, Layout(2, 2), rank, seed=2))
    prep.step()
    torch.save(prep.output.float(), os.path.join(d, f"out{rank}.pt"))
    dist.destroy_process_group()


def test_bf16_two_ranks_over_gloo_matches_reference(tmp_path):
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not dist.is_gloo_available():
        pytest.skip("no gloo")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(port, str(tmp_path)), nprocs=2, join=True)
    out = torch.cat([torch.load(tmp_path / f"out{r}.pt") for r in range(2)])
    pts = [build_point(TINY, 4, Layout(2, 2), r, seed=2) for r in range(2)]
    ref = reference(TINY, pts, shared=True)
    assert _cos(out, ref) > 0.999
