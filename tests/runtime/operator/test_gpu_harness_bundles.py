"""CPU: the GPU harnesses load the bundles this repository ships. Until session 18 ``gpu_role13.py`` defaulted to a
stale session-4 role1 / role3 bundle kept beside the shipped ones, so the role1 / role3 GPU tests did not test the
shipped kernels. Every ``results/...gcmoe`` path a harness names must exist, and an operator harness must name
``results/operator/bundles/`` (what ``tests/build/test_shipped_bundles.py`` proves is the current build), except
``gpu_api_checks.py``, whose last host check needs a bundle without a role2 kernel."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HARNESS_DIRS = (ROOT / "tests" / "runtime", ROOT / "tests" / "build")
#: harness -> the one non-shipped operator bundle it may name, and why (module docstring)
EXCEPTIONS = {"gpu_api_checks.py": "results/operator/test-tiny-role1-role3-only-sm90a.gcmoe"}


def _harnesses():
    return sorted(p for d in HARNESS_DIRS for p in d.rglob("*.py") if p.name != Path(__file__).name)


def test_named_bundles_exist():
    named = 0
    for p in _harnesses():
        for m in re.finditer(r"results/[A-Za-z0-9_./-]+\.gcmoe", p.read_text()):
            if "{" in m.group(0) or "<" in m.group(0) or "*" in m.group(0):
                continue
            named += 1
            assert (ROOT / m.group(0)).is_file(), f"{p.relative_to(ROOT)} names {m.group(0)}, which is not in the tree"
    assert named > 0


def test_operator_harnesses_default_to_the_shipped_bundles():
    for p in sorted((ROOT / "tests" / "runtime" / "operator").glob("gpu_*.py")):
        text = p.read_text()
        for m in re.finditer(r"results/operator/[A-Za-z0-9_.-]+\.gcmoe", text):
            assert EXCEPTIONS.get(p.name) == m.group(0), f"{p.name} loads {m.group(0)}: not a shipped bundle"
    role13 = (ROOT / "tests" / "runtime" / "operator" / "gpu_role13.py").read_text()
    assert '"results/operator/bundles"' in role13
