"""GPU (next session): the full layer role1 -> role2 (this ring-consuming kernel) -> role3 through the public API
(gcmoe_runtime.moe, graph + eager) on the test model, against the numerics reference, through the accuracy
suite's implementation interface (tests/runtime/operator/gpu_accuracy.py: 47 cases incl. empty ranks, graph vs
eager and repeat bit-identity). Routed only (SHARED=0): role4 is not built yet.

Bundle: ``results/operator/role2/test-tiny-sm90a.gcmoe`` (built on CPU by ``gcmoe-build compile`` + ``bundle``
with role2; see results/operator/NEXT.md). Device waits time out after GCMOE_TIMEOUT_S (default here 20 s) so a
protocol bug traps with a recognisable record instead of hanging the run.
Run on the GPU machine:
``source ci/gpu_env.sh && python3 -m pytest -q -m gpu tests/build/kernels/sm90/test_role2_ring_gpu.py``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
HARNESS = ROOT / "tests" / "runtime" / "operator" / "gpu_accuracy.py"
BUNDLE = ROOT / "results" / "operator" / "role2" / "test-tiny-sm90a.gcmoe"


def _run(tmp_path, world):
    env = {**os.environ, "GCMOE_OPERATOR_BUNDLE": str(BUNDLE),
           "GCMOE_TIMEOUT_S": os.environ.get("GCMOE_TIMEOUT_S", "20"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    args = [str(HARNESS), "test-tiny", "0", str(tmp_path)]
    if world == 1:
        cmd = [sys.executable, *args]
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), *args]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0 and p.stdout.count("RESULT PASS") == world, p.stdout[-6000:] + p.stderr[-4000:]
    return sorted(tmp_path.glob("test-tiny-s0-P*-rank*.json"))


@pytest.mark.gpu
def test_layer_role1_role2_role3_accuracy_p1(tmp_path):
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md)"
    assert len(_run(tmp_path, 1)) == 1


@pytest.mark.gpu
@pytest.mark.multigpu
def test_layer_role1_role2_role3_accuracy_p2(tmp_path):
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md)"
    assert len(_run(tmp_path, 2)) == 2
