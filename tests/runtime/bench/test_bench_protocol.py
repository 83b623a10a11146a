"""Protocol statistics: per-rank median, slowest rank, mean of per-point ratios."""
import pytest

from gcmoe_runtime.bench.protocol import PAPER, ProtocolConfig, mean_of_ratios, median, slowest_rank, speedups

# paper Table 5 (DeepSeek-V4.1-Flash, 8xH20): Mega and GC-MoE rows; the paper reports mean 1.1881
MEGA = [120.061, 169.340, 256.018, 368.254, 442.722, 472.090, 507.207, 569.604, 695.010]
GC = [115.161, 144.259, 202.589, 284.310, 341.689, 373.393, 432.383, 493.194, 675.370]


def test_mean_of_ratios_reproduces_paper_table5():
    assert mean_of_ratios(MEGA, GC) == pytest.approx(1.1881, abs=5e-5)
    assert speedups(MEGA, GC)[4] == pytest.approx(1.2957, abs=5e-5)
    # and it is not the ratio of means
    assert sum(MEGA) / sum(GC) != pytest.approx(mean_of_ratios(MEGA, GC), abs=1e-3)


def test_median_and_slowest_rank():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert slowest_rank([59.21, 59.39, 59.30]) == 59.39
    with pytest.raises(ValueError):
        median([])
    with pytest.raises(ValueError):
        slowest_rank([])


def test_ratio_errors():
    with pytest.raises(ValueError, match="points"):
        speedups([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="positive"):
        speedups([1.0], [0.0])


def test_protocol_config():
    assert PAPER.is_paper and (PAPER.replays_per_window, PAPER.warmup_windows, PAPER.measured_windows) == (100, 10, 30)
    assert not ProtocolConfig(measured_windows=10).is_paper
    with pytest.raises(ValueError, match="replays_per_window"):
        ProtocolConfig(replays_per_window=0)


def test_l2_flusher_writes_or_reads_its_buffer_and_refuses_other_modes():
    """``write`` zeroes the buffer (the protocol's flush: dirty lines); ``read`` only reduces it (clean lines)."""
    from gcmoe_runtime.bench.protocol import L2Flusher

    w, r = L2Flusher(4096, "cpu"), L2Flusher(4096, "cpu", "read")
    w.buf.fill_(7)
    r.buf.fill_(7)
    w()
    r()
    assert int(w.buf.abs().sum()) == 0
    assert int(r.buf.min()) == 7 and int(r.sink) == 7 * 1024
    with pytest.raises(ValueError, match="flush mode='evict' must be one of"):
        L2Flusher(4096, "cpu", "evict")
