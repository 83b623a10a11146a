import math

import pytest

from gcmoe_runtime.numerics.recipes import SM90_INTERMEDIATE_SCALE_GROUP
from gcmoe_runtime.workspace.layout import (
    LAYOUT_VERSION,
    ROLE2_TRACE_TASKS,
    ROLE2_PLACE_WORDS,
    ROLE2_TRACE_WORDS,
    REGION_ALIGN,
    LayoutError,
    LayoutSpec,
    WorkspaceLayout,
    ring_model,
)


def spec(**kw):
    base = dict(arch="sm_90a", world_size=2, num_experts=16, topk=4, hidden=1024, intermediate=512,
                capacity=64, bm_candidates=(8, 16, 32, 64), compute_sms=128)
    base.update(kw)
    return LayoutSpec(**base)


def test_regions_aligned_disjoint_and_inside_total():
    lay = WorkspaceLayout.build(spec())
    regs = sorted(lay.regions.values(), key=lambda r: r.offset)
    for a, b in zip(regs, regs[1:]):
        assert a.end <= b.offset
    assert all(r.offset % REGION_ALIGN == 0 for r in regs)
    assert regs[-1].end <= lay.total_bytes and lay.total_bytes % REGION_ALIGN == 0


def test_region_shapes_follow_the_operator():
    s = spec()
    lay = WorkspaceLayout.build(s)
    assert lay.region("x").shape == (64, 1024) and lay.region("x").dtype == "u8"
    assert lay.region("x_sf").shape == (64, 8) and lay.region("x_sf").dtype == "f32"
    assert lay.region("combine").shape == (5, 64, 1024) and lay.region("combine").dtype == "bf16"
    assert lay.region("recv_count").shape == (2, 8, 2)
    assert lay.region("l2_full_mask").dtype == "u64"
    assert lay.region("src_index").shape == (8, 2, 64)
    assert lay.region("ring_x").shape == (lay.ring_blocks, 64, 1024)
    assert lay.region("tag1_barrier").persistent and not lay.region("l1_full_count").persistent
    bw = WorkspaceLayout.build(spec(arch="sm_100a"))
    assert bw.region("x_sf").dtype == "i32" and bw.sf_rows_max == 128


def test_ring_capacity_model_matches_paper_formula():
    s = spec(capacity=256, world_size=8, num_experts=256, topk=8)
    m = ring_model(s, 32)
    assert m.assignments == 256 * 8 * min(8, 32)
    assert m.pool_blocks == math.ceil(m.assignments / 32) + 32
    assert m.live_model == (128 // 2) * 3
    assert m.live_blocks == min(m.pool_blocks, m.live_model)


def test_ring_is_sized_for_every_bm_and_refuses_bigger_partition():
    lay = WorkspaceLayout.build(spec(capacity=4096, compute_sms=64))
    assert lay.ring_blocks == max(ring_model(lay.spec, b).live_blocks for b in (8, 16, 32, 64))
    lay.check_partition(64)
    with pytest.raises(LayoutError, match="token ring undersized for compute_sms=128"):
        lay.check_partition(128)


def test_same_spec_same_digest_other_spec_other_digest():
    a, b = WorkspaceLayout.build(spec()), WorkspaceLayout.build(spec())
    assert a.digest() == b.digest() and a.to_json() == b.to_json()
    assert a.digest() != WorkspaceLayout.build(spec(capacity=65)).digest()


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(world_size=73, num_experts=73 * 2), "world_size=73"),
        (dict(num_experts=15), "not divisible by world_size"),
        (dict(num_experts=4096), "num_experts=4096"),
        (dict(topk=32, num_experts=64), "k \\+ 1 <= 32"),
        (dict(hidden=1000), "hidden=1000"),
        (dict(intermediate=4224), "2I/128 > 64"),
        (dict(bm_candidates=(12,)), "bm_candidates"),
        (dict(arch="sm_80"), "arch='sm_80'"),
    ],
)
def test_spec_rejects(kw, msg):
    with pytest.raises(LayoutError, match=msg):
        spec(**kw)


