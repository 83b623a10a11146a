"""GPU tests (issue 6): role1/role3 in isolation, the API's host checks, and the layer repeated beside role1 (session
30's race), through the committed bundles.

Each test runs a harness script in a subprocess (the trap probes kill a CUDA context) and requires its
RESULT PASS line(s); the JSON-lines evidence goes to a temporary file. Run on the GPU machine:
``python3 -m pytest -q -m gpu tests/runtime/operator`` (multi-GPU cases need 2 GPUs)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _run(tmp_path, script, world, shape="test", replays="1000"):
    _run_script(script, [str(tmp_path / f"{script}_{world}.jsonl")], world,
                {"GCMOE_SHAPE": shape, "GCMOE_REPLAYS": replays})


def _run_script(script, args, world, env_extra):
    """``script args`` on ``world`` GPUs (torchrun above one) in a subprocess; every rank must print RESULT PASS."""
    env = {**os.environ, **env_extra,
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")])}
    if world == 1:
        cmd = [sys.executable, str(HERE / script), *args]
        env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), str(HERE / script), *args]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.count("RESULT PASS") == world, p.stdout[-4000:] + p.stderr[-4000:]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["test", "glm52", "dsv41flash"])
def test_role1_role3_isolated_p1(tmp_path, shape):
    _run(tmp_path, "gpu_role13.py", 1, shape)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,bm", [("sglm52", 64), ("sdsv41flash", 48)])
def test_role1_large_bm_p1(tmp_path, shape, bm):
    """The P = 8 shares' large-BM role1 (in a ``k_interleave`` bundle, GCMOE_OPERATOR_BUNDLE, the one that writes W1's
    rows in the interleaved K order, checked against the host's ``interleave_k128``)."""
    _run_script("gpu_role13.py", [str(tmp_path / f"role13_{shape}.jsonl")], 1,
                {"GCMOE_SHAPE": shape, "GCMOE_REPLAYS": "100", "GCMOE_ROLE13_BM": str(bm)})


@pytest.mark.gpu
@pytest.mark.multigpu
@pytest.mark.parametrize("shape", ["test", "glm52", "dsv41flash"])
def test_role1_role3_isolated_p2(tmp_path, shape):
    _run(tmp_path, "gpu_role13.py", 2, shape)


@pytest.mark.gpu
def test_api_host_checks_p1(tmp_path):
    _run(tmp_path, "gpu_api_checks.py", 1, replays="0")


@pytest.mark.gpu
@pytest.mark.multigpu
def test_api_host_checks_p2(tmp_path):
    _run(tmp_path, "gpu_api_checks.py", 2, replays="0")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["gcov", "ov"])
def test_layer_repeats_bit_identical_beside_role1(mode):
    """Session 30's regression: GLM-5.2's share (32 local experts) faulted about once in ten calls while role1 ran
    beside role2 (a ``bra.uni`` on a divergent poll, ``ring_sync``), in the operator's own mode (green contexts +
    overlap) and in the primary context with overlap. 200 calls of each must run, match the reference and be
    bit-identical (gpu_repeat_probe.py)."""
    _run_script("gpu_repeat_probe.py", ["glm-5.2@E32", "default_T32"], 1, {
        "MODE": mode, "REPEATS": "200",
        "GCMOE_OPERATOR_BUNDLE": str(ROOT / "results/operator/bundles/rank-share-glm-5.2-p8-sm90a.gcmoe")})
