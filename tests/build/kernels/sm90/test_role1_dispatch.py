"""CPU: role1 (SM90 dispatch) compiles through the full chain (compile_variant: DSL -> PTX -> by-value ABI
rewrite -> locked ptxas -> cubin checks) for P = 1 and 2; its PTX shows the protocol's instructions (packed
atomics, the tag-1 barrier's release/acquire at system scope for P = 2 and at GPU scope for P = 1, where nothing
of the protocol is at system scope, bulk copies of the pull, the ring release, trap), uses no local memory, and its schema/launch facts are what the runtime packs. Bad variant params get errors
naming the field."""
from __future__ import annotations

import re

import pytest

from gcmoe_build.variants import Variant
from tests.build.kernels.sm90.ptx_checks import assert_only_printf_locals

BASE = dict(hidden=512, experts=16, top_k=4, capacity=256, dispatch_sms=4, compute_sms=128, bm=16,
            recipe_routed="e4m3-fp32k128_x_mxfp4")


@pytest.fixture(scope="module", params=[1, 2])
def art(request):
    from gcmoe_build.compile import compile_variant

    return compile_variant(Variant("role1", "sm_90a", {**BASE, "ranks": request.param}))


def test_protocol_instructions(art):
    ptx = art.ptx
    scope = "sys" if art.record.variant["ranks"] > 1 else "gpu"
    for op in ("atom.shared.add.u32", "atom.relaxed.gpu.global.add.u64", f"st.release.{scope}.global.u32",
               f"ld.acquire.{scope}.global.u32", f"fence.acq_rel.{scope};", f"ld.relaxed.{scope}.global.u32",
               "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
               "cp.async.bulk.global.shared::cta.bulk_group", "cp.async.bulk.wait_group",
               "red.release.gpu.global.add.u32", "mbarrier.try_wait.parity", "%globaltimer", "trap;"):
        assert op in ptx, op
    if scope == "gpu":  # P = 1: system scope is left only to the trap record's stores and fences
        for op in ("st.release.sys", "ld.acquire.sys", "fence.acq_rel.sys", "ld.relaxed.sys"):
            assert op not in ptx, op
    # grid barriers (one arrival atomic each): P = 1 builds its tables from send_count after the first one
    assert ptx.count("atom.acq_rel.gpu.global.add.u64") == (1 if scope == "gpu" else 2)
    assert_only_printf_locals(ptx)
    assert art.cubin[:4] == b"\x7fELF"


def test_schema_and_launch(art):
    from gcmoe_build.kernels.sm90.role1_dispatch import OFFSET_PARAMS, Role1Config

    rec = art.record
    names = [p.name for p in rec.params]
    assert names[0] == "peer" and rec.params[0].size == 592
    assert names[1:1 + len(OFFSET_PARAMS)] == [f"o_{n}" for n in OFFSET_PARAMS]
    assert names[-4:] == ["ntok", "ring_blocks", "bm_stride", "sf_stride"]
    assert rec.launch.grid == "dispatch_sms" and rec.launch.block == (512, 1, 1)  # 16 warps fit at H = 512
    assert rec.launch.dynamic_smem == Role1Config(rec.variant).smem_bytes


def test_warps_are_the_most_whose_staging_fits():
    """16 warps (twice the tokens in flight of the first 8-warp kernel, session 30) wherever their double-buffered
    staging fits the shared memory (every shipped shape), else 8 or 4; a clear error when not even 4 fit."""
    from gcmoe_build.kernels.sm90.role1_dispatch import Role1Config
    from gcmoe_build.kernels.sm90.role_common import SMEM_LIMIT

    def cfg(hidden, experts=256):
        return Role1Config(dict(BASE, hidden=hidden, experts=experts, ranks=1))

    for hidden, experts, warps in ((512, 16, 16), (6144, 256, 16), (5120, 384, 16), (7168, 256, 8), (16384, 64, 4)):
        c = cfg(hidden, experts)
        assert c.warps == warps and c.threads == 32 * warps and c.smem_bytes <= SMEM_LIMIT, (hidden, c.warps)
        if warps < 16:
            assert c.smem_offsets(2 * warps)["total"] > SMEM_LIMIT
    with pytest.raises(ValueError, match="hidden=32768.*shared memory"):
        cfg(32768)


