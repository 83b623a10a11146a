"""Dev probe (never in a bundle): the BM 64 K loop with the FP4 decode in its own warpgroup and both wgmma operands in
shared memory — what the 64-token point could reach if the decode left the MMA warps' chain (session 59; the K-loop
probe :mod:`.kloop_probe` measured the shipped step alone at ~70.5 % of an H200's read, its decode 27 % of it).

One CTA per SM, 512 threads: the producer warpgroup (thread 0 bulk-copies the same K128 FP4 stages as the shipped
kernel, :func:`.role2_stages._produce_k128`), a **decoder warpgroup** and two **MMA warpgroups**:

* the decoder reads a stage's codes as 1 024 16-byte units (unit ``u``: slab ``u // 256``, row ``(u % 256) // 4``,
  K32 block ``u % 4``; thread ``tau`` takes units ``j * 128 + tau``, consecutive lanes consecutive units), decodes
  each unit's 32 codes with the shipped in-register decode (:func:`.fp4_decode.decode_fp4x8_e4m3`, the block's
  exponent folded in through :func:`.fp4_decode.fold_lut`) and stores the 32 E4M3 bytes into a decoded buffer of
  256 rows x 128 B in the 128-byte swizzle (row ``R``'s 16-byte unit ``c`` at ``R * 128 + ((c ^ R % 8) << 4)``:
  4 wavefronts per 512-byte store, the minimum), fenced for the async proxy; ``DEC_BUFS`` such buffers, mbarriers
  full (the decoder's 128 arrivals) / empty (the MMA threads' 256);
* MMA warpgroup ``m`` runs ``wgmma m64n128k32`` with A = the K512 activation chunk (64 tokens x K, the shipped
  chunk's layout) and B = its 128 decoded weight rows, both by descriptor, four K32 chained per K128 step, waits,
  releases the buffer and promotes the FP32 partial into its accumulators (``acc += partial x token scale``: the
  tokens are M here, so a thread needs two token scales per step, not sixteen).

Which code lands at which (row, k) is this probe's own choice (the bench's all-ones activations make a CTA's sum
independent of it, so the check is that every code is decoded once with its block's exponent); a kernel of this form
would need the host transform to write the codes in that order. Same kernel formals and output as
:mod:`.kloop_probe` (``task_steps`` / ``pause`` / ``act`` unused), so ``bench_kloop.py`` runs its forms by name.
"""
from __future__ import annotations

from typing import NamedTuple

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint8, const_expr
from cutlass.cutlass_dsl import dsl_user_op

from .fp4_decode import decode_fp4x8_e4m3, fold_lut
from .kloop_probe import (ACT_BYTES, ACT_OFF, ASC_BYTES, ASC_OFF, BM, CHUNK_K128, E4M3_ONES, FOLDED_ONE_BITS,
                          SMEM_LIMIT, STAGE_OFF, TIMEOUT_NS, probe_host)
from .ptx_mem import (bar_sync, evict_first_policy, fence_proxy_async_shared, launch_coords, ld_shared_f32,
                      ld_shared_v4, mbar_arrive, mbar_init, mbar_init_fence, mbar_wait_or_trap, setmaxnreg,
                      st_global_f32, st_shared_v4)
from .role2_config import PRODUCER_THREADS, STAGE_BYTES
from .role2_stages import _init_stage_barriers, _produce_k128, stage_slot
from .wgmma_rs import _asm, _v, fence_f32, smem_desc_sw128, wgmma_commit, wgmma_fence, wgmma_ss_e4m3, wgmma_wait

ROWS = 256  # a stage's weight rows (four 64-row slabs)
DEC_BYTES = ROWS * 128  # one decoded K128 step: 256 rows x 128 E4M3
MMA_N = ROWS // 2  # each MMA warpgroup's weight rows: the wgmma's N
UNITS = ROWS * 4  # 16-byte code units per stage (a row's K32 block each)


@dsl_user_op
def _ld_shared_u8(saddr, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("ld.shared.u8 $0, [$1];", "=r,r", [_v(saddr)], 1)[0])


class SsForm(NamedTuple):
    """One decoder-warpgroup form (:data:`SS_FORMS`)."""
    stages: int  # FP4 stages
    dec_bufs: int  # decoded buffers between the decoder and the MMA warpgroups
    regs: tuple[int, int, int]  # producer / decoder / MMA registers after setmaxnreg
    decoders: int = 1  # decoder warpgroups (2: each decodes half of a stage's units)
    decode: bool = True  # False (timing only): the raw code words are stored as the "decoded" bytes


