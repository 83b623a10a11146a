"""role4 on sm_90a: the fused shared expert(s) as the layer graph's fourth node (paper §4.5; Table 2).

One persistent launch on the compute context (grid = compute SMs, 256 threads = two MMA warpgroups), W1 and
W2 of the shared expert in one task stream, numerics exactly those of ``gcmoe_runtime.numerics.reference``
(shared expert: steps 2-5 with routing weight 1):

* **Zero copy.** W1 reads the rank's own activations in place: ``x[t][H]`` (E4M3) and ``x_sf[t][H/128]``
  (FP32 per 128) of the workspace, every local token ``t < ntok`` (no dispatch). Padded tokens of the last
  block are masked to zero on the way into shared memory. A task's K chunks alternate between two buffers: the
  first is copied at the task's top (W1: with ``cp.async``, issued before the task's weights, session 19), each
  next one copied with ``cp.async`` while the previous is multiplied (session 17: role4 in the P = 1 layer
  -12..-17 % at T = 128-256).
* **MMA.** ``wgmma.mma_async m64nBMk32 .f32.e4m3.e4m3`` with operands swapped: A = the FP8 weight rows from
  registers (the transformed tiles, ``gcmoe_runtime.numerics.transforms_sm90_shared``, no decode), B = BM tokens
  from shared memory (role2's K-major no-swizzle staging and descriptors). Each K32 partial is FMA'd into the FP32
  accumulator with ``weight_scale[row, K32] * act_scale[token]`` — role2's per-K32 scale path. Both shared recipes
  run through it: the host transform repeats a 1x128x128 block code to every row/K32 of its block (exact), so
  the per-K32 code serves 1x128x128 and 1x1x32 alike; for 1x128x128 the scale is constant over each slab's K128
  step, so that build chains the four K32 wgmma and FMAs once per K128 (``Role4Config.block_k128``, session 15).
* **Weight ring** (``role4_mma.WeightRing``, session 16). Each warp streams its 2 KB of each slab's K128 code tile
  and its scale bytes with coalesced 16-byte ``cp.async`` into its slice of ``Role4Config.ring_slots`` shared-memory
  slots, 3-4 K128 steps ahead, and after ``cp.async.wait_group`` + ``bar.warp.sync`` each lane reads its own
  fragment: no CTA barrier, no producer warps. A W2 task issues its first steps before it waits for its W1 tiles,
  so its weights stream while W1 finishes.
* **W1 epilogue** (role2's, without routing weight or expert factor): BF16 round, clamp, SwiGLU, amax over
  the task's 128 I-columns (``role2_config.L2_SCALE_GROUP``), UE8M0 scale, E4M3 -> ``shared_l2_x[t][I]``,
  ``shared_l2_sf[t][I/128]``; then
  ``red.release.gpu.add shared_sync[2 + block] += 1``.
* **W1 -> W2 dependency.** A W2 task of token block ``b`` waits (``ld.acquire``, bounded: trap code 14)
  until ``shared_sync[2 + b] == NT1``, all W1 tiles of its block.
* **Tasks.** Per replay ``nblk = ceil(ntok / BM)``; the W1 tasks (block-major), then the W2 tasks. CTAs claim
  tasks from an atomic ticket (``shared_sync[0]``), each its next task at the top of the current one (the claim's
  round trip hidden, session 19), so a W2 task is only ever claimed after all W1 tasks were claimed by CTAs
  already running, each W1 task as a running CTA's current task or its next one behind a W1 task: progress needs
  no co-residency of role4's own CTAs.
* **Split-K.** A token block has only ``NT1 = 2I/256`` W1 and ``NT2 = H/256`` W2 row tiles (16-24 for the
  production shapes) for ~128 compute SMs, so each (block, tile) runs as ``s1`` / ``s2`` tasks over equal K ranges
  (``heuristics.shared_split_k``: GLM-5.2 8 / 4, DSV-4.1-Flash 5 / 3), split index fastest. A split task stores its
  FP32 partial (``BM x 256``) to ``shared_partials`` (``layout.shared_partial_slot``) and counts itself in
  ``shared_split_count[block][tile]``; the last arrival sums every split's partial in split order (the same bits
  whichever CTA is last), zeroes the count and runs the epilogue below. Calls with more than
  ``SHARED_SPLIT_ROWS`` token rows split less (``heuristics.shared_split_for_rows``: rows x split within the
  partials region; session 16: GLM-5.2 W1 4 / 2 and W2 2 / 1 splits at 2 / 4 blocks of BM 64, DSV-4.1-Flash unsplit
  there: its chunk counts 5 / 3 have no smaller split); past ``SHARED_SPLIT_MAX_BLOCKS`` blocks, unsplit.
* **W2 epilogue.** BF16 partials staged through shared memory, then 16-byte ``st.global.v4`` into lane
  ``k`` of the LOCAL combine buffer, ``combine[k][t][H]``, so role3 reduces the shared partial like any
  routed slot (no special case).
* **Self-reset.** Each CTA adds to ``shared_sync[1]`` when it has no task left; the last one zeroes the
  ticket, the exit count and the block counts (each split count was zeroed by its tile's last arrival), so the
  next replay finds them at zero (role4 of replay N+1
  starts after replay N's graph completed). Nothing else resets them; the workspace starts zeroed.

Not yet (say so, never fake): the weights are copied by the MMA warps themselves (each warp's ring; no producer
warpgroup or tensor-map pipeline), with register-A wgmma at N = BM <= 64, so a token block re-reads every weight tile;
role2 follows role4 in the graph (since sessions 45-46 from role4's launch-order port: role2's CTAs take the SMs role4's
CTAs leave, ``gcmoe_runtime.graph``), so above T = 8, where role1's dispatch no longer covers it, most of role4's
duration is on the layer's critical path (session 17's timeline, then behind a full edge: 57-167 µs at T = 64-256).
"""
# no `from __future__ import annotations`: the DSL evaluates kernel annotations at trace time

