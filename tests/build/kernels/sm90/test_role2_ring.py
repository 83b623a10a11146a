"""CPU: the registered role2 (gcmoe_build/kernels/sm90/role2_ring.py) compiles through the full chain
(compile_variant: DSL -> PTX -> by-value ABI rewrite -> locked ptxas -> cubin checks) for every role2 variant of
manifests/test-tiny.yaml; its PTX has register-A wgmma, the ring protocol in the right order (receive counts ->
l1_full acquire -> W1 -> l2_full_mask release; W2 mask acquire -> 16-byte peer stores into the combine buffer ->
acq_rel completion count -> mask clear -> l2_empty / l1_empty releases), EVICT_FIRST weight streaming, and its
schema is exactly what gcmoe_runtime.moe packs. Numerical correctness is a GPU test (test_role2_ring_gpu.py)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
MANIFEST = ROOT / "manifests" / "test-tiny.yaml"


def _role2_variants():
    from gcmoe_build.manifest import load_manifest
    from gcmoe_build.variants import enumerate_variants

    return [v for v in enumerate_variants(load_manifest(MANIFEST)) if v.role == "role2"]


@pytest.fixture(scope="session")
def role2_arts():
    """Every test-tiny role2 variant compiled once per session (about 3-7 s each on one core)."""
    from gcmoe_build.compile import compile_variant

    return {(v.params["ranks"], v.params["bm"], v.params["threads"]): compile_variant(v) for v in _role2_variants()}


def _ptx(arts, bm, threads, ranks=2):
    return arts[(ranks, bm, threads)].ptx


@pytest.fixture(scope="session")
def signal_warp_arts(role2_arts):
    """``role2_arts`` with test-tiny's one-CTA BM 64 tile built as before session 60, without the epilogue warpgroup
    (its releases on the signal warp, its epilogue in the consumers: what every other one-CTA BM 32-80 build still
    is), for the protocol tests below that read the consumers' epilogue and the signal warp in the PTX; the
    epilogue-warpgroup build has its own (:func:`test_epilogue_warpgroup_protocol_order`)."""
    from gcmoe_build.compile import compile_variant
    from gcmoe_build.variants import FrozenParams, Variant

    out = dict(role2_arts)
    for key, art in role2_arts.items():
        if "epilogue_wg" in art.record.variant:
            v = next(v for v in _role2_variants() if (v.params["ranks"], v.params["bm"], v.params["threads"]) == key)
            plain = {k: x for k, x in v.params.items() if k != "epilogue_wg"}
            out[key] = compile_variant(Variant(v.role, v.arch, FrozenParams(plain), v.manifest))
    return out


def test_every_test_tiny_variant_compiles(role2_arts):
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig

    keys = set(role2_arts)
    # the heuristic reaches every BM with 256 threads (48 since session 29) and BM 64 with 384 threads, P = 1 and 2
    assert {(bm, th) for _, bm, th in keys} == {(8, 256), (16, 256), (32, 256), (48, 256), (64, 256), (64, 384)}
    assert {p for p, _, _ in keys} == {1, 2}
    for (p, bm, th), art in role2_arts.items():
        rec = art.record
        assert art.cubin[:4] == b"\x7fELF"
        assert rec.role == "role2" and rec.kernel_name == "gcmoe_sm90_role2_ring_0"
        # the 256-thread variant at BM <= 16 runs two CTAs per SM: twice the grid, <= 114 KB each, a
        # .minnctapersm 2 register cap (ptxas: <= 128 registers)
        two = th == 256 and bm <= 16
        # the one-CTA 384-thread BM 64 tile has the epilogue warpgroup (heuristics.sm90_epilogue_wg): 128 threads more
        assert rec.launch.block == (Role2RingConfig(rec.variant).launch_threads, 1, 1)
        assert rec.launch.block[0] == th + (128 if (bm, th) == (64, 384) else 0)
        assert rec.launch.grid == ("compute_sms*2" if two else "compute_sms")
        assert rec.launch.dynamic_smem == Role2RingConfig(rec.variant).smem_bytes
        assert rec.extra["kernel"]["bm"] == bm and rec.extra["kernel"]["threads"] == th
        assert rec.extra["kernel"]["ctas_per_sm"] == (2 if two else 1)
        if two:
            assert ".minnctapersm 2" in art.ptx and 2 * rec.launch.dynamic_smem <= 227 * 1024
        assert ".local" not in art.ptx  # no local arrays in the PTX (ptxas spills are reported separately)


def test_register_a_wgmma_with_bm_tokens(role2_arts):
    """Operands swapped: A = 4 decoded E4M3 registers (weight rows), B = shared descriptor (BM tokens, or the build's
    narrow N in W1's narrow copy: narrow_n_build)."""
    from gcmoe_build.kernels.sm90.role2_ring_config import narrow_n_build

    for (p, bm, th), art in role2_arts.items():
        mmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k32\.f32\.e4m3\.e4m3 \{[^}]*\}, "
                          r"\{(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}, %rd\d+", art.ptx)
        narrow = narrow_n_build(th == 384, bm, 1)  # test-tiny's 384-thread builds are one-CTA
        assert mmas and all(int(m[0]) in (bm, narrow) for m in mmas), (bm, th)
        # W1 and W2 mainloops (W1 twice with a narrow copy): 2 slabs x 4 K32 per K128, two K128 per unrolled K256
        # step, each mainloop once
        loops = 3 if narrow else 2
        assert len(mmas) == 16 * loops and sum(int(m[0]) == narrow for m in mmas) == (16 if narrow else 0)
        # the block exponents are folded into the decode (two PRMT per word: 2 slabs x 8 words x 2 K128 = 64 per
        # mainloop, plus one PRMT per scale byte: 2 slabs x 8 bytes x 2 K128 = 32), so the four K32 MMAs of a K128
        # accumulate on one register set (scale-d true for 3 of 4) in W1 and, with the intermediate's UE8M0 scale
        # per 128 (numerics reference step 4, Hopper), in W2
        assert art.ptx.count("setp.ne.b32 p, 1, 0;") == 12 * loops
        assert art.ptx.count("setp.ne.b32 p, 0, 0;") == 4 * loops
        assert art.ptx.count("prmt.b32") == (64 + 32) * loops
        assert art.ptx.count("and.b32 s, ") == art.ptx.count("mul.hi.u32 u, s, 65536;") == 32 * loops  # a mask per word


