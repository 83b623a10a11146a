"""Idle-GPU gate logic with a fake sampler and a fake clock."""
from gcmoe_runtime.bench.gate import GateCriteria, GpuSample, evaluate, run_gate, visible_devices


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t

    def sleep(self, dt):
        self.t += dt


class FakeSampler:
    name = "fake"

    def __init__(self, readings):
        self.readings = list(readings)
        self.calls = 0

    def sample(self):
        r = self.readings[min(self.calls, len(self.readings) - 1)]
        self.calls += 1
        return r


IDLE = [GpuSample(0, 0.0, 140_000.0, 0), GpuSample(1, 0.0, 140_000.0, 0)]


def test_idle_gpus_pass_with_three_samples_over_ten_seconds():
    clk = FakeClock()
    s = FakeSampler([IDLE])
    r = run_gate(s, None, clock=clk, sleep=clk.sleep)
    assert r.passed, r.reasons
    assert s.calls == 3
    assert r.samples[-1]["t"] - r.samples[0]["t"] >= 10.0


def test_busy_gpu_fails_and_names_the_reason():
    clk = FakeClock()
    busy = [GpuSample(0, 0.0, 140_000.0, 0), GpuSample(1, 37.0, 140_000.0, 1)]
    r = run_gate(FakeSampler([IDLE, busy, IDLE]), None, clock=clk, sleep=clk.sleep)
    assert not r.passed
    assert any("GPU 1: utilisation 37%" in x for x in r.reasons)
    assert any("GPU 1: 1 compute processes" in x for x in r.reasons)


def test_low_free_memory_fails_only_for_gated_devices():
    low = [GpuSample(0, 0.0, 140_000.0, 0), GpuSample(1, 0.0, 40_000.0, 0)]
    samples = [(0.0, low), (5.0, low), (10.0, low)]
    assert any("40000 MiB free < 51200" in x for x in evaluate(samples, None))
    assert evaluate(samples, [0]) == []


def test_too_few_samples_or_short_span_fail():
    assert any("only 2 samples" in x for x in evaluate([(0.0, IDLE), (10.0, IDLE)], None))
    assert any("span 4.0 s" in x for x in evaluate([(0.0, IDLE), (2.0, IDLE), (4.0, IDLE)], None))
    assert any("no reading" in x for x in evaluate([(0.0, IDLE)] * 3, [2], GateCriteria(min_span_s=0)))


def test_no_sampler_fails_plainly():
    r = run_gate(None, None)
    assert not r.passed and "no GPU sampler" in r.reasons[0]


def test_visible_devices():
    assert visible_devices({}) is None
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "1,0"}) == [1, 0]
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "GPU-abc"}) is None
