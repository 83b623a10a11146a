"""CPU: role3 (SM90 finalize) compiles through the full chain for P = 1/2 with and without a shared slot; the
PTX shows the readiness release/acquire at system scope, the ballot of valid slots, the predicated 16-byte
partial loads (one per combine slot), BF16x2 packing and the trap; bad params are refused by name."""
from __future__ import annotations

import pytest

from gcmoe_build.variants import Variant
from tests.build.kernels.sm90.ptx_checks import assert_only_printf_locals

BASE = dict(hidden=512, experts=16, top_k=4, capacity=256, dispatch_sms=4, compute_sms=128)


@pytest.fixture(scope="module", params=[(1, 1), (2, 0)])
def art(request):
    from gcmoe_build.compile import compile_variant

    ranks, shared = request.param
    return compile_variant(Variant("role3", "sm_90a", {**BASE, "ranks": ranks, "shared_experts": shared}))


def test_protocol_instructions(art):
    ptx = art.ptx
    for op in ("st.release.sys.global.u64", "ld.acquire.sys.global.u32", "vote.sync.ballot.b32",
               "cvt.rn.bf16x2.f32", "bar.sync 1, 128", "trap;"):
        assert op in ptx, op
    slots = 4 + art.record.variant["shared_experts"]
    assert ptx.count("@p ld.global.v4.u32") == slots  # one predicated load per combine slot, slot order
    assert_only_printf_locals(ptx)


def test_schema_and_launch(art):
    rec = art.record
    names = [p.name for p in rec.params]
    assert names[0] == "peer" and "y" in names and names[-3:] == ["ntok", "ring_blocks", "stats"]
    assert rec.launch.grid == "finalize_sms" and rec.launch.block == (384, 1, 1)


@pytest.mark.parametrize("bad,needle", [({"hidden": 384}, "multiple of 256"), ({"top_k": 32}, "k \\+ 1"),
                                        ({"shared_experts": -1}, "shared_experts")])
def test_bad_params(bad, needle):
    from gcmoe_build.kernels.sm90.role3_finalize import Role3Config

    with pytest.raises(ValueError, match=needle):
        Role3Config({**BASE, "ranks": 1, "shared_experts": 0, **bad})
