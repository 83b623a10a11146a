"""role3 (finalize) on sm_90a: the bookkeeping half beside the combine half (paper §4.6,
Algorithm 1 lines 10-11). One kernel, 384 threads = 4 bookkeeping warps + 8 combine warps; grid =
finalize_sms (the runtime's rule, ``gcmoe_runtime.graph.finalize_sms``); no trailing cross-rank
barrier.

Bookkeeping half (warps 0-3 of CTA 0 only; the other CTAs' warps 0-3 exit at once):

* combine readiness: ``combine_ready[my_rank] := phase`` on every peer (release, system scope,
  after a system fence; also on ranks with no routed tokens). ``phase`` is this replay's tag-1
  phase (``tag1_barrier[P]``, bumped by role1 once per replay on every rank), so readiness values
  are generation-tagged and persistent: no reset. Not at P = 1: there every writer of the combine
  buffer (role2, role4) is an earlier node of this GPU's graph, so the edge into role3 already
  orders their stores; the fence, release and polls are compiled out (session 18);
* consume this generation's receive counts (``recv_count[parity]``; both parities' cells are loaded with the
  parity word, in one latency round, and picked after they land — session 44): per local expert the high
  words (contributors) must sum to ``dispatch_sms * P`` (every source CTA adds to every expert) —
  otherwise trap with code 5; optionally store the expert's received token count in
  ``expert_stats`` (``stats != 0``); zero the counts and prefixes of this parity;
* reset the ring signals (``l1_full_count``, ``l1_empty_count``, ``l2_full_mask`` (the W1
  bitmap), ``l2_empty_count``) of ``ring_blocks`` blocks and the send counters, then flip
  ``recv_parity`` (after a named barrier of the four warps): the next replay's role1 publishes
  into the other parity buffer.

Combine half (warps 4-11 of every CTA): each warp first waits until every peer's readiness
reaches ``phase`` (acquire, system scope, bounded: trap code 4; P > 1 only), then takes work items
``(token t, chunk c)`` — as many chunks per token as the combine warps can each take one item of
(:func:`chunks_per_token`: the largest divisor ``d`` of ``H / 256`` with ``ntok x d <= warps``; a chunk a
multiple of 256 BF16 keeps the lanes' 16-byte units aligned). Small calls are a chain of dependent load
rounds, one per 32 units a warp owns (session 43: at most 4 chunks per token left 6 rounds of 9 slot loads per
warp at GLM-5.2 T = 1-64; up to 24 chunks leave one). A token's valid slots are
its routed slots with ``0 <= topk_idx < E`` (a warp ballot) plus slot ``k`` when the layer has a
shared expert; lanes load 16 bytes (8 BF16) of every slot of ``combine[slot][t]`` and the token's expert
indices — all of a unit's loads before a warp sync and then the ballot and the sums, so they are in flight
together (one latency round; ``gcmoe_build.sass.load_rounds``; an invalid slot's words are masked to zero,
contributing +0 as when it was not loaded) — and accumulate them in FP32 in slot order, then pack 8 BF16 (RNE) and store them (``st.shared.v4``)
into the warp's private shared-memory chunk buffer. The chunk (``2 H / chunks`` bytes) leaves with
one bulk copy: every lane ``fence.proxy.async.shared::cta`` (its shared stores -> async proxy),
``bar.warp.sync``, then lane 0 issues ``cp.async.bulk.global.shared::cta.bulk_group [y + (t H +
c H / chunks) * 2], [buf], 2 H / chunks`` and ``cp.async.bulk.commit_group``. Each warp owns
``NBUF`` buffers of ``2 H`` bytes (the largest chunk, 1 chunk per token) used round robin: before a
warp writes a buffer again, lane 0 waits ``cp.async.bulk.wait_group.read NBUF-1`` (the copy that
last read it has finished reading) and the warp syncs; lane 0 waits ``cp.async.bulk.wait_group 0``
(writes performed) before the kernel exits. ``NBUF`` = 2 (double buffering) when
``8 warps x 2 x 2 H`` bytes fit the 227 KiB opt-in limit (H <= 7264: every shipped shape), else 1;
dynamic shared memory = ``8 x NBUF x 2 H`` bytes (``Role3Config.smem_bytes``). Numerics are those of
the former direct ``st.global.v4`` path (same FP32 slot-order sums, same RNE pack, same bytes in
``y``): only the store path changed. GPU-verified by every layer accuracy suite since it landed (P = 1 and P = 2,
both production models and the test model, routed and shared).

Variant params: hidden, experts, top_k, ranks, capacity, dispatch_sms, shared_experts (count; >0
means slot k is reduced), compute_sms (unused by the code).
"""
# no `from __future__ import annotations`: the DSL evaluates kernel annotations at trace time

