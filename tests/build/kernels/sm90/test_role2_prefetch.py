"""CPU model of role2's first-W1-task prefetch (gcmoe_build/kernels/sm90/role2_ring.py, "First weights to L2"): the
prefetch warp's search (host mirror ``prefetch_search``: 32 experts a round, an inclusive lane scan, the lane whose
blocks hold the pool block keeps its expert) finds the expert that role1's numbering gives every pool block
(``gcmoe_runtime.operator.ring.pool_blocks``, the ring contract), for random token counts over the production
shapes' local expert counts and every BM, and -1 past the last block."""
from __future__ import annotations

import random

import pytest

from gcmoe_build.kernels.sm90.role2_ring import prefetch_search
from gcmoe_runtime.operator.ring import pool_blocks


@pytest.mark.parametrize("experts", [1, 8, 31, 32, 33, 48, 256])
@pytest.mark.parametrize("bm", [8, 16, 64])
def test_search_finds_the_expert_of_every_pool_block(experts, bm):
    rng = random.Random(experts * 1000 + bm)
    for _ in range(20):
        # mostly empty experts at small loads, some with several blocks
        tokens = [rng.choice([0, 0, 0, 1, 2, bm, bm + 1, 3 * bm]) for _ in range(experts)]
        blocks = pool_blocks(tokens, bm)
        for el, _, q in blocks:
            assert prefetch_search(tokens, bm, q) == el
        assert prefetch_search(tokens, bm, len(blocks)) == -1


def test_search_across_rounds_by_hand():
    """Expert 3 (1 token) and expert 40 (20 tokens, the second round of lanes) at BM 8: pool blocks 3, 40, 40, 40; at
    BM 16: 3, 40, 40. A search that restarted its block count each round would put block 1 in expert 40's round at
    block 0 and miss it."""
    tokens = [0] * 48
    tokens[3], tokens[40] = 1, 20
    assert [prefetch_search(tokens, 8, q) for q in range(5)] == [3, 40, 40, 40, -1]
    assert [prefetch_search(tokens, 16, q) for q in range(4)] == [3, 40, 40, -1]