def _first(ptx, needle, start=0):
    i = ptx.find(needle, start)
    assert i >= 0, f"{needle!r} not found after offset {start}"
    return i


def test_receive_counts_at_the_protocols_scope(role2_arts):
    """P = 2 acquires the receive counts at system scope (peers stored them over NVLink), P = 1 at GPU scope
    (``role_common.peer_scope``)."""
    for (ranks, _, _), art in role2_arts.items():
        recv = "ld.acquire.sys.global.u64 v, [" if ranks > 1 else "ld.acquire.gpu.global.u64 v, ["
        assert art.ptx.count(recv) >= 2, (ranks, recv)  # the first look and the back-off loop's
        assert ("ld.acquire.sys" in art.ptx) == (ranks > 1)
    assert {ranks for ranks, _, _ in role2_arts} == {1, 2}


def test_receive_count_poll_branches_divergently(role2_arts):
    """Each lane of warp 0 polls its own experts' receive counters, so the poll's branches are plain ``bra``: a
    ``bra.uni`` there (a promise that the warp branches alike) split warp 0 of the 32-expert builds in two whenever
    role1 was still publishing, and the layer trapped or faulted (session 30, ``ring_sync`` docstring)."""
    for (ranks, _, _), art in role2_arts.items():
        recv = _first(art.ptx, "ld.acquire.sys.global.u64 v, [" if ranks > 1 else "ld.acquire.gpu.global.u64 v, [")
        poll = art.ptx[recv:_first(art.ptx, "GCMOE_R_DONE:", recv)]
        assert "bra GCMOE_R_DONE;" in poll and "bra GCMOE_R_LOOP;" in poll
        assert "bra.uni GCMOE_R_DONE" not in poll and "bra.uni GCMOE_R_LOOP" not in poll


def test_receive_count_wait_ptx_has_no_uniform_branch():
    """The helper's PTX itself (no compile): every branch but the trap record's is divergent."""
    from gcmoe_build.kernels.sm90.ring_sync import arrived_count_ptx

    ptx = arrived_count_ptx(4, 12, "gpu")
    assert ptx.count("bra.uni") == 1 and "bra.uni GCMOE_R_TRAP" in ptx  # err == 0: the same in every lane
    assert ptx.count("@p bra GCMOE_R_DONE;") == 2 and ptx.count("@p bra GCMOE_R_LOOP;") == 1


@pytest.mark.parametrize("bm,threads", [(16, 256), (64, 384)])
def test_ring_protocol_order(signal_warp_arts, bm, threads):
    ptx = _ptx(signal_warp_arts, bm, threads)
    recv = _first(ptx, "ld.acquire.sys.global.u64")  # receive counts: this replay's pool blocks
    bar0 = _first(ptx, f"bar.sync 0, {threads};", recv)
    if threads == 384:
        # the producer acquires each task (l1_full; W2: every W1 mask bit of the block), then publishes its record
        # (mbarrier.arrive on the task slot), then streams its weights; the consumers wait on the slot and make no
        # acquire of their own but the previous generation's l2_empty (task_queue, "Task records")
        l1 = _first(ptx, "ld.acquire.gpu.global.u32", bar0)
        mask_wait = _first(ptx, "ld.acquire.gpu.global.u64", l1)
        publish = _first(ptx, "mbarrier.arrive.shared::cta.b64", mask_wait)
        prod_bulk = _first(ptx, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint",
                           publish)
        assert "createpolicy.fractional.L2::evict_first" in ptx[:prod_bulk]
        # the consumers' registers: 240 from BM 48, but 232 in a turns build, whose producer claims tasks with 32
        # (role2_config.PRODUCER_REGS_TURNS)
        from gcmoe_build.kernels.sm90.role2_config import CONSUMER_REGS, CONSUMER_REGS_TURNS, CONSUMER_REGS_WIDE
        from gcmoe_build.kernels.sm90.role2_ring_config import pingpong_build
        regs = (CONSUMER_REGS_TURNS if pingpong_build(True, bm, 1) else
                CONSUMER_REGS_WIDE if bm >= 48 else CONSUMER_REGS)
        cons = _first(ptx, f"setmaxnreg.inc.sync.aligned.u32 {regs};", prod_bulk)
        l1 = _first(ptx, "mbarrier.try_wait.parity.shared::cta.b64", cons)  # the task record
        assert "ld.acquire.gpu.global.u64" not in ptx[cons:]
        # one bounded wait left (l2_empty, generation > 0): its first probe and its retry loop
        assert ptx[cons:].count("ld.acquire.gpu.global.u32") == 2
    else:  # 256 threads: every consumer acquires l1_full (+ l2_empty for generation > 0); weights from HBM
        l1 = _first(ptx, "ld.acquire.gpu.global.u32", bar0)
        assert re.search(r"ld\.global\.nc\.L1::no_allocate\.L2::cache_hint\.v4\.u32", ptx)
    w1_mma = _first(ptx, "wgmma.mma_async", l1)
    # ring_x rows staged after the acquire: plain loads (one chunk buffer), or by tensor map (the 384-thread builds
    # prefetch the next chunk into a second buffer, Role2GemmConfig.act_buffers = 2, act_tma), after the proxy fence
    # that orders the task's acquire (the producer's, handed over in the record) before the copy's async reads
    stage = "cp.async.bulk.tensor.2d" if threads == 384 else "ld.global.v4.u32"
    assert stage in ptx[l1:w1_mma]
    if threads == 384:
        assert "cp.async.cg.shared.global" not in ptx
        assert "fence.proxy.async.global;" in ptx[l1:_first(ptx, stage, l1)]
        assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 2  # the W1 and W2 maps, once each
    w1_store = _first(ptx, "st.global.u8", w1_mma)
    if threads == 384:
        _signal_warp_releases(ptx, prod_bulk, cons)
        # the consumers hand each task over at SIGNAL_BAR and release nothing themselves: W1 after its stores
        handover = f"bar.sync 2, {256 + 32};"
        w1_done = _first(ptx, handover, w1_store)
        w2_mma = _first(ptx, "wgmma.mma_async", w1_done)
        assert stage in ptx[w1_done:w2_mma]
        # ... W2 after its last ring read (ring_meta, the combine destinations), before its combine stores
        meta = _first(ptx, "ld.global.v4.u32", w2_mma)
        w2_done = _first(ptx, handover, meta)
        _first(ptx, "st.global.v4.u32", w2_done)
        assert "st.global.v4.u32" not in ptx[w2_mma:w2_done]
        for op in ("red.release", "atom.", "fence.acq_rel", "st.relaxed.gpu"):
            assert op not in ptx[cons:], op
        assert "fence.acq_rel.sys;" not in ptx
        return
    mask_set = _first(ptx, "red.release.gpu.global.or.b64", w1_store)
    # the release operation itself orders the barrier's stores (cumulative); no separate fence on the hot path
    assert "fence.acq_rel.gpu;" not in ptx[w1_store:mask_set]
    # W2 task: exactly its mask bits (acquire) before its activation chunk and MMAs
    mask_wait = _first(ptx, "ld.acquire.gpu.global.u64", mask_set)
    w2_mma = _first(ptx, "wgmma.mma_async", mask_wait)
    assert stage in ptx[mask_wait:w2_mma]
    # the completion count is released after the task's last ring read (ring_meta, the combine destinations) and
    # before its combine stores: it guards reads only; the stores reach role3 through the graph edge
    meta = _first(ptx, "ld.global.v4.u32", w2_mma)
    done = _first(ptx, "atom.release.gpu.global.add.u32", meta)
    peer_st = _first(ptx, "st.global.v4.u32", done)
    assert "st.global.v4.u32" not in ptx[w2_mma:done]
    assert "fence.acq_rel.sys;" not in ptx[w2_mma:]
    _hand_back(ptx, peer_st)


