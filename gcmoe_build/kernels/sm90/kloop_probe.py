"""Dev probe (never in a bundle): the steady-state K loop of role2's BM 64 step in two CTA shapes, to tell what a
four-consumer-warpgroup redesign (``results/operator/NEXT.md``, lever 7) could reach before it is built.

Every form streams the same bytes through the same code: one producer thread bulk-copies K128 weight stages (the
four 64-row slabs of a 256-row tile: 16 KB of FP4 codes + 1 KB of UE8M0 scales, :func:`.role2_stages._produce_k128`)
into 8 shared-memory stages, and the consumers decode and multiply them as the shipped BM 64 form does
(:func:`.role2_mainloop._mma_k128_steps`: k-interleaved folded decode, register-A ``wgmma m64n64k32``, two K128 steps
per call, lag 0, the scales loaded before the wgmma wait, stages released after the burst), over one K512 activation
chunk that stays in shared memory (the B operand; what a task's fixed parts cost is not measured here). Forms:

* ``wg2``: two consumer warpgroups of two slabs each and their turns at the tensor pipe: the shipped K loop
  (:func:`.role2_mainloop.pingpong_turns`; 384 threads, ``setmaxnreg`` 24 / 240).
* ``wg4``: four consumer warpgroups of one slab each (``nslab = 1``: half the accumulator, partial and A fragment
  per thread), turns passed round the four; 640 threads, 24 / 112 registers (the launch allocation of 96 per
  thread: ``65536 // 640`` rounded down to 8).
* ``wg4n``: ``wg4`` without turns (each warpgroup issues its burst when it is ready).
* ``wg2x``, ``wg2p``, ``wg2xp`` (timing only, their outputs are not the GEMM's): ``wg2`` without the FP4 decode (the
  code words are the A registers: ``decode=False``), without the promote's FMAs (``promote_fmas=False``), without both:
  which part of the step the per-SM rate is bound by.
* ``wg2c``, ``wg4c``: ``wg2`` / ``wg4`` with the consumers' named barrier at every K512 chunk that role2's chunk loop
  has (:func:`.role2_chunks.for_each_chunk`; here without the chunk's copy and scale staging): what that barrier costs
  the turns (session 58: ``wg2c`` +3.9 %, ``wg4c`` -3.2 %). ``wg2b2`` / ``wg2b8`` / ``wg2b16`` / ``wg2b32``: the
  barrier every 2 / 8 / 16 / 32 K128 steps (session 59: ``wg2b2`` as ``wg2``, ``wg2c`` +4.0 %, ``wg2b8`` +4.9 %).
* ``wg2s``, ``wg2cs``, ``wg2b2s``, ``wg2b8s``: ``wg2`` / ``wg2c`` / ``wg2b2`` / ``wg2b8`` with role2's step stamps
  (``%clock`` at each K128 step's :data:`.role2_config.STAMP_EVENTS` by thread 0 of each warpgroup of CTAs
  ``< STAMP_CTAS``, steps ``< STAMP_STEPS``, into ``stamps[cta][warpgroup][step][event]``; ``stamp_role2.phases``
  reads them): which offset the two warpgroups' turns settle in with and without the barrier. ~30 instructions per
  step more: time the unstamped forms.

Kernel formals ``(w, ws, out, iters, stamps)`` (``stamps``: the stamp buffer's address, unused by unstamped forms).
Each CTA streams its own ``iters`` K128 steps of slabs ``4 * cta .. 4 * cta + 3`` (``tile = slab * iters + k``: the
host lays the weights out so), so the bytes read are ``grid * 4 * iters * 4352``. The activation chunk holds E4M3
1.0 and the token scales ``2**FOLD_LOG2`` (the staged, pre-folded form), so every accumulator value is the sum over K
of its row's dequantised weights and a CTA's values sum to ``64 x`` the dequantised sum of its tiles: the bench
(``tests/build/kernels/sm90/bench_kloop.py``) checks that against the weights (a lost or doubled stage moves it by
1 / (4 * iters)) before it times anything. Each consumer thread stores the sum of its accumulators at
``out[cta * consumer_threads + thread]``.

    python -m gcmoe_build.kernels.sm90.kloop_probe OUTDIR     # cubins + index.json for bench_kloop.py
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64, Uint8, const_expr

from gcmoe_runtime.numerics.sm90_window import FOLD_LOG2

from .ptx_mem import (bar_arrive, bar_sync, evict_first_policy, fence_proxy_async_shared, launch_coords,
                      mbar_wait_or_trap, setmaxnreg, st_global_f32, st_shared_v4)
from .role2_config import (PINGPONG_BARS, PRODUCER_THREADS, SLAB_STAGE_BYTES, STAGE_BYTES, STAMP_CTAS, STAMP_EVENTS,
                           STAMP_STEPS, _consumer_lane)
from .role2_mainloop import (K128Step, TokenScales, _mma_k128_steps, pingpong_close, pingpong_open, pingpong_turns,
                             step_stamper)
from .role2_stages import _consume_k128, _init_stage_barriers, _produce_k128, _release_k128

BM = 64
NS = 8  # weight stages, as the shipped BM 64 builds
SPC = 2  # K128 steps per _mma_k128_steps call, as shipped
CHUNK_K128 = 4  # the K512 activation chunk the steps cycle over
TIMEOUT_NS = 2_000_000_000
ACT_OFF = 0
ACT_BYTES = CHUNK_K128 * BM * 128  # [K128][BM][128 B], 128-byte swizzled (all bytes equal: the swizzle is moot)
ASC_OFF = ACT_OFF + ACT_BYTES
ASC_BYTES = CHUNK_K128 * BM * 4  # token scales [K128][BM] f32
STAGE_OFF = 1024 * ((ASC_OFF + ASC_BYTES + 1023) // 1024)
BAR_OFF = STAGE_OFF + NS * STAGE_BYTES
SMEM_BYTES = BAR_OFF + 2 * 8 * NS
E4M3_ONES = 0x38383838
FOLDED_ONE_BITS = struct.unpack("<I", struct.pack("<f", 2.0 ** FOLD_LOG2))[0]  # a token scale of 1, pre-folded


class Form(NamedTuple):
    """One probe form (:data:`FORMS`)."""
    warpgroups: int  # consumer warpgroups
    slabs: int  # 64-row slabs per warpgroup
    turns: bool
    regs: tuple[int, int]  # producer / consumer registers after setmaxnreg
    decode: bool = True  # the FP4 decode (False: the code words are the A registers)
    promote: bool = True  # the promote FMAs (False: one FADD per slab keeps the MMAs)
    barrier_every: int = 0  # K128 steps between the consumers' named barriers (4: each K512 chunk, as role2's chunk
    # loop has; 2: every call; 8 / 16 / 32: every 2nd / 4th / 8th chunk; 0: none)
    stamps: bool = False  # %clock at each step's events (STAMP_EVENTS) into the ``stamps`` buffer: cycles, not rates


FORMS = {"wg2": Form(2, 2, True, (24, 240)), "wg4": Form(4, 1, True, (24, 112)), "wg4n": Form(4, 1, False, (24, 112)),
         "wg2x": Form(2, 2, True, (24, 240), decode=False), "wg2p": Form(2, 2, True, (24, 240), promote=False),
         "wg2xp": Form(2, 2, True, (24, 240), decode=False, promote=False),
         "wg2c": Form(2, 2, True, (24, 240), barrier_every=4), "wg4c": Form(4, 1, True, (24, 112), barrier_every=4),
         "wg2b2": Form(2, 2, True, (24, 240), barrier_every=2), "wg2b8": Form(2, 2, True, (24, 240), barrier_every=8),
         "wg2b16": Form(2, 2, True, (24, 240), barrier_every=16),
         "wg2b32": Form(2, 2, True, (24, 240), barrier_every=32),
         "wg2s": Form(2, 2, True, (24, 240), stamps=True),
         "wg2cs": Form(2, 2, True, (24, 240), barrier_every=4, stamps=True),
         "wg2b2s": Form(2, 2, True, (24, 240), barrier_every=2, stamps=True),
         "wg2b8s": Form(2, 2, True, (24, 240), barrier_every=8, stamps=True)}
#: forms whose outputs are not the GEMM's (no decode or no promote): timed, not checked against the weights
TIMING_ONLY = tuple(f for f, v in FORMS.items() if not (v.decode and v.promote))
#: the four-warpgroup turns' named barriers (the shipped two use PINGPONG_BARS = 3, 4; 0: every thread)
RING_BARS = tuple(range(PINGPONG_BARS[0], PINGPONG_BARS[0] + 4))


def threads_of(form: str) -> int:
    return PRODUCER_THREADS + 128 * FORMS[form].warpgroups


def ring_turns(wg, nwg: int):
    """``_mma_k128_steps``' ``turns`` for ``nwg`` warpgroups taking the tensor pipe in order 0, 1, ..., nwg - 1, 0, ...:
    warpgroup w waits at its barrier of :data:`RING_BARS` and hands over by arriving at the next one's. Opened by the
    last warpgroup's arrival at warpgroup 0's barrier (:func:`ring_open`); after the last burst that arrival is
    still open, which :func:`ring_close` completes."""
    mine = Int32(RING_BARS[0]) + wg
    nxt = Int32(RING_BARS[0]) + (wg + 1) % nwg
    return (lambda: bar_sync(mine, 256), lambda step: bar_arrive(nxt, 256))


def ring_open(wg, nwg: int):
    bar_arrive(RING_BARS[0], 256, Int32(wg == nwg - 1))


@cute.jit
def ring_close(wg):
    if wg == 0:
        bar_sync(Int32(RING_BARS[0]), 256)


def probe_step(smem, gs, kl128, lane, t, nsl: int, stamp_at=None) -> K128Step:
    """Stream step ``gs`` as a :class:`K128Step` of a consumer with ``lane`` = (warpgroup, thread in it, warp, g):
    the shipped BM 64 form's stage read (k-interleaved scale word, released after the burst) of its ``nsl`` slabs of
    the stage's four, and the chunk's K128 ``kl128`` token scales. ``stamp_at`` (stamped forms): ``(buffer, cta,
    warpgroups)``, the step's events stored as :func:`.role2_mainloop.step_stamper` says."""
    wg, tw, warp, g = lane
    step = K128Step(lambda: _consume_k128(smem, BAR_OFF, STAGE_OFF, NS, gs,
                                          lambda bar, ph: mbar_wait_or_trap(bar, ph, TIMEOUT_NS), wg, tw, warp, g,
                                          "decoded", nsl, STAGE_BYTES, True, 4),
                    TokenScales(smem + ASC_OFF, kl128, t, BM, 128), kl128, lambda: _release_k128(smem, BAR_OFF, NS, gs))
    if stamp_at is not None:
        step.stamp = step_stamper(*stamp_at, wg, Int32(tw == 0), gs)
    return step


