"""The bundles the GPU evidence refers to (``results/operator/bundles/``) are what the current sources build.

Session 7 found them one source-only commit stale (cubins identical, keys not): a fresh clone's main job then builds
other keys than the bundles the README points at, and nothing said so. Keys need no compile (compiler identity +
kernel source hash + variant), so this costs seconds: rebuild with ``gcmoe-build compile M && gcmoe-build bundle M -o
results/operator/bundles/<m>-sm90a.gcmoe`` when it fails, and compare the records with the GPU-run ones.
"""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("test-tiny", "glm-5.2", "deepseek-v4.1-flash", "rank-share-glm-5.2-p8", "rank-share-deepseek-v4.1-flash-p8")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_bundle_keys_are_the_current_build(name):
    pytest.importorskip("cutlass")  # the compiler identity hashes the DSL frontend
    from gcmoe_build.compile import identity_for, source_hash
    from gcmoe_build.manifest import load_manifest
    from gcmoe_build.variants import enumerate_variants
    from gcmoe_runtime.artifacts.bundle import open_bundle

    manifest = load_manifest(ROOT / "manifests" / f"{name}.yaml")
    want = {v.key(identity_for(v.arch).digest, source_hash()) for v in enumerate_variants(manifest)}
    have = {r.key for r in open_bundle(ROOT / "results" / "operator" / "bundles" / f"{name}-sm90a.gcmoe").records}
    assert have == want, (f"results/operator/bundles/{name}-sm90a.gcmoe is not the current build: {len(have - want)} "
                          f"stale record(s), {len(want - have)} missing; rebuild it (module docstring)")
