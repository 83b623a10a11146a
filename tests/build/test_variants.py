"""Role variants: complete enumeration, stable keys, lookup and listing."""
import copy
import json
import os
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gcmoe_build.manifest import load_manifest, manifest_from_data
from gcmoe_build.variants import (
    MODEL_ROLES,
    SELFTEST_ROLES,
    FrozenParams,
    Variant,
    enumerate_variants,
    find_variant,
    format_variant_table,
)
from gcmoe_runtime.artifacts.record import canonical_json, sha256_hex
from gcmoe_runtime.heuristics import choose_shared_bm, choose_tile

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ["test-tiny", "glm-5.2", "deepseek-v4.1-flash"]
ID, SRC = "a" * 64, "b" * 64


@pytest.fixture(scope="module")
def manifests():
    return {n: load_manifest(ROOT / "manifests" / f"{n}.yaml") for n in SHIPPED}


@pytest.fixture(scope="module")
def variants(manifests):
    return {n: enumerate_variants(m) for n, m in manifests.items()}


def manifest_tile(m, ranks: int, tokens: int):
    """The tile the runtime picks for ``tokens`` per rank at ``ranks``: the heuristic over the manifest's BM list."""
    s, (t,) = m.model, m.targets
    return choose_tile(t.arch, tokens, ranks=ranks, top_k=s.top_k, experts=s.experts, hidden=s.hidden,
                       intermediate=s.intermediate, compute_sms=t.partition.compute_sms, candidates=t.bm_candidates)


def test_counts_of_shipped_manifests(variants):
    counts = {n: Counter(v.role for v in vs) for n, vs in variants.items()}
    # GLM-5.2 on H200, P in {1,2,8}: role2 picks BM {8,16} / {8..32} / {8..64}, always 384 threads, and BM 8 at
    # one and at two CTAs per SM (heuristics.sm90_ctas_per_sm) at P = 2 and 8; at P = 1 only at two (from T = 1 since
    # session 21's W1 split-K), with the W1 split-K code (T = 1, heuristics.sm90_w1_split) and without (session 22);
    # role3 per P twice: with the shared lane and routed-only (shared_experts 0); since session 29 BM 48 at P = 8
    # (GLM-5.2 T = 115-173 with session 33's expected-cost rule; DSV-4.1-Flash T >= 228 instead of BM 64); since
    # session 31 BM 80 at P = 8 (GLM-5.2 T >= 219: 65-80 tokens per local expert in one block; DSV-4.1-Flash never)
    assert counts["glm-5.2"] == {"role1": 11, "role2": 14, "role3": 6, "role4": 4}
    # DSV-4.1-Flash: since session 33 (the BM of least expected cost) BM 16 at P = 1 too (T >= 233)
    assert counts["deepseek-v4.1-flash"] == {"role1": 8, "role2": 11, "role3": 6, "role4": 4}
    # test-tiny, P in {1,2}: BM 8..64 (and 48) with 256 threads plus BM 64 with 384 threads, per P; 4 self-tests
    assert counts["test-tiny"] == {"role1": 10, "role2": 12, "role3": 4, "role4": 4,
                                   **{r: 1 for r in SELFTEST_ROLES}}
    for n, vs in variants.items():
        assert len(set(vs)) == len(vs), f"{n}: duplicates"


def test_every_token_count_maps_to_a_compiled_variant(manifests, variants):
    """What the runtime does per call: heuristic -> (bm, threads) -> the role1/role2/role4 variants exist."""
    for n, m in manifests.items():
        vs = variants[n]
        s, (t,) = m.model, m.targets
        for P in t.ranks:
            for T in range(0, t.capacity + 1):
                c = manifest_tile(m, P, T)
                find_variant(vs, "role2", arch=t.arch, ranks=P, bm=c.bm, threads=c.threads, ctas_per_sm=c.ctas_per_sm,
                             w1_split=c.w1_split)
                find_variant(vs, "role1", arch=t.arch, ranks=P, bm=c.bm)
            for sh in {0, s.shared_experts.count}:  # routed-only and with the shared lane
                find_variant(vs, "role3", ranks=P, shared_experts=sh)
        for T in range(1, t.capacity + 1):
            find_variant(vs, "role4", bm=choose_shared_bm(T))


