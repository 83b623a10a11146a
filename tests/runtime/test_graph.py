import pytest

pytest.importorskip("cuda.bindings")

from fake_bundle import PARAMS, make_bundle, record  # noqa: E402
from fake_cuda import FakeDriver  # noqa: E402

from gcmoe_runtime import graph as G  # noqa: E402
from gcmoe_runtime import green  # noqa: E402
from gcmoe_runtime.artifacts.record import LaunchFacts  # noqa: E402
from gcmoe_runtime.loader import KernelLoader  # noqa: E402

VALS = {"tm_x": b"\0" * 128, "peers": b"\0" * 592, "ws": 0x1000, "n": 1}


@pytest.fixture
def env(tmp_path):
    arts = [
        record("role1", launch=LaunchFacts(block=(256, 1, 1), grid="dispatch_sms")),
        record("role2", launch=LaunchFacts(block=(384, 1, 1), cluster=(2, 1, 1), dynamic_smem=1000, grid="compute_sms")),
        record("role3", launch=LaunchFacts(block=(384, 1, 1), grid="finalize_sms")),
        record("role4", launch=LaunchFacts(block=(384, 1, 1), grid="fixed:8")),
    ]
    d = FakeDriver(param_info={r.kernel_name: [(p.offset, p.size) for p in PARAMS] for r, _ in arts})
    ld = KernelLoader.open(str(make_bundle(tmp_path, arts)), drv=d)
    gp = green.create_partition(0, 4, drv=d)
    roles = {r: G.RoleNode(ld.kernel(r, bm=16), ld.kernel(r, bm=16).args(VALS)) for r in ("role1", "role2", "role3", "role4")}
    yield d, gp, roles
    G.clear_cache()
    gp.destroy()


def nodes_by_kernel(d, lg):
    names = d.kernel_names
    out = {}
    for node, rec, deps in d.graph_nodes[int(lg.graph)]:
        out[names[rec["kern"]].split("_")[1]] = (node, rec, deps)
    return out


def test_roots_concurrent_role3_after_both_and_contexts(env):
    d, gp, roles = env
    lg = G.LayerGraph({k: roles[k] for k in ("role1", "role2", "role3")}, gp, tokens=16, drv=d)
    n = nodes_by_kernel(d, lg)
    assert n["role1"][2] == [] and n["role2"][2] == []  # concurrent roots: no edge
    assert sorted(n["role3"][2]) == sorted([n["role1"][0], n["role2"][0]])
    assert n["role1"][1]["ctx"] == int(gp.dispatch_ctx)
    assert n["role2"][1]["ctx"] == n["role3"][1]["ctx"] == int(gp.compute_ctx)
    assert n["role1"][1]["grid"] == (4, 1, 1) and n["role2"][1]["grid"] == (128, 1, 1)
    assert n["role3"][1]["grid"] == (64, 1, 1)  # finalize_sms = min(compute, 64) at T <= 128
    assert n["role2"][1]["smem"] == 1000 and n["role2"][1]["block"] == (384, 1, 1)
    assert d.node_attrs[n["role2"][0]][1] == (2, 1, 1)
    lg.destroy()


def test_role4_is_a_compute_root_role2_and_role3_wait_for_it(env):
    d, gp, roles = env
    lg = G.LayerGraph(roles, gp, tokens=256, drv=d)
    n = nodes_by_kernel(d, lg)
    assert n["role4"][2] == [] and n["role4"][1]["ctx"] == int(gp.compute_ctx) and n["role4"][1]["grid"] == (8, 1, 1)
    assert n["role1"][2] == [] and n["role2"][2] == [n["role4"][0]]  # role4 overlaps role1, then role2
    assert len(n["role3"][2]) == 3 and n["role3"][1]["grid"] == (128, 1, 1)
    lg.destroy()