def build_probe(form: str):
    """``(host_fn, kernel_fn)`` of one form; host args ``(w, ws, out, iters, stamps, ncta)``."""
    nwg, nsl, with_turns, (prod_regs, cons_regs), decode, promote, barrier_every, stamps_on = FORMS[form]
    if not (barrier_every in (0, SPC) or (barrier_every % CHUNK_K128 == 0 and barrier_every > 0)):
        raise ValueError(f"kloop_probe {form}: barrier_every={barrier_every}: 0, {SPC} or a multiple of "
                         f"{CHUNK_K128} K128 steps (the chunk)")
    ct = 128 * nwg
    threads = PRODUCER_THREADS + ct
    if PRODUCER_THREADS * prod_regs + ct * cons_regs > threads * (65536 // threads // 8 * 8):
        raise ValueError(f"kloop_probe {form}: setmaxnreg {prod_regs} / {cons_regs} exceeds the launch allocation")

    @cute.kernel
    def kloop_probe_kernel(w: Int64, ws: Int64, out: Int64, iters: Int32, stamps: Int64):
        tid, cta, _ = launch_coords()
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        if tid == 0:
            _init_stage_barriers(smem, BAR_OFF, NS, ct)
        if tid >= PRODUCER_THREADS:  # the activation chunk (E4M3 1.0) and the pre-folded token scales
            ctid = tid - PRODUCER_THREADS
            for i in cutlass.range_constexpr(ACT_BYTES // (16 * ct)):
                st_shared_v4(smem + ACT_OFF + (i * ct + ctid) * 16, *([Int32(E4M3_ONES)] * 4))
            if ctid < ASC_BYTES // 16:
                st_shared_v4(smem + ASC_OFF + ctid * 16, *([Int32(FOLDED_ONE_BITS)] * 4))
            fence_proxy_async_shared()  # the wgmmas read the chunk through the async proxy
        bar_sync(0, threads)

        if tid < PRODUCER_THREADS:
            setmaxnreg(prod_regs, False)
            if tid == 0:
                policy = evict_first_policy()
                slab0 = Int64(cta) * 4
                for gs in cutlass.range(iters, unroll=1):
                    _produce_k128(smem, BAR_OFF, STAGE_OFF, NS, gs,
                                  lambda bar, ph: mbar_wait_or_trap(bar, ph, TIMEOUT_NS), w, ws, slab0, Int64(iters),
                                  gs, policy)
        else:
            setmaxnreg(cons_regs, True)
            ctid = tid - PRODUCER_THREADS
            wg, warp, g, t, tw = _consumer_lane(ctid)
            acc = cute.make_rmem_tensor((nsl * BM // 2,), Float32)
            for i in cutlass.range_constexpr(nsl * BM // 2):
                acc[i] = Float32(0.0)
            turns = None
            if const_expr(with_turns):
                if const_expr(nwg == 2):
                    turns = pingpong_turns(wg)
                    pingpong_open(wg)
                else:
                    turns = ring_turns(wg, nwg)
                    ring_open(wg, nwg)

            for c in cutlass.range(iters // CHUNK_K128, unroll=1):
                if const_expr(barrier_every == CHUNK_K128):
                    bar_sync(1, ct)
                if const_expr(barrier_every > CHUNK_K128):
                    if c % (barrier_every // CHUNK_K128) == 0:
                        bar_sync(1, ct)
                for k2 in cutlass.range(CHUNK_K128 // SPC, unroll=1):
                    if const_expr(barrier_every == SPC):
                        bar_sync(1, ct)
                    steps = [probe_step(smem, c * CHUNK_K128 + k2 * SPC + h, k2 * SPC + h, (wg, tw, warp, g), t, nsl,
                                        (stamps, cta, nwg) if const_expr(stamps_on) else None)
                             for h in range(SPC)]
                    _mma_k128_steps(steps, acc, smem + ACT_OFF, BM, 0, prescaled=True, sw128=True, nslab=nsl,
                                    turns=turns, k_interleave_tig=t if const_expr(decode) else None,
                                    scales_before_wait=True, decode=decode,
                                    promote_fmas=promote)
            if const_expr(with_turns):
                if const_expr(nwg == 2):
                    pingpong_close(wg)
                else:
                    ring_close(wg)
            s = Float32(0.0)
            for i in cutlass.range_constexpr(nsl * BM // 2):
                s = s + acc[i]
            st_global_f32(out + Int64(cta * ct + ctid) * 4, s)

    @cute.jit
    def kloop_probe_host(w: Int64, ws: Int64, out: Int64, iters: Int32, stamps: Int64, ncta: Int32):
        kloop_probe_kernel(w, ws, out, iters, stamps).launch(grid=[ncta, 1, 1], block=[threads, 1, 1],
                                                             smem=SMEM_BYTES, min_blocks_per_mp=1)

    return kloop_probe_host, kloop_probe_kernel


def probe_info(form: str) -> dict:
    nwg, nsl, with_turns, regs = FORMS[form][:4]
    return {"form": form, "timing_only": form in TIMING_ONLY, "stamped": FORMS[form].stamps, "warpgroups": nwg,
            "slabs_per_warpgroup": nsl, "turns": with_turns, "setmaxnreg": list(regs), "threads": threads_of(form),
            "consumer_threads": 128 * nwg, "smem": SMEM_BYTES, "bm": BM, "stage_bytes": STAGE_BYTES,
            "slab_stage_bytes": SLAB_STAGE_BYTES, "chunk_k128": CHUNK_K128,
            # the stamp buffer's shape for the device side, which has no CuTe DSL to import role2_config from
            "step_stamps": [STAMP_CTAS, STAMP_STEPS, list(STAMP_EVENTS)] if FORMS[form].stamps else None}


def main(argv=None):
    from .probe_build import probe_main

    def probes():
        for form in FORMS:
            host, kern = build_probe(form)
            yield (f"kloop_probe_{form}", host, kern, (Int64(0), Int64(0), Int64(0), Int32(4), Int64(0), Int32(1)),
                   probe_info(form))

    probe_main(__doc__.splitlines()[0], probes, argv)


if __name__ == "__main__":
    main()
