"""CPU checks of the step-stamp reader (``stamp_role2.phases``) and of where ``Role2GemmConfig.step_stamps`` may be
built (the GPU measurement itself is ``stamp_role2.py``)."""
from __future__ import annotations

import pytest

from tests.build.kernels.sm90.stamp_role2 import POISON, _cyc, busy_overlap, phases

EVENTS = ["start", "stage_ready", "decoded", "turn", "issued", "mma_done", "promoted", "produced"]


def _step(t0: int, turn: bool = True) -> list[int]:
    offs = [0, 10, 200, 260, 300, 700, 780, -50]
    row = [(t0 + o) & 0xFFFFFFFF for o in offs]
    row = [v - (1 << 32) if v >= 1 << 31 else v for v in row]  # the int32 view the harness reads
    if not turn:
        row[3] = POISON
    return row


def test_cycles_wrap_around_the_32_bit_clock():
    assert _cyc(0xFFFFFFF0, 0x10) == 0x20
    assert _cyc(-16, 16) == 32
    assert _cyc(100, 40) == -60


@pytest.mark.parametrize("turn", [True, False])
def test_phases_split_a_step_and_set_task_tops_apart(turn):
    base = (1 << 32) - 1000  # the clock wraps inside the run
    steps_per_task = 4
    row = [_step(base + 900 * gs, turn) for gs in range(8)] + [[POISON] * 8 for _ in range(2)]
    stamps = [[row, row]]
    ph = phases(stamps, EVENTS, steps_per_task)
    assert ph[(0, "stage_wait")] == [10] * 6 and ph[(0, "top:stage_wait")] == [10, 10]
    assert ph[(1, "decode")] == [190] * 6
    if turn:
        assert ph[(0, "turn_wait")] == [60] * 6 and ph[(0, "issue")] == [40] * 6
    else:
        assert (0, "turn_wait") not in ph and ph[(0, "issue")] == [100] * 6
    assert ph[(0, "issued_to_mma_done")] == [400] * 6 and ph[(0, "promote")] == [80] * 6
    # periods inside a task only (3 per task), the producer's stamp 50 cycles ahead of each consumer start
    assert ph[(0, "period")] == [900] * 6
    assert ph[(1, "stage_lead")] == [50] * 6


def test_step_stamps_only_where_the_chained_steps_are_stamped():
    pytest.importorskip("cutlass")
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    ok = dict(mode="w1", k=1024, rows=1024, bm=64, pipelined=True, act_buffers=2, step_stamps=True)
    Role2GemmConfig(**ok)
    for bad in (dict(slab_groups=1), dict(dynamic_tasks=True, task_records=True), dict(pipelined=False)):
        with pytest.raises(ValueError, match="step_stamps"):
            Role2GemmConfig(**{**ok, **bad})


def test_busy_overlap_counts_the_warps_in_cuda_core_phases():
    # warp 0 busy in [0, 200) (start -> decoded) and [700, 780) (mma_done -> promoted) of each 900-cycle step; warp 1
    # the same, shifted by 450 cycles: never both busy, idle 900 - 2 x 280 = 340 of each 900 cycles
    rows = [[_step(900 * gs) for gs in range(6)], [_step(900 * gs + 450) for gs in range(6)]]
    none, one, both = busy_overlap([rows], EVENTS, range(0, 6), grain=1)
    assert both == 0.0
    assert abs(one - 560 / 900) < 0.02 and abs(none - 340 / 900) < 0.02
    # the same warp twice: always both or none
    none, one, both = busy_overlap([[rows[0], rows[0]]], EVENTS, range(0, 6), grain=1)
    assert one == 0.0 and abs(both - 280 / 900) < 0.02
