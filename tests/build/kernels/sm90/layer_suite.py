"""GPU test helper: run the layer accuracy suite (tests/runtime/operator/gpu_accuracy.py) on the test model in a
subprocess, one rank or ``world`` ranks through torch.distributed.run, and return its per-rank result files.
Shared by the role2 ring and role4 GPU tests (they differ only in SHARED, the bundle and the script)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
HARNESS = ROOT / "tests" / "runtime" / "operator" / "gpu_accuracy.py"


def run_layer_suite(bundle, shared: int, tmp_path, world: int, script=HARNESS, extra_env=None):
    """Run ``script test-tiny <shared> <tmp_path>`` (default: the accuracy suite itself) against ``bundle``; device
    waits time out after GCMOE_TIMEOUT_S (default 20 s). Asserts every rank printed ``RESULT PASS``; returns the
    sorted ``test-tiny-s<shared>-P*-rank*.json`` files."""
    env = {**os.environ, "GCMOE_OPERATOR_BUNDLE": str(bundle),
           "GCMOE_TIMEOUT_S": os.environ.get("GCMOE_TIMEOUT_S", "20"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.update(extra_env or {})
    args = [str(script), "test-tiny", str(shared), str(tmp_path)]
    if world == 1:
        cmd = [sys.executable, *args]
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), *args]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0 and p.stdout.count("RESULT PASS") == world, p.stdout[-6000:] + p.stderr[-4000:]
    return sorted(Path(tmp_path).glob(f"test-tiny-s{shared}-P*-rank*.json"))
