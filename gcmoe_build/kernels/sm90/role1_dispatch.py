"""role1 (dispatch) on sm_90a: routing accounting, the tag-1 NVLink barrier and the all-to-all pull
into the token ring (paper §4.3 "Dispatch data path", steps 1-6; Algorithm 1 lines 1-3).

Grid = the dispatch partition's SMs (``dispatch_sms``, compile time), 32 x ``Role1Config.warps`` threads: 16 warps
where their double-buffered staging fits the shared memory (every shipped shape), else 8 or 4. All
state lives in the symmetric workspace (``gcmoe_runtime.workspace.layout``); region offsets are
by-value u64 parameters filled by the runtime from that layout, so the kernel never recomputes an
offset. Peers are reached through the 592-byte peer descriptor (``base + offsets[r] + offset``).

Steps (T = ``ntok`` local tokens; CTA c owns the contiguous token range c*ceil(T/D) ..):

1. per-expert counts of the CTA's (token, slot) pairs in shared memory (atom.shared);
2. one packed atomic ``send_count[e] += (1 << 32) | count`` per expert and CTA (every CTA adds to
   every expert, count 0 included, so the high word reaches exactly dispatch_sms: role3's arrival
   check); the returned low word is this CTA's base position among the rank's tokens of ``e``;
3. second scan: each pair's routing entry ``src_token << 5 | slot`` is stored into the owner rank's
   ``src_index[e_local][my_rank][base + k]`` (peer store);
4. persistent grid barrier (``dispatch_grid``); CTA 0 publishes ``send_count[e]`` (packed) and the
   exclusive prefix of this rank's counts over global experts into the owner's
   ``recv_count/recv_prefix[parity][e_local][my_rank]``, ``parity = recv_parity`` (flipped by role3);
5. tag-1 barrier, two phases: *arrive* = bump the local persistent phase word
   (``tag1_barrier[P]``) and store it with release (system scope) into slot ``my_rank`` of every
   peer's ``tag1_barrier``; *wait* = acquire-spin until every local slot reaches the phase. Phases
   only grow, so replays need no reset; the wait traps after ``timeout_ns`` (trap code 3). A second
   grid barrier releases the other CTAs;
6. pull. The received tokens form the expert-concatenated sequence (local expert major, source rank,
   then arrival order). Its pool blocks are each expert's tokens cut into BM-token blocks, numbered
   expert by expert; pool block ``q`` is ring block ``q % ring_blocks`` of generation
   ``q // ring_blocks``. Every warp walks the sequence with a global cursor (token ``g`` for
   ``g = warp_id, warp_id + W, ...``), locates ``(e_local, src_rank, j)`` by binary search in a
   shared prefix table, reads the routing entry, and pulls the FP8 row (H bytes) and its FP32
   scale row (H/128 floats) from the source rank with two 1-D bulk copies into its private
   double-buffered shared stage (mbarrier complete_tx); lanes write the scale row transposed into
   the MN-major ring scales (``ring_sf[block][H/128][sf_stride]``: the layout role2 reads), lane 0
   writes the metadata row (routing weight bits, src_rank, src_token, slot) and, for row 0, the
   block header (local expert, valid tokens, pool block, generation); the row goes to ``ring_x``
   with a bulk store. When the store has completed the warp releases ``l1_full_count[block] += 1``
   (red.release.gpu); the last token of an expert's last block also adds the ``BM - tokens`` of
   padding, so a block of generation ``gen`` is complete exactly when ``l1_full_count == BM*(gen+1)``
   (the value role2 acquires). Before writing a block of generation ``gen > 0`` the warp releases
   its previous token (so no warp waits while holding back a token role2 may need) and then waits
   until ``l1_empty_count[block] >= gen`` (role2 adds 1 per consumed generation; trap code 6).
   Lane 0 runs a row ahead (session 53): the next row's pull leaves at the top of this row's iteration, once the
   other stage's bulk store has read it, and each row's routing entry and weight are loaded an iteration before
   their use, so no global round trip but the copy's own flight sits on the warp's row-to-row chain.

The ring's token-row stride is ``bm_stride`` (the layout's bm_max) and its scale-row stride
``sf_stride`` (the layout's sf_rows_max), both by-value parameters, so one workspace serves every
BM. No trailing barrier: role3 consumes the counts, flips the parity and resets the signals.
At P = 1 every system-scope operation of steps 4-6 (the grid barrier's fences, the tag-1 barrier, the
loads of the counts and routing entries) is GPU scope: every party is on this GPU
(``role_common.peer_scope``); and there is no second grid barrier: the receive counts are the rank's own
``send_count`` words, final after the first barrier, so every CTA builds its tables from them at once while
CTA 0 publishes the same words to ``recv_count`` / ``recv_prefix`` for role2 and role3 (session 18).

**K interleave** (variant param ``k_interleave`` = 1; ``heuristics.sm90_role1_interleaves_rows``, session 51): the
warp puts each landed row into the interleaved K order of ``gcmoe_runtime.numerics.sm90_layout`` ("K order inside a
K128 step") before its bulk store — lane ``w`` loads word ``k128_word_source_bits(w)`` of every 128-byte line (one
bank each, no conflict), one warp sync, stores word ``w`` of every line, then fences its writes for the bulk store's
async proxy — so role2's large-BM builds, whose issue-bound K loops would otherwise permute every chunk on every
task, read W1's activations as they land. The scale row (one FP32 per K128) is unchanged.

Variant params: hidden, experts, top_k, ranks, capacity, bm, dispatch_sms, k_interleave (0 or 1; absent = 0)
(+ compute_sms, recipe_routed: not used by the code). H must be a multiple of 512 (16-byte scale rows for the
bulk copy).
"""
# no `from __future__ import annotations`: the DSL evaluates kernel annotations at trace time

