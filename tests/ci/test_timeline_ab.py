"""ci/timeline_ab.py: a role's A/B change is the ratio of the arms' mean durations per T, ``ab_rows`` tables the new
runs and ``arm_rows`` each arm against the old runs (the helpers behind the sessions' ``ab_table.py``)."""
import json

import pytest


def _run(tmp_path, name, role2_us):
    """A ``bench timeline`` folder whose role2 median duration at T is role2_us[T]."""
    d = tmp_path / name
    d.mkdir()
    pts = [{"tokens": t, "summary": {"roles": {"role2": {"dur_us": us}}}} for t, us in role2_us.items()]
    (d / "timeline.json").write_text(json.dumps({"models": [{"points": pts}]}))
    return d


def test_change_is_the_ratio_of_the_means(ci_tool):
    tl = ci_tool("timeline_ab")
    old, new = [{8: 100.0}, {8: 110.0}], [{8: 90.0}, {8: 100.0}]
    assert tl.change_pct(old, new, 8) == pytest.approx(100 * (95 / 105 - 1))


def test_arm_rows_table_each_arm_at_every_old_t(ci_tool, tmp_path):
    tl = ci_tool("timeline_ab")
    for name, us in (("o1", {16: 200.0, 32: 300.0}), ("o2", {16: 200.0, 32: 300.0}),
                     ("a1", {16: 190.0, 32: 303.0}), ("b1", {16: 220.0, 32: 300.0})):
        _run(tmp_path, name, us)
    rows, changes = tl.arm_rows(tmp_path, "case", ("o1", "o2"), [("a", ("a1",)), ("b", ("b1",))])
    assert rows == ["| case | a | 16 | 200.0 / 200.0 | 190.0 | -5.0 % |",
                    "| case | a | 32 | 300.0 / 300.0 | 303.0 | +1.0 % |",
                    "| case | b | 16 | 200.0 / 200.0 | 220.0 | +10.0 % |",
                    "| case | b | 32 | 300.0 / 300.0 | 300.0 | +0.0 % |"]
    assert [(a, t) for a, t, _ in changes] == [("a", 16), ("a", 32), ("b", 16), ("b", 32)]
    assert len(tl.ARM_TABLE_HEAD) == 2 and tl.ARM_TABLE_HEAD[0].count("|") == tl.ARM_TABLE_HEAD[1].count("|")


def test_ab_rows_table_new_against_old_at_every_old_t(ci_tool, tmp_path):
    tl = ci_tool("timeline_ab")
    for name, us in (("o1", {1: 50.0, 2: 80.0}), ("o2", {1: 52.0, 2: 80.0}), ("n1", {1: 49.0, 2: 76.0}),
                     ("n2", {1: 53.0, 2: 76.0})):
        _run(tmp_path, name, us)
    rows, changes = tl.ab_rows(tmp_path, "case", ("o1", "o2"), ("n1", "n2"))
    assert rows == ["| case | 1 | 50.0 / 52.0 | 49.0 / 53.0 | +0.0 % |",
                    "| case | 2 | 80.0 / 80.0 | 76.0 / 76.0 | -5.0 % |"]
    assert changes == [(1, pytest.approx(0.0)), (2, pytest.approx(-5.0))]
    assert tl.AB_TABLE_HEAD[0].count("|") == tl.AB_TABLE_HEAD[1].count("|") == rows[0].count("|")


def test_role_us_reads_the_named_model_of_a_run_of_several(ci_tool, tmp_path):
    tl = ci_tool("timeline_ab")
    d = tmp_path / "two"
    d.mkdir()
    model = lambda name, us: {"model": name, "points": [{"tokens": 4, "summary": {"roles": {"role2": {"dur_us": us}}}}]}  # noqa: E731
    (d / "timeline.json").write_text(json.dumps({"models": [model("a", 10.0), model("b", 20.0)]}))
    assert tl.role_us(d) == {4: 10.0} and tl.role_us(d, model="b") == {4: 20.0}
    with pytest.raises(KeyError, match="no model 'c'"):
        tl.role_us(d, model="c")


def _layer_run(tmp_path, name, by_t):
    """A ``bench timeline`` folder whose point T has role1 / role2 durations and span by_t[T] = (r1, r2, span)."""
    d = tmp_path / name
    d.mkdir()
    pts = [{"tokens": t, "summary": {"span_us": sp, "roles": {"role1": {"dur_us": r1}, "role2": {"dur_us": r2}}}}
           for t, (r1, r2, sp) in by_t.items()]
    (d / "timeline.json").write_text(json.dumps({"models": [{"points": pts}]}))


def test_role_us_reads_the_span(ci_tool, tmp_path):
    tl = ci_tool("timeline_ab")
    _layer_run(tmp_path, "r", {8: (10.0, 90.0, 101.0)})
    assert tl.role_us(tmp_path / "r", "span") == {8: 101.0} and tl.role_us(tmp_path / "r", "role1") == {8: 10.0}


def test_arms_table_changes_of_several_roles_against_a(ci_tool, tmp_path):
    tl = ci_tool("timeline_ab")
    for n, v in ((1, (10.0, 100.0, 110.0)), (4, (10.0, 100.0, 110.0)), (2, (11.0, 95.0, 106.0)),
                 (3, (12.0, 95.0, 106.0))):
        _layer_run(tmp_path, f"sh-{'A' if n in (1, 4) else 'B'}-{n}", {16: v})
    _layer_run(tmp_path, "p1-A-1", {16: (1.0, 2.0, 3.0)})  # a case whose B runs are missing
    _layer_run(tmp_path, "p1-A-4", {16: (1.0, 2.0, 3.0)})
    lines = tl.arms_table(tmp_path, [("share", "sh"), ("P1", "p1"), ("none", "zz")], {"A": (1, 4), "B": (2, 3)},
                          ("role2", "role1", "span"))
    assert lines[0] == "| case | T | A span µs | B role2 | B role1 | B span |"
    assert lines[1].count("|") == lines[0].count("|")
    assert lines[2:] == ["| share | 16 | 110.0 / 110.0 | -5.0 % | +15.0 % | -3.6 % |",
                         "| P1 | 16 | 3.0 / 3.0 | - | - | - |"]


def test_arms_table_against_another_base_arm(ci_tool, tmp_path):
    """``base="W"``: the back-to-back arm as the reference of two cold arms (session 48's ``s48-a.steps``)."""
    tl = ci_tool("timeline_ab")
    for name, span in (("r-W-1", 100.0), ("r-C-2", 108.0), ("r-R-3", 103.0), ("r-R-4", 105.0), ("r-C-5", 110.0),
                       ("r-W-6", 100.0)):
        _layer_run(tmp_path, name, {1: (1.0, 2.0, span)})
    lines = tl.arms_table(tmp_path, [("GLM", "r")], {"W": (1, 6), "C": (2, 5), "R": (3, 4)}, ("span",), base="W")
    assert lines[0] == "| case | T | W span µs | C span | R span |"
    assert lines[2:] == ["| GLM | 1 | 100.0 / 100.0 | +9.0 % | +4.0 % |"]
