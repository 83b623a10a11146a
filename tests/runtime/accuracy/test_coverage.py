"""The accuracy coverage table: ranks merged per (model, P, routed/shared, bundle build), failures and gaps named."""
import json

from gcmoe_runtime.accuracy.coverage import coverage_rows, load_documents, main, markdown


def _doc(name, world, shared, rank, passed=True, cos=0.99995, build="aaaa", tile=None):
    cats = {"boundary": {"cases": 23, "cases_passed": 23 if passed else 22, "min_cos_impl_vs_ref": cos},
            "asymmetric": {"cases": 15, "cases_passed": 15, "min_cos_impl_vs_ref": 0.99999}}
    return {"config": {"name": name, "world": world, "shared_experts": int(shared)}, "ranks": [rank],
            "summary": {"categories": cats, "rank_cases": 38, "rank_cases_passed": 38 if passed else 37},
            "bundle": f"{name}-sm90a.gcmoe", "bundle_top_hash": build, "forced_tile": tile}


def _write(tmp_path, docs):
    for i, d in enumerate(docs):
        (tmp_path / f"d{i}.json").write_text(json.dumps(d))
    (tmp_path / "robust.json").write_text(json.dumps({"replays": 10}))  # not an accuracy document: ignored


def test_ranks_merge_and_builds_stay_apart(tmp_path):
    _write(tmp_path, [_doc("glm-5.2", 2, True, 0), _doc("glm-5.2", 2, True, 1, cos=0.9999),
                      _doc("glm-5.2", 2, True, 0, build="bbbb"),  # another kernel build: its own row, rank 1 missing
                      _doc("test-tiny", 1, False, 0, tile=[8, 256])])
    rows = coverage_rows(load_documents([str(tmp_path)]))
    got = {(r["model"], r["build"]): r for r in rows}
    assert got[("glm-5.2", "aaaa")]["status"] == "pass" and got[("glm-5.2", "aaaa")]["min_cos"] == 0.9999
    assert got[("glm-5.2", "bbbb")]["status"] == "incomplete"
    assert got[("test-tiny", "aaaa")]["status"] == "pass" and got[("test-tiny", "aaaa")]["tiles"] == {"8x256"}
    md = markdown(rows)
    assert "| glm-5.2 | 2 | routed + shared | pass | 0,1 | 0.999900 | heuristic | `aaaa` |" in md


def test_a_failed_rank_fails_the_row_and_the_exit_code(tmp_path, capsys):
    _write(tmp_path, [_doc("test-tiny", 2, False, 0), _doc("test-tiny", 2, False, 1, passed=False, tile=[8, 256])])
    assert main([str(tmp_path)]) == 1
    assert "| test-tiny | 2 | routed | FAIL | 0 |" in capsys.readouterr().out


def test_nothing_to_read(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no accuracy documents" in capsys.readouterr().err