from gcmoe_runtime.heuristics import (SHARED_SPLIT_MAX_BLOCKS, shared_split_fits, shared_split_for_rows,
                                      shared_split_k, shared_split_options)

from .role_common import int_param, peer_abi_plan

ROLE = "role4"
NAME_PREFIX = "gcmoe_sm90_role4_shared"
RECIPES = {"1x128x128": (1, 128, 128), "1x1x32": (1, 1, 32)}
THREADS = 256  # two consumer warpgroups

#: trap code (gcmoe_runtime.workspace.trap.TRAP_CODES)
CODE_SHARED_W1 = 14

#: by-value u64 region offsets, in parameter order (layout regions with an ``o_`` prefix)
OFFSET_PARAMS = ("x", "x_sf", "combine", "shared_l2_x", "shared_l2_sf", "shared_sync", "shared_split_count",
                 "shared_partials")
#: transformed shared weights (``transforms_sm90_shared.SharedSM90Weights.args()``, what moe.py packs)
WEIGHT_PARAMS = ("shared_w1", "shared_w1_scale", "shared_w2", "shared_w2_scale")
SCALAR_PARAMS_U64 = ("err", "timeout_ns")
SCALAR_PARAMS_S32 = ("ntok",)

REQUIRED_PTX = ("wgmma.mma_async.sync.aligned", "ld.acquire.gpu.global.u32", "red.release.gpu.global.add.u32",
                "atom.acq_rel.gpu.global.add.u32", "atom.relaxed.gpu.global.add.u32", "st.global.v4.u32", "trap")


def task_coords(task, nblk, nt1, nt2, s1=1, s2=1):
    """Host mirror of the kernel's task order: task -> (W1 task?, token block, 256-row tile, split). All W1 tasks
    (block-major, then tile, the ``s1`` splits of a tile consecutive), then the W2 tasks likewise; ``s1``/``s2``
    are the splits this call runs (``Role4Config.splits``)."""
    n1 = nblk * nt1 * s1
    if task < n1:
        bt, sp = divmod(task, s1)
        b, tile = divmod(bt, nt1)
        return True, b, tile, sp
    bt, sp = divmod(task - n1, s2)
    b, tile = divmod(bt, nt2)
    return False, b, tile, sp


def combine_element(slot, capacity, hidden, token, col):
    """Element index of ``combine[slot][token][col]`` (layout region ``combine [k + 1, capacity, H]`` bf16); the
    kernel calls this same function on its DSL integers (W2 epilogue: ``slot = k``, the shared lane)."""
    return (slot * capacity + token) * hidden + col


