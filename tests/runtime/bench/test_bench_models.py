"""Analytic models (paper §6.4) on hand-checked values."""
import pytest

from gcmoe_runtime.bench import models as M
from gcmoe_runtime.bench.shapes import ModelShape

DSV4 = ModelShape("deepseek-v4.1-flash", 5120, 2304, 384, 6, shared_experts=1, shared_k_group=32)
GLM = ModelShape("glm-5.2", 6144, 2048, 256, 8, shared_experts=1, shared_k_group=128)
TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)


def test_mxfp4_expert_bytes_by_hand():
    # 3*H*I elements: 0.5 B each + 1 B per 32
    assert M.mxfp4_expert_bytes(DSV4) == 35_389_440 // 2 + 35_389_440 // 32 == 18_800_640
    assert M.mxfp4_expert_bytes(GLM) == 18_874_368 + 1_179_648 == 20_054_016
    assert M.mxfp4_expert_bytes(TINY) == 196_608 + 12_288 == 208_896


def test_streamed_routed_bytes_count_one_pass_per_block():
    e = M.mxfp4_expert_bytes(GLM)
    assert M.streamed_routed_bytes(GLM, [0, 1, 64, 65, 79], 64) == (1 + 1 + 2 + 2) * e  # empty experts stream nothing
    assert M.streamed_routed_bytes(GLM, [0, 1, 64, 65, 79], 48) == (1 + 2 + 2 + 2) * e
    assert M.streamed_routed_bytes(GLM, [8] * 32, 16) == M.unique_active_bytes(GLM, 32, shared=False)
    with pytest.raises(ValueError, match="bm=0"):
        M.streamed_routed_bytes(GLM, [1], 0)


def test_fp8_shared_bytes_by_hand():
    assert M.fp8_shared_bytes(GLM) == 37_748_736 + 37_748_736 // 128 == 38_043_648
    assert M.fp8_shared_bytes(DSV4) == 35_389_440 + 1_105_920


def test_flops_and_nvlink_by_hand():
    assert M.matmul_flops(DSV4, 6) == 6 * 6 * 5120 * 2304 == 424_673_280
    assert M.matmul_flops(DSV4, 6, shared_tokens=2) == 424_673_280 + 2 * 6 * 5120 * 2304
    assert M.nvlink_bytes_per_remote_assignment(DSV4) == 5120 + 160 + 10240 == 15_520
    assert M.nvlink_payload_bytes(GLM, 10) == 10 * (6144 + 192 + 12288)
    assert M.expected_remote_fraction(8) == 7 / 8 and M.expected_remote_fraction(1) == 0


def test_floor_matches_design_doc_scale():
    # DESIGN.md §4: DSV4 T=1 at P=2 -> ~6 active experts per rank -> ~26 µs at 4.38 TB/s
    b = M.unique_active_bytes(DSV4, 6, shared=False)
    assert M.floor_us([b], [4380.0], None) == pytest.approx(25.75, abs=0.01)
    assert M.floor_us([b, b // 2], [4380.0, 4000.0], 1.23) == pytest.approx(25.75 + 1.23, abs=0.01)
    with pytest.raises(ValueError, match="round trip"):
        M.floor_us([b, b], [4380.0, 4380.0], None)


def test_point_model_aggregates_over_ranks():
    ranks = [M.RankWork(assignments=10, active_experts=3, remote_sent=4, shared_tokens=2),
             M.RankWork(assignments=6, active_experts=5, remote_sent=1, shared_tokens=2)]
    pm = M.point_model(TINY, ranks, shared=True)
    assert pm.flops == 6 * 16 * 512 * 256 + 6 * 4 * 512 * 256
    e, s = M.mxfp4_expert_bytes(TINY), M.fp8_shared_bytes(TINY)
    assert pm.hbm_bytes == 8 * e + 2 * s and pm.max_rank_hbm_bytes == 5 * e + s
    assert pm.nvlink_bytes == 5 * (512 + 16 + 1024)
    assert pm.tflops(1.0) == pytest.approx(pm.flops / 1e-6 / 1e12)
    routed_only = M.point_model(TINY, ranks, shared=False)
    assert routed_only.flops == 6 * 16 * 512 * 256 and routed_only.hbm_bytes == 8 * e


def test_read_variants_run_and_reduce_every_element():
    import torch

    from gcmoe_runtime.bench.floor import read_variants

    x = torch.arange(16 * 8, dtype=torch.float32)
    rows = x.view(-1, 8)
    out0, out1 = torch.empty(()), torch.empty(16)
    v = read_variants(x, rows, out0, out1)
    v["sum_all_fp32"]()
    assert float(out0) == float(x.sum())
    v["sum_rows_fp32"]()
    assert torch.equal(out1, rows.sum(1))
    v["amax_all_fp32"]()
    assert float(out0) == 127.0
