"""Runs of a baseline implementation on the CPU for the baseline tests: one emulated rank's share
(:func:`one_share_output`), and two ranks over gloo (:func:`two_rank_outputs`, the P = 2 path: all-to-all
dispatch and combine). ``patch = ("module", "attr", "test_module:factory")``
installs ``factory`` as ``module.attr`` inside each spawned rank (e.g. a stand-in for a GPU-only library)."""
import importlib
import os
import socket

import pytest
import torch

from gcmoe_runtime.bench.impl import RankContext, make
from gcmoe_runtime.bench.routing import Layout, build_point

TOKENS, SEED = 4, 2


def _rank(rank, port, out_dir, shape, impl_name, shared, patch):
    import torch.distributed as dist

    if patch:
        mod, attr, target = patch
        tmod, fn = target.split(":")
        setattr(importlib.import_module(mod), attr, getattr(importlib.import_module(tmod), fn))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    impl = make(impl_name)
    impl.load_model(shape, Layout(2, 2), RankContext(rank, 2, torch.device("cpu"), dist.group.WORLD), shared)
    prep = impl.prepare(build_point(shape, TOKENS, Layout(2, 2), rank, seed=SEED))
    prep.step()
    torch.save(prep.output.float(), os.path.join(out_dir, f"out{rank}.pt"))
    dist.destroy_process_group()


def two_rank_outputs(tmp_path, shape, impl_name, shared=False, patch=None):
    """(both ranks' outputs concatenated, the two ranks' points) for ``impl_name`` at P = 2 on the CPU."""
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if not dist.is_gloo_available():
        pytest.skip("no gloo")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank, args=(port, str(tmp_path), shape, impl_name, shared, patch), nprocs=2, join=True)
    out = torch.cat([torch.load(tmp_path / f"out{r}.pt") for r in range(2)])
    return out, [build_point(shape, TOKENS, Layout(2, 2), r, seed=SEED) for r in range(2)]


def one_share_output(impl, shape, tokens, seed=0):
    """(output, point) of one emulated rank's share (P = 1, EP = 4) with the output poisoned before the step."""
    impl.load_model(shape, Layout(1, 4), RankContext(0, 1, torch.device("cpu")), False)
    pt = build_point(shape, tokens, Layout(1, 4), 0, seed=seed)
    prep = impl.prepare(pt)
    prep.output.fill_(float("nan"))
    prep.step()
    return prep.output.float(), pt


def cos(a, b):
    """Cosine similarity of two tensors, flattened, in FP32."""
    return float(torch.nn.functional.cosine_similarity(a.flatten().float(), b.flatten().float(), dim=0))


def captured_output(impl, shape, tokens, shared=False, seed=5, warm=False):
    """(output, point) of one emulated share on cuda:0, the step captured in a CUDA graph and replayed twice
    (a replay must be idempotent) with the output poisoned first; skips with the implementation's reason when
    it cannot run here. ``warm``: run the step once before capture (JIT compilers that cannot compile inside a
    capture). The model is unloaded afterwards."""
    from gcmoe_runtime.bench.protocol import capture_graph

    why = impl.unsupported(shape, Layout(1, 4), shared)
    if why:
        pytest.skip(why)
    try:
        impl.load_model(shape, Layout(1, 4), RankContext(0, 1, torch.device("cuda:0")), shared)
        pt = build_point(shape, tokens, Layout(1, 4), 0, seed=seed)
        prep = impl.prepare(pt)
        if warm:
            prep.step()
            torch.cuda.synchronize()
        g = capture_graph(prep.step)
        prep.output.fill_(float("nan"))
        g.replay()
        g.replay()
        torch.cuda.synchronize()
        return prep.output.float(), pt
    finally:
        impl.unload_model()
