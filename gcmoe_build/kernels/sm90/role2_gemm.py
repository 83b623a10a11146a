"""role2 on sm_90a: FP8 x MXFP4 grouped GEMMs W1 (+SwiGLU, routing weight, FP8 requant) and W2 (BF16
partials) over token-ring blocks, register-A wgmma with in-register FP4 decode.

What is the issue's target already: packed FP4 weights are decoded to E4M3 in registers
(:mod:`.fp4_decode`) and fed as the A operand of ``wgmma.mma_async m64nBMk32 .e4m3`` (operands
swapped: weight rows = M, tokens = N = BM; SASS ``QGMMA ... R<a>, gdesc[..]``), the MXFP4 block
scales are folded into the decode as exact E4M3 exponent offsets (so W1's four K32 MMAs of a K128
step share one accumulator), weight loads carry an L2 EVICT_FIRST policy. Two thread-count variants (paper §4.4): 256
threads, each consumer thread loading its fragments straight from HBM into a two-stage register buffer; 384 threads
("pipelined"), a producer warpgroup streaming K128 stages with 1-D ``cp.async.bulk`` into up to 8 shared-memory stages
on full/empty mbarriers (bounded waits: trap after ``timeout_ns``), ``setmaxnreg`` 40/232 (32/104 when built for two
CTAs per SM: :attr:`Role2GemmConfig.setmaxnreg`).

These two are non-persistent (one CTA per (256-row tile, ring block), no ring handshake: the caller
launches after the blocks are full): the dev harness's kernels (:mod:`.role2_devbuild`). The persistent
ring-consuming variants are :mod:`.role2_persistent` (dev) and :mod:`.role2_ring` (shipped); all of them, and
role4's shared expert, are built from the same parts: :mod:`.role2_config` (the variant and the CTA's layout),
:mod:`.role2_stages` (the weight stage ring), :mod:`.role2_mainloop` (decode + register-A MMA steps),
:mod:`.role2_chunks` (activation chunks) and :mod:`.role2_epilogue`. Activations are staged by the
consumers, a K chunk at a time (:func:`for_each_chunk`: plain loads into one buffer, or with ``act_buffers=2`` the
next chunk's ``cp.async`` into a second buffer while the current one is multiplied, as the ring kernel does). The
epilogues are the ring kernel's (:func:`_w1_epilogue`, :func:`w2_epilogue`: staged in shared memory, 16-byte
stores). Not in these dev kernels: W2 scatter through the peer descriptor into the source rank's combine buffer (W2
writes a plain ``[row, H]`` buffer through a per-token row table), W1+W2 in one task stream.

Kernel contract (one layer, one rank; byte addresses as Int64 params; layouts from
``gcmoe_runtime.numerics``):

* CTA = 256 weight rows x BM tokens = 4 slabs of 64 rows; consumer warpgroup ``wg`` owns slabs
  ``2wg`` and ``2wg+1`` and issues two wgmma per K32.
* ``w``: code tiles ``uint8 [E, N/64, K/128, 4096]`` (``sm90_layout.permute_tiles``; thread ``t``
  of a warpgroup reads bytes ``[32t, 32t+32)`` of its slab's tile per K128 step), ``ws``: scale tiles
  ``uint8 [E, N/64, K/128, 256]`` (``sm90_layout.permute_scales`` of the transform's stored UE8M0
  scales), ``ef``: FP32 ``[E]`` expert factor. Weight value = decoded E4M3 (= fp4 x 2**(stored-133-5)) x
  2**5 x ``ef`` = fp4/64 x ``2**(stored-127)`` x ``ef`` (the transform's x64 convention). W1 rows are gate/up
  interleaved in 8-row groups (``gate_up``): accumulator row halves 0/1 of a thread are gate/up of one I-column.
* Ring block ``b`` (``grid.y``): ``bexp[b]`` expert, ``bntok[b]`` valid tokens (<= BM), activations
  ``act[b][BM][K]`` E4M3; scales W1: FP32 ``[b][BM][H/128]``, W2: UE8M0 ``[b][BM][I/L2_SCALE_GROUP]``. Padded
  tokens are zeroed on the way into shared memory and produce no output, so stale ring contents (even
  NaN) never leak.
* W1 out: ``l2[b][BM][I]`` E4M3 and ``l2s[b][BM][I/L2_SCALE_GROUP]`` UE8M0 (numerics reference steps 3-4:
  ``bf16`` round, clamp, ``gate*sigmoid(alpha*gate)*up*rw``, scale ``2**ceil(log2(amax_GROUP/448))``,
  1 for an all-zero group). W2 out: ``out[rowidx[b][t]][H]`` BF16 for valid tokens.

Per K32 step each warpgroup decodes 2 x 4 A registers (the row's K32 exponent through the table) and
issues 2 wgmma. One token scale per K128 (W1's FP32, W2's UE8M0 per L2_SCALE_GROUP = 128): the 4 K32 steps
chain on one partial, one wait and one FMA ``acc += partial * 32 * asc[token]`` per K128. The per-K32 path of
:func:`_mma_k128_steps` (a fresh partial per K32, FMA'd while the next step's MMAs run, ``lag``) serves role4's FP8
weights (a block scale per K32) and the ``fold_scales=False`` experiment.
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, Uint8, const_expr

from .ptx_mem import bar_sync, evict_first_policy, ld_global_f32, ld_global_s32, mbar_wait_or_trap, setmaxnreg
from .role2_chunks import _token_major_scale_addr, for_each_chunk
from .role2_config import (CONSUMER_THREADS, L2_SCALE_GROUP, PRODUCER_THREADS, Role2GemmConfig, STAGE_BYTES,
                           _consumer_lane)
from .role2_epilogue import _w1_epilogue, row_table_dst, w2_epilogue
from .role2_mainloop import K128Step, TokenScales, _mma_k128_steps
from .role2_stages import _init_stage_barriers, _load_k128, _produce_k128, stage_k128_step


def build_role2_gemm(cfg: Role2GemmConfig):
    """Return ``(host_fn, kernel_fn)`` for ``cfg``: a ``@cute.jit`` launcher (grid.y = blocks) and the
    ``@cute.kernel`` it launches. Parameters of the kernel, in order (all Int64 addresses unless
    noted): w, ws, ef, act, asc, bexp, bntok, aux (W1: rw FP32 [b][BM]; W2: rowidx Int32 [b][BM]),
    out, outs (W1: l2 scales; W2: unused, pass 0)."""
    if cfg.slab_passes != 1:
        raise ValueError("role2 slab_passes=2 is built by the persistent kernels (role2_persistent, role2_ring)")
    BM, K, KC = cfg.bm, cfg.k, cfg.kc
    NK128 = K // 128
    ND = BM // 2  # accumulator registers per m64 slot per thread
    NT = cfg.row_tiles
    W1 = cfg.mode == "w1"
    PIPE = cfg.pipelined
    P0 = PRODUCER_THREADS if PIPE else 0  # first consumer thread
    CT = CONSUMER_THREADS
    NS = cfg.stages
    I_COLS = cfg.rows // 2
    GS = cfg.act_scale_group
    NGS, NKG = KC // GS, K // GS  # activation scale groups per chunk / in total
    NSLAB = cfg.rows // 64
    ACT_OFF, ASC_OFF = 0, cfg.act_buffers * cfg.act_buffer_bytes
    AMAX_OFF = ASC_OFF + cfg.act_buffers * cfg.asc_buffer_bytes
    assert ASC_OFF >= BM * 512, "the W2 epilogue stages [BM][256] BF16 in the activation area"
    STAGE_OFF = 1024 * ((cfg.misc_bytes + 1023) // 1024)
    BAR_OFF = STAGE_OFF + NS * STAGE_BYTES  # full[NS] then empty[NS], 8 B each
    alpha, clamp = float(cfg.alpha), float(cfg.clamp)
    TMO = int(cfg.timeout_ns)

    @cute.kernel
    def role2_gemm_kernel(w: Int64, ws: Int64, ef: Int64, act: Int64, asc: Int64, bexp: Int64, bntok: Int64,
                          aux: Int64, out: Int64, outs: Int64):
        tid, _, _ = cute.arch.thread_idx()
        ntile, blk, _ = cute.arch.block_idx()
        tid = Int32(tid)
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        expert = ld_global_s32(bexp + Int64(blk) * 4)
        ntok = ld_global_s32(bntok + Int64(blk) * 4)
        policy = evict_first_policy()
        if const_expr(PIPE):
            if tid == 0:
                _init_stage_barriers(smem, BAR_OFF, NS)
            bar_sync(0, P0 + CT)

        if tid < P0:
            # ---------------- producer warpgroup (pipelined variant only) ----------------
            setmaxnreg(cfg.setmaxnreg[0], False)
            if tid == 0:
                if const_expr(not cfg.dev_compute_only):
                    slab0 = Int64(expert) * NSLAB + Int64(ntile) * 4
                    for kb in cutlass.range(NK128, unroll=1):
                        _produce_k128(smem, BAR_OFF, STAGE_OFF, NS, kb,
                                      lambda bar, ph: mbar_wait_or_trap(bar, ph, TMO), w, ws, slab0, NK128, kb, policy)
        else:
            # ---------------- consumer warpgroups ----------------
            if const_expr(PIPE):
                setmaxnreg(cfg.setmaxnreg[1], True)
            ctid = tid - P0
            wg, warp, g, t, tw = _consumer_lane(ctid)
            efac = ld_global_f32(ef + Int64(expert) * 4)
            slabs = [Int64(expert) * NSLAB + Int64(ntile) * 4 + Int64(wg * 2 + sl) for sl in range(2)]
            wbases = [w + slabs[sl] * NK128 * 4096 + Int64(tw) * 32 for sl in range(2)]
            sbases = [ws + slabs[sl] * NK128 * 256 + Int64(warp * 8 + g) * 8 for sl in range(2)]
            acc = cute.make_rmem_tensor((2 * ND,), Float32)
            for i in cutlass.range_constexpr(2 * ND):
                acc[i] = Float32(0.0)
            wbuf = cute.make_rmem_tensor((2 * 20,), Int32)  # 2 K128 stages x (16 weight + 4 scale) words
            if const_expr(not PIPE):
                _load_k128(wbuf, 0, Int32(0), wbases, sbases, policy)

            SPC = cfg.mma_steps_per_call

            def chunk_mma(kc, act_buf, asc_buf, prefetch):
                for k2 in cutlass.range(KC // (128 * SPC), unroll=1):
                    steps = []
                    for h in cutlass.range_constexpr(SPC):
                        kl128 = k2 * SPC + h  # K128 index within the chunk
                        kb = kc * (KC // 128) + kl128
                        # activation scales of this thread's tokens for this K128
                        ascl = TokenScales(asc_buf, kl128, t, BM, GS)
                        if const_expr(PIPE):
                            steps.append(stage_k128_step(cfg, smem, BAR_OFF, STAGE_OFF, NS, kb,
                                                         (lambda bar, ph: None) if cfg.dev_compute_only else
                                                         (lambda bar, ph: mbar_wait_or_trap(bar, ph, TMO)),
                                                         (wg, tw, warp, g), ascl, kl128))
                        else:
                            def fetch(h=h, kb=kb):
                                nxt = kb + 1 - Int32(kb + 1 >= NK128)  # last K128: harmless reload of itself
                                _load_k128(wbuf, 1 - h, nxt, wbases, sbases, policy)
                                return [wbuf[h * 20 + r] for r in range(20)]
                            steps.append(K128Step(fetch, ascl, kl128))
                    if const_expr(prefetch is not None):
                        steps[-1].issued = lambda k2=k2: prefetch(k2)
                    _mma_k128_steps(steps, acc, act_buf, BM, cfg.lag, fold=cfg.fold_scales, overlap=PIPE,
                                    prescaled=cfg.staged_fold_scale, slab_groups=cfg.slab_groups,
                                    scales_before_wait=cfg.scales_before_wait)

            for_each_chunk(cfg, smem, ACT_OFF, ASC_OFF, lambda tok: act + (Int64(blk) * BM + Int64(tok)) * K,
                           lambda kc, tok, kk: _token_major_scale_addr(asc, W1, blk, BM, NKG, kc, NGS, tok, kk),
                           ctid, ntok, chunk_mma)

            # ---------------- epilogues ----------------
            if const_expr(W1):
                _w1_epilogue(acc, smem, AMAX_OFF, ACT_OFF, efac, ntok, ntile, wg, warp, g, t,
                             lambda n: aux + (Int64(blk) * BM + Int64(n)) * 4,
                             lambda n, col: out + (Int64(blk) * BM + Int64(n)) * I_COLS + Int64(col),
                             lambda n, grp: (outs + (Int64(blk) * BM + Int64(n)) * (I_COLS // L2_SCALE_GROUP)
                                             + Int64(grp)), BM, alpha, clamp, fast_math=cfg.fast_math)
            else:
                # token n's output row: out[rowidx[blk][n]][rows], this task's 256 rows
                w2_epilogue(acc, efac, smem, ACT_OFF, AMAX_OFF, ntok, ctid,
                            lambda n: row_table_dst(out, aux + (Int64(blk) * BM + Int64(n)) * 4, cfg.rows, ntile), BM)

    @cute.jit
    def role2_gemm_host(w: Int64, ws: Int64, ef: Int64, act: Int64, asc: Int64, bexp: Int64, bntok: Int64,
                        aux: Int64, out: Int64, outs: Int64, nblocks: Int32):
        role2_gemm_kernel(w, ws, ef, act, asc, bexp, bntok, aux, out, outs).launch(
            grid=[NT, nblocks, 1], block=[cfg.threads, 1, 1], smem=cfg.smem_bytes, **cfg.occupancy_launch)

    return role2_gemm_host, role2_gemm_kernel