class Role4Config:
    """Compile-time shape of one role4 variant (validated; errors name the field and the limit)."""

    def __init__(self, params):
        from .role2_config import Role2GemmConfig

        p = dict(params)

        def need(name, minimum=1):
            return int_param(p, name, "role4", minimum)

        self.hidden, self.inter, self.topk = need("hidden"), need("intermediate"), need("top_k")
        self.capacity, self.bm, self.count = need("capacity"), need("bm"), need("shared_experts")
        if self.count != 1:
            raise ValueError(f"role4: shared_experts={self.count}; one fused shared expert is built (the workspace's "
                             "shared_l2_x holds I columns)")
        if p.get("activation", "swiglu") != "swiglu":
            raise ValueError(f"role4: activation={p.get('activation')!r}; only 'swiglu' is built")
        rs = p.get("recipe_shared")
        if rs not in RECIPES:
            raise ValueError(f"role4: recipe_shared={rs!r}; built: {sorted(RECIPES)}")
        self.recipe = RECIPES[rs]
        #: the weight scale is one per 128 x 128 block, so constant over a slab's K128 step: chain per K128
        self.block_k128 = self.recipe == RECIPES["1x128x128"]
        if self.topk + 1 > 32:
            raise ValueError(f"role4: top_k={self.topk}: k + 1 must be <= 32 (combine slots)")
        if self.inter % 256:
            raise ValueError(f"role4: intermediate={self.inter} must be a multiple of 256 (W2 K chunks)")
        self.alpha = float(p.get("act_alpha", 1.0))
        self.clamp = float(p.get("act_clamp", 10.0))
        self.fast_math = bool(p.get("act_fast_math", False))  # W1 epilogue's sigmoid: role2_math.sigmoid
        # role2's checked GEMM shapes give the MMA lag (256-thread register weight stream); the K chunk staged in
        # shared memory is that of one split's K range (it divides the whole K too)
        self.w1 = Role2GemmConfig(mode="w1", k=self.hidden, rows=2 * self.inter, bm=self.bm, alpha=self.alpha,
                                  clamp=self.clamp, pipelined=False)
        self.w2 = Role2GemmConfig(mode="w2", k=self.inter, rows=self.hidden, bm=self.bm, pipelined=False)
        self.s1, self.s2 = shared_split_k(self.hidden, self.inter)
        # two chunk buffers (the K budget of each halved): a task's chunks after its first are copied while the
        # previous one is multiplied (mainloop)
        self.w1s = Role2GemmConfig(mode="w1", k=self.hidden // self.s1, rows=2 * self.inter, bm=self.bm,
                                   alpha=self.alpha, clamp=self.clamp, pipelined=False, act_buffers=2)
        self.w2s = Role2GemmConfig(mode="w2", k=self.inter // self.s2, rows=self.hidden, bm=self.bm, pipelined=False,
                                   act_buffers=2)
        #: K chunks of the whole K (W1, W2): a split task covers whole chunks
        self.ch1, self.ch2 = self.hidden // self.w1s.kc, self.inter // self.w2s.kc

    def splits(self, ntok):
        """Host mirror of the kernel's per-call split rule (``heuristics.shared_split_for_rows``): ``(s1, s2)``,
        the full splits up to ``SHARED_SPLIT_ROWS`` rows, fewer above (the partials region's size), 1 past
        ``SHARED_SPLIT_MAX_BLOCKS`` blocks."""
        nblk = -(-ntok // self.bm)
        rows = nblk * self.bm
        return (shared_split_for_rows(self.s1, self.ch1, rows, nblk),
                shared_split_for_rows(self.s2, self.ch2, rows, nblk))

    @property
    def nt1(self):
        return self.w1.row_tiles

    @property
    def nt2(self):
        return self.w2.row_tiles

    def smem_offsets(self):
        """The task areas (role2's ``task_smem_offsets``), then the weight ring (``ring``, :attr:`ring_slots`
        slots of ``RING_WARPS x RING_WARP_BYTES``), ``total``."""
        from .role2_config import task_smem_offsets
        from .role_common import SMEM_LIMIT
        from .role4_mma import RING_WARP_BYTES, RING_WARPS

        bm = self.bm
        o = task_smem_offsets(self.w1s, self.w2s)
        del o["misc"]
        o["ring"] = self._ring_offset()
        o["total"] = o["ring"] + self.ring_slots * RING_WARPS * RING_WARP_BYTES
        if o["total"] > SMEM_LIMIT:
            raise ValueError(f"role4: BM={bm} H={self.hidden} I={self.inter} needs {o['total']} B of shared memory "
                             f"> {SMEM_LIMIT} (weight ring of {self.ring_slots} slots)")
        return o

    def _ring_offset(self):
        """The weight ring's shared offset: after the task areas, 128-byte aligned."""
        from .role2_config import task_smem_offsets

        return 128 * ((task_smem_offsets(self.w1s, self.w2s)["misc"] + 127) // 128)

    @property
    def ring_slots(self):
        """K128 weight steps each warp keeps in flight (:class:`.role4_mma.WeightRing`): as many as fit next to
        the task areas, up to ``MAX_RING_SLOTS``, at least 2."""
        from .role_common import SMEM_LIMIT
        from .role4_mma import MAX_RING_SLOTS, RING_WARP_BYTES, RING_WARPS

        return max(2, min(MAX_RING_SLOTS, (SMEM_LIMIT - self._ring_offset()) // (RING_WARPS * RING_WARP_BYTES)))

    @property
    def smem_bytes(self):
        return self.smem_offsets()["total"]


def abi_plan():
    return peer_abi_plan(OFFSET_PARAMS, WEIGHT_PARAMS + SCALAR_PARAMS_U64, SCALAR_PARAMS_S32, REQUIRED_PTX)


def build(variant):
    from gcmoe_build.frontend.dsl import import_dsl
    from gcmoe_build.kernels import KernelBuild
    from gcmoe_runtime.artifacts.record import LaunchFacts

    if variant.arch != "sm_90a":
        raise ValueError(f"role4: this module builds sm_90a only, got arch {variant.arch!r}")
    import_dsl(variant.arch)
    cfg = Role4Config(variant.params)
    host, kernel, fake = _trace_parts(cfg)
    return KernelBuild(
        host=host, kernel=kernel, args=fake, name_prefix=NAME_PREFIX, abi=abi_plan(),
        launch=LaunchFacts(block=(THREADS, 1, 1), cluster=(1, 1, 1), dynamic_smem=cfg.smem_bytes, grid="compute_sms"),
        extra={"role": ROLE, "bm": cfg.bm, "threads": THREADS, "kc_w1": cfg.w1s.kc, "kc_w2": cfg.w2s.kc,
               "nt1": cfg.nt1, "nt2": cfg.nt2, "split_w1": cfg.s1, "split_w2": cfg.s2,
               "split_max_blocks": SHARED_SPLIT_MAX_BLOCKS, "recipe_shared": list(cfg.recipe),
               "offset_params": list(OFFSET_PARAMS)},
    )


def _trace_parts(cfg):
    import cutlass
    import cutlass.cute as cute
    from cutlass import Float32, Int32, Int64, Uint8, const_expr

    from gcmoe_build.kernels.common.peer import PeerDesc, fake_peer_desc
    from gcmoe_runtime.workspace.layout import (SHARED_SYNC_BLOCKS, SHARED_SYNC_EXIT, SHARED_SYNC_TICKET,
                                                shared_partial_slot)

    from .ptx_mem import (bar_sync, cp_async_commit, cp_async_wait_group, fence_acq_rel_gpu,
                          fence_proxy_async_shared, ld_global_cg_f32, ld_global_f32_if, red_release_add_u32,
                          st_global_f32)
    from .ring_sync import (atom_add_acqrel_gpu_u32, atom_add_relaxed_gpu_u32_if, ld_shared_b32, st_relaxed_gpu_u32,
                            st_shared_b32, wait_geq_u32_rt)
    from .role2_chunks import (_copy_act_chunk_async, _copy_w1_chunk_scales_async, _load_chunk_scales, _stage_chunk,
                               _store_chunk_scales, load_act_scale)
    from .role2_config import L2_SCALE_GROUP, ROWS_PER_CTA, _consumer_lane
    from .role2_epilogue import _w1_epilogue, w2_epilogue
    from .role2_mainloop import TokenScales
    from .role4_mma import CODE_TILE_BYTES, SCALE_TILE_BYTES, WeightRing, k128_mma_fp8

    H, I, BM, CAP, K_SLOT = cfg.hidden, cfg.inter, cfg.bm, cfg.capacity, cfg.topk
    CT = THREADS
    ND = BM // 2
    NT1, NT2 = cfg.nt1, cfg.nt2
    S1, S2 = cfg.s1, cfg.s2
    CH1, CH2 = cfg.ch1, cfg.ch2  # K chunks of the whole K
    SLOT = BM * 256  # floats of one split partial
    #: split partials the last arrival loads at once (64 floats per thread in flight: all 8 splits at BM 8, 1 at BM 64)
    RED_GROUP = max(1, min(max(S1, S2), 64 // (2 * ND)))
    NKB = H // 128  # FP32 activation scales per token (x_sf row)
    NIG = I // L2_SCALE_GROUP  # UE8M0 intermediate scales per token
    so = cfg.smem_offsets()
    ACT_OFF, ASC_OFF, AMAX_OFF, INFO_OFF, RING_OFF = so["act"], so["asc"], so["amax"], so["info"], so["ring"]
    SLOTS = cfg.ring_slots
    alpha, clamp = float(cfg.alpha), float(cfg.clamp)
    SYNC_T, SYNC_X, SYNC_B = 4 * SHARED_SYNC_TICKET, 4 * SHARED_SYNC_EXIT, 4 * SHARED_SYNC_BLOCKS

    def token_row(t0, nt, tok):
        """Workspace row of token ``tok`` of the block at ``t0``; padded tokens (masked to zero when staged)
        read the block's last valid row, so every load stays inside the caller's rows."""
        return Int64(t0 + cutlass.min(tok, nt - 1))

    def act_scale_addr(mode, table, row, grp):
        """Address of the activation scale of workspace row ``row``, scale group ``grp``: W1's x_sf is FP32 per 128
        along H, token-major ``[T][H/128]``; W2's shared_l2_sf UE8M0 per L2_SCALE_GROUP along I."""
        if mode == "w1":
            return table + (row * NKB + Int64(grp)) * 4
        return table + row * NIG + Int64(grp)

    def ring_bases(mode, ctid, tile, w, wsc):
        """This warp's first code and scale byte of K128 step 0 of its two slabs of 256-row tile ``tile`` (lane
        ``l`` of warp ``warp`` owns code bytes ``[64 (32 warp + l), +64)`` and the scale row group ``8 warp + g``)."""
        NK = (cfg.w1 if mode == "w1" else cfg.w2).k // 128
        wg, warp, _, _, _ = _consumer_lane(ctid)
        slabs = [Int64(tile) * 4 + Int64(wg * 2 + sl) for sl in range(2)]
        return ([w + slabs[sl] * NK * CODE_TILE_BYTES + Int64(warp) * 2048 for sl in range(2)],
                [wsc + slabs[sl] * NK * SCALE_TILE_BYTES + Int64(warp) * 64 for sl in range(2)])

    def weight_ring(mode, smem, ctid, tile, w, wsc):
        """This warp's :class:`WeightRing` over its two slabs of tile ``tile`` of ``mode``'s weights (built where it
        is used: a plain Python object cannot be carried through a run-time loop)."""
        return WeightRing(smem + RING_OFF, ctid // 32, ctid % 32, SLOTS, *ring_bases(mode, ctid, tile, w, wsc))

    def k_range(mode, c0, nch):
        """The K128 steps ``[kb0, kend)`` of the K chunks ``[c0, c0 + nch)``."""
        KC = (cfg.w1s if mode == "w1" else cfg.w2s).kc
        return c0 * (KC // 128), (c0 + nch) * (KC // 128)

    def act_addrs(mode, t0, nt, ws, o_act, o_asc):
        """``row_addr(tok)`` (token row ``tok``'s first activation byte) and ``scale_addr(c, tok, kk)`` (its scale of
        group ``kk`` of K chunk ``c``) of the token block ``[t0, t0 + nt)``."""
        mc, mc_s = (cfg.w1, cfg.w1s) if mode == "w1" else (cfg.w2, cfg.w2s)
        NGS = mc_s.kc // mc.act_scale_group
        return (lambda tok: ws + o_act + token_row(t0, nt, tok) * mc.k,
                lambda c, tok, kk: act_scale_addr(mode, ws + o_asc, token_row(t0, nt, tok), c * NGS + kk))

    @cute.jit
    def w1_task_top(smem: Int32, ctid: Int32, tile: Int32, t0: Int32, nt: Int32, c0: Int32, nch: Int32, ws: Int64,
                    o_act: Int64, o_asc: Int64, w: Int64, wsc: Int64):
        """A W1 task's first copies, activations before weights: K chunk ``c0``'s activations and their scales as
        one ``cp.async`` group into buffer 0 (padded tokens zero-filled), then the weight ring's prologue. Issued
        after the ring's ``SLOTS`` K128 steps (~135 KB per SM), the activation loads came back last and held the
        first MMA until every prologue step had landed, with nothing streaming in between (session 19 call A: 20 %
        of role4's stall samples at T = 1 waited there; call B: scales loaded into registers instead were placed
        by ptxas after the prologue and waited the same). ``mainloop(..., chunk0_issued=True)`` waits for the
        group."""
        KC = cfg.w1s.kc
        NGS = KC // cfg.w1.act_scale_group
        row_addr, scale_addr = act_addrs("w1", t0, nt, ws, o_act, o_asc)
        _copy_act_chunk_async(smem + ACT_OFF, row_addr, ctid, c0, nt, BM, KC)
        _copy_w1_chunk_scales_async(smem + ASC_OFF, lambda tok, kk: scale_addr(c0, tok, kk), ctid, nt, BM, NGS)
        cp_async_commit()
        weight_ring("w1", smem, ctid, tile, w, wsc).prologue(*k_range("w1", c0, nch))

    @cute.jit
    def mainloop(mode: cutlass.Constexpr, chunk0_issued: cutlass.Constexpr, smem: Int32, ctid: Int32,
                 acc: cute.Tensor, tile: Int32, t0: Int32, nt: Int32, c0: Int32, nch: Int32, ws: Int64, o_act: Int64,
                 o_asc: Int64, w: Int64, wsc: Int64):
        """K loop of one 256-row task over the token block ``[t0, t0 + nt)`` and the K chunks ``[c0, c0 + nch)``
        (a split's K range, or all of K): activations + scales of each K chunk in one of two shared-memory buffers
        (padded tokens zeroed; chunk 0 staged at the top, or issued by :func:`w1_task_top` with
        ``chunk0_issued``, each next one copied while the current one is multiplied), FP8 weight fragments from
        the warp's weight ring (the caller issued its prologue), each step's slot refilled ``SLOTS`` steps ahead
        once its MMAs are issued, ``k128_mma_fp8`` per K128."""
        mc = cfg.w1 if const_expr(mode == "w1") else cfg.w2
        mc_s = cfg.w1s if const_expr(mode == "w1") else cfg.w2s
        KC = mc_s.kc
        GS = mc.act_scale_group
        NGS = KC // GS
        wg, warp, g, t, tw = _consumer_lane(ctid)
        for i in cutlass.range_constexpr(2 * ND):
            acc[i] = Float32(0.0)
        wb, sb = ring_bases(mode, ctid, tile, w, wsc)
        kb0, kend = k_range(mode, c0, nch)
        AB, SB = mc_s.act_buffer_bytes, mc_s.asc_buffer_bytes
        row_addr, scale_addr = act_addrs(mode, t0, nt, ws, o_act, o_asc)
        # chunk 0: issued by w1_task_top as the oldest cp.async group (the ring prologue's SLOTS groups came after
        # it), or staged here (W2: its activations exist only after the wait); chunk ci + 1's copies are issued at
        # chunk ci's top into the other buffer as their own cp.async group (so the ring's wait_group(SLOTS - 1)
        # over-waits by at most one step while it is pending), its scales loaded into registers
        if const_expr(chunk0_issued):
            cp_async_wait_group(SLOTS)
            fence_proxy_async_shared()
            bar_sync(1, CT)
        else:
            _stage_chunk(smem, ACT_OFF, ASC_OFF, row_addr,
                         lambda tok, kk: load_act_scale(mode == "w1", scale_addr(c0, tok, kk)), ctid, c0, nt, BM, KC,
                         NGS)
        for ci in cutlass.range(nch, unroll=1):
            kc = c0 + ci
            cur = ci & 1
            if ci > 0:  # chunk ci landed (the K128 groups of chunk ci - 1 were committed after it), scales stored
                cp_async_wait_group(KC // 128)
                fence_proxy_async_shared()
                bar_sync(1, CT)
            has_next = ci + 1 < nch
            if has_next:  # (a task of one chunk commits no group: the ring's accounting stays exact)
                _copy_act_chunk_async(smem + ACT_OFF + (1 - cur) * AB, row_addr, ctid, kc + 1, nt, BM, KC)
                cp_async_commit()
            sv = _load_chunk_scales(lambda tok, kk: scale_addr(kc + Int32(has_next), tok, kk), mode == "w1", ctid,
                                    nt, BM, NGS)
            for k2 in cutlass.range(KC // 256, unroll=1):
                for h in cutlass.range_constexpr(2):
                    kl128 = k2 * 2 + h
                    kb = kc * (KC // 128) + kl128
                    ring = WeightRing(smem + RING_OFF, ctid // 32, ctid % 32, SLOTS, wb, sb)
                    words = ring.words(kb - kb0, g)
                    ascl = TokenScales(smem + ASC_OFF + cur * SB, kl128, t, BM, GS)
                    k128_mma_fp8(words, ascl, acc, smem + ACT_OFF + cur * AB, kl128, BM, mc.lag, cfg.block_k128,
                                 mc.scales_before_wait)
                    ring.refill(kb - kb0, kb + SLOTS, kend)  # its MMAs are issued: the slot's words were read
            # (at the last chunk the scale prefetch repeated this chunk into the buffer not being read: harmless)
            _store_chunk_scales(smem + ASC_OFF + (1 - cur) * SB, sv, mode == "w1", ctid, BM, NGS)

    @cute.jit
    def split_reduce(max_split: cutlass.Constexpr, smem: Int32, ctid: Int32, acc: cute.Tensor, nsplit: Int32,
                     split: Int32, slot0: Int64, count: Int64) -> Int32:
        """Split-K: with ``nsplit > 1`` store this task's FP32 partial to its slot (``slot0 + split``), count it in
        and return 1 only in the task that arrives last, with ``acc`` = the sum of every split's partial in split
        order (the same bits whichever CTA is last); that task zeroes the count for the next replay. Returns 1 at
        once for an unsplit task (no code at all when the shape never splits, ``max_split == 1``). Release: the
        CTA's stores, barrier, fence + acq_rel add by thread 0; acquire: the last task's thread 0 add, fence, barrier,
        then L1-bypassing loads (cooperative-groups grid-sync pattern)."""
        last = Int32(1)
        if const_expr(max_split > 1) and nsplit > 1:
            mine = slot0 + Int64(split) * SLOT * 4
            for i in cutlass.range_constexpr(2 * ND):
                st_global_f32(mine + Int64(i * 256 + ctid) * 4, acc[i])
            bar_sync(1, CT)
            if ctid == 0:
                fence_acq_rel_gpu()
                old = atom_add_acqrel_gpu_u32(count, Int32(1))
                fence_acq_rel_gpu()
                st_shared_b32(smem + INFO_OFF, old)
            bar_sync(1, CT)
            last = Int32(ld_shared_b32(smem + INFO_OFF) == nsplit - 1)
            bar_sync(1, CT)  # every thread has read INFO before the next claim() rewrites it
            if last != 0:
                if ctid == 0:
                    st_relaxed_gpu_u32(count, Int32(0))
                for i in cutlass.range_constexpr(2 * ND):
                    acc[i] = Float32(0.0)
                if const_expr(RED_GROUP == 1):
                    for sp in cutlass.range(nsplit, unroll=1):
                        src = slot0 + Int64(sp) * SLOT * 4
                        for i in cutlass.range_constexpr(2 * ND):
                            acc[i] = acc[i] + ld_global_cg_f32(src + Int64(i * 256 + ctid) * 4)
                else:
                    # RED_GROUP splits' loads in flight at once (each split's L2 round trip was paid in turn: at BM 8
                    # the W1 hand-over read 8 partials one after the other); still added in split order, the loads
                    # past the last split read nothing and add +0.0 (the same bits)
                    for sp0 in cutlass.range(0, nsplit, RED_GROUP, unroll=1):
                        vals = []
                        for j in cutlass.range_constexpr(RED_GROUP):
                            src = slot0 + Int64(sp0 + j) * SLOT * 4
                            ok = Int32(sp0 + j < nsplit)
                            vals.append([ld_global_f32_if(src + Int64(i * 256 + ctid) * 4, ok, l2_only=True)
                                         for i in range(2 * ND)])
                        for j in cutlass.range_constexpr(RED_GROUP):
                            for i in cutlass.range_constexpr(2 * ND):
                                acc[i] = acc[i] + vals[j][i]
        return last

    def split_for(full, chunks, nblk):
        """``heuristics.shared_split_for_rows`` on the kernel's integers: over the options ascending, keep each whose
        partials fit (``heuristics.shared_split_fits``) while the blocks fit the arrival counters."""
        ok = Int32(nblk <= SHARED_SPLIT_MAX_BLOCKS)
        split = Int32(1)
        for d in shared_split_options(full, chunks)[1:]:  # plain Python: unrolled at trace time
            take = ok * Int32(shared_split_fits(nblk * BM, d, full))
            split = split + take * (Int32(d) - split)
        return split

    def claim_issue(ctid, ws, o_sync):
        """Thread 0's claim of a task ticket (relaxed atomic add; 0 in the other threads), left in flight: the loop
        claims the next task at the top of the current one, so the claim's round trip (~1.3 µs behind the weight
        streams, session 19 call A) is hidden. Progress is kept: tickets are claimed in order, so every W1 task a W2
        task waits for is some running CTA's current task, or its next one behind a W1 task, which waits for
        nothing."""
        return atom_add_relaxed_gpu_u32_if(ws + o_sync + SYNC_T, Int32(1), Int32(ctid == 0))

    @cute.jit
    def claim_take(smem: Int32, ctid: Int32, ticket: Int32) -> Int32:
        """The task of thread 0's :func:`claim_issue` ``ticket``, broadcast through shared memory."""
        if ctid == 0:
            st_shared_b32(smem + INFO_OFF, ticket)
        bar_sync(1, CT)
        task = ld_shared_b32(smem + INFO_OFF)
        bar_sync(1, CT)  # every thread has read it before thread 0 may claim again
        return task

    @cute.kernel
    def kernel(peer: cute.Pointer, o_x: Int64, o_x_sf: Int64, o_combine: Int64, o_shared_l2_x: Int64,
               o_shared_l2_sf: Int64, o_shared_sync: Int64, o_shared_split_count: Int64, o_shared_partials: Int64,
               shared_w1: Int64, shared_w1_scale: Int64, shared_w2: Int64, shared_w2_scale: Int64, err: Int64,
               timeout_ns: Int64, ntok: Int32):
        tid, _, _ = cute.arch.thread_idx()
        ncta, _, _ = cute.arch.grid_dim()
        ctid = Int32(tid)
        ncta = Int32(ncta)
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        ws = PeerDesc(peer).base()
        wg, warp, g, t, _ = _consumer_lane(ctid)
        nblk = (ntok + (BM - 1)) // BM
        # split-K: the largest split whose partials fit the workspace (shared_split_for_rows, as selects)
        s1 = split_for(S1, CH1, nblk)
        s2 = split_for(S2, CH2, nblk)
        nch1 = CH1 // s1  # K chunks per task
        nch2 = CH2 // s2
        nw1 = nblk * NT1 * s1
        ntasks = nw1 + nblk * NT2 * s2
        acc = cute.make_rmem_tensor((2 * ND,), Float32)
        task = claim_take(smem, ctid, claim_issue(ctid, ws, o_shared_sync))
        while task < ntasks:
            ticket = claim_issue(ctid, ws, o_shared_sync)  # the next task, claimed under this one
            if task < nw1:
                # ================= shared W1: x x W1s -> SwiGLU -> FP8 shared_l2_x =================
                # task = (block, tile, split), split fastest: a tile's splits are claimed together
                bt = task // s1
                sp = task - bt * s1
                b = bt // NT1
                tile = bt - b * NT1
                t0 = b * BM
                nt = cutlass.min(ntok - t0, BM)
                w1_task_top(smem, ctid, tile, t0, nt, sp * nch1, nch1, ws, o_x, o_x_sf, shared_w1, shared_w1_scale)
                mainloop("w1", True, smem, ctid, acc, tile, t0, nt, sp * nch1, nch1, ws, o_x, o_x_sf, shared_w1,
                         shared_w1_scale)
                if split_reduce(S1, smem, ctid, acc, s1, sp,
                                ws + o_shared_partials + Int64(shared_partial_slot(False, b, tile, 0, BM, H, I, s1)) * 4,
                                ws + o_shared_split_count + Int64(b * (NT1 + NT2) + tile) * 4) != 0:
                    # role2's W1 epilogue without expert factor or routing weight (shared expert)
                    _w1_epilogue(acc, smem, AMAX_OFF, ACT_OFF, None, nt, tile, wg, warp, g, t, None,
                                 lambda n, col: ws + o_shared_l2_x + Int64(t0 + n) * I + Int64(col),
                                 lambda n, grp: ws + o_shared_l2_sf + Int64(t0 + n) * NIG + Int64(grp),
                                 BM, alpha, clamp, fast_math=cfg.fast_math)
                    # publish: every thread's stores, then one count for this W1 tile of block b
                    bar_sync(1, CT)
                    if ctid == 0:
                        fence_acq_rel_gpu()
                        red_release_add_u32(ws + o_shared_sync + SYNC_B + Int64(b) * 4, Int32(1))
            else:
                # ================= shared W2: intermediate x W2s -> BF16 -> combine lane k =================
                j = task - nw1
                bt = j // s2
                sp = j - bt * s2
                b = bt // NT2
                tile = bt - b * NT2
                t0 = b * BM
                nt = cutlass.min(ntok - t0, BM)
                # the weights do not depend on W1: the ring's first steps stream while the task waits
                weight_ring("w2", smem, ctid, tile, shared_w2, shared_w2_scale).prologue(*k_range("w2", sp * nch2, nch2))
                # every W1 tile of this token block has published its intermediate columns
                wait_geq_u32_rt(ws + o_shared_sync + SYNC_B + Int64(b) * 4, Int32(NT1), err, CODE_SHARED_W1,
                                timeout_ns)
                mainloop("w2", False, smem, ctid, acc, tile, t0, nt, sp * nch2, nch2, ws, o_shared_l2_x, o_shared_l2_sf,
                         shared_w2, shared_w2_scale)
                if split_reduce(S2, smem, ctid, acc, s2, sp,
                                ws + o_shared_partials + Int64(shared_partial_slot(True, b, tile, 0, BM, H, I, s2)) * 4,
                                ws + o_shared_split_count + Int64(b * (NT1 + NT2) + NT1 + tile) * 4) != 0:
                    # BF16 staged, 16-byte stores into lane k of the LOCAL combine buffer, combine[k][t0 + n]
                    w2_epilogue(acc, None, smem, ACT_OFF, AMAX_OFF, nt, ctid,
                                lambda n: ws + o_combine + combine_element(Int64(K_SLOT), CAP, H, Int64(t0 + n),
                                                                           Int64(tile * ROWS_PER_CTA)) * 2, BM)
            task = claim_take(smem, ctid, ticket)

        # no task left: count this CTA out; the last one resets the ticket, the exit count and the block counts
        if ctid == 0:
            fence_acq_rel_gpu()
            old = atom_add_acqrel_gpu_u32(ws + o_shared_sync + SYNC_X, Int32(1))
            if old == ncta - 1:
                for bb in cutlass.range(nblk, unroll=1):
                    st_relaxed_gpu_u32(ws + o_shared_sync + SYNC_B + Int64(bb) * 4, Int32(0))
                st_relaxed_gpu_u32(ws + o_shared_sync + SYNC_T, Int32(0))
                st_relaxed_gpu_u32(ws + o_shared_sync + SYNC_X, Int32(0))

    @cute.jit
    def host(peer: cute.Pointer, o_x: Int64, o_x_sf: Int64, o_combine: Int64, o_shared_l2_x: Int64,
             o_shared_l2_sf: Int64, o_shared_sync: Int64, o_shared_split_count: Int64, o_shared_partials: Int64,
             shared_w1: Int64, shared_w1_scale: Int64, shared_w2: Int64, shared_w2_scale: Int64, err: Int64,
             timeout_ns: Int64, ntok: Int32):
        kernel(peer, o_x, o_x_sf, o_combine, o_shared_l2_x, o_shared_l2_sf, o_shared_sync, o_shared_split_count,
               o_shared_partials, shared_w1, shared_w1_scale, shared_w2, shared_w2_scale, err, timeout_ns,
               ntok).launch(
            grid=(1, 1, 1), block=(THREADS, 1, 1), smem=cfg.smem_bytes)

    fake = (fake_peer_desc(),) + tuple(Int64(0) for _ in OFFSET_PARAMS + WEIGHT_PARAMS + SCALAR_PARAMS_U64) + tuple(
        Int32(1) for _ in SCALAR_PARAMS_S32)
    return host, kernel, fake