def test_one_rank_graph_has_no_role1_to_role3_edge(env):
    """At P = 1 (``role3_waits_for_role1(1)`` is False) role3 follows the compute context's nodes only: no edge between
    the two green contexts but none at all from role1; the option is part of a cached graph's identity; the serialised
    ablation keeps role1 -> role3."""
    d, gp, roles = env
    assert G.role3_waits_for_role1(1) is False and G.role3_waits_for_role1(2) is True
    n = nodes_by_kernel(d, G.LayerGraph(roles, gp, tokens=1, role3_after_role1=False, drv=d))
    assert sorted(n["role3"][2]) == sorted([n["role2"][0], n["role4"][0]])
    serial = nodes_by_kernel(d, G.LayerGraph(roles, gp, tokens=1, serialize_roots=True, role3_after_role1=False,
                                             drv=d))
    assert serial["role1"][0] in serial["role3"][2]
    a = G.get_layer_graph(roles, gp, tokens=1, drv=d)
    b = G.get_layer_graph(roles, gp, tokens=1, role3_after_role1=False, drv=d)
    assert a is not b and G.get_layer_graph(roles, gp, tokens=1, role3_after_role1=False, drv=d) is b


def test_role4_to_role2_edge_from_the_launch_order_port(env):
    """role2 after role4's launch-order port (heuristics.sm90_role4_edge): only that edge carries edge data (default
    type, port CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER); every other edge stays full; the kind is part of a cached
    graph's identity; the serialized ablation (role4 after role2) has no such edge."""
    from cuda.bindings import driver as cu

    d, gp, roles = env
    lg = G.LayerGraph(roles, gp, tokens=1, role4_edge="launch_order", drv=d)
    n = nodes_by_kernel(d, lg)
    assert n["role2"][2] == [n["role4"][0]]
    assert d.edge_data[n["role2"][0]] == [(0, int(cu.CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER))]
    assert all(n[r][0] not in d.edge_data for r in ("role1", "role3", "role4"))
    full = nodes_by_kernel(d, G.LayerGraph(roles, gp, tokens=1, drv=d))
    assert full["role2"][2] == [full["role4"][0]] and full["role2"][0] not in d.edge_data
    serial = nodes_by_kernel(d, G.LayerGraph(roles, gp, tokens=1, serialize_roots=True, role4_edge="launch_order",
                                             drv=d))
    assert serial["role4"][2] == [serial["role2"][0]] and not any(serial[r][0] in d.edge_data for r in serial)
    with pytest.raises(G.GraphError, match="role4_edge='sideways'"):
        G.LayerGraph(roles, gp, role4_edge="sideways", drv=d)
    a = G.get_layer_graph(roles, gp, tokens=1, drv=d)
    b = G.get_layer_graph(roles, gp, tokens=1, role4_edge="launch_order", drv=d)
    assert b is not a and a.role4_edge == "full" and b.role4_edge == "launch_order"
    assert G.get_layer_graph(roles, gp, tokens=1, role4_edge="launch_order", drv=d) is b


def test_serialized_ablation_chains_the_roots(env):
    d, gp, roles = env
    lg = G.LayerGraph({k: roles[k] for k in ("role1", "role2", "role3")}, gp, serialize_roots=True, drv=d)
    n = nodes_by_kernel(d, lg)
    assert n["role2"][2] == [n["role1"][0]]
    lg.destroy()


def test_cache_by_cubin_params_and_partition(env):
    d, gp, roles = env
    three = {k: roles[k] for k in ("role1", "role2", "role3")}
    a = G.get_layer_graph(three, gp, tokens=16, drv=d)
    assert G.get_layer_graph(three, gp, tokens=16, drv=d) is a
    other = dict(three, role1=G.RoleNode(roles["role1"].kernel, roles["role1"].kernel.args({**VALS, "ws": 0x2000})))
    assert G.get_layer_graph(other, gp, tokens=16, drv=d) is not a
    gp2 = green.create_partition(0, 16, drv=d)
    assert G.get_layer_graph(three, gp2, tokens=16, drv=d) is not a
    G.clear_cache()
    gp2.destroy()
    assert d.live_count("graph") == 0 and d.live_count("exec") == 0