def test_torch_views_cover_the_regions():
    torch = pytest.importorskip("torch")
    lay = WorkspaceLayout.build(spec())
    buf = torch.zeros(lay.total_bytes, dtype=torch.uint8)
    c = lay.view(buf, "combine")
    assert c.dtype == torch.bfloat16 and tuple(c.shape) == (5, 64, 1024)
    lay.view(buf, "l1_full_count")[3] = 7
    assert int(buf[lay.offset("l1_full_count") + 12]) == 7
    with pytest.raises(LayoutError, match="no region 'nope'"):
        lay.view(buf, "nope")
    with pytest.raises(LayoutError, match="flat uint8"):
        lay.view(buf[:-1], "x")


def test_hopper_l2_scales_follow_the_numerics():
    """Hopper L2 scales are UE8M0 per 128 along I (numerics reference step 4, ``recipes.SM90_INTERMEDIATE_SCALE_GROUP``:
    the W1 epilogue's requantisation), token-major [rb, bm_max, I/128] u8 — the layout role2's W1 epilogue writes and
    its W2 staging reads (layout version 4 on; version 2-3 held I/32)."""
    assert SM90_INTERMEDIATE_SCALE_GROUP == 128 and LAYOUT_VERSION >= 4
    lay = WorkspaceLayout.build(spec())
    r = lay.region("l2_sf")
    assert r.dtype == "u8" and r.shape == (lay.ring_blocks, lay.bm_max, 512 // 128)
    # the ring's row strides the kernels take as by-value parameters (bm_stride, sf_stride)
    assert lay.region("ring_x").shape == (lay.ring_blocks, lay.bm_max, 1024)
    assert lay.region("ring_sf").shape == (lay.ring_blocks, 1024 // 128, lay.sf_rows_max)
    assert lay.region("ring_meta").shape == (lay.ring_blocks, lay.bm_max, 4)
    assert lay.region("l2_x").shape == (lay.ring_blocks, lay.bm_max, 512)
    bw = WorkspaceLayout.build(spec(arch="sm_100a"))
    assert bw.region("l2_sf").dtype == "i32" and bw.region("l2_sf").shape == (bw.ring_blocks, 4, 128)


PINNED_V4 = {"l2_sf": 7369984, "l1_full_count": 7388416, "combine": 7396864, "dispatch_grid": 8052224}
#: version 5 appended act_maps (1 KB) after dispatch_grid: no offset above moved, the total grew by 1 KB
PINNED_V5_TOTAL = 8053504  # version 4: 8052480; version 1-3: l1_full_count 7443712, total 8107776


def test_offsets_are_pinned():
    """Pinned for spec() at layout version 4 (the Hopper l2_sf became I/128: every region after it moved by
    ring_blocks * bm_max * (I/32 - I/128) bytes, rounded to the region alignment). A change here is a layout change:
    bump LAYOUT_VERSION and say why."""
    lay = WorkspaceLayout.build(spec())
    got = {n: lay.offset(n) for n in ("l2_sf", "l1_full_count", "combine", "dispatch_grid")}
    assert got == PINNED_V4
    # version 6 appended role2's W1 split-K regions after act_maps: everything of version 5 stays where it was;
    # version 8 gave act_maps BM 48's two maps (ten slots), version 9 BM 80's (twelve): it stays, the regions after
    # it move by 256 bytes each time
    assert lay.offset("act_maps") == PINNED_V5_TOTAL - 1024 and lay.region("act_maps").nbytes == 12 * 128
    assert lay.offset("w1_split_count") == PINNED_V5_TOTAL + 512
    # version 7 appended role2's task trace after them: nothing of version 6 moved
    assert lay.offset("role2_trace") == lay.region("w1_partials").end
    assert lay.region("role2_trace").shape == (ROLE2_TRACE_TASKS, ROLE2_TRACE_WORDS)
    # version 10 appended role2's task ticket (dynamic task claims) after the trace: nothing of version 9 moved
    assert lay.offset("role2_ticket") >= lay.region("role2_trace").end
    assert lay.region("role2_ticket").shape == (1,) and lay.region("role2_ticket").persistent
    # version 11 appended role2's placement counters after the ticket: nothing of version 10 moved
    assert lay.offset("role2_place") >= lay.region("role2_ticket").end
    # version 12 reshaped the trace (16 words a task, fewer tasks) within its bytes: nothing moved
    assert LAYOUT_VERSION == 12 and lay.region("role2_trace").nbytes == 32768 * 10 * 8
    assert list(lay.regions)[-5:] == ["w1_split_count", "w1_partials", "role2_trace", "role2_ticket", "role2_place"]
    assert lay.region("role2_place").shape == (ROLE2_PLACE_WORDS,) and lay.region("role2_place").persistent


def test_shared_expert_regions_are_appended_only_with_shared_experts():
    """role4 (issue 5): shared_l2_x / shared_l2_sf / shared_sync exist only with shared_experts=True, after every
    earlier region, and move no earlier offset (the pinned offsets above hold for both specs)."""
    plain = WorkspaceLayout.build(spec())
    shared = WorkspaceLayout.build(spec(shared_experts=True))
    assert not any(n.startswith("shared_") for n in plain.regions)
    w1_split = ["w1_split_count", "w1_partials", "role2_trace", "role2_ticket", "role2_place"]  # role2's (6, 7, 10, 11)
    before = [n for n in shared.regions if not n.startswith("shared_") and n not in w1_split]
    assert before == [n for n in plain.regions if n not in w1_split]
    assert all(shared.offset(n) == plain.offset(n) for n in before)
    assert list(shared.regions)[-10:] == ["shared_l2_x", "shared_l2_sf", "shared_sync", "shared_split_count",
                                         "shared_partials"] + w1_split
    assert list(plain.regions)[-5:] == w1_split
    assert shared.region("shared_l2_x").offset >= plain.region("dispatch_grid").end
    assert shared.region("shared_l2_x").shape == (64, 512) and shared.region("shared_l2_x").dtype == "u8"
    assert shared.region("shared_l2_sf").shape == (64, 512 // 128)
    from gcmoe_runtime.workspace.layout import SHARED_SYNC_BLOCKS

    assert shared.region("shared_sync").shape == (SHARED_SYNC_BLOCKS + 64 // 8,)
    assert shared.region("shared_sync").persistent
    assert shared.total_bytes > plain.total_bytes


@pytest.mark.parametrize("hidden,inter", [(512, 256), (6144, 2048), (5120, 2304)])
def test_shared_split_partial_slots_tile_the_region_exactly(hidden, inter):
    """role4 split-K: every (W1|W2, token block < SHARED_SPLIT_ROWS/BM, tile, split) slot of BM x 256 floats lies in
    shared_partials, no two overlap, together they fill it at every BM; one arrival word per (block, tile)."""
    from gcmoe_runtime.heuristics import SHARED_SPLIT_ROWS, shared_split_k
    from gcmoe_runtime.workspace.layout import WorkspaceLayout, shared_partial_slot

    lay = WorkspaceLayout.build(spec(hidden=hidden, intermediate=inter, shared_experts=True))
    floats = lay.region("shared_partials").shape[0]
    s1, s2 = shared_split_k(hidden, inter)
    nt1, nt2 = 2 * inter // 256, hidden // 256
    assert lay.region("shared_split_count").shape == (SHARED_SPLIT_ROWS // 8, nt1 + nt2)
    assert lay.region("shared_split_count").persistent and not lay.region("shared_partials").persistent
    for bm in (8, 16, 32, 64):
        starts = sorted(shared_partial_slot(w2, b, tile, sp, bm, hidden, inter, s)
                        for w2, nt, s in ((False, nt1, s1), (True, nt2, s2))
                        for b in range(SHARED_SPLIT_ROWS // bm) for tile in range(nt) for sp in range(s))
        assert starts == list(range(0, floats, bm * 256)), bm  # contiguous, disjoint, exactly the region


@pytest.mark.parametrize("hidden,inter", [(512, 256), (6144, 2048), (5120, 2304)])
def test_shared_split_for_more_rows_stays_in_the_region(hidden, inter):
    """Session 16: a role4 call with more than SHARED_SPLIT_ROWS rows splits less (``shared_split_for_rows``): at every
    block count and BM the slots it uses at its split lie in their GEMM's part of shared_partials, disjoint; its blocks
    fit the arrival counters; a split always covers whole K chunks; GLM-5.2 keeps 128 / 96 tasks at 2 and 4 blocks
    of BM 64 (W1 4 / 2, W2 2 / 1 splits)."""
    from gcmoe_runtime.heuristics import (SHARED_SPLIT_MAX_BLOCKS, SHARED_SPLIT_ROWS, shared_split_for_rows,
                                          shared_split_k, shared_split_options)
    from gcmoe_runtime.workspace.layout import WorkspaceLayout, shared_partial_slot

    lay = WorkspaceLayout.build(spec(hidden=hidden, intermediate=inter, shared_experts=True))
    floats = lay.region("shared_partials").shape[0]
    assert lay.region("shared_split_count").shape[0] == SHARED_SPLIT_MAX_BLOCKS
    full = shared_split_k(hidden, inter)
    nt = (2 * inter // 256, hidden // 256)
    w1_floats = SHARED_SPLIT_ROWS * 256 * nt[0] * full[0]
    for bm in (8, 16, 32, 64):
        for nblk in range(1, 256 // bm + 1):
            for g, w2 in enumerate((False, True)):
                for chunks in (full[g], 2 * full[g], 3 * full[g]):
                    d = shared_split_for_rows(full[g], chunks, nblk * bm, nblk)
                    assert d in shared_split_options(full[g], chunks) and chunks % d == 0
                    if nblk > SHARED_SPLIT_MAX_BLOCKS:
                        assert d == 1
                    if d == 1 and nblk * bm > SHARED_SPLIT_ROWS:
                        continue  # unsplit: no partials
                    starts = [shared_partial_slot(w2, b, t, sp, bm, hidden, inter, d)
                              for b in range(nblk) for t in range(nt[g]) for sp in range(d)]
                    lo, hi = (0, w1_floats) if not w2 else (w1_floats, floats)
                    assert len(set(starts)) == len(starts)
                    assert all(lo <= x and x + bm * 256 <= hi for x in starts), (bm, nblk, w2, d)
    if (hidden, inter) == (6144, 2048):
        assert [shared_split_for_rows(8, 8, r, r // 64) for r in (64, 128, 256)] == [8, 4, 2]
        assert [shared_split_for_rows(4, 4, r, r // 64) for r in (64, 128, 256)] == [4, 2, 1]


def test_whole_pool_ring_never_reuses_a_block():
    """Serialised layers (overlap off): role1 runs to completion before role2 starts, so a ring that needs a block
    twice in one replay would make role1 wait forever (trap code 6; seen on the H200 for DSV-4.1-Flash at P=2,
    T=256, gc-moe-serial). whole_pool sizes the ring to the logical pool of the smallest BM."""
    from gcmoe_runtime.workspace.layout import WorkspaceLayout

    big = dict(world_size=2, num_experts=384, topk=6, hidden=5120, intermediate=2304, capacity=256)
    live = WorkspaceLayout.build(spec(**big))
    whole = WorkspaceLayout.build(spec(**big, whole_pool=True))
    pools = [ring_model(whole.spec, b).pool_blocks for b in whole.spec.bm_candidates]
    assert live.ring_blocks < max(pools) == whole.ring_blocks
    assert whole.regions["ring_x"].shape[0] == whole.ring_blocks


@pytest.mark.parametrize("hidden,inter", [(512, 256), (6144, 2048), (4096, 2304)])
def test_w1_split_partial_slots_tile_the_region_exactly(hidden, inter):
    """role2 W1 split-K: every (pool block < W1_SPLIT_MAX_BLOCKS, W1 tile, split) slot of 256 x W1_SPLIT_BM floats
    lies in w1_partials, no two overlap, together they fill it; one arrival word per (block, tile)."""
    from gcmoe_runtime.heuristics import W1_SPLIT, W1_SPLIT_BM, W1_SPLIT_MAX_BLOCKS
    from gcmoe_runtime.workspace.layout import w1_partial_slot

    lay = WorkspaceLayout.build(spec(hidden=hidden, intermediate=inter))
    nt1 = 2 * inter // 256
    slot = 256 * W1_SPLIT_BM
    starts = sorted(w1_partial_slot(b, t, s, nt1) for b in range(W1_SPLIT_MAX_BLOCKS) for t in range(nt1)
                    for s in range(W1_SPLIT))
    assert starts == list(range(0, len(starts) * slot, slot))
    assert lay.region("w1_partials").nbytes == len(starts) * slot * 4
    assert lay.region("w1_split_count").shape == (W1_SPLIT_MAX_BLOCKS, nt1)
    assert lay.region("w1_split_count").persistent and not lay.region("w1_partials").persistent
