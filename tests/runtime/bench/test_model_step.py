"""The many-layer graph instrument's CPU side (gcmoe_runtime.bench.model_step): the A/B arms' edge rule, the report."""
import pytest

from gcmoe_runtime import graph
from gcmoe_runtime.bench import model_step
from gcmoe_runtime.bench.__main__ import main

ROLES = {"role1": None, "role2": None, "role3": None, "role4": None}


@pytest.fixture
def restore_rule():
    original = graph.role3_waits_for_role1
    yield
    graph.role3_waits_for_role1 = original


def test_shipped_rule_drops_role1_to_role3_at_one_rank_only(restore_rule):
    model_step.patch_role3_edges("shipped")
    assert graph.role3_waits_for_role1(1) is False and graph.role3_waits_for_role1(2) is True
    assert graph._edges(ROLES, False, graph.role3_waits_for_role1(1))["role3"] == ["role2", "role4"]
    assert graph._edges(ROLES, False, graph.role3_waits_for_role1(8))["role3"] == ["role1", "role2", "role4"]
    # the serialised ablation keeps its chain and its edges
    assert graph._edges(ROLES, True, False) == graph._edges(ROLES, True, True)


@pytest.mark.parametrize("after, at_one_rank", [("all", True), ("role2", False)])
def test_arms_override_the_rule(restore_rule, after, at_one_rank):
    model_step.patch_role3_edges(after)
    assert graph.role3_waits_for_role1(1) is at_one_rank and graph.role3_waits_for_role1(8) is at_one_rank
    model_step.patch_role3_edges("shipped")  # undoes the arm
    assert graph.role3_waits_for_role1(1) is False and graph.role3_waits_for_role1(8) is True


def test_unknown_arm_is_refused(restore_rule):
    with pytest.raises(ValueError, match="role3_after"):
        model_step.patch_role3_edges("role1")


def test_markdown_rows_and_skips():
    res = {"model": "glm-5.2", "shared": False, "layers": 20, "gpu": "H200", "date": "d", "role3_after": "shipped",
           "command": "python -m gcmoe_runtime.bench layers ...",
           "rows": [{"impl": "gc-moe", "tokens": 1, "one_us": 64.0, "all_us": 69.5, "all_minus_one_us": 5.5,
                     "all_runs": [69.4, 69.6]},
                    {"impl": "gc-moe-streams", "skipped": "no bundle"}]}
    md = model_step.markdown(res)
    assert "| gc-moe | 1 | 64.00 | 69.50 | +5.50 | 69.40 / 69.60 |" in md
    assert "| gc-moe-streams | - | skipped: no bundle |" in md
    assert "20 layers per torch graph" in md


def test_layers_needs_two_layers(tmp_path):
    with pytest.raises(ValueError, match="layers=1"):
        model_step.run(None, [1], False, 1, ["gc-moe"], 2, 2, tmp_path, "cmd")


def test_sweep_refuses_an_unexplained_protocol_change(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--model", "glm-5.2", "--replays", "10", "--out", "/nonexistent"])
    assert "--deviation" in capsys.readouterr().err


def test_warm_up_replays_until_its_time_has_passed(monkeypatch):
    calls = []

    def fake_time(replay, n):
        calls.append(n)
        return 60_000.0  # µs per round

    monkeypatch.setattr(model_step, "_time_replays", fake_time)
    model_step.warm_up(None, 7, seconds=0.25)
    assert calls == [7] * 5  # 5 x 60 ms >= 250 ms
    calls.clear()
    model_step.warm_up(None, 7, seconds=0.0)
    assert calls == [7]