def test_nothing_unreachable(manifests, variants):
    """Every enumerated BM/thread variant is picked for some T (no dead kernels)."""
    for n, m in manifests.items():
        (t,) = m.targets
        picked = set()
        for P in t.ranks:
            for T in range(1, t.capacity + 1):
                c = manifest_tile(m, P, T)
                picked.add((P, c.bm, c.threads))
        got = {(v.params["ranks"], v.params["bm"], v.params["threads"]) for v in variants[n] if v.role == "role2"}
        assert got == picked


def test_params_per_role(variants):
    vs = variants["test-tiny"]
    part = {"dispatch_sms": 4, "compute_sms": 128}
    act = {"activation": "swiglu", "act_alpha": 1.0, "act_clamp": 10.0, "act_fast_math": True}
    shape = {"hidden": 512, "experts": 16, "top_k": 4, "capacity": 256}
    r1 = find_variant(vs, "role1", ranks=2, bm=16)
    assert dict(r1.params) == {**part, **shape, "ranks": 2, "bm": 16, "recipe_routed": "e4m3-fp32k128_x_mxfp4"}
    r2 = find_variant(vs, "role2", ranks=1, bm=64, threads=384)
    assert dict(r2.params) == {**part, **shape, **act, "ranks": 1, "bm": 64, "threads": 384, "intermediate": 256,
                               "recipe_routed": "e4m3-fp32k128_x_mxfp4", "shared_experts": 1, "ctas_per_sm": 1,
                               "w1_split": 1, "epilogue_wg": 1}  # the one-CTA BM 64 tile: heuristics.sm90_epilogue_wg
    r3 = find_variant(vs, "role3", ranks=1, shared_experts=1)
    assert dict(r3.params) == {**part, **shape, "ranks": 1, "shared_experts": 1}
    assert dict(find_variant(vs, "role3", ranks=1, shared_experts=0).params) == {**part, **shape, "ranks": 1,
                                                                                "shared_experts": 0}
    r4 = find_variant(vs, "role4", bm=32)
    assert dict(r4.params) == {**part, **act, "hidden": 512, "intermediate": 256, "top_k": 4, "capacity": 256,
                               "shared_experts": 1, "recipe_shared": "1x128x128", "bm": 32}
    for role in SELFTEST_ROLES:
        assert dict(find_variant(vs, role).params) == part
    for v in vs:
        assert list(v.params) == sorted(v.params)
        assert json.loads(json.dumps(v.params)) == dict(v.params)
        assert v.manifest == "test-tiny" and v.arch == "sm_90a"
        for val in v.params.values():  # no host paths, addresses or times can hide in a scalar string
            assert not (isinstance(val, str) and ("/" in val or "\\" in val))


def test_epilogue_warpgroup_only_where_asked(manifests, monkeypatch):
    """``heuristics.SM90_EPILOGUE_WG_BM`` (64 as shipped since session 60): exactly the one-CTA 384-thread role2 tiles
    of that BM carry ``epilogue_wg = 1``; at 0 no variant has it and nothing else changes."""
    import gcmoe_runtime.heuristics as h

    marked = enumerate_variants(manifests["glm-5.2"])
    with_wg = [v for v in marked if "epilogue_wg" in v.params]
    assert h.SM90_EPILOGUE_WG_BM == 64 and with_wg
    assert all(v.role == "role2" and v.params["bm"] == 64 and v.params["threads"] == 384
               and v.params["ctas_per_sm"] == 1 and v.params["epilogue_wg"] == 1 for v in with_wg)
    assert not [v for v in marked if v.role == "role2" and v.params["bm"] == 64 and v.params["threads"] == 384
                and v.params["ctas_per_sm"] == 1 and "epilogue_wg" not in v.params]
    monkeypatch.setattr(h, "SM90_EPILOGUE_WG_BM", 0)
    plain = enumerate_variants(manifests["glm-5.2"])
    assert not any("epilogue_wg" in v.params for v in plain)
    unmarked = sorted(canonical_json({k: x for k, x in v.params.items() if k != "epilogue_wg"}) for v in marked)
    assert unmarked == sorted(canonical_json(dict(v.params)) for v in plain)