from .role_common import SMEM_LIMIT, int_param, peer_abi_plan, peer_scope

ROLE = "role1"
NAME_PREFIX = "gcmoe_sm90_role1_dispatch"
#: warps per CTA, the most whose staging fits first. The pull is latency-bound per warp (each warp has one token's
#: copy in flight beside one being stored: ~3.5 us per token on the H200), so more warps pull more tokens at once:
#: GLM-5.2's share at T = 256, 4 SMs x 8 warps ~9 tokens / us, x 16 warps ~13.5 (session 30 call H).
WARP_CHOICES = (16, 8, 4)
STAGES = 2  # per-warp shared staging buffers (double buffering)

#: trap codes (gcmoe_runtime.workspace.trap.TRAP_CODES)
CODE_TAG1 = 3
CODE_RING_EMPTY = 6
CODE_GRID = 7
CODE_STAGING = 8

#: by-value u64 region offsets, in parameter order (names = layout regions with an ``o_`` prefix)
OFFSET_PARAMS = ("x", "x_sf", "topk_idx", "topk_weights", "ring_x", "ring_sf", "ring_meta", "ring_block",
                 "l1_full_count", "l1_empty_count", "send_count", "recv_count", "recv_prefix", "src_index",
                 "tag1_barrier", "recv_parity", "dispatch_grid")
SCALAR_PARAMS_U64 = ("err", "timeout_ns")
SCALAR_PARAMS_S32 = ("ntok", "ring_blocks", "bm_stride", "sf_stride")


