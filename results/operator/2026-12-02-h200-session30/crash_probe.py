"""Session 30's repeat probe as calls A-I ran it (same CLI, see the call logs); maintained since as
tests/runtime/operator/gpu_repeat_probe.py, which this runs."""
import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    harness = Path(__file__).resolve().parents[3] / "tests" / "runtime" / "operator" / "gpu_repeat_probe.py"
    sys.argv[0] = str(harness)
    runpy.run_path(str(harness), run_name="__main__")
