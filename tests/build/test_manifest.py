"""Manifest schema: the shipped manifests load; every constraint fails with file, field, value and limit."""
import copy
import math
from pathlib import Path

import pytest
import yaml

from gcmoe_build.manifest import Manifest, ManifestError, load_manifest, manifest_from_data
from gcmoe_build.manifest import limits as L

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"

BASE = {
    "name": "unit",
    "model": {"hidden": 512, "intermediate": 256, "experts": 16, "top_k": 4,
              "shared_experts": {"count": 1, "k_group": 128}},
    "activation": {"kind": "swiglu", "alpha": 1.0, "clamp": 10.0, "fast_math": True},
    "targets": [{
        "arch": "sm_90a",
        "device": {"name": "H200", "sms": 132, "alignment": 8, "min_partition": 8},
        "ranks": [1, 2],
        "capacity": 64,
        "dispatch_sms_request": 4,
        "bm": "auto",
        "recipe": {"routed": "e4m3-fp32k128_x_mxfp4", "shared": "1x128x128"},
    }],
}


def with_(path, value, base=BASE):
    """A copy of ``base`` with the dotted ``path`` set to ``value`` (``None`` value + DELETE removes it)."""
    d = copy.deepcopy(base)
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    cur = d
    for p in parts[:-1]:
        cur = cur[p]
    if value is DELETE:
        del cur[parts[-1]]
    else:
        cur[parts[-1]] = value
    return d


DELETE = object()


