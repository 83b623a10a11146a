"""CPU model of role2's first-W1-task prefetch (gcmoe_build/kernels/sm90/role2_ring.py, "First weights to L2"): the
prefetch warp's search (host mirror ``prefetch_search``: one routed slot per lane, each lane counting the lanes with
its expert, the lowest keeping the expert's blocks, a lane's first block the blocks of every lower expert) finds the
expert that role1's numbering gives every pool block (``gcmoe_runtime.operator.ring.pool_blocks``, the ring
contract) and the replay's block count, for random routings of up to 32 slots (repeated experts across tokens, dropped
slots), every BM, and -1 past the last block."""
from __future__ import annotations

import random

import pytest

from gcmoe_build.kernels.sm90.role2_ring_config import prefetch_search
from gcmoe_runtime.operator.ring import pool_blocks


def _routing(rng, tokens, k, experts, drop):
    """``tokens`` tokens' top-k ids (distinct within a token), some slots dropped (-1) with probability ``drop``."""
    ids = []
    for _ in range(tokens):
        ids += [e if rng.random() >= drop else -1 for e in rng.sample(range(experts), k)]
    return ids


@pytest.mark.parametrize("experts,k", [(256, 8), (256, 6), (16, 4), (8, 8)])
@pytest.mark.parametrize("bm", [1, 2, 8])
def test_search_finds_the_expert_of_every_pool_block(experts, k, bm):
    rng = random.Random(experts * 100 + k * 10 + bm)
    for _ in range(30):
        ids = _routing(rng, rng.randint(1, 32 // k), k, experts, rng.choice([0.0, 0.2]))
        counts = [sum(i == e for i in ids) for e in range(experts)]
        blocks = pool_blocks(counts, bm)
        for el, _, q in blocks:
            assert prefetch_search(ids, experts, bm, q) == (el, len(blocks))
        assert prefetch_search(ids, experts, bm, len(blocks)) == (-1, len(blocks))


def test_search_by_hand():
    """Tokens routed to (40, 3) and (40, 7) with one dropped slot, BM 1: pool blocks 3, 7, 40, 40; BM 8: 3, 7, 40."""
    ids = [40, 3, 40, 7, -1, 300]
    assert [prefetch_search(ids, 256, 1, q) for q in range(5)] == [(3, 4), (7, 4), (40, 4), (40, 4), (-1, 4)]
    assert [prefetch_search(ids, 256, 8, q)[0] for q in range(4)] == [3, 7, 40, -1]
    with pytest.raises(ValueError, match="at most 32"):
        prefetch_search([0] * 33, 256, 8, 0)
