"""The many-layer graph instrument's CPU side (gcmoe_runtime.bench.model_step): the dev edge patch, the report."""
import pytest

from gcmoe_runtime import graph
from gcmoe_runtime.bench import model_step
from gcmoe_runtime.bench.__main__ import main

ROLES = {"role1": None, "role2": None, "role3": None, "role4": None}


@pytest.fixture
def restore_edges():
    original = graph._edges
    yield
    graph._edges = original
    model_step._ORIGINAL_EDGES = None


def test_role3_after_role2_drops_only_the_role1_edge(restore_edges):
    shipped = graph._edges(ROLES, False)
    assert shipped["role3"] == ["role1", "role2", "role4"]
    model_step.patch_role3_edges("role2")
    patched = graph._edges(ROLES, False)
    assert patched["role3"] == ["role2", "role4"]
    assert {r: d for r, d in patched.items() if r != "role3"} == {r: d for r, d in shipped.items() if r != "role3"}
    # the serialised ablation keeps its one chain
    assert graph._edges(ROLES, True) == model_step._ORIGINAL_EDGES(ROLES, True)
    model_step.patch_role3_edges("role2")  # twice: still one level of patching
    assert graph._edges(ROLES, False)["role3"] == ["role2", "role4"]


def test_role3_after_all_leaves_the_graph_as_shipped(restore_edges):
    model_step.patch_role3_edges("all")
    assert graph._edges(ROLES, False)["role3"] == ["role1", "role2", "role4"]
    with pytest.raises(ValueError, match="role3_after"):
        model_step.patch_role3_edges("role1")


def test_markdown_rows_and_skips():
    res = {"model": "glm-5.2", "shared": False, "layers": 20, "gpu": "H200", "date": "d", "role3_after": "all",
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
