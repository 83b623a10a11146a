"""CPU: role4 (gcmoe_build/kernels/sm90/role4_shared.py, SM90 fused shared expert) compiles through the full chain
(compile_variant: DSL -> PTX -> by-value ABI rewrite -> locked ptxas -> cubin checks) for every role4 variant of
manifests/test-tiny.yaml; its PTX has register-A e4m3 wgmma with N = BM, bounded waits that leave trap code 14,
the ticket/publish/reset protocol, 16-byte stores into the combine buffer's lane k and no other global BF16 store;
its schema is exactly what gcmoe_runtime.moe packs. Numerical correctness is a GPU test (test_role4_gpu.py)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
MANIFEST = ROOT / "manifests" / "test-tiny.yaml"


def _role4_variants():
    from gcmoe_build.manifest import load_manifest
    from gcmoe_build.variants import enumerate_variants

    return [v for v in enumerate_variants(load_manifest(MANIFEST)) if v.role == "role4"]


@pytest.fixture(scope="session")
def role4_arts():
    """Every test-tiny role4 variant compiled once per session (about 1-4 s each on one core)."""
    from gcmoe_build.compile import compile_variant

    return {v.params["bm"]: compile_variant(v) for v in _role4_variants()}


def test_every_test_tiny_variant_compiles(role4_arts):
    from gcmoe_build.kernels.sm90.role4_shared import NAME_PREFIX, Role4Config

    assert set(role4_arts) == {8, 16, 32, 64}  # choose_shared_bm over T = 1..256
    for bm, art in role4_arts.items():
        rec = art.record
        assert art.cubin[:4] == b"\x7fELF"
        assert rec.role == "role4" and rec.kernel_name == f"{NAME_PREFIX}_0"
        assert rec.launch.block == (256, 1, 1) and rec.launch.grid == "compute_sms"
        assert rec.launch.dynamic_smem == Role4Config(rec.variant).smem_bytes
        assert rec.extra["kernel"]["bm"] == bm and rec.extra["kernel"]["recipe_shared"] == [1, 128, 128]
        assert ".local" not in art.ptx


def test_register_a_e4m3_wgmma_with_bm_tokens(role4_arts):
    """Operands swapped: A = 4 registers of FP8 weight bytes (rows), B = shared descriptor (BM tokens); per
    K128 step 4 K32 x 2 slabs, for W1 and for W2: 32 wgmma in the code. The test model's 1x128x128 recipe has one weight
    scale per slab and K128 step, so its K32 MMAs chain per K128 (``Role4Config.block_k128``): one commit group per
    step (4 in the code), 24 of the 32 wgmma continuing a partial (scale-d true); the 1x1x32 build keeps a fresh partial
    per K32 (16 groups, scale-d false throughout)."""
    from dataclasses import replace

    from gcmoe_build.compile import compile_variant
    from gcmoe_build.variants import FrozenParams

    for bm, art in role4_arts.items():
        mmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k32\.f32\.e4m3\.e4m3 \{[^}]*\}, "
                          r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1;", art.ptx)
        assert len(mmas) == 32 and all(int(m) == bm for m in mmas), (bm, len(mmas))
        assert art.ptx.count("wgmma.commit_group.sync.aligned") == 4 and art.ptx.count("setp.ne.b32 p, 1, 0") == 24
    v = next(v for v in _role4_variants() if v.params["bm"] == 16)
    per_k32 = compile_variant(replace(v, params=FrozenParams({**dict(v.params), "recipe_shared": "1x1x32"})))
    assert per_k32.ptx.count("wgmma.commit_group.sync.aligned") == 16 and "setp.ne.b32 p, 1, 0" not in per_k32.ptx
    for art in [*role4_arts.values(), per_k32]:
        assert "wgmma.fence.sync.aligned" in art.ptx and "wgmma.commit_group.sync.aligned" in art.ptx
        assert "fence.proxy.async.shared::cta" in art.ptx
        # FP8 weights: 16-byte cp.async copies through the warp's ring, no FP4 decode (the role2 decoder's prmt
        # tables)
        assert "cp.async.cg.shared.global" in art.ptx and "prmt.b32" not in art.ptx


def test_bounded_waits_and_protocol(role4_arts):
    """W2 waits with ld.acquire + %globaltimer bound and a trap record (code 14); W1 publishes with
    red.release.gpu.add after a gpu fence; tasks come from relaxed atomic tickets (the next one claimed at the top of
    the current task: no acquire, so no L1 invalidation waits on it there); split arrivals and the exit count are
    atom.acq_rel; the last CTA resets with relaxed stores."""
    from gcmoe_build.kernels.sm90.role4_shared import CODE_SHARED_W1
    from gcmoe_runtime.workspace.trap import TRAP_CODES

    assert CODE_SHARED_W1 == 14 and "role4" in TRAP_CODES[14]
    for bm, art in role4_arts.items():
        ptx = art.ptx
        assert "ld.acquire.gpu.global.u32" in ptx and "%globaltimer" in ptx and "trap;" in ptx
        assert re.search(r"st\.relaxed\.sys\.u32 \[%rd\d+\+4\], 14;", ptx), "trap record with code 14"
        i_fence = ptx.find("fence.acq_rel.gpu")
        i_pub = ptx.find("red.release.gpu.global.add.u32")
        assert 0 <= i_fence < i_pub
        assert ptx.count("atom.relaxed.gpu.global.add.u32") == 2  # the first claim, the next task's claim
        assert ptx.count("atom.acq_rel.gpu.global.add.u32") == 2  # exit count + split arrivals
        assert "st.relaxed.gpu.global.u32" in ptx
        assert "mbarrier" not in ptx  # no mbarrier waits: the weight ring waits only for its own cp.async groups


def test_w1_activations_copied_before_weights(role4_arts):
    """A W1 task's first cp.async are its activation chunk's and its scales' (zero-filling copies with a source
    size: 16 bytes of codes, 4 bytes per FP32 scale), committed as their own group before the weight ring's
    predicated copies (session 19: behind the ring prologue the activations came back last and held the first
    MMA); the K loop then waits for all but the ring's groups."""
    from gcmoe_build.kernels.sm90.role4_shared import Role4Config

    for bm, art in role4_arts.items():
        ptx = art.ptx
        first_act = re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", ptx)
        first_ring = re.search(r"@p cp\.async\.cg\.shared\.global", ptx)
        assert first_act and first_ring and first_act.start() < first_ring.start(), bm
        commit = ptx.find("cp.async.commit_group", first_act.start())
        assert commit < first_ring.start(), bm
        assert first_act.start() < ptx.find("cp.async.ca.shared.global [%r", first_act.start()) < commit, bm
        slots = Role4Config(art.record.variant).ring_slots
        assert f"cp.async.wait_group {slots};" in ptx, bm


