"""manifests/ablation-*.yaml: valid under the builder's schema, the same shape as the model's manifest, and one
built split per ablation request (the splits gcmoe_runtime.green / heuristics give an H200)."""
from pathlib import Path

import yaml

from gcmoe_runtime.bench.__main__ import ABLATION_REQUESTS
from gcmoe_runtime.heuristics import green_partition

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "manifests" / "ablation-dispatch-sms-glm-5.2.yaml"


def test_ablation_manifest_valid_and_covers_every_request():
    from gcmoe_build.manifest import load_manifest
    from gcmoe_build.variants import enumerate_variants

    m = load_manifest(MANIFEST)
    model = yaml.safe_load((ROOT / "manifests" / "glm-5.2.yaml").read_text())["model"]
    assert yaml.safe_load(MANIFEST.read_text())["model"] == model
    assert tuple(t.dispatch_request for t in m.targets) == ABLATION_REQUESTS
    want = {green_partition(132, r, 8, 8) for r in ABLATION_REQUESTS}
    assert {t.partition for t in m.targets} == want and len(want) == 5
    v = enumerate_variants(m)
    for role in ("role1", "role2", "role3", "role4"):
        got = {(x.params["dispatch_sms"], x.params["compute_sms"]) for x in v if x.role == role}
        assert got == {(p.dispatch_sms, p.compute_sms) for p in want}, role
    assert {x.params["ranks"] for x in v if x.role == "role1"} == {1, 2}