def test_no_role4_or_selftests_unless_asked(manifests):
    d = manifests["test-tiny"].model_dump()
    d["model"]["shared_experts"] = {"count": 0, "k_group": None}
    d["targets"][0]["recipe"]["shared"] = None
    d["selftest_kernels"] = False
    vs = enumerate_variants(manifest_from_data(d))
    roles = {v.role for v in vs}
    assert roles == {"role1", "role2", "role3"}
    assert all(v.params.get("shared_experts", 0) == 0 for v in vs)


def test_blackwell_target_variants(manifests):
    d = manifests["glm-5.2"].model_dump()
    d["targets"][0].update(arch="sm_103a", dispatch_sms_request=16, bm="auto",
                           device={"name": "B300", "sms": 148, "alignment": 8, "min_partition": 8},
                           recipe={"routed": "1x1x32", "shared": "1x128x128"},
                           k_interleave=False)  # the SM90 decode's layout (set in the shipped SM90 manifest)
    vs = enumerate_variants(manifest_from_data(d))
    assert {v.role for v in vs} == {"role1", "role2", "role3"}  # shared experts fused into role2
    for v in vs:
        assert v.arch == "sm_103a" and (v.params["dispatch_sms"], v.params["compute_sms"]) == (20, 128)
    r2 = [v for v in vs if v.role == "role2"]
    assert all(v.params["threads"] == 384 and v.params["recipe_shared"] == "1x128x128" for v in r2)
    assert {v.params["bm"] for v in r2} <= {16, 32, 64, 96, 128, 192, 240}


def test_order_is_stable_and_independent_of_rank_order(manifests):
    m = manifests["glm-5.2"]
    d = m.model_dump()
    d["targets"][0]["ranks"] = [8, 1, 2]
    assert enumerate_variants(manifest_from_data(d)) == enumerate_variants(m)
    assert [v.key(ID, SRC) for v in enumerate_variants(m)] == [v.key(ID, SRC) for v in enumerate_variants(m)]


def test_integer_alpha_gives_the_same_variants(manifests):
    d = manifests["test-tiny"].model_dump()
    d["activation"].update(alpha=1, clamp=10)  # YAML `alpha: 1` is an int; the kernel constant is the same
    m = manifest_from_data(d)
    assert [v.key(ID, SRC) for v in enumerate_variants(m)] == \
        [v.key(ID, SRC) for v in enumerate_variants(manifests["test-tiny"])]


def test_dedup_across_targets(manifests):
    d = manifests["test-tiny"].model_dump()
    t2 = copy.deepcopy(d["targets"][0])
    t2["device"]["name"] = "H200-b"  # same geometry under another name: the same kernels
    d["targets"].append(t2)
    assert enumerate_variants(manifest_from_data(d)) == enumerate_variants(manifests["test-tiny"])


# ------------------------------------------------------------------------ keys


def test_key_definition(variants):
    v = variants["test-tiny"][0]
    want = sha256_hex(canonical_json({"identity": ID, "source": SRC, "role": v.role, "arch": v.arch,
                                      "params": dict(v.params)}))
    assert v.key(ID, SRC) == want and len(want) == 64


def test_key_changes_with_every_input(variants):
    for v in variants["test-tiny"] + variants["glm-5.2"]:
        k = v.key(ID, SRC)
        assert v.key("c" * 64, SRC) != k and v.key(ID, "d" * 64) != k
        assert Variant(v.role + "x", v.arch, v.params).key(ID, SRC) != k
        assert Variant(v.role, "sm_100a", v.params).key(ID, SRC) != k
        for name, val in v.params.items():
            changed = (not val) if isinstance(val, bool) else (val + "x" if isinstance(val, str) else val + 1)
            other = Variant(v.role, v.arch, {**v.params, name: changed})
            assert other.key(ID, SRC) != k, name
            assert other != v
        extra = Variant(v.role, v.arch, {**v.params, "new_option": 0})
        assert extra.key(ID, SRC) != k
        # the manifest name is for messages only: it does not change the key or equality
        renamed = Variant(v.role, v.arch, v.params, manifest="elsewhere")
        assert renamed.key(ID, SRC) == k and renamed == v and hash(renamed) == hash(v)
    keys = [v.key(ID, SRC) for n in SHIPPED for v in variants[n]]
    assert len(keys) == len(set(keys))