def _hand_back(ptx, start):
    """Only the generation's last W2 task (after ``start``) acquires the others' releases before it clears the mask
    and hands the block back; nothing else releases l1_empty (role1 waits for exactly +1 per consumed generation)."""
    clear = _first(ptx, "st.relaxed.gpu.global.u64", start)
    assert "fence.acq_rel.gpu;" in ptx[start:clear]
    rel = [m.start() for m in re.finditer(r"red\.release\.gpu\.global\.add\.u32", ptx)]
    assert len(rel) == 2 and all(r > clear for r in rel)  # l2_empty completion, then l1_empty (+1 per generation)
    bar0 = _first(ptx, "bar.sync 0,")
    assert ptx[bar0:].count("atom.release.gpu.global.add.u32") == 1 and "atom.acq_rel.gpu" not in ptx[bar0:]
    # the other ordered adds are a two-CTA build's placement start count (acq_rel, or release in the late mode),
    # before the first barrier (role2_ring "Placement")
    assert ptx[:bar0].count("atom.acq_rel.gpu") <= 1 and ptx[:bar0].count("atom.release.gpu") <= 1


def _signal_warp_releases(ptx, start, end):
    """384 threads (Role2GemmConfig.signal_warp): between the producer's stream and the consumers' code, the
    signal warp waits at the hand-over barrier, then W1 sets its mask bits and W2 counts l2_empty (release
    operations, no separate fence) and, last of its generation, hands the block back."""
    sig = _first(ptx, f"bar.sync 2, {256 + 32};", start)
    w1_rel = _first(ptx, "red.release.gpu.global.or.b64", sig)
    w2_rel = _first(ptx, "atom.release.gpu.global.add.u32", sig)
    assert max(w1_rel, w2_rel) < end and "fence.acq_rel.gpu;" not in ptx[sig:min(w1_rel, w2_rel)]
    _hand_back(ptx, w2_rel)
    assert _first(ptx, "red.release.gpu.global.add.u32", w2_rel) < end


@pytest.mark.parametrize("bm,threads,placed", [(16, 256, True), (64, 384, False)])
def test_two_cta_builds_take_their_index_from_where_they_run(signal_warp_arts, bm, threads, placed):
    """role2_ring "Placement": a two-CTA build reads %smid, counts the CTA in on its SM and in its class (relaxed adds)
    and then as started, all before the first barrier: acq_rel (``place_ctas`` 1), or release (2, the late start
    count) whose last starter zeroes the region after the barrier behind an acquire fence; a one-CTA build keeps
    blockIdx and has none of it."""
    ptx = _ptx(signal_warp_arts, bm, threads)
    bar0 = _first(ptx, f"bar.sync 0, {threads};")
    if not placed:
        assert "%smid" not in ptx[:bar0] and "atom.acq_rel.gpu" not in ptx and "atom.release" not in ptx[:bar0]
        return
    sm = _first(ptx, "%smid")
    adds = [m.start() for m in re.finditer(r"atom\.relaxed\.gpu\.global\.add\.u32", ptx[:bar0])]
    late = _first(ptx, "atom.release.gpu.global.add.u32", sm)
    started = _first(ptx, "atom.acq_rel.gpu.global.add.u32", sm)
    assert len(adds) == 2 and sm < adds[0] < adds[1] < min(late, started) and max(late, started) < bar0
    # each mode zeroes the region's words (one 16-byte store per four) once: the acq_rel one before the barrier,
    # the late one after it, behind the fence
    fence = _first(ptx, "fence.acq_rel.gpu;", bar0)
    zero = "st.global.v4.u32"
    assert zero in ptx[started:bar0] and zero in ptx[fence:_first(ptx, "ld.acquire.gpu.global.u32", bar0)]


