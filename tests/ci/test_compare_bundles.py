"""ci/compare_bundles.py: records are matched on (manifest, role, variant parameters), so a bundle equals itself, and
records of another manifest count as present on one side only (the tool a kernel change's review relies on:
"only the records of the kernels you changed may differ")."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "results" / "operator" / "bundles"


def test_a_bundle_equals_itself_and_other_manifests_are_one_sided(ci_tool, capsys):
    from gcmoe_runtime.artifacts.bundle import open_bundle

    tool = ci_tool("compare_bundles")
    tiny, glm = BUNDLES / "test-tiny-sm90a.gcmoe", BUNDLES / "glm-5.2-sm90a.gcmoe"
    assert tool.compare(str(tiny), str(tiny)) == 0
    assert "0 differ" in capsys.readouterr().out
    n = len(open_bundle(tiny).records) + len(open_bundle(glm).records)
    assert tool.compare(str(tiny), str(glm)) == n
    out = capsys.readouterr().out
    assert out.count("only old: test-tiny") == len(open_bundle(tiny).records)
    assert out.count("only new: glm-5.2") == len(open_bundle(glm).records)
