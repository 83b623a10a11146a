"""Routing and per-rank dispatch plans: deterministic, complete, consistent between layouts."""
import pytest
import torch

from gcmoe_runtime.bench.routing import Layout, build_point
from gcmoe_runtime.bench.shapes import ModelShape

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)


def test_same_seed_same_inputs_and_topk_distinct():
    a = build_point(TINY, 8, Layout(1, 4), 0, seed=3)
    b = build_point(TINY, 8, Layout(1, 4), 0, seed=3)
    assert torch.equal(a.topk_ids, b.topk_ids) and torch.equal(a.activations("cpu"), b.activations("cpu"))
    assert not torch.equal(a.topk_ids, build_point(TINY, 8, Layout(1, 4), 0, seed=4).topk_ids)
    assert all(len(set(r.tolist())) == 4 for r in a.topk_ids)
    assert torch.allclose(a.topk_weights.sum(1), torch.ones(32))


def test_emulated_share_counts_local_assignments():
    pt = build_point(TINY, 8, Layout(1, 4), 0, seed=0)
    p = pt.plan
    local = (pt.topk_ids < 4)
    assert p.assignments == int(local.sum()) and p.local_experts == 4
    assert p.resident_tokens == 32 and p.remote_sent == 0
    assert int(p.group_sizes.sum()) == p.assignments
    assert p.active_experts == int((torch.bincount(pt.topk_ids[local], minlength=4) > 0).sum())
    # sorted rows are grouped by expert and point to tokens that chose that expert
    e_sorted = p.recv_expert[p.sort_perm]
    assert torch.all(e_sorted[1:] >= e_sorted[:-1])
    for e, t in zip(e_sorted.tolist(), p.recv_token[p.sort_perm].tolist()):
        assert e in pt.topk_ids[t].tolist()


def test_distributed_plans_are_consistent_across_ranks():
    lay = Layout(2, 2)
    pts = [build_point(TINY, 8, lay, r, seed=1) for r in range(2)]
    total = 16 * 4
    assert sum(p.plan.assignments for p in pts) == total
    for r, pt in enumerate(pts):
        p = pt.plan
        assert sum(p.send_counts) == 8 * 4 and len(p.send_counts) == 2
        # what r receives from s is what s sends to r
        for s in range(2):
            assert p.recv_counts[s] == pts[s].plan.send_counts[r]
        assert p.remote_sent == sum(p.send_counts) - p.send_counts[r]
        assert p.resident_tokens == 8 and p.resident_token_lo == 8 * r
    # the emulated share at ep=2 equals real rank 0's received work
    emu = build_point(TINY, 8, Layout(1, 2), 0, seed=1).plan
    assert torch.equal(emu.group_sizes, pts[0].plan.group_sizes)


def test_bad_points_are_clear_errors():
    with pytest.raises(ValueError, match="capacity 256"):
        build_point(TINY, 512, Layout(1, 1), 0, 0)
    with pytest.raises(ValueError, match="not divisible"):
        build_point(TINY, 1, Layout(1, 3), 0, 0)
    with pytest.raises(ValueError, match="world == ep"):
        Layout(2, 4)