@pytest.mark.parametrize("bm,threads", [(8, 256), (64, 384)])
def test_w1_and_w2_outputs_leave_in_16_byte_stores(signal_warp_arts, bm, threads):
    """W1: E4M3 bytes staged in shared memory, then 8 st.global.v4 per token over the 256 consumer threads; the only
    byte store left is the token's UE8M0 scale, written by one thread per token after its amax reduction (one IEEE
    division; the sigmoids' reciprocals are rcp.approx: the manifest's fast_math). W2 partials: BF16 staged in shared
    memory (transposed by stmatrix, one per 8 tokens), then st.global.v4 to base + offsets[src_rank] + o_combine + ...
    (the by-value peer descriptor), each token's destination computed once from its ring_meta row and read back from
    shared memory (st/ld.shared.u64); no 2-byte global stores remain."""
    ptx = _ptx(signal_warp_arts, bm, threads)
    w2_mma = _first(ptx, "wgmma.mma_async", _first(ptx, "st.global.u8"))  # the first MMA after W1's scale store
    # (from the first task's acquire: before it a two-CTA build's last starter zeroes role2_place, role2_ring
    # "Placement")
    w1 = ptx[_first(ptx, "ld.acquire.gpu.global.u32", _first(ptx, f"bar.sync 0, {threads};")):w2_mma]
    w2 = ptx[w2_mma:]
    w1_stores = [m.start() for m in re.finditer(r"st\.global\.v4\.u32", w1)]
    assert len(w1_stores) == (bm * 8 + 255) // 256
    assert all("ld.shared.v4.u32" in w1[max(0, s - 600):s] for s in w1_stores)
    assert w1.count("st.global.u8") == 1 and w1.count("div.rn.f32") == 1 and w1.count("st.shared.u8") == bm // 2
    # test-tiny's activation.fast_math: every sigmoid's reciprocal is rcp.approx (session 25), and the amax takes
    # three shuffles per token pair of a thread's two slabs (bm / 4 per thread), not per slab
    assert w1.count("rcp.approx.ftz.f32") == bm // 2 and "rcp.rn.f32" not in w1
    epi = w1[_first(w1, "rcp.approx.ftz.f32"):_first(w1, "div.rn.f32")]  # the values, then the amax partials
    assert epi.count("shfl.sync.bfly.b32") == 3 * bm // 4
    stores = [m.start() for m in re.finditer(r"st\.global\.v4\.u32", w2)]
    assert len(stores) == (bm * 32 + 255) // 256  # BM tokens x 32 units of 8 BF16 over 256 consumer threads
    assert "[gcmoe_sm90_role2_ring_0_p_o_combine]" in ptx
    meta = _first(w2, "ld.global.v4.u32")  # the token's (weight, src_rank, src_token, slot) row, once per token
    if threads == 384:  # (the 256-thread build also stages its activations with 16-byte loads)
        assert w2.count("ld.global.v4.u32") == 1
    stsm = "stmatrix.sync.aligned.m8n8.x4.trans.shared.b16"  # the BF16 staging: one per 8 tokens (session 24)
    assert meta < _first(w2, stsm) < _first(w2, "st.shared.u64") < stores[0]
    assert w2.count(stsm) == bm // 8 and "st.shared.u16" not in w2
    for s in stores:
        window = w2[max(0, s - 1500):s]
        assert "ld.shared.v4.u32" in window and "ld.shared.u64" in window  # the staged unit, the destination
    assert "st.global.u16" not in ptx


def test_epilogue_warpgroup_protocol_order(role2_arts):
    """The shipped one-CTA BM 64 build (``heuristics.sm90_epilogue_wg``; role2_ring "Epilogue warpgroup"): its
    consumers store nothing global and release nothing — each task leaves through the hand-over (an mbarrier arrive)
    — and the epilogue warpgroup's code holds every release in the protocol's order: W1's scale byte and 16-byte
    stores, its barrier, then the mask bits (a release operation); W2's ring_meta loads, its barrier, the
    ``l2_empty`` count (the generation's hand-back behind it), then the combine stores."""
    from gcmoe_build.kernels.sm90.role2_config import CONSUMER_REGS_EPI, EPILOGUE_BAR, EPILOGUE_REGS

    for ranks in (1, 2):
        art = role2_arts[(ranks, 64, 384)]
        assert art.record.variant["epilogue_wg"] == 1 and art.record.launch.block == (512, 1, 1)
        ptx = art.ptx
        epi = _first(ptx, f"setmaxnreg.dec.sync.aligned.u32 {EPILOGUE_REGS};")
        cons = _first(ptx, f"setmaxnreg.inc.sync.aligned.u32 {CONSUMER_REGS_EPI};", epi)
        epilogue, consumers = ptx[epi:cons], ptx[cons:]
        for op in ("st.global", "red.release", "atom.", "fence.acq_rel"):
            assert op not in consumers, (ranks, op)
        assert "mbarrier.arrive.shared::cta.b64" in consumers and "wgmma.mma_async" in consumers
        assert "wgmma.mma_async" not in epilogue
        bar = f"bar.sync {EPILOGUE_BAR}, 128;"
        scale = _first(epilogue, "st.global.u8")
        w1_store = _first(epilogue, "st.global.v4.u32", scale)
        _first(epilogue, "red.release.gpu.global.or.b64", _first(epilogue, bar, w1_store))
        meta = _first(epilogue, "ld.global.v4.u32")
        count = _first(epilogue, "atom.release.gpu.global.add.u32", _first(epilogue, bar, meta))
        assert "st.global.v4.u32" not in epilogue[meta:count]
        _first(epilogue, "st.global.v4.u32", count)
        _hand_back(ptx, epi + count)


def test_every_wait_is_bounded_with_a_trap_record(role2_arts):
    from gcmoe_runtime.workspace.trap import TRAP_CODES, TRAP_MAGIC

    ptx = _ptx(role2_arts, 64, 384)
    waits = ptx.count("GCMOE_R_LOOP:")
    assert waits >= 6  # recv counts, l1_full (producer, consumer), l2_empty, mask, stage full/empty
    assert ptx.count("%globaltimer") >= 2 * waits
    assert ptx.count("st.relaxed.sys.u32 [") >= 4 and str(TRAP_MAGIC) in ptx and "trap;" in ptx
    from gcmoe_build.kernels.sm90 import role2_ring_config as r2

    for code in (r2.CODE_L1_FULL, r2.CODE_L2_MASK, r2.CODE_L2_EMPTY, r2.CODE_HEADER, r2.CODE_RECV, r2.CODE_STAGE):
        assert code in TRAP_CODES


