"""role2 on sm_90a, persistent 384-thread variant that consumes the token ring as it fills.

Same arithmetic as :mod:`.role2_gemm` (register-A e4m3 wgmma, in-register FP4 decode, per-K32
scale FMAs, identical epilogues; the helpers are shared), but:

* **Persistent schedule.** ``grid.x`` CTAs (co-resident: ``ctas_per_sm`` per SM of the compute partition) over
  ``nblocks * row_tiles`` tasks, task ``t`` = (ring block ``t // row_tiles``, 256-row tile ``t % row_tiles``):
  block-major, so the first filled ring block's tiles are spread over all CTAs. Static split: CTA ``c`` takes tasks
  ``c, c + G, c + 2G, ...``; ``Role2GemmConfig.dynamic_tasks``: the CTA's producer claims each next task from a
  counter (:mod:`.task_queue`). ``task_records``: the producer also does the task's acquires (W2: every W1 mask
  bit of the block) and loads and hands the consumers a record (the ring kernel's shipped form). ``signal_warp``:
  each task's releases run on warp 1 of the producer warpgroup, which joins the consumers' hand-over barrier
  (``SIGNAL_BAR``) once per task and computes the task from the static split (the ring kernel's form at two CTAs per
  SM and BM >= 32, where the signal warp shares the producer thread's loop and reads the consumers' coordinates
  record instead: its own loop spilled there). (Measured and
  removed: a producer-warpgroup thread running each task's release, session 11-12; the next task's chunk 0 copied
  during the last chunk, session 12: docs/PERFORMANCE.md.) The producer warpgroup streams K128 weight stages
  continuously across task boundaries (the ring of shared-memory stages never drains between
  tasks); the stage index is ``local_task * K/128 + k128``, identical in producer and consumers.
* **Ring handshake (paper §4.3).** Before a task's weights or activations are touched, the producer
  and the consumers acquire ``l1_full_count[b] >= BM * (gen[b] + 1)`` (``ld.acquire.gpu``, device
  timeout -> trap record code 2). W1 consumers, after their outputs are stored: barrier,
  ``fence.acq_rel.gpu``, then one thread releases ``l2_full_mask[b] |= 0b11 << 2*tile`` (the CTA's
  256 W1 rows are two W1 N128 tiles) and ``l1_empty_count[b] += 1`` (``red.release.gpu``; a block's
  generation is released when the count reaches ``row_tiles * (gen + 1)``). W2 consumers, before
  staging an activation chunk of K columns ``[k0, k1)``, acquire exactly the mask bits of the W1
  N128 tiles that produced them (tiles ``k0/64 .. k1/64 - 1``; timeout code 9), and release
  ``l2_empty_count[b] += 1`` when the task is done.

* **Epilogue warpgroup** (``Role2GemmConfig.epilogue_warpgroup``, dev ``_ppksafwre`` / ``_ppksafre`` /
  ``_ppksafwe``; session 60): a fourth warpgroup takes each finished task over (:mod:`.role2_handover`: the hand-over's
  fields ``(task, tokens)``, an end marker after the consumers' last task), runs its epilogue and its releases, while
  the consumers go on with the next task.

Not yet: W1 and W2 are still two launches (the paper's single task stream with a scheduler warp and
one-in-one-out L1/L2 claims is the next step), ``gen`` and the block count come from arrays/params
rather than the workspace's ``ring_block`` records, and W2 stores go to a local buffer, not through
the peer descriptor.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, Uint8, const_expr

from .ptx_mem import (bar_sync, evict_first_policy, fence_tensormap_acquire, launch_coords, ld_global_f32,
                      ld_global_s32, mbar_init, mbar_wait_or_trap, red_release_add_u32, red_release_or_b64,
                      setmaxnreg, wait_geq_u32_or_trap, wait_mask_u64_or_trap)
from .role2_chunks import (ActTma, act_tma_phase_flips, _token_major_scale_addr, for_each_chunk, all_w1_tile_bits,
                           w1_tile_bits)
from .role2_config import (CONSUMER_THREADS, L2_SCALE_GROUP, PRODUCER_THREADS, SIGNAL_BAR, SIGNAL_BAR_THREADS,
                           SIGNAL_WARP_TIDS, STAMP_EVENTS, Role2GemmConfig, _consumer_lane)
from .role2_epilogue import _w1_epilogue, row_table_dst, w2_epilogue, w2_stash_slab
from .role2_handover import (epilogue_w1, epilogue_w2, epilogue_warpgroup_loop, hand_over_task, handover_layout,
                             init_handover)
from .role2_mainloop import (TokenScales, _mma_k128_steps, pingpong_close, pingpong_open, pingpong_turns,
                             step_stamper)
from .role2_stages import _init_stage_barriers, _produce_k128, stage_k128_step
from .task_queue import check_slot_reuse, claim_task, init_task_slots, next_task, publish_task

TRAP_L1_FULL = 2  # gcmoe_runtime.workspace.trap.TRAP_CODES
TRAP_L2_MASK = 9

#: kernel formals in order (17 x u64 addresses, then the block count); ``ticket``: the task counter of
#: ``Role2GemmConfig.dynamic_tasks`` (a zeroed u32; unused by the static split); ``act_map``: the global address of
#: the activations' tensor map (``Role2GemmConfig.act_tma``: ``gcmoe_runtime.workspace.act_tma``; unused otherwise)
PARAMS = ("w", "ws", "ef", "act", "asc", "bexp", "bntok", "bgen", "aux", "out", "outs",
          "l1_full", "l1_empty", "l2_mask", "err", "ticket", "act_map", "nblocks")


def build_role2_persistent(cfg: Role2GemmConfig):
    """``(host_fn, kernel_fn)``; host args: the 17 addresses of :data:`PARAMS`, ``nblocks``, ``ncta``
    (grid size). ``l1_empty`` / ``l2_mask`` are W1's release targets, W2 reads ``l2_mask`` and
    releases into ``l1_empty``'s sibling passed as ``l1_empty`` (the L2 empty counter)."""
    if not cfg.pipelined:
        raise ValueError("the persistent role2 kernel is the 384-thread pipelined variant (pipelined=True)")
    BM, K, KC = cfg.bm, cfg.k, cfg.kc
    SPC = cfg.mma_steps_per_call  # K128 steps per _mma_k128_steps call: the tensor cores drain once per call
    NK128 = K // 128
    ND = BM // 2
    NT = cfg.row_tiles
    W1 = cfg.mode == "w1"
    P0, CT, NS = PRODUCER_THREADS, CONSUMER_THREADS, cfg.stages
    I_COLS = cfg.rows // 2
    GS = cfg.act_scale_group
    NGS, NKG = KC // GS, K // GS
    NSLAB = cfg.rows // 64
    ACT_OFF, ASC_OFF = 0, cfg.act_buffers * cfg.act_buffer_bytes
    AMAX_OFF = ASC_OFF + cfg.act_buffers * cfg.asc_buffer_bytes
    ACT_BAR_OFF = AMAX_OFF + 4 * BM * 16  # act_tma: the chunk buffers' mbarriers (Role2GemmConfig.act_bar_bytes)
    STAGE_OFF = 1024 * ((cfg.misc_bytes + 1023) // 1024)
    BAR_OFF = STAGE_OFF + NS * cfg.stage_bytes
    NP, NSL = cfg.slab_passes, cfg.slabs_per_pass  # passes over K per task, slabs per warpgroup and pass
    STASH_OFF = cfg.misc_bytes - cfg.stash_bytes  # pass 0's epilogue values (slab_passes = 2)
    alpha, clamp = float(cfg.alpha), float(cfg.clamp)
    TMO = int(cfg.timeout_ns)
    DYN, REC = cfg.dynamic_tasks, cfg.task_records
    SLOTS = DYN or REC  # the producer hands each task to the consumers through the task slots
    TASK_OFF = BAR_OFF + 2 * 8 * NS  # the task slots follow the stage barriers
    EARLY = cfg.w2_early_release and not W1  # W2: released in the epilogue, before its stores
    SIG = cfg.signal_warp  # the releases run on the signal warp, handed over at SIGNAL_BAR
    TASK_BITS = 0 if W1 else all_w1_tile_bits(K)  # W2: every W1 mask bit of the block's I
    EPIWG = cfg.epilogue_warpgroup  # every task's epilogue and releases in a fourth warpgroup (role2_handover)
    HO = handover_layout(cfg.handover_off, BM) if EPIWG else None
    if SLOTS:
        check_slot_reuse(NK128 * NP, NS, f"role2 {cfg.mode} persistent")

    def pass_base(li, p: int):
        """The weight-stage stream index of K128 step 0 of pass ``p`` of the CTA's ``li``-th task (producer and
        consumers count the same stream)."""
        gs = li * (NK128 * NP)
        return gs + p * NK128 if p else gs

    def acquire_task(task, bgen, bexp, l1_full, err):
        """Task -> (ring block, row tile, expert), once the block's generation is full (trap code 2)."""
        blk = task // NT
        ntile = task % NT
        gen = ld_global_s32(bgen + Int64(blk) * 4)
        wait_geq_u32_or_trap(l1_full + Int64(blk) * 4, BM * (gen + 1), err, TRAP_L1_FULL, TMO)
        expert = ld_global_s32(bexp + Int64(blk) * 4)
        return blk, ntile, expert

    def qwait(bar, ph):  # the task hand-offs' bounded mbarrier wait
        mbar_wait_or_trap(bar, ph, TMO)

    def stamper(buf, cta, wg, first_thread, gs):  # Role2GemmConfig.step_stamps (dev): two warpgroup rows per CTA
        return step_stamper(buf, cta, 2, wg, first_thread, gs)

    def release_task(task, l2_mask, l1_empty):
        """Make task ``task``'s stores visible at GPU scope, then its signals: W1 its two N128 mask bits, both one
        ``l1_empty`` count. Consumer thread 0 after the consumers' barrier, or (signal_warp) the signal warp's lane 0
        after the hand-over barrier."""
        blk = task // NT
        ntile = task % NT
        # release operations: each cumulative over the stores the caller's barrier ordered before it; no separate
        # fence.acq_rel (its MEMBAR + L1 invalidation, session 12)
        if const_expr(W1):
            red_release_or_b64(l2_mask + Int64(blk) * 8, Int64(3) << Int64(2 * ntile))
        red_release_add_u32(l1_empty + Int64(blk) * 4, Int32(1))

    def static_task(cta, li, ntasks, ncta):
        """Static split: this CTA's ``li``-th task, -1 past its last."""
        task = cta + li * ncta
        return Int32(task < ntasks) * (task + 1) - 1

    def producer_task(ticket, cta, li, ntasks, ncta):
        """Producer thread: this CTA's ``li``-th task or -1 (dynamic_tasks: claimed)."""
        if DYN:
            return claim_task(ticket, ntasks, ncta)
        return static_task(cta, li, ntasks, ncta)

    def announce_task(smem, li, task, blk, expert, bntok, ef, l2_mask, err):
        """Producer thread, after the task's acquire: hand it to the consumers (task_records: with its record, once
        W2's W1 mask bits are all set)."""
        if REC:
            if const_expr(not W1):
                wait_mask_u64_or_trap(l2_mask + Int64(blk) * 8, Int64(TASK_BITS), err, TRAP_L2_MASK, TMO)
            publish_task(smem + TASK_OFF, li, task, expert, ld_global_s32(bntok + Int64(blk) * 4),
                         ld_global_f32(ef + Int64(expert) * 4))
        elif DYN:
            publish_task(smem + TASK_OFF, li, task)

    def announce_end(smem, li):
        if REC:
            publish_task(smem + TASK_OFF, li, Int32(-1), Int32(0), Int32(0), Float32(0.0))
        elif DYN:
            publish_task(smem + TASK_OFF, li, Int32(-1))

    def consumer_task(smem, cta, li, ntasks, ncta):
        """Consumers: ``(task or -1, expert, tokens, factor)``, the last three from the task record (task_records;
        else placeholders: the consumers acquire and load them)."""
        if REC:
            return next_task(smem + TASK_OFF, li, qwait, record=True)
        task = next_task(smem + TASK_OFF, li, qwait) if DYN else static_task(cta, li, ntasks, ncta)
        return task, Int32(0), Int32(0), Float32(0.0)

    def epilogue_warpgroup(smem, e, aux, out, outs, l2_mask, l1_empty):
        """The epilogue warpgroup's loop (:mod:`.role2_handover`) over the hand-overs' fields ``(task, tokens)``, with
        this kernel's addresses (the dev buffers' rows of ring block ``task // NT``) and releases (:func:`release_task`:
        W1 after its stores, W2 once its destinations are loaded)."""
        def row(task, n):
            return Int64(task // NT) * BM + Int64(n)

        def run_task(fields):
            task, ntok = fields[0], fields[1]
            if const_expr(W1):
                epilogue_w1(smem, HO, AMAX_OFF, e, ntok, task % NT, lambda n: aux + row(task, n) * 4,
                            lambda n, col: out + row(task, n) * I_COLS + Int64(col),
                            lambda n, grp: outs + row(task, n) * (I_COLS // L2_SCALE_GROUP) + Int64(grp), BM, alpha,
                            clamp, cfg.fast_math, cfg.k_interleave)
            else:
                epilogue_w2(smem, HO, AMAX_OFF, e, ntok,
                            lambda n: row_table_dst(out, aux + row(task, n) * 4, cfg.rows, task % NT), BM,
                            (lambda: release_task(task, l2_mask, l1_empty)) if EARLY else None)

        epilogue_warpgroup_loop(smem, HO, 2, e, qwait, run_task,
                                None if EARLY else lambda fields: release_task(fields[0], l2_mask, l1_empty))

    @cute.kernel
    def role2_persistent_kernel(w: Int64, ws: Int64, ef: Int64, act: Int64, asc: Int64, bexp: Int64, bntok: Int64,
                                bgen: Int64, aux: Int64, out: Int64, outs: Int64, l1_full: Int64, l1_empty: Int64,
                                l2_mask: Int64, err: Int64, ticket: Int64, act_map: Int64, nblocks: Int32):
        tid, cta, ncta = launch_coords()
        ntasks = nblocks * NT
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        policy = evict_first_policy()
        if tid == 0:
            if const_expr(cfg.act_tma):
                for b in cutlass.range_constexpr(cfg.act_buffers):
                    mbar_init(smem + ACT_BAR_OFF + 8 * b, 1)
            _init_stage_barriers(smem, BAR_OFF, NS)
            if const_expr(SLOTS):
                init_task_slots(smem + TASK_OFF)
            if const_expr(EPIWG):
                init_handover(smem, HO)
        bar_sync(0, cfg.threads)

        if tid < P0:
            setmaxnreg(cfg.setmaxnreg[0], False)
            if tid == 0:
                li = Int32(0)
                task = producer_task(ticket, cta, li, ntasks, ncta)
                while task >= 0:
                    blk, ntile, expert = acquire_task(task, bgen, bexp, l1_full, err)
                    announce_task(smem, li, task, blk, expert, bntok, ef, l2_mask, err)
                    slab0 = Int64(expert) * NSLAB + Int64(ntile) * 4
                    for p in cutlass.range_constexpr(NP):  # slab_passes = 2: slabs p and 2 + p, one per warpgroup
                        for kb in cutlass.range(NK128, unroll=1):
                            _produce_k128(smem, BAR_OFF, STAGE_OFF, NS, pass_base(li, p) + kb,
                                          lambda bar, ph: mbar_wait_or_trap(bar, ph, TMO), w, ws,
                                          slab0 + p if p else slab0, NK128, kb, policy, 2 * NSL, NP)
                            if const_expr(cfg.step_stamps):
                                stamper(ticket, cta, Int32(0), Int32(1), pass_base(li, p) + kb)(
                                    STAMP_EVENTS.index("produced"))
                    li = li + 1
                    task = producer_task(ticket, cta, li, ntasks, ncta)
                announce_end(smem, li)
            if const_expr(SIG):
                if tid >= SIGNAL_WARP_TIDS[0] and tid < SIGNAL_WARP_TIDS[1]:
                    # the signal warp: the consumers' task sequence (static split), one hand-over per task
                    li = Int32(0)
                    task = static_task(cta, li, ntasks, ncta)
                    while task >= 0:
                        bar_sync(SIGNAL_BAR, SIGNAL_BAR_THREADS)
                        if tid == SIGNAL_WARP_TIDS[0]:
                            release_task(task, l2_mask, l1_empty)
                        li = li + 1
                        task = static_task(cta, li, ntasks, ncta)
        elif tid >= P0 + CT:  # the epilogue warpgroup (epilogue_warpgroup builds only: no thread gets here otherwise)
            if const_expr(EPIWG):
                setmaxnreg(cfg.epilogue_regs, False)
                epilogue_warpgroup(smem, tid - P0 - CT, aux, out, outs, l2_mask, l1_empty)
        else:
            setmaxnreg(cfg.setmaxnreg[1], True)
            ctid = tid - P0
            wg, warp, g, t, tw = _consumer_lane(ctid)
            acc = cute.make_rmem_tensor((NSL * ND,), Float32)
            if const_expr(cfg.act_tma):
                if ctid == 0:
                    fence_tensormap_acquire(act_map)
            turns = None
            if const_expr(cfg.pingpong):
                turns = pingpong_turns(wg)
                pingpong_open(wg)
            li = Int32(0)
            task, rexpert, rntok, refac = consumer_task(smem, cta, li, ntasks, ncta)
            while task >= 0:
                if const_expr(REC):
                    blk = task // NT
                    ntile = task % NT
                    expert, ntok, efac = rexpert, rntok, refac
                else:
                    blk, ntile, expert = acquire_task(task, bgen, bexp, l1_full, err)
                    ntok = ld_global_s32(bntok + Int64(blk) * 4)
                    efac = ld_global_f32(ef + Int64(expert) * 4)

                def w1_epilogue_task(part: int):  # _w1_epilogue's part (slab_passes = 2: 1 after pass 0, 2 after 1)
                    _w1_epilogue(acc, smem, AMAX_OFF, ACT_OFF, efac, ntok, ntile, wg, warp, g, t,
                                 lambda n: aux + (Int64(blk) * BM + Int64(n)) * 4,
                                 lambda n, col: out + (Int64(blk) * BM + Int64(n)) * I_COLS + Int64(col),
                                 lambda n, grp: (outs + (Int64(blk) * BM + Int64(n)) * (I_COLS // L2_SCALE_GROUP)
                                                 + Int64(grp)), BM, alpha, clamp, part, STASH_OFF,
                                 fast_math=cfg.fast_math, k_interleave=cfg.k_interleave)

                def wait_w1_tiles(kc):  # W2: the W1 tiles that produced columns [kc*KC, (kc+1)*KC)
                    wait_mask_u64_or_trap(l2_mask + Int64(blk) * 8, w1_tile_bits(kc, KC), err, TRAP_L2_MASK, TMO)

                for p in cutlass.range_constexpr(NP):  # slab_passes = 2: the warpgroup's slab p over the whole K
                    for i in cutlass.range_constexpr(NSL * ND):
                        acc[i] = Float32(0.0)
                    gs0 = pass_base(li, p)

                    def chunk_mma(kc, act_buf, asc_buf, prefetch):
                        for k2 in cutlass.range(KC // (128 * SPC), unroll=1):
                            steps = []
                            for h in cutlass.range_constexpr(SPC):
                                kl128 = k2 * SPC + h
                                steps.append(stage_k128_step(
                                    cfg, smem, BAR_OFF, STAGE_OFF, NS, gs0 + kc * (KC // 128) + kl128,
                                    lambda bar, ph: mbar_wait_or_trap(bar, ph, TMO), (wg, tw, warp, g),
                                    TokenScales(asc_buf, kl128, t, BM, GS), kl128))
                                if const_expr(cfg.step_stamps):
                                    steps[-1].stamp = stamper(ticket, cta, wg, Int32(tw == 0),
                                                              gs0 + kc * (KC // 128) + kl128)
                            if const_expr(prefetch is not None):
                                steps[-1].issued = lambda k2=k2: prefetch(k2)
                            _mma_k128_steps(steps, acc, act_buf, BM, cfg.lag, fold=cfg.fold_scales,
                                            prescaled=cfg.staged_fold_scale, sw128=cfg.act_tma,
                                            slab_groups=cfg.slab_groups, nslab=NSL, decode=not cfg.dev_no_decode,
                                            turns=turns, k_interleave_tig=t if const_expr(cfg.k_interleave) else None,
                                            scales_before_wait=cfg.scales_before_wait,
                                            words_ahead=cfg.dev_words_ahead)

                    if const_expr(cfg.act_tma):
                        # each pass moves the chunk buffers' parities by act_tma_phase_flips: two passes per task
                        # bring them back, so pass p starts at p flips
                        act_src = ActTma(act_map, blk * BM, (p if NP == 2 else (li & 1)) * act_tma_phase_flips(cfg),
                                         ACT_BAR_OFF)
                    else:
                        act_src = lambda tok: act + (Int64(blk) * BM + Int64(tok)) * K  # noqa: E731
                    for_each_chunk(cfg, smem, ACT_OFF, ASC_OFF, act_src,
                                   lambda kc, tok, kk: _token_major_scale_addr(asc, W1, blk, BM, NKG, kc, NGS, tok,
                                                                               kk),
                                   ctid, ntok, chunk_mma, None if W1 or REC else wait_w1_tiles)
                    if const_expr(NP == 2 and p == 0):  # the first slab's epilogue values wait in the stash
                        if const_expr(W1):
                            w1_epilogue_task(1)
                        else:
                            w2_stash_slab(acc, efac, smem, STASH_OFF, ctid, BM)

                if const_expr(EPIWG):  # the epilogue warpgroup takes the task over (its barriers, its releases)
                    hand_over_task(acc, efac, smem, HO, ctid, wg, warp, li, (task, ntok), W1, BM, qwait)
                elif const_expr(W1):
                    w1_epilogue_task(2 if NP == 2 else 0)
                else:
                    def early_release():  # W2's release needs only its reads done (w2_early_release)
                        if ctid == 0:
                            release_task(task, l2_mask, l1_empty)

                    w2_epilogue(acc, efac, smem, ACT_OFF, AMAX_OFF, ntok, ctid,
                                lambda n: row_table_dst(out, aux + (Int64(blk) * BM + Int64(n)) * 4, cfg.rows, ntile),
                                BM, early_release if EARLY and not SIG else None,
                                (SIGNAL_BAR, SIGNAL_BAR_THREADS) if EARLY and SIG else (1, CT),
                                STASH_OFF if NP == 2 else -1)
                # publish: every consumer's stores, then one release per task (also orders the next
                # task's shared-memory reuse after this task's epilogue reads: for_each_chunk's first barrier does
                # that too, so with the signal warp W2's early hand-over needs no barrier here)
                if const_expr(SIG):
                    if const_expr(not EARLY):
                        bar_sync(SIGNAL_BAR, SIGNAL_BAR_THREADS)
                elif const_expr(not EPIWG):
                    bar_sync(1, CT)
                    if const_expr(not EARLY):
                        if ctid == 0:
                            release_task(task, l2_mask, l1_empty)
                li = li + 1
                task, rexpert, rntok, refac = consumer_task(smem, cta, li, ntasks, ncta)
            if const_expr(EPIWG):  # the end marker ends the epilogue warpgroup's loop
                hand_over_task(acc, Float32(0.0), smem, HO, ctid, wg, warp, li, (task,), W1, BM, qwait, end=True)
            if const_expr(cfg.pingpong):
                pingpong_close(wg)

    @cute.jit
    def role2_persistent_host(w: Int64, ws: Int64, ef: Int64, act: Int64, asc: Int64, bexp: Int64, bntok: Int64,
                              bgen: Int64, aux: Int64, out: Int64, outs: Int64, l1_full: Int64, l1_empty: Int64,
                              l2_mask: Int64, err: Int64, ticket: Int64, act_map: Int64, nblocks: Int32,
                              ncta: Int32):
        role2_persistent_kernel(w, ws, ef, act, asc, bexp, bntok, bgen, aux, out, outs, l1_full, l1_empty, l2_mask,
                                err, ticket, act_map, nblocks).launch(grid=[ncta, 1, 1], block=[cfg.threads, 1, 1],
                                                     smem=cfg.smem_bytes, **cfg.occupancy_launch)

    return role2_persistent_host, role2_persistent_kernel
