"""Case definitions (47 = 9 + 23 + 15, routing rules honoured, deterministic) and metric edge cases."""
import dataclasses
import math

import pytest
import torch

from gcmoe_runtime.accuracy.cases import build_rank_inputs, default_token_counts, suite_cases, tokens_per_rank
from gcmoe_runtime.accuracy.config import PRESETS, SuiteConfig, cpu_variant, make_layer_weights
from gcmoe_runtime.accuracy.metrics import cosine, evaluate_rank_case, max_abs_error, processed_diff, relative_l2

SMALL = SuiteConfig("small", 256, 128, 16, 4, shared_experts=1, world=4, capacity=24)


@pytest.fixture(scope="module")
def layer():
    return make_layer_weights(SMALL)


def _case(layer, name, ranks=None):
    cases = suite_cases(SMALL)
    i = [c.name for c in cases].index(name)
    return build_rank_inputs(SMALL, layer, cases[i], i, ranks)


def test_case_counts_and_default_token_counts():
    cases = suite_cases(SMALL)
    assert len(cases) == 47
    assert [sum(c.category == k for c in cases) for k in ("default", "boundary", "asymmetric")] == [9, 23, 15]
    assert default_token_counts(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert default_token_counts(24)[-1] == 24 and len(set(default_token_counts(24))) == 9
    with pytest.raises(ValueError, match="capacity"):
        default_token_counts(5)


def test_token_rules(layer):
    cases = {c.name: (i, c) for i, c in enumerate(suite_cases(SMALL))}
    t = lambda n: tokens_per_rank(cases[n][1], SMALL, cases[n][0])  # noqa: E731
    assert t("T0_all_ranks") == [0] * 4 and t("T_capacity") == [24] * 4 and t("T_capacity_minus_1") == [23] * 4
    assert t("empty_rank0") == [0, 16, 16, 16] and t("only_rank0_has_tokens") == [16, 0, 0, 0]
    assert t("tokens_one_heavy_rank") == [24, 1, 1, 1] and t("tokens_alternate_empty") == [6, 0, 6, 0]


def test_routing_rules_honoured(layer):
    owner = lambda e: e // SMALL.experts_per_rank  # noqa: E731
    for inp in _case(layer, "all_tokens_to_expert0"):
        assert (inp.topk_idx == 0).any(dim=1).all()
    for inp in _case(layer, "remote_experts_only"):
        assert all(owner(e) != inp.rank for e in inp.topk_idx.flatten().tolist())
    for inp in _case(layer, "local_experts_only"):
        assert all(owner(e) == inp.rank for e in inp.topk_idx.flatten().tolist())
    for inp in _case(layer, "all_tokens_to_last_rank"):
        assert all(owner(e) == 3 for e in inp.topk_idx.flatten().tolist())
    for inp in _case(layer, "zero_routing_weights"):
        assert not inp.topk_weights.any()
    for name in [c.name for c in suite_cases(SMALL)]:
        for inp in _case(layer, name):
            rows = inp.topk_idx.tolist()
            assert all(len(set(r)) == SMALL.topk for r in rows), name  # k distinct experts per token
            assert inp.topk_idx.shape == (inp.num_tokens, SMALL.topk) and inp.x_q.shape == (inp.num_tokens, 256)


def test_p1_remote_only_falls_back_with_note():
    cfg = dataclasses.replace(SMALL, world=1)
    cases = suite_cases(cfg)
    i = [c.name for c in cases].index("remote_experts_only")
    inp = build_rank_inputs(cfg, make_layer_weights(dataclasses.replace(cfg, num_experts=16)), cases[i], i)[0]
    assert "impossible" in inp.note


def test_cases_deterministic_and_per_rank_equals_global(layer):
    a = _case(layer, "zipf_1.0")
    b = _case(layer, "zipf_1.0", ranks=[2])
    assert torch.equal(a[2].topk_idx, b[0].topk_idx) and torch.equal(a[2].x_q.view(torch.uint8), b[0].x_q.view(torch.uint8))
    assert not torch.equal(a[0].topk_idx, a[1].topk_idx)


def test_presets_and_cpu_variant():
    g = cpu_variant(PRESETS["glm-5.2"])
    assert (g.hidden, g.intermediate, g.num_experts, g.topk, g.world) == (6144, 2048, 32, 8, 1)
    d = PRESETS["deepseek-v4.1-flash"]
    assert (d.hidden, d.intermediate, d.num_experts, d.topk, d.shared_recipe) == (5120, 2304, 384, 6, (1, 1, 32))
    t = PRESETS["test-tiny"]
    assert (t.hidden, t.intermediate, t.num_experts, t.topk, t.shared_experts) == (512, 256, 16, 4, 1)
    with pytest.raises(ValueError, match="divisible by world"):
        SuiteConfig("bad", 256, 128, 10, 4, world=4)


def test_metric_edge_cases():
    z = torch.zeros(3, 4)
    y = torch.ones(3, 4)
    assert cosine(z, z) == 1.0 and cosine(y, z) == 0.0 and processed_diff(z, z) == 0.0
    assert processed_diff(y, y) == 0.0 and abs(processed_diff(y, -y) - 2.0) < 1e-12
    assert relative_l2(z, z) == 0.0 and math.isinf(relative_l2(y, z)) and max_abs_error(y, 2 * y) == 1.0
    assert abs(processed_diff(y, 1.5 * y) - (1 - 2 * 1.5 / (1 + 2.25))) < 1e-12


def test_evaluate_rank_case_pass_and_failures():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(8, 64, generator=g).to(torch.bfloat16)
    ok = evaluate_rank_case(ref, ref, ref, shared=False, hidden=64, y_repeat=ref)
    assert ok["passed"] and ok["processed_diff"] == 0 and ok["repeat_bitwise_equal"]
    noisy = (ref.float() + 0.2 * torch.randn(8, 64, generator=g)).to(torch.bfloat16)
    bad = evaluate_rank_case(noisy, ref, ref, shared=True, hidden=64, y_repeat=ref)
    assert not bad["passed"]
    assert any("processed diff" in f for f in bad["failures"]) and any("repeat_diff" in f for f in bad["failures"])
    nan = ref.clone()
    nan[0, 0] = float("nan")
    assert "non-finite output" in evaluate_rank_case(nan, ref, ref, shared=False, hidden=64)["failures"]
    wrong = evaluate_rank_case(ref.float(), ref, ref, shared=False, hidden=64)
    assert not wrong["passed"] and "dtype" in wrong["failures"][0]
    empty = torch.zeros(0, 64, dtype=torch.bfloat16)
    assert evaluate_rank_case(empty, empty, empty, shared=False, hidden=64)["passed"]


def test_resolve_preset_rank_share():
    import pytest

    from gcmoe_runtime.accuracy.config import PRESETS, resolve_preset

    assert resolve_preset("glm-5.2") is PRESETS["glm-5.2"]
    share = resolve_preset("glm-5.2@E32")
    assert (share.num_experts, share.hidden, share.topk, share.capacity) == (32, 6144, 8, 256)
    assert share.name == "glm-5.2@E32"
    for bad, field in (("glm-9@E32", "glm-9"), ("glm-5.2@Ex", "positive integer"), ("glm-5.2@E0", "positive")):
        with pytest.raises(ValueError, match=field):
            resolve_preset(bad)