def test_schema_matches_what_moe_packs(role2_arts):
    """The kernel's by-value parameters are exactly names the runtime provides: role_values' o_<region> offsets
    and scalars, and the weight names fp8_fp4_gc_moe adds."""
    from gcmoe_build.kernels.sm90.role2_ring_config import (OFFSET_PARAMS, SCALAR_PARAMS_S32, SCALAR_PARAMS_U64,
                                                            WEIGHT_PARAMS)
    from gcmoe_runtime import moe
    from gcmoe_runtime.operator.values import role_values
    from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout

    rec = role2_arts[(2, 64, 384)].record
    names = [p.name for p in rec.params]
    assert names == (["peer"] + [f"o_{n}" for n in OFFSET_PARAMS] + list(WEIGHT_PARAMS) + list(SCALAR_PARAMS_U64)
                     + list(SCALAR_PARAMS_S32))
    assert rec.params[0].size == 592

    class _Ws:
        layout = WorkspaceLayout.build(LayoutSpec(arch="sm_90a", world_size=2, num_experts=16, topk=4, hidden=512,
                                                  intermediate=256, capacity=256, bm_candidates=(8, 16, 32, 64),
                                                  compute_sms=128))
        peer_desc = b"\0" * 592

    vals = role_values(_Ws(), ntok=3, err=0)
    src = inspect.getsource(moe.fp8_fp4_gc_moe)
    for n in names:
        assert n in vals or f'"{n}"' in src, n
    for n in WEIGHT_PARAMS:
        assert f'"{n}"' in src, n
    # sizes: u64 offsets/addresses, s32 ring geometry
    kinds = {p.name: p.size for p in rec.params}
    assert all(kinds[f"o_{n}"] == 8 for n in OFFSET_PARAMS) and all(kinds[n] == 4 for n in SCALAR_PARAMS_S32)
    assert vals["bm_stride"] == _Ws.layout.bm_max and vals["sf_stride"] == _Ws.layout.sf_rows_max
    # role2_ring "Placement": blockIdx unless the layer call runs role2 after role4's launch-order port
    assert vals["place_ctas"] == 0 and 'vals["place_ctas"] = sm90_place_ctas(T, edge)' in src
    # role2_ring "First weights to L2": none unless the layer call asks (heuristics.sm90_w1_prefetch_steps)
    assert vals["w1_prefetch_steps"] == 0
    assert 'vals["w1_prefetch_steps"] = sm90_w1_prefetch_steps(T, buffer.world_size, edge)' in src


def test_registered_and_in_the_compile_plan():
    """`gcmoe-build compile manifests/test-tiny.yaml` now builds role2 (the CLI compiles the variants whose role
    has a kernel)."""
    from gcmoe_build import pipeline
    from gcmoe_build.kernels import ROLES, has_kernel

    assert ROLES["role2"] == "gcmoe_build.kernels.sm90.role2_ring" and has_kernel("role2")
    be = pipeline.Backend()
    vs = [v for v in be.variants_of(MANIFEST) if v.role == "role2"]
    assert len(vs) == 12 and all(be.has_kernel(v.role) for v in vs)  # 6 tiles x P = 1, 2 (BM 48: session 29)


BASE = dict(act_alpha=1.0, act_clamp=10.0, act_fast_math=True, activation="swiglu", capacity=256, compute_sms=128,
            dispatch_sms=4, experts=16, hidden=512, intermediate=256, recipe_routed="e4m3-fp32k128_x_mxfp4",
            shared_experts=1, top_k=4, ranks=2, bm=16, threads=256)


@pytest.mark.parametrize("bad,needle", [
    ({"threads": 128}, "threads=128"), ({"bm": 12}, "BM=12"), ({"activation": "gelu"}, "swiglu"),
    ({"intermediate": 4352}, "2I/128 > 64"), ({"hidden": 640}, "multiple of 256"), ({"experts": 15}, "divisible"),
    ({"recipe_routed": "e4m3_x_e4m3"}, "recipe_routed"), ({"dispatch_sms": 0}, "dispatch_sms"),
    ({"k_interleave": 1}, "k_interleave=1 needs threads=384")])
def test_bad_params(bad, needle):
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig

    with pytest.raises(ValueError, match=needle):
        Role2RingConfig({**BASE, **bad})


def test_smem_layout_fits_production_shapes():
    """glm-5.2 / deepseek-v4.1-flash shapes at every BM: W2 staging fits, at least 2 weight stages (384)."""
    from gcmoe_build.kernels.sm90.role_common import SMEM_LIMIT
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig

    for h, i in ((6144, 2048), (5120, 2304), (512, 256)):
        for bm in (8, 16, 32, 64):
            for th in (256, 384):
                c = Role2RingConfig({**BASE, "hidden": h, "intermediate": i, "bm": bm, "threads": th})
                o = c.smem_offsets()
                assert o["asc"] >= bm * 512 and o["total"] <= SMEM_LIMIT
                assert th == 256 or o["stages"] >= 2
                assert c.ctas_per_sm == 1 or 2 * o["total"] <= SMEM_LIMIT  # two CTAs per SM fit


def test_committed_bundle_serves_every_call_moe_makes():
    """results/operator/bundles/test-tiny-sm90a.gcmoe (the GPU test's bundle) holds a role2 for every tile the
    heuristic picks for T = 1..capacity, found with exactly the keys fp8_fp4_gc_moe passes, and its schema packs
    from role_values + the weight names (CPU only: no cubin is loaded)."""
    from gcmoe_runtime.artifacts.bundle import open_bundle
    from gcmoe_runtime.heuristics import choose_tile
    from gcmoe_runtime.params import KernelArgs
    from gcmoe_runtime.operator.values import role_values
    from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout

    b = open_bundle(str(ROOT / "results" / "operator" / "bundles" / "test-tiny-sm90a.gcmoe"))
    for P in (1, 2):
        shape = dict(ranks=P, top_k=4, experts=16, hidden=512)
        cap = dict(capacity=256, dispatch_sms=4, compute_sms=128)
        lay = WorkspaceLayout.build(LayoutSpec(arch="sm_90a", world_size=P, num_experts=16, topk=4, hidden=512,
                                               intermediate=256, capacity=256, bm_candidates=(8, 16, 32, 64),
                                               compute_sms=128))

        class _Ws:
            layout = lay
            peer_desc = b"\0" * 592

        seen = set()
        for T in range(1, 257):
            tile = choose_tile("sm_90a", T, **shape, intermediate=256, compute_sms=128, candidates=(8, 16, 32, 64),
                               capacity=256)
            if (tile.bm, tile.threads) in seen:
                continue
            seen.add((tile.bm, tile.threads))
            rec = b.find("role2", arch="sm_90a", **shape, **cap, bm=tile.bm, threads=tile.threads, intermediate=256,
                         act_alpha=1.0, act_clamp=10.0)
            vals = role_values(_Ws(), ntok=T, err=0)
            vals.update({n: 1 << 20 for n in ("w1_tiles", "w1_scales", "w1_factor", "w2_tiles", "w2_scales",
                                              "w2_factor")})
            KernelArgs.build(rec.kernel_name, rec.params, {p.name: vals[p.name] for p in rec.params})
        assert len(seen) >= 2


