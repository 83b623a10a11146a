"""ci/kernel_ab.py: a dev variant against its base (the name with the suffix swapped), the mean W1 / W2 time over
every run of each, per shape, tokens per expert and BM; a variant whose base was not measured is skipped."""
import json


def _run(path, rows):
    path.write_text(json.dumps({"rows": [dict(shape="glm52", variant=v, tokens_per_expert=m, bm=8, w1_us=w1,
                                              w2_us=w2) for v, m, w1, w2 in rows]}))
    return str(path)


def test_new_against_base_pooled_over_runs(ci_tool, tmp_path, capsys):
    tool = ci_tool("kernel_ab")
    a = _run(tmp_path / "a.json", [("_ppkef", 1, 100.0, 60.0), ("_ppks", 1, 90.0, 66.0), ("_pp2ks", 1, 1.0, 1.0)])
    b = _run(tmp_path / "b.json", [("_ppkef", 1, 110.0, 60.0), ("_ppks", 1, 99.0, 66.0)])
    rows = tool.pairs([a, b], "ks", "kef")
    assert rows == [("glm52", "_ppks", 1, 8, (105.0, 94.5), (60.0, 66.0))]  # _pp2kef never ran: no row
    tool.main([f"{a},{b}", "ks", "kef"])
    out = capsys.readouterr().out
    assert "-10.0%" in out and "+10.0%" in out


def test_shares_pool_the_runs(ci_tool, tmp_path):
    """``shares`` (what ``--plot`` draws): each variant's mean W1 / W2 share of its run's read bandwidth per point."""
    tool = ci_tool("kernel_ab")
    rows = lambda w1, w2: {"rows": [dict(shape="glm52", variant="_pp2ksa", tokens_per_expert=16, bm=16,  # noqa: E731
                                         w1_us=1.0, w2_us=1.0, w1_frac_bw=w1, w2_frac_bw=w2)]}
    (tmp_path / "a.json").write_text(json.dumps(rows(0.8, 0.7)))
    (tmp_path / "b.json").write_text(json.dumps(rows(0.9, 0.6)))
    sh = tool.shares([str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert list(sh) == [("glm52", "_pp2ksa", 16, 16)]
    w1, w2 = sh[("glm52", "_pp2ksa", 16, 16)]
    assert abs(w1 - 0.85) < 1e-12 and abs(w2 - 0.65) < 1e-12


def test_old_runs_give_the_bases(ci_tool, tmp_path, capsys):
    """``--old-runs``: one build across two trees — the bases are the same names measured on the old tree's cubins,
    never the new runs' own rows."""
    tool = ci_tool("kernel_ab")
    new = _run(tmp_path / "new.json", [("_ppksa", 1, 90.0, 60.0), ("_ppksaf", 1, 80.0, 60.0)])
    old = _run(tmp_path / "old.json", [("_ppksa", 1, 100.0, 66.0)])
    assert tool.pairs([new], "ksa", "ksa", [old]) == [("glm52", "_ppksa", 1, 8, (100.0, 90.0), (66.0, 60.0))]
    assert tool.pairs([new], "ksaf", "ksa", [old]) == [("glm52", "_ppksaf", 1, 8, (100.0, 80.0), (66.0, 60.0))]
    tool.main([new, "ksaf", "ksa", "--old-runs", old])
    assert "-20.0%" in capsys.readouterr().out