def write(tmp_path, data, name="m.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def load_err(tmp_path, data) -> ManifestError:
    p = write(tmp_path, data)
    with pytest.raises(ManifestError) as ei:
        load_manifest(p)
    e = ei.value
    assert e.file == str(p) and str(p) in str(e)
    assert "\n" not in str(e)  # one line
    return e


def assert_problem(e: ManifestError, field, value, limit_part):
    hits = [p for p in e.problems if p.field == field]
    assert hits, f"no problem for {field}: {e}"
    p = hits[0]
    assert p.value == value or (isinstance(value, float) and math.isnan(value) and math.isnan(p.value))
    assert limit_part in p.limit, p.limit
    line = p.describe(e.file)
    assert field in line and limit_part in line and repr(value)[:20] in line
    assert p.line is not None and p.line > 0


# ------------------------------------------------------------------------ shipped manifests


@pytest.mark.parametrize("name, shape", [
    ("glm-5.2", (6144, 2048, 256, 8, 1, 128)),
    ("deepseek-v4.1-flash", (5120, 2304, 384, 6, 1, 32)),
    ("test-tiny", (512, 256, 16, 4, 1, 128)),
])
def test_shipped_manifests_load(name, shape):
    m = load_manifest(MANIFESTS / f"{name}.yaml")
    assert isinstance(m, Manifest) and m.name == name
    s = m.model
    assert (s.hidden, s.intermediate, s.experts, s.top_k, s.shared_experts.count, s.shared_experts.k_group) == shape
    assert m.activation.kind == "swiglu" and m.activation.alpha == 1.0 and m.activation.clamp == 10.0
    assert m.activation.fast_math is True
    (t,) = m.targets
    assert t.arch == "sm_90a" and t.device.sms == 132 and t.device.alignment == 8
    assert (t.partition.dispatch_sms, t.partition.compute_sms) == (4, 128)
    # test-tiny names the ladder without BM 80 (its comment: so that it still reaches a 384-thread build)
    assert t.bm_candidates == ((8, 16, 32, 48, 64) if name == "test-tiny" else (8, 16, 32, 48, 64, 80))
    assert t.recipe.routed == L.ROUTED_RECIPE_SM90
    assert L.SHARED_RECIPES[t.recipe.shared] == s.shared_experts.k_group
    if name != "test-tiny":
        assert t.capacity == 256 and t.ranks == [1, 2, 8] and m.selftest_kernels is False
    else:
        assert m.selftest_kernels is True


def test_base_is_valid_and_defaults():
    m = manifest_from_data(BASE)
    d = with_("targets.0.dispatch_sms_request", DELETE)
    d = with_("targets.0.bm", DELETE, d)
    m2 = manifest_from_data(d)
    assert m2.targets[0].dispatch_request == 4 and m2.targets[0].bm == "auto"
    assert m.selftest_kernels is False
    # Blackwell targets are accepted by the schema, with the SM100 recipe and default request 16
    bw = with_("targets.0", {**BASE["targets"][0], "arch": "sm_103a", "dispatch_sms_request": None,
                             "device": {"name": "B300", "sms": 148, "alignment": 8, "min_partition": 8},
                             "recipe": {"routed": "1x1x32", "shared": "1x128x128"}, "bm": [16, 240]})
    t = manifest_from_data(bw).targets[0]
    assert t.dispatch_request == 16 and (t.partition.dispatch_sms, t.partition.compute_sms) == (20, 128)
    assert t.bm_candidates == (16, 240)


# ------------------------------------------------------------------------ every constraint

CASES = [
    # (path, bad value, reported field, limit substring)
    ("model.hidden", 640, "model.hidden", "multiple of 256"),
    ("model.hidden", 0, "model.hidden", "multiple of 256"),
    ("model.intermediate", 4224, "model.intermediate", "<= 4096"),
    ("model.intermediate", 200, "model.intermediate", "multiple of 128"),
    ("model.intermediate", 384, "model.intermediate", "multiple of 256 for sm_90a"),
    ("model.top_k", 0, "model.top_k", ">= 1"),
    ("model.top_k", 17, "model.top_k", "<= experts (16)"),
    ("model.experts", 4096, "model.experts", "<= 2048"),
    ("model.experts", 0, "model.experts", ">= 1"),
    ("model.shared_experts.count", 29, "model.shared_experts.count", "top_k + count <= 32"),
    ("model.shared_experts.count", -1, "model.shared_experts.count", ">= 0"),
    ("model.shared_experts.k_group", 64, "model.shared_experts.k_group", "one of [32, 128]"),
    ("activation.alpha", 0.0, "activation.alpha", "finite number > 0"),
    ("activation.alpha", float("inf"), "activation.alpha", "finite number > 0"),
    ("activation.clamp", float("nan"), "activation.clamp", "finite number > 0"),
    ("activation.clamp", -10.0, "activation.clamp", "finite number > 0"),
    ("targets.0.ranks", [1, 3], "targets[0].ranks[1]", "a divisor of experts (16)"),
    ("targets.0.ranks", [1, 1], "targets[0].ranks[1]", "each rank count once"),
    ("targets.0.ranks", [0], "targets[0].ranks[0]", ">= 1"),
    ("targets.0.ranks", [], "targets[0].ranks", "at least one rank count"),
    ("targets.0.capacity", 0, "targets[0].capacity", "1 <= capacity <= 4096"),
    ("targets.0.capacity", 4097, "targets[0].capacity", "1 <= capacity <= 4096"),
    ("targets.0.dispatch_sms_request", 0, "targets[0].dispatch_sms_request", ">= 1"),
    ("targets.0.dispatch_sms_request", 132, "targets[0].dispatch_sms_request", "< device.sms (132)"),
    ("targets.0.dispatch_sms_request", 101, "targets[0].dispatch_sms_request", "compute_sms >= 32"),
    ("targets.0.dispatch_sms_request", 126, "targets[0].dispatch_sms_request", "compute_sms >= 8 (driver minimum"),
    ("targets.0.bm", [8, 96], "targets[0].bm[1]", "one of [8, 16, 32, 48, 64, 80] for sm_90a"),
    ("targets.0.bm", [16, 16], "targets[0].bm[1]", "each BM once"),
    ("targets.0.bm", [], "targets[0].bm", "non-empty subset"),
    ("targets.0.recipe.routed", "1x1x32", "targets[0].recipe.routed", "one of ['e4m3-fp32k128_x_mxfp4'] for sm_90a"),
    ("targets.0.recipe.shared", "1x1x32", "targets[0].recipe.shared", "model.shared_experts.k_group = 128"),
    ("targets.0.recipe.shared", "2x2x2", "targets[0].recipe.shared", "one of ['1x1x32', '1x128x128']"),
    ("targets.0.recipe.shared", None, "targets[0].recipe.shared", "one of ['1x1x32', '1x128x128']"),
    ("targets.0.device.sms", 0, "targets[0].device.sms", ">= 1"),
    ("targets.0.device.alignment", 0, "targets[0].device.alignment", ">= 1"),
    ("targets.0.device.min_partition", 0, "targets[0].device.min_partition", ">= 1"),
    ("targets.0.device.name", " ", "targets[0].device.name", "non-empty"),
    ("targets", [], "targets", "at least one target"),
    ("name", "bad name/..", "name", "[A-Za-z0-9._-]"),
]


@pytest.mark.parametrize("path, value, field, limit", CASES, ids=[f"{c[0]}={c[1]!r}" for c in CASES])
def test_constraint_errors(tmp_path, path, value, field, limit):
    e = load_err(tmp_path, with_(path, value))
    hits = [p for p in e.problems if p.field == field]
    assert hits, f"no problem for {field}: {e}"
    p = hits[0]
    assert limit in p.limit, p.limit
    msg = p.describe(e.file)
    assert field in msg and limit in msg and p.reason in msg and p.reason
    assert p.line and p.line > 0
    as_field = path.replace("targets.0", "targets[0]")
    if as_field == field:  # the value itself was reported (not one element of a list)
        assert p.value == value or (isinstance(value, float) and math.isnan(value) and math.isnan(p.value))
        assert repr(value)[:20] in msg


def test_top_level_attributes_name_first_problem(tmp_path):
    e = load_err(tmp_path, with_("targets.0.capacity", 5000))
    assert (e.field, e.value) == ("targets[0].capacity", 5000)
    assert "4096" in e.limit
    assert e.line == (tmp_path / "m.yaml").read_text().splitlines().index("  capacity: 5000") + 1
    assert "targets[0].capacity = 5000" in str(e) and "4096" in str(e) and str(tmp_path / "m.yaml") in str(e)


def test_large_rank_limits(tmp_path):
    d = with_("model.experts", 2048)
    d = with_("model.top_k", 8, d)
    e = load_err(tmp_path, with_("targets.0.ranks", [1, 2, 4, 128], d))
    assert_problem(e, "targets[0].ranks[0]", 1, "experts / P <= 512")
    assert_problem(e, "targets[0].ranks[1]", 2, "experts / P <= 512")
    assert not [p for p in e.problems if p.field == "targets[0].ranks[2]"]  # 2048/4 = 512 is fine
    assert_problem(e, "targets[0].ranks[3]", 128, "<= 72")
    ok = manifest_from_data(with_("targets.0.ranks", [4, 8, 64], d))
    assert ok.targets[0].ranks == [4, 8, 64]
    assert L.MAX_RANKS == 72


def test_no_shared_experts_rules(tmp_path):
    d = with_("model.shared_experts", {"count": 0})
    d = with_("targets.0.recipe", {"routed": "e4m3-fp32k128_x_mxfp4"}, d)
    assert manifest_from_data(d).model.shared_experts.count == 0
    e = load_err(tmp_path, with_("targets.0.recipe.shared", "1x1x32", d))
    assert_problem(e, "targets[0].recipe.shared", "1x1x32", "null when model.shared_experts.count is 0")
    e = load_err(tmp_path, with_("model.shared_experts.k_group", 32, d))
    assert_problem(e, "model.shared_experts.k_group", 32, "null when count is 0")
    # shared experts omitted entirely: count 0
    d2 = with_("model.shared_experts", DELETE, d)
    assert manifest_from_data(d2).model.shared_experts.count == 0


def test_arch_specific_recipe_and_bm(tmp_path):
    bw = with_("targets.0", {**BASE["targets"][0], "arch": "sm_100a",
                             "device": {"name": "B300", "sms": 148, "alignment": 8, "min_partition": 8},
                             "dispatch_sms_request": 16})
    e = load_err(tmp_path, bw)  # SM90 recipe and (auto) on Blackwell
    assert_problem(e, "targets[0].recipe.routed", "e4m3-fp32k128_x_mxfp4", "one of ['1x1x32'] for sm_100a")
    assert "sm90 recipe" in [p for p in e.problems if p.field == "targets[0].recipe.routed"][0].reason
    e = load_err(tmp_path, with_("targets.0.bm", [8], with_("targets.0.recipe.routed", "1x1x32", bw)))
    assert_problem(e, "targets[0].bm[0]", 8, "one of [16, 32, 64, 96, 128, 192, 240] for sm_100a")


@pytest.mark.parametrize("sms, alignment, req, limit", [
    (133, 1, 1, "dispatch_sms >= 2 after alignment"),  # 132 compute / 1 dispatch
    (133, 1, 2, "compute_sms an even number after alignment"),  # 131 compute
])
def test_partition_rules_in_manifest(tmp_path, sms, alignment, req, limit):
    d = with_("targets.0.device", {"name": "odd", "sms": sms, "alignment": alignment, "min_partition": 1})
    e = load_err(tmp_path, with_("targets.0.dispatch_sms_request", req, d))
    assert_problem(e, "targets[0].dispatch_sms_request", req, limit)


def test_duplicate_target(tmp_path):
    d = with_("targets", [BASE["targets"][0], BASE["targets"][0]])
    e = load_err(tmp_path, d)
    assert e.field == "targets[1]" and "distinct from targets[0]" in e.limit


def test_all_problems_reported_at_once(tmp_path):
    d = with_("model.hidden", 100)
    d = with_("targets.0.capacity", 0, d)
    d = with_("activation.alpha", -1.0, d)
    e = load_err(tmp_path, d)
    fields = {p.field for p in e.problems}
    assert {"model.hidden", "targets[0].capacity", "activation.alpha"} <= fields
    assert str(e).count(" | ") == len(e.problems) - 1


def test_manifest_object_cannot_bypass_constraints():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="model.hidden = 100"):
        Manifest.model_validate(with_("model.hidden", 100))
    m = manifest_from_data(BASE)
    with pytest.raises(ValidationError):  # frozen
        m.name = "other"