def test_signal_warp_builds():
    """role2_ring_config.signal_warp_build: the 384-thread builds at two CTAs per SM or BM >= 32 hand their releases to
    the signal warp; the one-CTA BM 8 / 16 builds (the heuristic's T = 1-2) keep consumer thread 0's release (GLM-5.2
    T = 1 measured 3.9 % slower with the signal warp), with no coordinates records in shared memory."""
    from gcmoe_build.frontend.dsl import import_dsl, trace_to_ptx

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_ring import _trace_parts
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig, signal_warp_build

    assert [signal_warp_build(True, bm, c) for bm, c in ((8, 1), (16, 1), (8, 2), (16, 2), (32, 1), (64, 1))] == [
        False, False, True, True, True, True]
    assert not signal_warp_build(False, 64, 1)  # 256 threads: no producer warpgroup
    cfg = Role2RingConfig({**BASE, "bm": 8, "threads": 384, "ctas_per_sm": 1})
    assert not cfg.w1.signal_warp and not cfg.w2.signal_warp and "sigrec" not in cfg.smem_offsets()
    host, kern, fake = _trace_parts(cfg)
    ptx = trace_to_ptx(host, kern, fake, "gcmoe_sm90_role2_ring", "sm_90a").ptx
    cons = ptx.index("setmaxnreg.inc.sync.aligned.u32")
    assert "bar.sync 2," not in ptx
    assert ptx.index("red.release.gpu.global.or.b64") > cons and ptx.index("atom.release.gpu.global.add.u32") > cons
    two = Role2RingConfig({**BASE, "bm": 8, "threads": 384, "ctas_per_sm": 2})
    assert two.w1.signal_warp and two.w2.signal_warp and two.smem_offsets()["total"] == two.smem_bytes


def test_slab_groups_builds():
    """role2_ring_config.slab_groups_build: only the 384-thread two-CTA builds above BM 16 (BM 32, which the heuristic
    now runs at two CTAs) issue one slab's commit group at a time; every other ring build keeps one group per K128 step
    (the BM 8 / 16 two-CTA records and the one-CTA records are unchanged by session 15)."""
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig, slab_groups_build
    from gcmoe_runtime.heuristics import SM90_PIPELINED_TWO_CTAS_MAX_BM

    assert SM90_PIPELINED_TWO_CTAS_MAX_BM == 32
    assert [slab_groups_build(True, bm, c) for bm, c in ((8, 1), (16, 1), (8, 2), (16, 2), (32, 1), (32, 2),
                                                         (64, 1))] == [0, 0, 0, 0, 0, 1, 0]
    assert slab_groups_build(False, 32, 2) == 0
    cfg = Role2RingConfig({**BASE, "bm": 32, "threads": 384, "ctas_per_sm": 2})
    assert cfg.w1.slab_groups == cfg.w2.slab_groups == 1 and cfg.w1.signal_warp
    assert cfg.smem_bytes <= 113 * 1024
    with pytest.raises(ValueError, match="ctas_per_sm=2 must be 1, or 2 with bm <= 32"):
        Role2RingConfig({**BASE, "bm": 64, "threads": 384, "ctas_per_sm": 2})


def test_pingpong_builds(role2_arts):
    """role2_ring_config.pingpong_build: only the 384-thread one-CTA BM 64 build's warpgroups take turns at the tensor
    pipe (session 26). In its PTX every K128 step is one burst: the turn taken at the warpgroup's own named barrier
    (``bar.sync`` on a register: 3 + warpgroup), one ``wgmma.fence``, the step's 8 wgmmas, one commit, the turn
    handed over (``bar.arrive``); warpgroup 1's first hand-over is a predicated ``bar.arrive 3`` before the task loop,
    and the hand-over of each K256 call's second step is predicated (warpgroup 1 skips it at the launch's last step,
    ``K128Step.final``), so no barrier follows the task loop (session 35: one there took the K loops off the uniform
    datapath). No other build has a register-named barrier."""
    from gcmoe_build.kernels.sm90.role2_config import PINGPONG_BARS, SIGNAL_BAR
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig, pingpong_build

    assert [pingpong_build(True, bm, c) for bm, c in ((8, 1), (16, 1), (32, 1), (64, 1), (8, 2), (16, 2),
                                                      (32, 2))] == [False, False, False, True, False, False, False]
    assert pingpong_build(False, 64, 1) is False
    assert SIGNAL_BAR not in PINGPONG_BARS and 0 not in PINGPONG_BARS and 1 not in PINGPONG_BARS
    cfg = Role2RingConfig({**BASE, "bm": 64, "threads": 384, "ctas_per_sm": 1})
    assert cfg.w1.pingpong and cfg.w2.pingpong
    events = re.compile(r"(bar\.sync %r\d+, 256;)|(bar\.arrive %r\d+, 256;)|(wgmma\.mma_async)|(wgmma\.fence)|"
                        r"(wgmma\.commit_group)|(wgmma\.wait_group)")
    names = ("take", "hand", "mma", "fence", "commit", "wait")
    burst = ["take", "fence"] + ["mma"] * 8 + ["commit", "hand", "wait"]
    for (p, bm, th), art in role2_arts.items():
        seq = [names[m.lastindex - 1] for m in events.finditer(art.ptx)]
        if (bm, th) != (64, 384):
            assert "take" not in seq and "hand" not in seq, (p, bm, th)
            continue
        # W1's (twice: its narrow copy, narrow_n_build) and W2's unrolled K256 bodies, two K128 steps = two bursts
        # each, the second hand-over predicated
        assert seq == burst * 6, (p, seq)
        assert art.ptx.count(f"@p bar.arrive {PINGPONG_BARS[0]}, 256;") == 1, p  # the first turn, given once
        assert len(re.findall(r"@p bar\.arrive %r\d+, 256;", art.ptx)) == 3, p
        assert f"bar.sync {PINGPONG_BARS[0]}, 256;" not in art.ptx, p  # no close after the task loop