class Role1Config:
    """Compile-time shape of one role1 variant (validated; clear errors name the field)."""

    def __init__(self, params):
        p = dict(params)

        def need(name, minimum=1):
            return int_param(p, name, "role1", minimum)

        self.hidden, self.experts, self.topk = need("hidden"), need("experts"), need("top_k")
        self.ranks, self.capacity, self.bm, self.dispatch_sms = (need("ranks"), need("capacity"), need("bm"),
                                                                 need("dispatch_sms"))
        #: W1's ring rows leave in the interleaved K order (module docstring, "K interleave")
        ki = p.get("k_interleave", 0)
        if isinstance(ki, bool) or ki not in (0, 1):
            raise ValueError(f"role1: variant param k_interleave={ki!r} must be 0 or 1")
        self.k_interleave = ki == 1
        if self.hidden % 512:
            raise ValueError(f"role1: hidden={self.hidden} must be a multiple of 512 (16-byte FP32 scale rows "
                             "for the bulk copy of H/128 scales)")
        if self.experts % self.ranks:
            raise ValueError(f"role1: experts={self.experts} not divisible by ranks={self.ranks}")
        if self.experts > 2048:
            raise ValueError(f"role1: experts={self.experts} > 2048 (static signal sizing)")
        if self.topk > 31:
            raise ValueError(f"role1: top_k={self.topk} must be <= 31 (slot in 5 bits of a routing entry)")
        if self.capacity >= 1 << 26:
            raise ValueError(f"role1: capacity={self.capacity} too large for src_token << 5 in an int32")
        fits = [w for w in WARP_CHOICES if self.smem_offsets(w)["total"] <= SMEM_LIMIT]
        if not fits:
            raise ValueError(f"role1: hidden={self.hidden} experts={self.experts}: even {WARP_CHOICES[-1]} warps' "
                             f"staging needs {self.smem_offsets(WARP_CHOICES[-1])['total']} B of shared memory > "
                             f"{SMEM_LIMIT}")
        self.warps = fits[0]

    @property
    def threads(self):
        return 32 * self.warps

    @property
    def experts_local(self):
        return self.experts // self.ranks

    @property
    def sf_bytes(self):
        return 4 * (self.hidden // 128)

    @property
    def stage_bytes(self):
        return _align(self.hidden + self.sf_bytes, 128)

    def smem_offsets(self, warps=None):
        warps = self.warps if warps is None else warps
        E, EL = self.experts, self.experts_local
        cnt = 0
        base = cnt + 4 * E
        tab = base + 4 * E
        blk = tab + 4 * (E + 1)
        stage = _align(blk + 4 * (EL + 1), 1024)
        mbar = stage + warps * STAGES * self.stage_bytes
        total = mbar + warps * STAGES * 8
        return dict(cnt=cnt, base=base, tab=tab, blk=blk, stage=stage, mbar=mbar, total=total)

    @property
    def smem_bytes(self):
        return self.smem_offsets()["total"]


def _align(n, a):
    return (n + a - 1) // a * a


def abi_plan(ranks: int):
    scope = peer_scope(ranks)
    return peer_abi_plan(OFFSET_PARAMS, SCALAR_PARAMS_U64, SCALAR_PARAMS_S32, (
        "atom.shared.add.u32", "atom.relaxed.gpu.global.add.u64", f"st.release.{scope}.global.u32",
        f"ld.acquire.{scope}.global.u32", "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
        "cp.async.bulk.global.shared::cta.bulk_group", "red.release.gpu.global.add.u32", "trap"))


def build(variant):
    from gcmoe_build.frontend.dsl import import_dsl
    from gcmoe_build.kernels import KernelBuild
    from gcmoe_runtime.artifacts.record import LaunchFacts

    cfg = Role1Config(variant.params)
    import_dsl(variant.arch)
    host, kernel, fake = _trace_parts(cfg)
    return KernelBuild(
        host=host, kernel=kernel, args=fake, name_prefix=NAME_PREFIX, abi=abi_plan(cfg.ranks),
        launch=LaunchFacts(block=(cfg.threads, 1, 1), cluster=(1, 1, 1), dynamic_smem=cfg.smem_bytes,
                           grid="dispatch_sms"),
        extra={"role": ROLE, "bm": cfg.bm, "dispatch_sms": cfg.dispatch_sms, "threads": cfg.threads,
               "offset_params": list(OFFSET_PARAMS)},
    )


def _trace_parts(cfg):
    import cutlass
    import cutlass.cute as cute
    from cutlass import Int32, Int64, Uint8, const_expr
    from cutlass.cutlass_dsl import dsl_user_op

    from gcmoe_build.kernels.common.peer import PeerDesc, fake_peer_desc

    def peer_ws(peer, r):
        """Rank ``r``'s workspace base (a fresh trace-time view each use: nothing loop-carried)."""
        pd_ = PeerDesc(peer)
        return pd_.base() + pd_.offset(r)

    from .ptx_mem import (bulk_wait_read, fence_proxy_async_global, fence_proxy_async_shared, mbar_arrive_expect_tx,
                          mbar_init, mbar_init_fence)
    from .role1_sync import (
        atom_add_gpu_u64, atom_add_shared_u32, bulk_commit, bulk_g2s, bulk_s2g, bulk_wait, fence_acq_rel_gpu,
        fence_acq_rel_peer, globaltimer, grid_sync, ld_peer_u32, ld_peer_u64, ld_s32,
        ld_shared_u32, ld_u32, red_release_gpu_add_u32, shfl_up, st_release_peer_u32, st_shared_u32, st_u32,
        st_u64, st_v4, syncwarp, trap_with_record, wait_geq_u32)
    from .wgmma_rs import _asm, _v
    from gcmoe_runtime.numerics.sm90_layout import k128_word_source_bits

    P, E, K, H, BM, CAP, D = cfg.ranks, cfg.experts, cfg.topk, cfg.hidden, cfg.bm, cfg.capacity, cfg.dispatch_sms
    SCOPE = peer_scope(P)
    EL = cfg.experts_local
    NKB = H // 128
    SFB = cfg.sf_bytes
    STAGE = cfg.stage_bytes
    so = cfg.smem_offsets()
    S_CNT, S_BASE, S_TAB, S_BLK, S_STAGE, S_MBAR = (so["cnt"], so["base"], so["tab"], so["blk"], so["stage"],
                                                    so["mbar"])
    NTAB = EL * P  # == E
    LOG_TAB = max(1, (NTAB).bit_length())
    NT = cfg.threads
    WARPS = cfg.warps
    W_TOTAL = D * WARPS

    @dsl_user_op
    def sel_le(a, b, x, y, *, loc=None, ip=None) -> Int32:
        """x if a <= b (signed) else y."""
        return Int32(_asm("{\n.reg .pred p;\nsetp.le.s32 p, $1, $2;\nselp.b32 $0, $3, $4, p;\n}",
                          "=r,r,r,r,r", [_v(a), _v(b), _v(x), _v(y)], 1, volatile=False)[0])

    @dsl_user_op
    def mbar_try_wait(saddr, parity, *, loc=None, ip=None) -> Int32:
        return Int32(_asm("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2;\n"
                          "selp.u32 $0, 1, 0, p;\n}", "=r,r,r", [_v(saddr), _v(parity)], 1)[0])

    @cute.jit
    def mbar_wait(saddr: Int32, parity: Int32, timeout_ns: Int64, err: Int64):
        t0 = globaltimer()
        done = mbar_try_wait(saddr, parity)
        while done == Int32(0):
            if globaltimer() - t0 > timeout_ns:
                trap_with_record(err, CODE_STAGING, parity, Int32(0))
            done = mbar_try_wait(saddr, parity)

    @cute.jit
    def warp_exclusive_scan(saddr: Int32, n: cutlass.Constexpr, lane: Int32):
        """In-place exclusive scan of ``n`` u32 in shared memory by one warp; total at [n]."""
        C = (n + 31) // 32
        start = lane * C
        s = Int32(0)
        for i in cutlass.range_constexpr(C):
            if start + i < n:
                s = s + ld_shared_u32(saddr + (start + i) * 4)
        incl = s
        for d in cutlass.range_constexpr(5):
            y = shfl_up(incl, 1 << d)
            if lane >= (1 << d):
                incl = incl + y
        run = incl - s
        for i in cutlass.range_constexpr(C):
            if start + i < n:
                v = ld_shared_u32(saddr + (start + i) * 4)
                st_shared_u32(saddr + (start + i) * 4, run)
                run = run + v
        if lane == 31:
            st_shared_u32(saddr + n * 4, incl)

    def locate(smem, g):
        """Position ``g`` of the expert-concatenated sequence -> (tab index, el, r, j, je, tot_e).
        Branch-free binary search (largest idx with TAB[idx] <= g)."""
        lo, hi = Int32(0), Int32(NTAB)
        for _ in range(LOG_TAB):
            mid = (lo + hi) >> 1
            v = ld_shared_u32(smem + S_TAB + mid * 4)
            lo = sel_le(v, g, mid, lo)
            hi = sel_le(v, g, hi, mid)
        el = lo // P
        r = lo - el * P
        j = g - ld_shared_u32(smem + S_TAB + lo * 4)
        e0 = ld_shared_u32(smem + S_TAB + el * P * 4)
        tot = ld_shared_u32(smem + S_TAB + (el + 1) * P * 4) - e0
        return lo, el, r, j, g - e0, tot

    def routing_entry(smem, ws, o_src_index, pos):
        """Lane 0: sequence position ``pos``'s routing entry (``src_token << 5 | slot``) and source rank."""
        lo, _el, r, j, _je, _tot = locate(smem, pos)
        return ld_peer_u32(ws + o_src_index + (Int64(lo * CAP) + Int64(j)) * 4, SCOPE), r

    def routing_weight(peer, o_topk_weights, ent, r):
        """Lane 0: the routing weight's bits of entry ``ent`` of rank ``r``."""
        return ld_peer_u32(peer_ws(peer, r) + o_topk_weights + (Int64(ent >> 5) * K + Int64(ent & 31)) * 4, SCOPE)

    def pull(peer, o_x, o_x_sf, stage0, mbar0, ent, r, s):
        """Lane 0: entry ``ent``'s FP8 row and scale row from rank ``r`` into the warp's stage ``s``."""
        src = peer_ws(peer, r)
        stok = Int64(ent >> 5)
        mb = mbar0 + s * 8
        mbar_arrive_expect_tx(mb, H + SFB)
        bulk_g2s(stage0 + s * STAGE, src + o_x + stok * H, H, mb)
        bulk_g2s(stage0 + s * STAGE + H, src + o_x_sf + stok * SFB, SFB, mb)

    @cute.kernel
    def kernel(peer: cute.Pointer, o_x: Int64, o_x_sf: Int64, o_topk_idx: Int64, o_topk_weights: Int64,
               o_ring_x: Int64, o_ring_sf: Int64, o_ring_meta: Int64, o_ring_block: Int64, o_l1_full_count: Int64,
               o_l1_empty_count: Int64, o_send_count: Int64, o_recv_count: Int64, o_recv_prefix: Int64,
               o_src_index: Int64, o_tag1_barrier: Int64, o_recv_parity: Int64, o_dispatch_grid: Int64,
               err: Int64, timeout_ns: Int64, ntok: Int32, ring_blocks: Int32, bm_stride: Int32, sf_stride: Int32):
        tid, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        tid = Int32(tid)
        bid = Int32(bid)
        warp = tid >> 5
        lane = tid & 31
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        me = PeerDesc(peer).rank()
        ws = PeerDesc(peer).base()
        par = ld_u32(ws + o_recv_parity) & Int32(1)

        if lane == 0:
            for s in cutlass.range_constexpr(STAGES):
                mbar_init(smem + S_MBAR + (warp * STAGES + s) * 8, 1)
            mbar_init_fence()

        # ---- step 1: per-expert counts of this CTA's (token, slot) pairs --------------------------
        for e in cutlass.range(tid, E, NT):
            st_shared_u32(smem + S_CNT + e * 4, Int32(0))
        cute.arch.barrier()
        per = (ntok + (D - 1)) // D
        t_begin = bid * per
        t_end = ntok
        if t_begin + per < ntok:
            t_end = t_begin + per
        for pi in cutlass.range(t_begin * K + tid, t_end * K, NT):
            e = ld_s32(ws + o_topk_idx + Int64(pi) * 4)
            if e >= Int32(0):
                if e < Int32(E):
                    atom_add_shared_u32(smem + S_CNT + e * 4, Int32(1))
        cute.arch.barrier()

        # ---- step 2: packed atomic (1 << 32) | count; the old low word is this CTA's base ---------
        for e in cutlass.range(tid, E, NT):
            c = ld_shared_u32(smem + S_CNT + e * 4)
            old = atom_add_gpu_u64(ws + o_send_count + Int64(e) * 8, (Int64(1) << 32) | Int64(c))
            st_shared_u32(smem + S_BASE + e * 4, Int32(old & Int64(0xFFFFFFFF)))
            st_shared_u32(smem + S_CNT + e * 4, Int32(0))
        cute.arch.barrier()

        # ---- step 3: routing entries into the owner's src_index (peer stores) --------------------
        for pi in cutlass.range(t_begin * K + tid, t_end * K, NT):
            e = ld_s32(ws + o_topk_idx + Int64(pi) * 4)
            if e >= Int32(0):
                if e < Int32(E):
                    pos = ld_shared_u32(smem + S_BASE + e * 4) + atom_add_shared_u32(smem + S_CNT + e * 4, Int32(1))
                    owner = e // EL
                    el = e - owner * EL
                    t = pi // K
                    slot = pi - t * K
                    dst = peer_ws(peer, owner) + o_src_index + (Int64((el * P + me) * CAP) + Int64(pos)) * 4
                    st_u32(dst, (t << 5) | slot)

        # ---- step 4: grid barrier; CTA 0 publishes counts + prefix sums to every owner -----------
        grid_sync(ws + o_dispatch_grid, D, NT, timeout_ns, err, CODE_GRID, SCOPE)
        if bid == 0:
            for e in cutlass.range(tid, E, NT):
                v = ld_peer_u64(ws + o_send_count + Int64(e) * 8, SCOPE)
                st_shared_u32(smem + S_CNT + e * 4, Int32(v & Int64(0xFFFFFFFF)))
            cute.arch.barrier()
            if warp == 0:
                warp_exclusive_scan(smem + S_CNT, E, lane)
            cute.arch.barrier()
            for e in cutlass.range(tid, E, NT):
                v = ld_peer_u64(ws + o_send_count + Int64(e) * 8, SCOPE)
                owner = e // EL
                el = e - owner * EL
                cell = Int64((par * EL + el) * P + me)
                dst = peer_ws(peer, owner)
                st_u64(dst + o_recv_count + cell * 8, v)
                st_u32(dst + o_recv_prefix + cell * 4, ld_shared_u32(smem + S_CNT + e * 4))
            fence_acq_rel_peer(SCOPE)
            cute.arch.barrier()
            # ---- step 5: tag-1 barrier (arrive: release my phase into every peer; wait: acquire) --
            if tid == 0:
                ph = ld_u32(ws + o_tag1_barrier + P * 4) + Int32(1)
                st_u32(ws + o_tag1_barrier + P * 4, ph)
                for q in cutlass.range(P):
                    st_release_peer_u32(peer_ws(peer, q) + o_tag1_barrier + Int64(me) * 4, ph, SCOPE)
                t0 = globaltimer()
                for q in cutlass.range(P):
                    wait_geq_u32(ws + o_tag1_barrier + Int64(q) * 4, ph, t0, timeout_ns, err, CODE_TAG1, SCOPE)
                fence_acq_rel_peer(SCOPE)
        if const_expr(P > 1):
            grid_sync(ws + o_dispatch_grid, D, NT, timeout_ns * 2, err, CODE_GRID, SCOPE)

        # ---- step 6a: prefix tables of the received counts (every CTA, in shared memory) ----------
        for i in cutlass.range(tid, NTAB, NT):
            if const_expr(P > 1):
                v = ld_peer_u64(ws + o_recv_count + (Int64(par * NTAB) + Int64(i)) * 8, SCOPE)
            else:  # P = 1: the receive counts are this rank's send counters, final since the first barrier
                v = ld_peer_u64(ws + o_send_count + Int64(i) * 8, SCOPE)
            st_shared_u32(smem + S_TAB + i * 4, Int32(v & Int64(0xFFFFFFFF)))
        cute.arch.barrier()
        if warp == 0:
            warp_exclusive_scan(smem + S_TAB, NTAB, lane)
        cute.arch.barrier()
        for el in cutlass.range(tid, EL, NT):
            tot = ld_shared_u32(smem + S_TAB + (el + 1) * P * 4) - ld_shared_u32(smem + S_TAB + el * P * 4)
            st_shared_u32(smem + S_BLK + el * 4, (tot + (BM - 1)) // BM)
        cute.arch.barrier()
        if warp == 0:
            warp_exclusive_scan(smem + S_BLK, EL, lane)
        cute.arch.barrier()
        total = ld_shared_u32(smem + S_TAB + NTAB * 4)

        # ---- step 6b: the pull, warp-private double-buffered staging ------------------------------
        gw = bid * WARPS + warp
        stage0 = smem + S_STAGE + warp * (STAGES * STAGE)
        mbar0 = smem + S_MBAR + warp * (STAGES * 8)

        # Lane 0's loads run one row ahead of their use, so no global round trip sits on the row-to-row chain: the
        # row's entry and routing weight (its metadata), the next row's entry and source rank (its pull, issued at
        # the top of this row's iteration so that its flight overlaps this row's work).
        ent = Int32(0)
        wb = Int32(0)
        nent = Int32(0)
        nr = Int32(0)
        if gw < total:
            if lane == 0:
                ent, r0 = routing_entry(smem, ws, o_src_index, gw)
                pull(peer, o_x, o_x_sf, stage0, mbar0, ent, r0, Int32(0))
                wb = routing_weight(peer, o_topk_weights, ent, r0)
                if gw + W_TOTAL < total:
                    nent, nr = routing_entry(smem, ws, o_src_index, gw + W_TOTAL)
        g = gw
        it = Int32(0)
        prev_rb = Int32(0)
        prev_inc = Int32(0)
        while g < total:
            lo, el, r, j, je, tot = locate(smem, g)
            blk = je // BM
            row = je - blk * BM
            pool = ld_shared_u32(smem + S_BLK + el * 4) + blk
            gen = pool // ring_blocks
            rb = pool - gen * ring_blocks
            nblk = tot - blk * BM
            if nblk > BM:
                nblk = Int32(BM)
            inc = Int32(1)
            if je == tot - 1:
                inc = inc + (BM - nblk)
            s = it & 1
            stg = stage0 + s * STAGE
            gn = g + W_TOTAL
            nwb = Int32(0)
            nnent = Int32(0)
            nnr = Int32(0)
            if lane == 0:
                if gn < total:  # the next row's pull first: its flight overlaps this row's work and ring wait
                    bulk_wait_read(0)  # the other stage's row (the previous token) has left in its bulk store
                    fence_proxy_async_shared()  # this warp's generic reads of that stage -> the bulk copy's writes
                    pull(peer, o_x, o_x_sf, stage0, mbar0, nent, nr, 1 - s)
                    nwb = routing_weight(peer, o_topk_weights, nent, nr)
                    if gn + W_TOTAL < total:
                        nnent, nnr = routing_entry(smem, ws, o_src_index, gn + W_TOTAL)
                if gen > Int32(0):
                    # release the previous token first: role2 may need exactly that block before it can
                    # free this one (waiting with a token held back could deadlock the ring)
                    if prev_inc != Int32(0):
                        bulk_wait(0)
                        fence_proxy_async_global()  # the bulk store's row -> the release
                        red_release_gpu_add_u32(ws + o_l1_full_count + Int64(prev_rb) * 4, prev_inc)
                    wait_geq_u32(ws + o_l1_empty_count + Int64(rb) * 4, gen, globaltimer(), timeout_ns, err,
                                 CODE_RING_EMPTY, "gpu")
            if gen > Int32(0):
                prev_inc = Int32(0)  # released above (lane 0 is the only lane that releases)
            syncwarp()
            mbar_wait(mbar0 + s * 8, (it >> 1) & 1, timeout_ns, err)
            trow = Int64(rb) * Int64(bm_stride) + Int64(row)
            for kb in cutlass.range(lane, NKB, 32):
                v = ld_shared_u32(stg + H + kb * 4)
                st_u32(ws + o_ring_sf + ((Int64(rb) * NKB + Int64(kb)) * Int64(sf_stride) + Int64(row)) * 4, v)
            if lane == 0:
                st_v4(ws + o_ring_meta + trow * 16, wb, r, ent >> 5, ent & 31)
                if row == 0:
                    st_v4(ws + o_ring_block + Int64(rb) * 16, el, nblk, pool, gen)
            if const_expr(cfg.k_interleave):  # every word of the row loaded before any is stored: one warp sync
                src_w = k128_word_source_bits(lane)
                words = [ld_shared_u32(stg + kb * 128 + src_w * 4) for kb in range(NKB)]
                syncwarp()
                for kb in cutlass.range_constexpr(NKB):
                    st_shared_u32(stg + kb * 128 + lane * 4, words[kb])
                fence_proxy_async_shared()  # the row's generic writes -> lane 0's bulk store (after syncwarp)
            fence_acq_rel_gpu()
            syncwarp()
            if lane == 0:
                bulk_s2g(ws + o_ring_x + trow * H, stg, H)
                bulk_commit()
                if prev_inc != Int32(0):  # a previous token not yet released
                    bulk_wait(1)  # its row has landed (only this token's store may be pending)
                    fence_proxy_async_global()  # the bulk store's row -> the release
                    red_release_gpu_add_u32(ws + o_l1_full_count + Int64(prev_rb) * 4, prev_inc)
            ent = nent
            wb = nwb
            nent = nnent
            nr = nnr
            prev_rb = rb
            prev_inc = inc
            g = gn
            it = it + 1
        if lane == 0:
            if prev_inc != Int32(0):
                bulk_wait(0)
                fence_proxy_async_global()  # the bulk store's row -> the release
                red_release_gpu_add_u32(ws + o_l1_full_count + Int64(prev_rb) * 4, prev_inc)

    @cute.jit
    def host(peer: cute.Pointer, o_x: Int64, o_x_sf: Int64, o_topk_idx: Int64, o_topk_weights: Int64,
             o_ring_x: Int64, o_ring_sf: Int64, o_ring_meta: Int64, o_ring_block: Int64, o_l1_full_count: Int64,
             o_l1_empty_count: Int64, o_send_count: Int64, o_recv_count: Int64, o_recv_prefix: Int64,
             o_src_index: Int64, o_tag1_barrier: Int64, o_recv_parity: Int64, o_dispatch_grid: Int64,
             err: Int64, timeout_ns: Int64, ntok: Int32, ring_blocks: Int32, bm_stride: Int32, sf_stride: Int32):
        kernel(peer, o_x, o_x_sf, o_topk_idx, o_topk_weights, o_ring_x, o_ring_sf, o_ring_meta, o_ring_block,
               o_l1_full_count, o_l1_empty_count, o_send_count, o_recv_count, o_recv_prefix, o_src_index,
               o_tag1_barrier, o_recv_parity, o_dispatch_grid, err, timeout_ns, ntok, ring_blocks, bm_stride,
               sf_stride).launch(grid=(D, 1, 1), block=(NT, 1, 1), smem=cfg.smem_bytes)

    fake = (fake_peer_desc(),) + tuple(Int64(0) for _ in OFFSET_PARAMS + SCALAR_PARAMS_U64) + tuple(
        Int32(1) for _ in SCALAR_PARAMS_S32)
    return host, kernel, fake
