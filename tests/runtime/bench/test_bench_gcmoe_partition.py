"""green.full_device_partition + the layer graph bound to the primary context (benchmark baselines a/b)."""
import os
import sys

import pytest

pytest.importorskip("cuda.bindings")
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))  # tests/runtime: fake_cuda, fake_bundle

from fake_bundle import PARAMS, make_bundle, record  # noqa: E402
from fake_cuda import FakeDriver  # noqa: E402

from gcmoe_runtime import graph as G  # noqa: E402
from gcmoe_runtime import green  # noqa: E402
from gcmoe_runtime.artifacts.record import LaunchFacts  # noqa: E402
from gcmoe_runtime.heuristics import PartitionError  # noqa: E402
from gcmoe_runtime.loader import KernelLoader  # noqa: E402

VALS = {"tm_x": b"\0" * 128, "peers": b"\0" * 592, "ws": 0x1000, "n": 1}
# H200: 132 SMs, alignment 8 -> the ablation's requests and their driver-aligned splits
H200_SPLITS = {4: (4, 128), 8: (12, 120), 12: (12, 120), 16: (20, 112), 20: (20, 112), 24: (28, 104), 32: (36, 96)}


@pytest.mark.parametrize("req,split", sorted(H200_SPLITS.items()))
def test_full_device_split_matches_green_split_without_green_contexts(req, split):
    d = FakeDriver()
    fd = green.full_device_partition(0, req, drv=d)
    assert (fd.dispatch_sms, fd.compute_sms) == split and fd.requested == req and fd.total_sms == 132
    assert not fd.green_contexts and d.live_count() == 0  # no green context, stream or event created
    assert "cuGreenCtxCreate" not in d.calls and int(fd.dispatch_ctx) == int(fd.compute_ctx) == 0xC0
    gp = green.create_partition(0, req, drv=d)
    assert (gp.dispatch_sms, gp.compute_sms) == split and gp.green_contexts
    assert fd.key() != gp.key()
    gp.destroy()
    fd.destroy()
    assert fd.destroyed and d.live_count() == 0


def test_full_device_invalid_request_names_the_rule():
    with pytest.raises(PartitionError, match="compute_sms"):
        green.full_device_partition(0, 120, drv=FakeDriver())


def test_full_device_env_request(monkeypatch):
    monkeypatch.setenv("GC_MOE_SM90_DISPATCH_SMS", "24")
    assert green.full_device_partition(0, drv=FakeDriver()).partition.dispatch_sms == 28


@pytest.fixture
def roles(tmp_path):
    arts = [
        record("role1", launch=LaunchFacts(block=(256, 1, 1), grid="dispatch_sms")),
        record("role2", launch=LaunchFacts(block=(384, 1, 1), grid="compute_sms")),
        record("role3", launch=LaunchFacts(block=(384, 1, 1), grid="finalize_sms")),
        record("role4", launch=LaunchFacts(block=(384, 1, 1), grid="fixed:8")),
    ]
    d = FakeDriver(param_info={r.kernel_name: [(p.offset, p.size) for p in PARAMS] for r, _ in arts})
    ld = KernelLoader.open(str(make_bundle(tmp_path, arts)), drv=d)
    rs = {r: G.RoleNode(ld.kernel(r, bm=16), ld.kernel(r, bm=16).args(VALS)) for r in ("role1", "role2", "role3", "role4")}
    yield d, rs
    G.clear_cache()


def _nodes(d, lg):
    return {d.kernel_names[rec["kern"]].split("_")[1]: (node, rec, deps)
            for node, rec, deps in d.graph_nodes[int(lg.graph)]}


@pytest.mark.parametrize("serial", [False, True])
def test_full_device_graph_binds_every_node_to_the_primary_context(roles, serial):
    d, rs = roles
    fd = green.full_device_partition(0, 16, drv=d)
    lg = G.get_layer_graph(rs, fd, tokens=32, serialize_roots=serial, drv=d)
    n = _nodes(d, lg)
    assert {rec["ctx"] for _, rec, _ in n.values()} == {0xC0}
    assert n["role1"][1]["grid"] == (20, 1, 1) and n["role2"][1]["grid"] == (112, 1, 1)  # the built split's grids
    if serial:  # baseline (a): one stream's order
        assert n["role2"][2] == [n["role1"][0]] and n["role4"][2] == [n["role2"][0]]
    else:  # baseline (b): concurrent roots (role2 after role4, as in the green graph), no isolation
        assert n["role1"][2] == [] and n["role4"][2] == [] and n["role2"][2] == [n["role4"][0]]
    assert sorted(n["role3"][2]) == sorted(n[r][0] for r in ("role1", "role2", "role4"))
    # a green pair of the same split is a different graph (cache key)
    gp = green.create_partition(0, 16, drv=d)
    assert G.get_layer_graph(rs, gp, tokens=32, serialize_roots=serial, drv=d) is not lg
    assert G.get_layer_graph(rs, fd, tokens=32, serialize_roots=serial, drv=d) is lg
    G.clear_cache()
    gp.destroy()
