"""CPU: the graph-overhead benchmark's plan and arithmetic (tests/runtime/bench_graph_overhead.py; the GPU part runs
on the device machine): every configuration in each run, alternating order, medians and differences from the
primary context in the same launch mode, and the one-green-context placement's contexts."""
from types import SimpleNamespace

from bench_graph_overhead import (CONFIGS, INNER, PLACEMENTS, OneGreenContext, run_order,
                                  summarise, table)


def test_every_configuration_runs_each_time_in_alternating_order():
    order = run_order(3)
    assert len(order) == 3 * len(CONFIGS) == 3 * 3 * len(PLACEMENTS)
    n = len(CONFIGS)
    assert order[:n] == list(CONFIGS) and order[n:2 * n] == list(CONFIGS[::-1]) and order[2 * n:] == list(CONFIGS)
    assert {("green2", "captured"), ("primary", "launch"), ("green1", "captured-x20")} <= set(CONFIGS)
    assert INNER["captured-x20"] > 1 == INNER["launch"] == INNER["captured"]


def test_summary_is_the_median_and_its_difference_from_primary_in_the_same_launch_mode():
    times = {c: [1.0, 2.0, 30.0] for c in CONFIGS}
    times[("primary", "launch")] = [3.0, 4.0, 5.0]
    times[("green2", "launch")] = [9.0, 7.0, 8.0, 100.0]
    times[("primary", "captured")] = [1.5, 1.5, 1.5]
    host = {c: [6.0, 7.0, 8.0] for c in CONFIGS}
    rows = {(r["placement"], r["launch"]): r for r in summarise(times, host)}
    assert [(r["placement"], r["launch"]) for r in summarise(times, host)] == list(CONFIGS)
    assert rows[("green2", "launch")]["us"] == 8.5 and rows[("green2", "launch")]["minus_primary_us"] == 4.5
    assert rows[("primary", "launch")]["minus_primary_us"] == 0.0
    assert rows[("green1", "captured")]["minus_primary_us"] == 0.5
    assert rows[("green1", "captured-x20")]["host_us_per_call"] == 7.0
    text = table(summarise(times, host))
    assert "| green2 | launch | 8.50 | 9.00 / 7.00 / 8.00 / 100.00 | +4.50 | 7.00 |" in text


def test_one_green_context_puts_every_node_on_the_compute_context():
    gp = SimpleNamespace(device=0, dispatch_sms=4, compute_sms=128, dispatch_ctx="D", compute_ctx="C",
                         key=lambda: (0, 4, 128, 11, 12))
    one = OneGreenContext.of(gp)
    assert (one.dispatch_ctx, one.compute_ctx) == ("C", "C")
    assert (one.device, one.dispatch_sms, one.compute_sms) == (0, 4, 128)
    assert one.key() != gp.key() and one.key()[1:] == gp.key()


def test_the_r3_placement_drops_only_role1_to_role3():
    from gcmoe_runtime.graph import _edges

    roles = dict.fromkeys(("role1", "role2", "role3"))
    assert _edges(roles, False)["role3"] == ["role1", "role2"]
    assert _edges(roles, False, role3_after_role1=False) == {"role1": [], "role2": [], "role3": ["role2"]}
    assert "green2-r3" in PLACEMENTS