from .role_common import SMEM_LIMIT, int_param, peer_abi_plan, peer_scope

ROLE = "role3"
NAME_PREFIX = "gcmoe_sm90_role3_finalize"
BOOK_WARPS = 4
COMBINE_WARPS = 8
THREADS = 32 * (BOOK_WARPS + COMBINE_WARPS)


CODE_COMBINE_READY = 4
CODE_ARRIVAL = 5

OFFSET_PARAMS = ("topk_idx", "combine", "recv_count", "recv_prefix", "recv_parity", "tag1_barrier",
                 "combine_ready", "l1_full_count", "l1_empty_count", "l2_full_mask", "l2_empty_count",
                 "send_count", "expert_stats")
SCALAR_PARAMS_U64 = ("y", "err", "timeout_ns")
SCALAR_PARAMS_S32 = ("ntok", "ring_blocks", "stats")


class Role3Config:
    def __init__(self, params):
        p = dict(params)

        def need(name, minimum=1):
            return int_param(p, name, "role3", minimum)

        self.hidden, self.experts, self.topk = need("hidden"), need("experts"), need("top_k")
        self.ranks, self.capacity, self.dispatch_sms = need("ranks"), need("capacity"), need("dispatch_sms")
        self.shared = need("shared_experts", 0) > 0
        if self.hidden % 256:
            raise ValueError(f"role3: hidden={self.hidden} must be a multiple of 256 (32 lanes x 8 BF16)")
        if self.experts % self.ranks:
            raise ValueError(f"role3: experts={self.experts} not divisible by ranks={self.ranks}")
        if self.topk + 1 > 32:
            raise ValueError(f"role3: top_k={self.topk}: k + 1 must be <= 32 (one lane per combine slot)")
        if COMBINE_WARPS * self.chunk_bytes > SMEM_LIMIT:
            raise ValueError(f"role3: hidden={self.hidden}: {COMBINE_WARPS} combine warps x {self.chunk_bytes} B "
                             f"chunk buffers exceed the {SMEM_LIMIT} B shared-memory limit")

    @property
    def slots(self):
        return self.topk + (1 if self.shared else 0)

    @property
    def chunk_bytes(self):
        """One warp buffer: the largest chunk, a whole BF16 row of ``y`` (1 chunk per token)."""
        return 2 * self.hidden

    @property
    def nbuf(self):
        """Chunk buffers per combine warp: 2 (double buffering) where they fit, else 1."""
        return 2 if COMBINE_WARPS * 2 * self.chunk_bytes <= SMEM_LIMIT else 1

    @property
    def smem_bytes(self):
        return COMBINE_WARPS * self.nbuf * self.chunk_bytes


def chunk_options(hidden: int) -> tuple[int, ...]:
    """The chunk counts a token's BF16 row may be cut into, ascending: the divisors of ``hidden / 256`` (each
    chunk a multiple of 32 lanes x 8 BF16)."""
    groups = hidden // 256
    return tuple(d for d in range(1, groups + 1) if groups % d == 0)


def chunks_per_token(ntok: int, warps: int, hidden: int) -> int:
    """The kernel's choice (host mirror, for tests and models): the most chunks per token that still give every
    work item its own combine warp, 1 when even whole tokens outnumber the warps."""
    fit = [d for d in chunk_options(hidden) if ntok * d <= warps]
    return fit[-1] if fit else 1


def abi_plan(ranks: int):
    readiness = ("st.release.sys.global.u64", "ld.acquire.sys.global.u32") if ranks > 1 else ()
    return peer_abi_plan(OFFSET_PARAMS, SCALAR_PARAMS_U64, SCALAR_PARAMS_S32, readiness + (
        "vote.sync.ballot.b32",
        "cvt.rn.bf16x2.f32", "st.shared.v4.u32", "fence.proxy.async.shared::cta",
        "cp.async.bulk.global.shared::cta.bulk_group", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group.read",
        "cp.async.bulk.wait_group 0", "trap"))