def test_sixteen_byte_stores_into_lane_k(role4_arts):
    """The shared partial leaves only through st.global.v4 (16 B), and so does W1's E4M3 intermediate (role2's W1
    epilogue: staged in shared memory, 8 units per token) but for its UE8M0 scale byte; the combine address is
    combine_element(k, capacity, H, token, col), the layout's combine[k][token][col]."""
    import torch

    from gcmoe_build.kernels.sm90.role4_shared import combine_element
    from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout

    for bm, art in role4_arts.items():
        ptx = art.ptx
        assert ptx.count("st.global.v4.u32") == max(1, bm * 32 // 256) + (bm * 8 + 255) // 256, bm
        assert "st.global.u16" not in ptx and "st.global.b16" not in ptx
        assert ptx.count("st.global.u8") == 1
        # split-K (test-tiny: W1 in 2, W2 unsplit): FP32 partial stores of the BM accumulators of a W1 task, and
        # the last arrival's L2-only loads of them (both splits' at once below BM 64: the hand-over's load groups)
        assert art.record.extra["kernel"]["split_w1"] == 2 and art.record.extra["kernel"]["split_w2"] == 1
        group = 2 if bm < 64 else 1
        assert ptx.count("st.global.f32") == bm and ptx.count("ld.global.cg.f32") == bm * group, bm
    lay = WorkspaceLayout.build(LayoutSpec(arch="sm_90a", world_size=1, num_experts=16, topk=4, hidden=512,
                                           intermediate=256, capacity=256, bm_candidates=(8, 16, 32, 64),
                                           compute_sms=128, shared_experts=True))
    buf = torch.zeros(lay.total_bytes, dtype=torch.uint8)
    comb = lay.view(buf, "combine")
    assert comb.shape == (5, 256, 512)
    for token, col in ((0, 0), (17, 264), (255, 504)):
        comb.zero_()
        comb[4, token, col] = 1.0
        flat = buf[lay.offset("combine"):].view(torch.bfloat16)
        assert float(flat[combine_element(4, 256, 512, token, col)]) == 1.0
        assert (combine_element(4, 256, 512, token, col) * 2) % 16 == 0  # 16-byte aligned (col multiple of 8)


def test_schema_matches_what_moe_packs(role4_arts):
    """The by-value parameters are names the runtime provides: role_values' o_<region> offsets (the shared
    regions exist in a shared_experts layout) and scalars, plus the shared weight names fp8_fp4_gc_moe adds."""
    from gcmoe_build.kernels.sm90.role4_shared import (OFFSET_PARAMS, SCALAR_PARAMS_S32, SCALAR_PARAMS_U64,
                                                       WEIGHT_PARAMS)
    from gcmoe_runtime import moe
    from gcmoe_runtime.operator.values import role_values
    from gcmoe_runtime.params import KernelArgs
    from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout

    class _Ws:
        layout = WorkspaceLayout.build(LayoutSpec(arch="sm_90a", world_size=2, num_experts=16, topk=4, hidden=512,
                                                  intermediate=256, capacity=256, bm_candidates=(8, 16, 32, 64),
                                                  compute_sms=128, shared_experts=True))
        peer_desc = b"\0" * 592

    src = inspect.getsource(moe.fp8_fp4_gc_moe)
    for bm, art in role4_arts.items():
        rec = art.record
        names = [p.name for p in rec.params]
        assert names == (["peer"] + [f"o_{n}" for n in OFFSET_PARAMS] + list(WEIGHT_PARAMS) + list(SCALAR_PARAMS_U64)
                         + list(SCALAR_PARAMS_S32))
        assert rec.params[0].size == 592
        vals = role_values(_Ws(), ntok=3, err=0)
        for n in names:
            assert n in vals or f'"{n}"' in src, n
        vals.update({n: 1 << 20 for n in WEIGHT_PARAMS})
        KernelArgs.build(rec.kernel_name, rec.params, {p.name: vals[p.name] for p in rec.params})


def test_registered_and_found_the_way_moe_finds_it(role4_arts):
    """role4 is registered, in the compile plan, and every (T -> choose_shared_bm) choice matches exactly one
    compiled variant with the keys fp8_fp4_gc_moe passes."""
    from gcmoe_build.kernels import ROLES, has_kernel
    from gcmoe_runtime.heuristics import choose_shared_bm

    assert ROLES["role4"] == "gcmoe_build.kernels.sm90.role4_shared" and has_kernel("role4")
    keys = dict(arch="sm_90a", hidden=512, intermediate=256, capacity=256, dispatch_sms=4, compute_sms=128)
    for T in range(1, 257):
        bm = choose_shared_bm(T, (8, 16, 32, 64))
        hits = [a for a in role4_arts.values()
                if a.record.arch == keys["arch"] and all(a.record.variant[k] == v for k, v in keys.items() if k != "arch")
                and a.record.variant["bm"] == bm]
        assert len(hits) == 1, T


def test_task_order_and_bad_params():
    """Host mirror of the task order (all W1 tasks first, block-major, then W2) and clear config errors."""
    from gcmoe_build.kernels.sm90.role4_shared import Role4Config, task_coords

    assert [task_coords(t, 2, 2, 2) for t in range(8)] == [
        (True, 0, 0, 0), (True, 0, 1, 0), (True, 1, 0, 0), (True, 1, 1, 0), (False, 0, 0, 0), (False, 0, 1, 0),
        (False, 1, 0, 0), (False, 1, 1, 0)]
    base = dict(hidden=512, intermediate=256, top_k=4, capacity=256, bm=16, shared_experts=1,
                recipe_shared="1x128x128")
    assert Role4Config(base).nt1 == 2 and Role4Config(base).nt2 == 2
    # split-K: every (W1|W2, block, tile, split) exactly once, W1 before W2, a tile's splits consecutive; the
    # split runs while the blocks fit the 64-row partials region
    glm = Role4Config({**base, "hidden": 6144, "intermediate": 2048, "bm": 8})
    assert (glm.s1, glm.s2, glm.ch1, glm.ch2) == (8, 4, 8, 4)
    assert glm.splits(64) == (8, 4) and glm.splits(65) == (1, 1)  # 9 blocks of BM 8: past the arrival counters
    glm64 = Role4Config({**base, "hidden": 6144, "intermediate": 2048, "bm": 64})
    assert [glm64.splits(t) for t in (64, 128, 256)] == [(8, 4), (4, 2), (2, 1)]  # fewer splits for more rows
    for ntok in (1, 8, 37, 64, 65, 256):
        nblk = -(-ntok // glm.bm)
        s1, s2 = glm.splits(ntok)
        n = nblk * (glm.nt1 * s1 + glm.nt2 * s2)
        coords = [task_coords(t, nblk, glm.nt1, glm.nt2, s1, s2) for t in range(n)]
        want = {(True, b, j, sp) for b in range(nblk) for j in range(glm.nt1) for sp in range(s1)}
        want |= {(False, b, j, sp) for b in range(nblk) for j in range(glm.nt2) for sp in range(s2)}
        assert len(coords) == len(set(coords)) and set(coords) == want, ntok
        first_w2 = next(i for i, c in enumerate(coords) if not c[0])
        assert all(c[0] for c in coords[:first_w2]) and not any(c[0] for c in coords[first_w2:])
        assert all(coords[i][3] == i % s1 for i in range(first_w2))
    for bad, msg in (({"recipe_shared": "1x64x64"}, "recipe_shared"), ({"shared_experts": 2}, "shared_experts"),
                     ({"bm": 12}, "BM"), ({"intermediate": 384}, "intermediate"), ({"activation": "gelu"}, "activation")):
        with pytest.raises(ValueError, match=msg):
            Role4Config({**base, **bad})


def test_weight_ring_copies_coalesced_and_waits_per_step(role4_arts):
    """Session 16: role4's FP8 weights reach the MMAs through each warp's ``cp.async`` ring (``role4_mma.WeightRing``),
    not through global loads into registers: 16-byte ``cp.async.cg`` copies (2 slabs x 4 code copies + 1 scale copy per
    step, predicated), one commit group per step, ``wait_group`` ring_slots - 1 before each step's reads, then
    ``bar.warp.sync``; no ``ld.global.nc`` is left (the register stream). The ring fits next to the task areas with
    ``MAX_RING_SLOTS`` slots at every BM of the shipped shapes up to 32, and one fewer at BM 64 (session 17: the second
    activation chunk buffer takes a slot's room there)."""
    from gcmoe_build.kernels.sm90.role_common import SMEM_LIMIT
    from gcmoe_build.kernels.sm90.role4_mma import MAX_RING_SLOTS
    from gcmoe_build.kernels.sm90.role4_shared import Role4Config

    for bm, art in role4_arts.items():
        slots = Role4Config(art.record.variant).ring_slots
        assert slots == MAX_RING_SLOTS
        assert "ld.global.nc" not in art.ptx
        assert art.ptx.count("cp.async.cg.shared.global") >= 9 * (slots + 1)
        # the only L1-allocating copies are the W1 activation scales' 4-byte ones (w1_task_top), never weights
        assert set(re.findall(r"cp\.async\.ca\.shared\.global \[[^]]+\], \[[^]]+\], (\d+)", art.ptx)) == {"4"}
        assert f"cp.async.wait_group {slots - 1};" in art.ptx and "bar.warp.sync" in art.ptx
        assert art.ptx.count("cp.async.commit_group;") >= 2 * (slots + 1)  # W1's and W2's prologue + refill
    base = dict(top_k=8, capacity=256, shared_experts=1, recipe_shared="1x128x128")
    for h, i in ((6144, 2048), (5120, 2304)):
        for bm in (8, 16, 32, 64):
            cfg = Role4Config({**base, "hidden": h, "intermediate": i, "bm": bm})
            assert cfg.ring_slots == MAX_RING_SLOTS - (bm == 64) and cfg.smem_bytes <= SMEM_LIMIT, (h, bm)


def test_activation_chunks_double_buffered(role4_arts):
    """Session 17: a task's K chunks alternate between two shared-memory buffers (both chunk configs with
    ``act_buffers=2``, each buffer within half the K budget, the areas sized for both); each chunk after the first is
    copied by 16-byte ``cp.async.cg`` (zero-filled for padded tokens) as its own commit group and waited for with
    ``wait_group`` = the chunk's K128 steps (the ring groups committed after it), so the ring's steps stay in flight."""
    from gcmoe_build.kernels.sm90.role2_config import task_smem_offsets
    from gcmoe_build.kernels.sm90.role4_shared import Role4Config

    for bm, art in role4_arts.items():
        cfg = Role4Config(art.record.variant)
        for mc in (cfg.w1s, cfg.w2s):
            assert mc.act_buffers == 2 and mc.act_buffer_bytes * 2 <= 96 * 1024, bm
            assert f"cp.async.wait_group {mc.kc // 128};" in art.ptx, (bm, mc.mode, mc.kc)
        o = task_smem_offsets(cfg.w1s, cfg.w2s)
        assert o["asc"] - o["act"] >= 2 * max(cfg.w1s.act_buffer_bytes, cfg.w2s.act_buffer_bytes)
        assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;", art.ptx), bm


def test_weight_ring_swizzle_is_conflict_free():
    """The ring's 16-byte chunk placement (``role4_mma._swizzle``) is a permutation of each warp's 128 chunks and puts
    the chunks of every eight lanes on eight different bank groups both when the warp copies (lane l: chunk 32q + l)
    and when it reads (lane l: chunks 4l .. 4l + 3), so neither the copies nor the reads serialise."""
    from gcmoe_build.kernels.sm90.role4_mma import _swizzle

    assert sorted(_swizzle(c) for c in range(128)) == list(range(128))
    for q in range(4):  # copies
        for lanes in range(0, 32, 8):
            assert len({_swizzle(32 * q + l) % 8 for l in range(lanes, lanes + 8)}) == 8
    for j in range(4):  # reads
        for lanes in range(0, 32, 8):
            assert len({_swizzle(4 * l + j) % 8 for l in range(lanes, lanes + 8)}) == 8


def test_split_handover_loads_its_partials_in_groups(role4_arts):
    """Session 17: the last arrival of a split tile loads RED_GROUP splits' FP32 partials at once (predicated,
    L2-only ``ld.global.cg``; 64 floats per thread in flight) and adds them in split order; at BM 64 (one split at a
    time) the plain loop stays."""
    from gcmoe_build.kernels.sm90.role4_shared import Role4Config

    for bm, art in role4_arts.items():
        cfg = Role4Config(art.record.variant)
        group = max(1, min(max(cfg.s1, cfg.s2), 64 // bm))
        predicated = art.ptx.count("@p ld.global.cg.f32")
        if group > 1:
            assert predicated >= group * bm, (bm, group, predicated)  # 2 x BM/2 floats per split and thread
        else:
            assert predicated == 0 and "ld.global.cg.f32" in art.ptx, bm

