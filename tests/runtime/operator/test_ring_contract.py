"""CPU: the host mirrors of the token-ring contract (gcmoe_runtime.operator.ring)."""
import pytest

from gcmoe_runtime.operator.ring import l1_full_target, pool_blocks, ring_slot, sequence_position


def test_pool_blocks_cut_each_expert():
    assert pool_blocks([0, 17, 16, 1], 16) == [(1, 16, 0), (1, 1, 1), (2, 16, 2), (3, 1, 3)]
    assert pool_blocks([], 8) == [] and pool_blocks([0, 0], 8) == []


def test_ring_slot_and_targets():
    assert ring_slot(0, 5) == (0, 0) and ring_slot(7, 5) == (2, 1)
    assert l1_full_target(16, 0) == 16 and l1_full_target(16, 2) == 48
    with pytest.raises(ValueError):
        ring_slot(1, 0)


def test_sequence_position():
    counts = [[2, 3], [0, 4]]  # [local expert][source rank]
    assert sequence_position(counts, 0, 1, 0) == 2
    assert sequence_position(counts, 1, 1, 3) == 8
    with pytest.raises(ValueError):
        sequence_position(counts, 1, 0, 0)
