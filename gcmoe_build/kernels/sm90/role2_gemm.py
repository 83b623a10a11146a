"""role2 on sm_90a, first correct version: FP8 x MXFP4 grouped GEMMs W1 (+SwiGLU, routing weight,
FP8 requant) and W2 (BF16 partials) over token-ring blocks, register-A wgmma with in-register decode.

Status (honest): non-persistent, one CTA per (weight-row tile, ring block); no ring handshake yet
(the test harness marks blocks ready before launch), no TMA, no warp specialisation; W2 stores
BF16 with 2-byte stores into a plain (row, H) buffer indexed by a per-token row table, not yet
16-byte stores through the peer descriptor. What *is* the issue's target already: weights stream
from HBM straight into registers (16-byte ``ld.global.nc`` with an L2 EVICT_FIRST policy), are
decoded FP4 -> E4M3 in registers (:mod:`.fp4_decode`) and fed as the A operand of
``wgmma.mma_async m64nBMk32 .e4m3`` (operands swapped: weight rows = M, tokens = N = BM), with the
MXFP4 block scales applied per K32 as FP32 FMAs outside the MMA.

Kernel contract (one layer, one rank; all tensors row-major, byte addresses as Int64 params):

* CTA = 256 threads = 2 warpgroups; tile = 256 weight rows x BM tokens. Each warpgroup owns two
  m64 row slots (``A``, ``B``) and issues two wgmma per K32. For W1 the host orders the 2I rows of
  an expert so that tile ``j``, warpgroup ``wg`` holds gate rows ``128j+64wg ..+64`` in slot A and
  the matching up rows in slot B: SwiGLU is thread-local. For W2 the slots are plain H rows.
* Weights ``w``: ``[E][R/256][K/32][256 threads][16 B]`` packed E2M1 codes, ``ws``:
  ``[E][R/256][K/128][8 warps][8 groups][16 B]`` UE8M0 bytes (see :mod:`.role2_layout`), ``ef``:
  FP32 ``[E]`` per-expert factor (window compensation x 64, the decode's missing ``2**6``).
* Ring block ``b`` (``grid.y``): ``bexp[b]`` expert, ``bntok[b]`` valid tokens (<= BM), activations
  ``act[b][BM][K]`` E4M3 and ``asc[b][BM][K/128]`` FP32. Padded tokens are zeroed on the way into
  shared memory and produce zero output, so stale ring contents (even NaN) never leak.
* W1 out: ``l2[b][BM][I]`` E4M3 and ``l2s[b][BM][I/128]`` FP32 (power of two), where
  ``y = min(bf16(g),c) * sigmoid(alpha*min(bf16(g),c)) * clamp(bf16(u),-c,c) * rw[b][t]`` with
  ``g``/``u`` the scaled accumulators; scale = ``2**ceil(log2(amax_128/448))`` over the 128 I-columns
  of the CTA (both warpgroups). W2 out: ``out[rowidx[b][t]][H]`` BF16 for valid tokens.

Per K32 step each warpgroup: decode 2 x 4 A registers, ``wgmma.fence``, 2 wgmma into a fresh
partial, commit; then wait for the *previous* step's partials (``wait_group 1``) and FMA them with
``ws[row] * asc[token]``: the MMA of step s overlaps the scale FMAs of step s-1. Weight loads run
one K128 ahead in a double register buffer.
"""
from __future__ import annotations

from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, Uint8, const_expr

from .fp4_decode import decode_fp4x8_e4m3
from .ptx_mem import (bar_sync, evict_first_policy, ld_global_f32, ld_global_s32, ld_global_v4,
                      ld_global_v4_stream, ld_shared_f32, st_global_f32, st_shared_f32, st_shared_v4)
from .role2_math import (bf16_round, fabs, fmax, fmin, sel_f32, shfl_bfly_f32, sigmoid, to_bf16_bits,
                         to_e4m3_byte, ue8m0_scale_for, ue8m0_to_f32)
from .wgmma_rs import fence_f32, smem_desc, wgmma_commit, wgmma_fence, wgmma_rs_e4m3, wgmma_wait
from .ptx_mem import _asm, _v  # noqa: F401  (re-exported helpers used by stores below)

THREADS = 256
ROWS_PER_CTA = 256
SUPPORTED_BM = (8, 16, 32, 64)
SMEM_ACT_BUDGET = 96 * 1024  # bytes of activations staged per K chunk


