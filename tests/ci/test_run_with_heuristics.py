"""ci/run_with_heuristics.py: an override reaches every interpreter the command starts (the bench spawns one process
per rank), and a name that is not an integer constant of gcmoe_runtime.heuristics is refused before anything runs."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "ci" / "run_with_heuristics.py"

CHILD = """
import multiprocessing as mp
import gcmoe_runtime.heuristics as h

def read(_):
    import gcmoe_runtime.heuristics as h
    return h.SM90_PIPELINED_TWO_CTAS_MIN_STEPS

if __name__ == "__main__":
    with mp.get_context("spawn").Pool(1) as pool:
        print(h.SM90_PIPELINED_TWO_CTAS_MIN_STEPS, pool.map(read, [0])[0])
"""


def test_override_reaches_spawned_interpreters(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    r = subprocess.run([sys.executable, str(TOOL), "SM90_PIPELINED_TWO_CTAS_MIN_STEPS=7", "--", str(script)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["7", "7"]
    assert "SM90_PIPELINED_TWO_CTAS_MIN_STEPS = 7 (shipped: " in r.stderr


def test_unknown_or_non_integer_constant_is_refused():
    for item in ("NO_SUCH_CONSTANT=1", "SM90_PIPELINED_TWO_CTAS_MIN_STEPS=x", "DEFAULT_DISPATCH_REQUEST=4"):
        r = subprocess.run([sys.executable, str(TOOL), item, "--", "-c", "print('ran')"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and "ran" not in r.stdout and item in r.stderr, (item, r.stderr)