def test_key_stable_across_processes(variants):
    code = (
        "import json, sys\n"
        "from gcmoe_build.manifest import load_manifest\n"
        "from gcmoe_build.variants import enumerate_variants\n"
        f"out = {{n: [v.key({ID!r}, {SRC!r}) for v in enumerate_variants(load_manifest('manifests/' + n + '.yaml'))]"
        f" for n in {SHIPPED!r}}}\n"
        "print(json.dumps(out))\n"
    )
    here = {n: [v.key(ID, SRC) for v in variants[n]] for n in SHIPPED}
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == here


def test_key_rejects_empty_identity(variants):
    v = variants["test-tiny"][0]
    with pytest.raises(ValueError, match="identity_digest"):
        v.key("", SRC)
    with pytest.raises(ValueError, match="source_hash"):
        v.key(ID, None)


def test_key_pinned():
    """A fixed variant's key: any change to the key derivation shows up here."""
    v = Variant("role3", "sm_90a", {"ranks": 2, "hidden": 512, "bm": 8})
    assert v.key(ID, SRC) == sha256_hex(
        b'{"arch":"sm_90a","identity":"' + ID.encode() + b'","params":{"bm":8,"hidden":512,"ranks":2},'
        b'"role":"role3","source":"' + SRC.encode() + b'"}')


# ------------------------------------------------------------------------ the Variant object


def test_variant_is_frozen_hashable_picklable(variants):
    v = variants["test-tiny"][3]
    with pytest.raises(Exception):
        v.role = "x"
    with pytest.raises(TypeError):
        v.params["bm"] = 1
    with pytest.raises(TypeError):
        v.params.update(bm=1)
    with pytest.raises(TypeError):
        del v.params["bm"]
    assert {v: 1}[Variant(v.role, v.arch, dict(v.params))] == 1
    w = pickle.loads(pickle.dumps(v))
    assert w == v and hash(w) == hash(v) and isinstance(w.params, FrozenParams) and w.manifest == v.manifest


def test_params_must_be_json_scalars():
    with pytest.raises(TypeError):
        Variant("role1", "sm_90a", {"x": [1, 2]})
    with pytest.raises(TypeError):
        Variant("role1", "sm_90a", {1: 2})
    with pytest.raises(ValueError):
        Variant("role1", "sm_90a", {"x": float("nan")})


# ------------------------------------------------------------------------ lookup and listing


def test_find_variant_errors(variants):
    vs = variants["glm-5.2"]
    with pytest.raises(LookupError, match=r"ranks in \{1, 2, 8\}.*glm-5.2"):
        find_variant(vs, "role2", ranks=4, bm=8)
    with pytest.raises(LookupError, match="narrow it with one of \\['bm', 'ctas_per_sm', 'epilogue_wg', 'k_interleave'\\]"):
        find_variant(vs, "role2", ranks=8)
    with pytest.raises(LookupError, match="roles present"):
        find_variant(vs, "selftest_tma_peer")
    with pytest.raises(LookupError):
        find_variant(vs, "role2", arch="sm_100a", ranks=8, bm=8)
    assert find_variant(vs, "role2", arch="sm_90a", ranks=8, bm=64).params["threads"] == 384


def test_format_variant_table(variants):
    vs = variants["test-tiny"]
    table = format_variant_table(vs)
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["ROLE", "KIND", "ARCH"]
    assert len(lines) == len(vs) + 2 and lines[-1] == f"{len(vs)} variant(s)"
    assert "selftest_tma_peer" in table and "4/128" in table and "recipe_shared=1x128x128" in table
    keyed = format_variant_table(vs, {v: v.key(ID, SRC) for v in vs})
    assert keyed.splitlines()[0].startswith("KEY")
    assert all(ln.startswith(vs[i].key(ID, SRC)[:16]) for i, ln in enumerate(keyed.splitlines()[1:-1]))
    assert format_variant_table([]) .endswith("0 variant(s)")


def test_roles_known(variants):
    for vs in variants.values():
        assert {v.role for v in vs} <= set(MODEL_ROLES) | set(SELFTEST_ROLES)
