"""Declared LaunchFacts against the traced launch (block, dynamic smem, cluster), and a kernel whose
shared-memory allocations exceed its launch(smem=...) stopping the build."""
from __future__ import annotations

import dataclasses

import pytest

from gcmoe_build.frontend import dsl as fe
from gcmoe_build.frontend.launch_facts import LaunchFactsError, check_launch
from gcmoe_build.kernels.selftest import tma_peer

from selftest_ptx import selftest_variant

K = "gcmoe_selftest_tma_peer_0"


def test_selftest_launch_facts_match(selftest_build):
    kb, fr = selftest_build
    check_launch(K, fr.ir, fr.ptx, kb.launch)
    assert kb.launch.dynamic_smem == tma_peer.smem_bytes(0)


@pytest.mark.parametrize("change,why", [
    (dict(block=(256, 1, 1)), r"block \(256, 1, 1\) but the DSL traced block \(128, 1, 1\)"),
    (dict(dynamic_smem=1024), r"dynamic_smem 1024 but the DSL launch gives the kernel 4232 bytes"),
    (dict(cluster=(2, 1, 1)), r"cluster \(2, 1, 1\) but the DSL traced a non-cluster launch"),
])
def test_declared_facts_must_match(selftest_build, change, why):
    kb, fr = selftest_build
    with pytest.raises(LaunchFactsError, match=why):
        check_launch(K, fr.ir, fr.ptx, dataclasses.replace(kb.launch, **change))


def test_ptx_directives_are_checked(selftest_build):
    kb, fr = selftest_build
    ir = fr.ir.replace("exact_block_dim", "no_block_dim")  # leave the PTX as the only witness
    with pytest.raises(LaunchFactsError, match=r"\.reqntid \(64, 1, 1\)"):
        check_launch(K, ir, fr.ptx.replace(".reqntid 128, 1, 1", ".reqntid 64, 1, 1"), kb.launch)
    ptx = fr.ptx.replace(".reqntid 128, 1, 1", ".reqntid 128, 1, 1\n.reqnctapercluster 2, 1, 1")
    with pytest.raises(LaunchFactsError, match=r"requires \(2, 1, 1\)"):
        check_launch(K, fr.ir, ptx, kb.launch)
    with pytest.raises(LaunchFactsError, match="no cuda.kernel"):
        check_launch("other_0", fr.ir, fr.ptx, kb.launch)


def test_smem_overflow_stops_the_trace(monkeypatch):
    monkeypatch.setattr(tma_peer, "smem_bytes", lambda swizzle: 1000)
    kb = tma_peer.build(selftest_variant())
    with pytest.raises(fe.FrontendError, match="exceed the dynamic shared memory"):
        fe.trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, "sm_90a")