SS_FORMS = {"ss6d2": SsForm(6, 2, (24, 152, 168)), "ss4d3": SsForm(4, 3, (24, 152, 168)),
            "ss6d2x": SsForm(6, 2, (24, 152, 168), decode=False),
            "ss6d2w": SsForm(6, 2, (24, 64, 160), decoders=2), "ss4d3w": SsForm(4, 3, (24, 64, 160), decoders=2)}
TIMING_ONLY = tuple(f for f, v in SS_FORMS.items() if not v.decode)


def threads_of(form: str) -> int:
    return PRODUCER_THREADS + 128 * (SS_FORMS[form].decoders + 2)


def ss_layout(form: str) -> dict:
    """Shared-memory offsets: the chunk and its scales (as :mod:`.kloop_probe`), the FP4 stages, the decoded buffers
    (1024-byte aligned: the swizzle atom), then the barriers (stage full / empty, decoded full / empty)."""
    f = SS_FORMS[form]
    dec = 1024 * ((STAGE_OFF + f.stages * STAGE_BYTES + 1023) // 1024)
    bar = dec + f.dec_bufs * DEC_BYTES
    total = bar + 16 * (f.stages + f.dec_bufs)
    if total > SMEM_LIMIT:
        raise ValueError(f"kloop_ss_probe {form}: {total} B of shared memory (limit {SMEM_LIMIT})")
    return {"stage": STAGE_OFF, "dec": dec, "bar": bar, "dec_bar": bar + 16 * f.stages, "smem": total}


def build_ss_probe(form: str):
    """``(host_fn, kernel_fn)`` of one form; host args as :func:`.kloop_probe.build_probe`'s."""
    f = SS_FORMS[form]
    ns, nd, ndec = f.stages, f.dec_bufs, f.decoders
    prod_regs, dec_regs, mma_regs = f.regs
    threads = threads_of(form)
    if PRODUCER_THREADS * prod_regs + 128 * ndec * dec_regs + 256 * mma_regs > threads * (65536 // threads // 8 * 8):
        raise ValueError(f"kloop_ss_probe {form}: setmaxnreg {f.regs} exceeds the launch allocation")
    upt = 8 // ndec  # code units per decoder thread and step
    lay = ss_layout(form)

    def wait(bar, ph):
        mbar_wait_or_trap(bar, ph, TIMEOUT_NS)

    @cute.kernel
    def kloop_ss_kernel(w: Int64, ws: Int64, out: Int64, iters: Int32, stamps: Int64, task_steps: Int32,
                        pause: Int32, act: Int64):
        tid, cta, _ = launch_coords()
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        if tid == 0:
            _init_stage_barriers(smem, lay["bar"], ns, 128 * ndec)  # a stage is emptied by the decoder warpgroups
            for d in cutlass.range_constexpr(nd):
                mbar_init(smem + lay["dec_bar"] + 8 * d, 128 * ndec)
                mbar_init(smem + lay["dec_bar"] + 8 * (nd + d), 256)
            mbar_init_fence()
        mtid = tid - PRODUCER_THREADS - 128 * ndec  # the MMA warpgroups' thread index
        if mtid >= 0:  # the activation chunk (E4M3 1.0) and the pre-folded token scales, as kloop_probe
            for i in cutlass.range_constexpr(ACT_BYTES // (16 * 256)):
                st_shared_v4(smem + ACT_OFF + (i * 256 + mtid) * 16, *([Int32(E4M3_ONES)] * 4))
            if mtid < ASC_BYTES // 16:
                st_shared_v4(smem + ASC_OFF + mtid * 16, *([Int32(FOLDED_ONE_BITS)] * 4))
            fence_proxy_async_shared()
        bar_sync(0, threads)

        if tid < PRODUCER_THREADS:
            setmaxnreg(prod_regs, False)
            if tid == 0:
                policy = evict_first_policy()
                for gs in cutlass.range(iters, unroll=1):
                    _produce_k128(smem, lay["bar"], lay["stage"], ns, gs, wait, w, ws, Int64(cta) * 4, Int64(iters),
                                  gs, policy)
        elif mtid < 0:  # the decoder warpgroup
            setmaxnreg(dec_regs, dec_regs > 65536 // threads // 8 * 8)  # 640 threads start at 96: the decoders give
            tau = (tid - PRODUCER_THREADS) % 128
            j0 = (tid - PRODUCER_THREADS) // 128 * upt  # this decoder warpgroup's first unit row
            for gs in cutlass.range(iters, unroll=1):
                s, use = stage_slot(gs, ns)
                d, duse = stage_slot(gs, nd)
                wait(smem + lay["bar"] + 8 * s, use & 1)
                stage = smem + lay["stage"] + s * STAGE_BYTES
                codes = [ld_shared_v4(stage + ((j0 + j) * 128 + tau) * 16) for j in range(upt)]
                # unit u's block scale: byte u of the scale tiles (slab u // 256, row, block u % 4: row * 4 + block)
                luts = [fold_lut(_ld_shared_u8(stage + UNITS * 16 + (j0 + j) * 128 + tau)) for j in range(upt)]
                mbar_arrive(smem + lay["bar"] + 8 * (ns + s))  # the stage's bytes are in registers
                wait(smem + lay["dec_bar"] + 8 * (nd + d), (duse & 1) ^ 1)  # the MMAs of this buffer's last use
                dec = smem + lay["dec"] + d * DEC_BYTES
                for j in cutlass.range_constexpr(upt):
                    row = (j0 + j) * 32 + tau // 4  # u = j * 128 + tau: slab j // 2, row (j % 2) * 32 + tau // 4
                    blk = tau % 4
                    regs = []
                    if const_expr(f.decode):
                        for x in codes[j]:
                            regs.extend(decode_fp4x8_e4m3(x, luts[j], luts[j]))
                    else:
                        regs = codes[j] + codes[j]
                    for h in cutlass.range_constexpr(2):
                        st_shared_v4(dec + row * 128 + (((2 * blk + h) ^ (row % 8)) << 4), *regs[4 * h:4 * h + 4])
                fence_proxy_async_shared()  # the wgmmas read the buffer through the async proxy
                mbar_arrive(smem + lay["dec_bar"] + 8 * d)
        else:  # the MMA warpgroups
            setmaxnreg(mma_regs, True)
            m = mtid // 128
            tok = (mtid // 32) % 4 * 16 + (mtid % 32) // 4  # the thread's accumulator rows: tokens tok, tok + 8
            acc = cute.make_rmem_tensor((MMA_N // 2,), Float32)
            for i in cutlass.range_constexpr(MMA_N // 2):
                acc[i] = Float32(0.0)
            for gs in cutlass.range(iters, unroll=1):
                d, duse = stage_slot(gs, nd)
                kl = gs % CHUNK_K128
                wait(smem + lay["dec_bar"] + 8 * d, duse & 1)
                wgmma_fence()
                part = None
                for q in cutlass.range_constexpr(4):
                    a = smem_desc_sw128(smem + ACT_OFF + kl * (BM * 128) + q * 32)
                    b = smem_desc_sw128(smem + lay["dec"] + d * DEC_BYTES + m * (MMA_N * 128) + q * 32)
                    part = wgmma_ss_e4m3(MMA_N, a, b, part)
                wgmma_commit()
                wgmma_wait(0)
                mbar_arrive(smem + lay["dec_bar"] + 8 * (nd + d))
                sc = [ld_shared_f32(smem + ASC_OFF + (kl * BM + tok + 8 * h) * 4) for h in range(2)]
                for i in cutlass.range_constexpr(MMA_N // 2):  # value i: row tok + 8 * ((i % 4) // 2)
                    acc[i] = acc[i] + fence_f32(part[i]) * sc[(i % 4) // 2]
            total = Float32(0.0)
            for i in cutlass.range_constexpr(MMA_N // 2):
                total = total + acc[i]
            st_global_f32(out + Int64(cta * 256 + mtid) * 4, total)

    return probe_host(kloop_ss_kernel, threads, lay["smem"]), kloop_ss_kernel


def ss_probe_info(form: str) -> dict:
    """``index.json``'s entry, in :func:`.kloop_probe.probe_info`'s keys (what ``bench_kloop.py`` reads)."""
    f = SS_FORMS[form]
    return {"form": form, "timing_only": form in TIMING_ONLY, "stamped": False, "warpgroups": 2,
            "slabs_per_warpgroup": 2, "turns": False, "setmaxnreg": list(f.regs), "threads": threads_of(form),
            "consumer_threads": 256, "decoder_warpgroups": f.decoders,
            "smem": ss_layout(form)["smem"], "bm": BM, "stage_bytes": STAGE_BYTES, "stages": f.stages,
            "dec_bufs": f.dec_bufs, "epilogue": "", "decoder_warpgroup": True, "step_stamps": None}
