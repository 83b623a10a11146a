"""The small shape reader: manifests, shape specs, clear errors."""
import pytest

from gcmoe_runtime.bench.shapes import load_manifest_shape, parse_shape_spec, resolve_model, shape_from_mapping


def test_reads_the_shipped_manifests_when_present():
    try:
        s = resolve_model("deepseek-v4.1-flash")
    except FileNotFoundError:
        pytest.skip("manifests/ not present")
    assert (s.hidden, s.intermediate, s.experts, s.top_k, s.shared_experts, s.shared_k_group) == (5120, 2304, 384, 6, 1, 32)


def test_mapping_forms(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("name: x\nmodel: {hidden: 512, intermediate: 256, experts: 16, top_k: 4,"
                 " shared_experts: {count: 1, k_group: 128}}\ntargets: [{capacity: 128}]\n")
    s = load_manifest_shape(p)
    assert (s.name, s.shared_experts, s.shared_k_group, s.capacity) == ("x", 1, 128, 128)
    flat = shape_from_mapping("y", {"H": 64, "I": 32, "E": 8, "k": 2})
    assert (flat.hidden, flat.shared_experts, flat.capacity) == (64, 0, 256)


def test_errors_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="'top_k' not found"):
        shape_from_mapping("m", {"model": {"hidden": 64, "intermediate": 32, "experts": 8}}, "f.yaml")
    with pytest.raises(ValueError, match="hidden=.*must be an integer"):
        shape_from_mapping("m", {"hidden": "64", "intermediate": 32, "experts": 8, "top_k": 2}, "f.yaml")
    with pytest.raises(ValueError, match="top_k=9 exceeds"):
        parse_shape_spec("m:H=64,I=32,E=8,k=9")
    bad = tmp_path / "b.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ValueError, match="malformed YAML"):
        load_manifest_shape(bad)
    with pytest.raises(FileNotFoundError, match="no-such"):
        resolve_model("no-such", manifest_dir=tmp_path)


def test_shape_spec():
    s = parse_shape_spec("dsv4:H=5120,I=2304,E=384,k=6,shared=1,kgroup=32")
    assert (s.name, s.hidden, s.experts, s.shared_k_group) == ("dsv4", 5120, 384, 32)
    with pytest.raises(ValueError, match="unknown key"):
        parse_shape_spec("m:H=64,X=1")