def test_bad_graphs_refused(env):
    d, gp, roles = env
    with pytest.raises(G.GraphError, match="needs role1 and role2"):
        G.LayerGraph({"role1": roles["role1"]}, gp, drv=d)
    odd = G.RoleNode(roles["role2"].kernel, roles["role2"].args, grid=7)
    with pytest.raises(G.GraphError, match="grid 7 is not a multiple of cluster"):
        G.LayerGraph({"role1": roles["role1"], "role2": odd}, gp, drv=d)
    with pytest.raises(G.GraphError, match="unknown launch grid rule"):
        G.resolve_grid("everything", gp)


def test_grid_rule_with_ctas_per_sm_needs_them_all_resident(tmp_path):
    two = record("role2", launch=LaunchFacts(block=(256, 1, 1), dynamic_smem=40_000, grid="compute_sms*2"))
    one = record("role1", launch=LaunchFacts(block=(256, 1, 1), grid="dispatch_sms"))
    d = FakeDriver(param_info={r.kernel_name: [(p.offset, p.size) for p in PARAMS] for r, _ in (one, two)})
    ld = KernelLoader.open(str(make_bundle(tmp_path, [one, two])), drv=d)
    gp = green.create_partition(0, 4, drv=d)
    try:
        roles = {r: G.RoleNode(ld.kernel(r, bm=16), ld.kernel(r, bm=16).args(VALS)) for r in ("role1", "role2")}
        assert G.ctas_per_sm("compute_sms*2") == 2 and G.ctas_per_sm("compute_sms") == 1
        assert G.resolve_grid("compute_sms*2", gp) == 2 * gp.compute_sms
        lg = G.LayerGraph(roles, gp, drv=d)
        assert nodes_by_kernel(d, lg)["role2"][1]["grid"] == (2 * gp.compute_sms, 1, 1)
        assert "cuOccupancyMaxActiveBlocksPerMultiprocessor" in d.calls
        lg.destroy()
        # the driver fits only one such CTA per SM: the graph is refused, not built to spin until a timeout trap
        d.occupancy = {two[0].kernel_name: 1}
        with pytest.raises(G.GraphError, match=r"needs 2 co-resident CTAs per SM, the driver fits 1 \(256 threads, "
                                                r"40000 B"):
            G.LayerGraph(roles, gp, drv=d)
        with pytest.raises(G.GraphError, match="integer N >= 1"):
            G.resolve_grid("compute_sms*two", gp)
    finally:
        G.clear_cache()
        gp.destroy()


def test_attach_adds_child_after_capture_deps_and_moves_the_stream(env):
    d, gp, roles = env
    cu = d.cu
    lg = G.LayerGraph({k: roles[k] for k in ("role1", "role2")}, gp, drv=d)
    parent, dep = cu.CUgraph(0xAB), cu.CUgraphNode(0xCD)
    seen = {}
    d.cuStreamGetCaptureInfo = lambda s: (cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE, 1, parent, [dep], None, 1)
    d.cuGraphAddChildGraphNode = lambda g, deps, n, child: seen.update(parent=int(g), deps=[int(x) for x in deps], child=int(child)) or cu.CUgraphNode(0xEF)
    d.cuStreamUpdateCaptureDependencies = lambda s, nodes, ed, n, flags: seen.update(set=[int(x) for x in nodes], flags=flags)
    lg.attach(cu.CUstream(5))
    assert seen["parent"] == 0xAB and seen["deps"] == [0xCD] and seen["child"] == int(lg.graph)
    assert seen["set"] == [0xEF]
    assert seen["flags"] == cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
    d.cuStreamGetCaptureInfo = lambda s: (cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE, 0, None, [], None, 0)
    with pytest.raises(G.GraphError, match="active capture"):
        lg.attach(cu.CUstream(5))
    lg.destroy()