def build(variant):
    from gcmoe_build.frontend.dsl import import_dsl
    from gcmoe_build.kernels import KernelBuild
    from gcmoe_runtime.artifacts.record import LaunchFacts

    cfg = Role3Config(variant.params)
    import_dsl(variant.arch)
    host, kernel, fake = _trace_parts(cfg)
    return KernelBuild(
        host=host, kernel=kernel, args=fake, name_prefix=NAME_PREFIX, abi=abi_plan(cfg.ranks),
        launch=LaunchFacts(block=(THREADS, 1, 1), cluster=(1, 1, 1), dynamic_smem=cfg.smem_bytes,
                           grid="finalize_sms"),
        extra={"role": ROLE, "threads": THREADS, "slots": cfg.slots, "nbuf": cfg.nbuf,
               "offset_params": list(OFFSET_PARAMS)},
    )


def _trace_parts(cfg):
    import cutlass
    import cutlass.cute as cute
    from cutlass import Float32, Int32, Int64, Uint8
    from cutlass.cutlass_dsl import T, dsl_user_op

    from gcmoe_build.kernels.common.peer import PeerDesc, fake_peer_desc

    from .ptx_mem import (bar_sync, bulk_s2g_n, bulk_wait_read, fence_proxy_async_shared, launch_coords,
                          ld_global_v4, st_shared_v4)
    from .role1_sync import (bulk_commit, bulk_wait, fence_sc_sys, globaltimer, ld_peer_u64, ld_u32,
                             st_release_peer_u64, st_u32, st_u64, syncwarp, trap_with_record, wait_geq_u32)
    from .wgmma_rs import _asm, _v

    P, E, K, H, CAP, D = cfg.ranks, cfg.experts, cfg.topk, cfg.hidden, cfg.capacity, cfg.dispatch_sms
    EL = E // P
    NSLOT = cfg.slots
    SCOPE = peer_scope(P)
    SHARED = cfg.shared
    UNITS = H // 8  # 16-byte units of a BF16 row
    CHUNKS = chunk_options(H)
    BOOK = 32 * BOOK_WARPS
    NEL = (EL + BOOK - 1) // BOOK  # local experts per bookkeeping thread (the last round may be partial)
    NBUF, CHUNK_BYTES, SMEM = cfg.nbuf, cfg.chunk_bytes, cfg.smem_bytes

    def peer_ws(peer, r):
        pd_ = PeerDesc(peer)
        return pd_.base() + pd_.offset(r)

    @dsl_user_op
    def bf16_lo(w, *, loc=None, ip=None) -> Float32:
        return Float32(_asm("{\n.reg .b32 t;\nshl.b32 t, $1, 16;\nmov.b32 $0, t;\n}", "=f,r", [_v(w)], 1,
                            T.f32(), volatile=False)[0])

    @dsl_user_op
    def bf16_hi(w, *, loc=None, ip=None) -> Float32:
        return Float32(_asm("{\n.reg .b32 t;\nand.b32 t, $1, 0xFFFF0000;\nmov.b32 $0, t;\n}", "=f,r", [_v(w)], 1,
                            T.f32(), volatile=False)[0])

    @dsl_user_op
    def pack_bf16x2(lo, hi, *, loc=None, ip=None) -> Int32:
        return Int32(_asm("cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", [_v(hi, Float32), _v(lo, Float32)], 1,
                          volatile=False)[0])

    @dsl_user_op
    def ld_expert_if(addr, pred, *, loc=None, ip=None) -> Int32:
        """A slot's expert index when ``pred != 0``, else -1 (predicated, no branch)."""
        return Int32(_asm("{\n.reg .pred p;\nsetp.ne.s32 p, $2, 0;\nmov.b32 $0, -1;\n@p ld.global.s32 $0, [$1];\n}",
                          "=r,l,r", [_v(addr, Int64), _v(pred)], 1)[0])

    @dsl_user_op
    def ballot_expert(e, *, loc=None, ip=None) -> Int32:
        """Warp ballot of ``0 <= e < E`` (a routed slot's expert index is valid): the test and the vote in one
        statement, used after the unit's loads (its index load is the last of them)."""
        return Int32(_asm("{\n.reg .pred p;\nsetp.ge.s32 p, $1, 0;\nsetp.lt.and.s32 p, $1, " + str(E) + ", p;\n"
                          "vote.sync.ballot.b32 $0, p, -1;\n}", "=r,r", [_v(e)], 1)[0])

    @cute.kernel
    def kernel(peer: cute.Pointer, o_topk_idx: Int64, o_combine: Int64, o_recv_count: Int64, o_recv_prefix: Int64,
               o_recv_parity: Int64, o_tag1_barrier: Int64, o_combine_ready: Int64, o_l1_full_count: Int64,
               o_l1_empty_count: Int64, o_l2_full_mask: Int64, o_l2_empty_count: Int64, o_send_count: Int64,
               o_expert_stats: Int64, y: Int64, err: Int64, timeout_ns: Int64, ntok: Int32, ring_blocks: Int32,
               stats: Int32):
        tid, bid, nblk = launch_coords()
        warp = tid >> 5
        lane = tid & 31
        me = PeerDesc(peer).rank()
        ws = PeerDesc(peer).base()
        phase = ld_u32(ws + o_tag1_barrier + P * 4)

        if warp < BOOK_WARPS:
            if bid == 0:
                # ---- bookkeeping half ---------------------------------------------------------------
                if cutlass.const_expr(P > 1):  # at P = 1 the graph edge role2 -> role3 is the readiness
                    if tid == 0:
                        fence_sc_sys()  # role2's scattered partials (earlier kernels) before readiness
                        for q in cutlass.range(P):
                            st_release_peer_u64(peer_ws(peer, q) + o_combine_ready + Int64(me) * 8, Int64(phase),
                                                SCOPE)
                # the parity word and both parities' counts of every expert this thread owns in one latency round
                # (session 44; before: the parity, then each expert's counts at its address): the counts are picked
                # by the parity after they land. A thread's last expert index past EL reads expert EL - 1's cells
                # and is dropped below.
                par = ld_u32(ws + o_recv_parity) & Int32(1)
                got = []
                for j in cutlass.range_constexpr(NEL):
                    el = cutlass.min(tid + j * BOOK, Int32(EL - 1))
                    for r in cutlass.range_constexpr(P):
                        for pp in cutlass.range_constexpr(2):
                            got.append(ld_peer_u64(ws + o_recv_count + Int64((pp * EL + el) * P + r) * 8, SCOPE))
                pick = Int64(0) - Int64(par)  # all ones for parity 1
                wrong = Int32(0)  # an expert's arrivals were not D x P: trap after the loop (one call site, so
                bad = Int32(0)    # nothing of the unrolled loop is live across the trap's call)
                for j in cutlass.range_constexpr(NEL):
                    el = tid + j * BOOK
                    if el < Int32(EL):
                        arrivals = Int32(0)
                        tokens = Int64(0)
                        for r in cutlass.range_constexpr(P):
                            v0, v1 = got[(j * P + r) * 2], got[(j * P + r) * 2 + 1]
                            v = v0 ^ ((v0 ^ v1) & pick)
                            cell = Int64((par * EL + el) * P + r)
                            arrivals = arrivals + Int32(v >> 32)
                            tokens = tokens + (v & Int64(0xFFFFFFFF))
                            st_u64(ws + o_recv_count + cell * 8, Int64(0))
                            st_u32(ws + o_recv_prefix + cell * 4, Int32(0))
                        if arrivals != Int32(D * P):
                            wrong = Int32(1)
                            bad = arrivals
                        if stats != Int32(0):
                            st_u64(ws + o_expert_stats + Int64(el) * 8, tokens)
                if wrong != Int32(0):
                    trap_with_record(err, CODE_ARRIVAL, Int32(D * P), bad)
                for i in cutlass.range(tid, ring_blocks, BOOK):
                    st_u32(ws + o_l1_full_count + Int64(i) * 4, Int32(0))
                    st_u32(ws + o_l1_empty_count + Int64(i) * 4, Int32(0))
                    st_u64(ws + o_l2_full_mask + Int64(i) * 8, Int64(0))
                    st_u32(ws + o_l2_empty_count + Int64(i) * 4, Int32(0))
                for e in cutlass.range(tid, E, BOOK):
                    st_u64(ws + o_send_count + Int64(e) * 8, Int64(0))
                bar_sync(1, BOOK)
                if tid == 0:
                    st_u32(ws + o_recv_parity, par ^ Int32(1))
        else:
            # ---- combine half -----------------------------------------------------------------------
            if cutlass.const_expr(P > 1):
                if lane < P:
                    wait_geq_u32(ws + o_combine_ready + Int64(lane) * 8, phase, globaltimer(), timeout_ns, err,
                                 CODE_COMBINE_READY, SCOPE)
                syncwarp()
            cw = nblk * COMBINE_WARPS
            gw = bid * COMBINE_WARPS + (warp - BOOK_WARPS)
            nch = Int32(1)
            ucnt = Int32(UNITS)
            for d in cutlass.range_constexpr(len(CHUNKS)):  # ascending: the last that fits wins (chunks_per_token)
                if ntok * CHUNKS[d] <= cw:
                    nch = Int32(CHUNKS[d])
                    ucnt = Int32(UNITS // CHUNKS[d])
            # this warp's NBUF chunk buffers (16-byte aligned: CHUNK_BYTES is a multiple of 512)
            wbuf = cute.arch.get_dyn_smem(Uint8, 128).toint() + (warp - BOOK_WARPS) * (NBUF * CHUNK_BYTES)
            it = Int32(0)
            for item in cutlass.range(gw, ntok * nch, cw):
                t = item // nch
                c = item - t * nch
                buf = wbuf + (it & (NBUF - 1)) * CHUNK_BYTES
                it = it + 1
                if lane == 0:
                    bulk_wait_read(NBUF - 1)  # the copy that last read this buffer has finished reading it
                syncwarp()
                # every lane has ucnt / 32 units (a chunk is a multiple of 32 units), so the ballot below runs
                # warp-converged in each iteration
                for u in cutlass.range(c * ucnt + lane, (c + 1) * ucnt, 32):
                    # every slot's load, then a warp sync that no load can be scheduled past, then the sums:
                    # one load round per unit (session 43: without the sync ptxas interleaved the first sums with
                    # the loads, 2-3 rounds in 5 of 12 variants, role3 +30 % at DSV-4.1-Flash T = 256). The slot
                    # loads do not wait for the token's expert indices either (session 44: they were predicated
                    # on their ballot, a round of their own): every slot's row is read and an invalid slot's words
                    # are masked to zero after the ballot, so it contributes +0 as before (bit-identical y). The
                    # indices are loaded after the rows, in the same round, and per unit: loaded once before the
                    # loop, ptxas hoisted their validity test above the row loads (a wait on the index load)
                    w = [ld_global_v4(ws + o_combine + ((Int64(s * CAP) + Int64(t)) * UNITS + Int64(u)) * 16)
                         for s in range(NSLOT)]
                    e = ld_expert_if(ws + o_topk_idx + (Int64(t) * K + Int64(lane)) * 4, lane < K)
                    syncwarp()
                    mask = ballot_expert(e)
                    if SHARED:
                        mask = mask | Int32(1 << K)
                    acc = [Float32(0.0)] * 8
                    for s in cutlass.range_constexpr(NSLOT):  # slot order: the reference's sum order
                        keep = Int32(0) - ((mask >> s) & 1)  # all ones for a valid slot
                        for q in cutlass.range_constexpr(4):
                            acc[2 * q] = acc[2 * q] + bf16_lo(w[s][q] & keep)
                            acc[2 * q + 1] = acc[2 * q + 1] + bf16_hi(w[s][q] & keep)
                    st_shared_v4(buf + (u - c * ucnt) * 16, pack_bf16x2(acc[0], acc[1]),
                                 pack_bf16x2(acc[2], acc[3]), pack_bf16x2(acc[4], acc[5]), pack_bf16x2(acc[6], acc[7]))
                fence_proxy_async_shared()  # this lane's shared stores -> the async proxy
                syncwarp()
                if lane == 0:
                    bulk_s2g_n(y + (Int64(t) * UNITS + Int64(c * ucnt)) * 16, buf, ucnt * 16)
                    bulk_commit()
            if lane == 0:
                bulk_wait(0)  # every chunk written to y before the CTA (and its shared memory) goes away

    @cute.jit
    def host(peer: cute.Pointer, o_topk_idx: Int64, o_combine: Int64, o_recv_count: Int64, o_recv_prefix: Int64,
             o_recv_parity: Int64, o_tag1_barrier: Int64, o_combine_ready: Int64, o_l1_full_count: Int64,
             o_l1_empty_count: Int64, o_l2_full_mask: Int64, o_l2_empty_count: Int64, o_send_count: Int64,
             o_expert_stats: Int64, y: Int64, err: Int64, timeout_ns: Int64, ntok: Int32, ring_blocks: Int32,
             stats: Int32):
        kernel(peer, o_topk_idx, o_combine, o_recv_count, o_recv_prefix, o_recv_parity, o_tag1_barrier,
               o_combine_ready, o_l1_full_count, o_l1_empty_count, o_l2_full_mask, o_l2_empty_count, o_send_count,
               o_expert_stats, y, err, timeout_ns, ntok, ring_blocks, stats).launch(
            grid=(1, 1, 1), block=(THREADS, 1, 1), smem=SMEM)  # the real grid (finalize_sms) is the runtime's

    fake = (fake_peer_desc(),) + tuple(Int64(0) for _ in OFFSET_PARAMS + SCALAR_PARAMS_U64) + tuple(
        Int32(1) for _ in SCALAR_PARAMS_S32)
    return host, kernel, fake