def test_k_interleave_needs_sm90_and_only_384_thread_tiles(tmp_path):
    from gcmoe_build.variants import enumerate_variants

    # the unit shape's small BMs are 256-thread tiles: refused, naming the field and the tiles
    e = load_err(tmp_path, with_("targets.0.k_interleave", True))
    p = [p for p in e.problems if p.field == "targets[0].k_interleave"][0]
    assert "256-thread role2 tile is reachable" in p.limit and "384-thread builds" in p.reason
    # a production shape (every reachable tile a 384-thread one): every role2 variant carries k_interleave, 1 where
    # it permutes W1's chunks itself, 2 from BM 48 on, where role1 (k_interleave 1 there) writes the rows interleaved
    prod = yaml.safe_load((MANIFESTS / "rank-share-glm-5.2-p8.yaml").read_text())
    on = manifest_from_data(with_("targets.0.k_interleave", True, prod))
    off = manifest_from_data(with_("targets.0.k_interleave", False, prod))  # shipped on since session 51
    r_on = [v for v in enumerate_variants(on) if v.role == "role2"]
    r_off = [v for v in enumerate_variants(off) if v.role == "role2"]
    assert len(r_on) == len(r_off)
    assert {v.params["bm"]: v.params["k_interleave"] for v in r_on} == {8: 1, 16: 1, 32: 1, 48: 2, 64: 2, 80: 2}
    assert all("k_interleave" not in v.params for v in r_off)  # the plain builds' params (and keys) unchanged
    r1_on = {v.params["bm"]: v.params.get("k_interleave") for v in enumerate_variants(on) if v.role == "role1"}
    assert r1_on == {8: None, 16: None, 32: None, 48: 1, 64: 1, 80: 1}
    assert all("k_interleave" not in v.params for v in enumerate_variants(off) if v.role == "role1")
    assert ({v for v in enumerate_variants(on) if v.role not in ("role1", "role2")}
            == {v for v in enumerate_variants(off) if v.role not in ("role1", "role2")})
    # Blackwell: no such layout
    bw = with_("targets.0", {**BASE["targets"][0], "arch": "sm_100a", "k_interleave": True,
                             "device": {"name": "B300", "sms": 148, "alignment": 8, "min_partition": 8},
                             "dispatch_sms_request": 16, "bm": [16], "recipe": {"routed": "1x1x32",
                                                                               "shared": "1x128x128"}})
    assert_problem(load_err(tmp_path, bw), "targets[0].k_interleave", True, "false for sm_100a")
