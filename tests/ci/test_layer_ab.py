"""ci/layer_ab.py: the change of a layer A/B is the ratio of the arms' mean latencies per (model, T), over the points
every run measured (the tool behind the sessions' layer A/B tables and plots)."""
import json


def _run(tmp_path, name, lat, skip=()):
    """A sweep folder whose gc-moe latency at (model, T) is lat[(model, T)]; points in ``skip`` did not run."""
    models = {}
    for (m, t), us in lat.items():
        ok = (m, t) not in skip
        models.setdefault(m, []).append({"T": t, "impls": {"gc-moe": {"status": "ok" if ok else "not measured",
                                                                      "latency_us": us if ok else None}}})
    d = tmp_path / name
    d.mkdir()
    (d / "results.json").write_text(json.dumps(
        {"models": [{"shape": {"name": m}, "points": pts} for m, pts in models.items()]}))
    return d


def test_ratio_of_the_means_over_common_points(ci_tool, tmp_path, capsys):
    tool = ci_tool("layer_ab")
    a = _run(tmp_path, "old", {("glm", 1): 100.0, ("glm", 8): 300.0})
    b = _run(tmp_path, "oldb", {("glm", 1): 110.0, ("glm", 8): 310.0})
    c = _run(tmp_path, "new", {("glm", 1): 84.0, ("glm", 8): 290.0}, skip={("glm", 8)})
    r = tool.ratio([a, b], [c])
    assert set(r) == {("glm", 1)} and abs(r[("glm", 1)] - 84.0 / 105.0) < 1e-12
    tool.main([f"{a},{b}", str(c)])
    assert "-20.0%" in capsys.readouterr().out