def test_offsets_come_from_the_layout():
    """Every o_<region> the kernel takes is a region of THE layout, and the runtime's value dict fills it."""
    from gcmoe_build.kernels.sm90.role1_dispatch import OFFSET_PARAMS
    from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout

    lay = WorkspaceLayout.build(LayoutSpec(arch="sm_90a", world_size=2, num_experts=16, topk=4, hidden=512,
                                           intermediate=256, capacity=256, bm_candidates=(8, 16), compute_sms=128))
    for n in OFFSET_PARAMS:
        assert lay.region(n).offset % 256 == 0


@pytest.mark.parametrize("bad,needle", [
    ({"hidden": 640}, "multiple of 512"), ({"experts": 15, "ranks": 2}, "not divisible"),
    ({"top_k": 32}, "top_k"), ({"bm": 0}, "bm"), ({"experts": 4096, "ranks": 1}, "2048"),
    ({"k_interleave": 2}, "k_interleave=2 must be 0 or 1"), ({"k_interleave": True}, "k_interleave")])
def test_bad_params(bad, needle):
    from gcmoe_build.kernels.sm90.role1_dispatch import Role1Config

    with pytest.raises(ValueError, match=needle):
        Role1Config({**BASE, "ranks": 1, **bad})


def test_no_wait_while_holding_a_token(art):
    """Ring reuse: before waiting for l1_empty_count (generation > 0) the warp releases its previous token
    (three release sites: before the empty wait, after each store, after the loop) — otherwise role2 could
    need that very token's block to free the one the warp waits for."""
    ptx = art.ptx
    assert ptx.count("red.release.gpu.global.add.u32") == 3
    scope = "sys" if art.record.variant["ranks"] > 1 else "gpu"
    tables = ptx.rindex(f"ld.relaxed.{scope}.global.u64")  # step 6a's count loads: the pull follows them
    first_empty_wait = ptx.index("ld.acquire.gpu.global.u32", tables)  # (P = 1's tag-1 wait is GPU scope, before)
    assert ptx.index("red.release.gpu.global.add.u32") < first_empty_wait
    assert ptx.index("cp.async.bulk.wait_group 0") < first_empty_wait


def test_proxy_fences_name_their_state_space(art):
    """Every release of a stored row is preceded by the global-only proxy fence (the bulk store's writes -> the
    generic release) and each pull into a stage by the shared-only one (the warp's reads of that stage -> the bulk
    copy's writes); the all-state-spaces ``fence.proxy.async`` is never used (session 42: a full fence per row and
    warp cost role1 about as much as the rest of a row permutation)."""
    ptx = art.ptx
    assert "fence.proxy.async;" not in ptx
    assert ptx.count("fence.proxy.async.global;") == ptx.count("red.release.gpu.global.add.u32") == 3
    assert ptx.count("fence.proxy.async.shared::cta;") == 1
    for rel in (m.start() for m in re.finditer(re.escape("red.release.gpu.global.add.u32"), ptx)):
        assert ptx.rindex("fence.proxy.async.global;", 0, rel) > ptx.rindex("cp.async.bulk.wait_group", 0, rel)


def test_k_interleave_permutes_each_row_before_its_bulk_store():
    """``k_interleave`` = 1 (session 51): each landed row is put into the interleaved K order in the warp's stage —
    every lane loads one word of each of the H/128 lines before any store (one warp sync between), stores its own
    word of each line, then the shared-only proxy fence — before lane 0's bulk store of the row; nothing else
    changes (the plain build has no such shared stores, both keep the release protocol)."""
    from gcmoe_build.compile import compile_variant

    plain = compile_variant(Variant("role1", "sm_90a", {**BASE, "ranks": 1})).ptx
    ptx = compile_variant(Variant("role1", "sm_90a", {**BASE, "ranks": 1, "k_interleave": 1})).ptx
    nkb = BASE["hidden"] // 128
    grew = {op: ptx.count(op) - plain.count(op) for op in ("ld.shared.u32", "st.shared.u32", "bar.warp.sync",
                                                           "fence.proxy.async.shared::cta;")}
    assert grew == {"ld.shared.u32": nkb, "st.shared.u32": nkb, "bar.warp.sync": 1,
                    "fence.proxy.async.shared::cta;": 1}, grew
    fence = ptx.index("fence.proxy.async.shared::cta;")
    assert ptx.index("cp.async.bulk.global.shared::cta.bulk_group", fence) > fence  # the row's store follows it
    assert ptx.count("red.release.gpu.global.add.u32") == plain.count("red.release.gpu.global.add.u32") == 3
    assert_only_printf_locals(ptx)
