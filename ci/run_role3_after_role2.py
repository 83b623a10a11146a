"""Run a Python script with every layer graph of the process built with role3 after role2 (and role4) only — the
role1 -> role3 edge dropped (``gcmoe_runtime.bench.model_step.patch_role3_edges``): the accuracy and repeat gates for
that graph before the runtime ships it; a measurement tool, never a way to ship it.

    python3 ci/run_role3_after_role2.py tests/runtime/operator/gpu_accuracy.py glm-5.2 0 OUT
"""
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: run_role3_after_role2.py SCRIPT [ARGS ...]")
    sys.path.insert(0, str(ROOT))
    from gcmoe_runtime.bench.model_step import patch_role3_edges

    patch_role3_edges("role2")
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, str(Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")
