"""Session 57: does baseline (b) (``gc-moe-streams``: no green contexts) trap at routed T = 1 on the test model
because the P = 1 layer graph lost its role1 -> role3 edge (``graph.role3_waits_for_role1``, session 56), or
without it too? One pytest case per process (a trap ends the CUDA context):

    python3 streams_edge_probe.py shipped|edge [pytest case id, default routed-1-gc-moe-streams]

``edge`` puts the edge back for this process only (the rule ``bench layers --role3-after all`` uses).
The test names the trap record (code, expected, observed) when a device-side wait traps.
"""
import sys

import pytest

from gcmoe_runtime import graph

arm = sys.argv[1]
case = sys.argv[2] if len(sys.argv) > 2 else "routed-1-gc-moe-streams"
if arm == "edge":
    graph.role3_waits_for_role1 = lambda world_size: True
elif arm != "shipped":
    sys.exit(f"arm {arm!r}: expected shipped or edge")
sys.exit(pytest.main(["-q", "-rf", "-p", "no:cacheprovider", "-m", "gpu",
                      f"tests/runtime/bench/test_bench_gpu.py::test_captured_gcmoe_modes_match_reference[{case}]"]))
