"""GPU (next session): the full layer role1 -> role2 (this ring-consuming kernel) -> role3 through the public API
(gcmoe_runtime.moe, graph + eager) on the test model, against the numerics reference, through the accuracy
suite's implementation interface (tests/runtime/operator/gpu_accuracy.py: 47 cases incl. empty ranks, graph vs
eager and repeat bit-identity). Routed only (SHARED=0): role4 is not built yet.

Bundle: ``results/operator/bundles/test-tiny-sm90a.gcmoe`` (built on CPU by ``gcmoe-build compile`` + ``bundle``
with role2; see results/operator/NEXT.md). Device waits time out after GCMOE_TIMEOUT_S (default here 20 s) so a
protocol bug traps with a recognisable record instead of hanging the run.
Run on the GPU machine:
``source ci/gpu_env.sh && python3 -m pytest -q -m gpu tests/build/kernels/sm90/test_role2_ring_gpu.py``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.build.kernels.sm90.layer_suite import HARNESS, ROOT, run_layer_suite

BUNDLE = ROOT / "results" / "operator" / "bundles" / "test-tiny-sm90a.gcmoe"


def _run(tmp_path, world, ring_blocks=None):
    if ring_blocks is None:
        return run_layer_suite(BUNDLE, 0, tmp_path, world)
    # this file's __main__: the same suite with the ring capped (ring reuse)
    return run_layer_suite(BUNDLE, 0, tmp_path, world, script=Path(__file__).resolve(),
                           extra_env={"GCMOE_RING_BLOCKS": str(ring_blocks)})


@pytest.mark.gpu
def test_layer_role1_role2_role3_accuracy_p1(tmp_path):
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md)"
    assert len(_run(tmp_path, 1)) == 1


@pytest.mark.gpu
@pytest.mark.multigpu
def test_layer_role1_role2_role3_accuracy_p2(tmp_path):
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md)"
    assert len(_run(tmp_path, 2)) == 2


@pytest.mark.gpu
def test_layer_ring_reuse_p1(tmp_path):
    """Same suite with a 2-block token ring: every ring block carries many generations, so role1's l1_empty wait,
    role2's l2_empty wait, the W1-bitmap clear and the +1-per-generation hand-back all run (the default ring of
    192 blocks is never reused by test-tiny)."""
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md)"
    assert len(_run(tmp_path, 1, ring_blocks=2)) == 1


@pytest.mark.gpu
@pytest.mark.multigpu
def test_layer_ring_reuse_p2(tmp_path):
    assert BUNDLE.is_file(), f"build {BUNDLE} first (results/operator/NEXT.md)"
    assert len(_run(tmp_path, 2, ring_blocks=2)) == 2


def _capped_ring_main(argv):
    """Run gpu_accuracy.main with the workspace's token ring capped at GCMOE_RING_BLOCKS blocks (test only: the
    cap replaces the live-block count of gcmoe_runtime.workspace.layout.ring_model, which both the layout build and
    its partition check use, so the capped layout is self-consistent; any ring >= 1 block is correct, the live
    model only sizes it for overlap)."""
    import dataclasses

    import gcmoe_runtime.workspace.layout as lay

    cap = int(os.environ["GCMOE_RING_BLOCKS"])
    orig = lay.ring_model

    def capped(spec, bm, compute_sms=None):
        m = orig(spec, bm, compute_sms)
        return dataclasses.replace(m, live_blocks=min(m.live_blocks, cap))

    lay.ring_model = capped
    sys.path.insert(0, str(HARNESS.parent))
    import gpu_accuracy

    print(f"ring capped at {cap} blocks", flush=True)
    gpu_accuracy.main(argv[0], int(argv[1]), argv[2])


if __name__ == "__main__":
    _capped_ring_main(sys.argv[1:])
