"""CPU: role2's generation-phased task order (gcmoe_build/kernels/sm90/role2_schedule.py, mirrored line for line by
the kernel) covers every (pool block, W1/W2, tile) exactly once, puts every task after the tasks it depends on
(W1 before W2 of its block; W2 of generation g before W1 of generation g+1, which reuses the ring blocks), and the
makespan model ranks it ahead of the first, block-major order it replaced."""
from __future__ import annotations

import pytest

from gcmoe_build.kernels.sm90.role2_schedule import block_major_coords, makespan, task_coords


@pytest.mark.parametrize("nq,ring_blocks,nt1,nt2", [(1, 4, 2, 2), (9, 2, 2, 2), (17, 3, 3, 2), (12, 1, 2, 5),
                                                    (128, 192, 16, 24), (300, 192, 18, 20), (0, 4, 2, 2)])
def test_order_covers_every_task_once_after_its_dependencies(nq, ring_blocks, nt1, nt2):
    order = [task_coords(t, nt1, nt2, nq, ring_blocks) for t in range(nq * (nt1 + nt2))]
    want = {(q, True, j) for q in range(nq) for j in range(nt1)} | {(q, False, j) for q in range(nq) for j in range(nt2)}
    assert len(order) == len(want) and set(order) == want
    pos = {c: i for i, c in enumerate(order)}
    for q in range(nq):
        last_w1 = max(pos[(q, True, j)] for j in range(nt1))
        assert all(pos[(q, False, j)] > last_w1 for j in range(nt2))  # W2 waits only on earlier tasks
        if q >= ring_blocks:  # the block's previous generation is fully consumed before this one's W1 starts
            prev_w2 = max(pos[(q - ring_blocks, False, j)] for j in range(nt2))
            assert all(pos[(q, True, j)] > prev_w2 for j in range(nt1))


def test_one_generation_runs_all_w1_tasks_first():
    order = [task_coords(t, 2, 3, 4, 8) for t in range(4 * 5)]
    assert [w1 for _, w1, _ in order] == [True] * 8 + [False] * 12
    assert order[:3] == [(0, True, 0), (0, True, 1), (1, True, 0)] and order[8] == (0, False, 0)


@pytest.mark.parametrize("nq", [5, 49, 125, 128])  # GLM-5.2 P=2 pool blocks at T = 1, 8, 64, 256 per rank
def test_model_prefers_the_phased_order(nq):
    w1, w2 = 256 * 6144, 256 * 2048  # GLM-5.2 task bytes (codes), same per-CTA rate
    ideal = nq * (16 * w1 + 24 * w2) / 128
    phased = makespan(task_coords, nq, 192, 128, 16, 24, w1, w2)
    block = makespan(block_major_coords, nq, 192, 128, 16, 24, w1, w2)
    assert ideal <= phased < block
    assert phased / ideal < 1.5 and block / ideal > 1.6


@pytest.mark.parametrize("ntiles,tile_units,ctas", [
    (108, 20, 128),              # DSV-4.1-Flash T = 1 W1 (108 tiles x K256 units of H = 5120) on one CTA per SM
    (120, 9, 128),               # its W2 (I = 2304)
    (198, 20, 256),              # T = 2 on the two-CTA build
    (192, 8, 256),               # GLM-5.2 T = 1 W2 (I = 2048)
    (3, 24, 256),                # fewer units than CTAs: most CTAs have nothing
    (1, 1, 7),
    (16 * 16, 24, 256),          # GLM-5.2 T = 2 W1: 16 blocks
    (32 * 24, 8, 256),           # 32 blocks' W2 (heuristics.SK_MAX_BLOCKS)
])
def test_stream_k_pieces_cover_every_unit_once_with_consistent_slots(ntiles, tile_units, ctas):
    from gcmoe_build.kernels.sm90.role2_schedule import stream_k_pieces
    SK_MAX_PIECES = 4  # the branch kernel's partial slots per tile (stream_k_pieces' default)

    seen = {}
    per_tile = {}
    for c in range(ctas):
        prev_end = None
        for t, u0, u1, slot, n in stream_k_pieces(c, ctas, ntiles, tile_units, SK_MAX_PIECES):
            assert 0 <= u0 < u1 <= tile_units and 0 <= slot < n <= SK_MAX_PIECES
            if prev_end is not None:  # a CTA's pieces are contiguous: the next starts where the last ended
                assert (t, u0) == (prev_end[0] + 1, 0) and prev_end[1] == tile_units
            prev_end = (t, u1)
            for u in range(u0, u1):
                assert (t, u) not in seen
                seen[(t, u)] = c
            per_tile.setdefault(t, []).append((slot, n, u0))
    assert len(seen) == ntiles * tile_units
    for t, ps in per_tile.items():
        ps.sort()
        assert [s for s, _, _ in ps] == list(range(len(ps)))  # slots 0..n-1, once each
        assert all(n == len(ps) for _, n, _ in ps)  # every piece knows the tile's arrival count
        assert ps[0][2] == 0  # slot 0 holds the tile's first unit


def test_stream_k_balances_what_whole_tiles_cannot():
    """DSV-4.1-Flash T = 1: 108 W1 tiles of 20 units on 128 CTAs: whole tiles leave 20 CTAs idle and take 20 units;
    Stream-K gives every CTA 16 or 17 units, and no tile more than three pieces."""
    from gcmoe_build.kernels.sm90.role2_schedule import stream_k_pieces

    loads = [sum(u1 - u0 for _, u0, u1, _, _ in stream_k_pieces(c, 128, 108, 20)) for c in range(128)]
    assert set(loads) == {16, 17} and sum(loads) == 108 * 20
    assert max(n for c in range(128) for *_, n in stream_k_pieces(c, 128, 108, 20)) <= 3
