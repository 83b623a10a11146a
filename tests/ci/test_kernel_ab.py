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
