import logging

import pytest

pytest.importorskip("cuda.bindings")

from fake_cuda import FakeDriver  # noqa: E402

from gcmoe_runtime import green  # noqa: E402
from gcmoe_runtime.heuristics import PartitionError  # noqa: E402


@pytest.mark.parametrize("req,split", [(4, (4, 128)), (8, (12, 120)), (16, (20, 112))])
def test_h200_splits_match_measured(req, split):
    d = FakeDriver()
    gp = green.create_partition(0, req, drv=d)
    assert (gp.dispatch_sms, gp.compute_sms) == split
    assert not gp.workqueue_balanced and "CUDA_ERROR_INVALID_RESOURCE_TYPE" in gp.workqueue_status
    assert d.live_count("green") == 2 and d.live_count("stream") == 2 and d.live_count("event") == 1
    gp.destroy()
    assert d.live_count() == 0


def test_teardown_records_event_synchronises_then_destroys():
    d = FakeDriver()
    gp = green.create_partition(0, 4, drv=d)
    d.calls.clear()
    gp.destroy()
    first_destroy = min(i for i, c in enumerate(d.calls) if c.endswith("Destroy"))
    assert d.calls[:first_destroy] == ["cuGreenCtxRecordEvent", "cuEventSynchronize"] * 2
    gp.destroy()  # idempotent
    assert d.live_count() == 0


def test_env_requests(monkeypatch):
    assert green.requested_dispatch_sms(9, {}) == 4
    assert green.requested_dispatch_sms(10, {}) == 16
    assert green.requested_dispatch_sms(9, {"GC_MOE_SM90_DISPATCH_SMS": "8", "GC_MOE_DISPATCH_SMS": "24"}) == 8
    assert green.requested_dispatch_sms(10, {"GC_MOE_SM90_DISPATCH_SMS": "8", "GC_MOE_DISPATCH_SMS": "24"}) == 24
    with pytest.raises(PartitionError, match="GC_MOE_SM90_DISPATCH_SMS"):
        green.requested_dispatch_sms(9, {"GC_MOE_SM90_DISPATCH_SMS": "four"})
    monkeypatch.setenv("GC_MOE_SM90_DISPATCH_SMS", "16")
    d = FakeDriver()
    gp = green.create_partition(0, drv=d)
    assert (gp.requested, gp.dispatch_sms) == (16, 20)
    gp.destroy()


@pytest.mark.parametrize(
    "kw,req,msg",
    [
        (dict(sms=40), 16, "compute_sms = 24 is below the minimum compute partition of 32"),
        (dict(sms=129, align=1, min_part=1), 1, "dispatch_sms = 1 is below the minimum dispatch partition"),
        (dict(sms=132, align=1, min_part=1), 1, "compute_sms = 131 is odd"),
        (dict(sms=132), 132, "requested_dispatch_sms = 132"),
    ],
)
def test_invalid_partitions_refused_and_nothing_created(kw, req, msg):
    d = FakeDriver(**kw)
    with pytest.raises(PartitionError, match=msg):
        green.create_partition(0, req, drv=d)
    assert d.live_count() == 0


def test_split_returned_by_driver_is_validated():
    d = FakeDriver()
    d.cuDevSmResourceSplitByCount = lambda n, res, f, m: FakeDriver.cuDevSmResourceSplitByCount(d, n, res, f, m - 1)
    d.align = 1  # driver hands back an odd compute group: refused although the request was fine
    with pytest.raises(PartitionError, match="compute_sms = 127 is odd"):
        green.create_partition(0, 4, drv=d)


def test_workqueue_used_and_verified_when_supported():
    d = FakeDriver(workqueue=True)
    gp = green.create_partition(0, 4, drv=d)
    assert gp.workqueue_balanced and gp.workqueue_status == "balanced workqueues verified"
    assert len(d.last_desc_resources) == 2
    gp.destroy()


def test_missing_workqueue_logged_once(caplog):
    green._warned_no_workqueue.clear()
    d = FakeDriver()
    with caplog.at_level(logging.WARNING, logger="gcmoe_runtime.green"):
        a = green.create_partition(0, 4, drv=d)
        b = green.create_partition(0, 4, drv=d)
    assert sum("workqueue" in r.message for r in caplog.records) == 1
    a.destroy(), b.destroy()


def test_failure_midway_cleans_up():
    d = FakeDriver()
    d.fail["cuEventCreate"] = d.cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY
    with pytest.raises(Exception, match="cuEventCreate failed: CUDA_ERROR_OUT_OF_MEMORY"):
        green.create_partition(0, 4, drv=d)
    assert d.live_count() == 0


def test_cache_is_per_thread_and_request():
    import threading

    d = FakeDriver()
    a = green.get_partition(0, 4, drv=d)
    assert green.get_partition(0, 4, drv=d) is a
    assert green.get_partition(0, 8, drv=d) is not a
    other = []
    t = threading.Thread(target=lambda: other.append(green.get_partition(0, 4, drv=d)))
    t.start(), t.join()
    assert other[0] is not a
    green.release_all()
    other[0].destroy()
    assert d.live_count() == 0


def test_resource_descriptors_generated_once_and_reused():
    d = FakeDriver()
    for _ in range(3):
        green.create_partition(0, 4, drv=d).destroy()
    assert d.calls.count("cuDevResourceGenerateDesc") == 2  # one pair, reused (process-lifetime objects)
    assert d.calls.count("cuGreenCtxCreate") == 6 and d.live_count() == 0
    green.create_partition(0, 16, drv=d).destroy()  # another split: its own pair
    assert d.calls.count("cuDevResourceGenerateDesc") == 4