@dataclass(frozen=True)
class Role2GemmConfig:
    """Compile-time shape of one role2 GEMM kernel (one variant)."""

    mode: str  # "w1" or "w2"
    k: int  # contraction length: H for W1, I for W2
    rows: int  # weight rows per expert: 2I for W1, H for W2
    bm: int  # tokens per ring block (= wgmma N)
    alpha: float = 1.0
    clamp: float = 10.0

    def __post_init__(self):
        if self.mode not in ("w1", "w2"):
            raise ValueError(f"role2 mode must be 'w1' or 'w2', got {self.mode!r}")
        if self.bm not in SUPPORTED_BM:
            raise ValueError(f"role2 BM={self.bm} not supported; supported: {SUPPORTED_BM}")
        if self.k % 256:
            raise ValueError(f"role2 {self.mode}: K={self.k} must be a multiple of 256")
        if self.rows % ROWS_PER_CTA:
            raise ValueError(f"role2 {self.mode}: rows={self.rows} must be a multiple of {ROWS_PER_CTA}")
        if self.mode == "w1" and (self.rows // 2) % 128:
            raise ValueError(f"role2 w1: I={self.rows // 2} must be a multiple of 128")

    @property
    def kc(self) -> int:
        """K chunk staged in shared memory: the largest multiple of 256 dividing K within budget."""
        best = 256
        for kc in range(256, self.k + 1, 256):
            if self.k % kc == 0 and self.bm * kc <= SMEM_ACT_BUDGET:
                best = kc
        return best

    @property
    def smem_bytes(self) -> int:
        act = self.bm * self.kc
        asc = 4 * self.bm * (self.kc // 128)
        epi = 4 * self.bm * 8 + 4 * self.bm  # per-warp amax partials + per-token scale
        return act + asc + epi

    @property
    def row_tiles(self) -> int:
        return self.rows // ROWS_PER_CTA


def _load_k128(wbuf, stage: int, kb, wbase, sbase, policy):
    """Issue the loads of one K128 step into register stage ``stage`` (of 2): 4 x 16 B of packed
    FP4 codes (one per K32, EVICT_FIRST) and 16 B of UE8M0 scales for this thread's 4 rows."""
    for q in range(4):
        v = ld_global_v4_stream(wbase + (Int64(kb) * 4 + q) * 4096, policy)
        for r in range(4):
            wbuf[stage * 20 + q * 4 + r] = v[r]
    s = ld_global_v4(sbase + Int64(kb) * 1024)
    for r in range(4):
        wbuf[stage * 20 + 16 + r] = s[r]


def build_role2_gemm(cfg: Role2GemmConfig):
    """Return ``(host_fn, kernel_fn)`` for ``cfg``: a ``@cute.jit`` launcher (grid.y = blocks) and the
    ``@cute.kernel`` it launches. Parameters of the kernel, in order (all Int64 addresses unless
    noted): w, ws, ef, act, asc, bexp, bntok, aux (W1: rw FP32 [b][BM]; W2: rowidx Int32 [b][BM]),
    out, outs (W1: l2 scales; W2: unused, pass 0)."""
    BM, K, KC = cfg.bm, cfg.k, cfg.kc
    NK128, NKC = K // 128, K // KC
    ND = BM // 2  # accumulator registers per m64 slot per thread
    NT = cfg.row_tiles
    W1 = cfg.mode == "w1"
    I_COLS = cfg.rows // 2
    ACT_OFF, ASC_OFF = 0, BM * KC
    AMAX_OFF = ASC_OFF + 4 * BM * (KC // 128)
    SCL_OFF = AMAX_OFF + 4 * BM * 8
    UNITS = BM * KC // 16  # 16-byte activation units per chunk
    NSC = BM * (KC // 128)
    alpha, clamp = float(cfg.alpha), float(cfg.clamp)

    @cute.kernel
    def role2_gemm_kernel(w: Int64, ws: Int64, ef: Int64, act: Int64, asc: Int64, bexp: Int64, bntok: Int64,
                          aux: Int64, out: Int64, outs: Int64):
        tid, _, _ = cute.arch.thread_idx()
        ntile, blk, _ = cute.arch.block_idx()
        tid = Int32(tid)
        wg = tid // 128
        warp = (tid // 32) % 4
        lane = tid % 32
        g = lane // 4
        t = lane % 4
        smem = cute.arch.get_dyn_smem(Uint8, 128).toint()
        expert = ld_global_s32(bexp + Int64(blk) * 4)
        ntok = ld_global_s32(bntok + Int64(blk) * 4)
        efac = ld_global_f32(ef + Int64(expert) * 4)
        tile_lin = Int64(expert) * NT + Int64(ntile)
        wbase = w + tile_lin * (K // 32) * 4096 + Int64(tid) * 16
        sbase = ws + tile_lin * NK128 * 1024 + Int64((wg * 4 + warp) * 8 + g) * 16
        policy = evict_first_policy()

        acc = cute.make_rmem_tensor((2 * ND,), Float32)
        for i in cutlass.range_constexpr(2 * ND):
            acc[i] = Float32(0.0)
        wbuf = cute.make_rmem_tensor((2 * 20,), Int32)  # 2 K128 stages x (16 weight + 4 scale) words

        _load_k128(wbuf, 0, Int32(0), wbase, sbase, policy)

        for kc in cutlass.range(NKC, unroll=1):
            bar_sync(1, THREADS)  # previous chunk fully consumed (and no wgmma still reads it)
            for it in cutlass.range_constexpr((UNITS + THREADS - 1) // THREADS):
                u = tid + it * THREADS
                if const_expr((it + 1) * THREADS > UNITS):
                    u = cutlass.min(u, UNITS - 1)  # tail: duplicate the last unit (same bytes, same slot)
                c = u % (KC // 16)
                tok = u // (KC // 16)
                # padded tokens: load anyway (the ring block is allocated) and mask to zero, so
                # stale or NaN bytes of an earlier generation never reach the MMA
                keep = Int32(0) - Int32(tok < ntok)
                v = ld_global_v4(act + (Int64(blk) * BM + Int64(tok)) * K + Int64(kc) * KC + Int64(c) * 16)
                st_shared_v4(smem + ACT_OFF + (c * BM + tok) * 16, v[0] & keep, v[1] & keep, v[2] & keep,
                             v[3] & keep)
            for it in cutlass.range_constexpr((NSC + THREADS - 1) // THREADS):
                u = tid + it * THREADS
                if u < NSC:
                    kk = u % (KC // 128)
                    tok = u // (KC // 128)
                    sv = ld_global_f32(asc + ((Int64(blk) * BM + Int64(tok)) * NK128 + Int64(kc) * (KC // 128)
                                              + Int64(kk)) * 4)
                    st_shared_f32(smem + ASC_OFF + (kk * BM + tok) * 4, sel_f32(Int32(tok < ntok), sv, Float32(0.0)))
            # shared stores above are read by wgmma (async proxy): each writer fences, then barrier
            _asm("fence.proxy.async.shared::cta;", "", [], 0)
            bar_sync(1, THREADS)

            for k2 in cutlass.range(KC // 256, unroll=1):
                for h in cutlass.range_constexpr(2):
                    kl128 = k2 * 2 + h  # K128 index within the chunk
                    kb = kc * (KC // 128) + kl128
                    nxt = kb + 1 - Int32(kb + 1 >= NK128)  # last K128: harmless reload of itself
                    _load_k128(wbuf, 1 - h, nxt, wbase, sbase, policy)
                    # activation scales of this thread's tokens for this K128
                    ascl = [ld_shared_f32(smem + ASC_OFF + (kl128 * BM + 8 * (i >> 1) + 2 * t + (i & 1)) * 4)
                            for i in range(BM // 4)]
                    parts = [None] * 4
                    for q in cutlass.range_constexpr(5):
                        if const_expr(q < 4):
                            a = []
                            for r in cutlass.range_constexpr(4):
                                lo, hi = decode_fp4x8_e4m3(wbuf[h * 20 + q * 4 + r])
                                a.append(lo)
                                a.append(hi)
                            desc = smem_desc(smem + ACT_OFF + (kl128 * 8 + q * 2) * BM * 16, BM * 16, 128)
                            wgmma_fence()
                            pa = wgmma_rs_e4m3(BM, a[0:4], desc)
                            pb = wgmma_rs_e4m3(BM, a[4:8], desc)
                            wgmma_commit()
                            parts[q] = (pa, pb)
                        if const_expr(q > 0):
                            wgmma_wait(1 if q < 4 else 0)
                            pa, pb = parts[q - 1]
                            sw = wbuf[h * 20 + 16 + (q - 1)]
                            rs = [ue8m0_to_f32((sw >> (8 * j)) & 0xFF) for j in range(4)]
                            for i in cutlass.range_constexpr(ND):
                                tsc = ascl[(i >> 2) * 2 + (i & 1)]
                                hrow = (i >> 1) & 1
                                acc[i] = acc[i] + fence_f32(pa[i]) * (rs[hrow] * tsc)
                                acc[ND + i] = acc[ND + i] + fence_f32(pb[i]) * (rs[2 + hrow] * tsc)

        # ---------------- epilogues ----------------
        if const_expr(W1):
            amax_l = [Float32(0.0)] * (BM // 4)
            ys = []
            for i in cutlass.range_constexpr(ND):
                n = 8 * (i >> 2) + 2 * t + (i & 1)
                valid = Int32(n < ntok)
                rw = ld_global_f32(aux + (Int64(blk) * BM + Int64(n)) * 4)
                gte = fmin(bf16_round(acc[i] * efac), Float32(clamp))
                up = fmax(fmin(bf16_round(acc[ND + i] * efac), Float32(clamp)), Float32(-clamp))
                y = gte * sigmoid(gte * Float32(alpha)) * up * rw
                y = sel_f32(valid, y, Float32(0.0))
                ys.append(y)
                ti = (i >> 2) * 2 + (i & 1)
                amax_l[ti] = fmax(amax_l[ti], fabs(y))
            for ti in cutlass.range_constexpr(BM // 4):
                m = amax_l[ti]
                m = fmax(m, shfl_bfly_f32(m, 4))
                m = fmax(m, shfl_bfly_f32(m, 8))
                m = fmax(m, shfl_bfly_f32(m, 16))
                n = 8 * (ti >> 1) + 2 * t + (ti & 1)
                if g == 0:
                    st_shared_f32(smem + AMAX_OFF + ((wg * 4 + warp) * BM + n) * 4, m)
            bar_sync(1, THREADS)
            for i in cutlass.range_constexpr(ND):
                n = 8 * (i >> 2) + 2 * t + (i & 1)
                m = Float32(0.0)
                for p in cutlass.range_constexpr(8):
                    m = fmax(m, ld_shared_f32(smem + AMAX_OFF + (p * BM + n) * 4))
                scale, inv = ue8m0_scale_for(m)
                q8 = to_e4m3_byte(ys[i] * inv)
                col = ntile * 128 + wg * 64 + 16 * warp + g + 8 * ((i >> 1) & 1)
                if n < ntok:
                    _asm("st.global.u8 [$0], $1;", "l,r",
                         [_v(out + (Int64(blk) * BM + Int64(n)) * I_COLS + Int64(col), Int64), _v(q8)], 0)
                    if tid < 4:
                        if const_expr((i >> 1) & 1 == 0):
                            st_global_f32(outs + ((Int64(blk) * BM + Int64(n)) * (I_COLS // 128) + Int64(ntile)) * 4,
                                          scale)
        else:
            for i in cutlass.range_constexpr(ND):
                n = 8 * (i >> 2) + 2 * t + (i & 1)
                if n < ntok:
                    orow = ld_global_s32(aux + (Int64(blk) * BM + Int64(n)) * 4)
                    hr = 16 * warp + g + 8 * ((i >> 1) & 1)
                    for s in cutlass.range_constexpr(2):
                        row = ntile * ROWS_PER_CTA + wg * 128 + s * 64 + hr
                        bits = to_bf16_bits(acc[s * ND + i] * efac)
                        _asm("st.global.u16 [$0], $1;", "l,r",
                             [_v(out + (Int64(orow) * cfg.rows + Int64(row)) * 2, Int64), _v(bits)], 0)

    @cute.jit
    def role2_gemm_host(w: Int64, ws: Int64, ef: Int64, act: Int64, asc: Int64, bexp: Int64, bntok: Int64,
                        aux: Int64, out: Int64, outs: Int64, nblocks: Int32):
        role2_gemm_kernel(w, ws, ef, act, asc, bexp, bntok, aux, out, outs).launch(
            grid=[NT if W1 else NT, nblocks, 1], block=[THREADS, 1, 1], smem=cfg.smem_bytes)

    return role2_gemm_host, role2_gemm_kernel
