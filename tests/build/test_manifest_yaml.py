"""Manifest reading: malformed YAML, duplicate/unknown/missing keys and wrong types are errors with a line."""
from pathlib import Path

import pytest

from gcmoe_build.manifest import ManifestError, load_manifest
from gcmoe_build.manifest.errors import MISSING

GOOD = (Path(__file__).resolve().parents[2] / "manifests" / "test-tiny.yaml").read_text()
#: test-tiny's BM line (an explicit list: the ladder without 80, manifests/test-tiny.yaml)
TINY_BM = "bm: [8, 16, 32, 48, 64]"


def load_text(tmp_path, text: str) -> ManifestError:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ManifestError) as ei:
        load_manifest(p)
    e = ei.value
    assert e.file == str(p) and str(p) in str(e) and "\n" not in str(e)
    return e


def line_no(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def replace(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


def test_good_text_loads(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text(GOOD)
    assert load_manifest(p).name == "test-tiny"


@pytest.mark.parametrize("text, line", [
    ("name: x\nmodel: [1, 2\n", 3),  # unclosed flow sequence: reported where the stream ends
    ("name: x\nmodel:\n  hidden: 1\n    intermediate: 2\n", 4),  # bad indentation
    ("name: x\n\tmodel: 1\n", 2),  # tab
    ("name: 'x\n", 2),
])
def test_malformed_yaml_has_line(tmp_path, text, line):
    e = load_text(tmp_path, text)
    assert e.limit == "well-formed YAML" and "malformed YAML" in e.reason
    assert e.line == line and f":{line}:" in str(e)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n", "~\n"])
def test_empty_manifest(tmp_path, text):
    e = load_text(tmp_path, text)
    assert "empty" in e.reason or "NoneType" in e.reason


def test_top_level_must_be_mapping(tmp_path):
    e = load_text(tmp_path, "- 1\n- 2\n")
    assert e.limit == "a YAML mapping at the top level" and "list" in e.reason


def test_multiple_documents_rejected(tmp_path):
    e = load_text(tmp_path, GOOD + "\n---\nname: other\n")
    assert "malformed YAML" in e.reason and "single document" in e.reason


def test_duplicate_key_names_both_lines(tmp_path):
    text = replace("  top_k: 4\n", "  top_k: 4\n  top_k: 8\n")
    e = load_text(tmp_path, text)
    assert e.field == "model.top_k" and e.limit == "each key once per mapping"
    first = line_no(text, "top_k: 4")
    assert e.line == first + 1 and f"first on line {first}" in e.reason


def test_duplicate_key_in_flow_mapping(tmp_path):
    text = replace("min_partition: 8}", "min_partition: 8, sms: 100}")
    e = load_text(tmp_path, text)
    assert e.field == "targets[0].device.sms" and "duplicate key" in e.reason


@pytest.mark.parametrize("old, new, field", [
    ("  top_k: 4\n", "  top_k: 4\n  topk: 4\n", "model.topk"),
    ("name: test-tiny\n", "name: test-tiny\nversion: 2\n", "version"),
    ("    capacity: 256", "    capacity: 256\n    capcity: 128", "targets[0].capcity"),
    ("min_partition: 8}", "min_partition: 8, smem: 228}", "targets[0].device.smem"),
    ("  fast_math: true\n", "  fast_math: true\n  beta: 2.0\n", "activation.beta"),
])
def test_unknown_keys(tmp_path, old, new, field):
    text = replace(old, new)
    e = load_text(tmp_path, text)
    assert e.field == field and e.reason == "unknown key"
    assert e.limit.startswith("one of the known keys [")
    assert e.line == line_no(text, field.rsplit(".", 1)[-1].split("]")[-1] + ":")


def test_unknown_key_lists_known_keys(tmp_path):
    e = load_text(tmp_path, replace("  top_k: 4\n", "  top_k: 4\n  topk: 4\n"))
    assert "'top_k'" in e.limit and "'hidden'" in e.limit


@pytest.mark.parametrize("old, new, field, value, expected", [
    ("hidden: 512", 'hidden: "512"', "model.hidden", "512", "an integer"),
    ("hidden: 512", "hidden: 512.0", "model.hidden", 512.0, "an integer"),
    ("hidden: 512", "hidden: true", "model.hidden", True, "an integer"),
    ("hidden: 512", "hidden: null", "model.hidden", None, "an integer"),
    ("alpha: 1.0", "alpha: '1.0'", "activation.alpha", "1.0", "a number"),
    ("alpha: 1.0", "alpha: true", "activation.alpha", True, "a number"),
    ("fast_math: true", "fast_math: 1", "activation.fast_math", 1, "true or false"),
    ("fast_math: true", "fast_math: yes please", "activation.fast_math", "yes please", "true or false"),
    ("name: test-tiny", "name: 5", "name", 5, "a string"),
    ("ranks: [1, 2]", "ranks: 2", "targets[0].ranks", 2, "a list"),
    ("ranks: [1, 2]", "ranks: [1, '2']", "targets[0].ranks[1]", "2", "an integer"),
    ("ranks: [1, 2]", "ranks: [1, 2.0]", "targets[0].ranks[1]", 2.0, "an integer"),
    (TINY_BM, "bm: fast", "targets[0].bm", "fast", "'auto' or a list of integers"),
    (TINY_BM, "bm: [8, true]", "targets[0].bm", [8, True], "'auto' or a list of integers"),
    (TINY_BM, "bm: 16", "targets[0].bm", 16, "'auto' or a list of integers"),
    ("arch: sm_90a", "arch: sm_80", "targets[0].arch", "sm_80", "one of 'sm_90a', 'sm_100a' or 'sm_103a'"),
    ("kind: swiglu", "kind: gelu", "activation.kind", "gelu", "one of 'swiglu'"),
    ("selftest_kernels: true", "selftest_kernels: 'true'", "selftest_kernels", "true", "true or false"),
])
def test_wrong_types(tmp_path, old, new, field, value, expected):
    text = replace(old, new)
    e = load_text(tmp_path, text)
    hits = [p for p in e.problems if p.field == field]
    assert hits, str(e)
    p = hits[0]
    assert p.value == value and type(p.value) is type(value)
    assert p.limit == expected
    assert p.line == line_no(text, new.split(":")[0].strip() + ":")


def test_mapping_where_list_and_list_where_mapping(tmp_path):
    e = load_text(tmp_path, replace("  kind: swiglu\n  alpha: 1.0\n  clamp: 10.0\n  fast_math: true\n",
                                    "  - swiglu\n"))
    assert e.field == "activation" and e.limit == "a mapping"
    e = load_text(tmp_path, replace("targets:\n", "targets:\n  x: 1\nold_targets:\n"))
    assert any(p.field == "targets" and p.limit == "a list" for p in e.problems)


@pytest.mark.parametrize("key, parent", [("hidden", "model"), ("capacity", "targets[0]"), ("alpha", "activation")])
def test_missing_keys(tmp_path, key, parent):
    lines = [ln for ln in GOOD.splitlines() if not ln.strip().startswith(f"{key}:")]
    e = load_text(tmp_path, "\n".join(lines) + "\n")
    assert e.field == f"{parent}.{key}" and e.value is MISSING and e.limit == "a required key"
    assert e.line is not None


def test_merge_keys_rejected(tmp_path):
    text = "base: &b {hidden: 512}\n" + GOOD.replace("model:\n", "model:\n  <<: *b\n", 1)
    e = load_text(tmp_path, text)
    assert "merge" in e.limit


def test_non_string_key_rejected(tmp_path):
    e = load_text(tmp_path, replace("  top_k: 4\n", "  top_k: 4\n  8: 4\n"))
    assert e.limit == "string keys" and "int" in e.reason


def test_python_tags_rejected(tmp_path):
    e = load_text(tmp_path, replace("name: test-tiny", "name: !!python/object:os.system echo"))
    assert "malformed YAML" in e.reason
    e = load_text(tmp_path, replace("capacity: 256", "capacity: !!set {1: null}"))
    assert e.limit == "no explicit YAML tags"


def test_recursive_alias_rejected(tmp_path):
    e = load_text(tmp_path, replace("ranks: [1, 2]", "ranks: &r [1, *r]"))
    assert "recursive" in e.reason


def test_unreadable_and_non_utf8(tmp_path):
    with pytest.raises(ManifestError) as ei:
        load_manifest(tmp_path / "nope.yaml")
    assert ei.value.limit == "a readable file"
    p = tmp_path / "latin1.yaml"
    p.write_bytes(GOOD.replace("# A small", "# \xe9 small").encode("latin-1"))
    with pytest.raises(ManifestError) as ei:
        load_manifest(p)
    assert ei.value.limit == "UTF-8 text"


def test_values_never_silently_coerced(tmp_path):
    # YAML 1.1 spells booleans many ways; strictness keeps "on" from becoming a count of 1
    e = load_text(tmp_path, replace("count: 1", "count: on"))
    assert e.field == "model.shared_experts.count" and e.value is True and e.limit == "an integer"


def test_missing_colon_names_both_lines(tmp_path):
    text = replace("    capacity: 256", "    capacity 256")
    e = load_text(tmp_path, text)
    key_line = line_no(text, "capacity 256")
    assert e.line in (key_line, key_line + 1)
    assert f"started on line {key_line}" in e.reason or e.line == key_line
