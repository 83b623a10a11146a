"""CPU: the dev benches' clock sampler (role2_harness.ClockSampler): without NVML it is unavailable and summarises
nothing; its window summary is the mean SM clock / power and the share of samples the software power cap held."""
from tests.build.kernels.sm90.role2_harness import ClockSampler


def test_summary_of_a_window(monkeypatch):
    c = ClockSampler.__new__(ClockSampler)  # no NVML, no thread: the summary arithmetic alone
    c.available = False
    c.samples = [(0.5, 1980, 300.0, 0), (1.0, 1980, 500.0, 0), (1.5, 1800, 690.0, ClockSampler.SW_POWER_CAP),
                 (2.0, 1700, 700.0, ClockSampler.SW_POWER_CAP | 0x1), (3.0, 1980, 120.0, 0)]
    s = c.summary(1.0, 2.0)
    assert s == {"sm_mhz": (1980 + 1800 + 1700) / 3, "power_w": (500.0 + 690.0 + 700.0) / 3,
                 "power_capped": 2 / 3, "samples": 3}
    assert c.summary(5.0, 6.0) == {}


def test_without_nvml_nothing_is_sampled(monkeypatch):
    import ctypes

    def no_lib(name, *a, **k):
        raise OSError(f"{name}: not here")

    monkeypatch.setattr(ctypes, "CDLL", no_lib)
    c = ClockSampler()
    assert not c.available and c.summary(0.0, 1e9) == {}
    c.close()
