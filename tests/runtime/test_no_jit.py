"""Loading and running never imports the CuTe DSL / the builder nor starts a compiler (issue 3 item 1).

A fresh interpreter installs an import + process guard, imports every runtime module, opens a real
bundle, loads its kernels (fake driver: no GPU here), builds a graph and launches it; then asserts
that nothing forbidden was imported or spawned. The GPU evidence script repeats this with the real
driver on H200.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings")

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

SCRIPT = textwrap.dedent(
    """
    import sys, pkgutil, importlib
    sys.path[:0] = [{here!r}, {root!r}]
    import nojit_guard
    nojit_guard.install()
    import gcmoe_runtime
    for m in pkgutil.walk_packages(gcmoe_runtime.__path__, "gcmoe_runtime."):
        try:
            importlib.import_module(m.name)
        except ImportError as e:
            if "no-JIT guard" in str(e):
                raise
    from pathlib import Path
    from fake_bundle import make_bundle, record, PARAMS
    from fake_cuda import FakeDriver
    from gcmoe_runtime.artifacts.record import LaunchFacts
    from gcmoe_runtime.loader import KernelLoader
    from gcmoe_runtime import green, graph
    arts = [record("role1"), record("role2"), record("role3")]
    d = FakeDriver(param_info={{r.kernel_name: [(p.offset, p.size) for p in PARAMS] for r, _ in arts}})
    ld = KernelLoader.open(str(make_bundle(Path({tmp!r}), arts)), drv=d)
    gp = green.create_partition(0, 4, drv=d)
    vals = {{"tm_x": b"\\0" * 128, "peers": b"\\0" * 592, "ws": 1, "n": 1}}
    roles = {{r: graph.RoleNode(ld.kernel(r, bm=16), ld.kernel(r, bm=16).args(vals)) for r in ("role1", "role2", "role3")}}
    g = graph.get_layer_graph(roles, gp, drv=d)
    g.launch(0)
    assert d.launched == 1
    print("ATTEMPTS", nojit_guard.ATTEMPTS)
    print("FORBIDDEN", nojit_guard.loaded_forbidden())
    print("SPAWNS", nojit_guard.SPAWNS)
    """
)


def test_runtime_never_imports_dsl_or_spawns(tmp_path):
    code = SCRIPT.format(here=str(HERE), root=str(ROOT), tmp=str(tmp_path))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ATTEMPTS []" in r.stdout, r.stdout
    assert "FORBIDDEN []" in r.stdout, r.stdout
    spawns = eval(r.stdout.split("SPAWNS", 1)[1].strip().splitlines()[0])
    assert set(spawns) <= {"ldconfig"}, spawns  # ctypes.util.find_library only; never a compiler


def test_guard_itself_catches_a_dsl_import_and_a_compiler_spawn():
    code = textwrap.dedent(
        f"""
        import sys; sys.path[:0] = [{str(HERE)!r}]
        import nojit_guard; nojit_guard.install()
        for act in (lambda: __import__("cutlass"), lambda: __import__("subprocess").Popen(["ptxas"])):
            try:
                act()
            except Exception as e:
                print("BLOCKED", type(e).__name__)
        print(len(nojit_guard.ATTEMPTS))
        """
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.count("BLOCKED") == 2 and r.stdout.strip().endswith("2"), r.stdout + r.stderr
