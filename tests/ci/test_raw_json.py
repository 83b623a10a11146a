"""ci/raw_json.py: a raw result reads the same from ``name.json`` and from its archived ``name.json.gz``; a missing
one is named with both paths."""
import gzip
import json

import pytest


def test_plain_and_archived_read_the_same(ci_tool, tmp_path):
    raw = ci_tool("raw_json")
    doc = {"models": [{"points": [1, 2]}]}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(doc))
    (tmp_path / "b").mkdir()
    with gzip.open(tmp_path / "b" / "results.json.gz", "wt") as f:
        json.dump(doc, f)
    assert raw.load_json(tmp_path / "a" / "results.json") == doc
    assert raw.load_json(tmp_path / "b" / "results.json") == doc
    assert raw.json_exists(tmp_path / "b" / "results.json")
    assert not raw.json_exists(tmp_path / "c" / "results.json")


def test_missing_names_both_paths(ci_tool, tmp_path):
    raw = ci_tool("raw_json")
    with pytest.raises(FileNotFoundError, match=r"results\.json\.gz"):
        raw.load_json(tmp_path / "results.json")