@pytest.mark.parametrize("inter", [256, 512])
def test_narrow_builds(inter):
    """role2_ring_config.narrow_n_build: the 384-thread one-CTA BM 48 / 64 / 80 builds (heuristics.SM90_NARROW_PASS) run
    a block of at most 32 / 48 / 64 tokens in a K loop at that wgmma N, chosen per task on the record's token count.
    Where W1's and W2's chunks match (I = 512 here, GLM-5.2's shapes: shared_loop_build) one loop per N serves both
    GEMMs (two loops); else (I = 256: W2's chunk K256 beside W1's K512) W1 has its narrow copy and W2 one loop at BM
    (three: a narrow W2 copy too, four loops, took them all off the uniform datapath, session 36)."""
    from gcmoe_build.frontend.dsl import import_dsl, trace_to_ptx

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_ring import _trace_parts
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig, narrow_n_build
    from gcmoe_runtime.heuristics import SM90_NARROW_PASS

    assert {bm: n for bm, (n, _) in SM90_NARROW_PASS.items()} == {48: 32, 64: 48, 80: 64}
    assert [narrow_n_build(True, bm, c) for bm, c in ((8, 1), (16, 2), (32, 2), (48, 1), (64, 1), (80, 1))] == [
        0, 0, 0, 32, 48, 64]
    assert narrow_n_build(False, 64, 1) == 0 and narrow_n_build(False, 48, 1) == 0
    for bm, narrow in ((48, 32), (64, 48), (80, 64)):
        cfg = Role2RingConfig({**BASE, "intermediate": inter, "bm": bm, "threads": 384, "ctas_per_sm": 1})
        assert cfg.narrow_n == narrow and cfg.w1.pingpong == (bm >= 64)
        assert cfg.shared_loop == (inter == 512) == (cfg.w1.kc == cfg.w2.kc), (bm, inter)
        host, kern, fake = _trace_parts(cfg)
        ptx = trace_to_ptx(host, kern, fake, "gcmoe_sm90_role2_ring", "sm_90a").ptx

        def wgmmas(n):
            return len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{n}k32\.", ptx))

        # one unrolled body per loop (mma_steps_per_call K128 steps x 2 slabs x 4 K32)
        w1, w2 = 8 * cfg.w1.mma_steps_per_call, 8 * cfg.w2.mma_steps_per_call
        if cfg.shared_loop:  # one loop at the narrow N, one at BM, each for W1 and W2
            assert w1 == w2 and (wgmmas(narrow), wgmmas(bm)) == (w1, w1), bm
            # each chunk's token scales: W1's FP32 or W2's byte, one load of the aligned word (ld_global_word_if), not
            # two loads of both widths into one register (the second waited for the first in W1's tasks, session 37)
            assert "and.b64 a, %rd" in ptx and "@p ld.global.b32" in ptx and "ld.global.u8" not in ptx
        else:  # W1 at the narrow N, W1 and W2 at BM
            assert (wgmmas(narrow), wgmmas(bm)) == (w1, w1 + w2), bm
        # the one branch: ntok <= narrow
        assert len(re.findall(rf"setp\.\w+\.s32\s+%p\d+, %r\d+, ({narrow}|{narrow + 1});", ptx)) == 1, bm


def test_trace_builds_stamp_each_task_and_shipped_builds_do_not(role2_arts, monkeypatch):
    """role2_ring.TRACE (a dev instrument, module docstring "Task trace"): the 384-thread build stamps ten
    ``%globaltimer`` reads (claim, ready, last stage, start, end, and the first chunk and K loop end in the W1 and the
    W2 code paths; the W1 first-chunk stamp once more in W1's narrow copy, narrow_n_build) plus, since session 48, the
    top's four parts at each of the three first-chunk sites, and the SM into ``role2_trace`` per task (relaxed u64
    stores); with TRACE off (every shipped build) the PTX reads no ``%smid`` and no ``%globaltimer`` but the bounded
    waits'."""
    from gcmoe_build.compile import compile_variant
    from gcmoe_build.kernels.sm90 import role2_ring
    from gcmoe_build.kernels.sm90.role2_ring_config import narrow_n_build

    assert role2_ring.TRACE is False
    v = next(v for v in _role2_variants() if v.params["threads"] == 384 and v.params["ranks"] == 1)
    plain = role2_arts[(1, 64, 384)].ptx
    monkeypatch.setattr(role2_ring, "TRACE", True)
    traced = compile_variant(v).ptx
    assert "%smid" not in plain and traced.count("%smid") == 1
    assert narrow_n_build(True, 64, 1)
    top_parts = 3 * 4  # role2_chunks.for_each_chunk's stamps "top" / "issued" / "scales" / "landed" at three sites
    assert traced.count("%globaltimer") == plain.count("%globaltimer") + 10 + top_parts
    assert traced.count("st.relaxed.gpu.global.u64") >= plain.count("st.relaxed.gpu.global.u64") + 11 + top_parts


