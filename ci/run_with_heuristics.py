"""Run a Python command with constants of ``gcmoe_runtime.heuristics`` overridden: an A/B tool for GPU sessions, never
a way to ship a setting (the shipped values live in heuristics.py, and the build reads the same module).

    python3 ci/run_with_heuristics.py SM90_PIPELINED_TWO_CTAS_MIN_STEPS=0 -- -m gcmoe_runtime.bench sweep ...

Each ``NAME=INT`` must name an existing integer constant (else exit 2 naming it). The overrides go into a temporary
``sitecustomize.py`` put first on ``PYTHONPATH``, so they hold in every interpreter the command starts (the bench
spawns one process per rank); runtime readers look the constants up at call time (``heuristics.sm90_ctas_per_sm``).
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv):
    if "--" not in argv or len(argv) == argv.index("--") + 1:
        print("usage: run_with_heuristics.py NAME=INT ... -- PYTHON_ARGS ...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    sys.path.insert(0, str(ROOT))
    import gcmoe_runtime.heuristics as h

    lines = ["import gcmoe_runtime.heuristics as _h\n"]
    for item in argv[:cut]:
        name, _, value = item.partition("=")
        if not isinstance(getattr(h, name, None), int) or not value.lstrip("-").isdigit():
            print(f"run_with_heuristics: {item!r}: expected NAME=INT for an integer constant of "
                  f"gcmoe_runtime.heuristics", file=sys.stderr)
            return 2
        print(f"run_with_heuristics: {name} = {int(value)} (shipped: {getattr(h, name)})", file=sys.stderr)
        lines.append(f"_h.{name} = {int(value)}\n")
    with tempfile.TemporaryDirectory(prefix="gcmoe-heuristics-") as td:
        Path(td, "sitecustomize.py").write_text("".join(lines))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (td, str(ROOT), env.get("PYTHONPATH", "")) if p)
        return subprocess.call([sys.executable, *argv[cut + 1:]], env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
