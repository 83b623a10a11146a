"""`gcmoe-build` CLI.

* Fast tests of inspect / verify / bad input over a store filled by the fake chain.
* One end-to-end module fixture with the real chain on manifests/test-tiny.yaml, each command a real
  `gcmoe-build` process: compile (cold, then warm) -> ls -> inspect -> bundle (twice: byte-identical)
  -> verify -> audit; then damage the bundle.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gcmoe_runtime.artifacts.bundle import open_bundle, write_bundle
from gcmoe_runtime.artifacts.store import Store

from gcmoe_build import pipeline
from gcmoe_build.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from fake_backend import FakeBackend, write_manifest  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "manifests" / "test-tiny.yaml"


def cli(*args: str):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    return result


# --------------------------------------------------------------------------------------------
# fast: fake-filled store
# --------------------------------------------------------------------------------------------
@pytest.fixture
def fake_store(tmp_path):
    m = write_manifest(tmp_path / "tiny.json", [{"role": "role1", "BM": 64}, {"role": "role2", "BM": 64}])
    store = Store(tmp_path / "store")
    backend = FakeBackend()
    pipeline.run([m], store, jobs=1, backend=backend, progress=False)
    out = tmp_path / "fake.bundle"
    write_bundle(out, store, store.keys(), {m.name: m.read_bytes()})
    return store, out


def test_inspect(fake_store):
    store, _ = fake_store
    key = store.keys()[0]
    r = cli("inspect", key[:10], "--store", store.root)
    assert r.exit_code == 0, r.output
    assert f'"key": "{key}"' in r.output and "present, verified" in r.output
    r = cli("inspect", key, "--store", store.root, "--identity")
    assert r.exit_code == 0 and '"ptxas"' in r.output
    store.object_path(store.get_record(key).cubin_sha256).unlink()
    r = cli("inspect", key, "--store", store.root)
    assert r.exit_code == 1 and "no object" in r.output


@pytest.mark.parametrize(
    "key, msg",
    [("f" * 64, "no artifact record with key"), ("abc", "not a variant key"), ("0123456789", "no artifact record with key starting")],
)
def test_inspect_unknown_key(fake_store, key, msg):
    store, _ = fake_store
    r = cli("inspect", key, "--store", store.root)
    assert r.exit_code == 1 and msg in r.output and "Traceback" not in r.output


def test_verify_ok_and_expect(fake_store):
    _, bundle = fake_store
    r = cli("verify", bundle)
    assert r.exit_code == 0 and r.output.startswith(f"OK {bundle}: 2 record(s), 2 cubin(s), 1 compiler identity")
    top = re.search(r"top hash ([0-9a-f]{64})", r.output).group(1)
    assert cli("verify", bundle, "--expect", top).exit_code == 0
    r = cli("verify", bundle, "--expect", "0" * 64)
    assert r.exit_code == 1 and "!= expected" in r.output


def test_verify_damaged(fake_store, tmp_path):
    _, bundle = fake_store
    blob = bundle.read_bytes()
    bundle.write_bytes(blob[: len(blob) // 2])
    r = cli("verify", bundle)
    assert r.exit_code == 1 and "Error:" in r.output and ("truncated" in r.output or "multiple of" in r.output)
    r = cli("verify", tmp_path / "missing.bundle")
    assert r.exit_code == 1 and "no such bundle" in r.output


def test_bundle_requires_compiled(tmp_path):
    if not TINY.is_file():
        pytest.skip("manifests/test-tiny.yaml not present yet")
    r = cli("bundle", TINY, "-o", tmp_path / "b", "--store", tmp_path / "empty-store")
    assert r.exit_code == 1 and "not compiled" in r.output and "gcmoe-build compile" in r.output
    assert not (tmp_path / "b").exists()


def test_bad_manifest_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel: {hidden: 512, bogus_key: 1}\n")
    for cmd in (("compile", bad, "--store", tmp_path / "s"), ("ls", bad), ("bundle", bad, "-o", tmp_path / "b")):
        r = cli(*cmd)
        assert r.exit_code == 1 and "Error:" in r.output and "bad.yaml" in r.output, r.output
        assert "Traceback" not in r.output
    assert not (tmp_path / "s").exists() and not (tmp_path / "b").exists()


def test_every_variant_param_maps_to_a_manifest_field():
    # the runtime names the manifest entry to add for a missing variant (Bundle.find)
    from gcmoe_runtime.artifacts.bundle import MANIFEST_FIELD_OF_PARAM

    from gcmoe_build.manifest import load_manifest
    from gcmoe_build.variants import enumerate_variants

    for m in sorted((REPO / "manifests").glob("*.yaml")):
        for v in enumerate_variants(load_manifest(m)):
            assert set(v.params) <= set(MANIFEST_FIELD_OF_PARAM), (m.name, v.role, set(v.params) - set(MANIFEST_FIELD_OF_PARAM))


def test_usage_errors(tmp_path):
    assert cli("compile").exit_code == 2
    assert cli("compile", tmp_path / "nope.yaml").exit_code == 2
    assert cli("compile", __file__, "--jobs", "0").exit_code == 2


# --------------------------------------------------------------------------------------------
# end to end, real chain: manifests/test-tiny.yaml
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    exit_code: int
    output: str  # stdout + stderr


@pytest.fixture(scope="module")
def e2e(tmp_path_factory):
    """compile (cold) -> compile (warm) -> bundle, each a real `gcmoe-build` process, with the real
    CuTe DSL / ABI / ptxas chain, on a frozen copy of the source tree (the kernel source hash is part
    of every key; a copy keeps concurrent edits of a shared checkout from changing it mid-test)."""
    tmp = tmp_path_factory.mktemp("e2e")
    tree = tmp / "tree"
    for part in ("gcmoe_build", "gcmoe_runtime", "manifests"):
        shutil.copytree(REPO / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tree)}

    def run(*args) -> Run:
        p = subprocess.run(
            [sys.executable, "-m", "gcmoe_build.cli", *map(str, args)], cwd=tree, env=env,
            capture_output=True, text=True, timeout=900,
        )
        return Run(p.returncode, p.stdout + p.stderr)

    store = tmp / "store"
    tiny = tree / "manifests" / "test-tiny.yaml"
    ctx = {"tmp": tmp, "tree": tree, "run": run, "store": store, "tiny": tiny, "bundle": tmp / "test-tiny.gcmoe"}
    ctx["cold"] = run("compile", tiny, "--store", store, "--jobs", "2")
    ctx["warm"] = run("compile", tiny, "--store", store, "--jobs", "2")
    ctx["made"] = run("bundle", tiny, "-o", ctx["bundle"], "--store", store)
    return ctx


def _tiny_variants(tree: Path):
    code = (
        "import json; from gcmoe_build.kernels import has_kernel; from gcmoe_build.manifest import load_manifest; "
        "from gcmoe_build.variants import enumerate_variants; "
        "print(json.dumps([[v.role, has_kernel(v.role)] for v in enumerate_variants(load_manifest('manifests/test-tiny.yaml'))]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_e2e_compile_cold_then_warm(e2e):
    variants = _tiny_variants(e2e["tree"])
    n = sum(k for _, k in variants)
    without = len(variants) - n
    cold, warm = e2e["cold"], e2e["warm"]
    assert cold.exit_code == 0, cold.output
    assert n > 0
    assert f"-- {n} compiled (cold" in cold.output, cold.output
    assert f"0 cached (warm 0.000s total), {without} no kernel yet, 0 failed" in cold.output, cold.output
    assert f"[{n}/{n}" in cold.output  # the progress bar (stderr)
    assert warm.exit_code == 0, warm.output
    assert f"-- 0 compiled (cold 0.00s total), {n} cached" in warm.output, warm.output
    for role in sorted({r for r, k in variants if not k}):
        assert f"{role} x" in cold.output  # listed as "no kernel yet", not faked
    store = Store(e2e["store"])
    assert len(store.keys()) == n
    assert f"{store.size_bytes() / 1024:.1f} KiB" in warm.output


def test_e2e_ls_and_inspect(e2e):
    run = e2e["run"]
    ls = run("ls", e2e["tiny"])
    assert ls.exit_code == 0 and "selftest_tma_peer" in ls.output and "KEY" in ls.output, ls.output
    store = Store(e2e["store"])
    tma = [x for x in store.records() if x.role == "selftest_tma_peer"]
    assert tma
    assert tma[0].key[:16] in ls.output  # ls shows the keys the store holds
    r = cli("inspect", tma[0].key, "--store", e2e["store"])
    assert r.exit_code == 0, r.output
    assert '"kind": "tensormap"' in r.output and '"kind": "peer_desc"' in r.output


def test_e2e_bundle_verify_audit(e2e):
    run, made, bundle = e2e["run"], e2e["made"], e2e["bundle"]
    assert made.exit_code == 0, made.output
    again = e2e["tmp"] / "again.gcmoe"
    assert run("bundle", e2e["tiny"], "-o", again, "--store", e2e["store"]).exit_code == 0
    assert again.read_bytes() == bundle.read_bytes()  # deterministic
    v = run("verify", bundle)
    assert v.exit_code == 0, v.output
    b = open_bundle(bundle)
    assert b.manifests["test-tiny.yaml"] == TINY.read_bytes()
    assert {r.key for r in b.records} == set(Store(e2e["store"]).keys())
    assert b.cubin(b.find("selftest_tma_peer", arch="sm_90a").key)[:4] == b"\x7fELF"
    a = run("audit", bundle, "--jobs", "2")
    assert a.exit_code == 0, a.output
    assert f"byte-identical: {len(b.records)}/{len(b.records)}" in a.output
    assert "identical to this machine's" in a.output


def test_e2e_damaged_bundle_fails_verify_and_audit(e2e):
    bad = e2e["tmp"] / "bad.gcmoe"
    blob = bytearray(e2e["bundle"].read_bytes())
    at = blob.find(TINY.read_bytes())
    assert at > 0
    blob[at + 40] ^= 0x04  # one bit of the bundled manifest
    bad.write_bytes(bytes(blob))
    for cmd in ("verify", "audit"):
        r = e2e["run"](cmd, bad)
        assert r.exit_code == 1 and "member 'manifests/test-tiny.yaml': sha256" in r.output, r.output
        assert "Traceback" not in r.output