@pytest.mark.parametrize("bm,ctas", [(16, 2), (64, 1)])
def test_k_interleave_builds_tables_per_step_and_permutes_chunks(bm, ctas):
    """``k_interleave`` = 1 (module docstring "K interleave"; session 50): against the plain build of the same tile, the
    K loops lose >= 60 instructions per K256 (the decode tables once per step and row instead of per K32; 16 QGMMA per
    loop iteration here) and spill nothing in them; each chunk's landed lines are permuted in shared memory (8
    ``ld.shared.v4`` + 8 ``st.shared.v4`` per line and round, then a shared proxy fence; W1's chunks only) and the scale
    byte is picked by a run-time PRMT selector. ``k_interleave`` = 2 (session 51, BM 64 here: role1 wrote W1's rows
    interleaved): the same K loops, and no chunk is permuted."""
    from gcmoe_build.compile import compile_variant
    from gcmoe_build.sass import summarize
    from gcmoe_build.variants import Variant

    arts = {}
    for il in (0, 1, 2) if bm == 64 else (0, 1):
        params = {**BASE, "hidden": 1024, "intermediate": 512, "bm": bm, "threads": 384, "ctas_per_sm": ctas,
                  "w1_split": 1, **({"k_interleave": il} if il else {})}
        arts[il] = compile_variant(Variant("role2", "sm_90a", params))
    plain, inter = (summarize(arts[il].cubin) for il in (0, 1))
    assert arts[1].record.extra["kernel"]["k_interleave"] == 1 and arts[0].record.extra["kernel"]["k_interleave"] == 0
    assert inter.spill_ops_in_mma_loops == 0 and inter.qgmma_register_a == inter.qgmma == plain.qgmma
    for (n0, q0), (n1, q1) in zip(plain.mma_loops, inter.mma_loops):
        assert q0 == q1 == 16 and n0 - n1 >= 60, (plain.mma_loops, inter.mma_loops)
    p0, p1 = arts[0].ptx, arts[1].ptx
    assert "prmt.b32 $0" not in p1 and re.search(r"prmt\.b32 %r\d+, %r\d+, 0, %r\d+;", p1)
    assert not re.search(r"prmt\.b32 %r\d+, %r\d+, 0, %r\d+;", p0)
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig

    # W1's chunk loops permute (W2's chunks come pre-interleaved from W1's epilogue): the W1 loop, or each of the two
    # shared loops (one per wgmma N, serving both GEMMs: a run-time branch on the task's GEMM)
    sites = 2 if Role2RingConfig(arts[1].record.variant).shared_loop else 1
    assert p1.count("st.shared.v4.u32") - p0.count("st.shared.v4.u32") == 8 * sites
    assert (p1.count("fence.proxy.async.shared::cta") - p0.count("fence.proxy.async.shared::cta")) == sites
    if 2 in arts:
        p2, by_role1 = arts[2].ptx, summarize(arts[2].cubin)
        assert arts[2].record.extra["kernel"]["k_interleave"] == 2
        assert p2.count("st.shared.v4.u32") == p0.count("st.shared.v4.u32")
        assert p2.count("fence.proxy.async.shared::cta") == p0.count("fence.proxy.async.shared::cta")
        assert by_role1.spill_ops_in_mma_loops == 0
        assert len(by_role1.mma_loops) == len(inter.mma_loops)
        assert all(n2 <= n1 + 4 for (n2, _), (n1, _) in zip(by_role1.mma_loops, inter.mma_loops)), (
            by_role1.mma_loops, inter.mma_loops)


def test_epilogue_warpgroup_ring_build():
    """Variant parameter ``epilogue_wg`` (session 60, ``heuristics.SM90_EPILOGUE_WG_BM``, shipped at BM 64): the
    GLM-5.2-shaped one-CTA BM 64 build gets a fourth warpgroup (512 threads in the launch facts and the PTX) that runs
    the epilogues and every release (no signal warp), the hand-over area before the weight stages; ``setmaxnreg``
    24 / 216 / 56 with each region's code under its cap; its MMA loops stay on the uniform datapath (no ``R2UR``), with
    no spill and no more instructions than the build without it (the hand-over ends with the CTA's last task, not with
    a marker after the consumers' loop: that took every K-loop descriptor off the uniform datapath). Refused outside
    its rule, by name."""
    from gcmoe_build import sass
    from gcmoe_build.compile import compile_variant
    from gcmoe_build.kernels.sm90.role2_config import (CONSUMER_REGS_EPI, EPILOGUE_BAR, EPILOGUE_REGS,
                                                       PRODUCER_REGS_EPI)
    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig
    from gcmoe_build.variants import FrozenParams, Variant

    glm = {**BASE, "hidden": 6144, "intermediate": 2048, "experts": 256, "top_k": 8, "ranks": 1, "bm": 64,
           "threads": 384, "ctas_per_sm": 1, "w1_split": 1, "k_interleave": 2}
    base, ewg = Role2RingConfig(glm), Role2RingConfig({**glm, "epilogue_wg": 1})
    assert (base.launch_threads, ewg.launch_threads) == (384, 512) and ewg.threads == 384
    assert base.w1.signal_warp and not ewg.w1.signal_warp and ewg.w1.epilogue_warpgroup and ewg.w2.epilogue_warpgroup
    so = ewg.smem_offsets()
    assert "handover" not in base.smem_offsets() and so["handover"] + ewg.w1.handover_bytes <= so["stage"]
    assert so["stages"] == 7 and so["total"] <= ewg.w1.smem_limit
    for bad in ({"bm": 48}, {"bm": 16, "ctas_per_sm": 2}, {"threads": 256}, {"epilogue_wg": 2}):
        with pytest.raises(ValueError, match="epilogue_wg"):
            Role2RingConfig({**glm, **bad, "epilogue_wg": bad.get("epilogue_wg", 1)})
    arts = {e: compile_variant(Variant("role2", "sm_90a", FrozenParams({**glm, **({"epilogue_wg": 1} if e else {})}),
                                       "test")) for e in (0, 1)}
    rec = arts[1].record
    assert rec.launch.block == (512, 1, 1) and rec.launch.dynamic_smem == ewg.smem_bytes
    ptx = arts[1].ptx
    assert ".reqntid 512, 1, 1" in ptx and f"bar.sync {EPILOGUE_BAR}, 128;" in ptx
    assert "red.release.gpu.global.or.b64" in ptx and "atom.release.gpu.global.add.u32" in ptx
    summ = {e: sass.summarize(a.cubin) for e, a in arts.items()}
    assert summ[1].qgmma == summ[1].qgmma_register_a == summ[0].qgmma
    assert summ[1].spill_ops_in_mma_loops == 0 and all(n == 0 for n in summ[1].r2ur_in_mma_loops)
    assert all(n1 <= n0 for (n1, _), (n0, _) in zip(summ[1].mma_loops, summ[0].mma_loops)), (summ[0], summ[1])
    regions = sass.setmaxnreg_regions(sass.disassemble(arts[1].cubin))
    assert sorted(cap for cap, _ in regions) == sorted((PRODUCER_REGS_EPI, CONSUMER_REGS_EPI, EPILOGUE_REGS))
    assert all(used < cap for cap, used in regions), regions
