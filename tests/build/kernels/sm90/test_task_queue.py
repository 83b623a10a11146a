"""CPU checks of the persistent role2 kernels' task hand-offs (gcmoe_build.kernels.sm90.task_queue): how many task
slots make reuse safe, where they sit in the ring kernel's shared memory, which configurations may use them. The
GPU side (records, claims, the counter's reset, the chained W1 -> W2 launch) is test_role2_gpu.py's and the layer
accuracy suite's."""
import pytest


@pytest.mark.parametrize("min_nk,stages,slots", [(16, 8, 2), (48, 3, 2), (8, 8, 2), (4, 8, 3), (2, 8, 5), (2, 3, 2)])
def test_slot_count_covers_the_stage_ring(min_nk, stages, slots):
    """n consecutive tasks must span more than the stage ring (the producer's last stage wait then orders the
    consumers' read of the slot it overwrites): the smallest such n, at least 2."""
    from gcmoe_build.kernels.sm90.task_queue import check_slot_reuse, task_slot_count

    n = task_slot_count(min_nk, stages)
    assert n == slots and n * min_nk > stages and (n == 2 or (n - 1) * min_nk <= stages)
    check_slot_reuse(min_nk, stages, "ok", n)
    if n > 2:
        with pytest.raises(ValueError, match=f"{n - 1} task slots"):
            check_slot_reuse(min_nk, stages, "role2 test", n - 1)


def test_ring_slots_follow_the_stage_barriers():
    """The 384-thread ring builds put their task slots after the stage barriers, inside the CTA's shared memory; the
    test model's W2 tasks (I = 256: two K128) need five slots against eight stages, the production shapes two. The
    signal warp's two 16-byte coordinates records follow, 16-byte aligned, where the build has one."""
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig
    from gcmoe_build.kernels.sm90.task_queue import TASK_SLOT_BYTES
    from tests.build.kernels.sm90.test_role2_ring import BASE

    for h, i, bm, slots in ((512, 256, 64, 5), (6144, 2048, 64, 2), (5120, 2304, 32, 2), (6144, 2048, 8, 2)):
        o = Role2RingConfig({**BASE, "hidden": h, "intermediate": i, "bm": bm, "threads": 384}).smem_offsets()
        assert o["nslots"] == slots
        assert o["slots"] == o["bar"] + 16 * o["stages"]
        if "sigrec" in o:  # the builds whose releases run on the signal warp (role2_ring_config.signal_warp_build)
            assert o["sigrec"] == -(-(o["slots"] + slots * TASK_SLOT_BYTES) // 16) * 16
            assert o["total"] == o["sigrec"] + 32
        else:
            assert o["total"] == o["slots"] + slots * TASK_SLOT_BYTES
    assert "slots" not in Role2RingConfig({**BASE, "threads": 256}).smem_offsets()  # no producer, no records


@pytest.mark.parametrize("kw", [dict(dynamic_tasks=True), dict(task_records=True)])
def test_hand_offs_need_the_producer_warpgroup(kw):
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig

    with pytest.raises(ValueError, match="pipelined"):
        Role2GemmConfig(mode="w2", k=2048, rows=6144, bm=16, pipelined=False, **kw)
    cfg = Role2GemmConfig(mode="w2", k=2048, rows=6144, bm=16, pipelined=True, act_buffers=2, **kw)
    plain = Role2GemmConfig(mode="w2", k=2048, rows=6144, bm=16, pipelined=True, act_buffers=2)
    assert cfg.queue_bytes > 0 and cfg.smem_bytes == plain.smem_bytes + cfg.queue_bytes
