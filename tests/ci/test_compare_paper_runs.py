"""ci/compare_paper_runs.py's command line: per configuration and T, the older run's and the new run's gc-moe latency,
the change and the new run's (a) / gc-moe ratio, written to compare.md; a pair without results is refused by name."""
import json

import pytest


def _sweep(folder, lat, serial):
    folder.mkdir(parents=True)
    pts = [{"T": t, "impls": {"gc-moe": {"status": "ok", "latency_us": us},
                              "gc-moe-serial": {"status": "ok", "latency_us": serial[t]}}} for t, us in lat.items()]
    (folder / "results.json").write_text(json.dumps({"models": [{"shape": {"name": "glm"}, "points": pts}]}))


def test_cli_writes_the_change_per_point(ci_tool, tmp_path, monkeypatch):
    tool = ci_tool("compare_paper_runs")
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # table only: no plot dependency here
    _sweep(tmp_path / "new" / "paper-glm-p2-routed", {1: 90.0, 8: 300.0}, {1: 99.0, 8: 330.0})
    _sweep(tmp_path / "old" / "paper-glm-p2-routed", {1: 100.0, 8: 300.0}, {1: 1.0, 8: 1.0})
    assert tool.main([str(tmp_path / "new"), "paper-glm-p2-routed=../old/paper-glm-p2-routed",
                      "--old-label", "s13", "--new-label", "s15", "--title", "t"]) == 0
    table = (tmp_path / "new" / "compare.md").read_text()
    assert "| glm-p2-routed | 1 | 100.0 | 90.0 | -10.0 % | 1.100 |" in table
    assert "| glm-p2-routed | 8 | 300.0 | 300.0 | +0.0 % | 1.100 |" in table


def test_cli_refuses_a_pair_without_results(ci_tool, tmp_path, capsys):
    tool = ci_tool("compare_paper_runs")
    _sweep(tmp_path / "new" / "cfg", {1: 1.0}, {1: 1.0})
    with pytest.raises(SystemExit):
        tool.main([str(tmp_path / "new"), "cfg=../missing", "--old-label", "a", "--new-label", "b", "--title", "t"])
    assert "cfg=../missing" in capsys.readouterr().err
