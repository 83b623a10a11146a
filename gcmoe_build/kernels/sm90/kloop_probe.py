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

* ``wg2ce``, ``wg2ce6``, ``wg2cw``, ``wg2ne``, ``wg2nt`` (session 59): a task's epilogue, emulated (a ``%clock`` spin
  of ``pause`` cycles after every ``task_steps`` K128 steps; both kernel formals, so ``pause`` 0 is each form's
  reference on the same code): does anything fill it? ``wg2ce``: ``wg2c`` with the spin in both warpgroups after the
  same step (the shipped task structure); ``wg2ne`` / ``wg2nt``: no turns, the spin after the same step / warpgroup 1
  half a task later (does one warpgroup's K loop run faster while the other is in its epilogue?); ``wg2cw``: the spin
  in a third, epilogue warpgroup (88 registers) to which the consumers (200 registers, 6 stages so the 64 KB
  hand-over fits) pass their accumulators through shared memory at each task's end (``EPILOGUES``); ``wg2ce6``: its
  reference, ``wg2ce`` with the same registers and stages. ``wg2cw4`` / ``wg2ce4``: the pair at 4 stages;
  ``wg2cwh`` / ``wg2ce7``: the accumulators handed over as BF16 pairs (32 KB), at 7 stages.

* ``wg2ct``, ``wg2cm`` (session 59): the chunk hand-over (``CHUNK_MODES``): two chunk buffers refilled from global
  every K512 as role2 does (``tma``) or by mbarriers without the consumer barrier (``mbar``), against ``wg2c``;
  ``wg2ctq`` / ``wg2cmq`` copy a quarter of each chunk, ``wg2ca`` alternates two buffers filled once, ``wg2ct1``
  refills the one buffer it reads. Session 60: ``wg2ctw`` / ``wg2cts`` / ``wg2ctc`` run only some parts of ``tma``'s
  hand-over (``CHUNK_PARTS``): the copy and the scales without the wait, the scales alone, the copy and its wait
  without the scales. Session 61: ``wg2ctb``, the copy and its wait with the token scales riding in the bulk copy.

Kernel formals ``(w, ws, out, iters, stamps, task_steps, pause, act)`` (``stamps``: the stamp buffer's address, unused
by unstamped forms; ``task_steps`` / ``pause``: used by the epilogue forms only; ``iters`` a multiple of
``task_steps``, itself a multiple of 4; ``act``: 32 KB of E4M3 1.0 and 256 pre-folded token scales, read by the chunk
forms only).
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
from cutlass.cutlass_dsl import T, dsl_user_op

from gcmoe_runtime.numerics.sm90_window import FOLD_LOG2

from .ptx_mem import (bar_arrive, bar_sync, bulk_copy_g2s, evict_first_policy, fence_proxy_async_shared,
                      launch_coords, ld_global_f32, ld_shared_v4, mbar_arrive, mbar_arrive_expect_tx, mbar_init,
                      mbar_init_fence, mbar_wait_or_trap, setmaxnreg, st_global_f32, st_global_u32_if, st_shared_f32,
                      st_shared_v4)
from .role2_config import (PINGPONG_BARS, PRODUCER_THREADS, SLAB_STAGE_BYTES, STAGE_BYTES, STAMP_CTAS, STAMP_EVENTS,
                           STAMP_STEPS, _consumer_lane)
from .role2_mainloop import (K128Step, TokenScales, _mma_k128_steps, pingpong_close, pingpong_open, pingpong_turns,
                             step_stamper)
from .role2_math import pack_bf16x2
from .role2_stages import _consume_k128, _init_stage_barriers, _produce_k128, _release_k128
from .wgmma_rs import _asm, _v

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
DUMP_BYTES = 128 * 2 * BM * 4  # the "warpgroup" epilogue's hand-over: every consumer thread's 64 FP32 accumulators
SMEM_LIMIT = 232448  # an SM90 CTA's dynamic shared memory
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
    epilogue: str = ""  # an emulated epilogue every ``task_steps`` (a kernel formal), ``pause`` cycles long: see
    # EPILOGUES; "" none (``pause`` < 0: an FMA-heavy epilogue of -pause cycles, :func:`_spin_cycles`)
    stages: int = NS  # weight stages in shared memory
    chunks: str = ""  # the activation chunk: "" one, loaded once; "tma" / "mbar": two buffers refilled from global
    # every K512 as role2's chunk loop does / without its consumer barrier (CHUNK_MODES)
    chunk_copy: int = ACT_BYTES  # bytes of each refill's chunk copy (less: the rest of the buffer keeps its ones)
    chunk_bufs: int = 2  # 1: every refill into the one buffer being read (harmless here: the bytes are the same)
    chunk_parts: str = "cws"  # "tma" chunks: which parts of role2's hand-over run — c the next chunk's bulk copy, w
    # the wait on its mbarrier, s the token scale's load before the MMAs and store after (CHUNK_PARTS)
    handover_bf16: bool = False  # "warpgroup": the accumulators handed over as BF16 pairs (32 KB), as role2's
    # epilogues round them first (bf16(acc x efac)), instead of FP32 (64 KB)


#: how a chunk form refills its two activation-chunk buffers from the ``act`` formal (32 KB of E4M3 + 1 KB of token
#: scales, the same chunk every K512: an L2-resident copy, what role2's chunk hand-over costs beside its bytes)
CHUNK_MODES = {"tma": "role2's: after the chunk's consumer barrier consumer thread 0 bulk-copies the next chunk "
                      "into the other buffer, every consumer loads its next token scale from global before the "
                      "chunk's MMAs and stores it after them, the chunk waited on its mbarrier before the barrier",
               "mbar": "no consumer barrier: a producer-side thread refills a buffer (chunk and scales, one bulk copy "
                       "each) once its empty mbarrier has every consumer thread's arrival after that chunk's MMAs",
               "alt": "two buffers filled once and alternated every K512, no copies and no waits: what alternating "
                      "the chunk's buffer costs by itself"}
#: the parts of a "tma" chunk form's hand-over (``Form.chunk_parts``; a form without the wait has both buffers
#: pre-filled with the chunk's bytes, so a read before a copy lands reads the same values, and waits for the last
#: copy after its loop)
CHUNK_PARTS = {"c": "consumer thread 0 bulk-copies the next chunk into the other buffer after the chunk's barrier "
                      "(without w, it first waits for that buffer's previous copy: its mbarrier is re-armed)",
               "w": "every consumer waits on the chunk's mbarrier before the chunk's barrier",
               "s": "every consumer loads its next token scale from global before the chunk's MMAs, stores it after",
               "b": "the chunk's token scales (1 KB) ride in its bulk copy, on the same mbarrier (instead of s)",
               "q": "as b, in four bulk copies of BM x 4 bytes, one per K128 group (role2's refuted scales_in_copy, "
                    "session 62: the ring's MN-major rows are not contiguous across groups)"}
#: where a form's emulated epilogue runs (``pause`` cycles of a ``%clock`` spin after every ``task_steps`` K128 steps)
EPILOGUES = {"both": "in both consumer warpgroups after the same step (the shipped task structure)",
             "stagger": "in each consumer warpgroup, warpgroup 1 half a task after warpgroup 0",
             "warpgroup": "in a third (epilogue) warpgroup: the consumers hand their accumulators over through shared "
                          "memory (mbarriers full / empty) and go on with the next task"}


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
         "wg2b8s": Form(2, 2, True, (24, 240), barrier_every=8, stamps=True),
         # session 59: does anything fill a task's epilogue? (the pause 0 runs are each family's reference)
         "wg2ce": Form(2, 2, True, (24, 240), barrier_every=4, epilogue="both"),
         "wg2ce6": Form(2, 2, True, (24, 200), barrier_every=4, epilogue="both", stages=6),
         "wg2cw": Form(2, 2, True, (24, 200), barrier_every=4, epilogue="warpgroup", stages=6),
         "wg2ne": Form(2, 2, False, (24, 240), epilogue="both"),
         "wg2nt": Form(2, 2, False, (24, 240), epilogue="stagger"),
         # ... the epilogue warpgroup with fewer stages (role2 keeps two 32 KB chunk buffers: 4-5 stages leave room
         # for the 64 KB hand-over), and its reference
         "wg2cw4": Form(2, 2, True, (24, 200), barrier_every=4, epilogue="warpgroup", stages=4),
         "wg2ce4": Form(2, 2, True, (24, 200), barrier_every=4, epilogue="both", stages=4),
         # ... handed over as BF16 (32 KB: room for 7 stages beside role2's two chunk buffers), and its reference
         "wg2cwh": Form(2, 2, True, (24, 200), barrier_every=4, epilogue="warpgroup", stages=7, handover_bf16=True),
         "wg2ce7": Form(2, 2, True, (24, 200), barrier_every=4, epilogue="both", stages=7),
         # session 59: the chunk hand-over (CHUNK_MODES), against wg2c (one chunk, loaded once)
         "wg2ct": Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma"),
         "wg2cm": Form(2, 2, True, (24, 240), chunks="mbar"),
         # ... copying a quarter of each chunk (8 KB): is the hand-over's cost its bytes?
         "wg2ctq": Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_copy=ACT_BYTES // 4),
         "wg2cmq": Form(2, 2, True, (24, 240), chunks="mbar", chunk_copy=ACT_BYTES // 4),
         # ... or is it the alternation of two buffers (wg2ca: no copies) / the copy and its wait (wg2ct1: one buffer)?
         "wg2ca": Form(2, 2, True, (24, 240), barrier_every=4, chunks="alt"),
         "wg2ct1": Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_bufs=1),
         # session 60: ... or one of the copy's parts (CHUNK_PARTS): without the wait, the scales alone, without them
         "wg2ctw": Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_parts="cs"),
         "wg2cts": Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_parts="s"),
         "wg2ctc": Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_parts="cw"),
         # session 61: ... with the token scales in the chunk's bulk copy (no per-consumer load / store)
         "wg2ctb": Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_parts="cwb"),
         # session 62: ... in four copies of 256 bytes, as role2's refuted scales_in_copy issued them
         "wg2ctb4": Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_parts="cwq")}
#: forms whose outputs are not the GEMM's (no decode or no promote): timed, not checked against the weights
TIMING_ONLY = tuple(f for f, v in FORMS.items() if not (v.decode and v.promote))
#: the four-warpgroup turns' named barriers (the shipped two use PINGPONG_BARS = 3, 4; 0: every thread)
RING_BARS = tuple(range(PINGPONG_BARS[0], PINGPONG_BARS[0] + 4))


def threads_of(form: str) -> int:
    return PRODUCER_THREADS + 128 * (FORMS[form].warpgroups + (FORMS[form].epilogue == "warpgroup"))


def layout(form: str) -> dict:
    """Shared-memory offsets of ``form``: its weight stages, their barriers, the epilogue hand-over (``dump``: FP32
    ``[16][consumer thread][4]``, then its full / empty mbarriers), a chunk form's second chunk buffer (``act1``,
    ``asc1``; the first is the one-chunk forms' ``ACT_OFF`` / ``ASC_OFF``) and its full / empty mbarriers
    (``chunk_bar``), and the total; ValueError past an SM's 227 KB."""
    f = FORMS[form]
    bar = STAGE_OFF + f.stages * STAGE_BYTES
    end = bar + 16 * f.stages
    dump = 1024 * ((end + 1023) // 1024)
    if f.epilogue == "warpgroup":
        end = dump + DUMP_BYTES // (2 if f.handover_bf16 else 1) + 16
    act1 = 1024 * ((end + 1023) // 1024)
    asc1, chunk_bar = act1 + ACT_BYTES, act1 + ACT_BYTES + ASC_BYTES
    if f.chunks and f.chunk_bufs == 1:
        act1, asc1, chunk_bar = ACT_OFF, ASC_OFF, act1
    if f.chunks:
        end = chunk_bar + 32
    if end > SMEM_LIMIT:
        raise ValueError(f"kloop_probe {form}: stages={f.stages}: {end} B of shared memory (limit {SMEM_LIMIT})")
    return {"stage": STAGE_OFF, "bar": bar, "dump": dump,
            "dump_bar": dump + DUMP_BYTES // (2 if f.handover_bf16 else 1), "act1": act1, "asc1": asc1,
            "chunk_bar": chunk_bar, "smem": end}


def epilogue_regs(form: str) -> int:
    """The epilogue warpgroup's ``setmaxnreg``: what the producer and the consumers leave of the 64 K registers."""
    prod, cons = FORMS[form].regs
    return (65536 - PRODUCER_THREADS * prod - 128 * FORMS[form].warpgroups * cons) // 128 // 8 * 8


@dsl_user_op
def _spin_cycles(n, *, loc=None, ip=None) -> Int32:
    """The emulated epilogue, ``|n|`` cycles by ``%clock`` (bounded): ``n > 0`` a bare ``%clock`` loop (~4 instructions
    per ~30 cycles: lighter on the issue slots than a real epilogue), ``n < 0`` each turn of the loop also issues 8
    independent FMA chains on private registers (~12 instructions per ~12 cycles: heavier than a real one). Returns
    the chains' bits (the caller must keep them: ptxas drops FMAs whose results nothing reads)."""
    alu = "".join(f"fma.rn.f32 a{i}, a{i}, 0f3F000000, 0f3E800000;\n" for i in range(8))
    zero = "".join(f"mov.f32 a{i}, 0f00000000;\n" for i in range(8))
    fold = "".join(f"add.f32 a0, a0, a{i};\n" for i in range(1, 8))
    return Int32(_asm(
        "{\n.reg .pred p, q;\n.reg .u32 t0, t1, n;\n.reg .f32 a<8>;\n" + zero +
        "abs.s32 n, $1;\nsetp.lt.s32 q, $1, 0;\nmov.u32 t0, %clock;\nGCMOE_SPIN:\n@q bra.uni GCMOE_ALU;\n"
        "GCMOE_TICK:\nmov.u32 t1, %clock;\nsub.u32 t1, t1, t0;\nsetp.lt.u32 p, t1, n;\n@p bra.uni GCMOE_SPIN;\n"
        "bra.uni GCMOE_END;\nGCMOE_ALU:\n" + alu + "bra.uni GCMOE_TICK;\nGCMOE_END:\n" + fold +
        "mov.b32 $0, a0;\n}", "=r,r", [_v(n)], 1)[0])


@dsl_user_op
def _st_shared_v4_f32(saddr, x0, x1, x2, x3, *, loc=None, ip=None):
    _asm("st.shared.v4.f32 [$0], {$1, $2, $3, $4};", "r,f,f,f,f",
         [_v(saddr)] + [_v(x, Float32) for x in (x0, x1, x2, x3)], 0)


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


@dsl_user_op
def _evict_normal_policy(*, loc=None, ip=None) -> Int64:
    """The chunk copies' L2 policy: normal, as role2's activation tensor-map copies (no cache hint)."""
    return Int64(_asm("createpolicy.fractional.L2::evict_normal.b64 $0, 1.0;", "=l", [], 1, T.i64())[0])


def chunk_buffer(lay: dict, b):
    """Chunk buffer ``b``'s (activation, token-scale) shared-memory offsets, ``b`` 0 or 1 (an Int32 or an int): the
    first is the one-chunk forms' ``ACT_OFF`` / ``ASC_OFF``, the second :func:`layout`'s ``act1`` / ``asc1``."""
    return ACT_OFF + b * (lay["act1"] - ACT_OFF), ASC_OFF + b * (lay["asc1"] - ASC_OFF)


def _copy_chunk(smem, lay: dict, b, act, nbytes: int, scale_copies: int):
    """One thread: arm chunk buffer ``b``'s full mbarrier and bulk-copy ``nbytes`` of the chunk (and its token scales
    in ``scale_copies`` bulk copies, 0: none) from ``act`` into it."""
    full = smem + lay["chunk_bar"] + 8 * b
    policy = _evict_normal_policy()
    act_off, asc_off = chunk_buffer(lay, b)
    mbar_arrive_expect_tx(full, nbytes + (ASC_BYTES if scale_copies else 0))
    bulk_copy_g2s(smem + act_off, act, nbytes, full, policy)
    for q in range(scale_copies):  # plain Python: unrolled at trace time
        part = ASC_BYTES // scale_copies
        bulk_copy_g2s(smem + asc_off + q * part, act + ACT_BYTES + q * part, part, full, policy)


def probe_step(smem, lay: dict, ns: int, gs, kl128, lane, t, nsl: int, stamp_at=None, asc=ASC_OFF) -> K128Step:
    """Stream step ``gs`` as a :class:`K128Step` of a consumer with ``lane`` = (warpgroup, thread in it, warp, g):
    the shipped BM 64 form's stage read (k-interleaved scale word, released after the burst) of its ``nsl`` slabs of
    the stage's four, and the chunk's K128 ``kl128`` token scales. ``stamp_at`` (stamped forms): ``(buffer, cta,
    warpgroups)``, the step's events stored as :func:`.role2_mainloop.step_stamper` says."""
    wg, tw, warp, g = lane
    step = K128Step(lambda: _consume_k128(smem, lay["bar"], lay["stage"], ns, gs,
                                          lambda bar, ph: mbar_wait_or_trap(bar, ph, TIMEOUT_NS), wg, tw, warp, g,
                                          "decoded", nsl, STAGE_BYTES, True, 4),
                    TokenScales(smem + asc, kl128, t, BM, 128), kl128, lambda: _release_k128(smem, lay["bar"], ns, gs))
    if stamp_at is not None:
        step.stamp = step_stamper(*stamp_at, wg, Int32(tw == 0), gs)
    return step


def build_probe(form: str):
    """``(host_fn, kernel_fn)`` of one form; host args ``(w, ws, out, iters, stamps, task_steps, pause, act, ncta)``."""
    f = FORMS[form]
    nwg, nsl, with_turns, (prod_regs, cons_regs) = f.warpgroups, f.slabs, f.turns, f.regs
    barrier_every, stamps_on, epi, ns = f.barrier_every, f.stamps, f.epilogue, f.stages
    if not (barrier_every in (0, SPC) or (barrier_every % CHUNK_K128 == 0 and barrier_every > 0)):
        raise ValueError(f"kloop_probe {form}: barrier_every={barrier_every}: 0, {SPC} or a multiple of "
                         f"{CHUNK_K128} K128 steps (the chunk)")
    parts = f.chunk_parts
    if (set(parts) - set(CHUNK_PARTS) or ("w" in parts and "c" not in parts) or (parts != "cws" and f.chunks != "tma")
            or (("b" in parts or "q" in parts) and ("c" not in parts or "s" in parts))
            or ("b" in parts and "q" in parts)):
        raise ValueError(f"kloop_probe {form}: chunk_parts={parts!r}: letters of {sorted(CHUNK_PARTS)}, the wait and "
                         f"the scales' ride (b or q) only with the copy, not with s, and only for chunks='tma'")
    scale_copies = 1 if "b" in parts else 4 if "q" in parts else 0  # the token scales' bulk copies per chunk copy
    # both chunk buffers hold the chunk's bytes and token scales from the start wherever a read could otherwise find
    # bytes no copy wrote: nothing waits for the copies ("alt", no "w"), the copies bring no scales ("tma" without "s")
    # or only part of the chunk (chunk_copy < ACT_BYTES). Session 60 (call 12, the probe test's iters 16 on every SM):
    # wg2ctc / wg2ctq / wg2cmq read uninitialised shared memory before this (their timings stand: the values do not
    # change the instruction stream; their correctness checks had passed on whatever an earlier kernel left there)
    prefill_both = (f.chunks == "alt" or (f.chunks == "tma" and ("w" not in parts or "s" not in parts))
                    or (f.chunks != "" and f.chunk_copy < ACT_BYTES))
    if epi and (epi not in EPILOGUES or nwg != 2 or stamps_on):
        raise ValueError(f"kloop_probe {form}: epilogue={epi!r}: one of {sorted(EPILOGUES)}, two consumer "
                         f"warpgroups, no stamps")
    lay = layout(form)
    ct = 128 * nwg
    threads = threads_of(form)
    epi_regs = epilogue_regs(form) if epi == "warpgroup" else 0
    if PRODUCER_THREADS * prod_regs + ct * cons_regs + 128 * epi_regs > threads * (65536 // threads // 8 * 8) or (
            epi == "warpgroup" and epi_regs < 24):
        raise ValueError(f"kloop_probe {form}: setmaxnreg {prod_regs} / {cons_regs} / {epi_regs} does not fit the "
                         f"launch allocation")

    @cute.kernel
    def kloop_probe_kernel(w: Int64, ws: Int64, out: Int64, iters: Int32, stamps: Int64, task_steps: Int32,
                           pause: Int32, act: Int64):
        tid, cta, _ = launch_coords()
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        if tid == 0:
            _init_stage_barriers(smem, lay["bar"], ns, ct)
            if const_expr(epi == "warpgroup"):  # the hand-over's full (every consumer) / empty (the epilogue WG)
                mbar_init(smem + lay["dump_bar"], ct)
                mbar_init(smem + lay["dump_bar"] + 8, 128)
                mbar_init_fence()
            if const_expr(f.chunks != ""):  # the two chunk buffers' full (one expect_tx) / empty (every consumer)
                for b in cutlass.range_constexpr(2):
                    mbar_init(smem + lay["chunk_bar"] + 8 * b, 1)
                    mbar_init(smem + lay["chunk_bar"] + 16 + 8 * b, ct)
                mbar_init_fence()
        ctid = tid - PRODUCER_THREADS
        if tid >= PRODUCER_THREADS and ctid < ct:  # the activation chunk (E4M3 1.0) and the pre-folded token scales
            for base, sbase in (chunk_buffer(lay, 0),) + ((chunk_buffer(lay, 1),) if prefill_both else ()):
                for i in cutlass.range_constexpr(ACT_BYTES // (16 * ct)):
                    st_shared_v4(smem + base + (i * ct + ctid) * 16, *([Int32(E4M3_ONES)] * 4))
                if ctid < ASC_BYTES // 16:
                    st_shared_v4(smem + sbase + ctid * 16, *([Int32(FOLDED_ONE_BITS)] * 4))
            fence_proxy_async_shared()  # the wgmmas read the chunk through the async proxy
        bar_sync(0, threads)

        if tid < PRODUCER_THREADS:
            setmaxnreg(prod_regs, False)
            if const_expr(f.chunks == "mbar"):
                if tid == 32:  # warp 1 of the producer warpgroup refills the chunk buffers
                    for c in cutlass.range(iters // CHUNK_K128, unroll=1):
                        b = c & 1
                        if c >= 2:
                            mbar_wait_or_trap(smem + lay["chunk_bar"] + 16 + 8 * b, ((c >> 1) - 1) & 1, TIMEOUT_NS)
                        _copy_chunk(smem, lay, b, act, f.chunk_copy, 1)
            if tid == 0:
                policy = evict_first_policy()
                slab0 = Int64(cta) * 4
                for gs in cutlass.range(iters, unroll=1):
                    _produce_k128(smem, lay["bar"], lay["stage"], ns, gs,
                                  lambda bar, ph: mbar_wait_or_trap(bar, ph, TIMEOUT_NS), w, ws, slab0, Int64(iters),
                                  gs, policy)
        elif ctid >= ct:  # the epilogue warpgroup ("warpgroup" forms only: no thread gets here otherwise)
            if const_expr(epi == "warpgroup"):
                setmaxnreg(epi_regs, False)
                e = ctid - ct
                seen = Int32(0)  # the hand-over's words, summed so the loads stay
                for task in cutlass.range(iters // task_steps, unroll=1):
                    mbar_wait_or_trap(smem + lay["dump_bar"], task & 1, TIMEOUT_NS)
                    for j in cutlass.range_constexpr(2 * BM // (16 if f.handover_bf16 else 8)):
                        for half in cutlass.range_constexpr(2):
                            for v in ld_shared_v4(smem + lay["dump"] + ((j * ct + half * 128 + e) * 16)):
                                seen = seen + v
                    seen = seen + _spin_cycles(pause)
                    mbar_arrive(smem + lay["dump_bar"] + 8)
                st_global_u32_if(out + Int64(cta * ct) * 4, seen, Int32(iters < 0))  # never: iters > 0
        else:
            setmaxnreg(cons_regs, True)
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

            # steps left until this warpgroup's next emulated epilogue (a counter: a run-time % costs ~30 instructions
            # a call), and the hand-overs so far ("warpgroup")
            until = task_steps - (wg * (task_steps // 2) if const_expr(epi == "stagger") else 0)
            handed = Int32(0)
            sink = Int32(0)  # the FMA-heavy epilogue's results, stored never (kept from ptxas's dead-code removal)
            if const_expr(f.chunks == "tma"):  # chunk 0 and its token scales, as role2's task top
                if const_expr("c" in parts):
                    if ctid == 0:
                        _copy_chunk(smem, lay, 0, act, f.chunk_copy, scale_copies)
                if const_expr("s" in parts):
                    st_shared_f32(smem + ASC_OFF + ctid * 4, ld_global_f32(act + ACT_BYTES + ctid * 4))
            for c in cutlass.range(iters // CHUNK_K128, unroll=1):
                cb = c & 1  # a chunk form's buffer
                act_off, asc_off = chunk_buffer(lay, cb) if const_expr(f.chunks != "") else (ACT_OFF, ASC_OFF)
                if const_expr(f.chunks == "mbar" or (f.chunks == "tma" and "w" in parts)):
                    mbar_wait_or_trap(smem + lay["chunk_bar"] + 8 * cb, (c >> 1) & 1, TIMEOUT_NS)
                if const_expr(barrier_every == CHUNK_K128):
                    bar_sync(1, ct)
                next_scale = Float32(0.0)
                if const_expr(f.chunks == "tma"):  # chunk c - 1's buffer is free: the next chunk into it
                    if const_expr("c" in parts):
                        if ctid == 0 and c + 1 < iters // CHUNK_K128:
                            if const_expr("w" not in parts):
                                # nobody else waits on the buffer's full mbarrier: re-arming it (a count-1 barrier)
                                # before its last copy (chunk c - 1's) landed is a second arrival on one phase, which
                                # loses a phase and hangs the final wait until the trap (session 63)
                                if c >= 1:
                                    mbar_wait_or_trap(smem + lay["chunk_bar"] + 8 * (1 - cb), ((c - 1) >> 1) & 1,
                                                      TIMEOUT_NS)
                            _copy_chunk(smem, lay, 1 - cb, act, f.chunk_copy, scale_copies)
                    if const_expr("s" in parts):
                        next_scale = ld_global_f32(act + ACT_BYTES + ctid * 4)
                if const_expr(barrier_every > CHUNK_K128):
                    if c % (barrier_every // CHUNK_K128) == 0:
                        bar_sync(1, ct)
                for k2 in cutlass.range(CHUNK_K128 // SPC, unroll=1):
                    if const_expr(barrier_every == SPC):
                        bar_sync(1, ct)
                    steps = [probe_step(smem, lay, ns, c * CHUNK_K128 + k2 * SPC + h, k2 * SPC + h,
                                        (wg, tw, warp, g), t, nsl,
                                        (stamps, cta, nwg) if const_expr(stamps_on) else None, asc_off)
                             for h in range(SPC)]
                    _mma_k128_steps(steps, acc, smem + act_off, BM, 0, prescaled=True, sw128=True, nslab=nsl,
                                    turns=turns, k_interleave_tig=t if const_expr(f.decode) else None,
                                    scales_before_wait=True, decode=f.decode,
                                    promote_fmas=f.promote)
                    if const_expr(epi != ""):
                        until = until - SPC
                        if until == 0:
                            until = task_steps
                            if const_expr(epi == "warpgroup"):  # hand the accumulators over, go on
                                mbar_wait_or_trap(smem + lay["dump_bar"] + 8, (handed & 1) ^ 1, TIMEOUT_NS)
                                if const_expr(f.handover_bf16):
                                    for j in cutlass.range_constexpr(nsl * BM // 16):
                                        st_shared_v4(smem + lay["dump"] + (j * ct + ctid) * 16,
                                                     *[pack_bf16x2(acc[8 * j + 2 * i], acc[8 * j + 2 * i + 1])
                                                       for i in range(4)])
                                else:
                                    for j in cutlass.range_constexpr(nsl * BM // 8):
                                        _st_shared_v4_f32(smem + lay["dump"] + (j * ct + ctid) * 16,
                                                          *[acc[4 * j + i] for i in range(4)])
                                mbar_arrive(smem + lay["dump_bar"])
                                handed = handed + 1
                            else:
                                sink = sink + _spin_cycles(pause)
                if const_expr(f.chunks == "tma" and "s" in parts):  # the next chunk's token scale, read before the MMAs
                    st_shared_f32(smem + chunk_buffer(lay, 1 - cb)[1] + ctid * 4, next_scale)
                if const_expr(f.chunks == "mbar"):  # this thread is done with the buffer
                    mbar_arrive(smem + lay["chunk_bar"] + 16 + 8 * cb)
            if const_expr(f.chunks == "tma" and "c" in parts and "w" not in parts):  # the last copy landed
                last = iters // CHUNK_K128 - 1
                mbar_wait_or_trap(smem + lay["chunk_bar"] + 8 * (last & 1), (last >> 1) & 1, TIMEOUT_NS)
            if const_expr(with_turns):
                if const_expr(nwg == 2):
                    pingpong_close(wg)
                else:
                    ring_close(wg)
            s = Float32(0.0)
            for i in cutlass.range_constexpr(nsl * BM // 2):
                s = s + acc[i]
            st_global_f32(out + Int64(cta * ct + ctid) * 4, s)
            if const_expr(epi in ("both", "stagger")):
                st_global_u32_if(out + Int64(cta * ct + ctid) * 4, sink, Int32(iters < 0))  # never: iters > 0

    return probe_host(kloop_probe_kernel, threads, lay["smem"]), kloop_probe_kernel


def trace_args() -> tuple:
    """The probe kernels' host formals as trace-time values ``(w, ws, out, iters, stamps, task_steps, pause, act,
    ncta)``: the ABI ``bench_kloop.launch_args`` passes (plus the grid)."""
    return (Int64(0), Int64(0), Int64(0), Int32(4), Int64(0), Int32(4), Int32(0), Int64(0), Int32(1))


def probe_host(kernel, threads: int, smem: int):
    """The host launcher of a probe kernel (this module's and :mod:`.kloop_ss_probe`'s): the formals every form shares
    (``bench_kloop.launch_args`` passes them), ``ncta`` CTAs of ``threads``, one per SM."""
    @cute.jit
    def kloop_probe_host(w: Int64, ws: Int64, out: Int64, iters: Int32, stamps: Int64, task_steps: Int32,
                         pause: Int32, act: Int64, ncta: Int32):
        kernel(w, ws, out, iters, stamps, task_steps, pause, act).launch(
            grid=[ncta, 1, 1], block=[threads, 1, 1], smem=smem, min_blocks_per_mp=1)

    return kloop_probe_host


def probe_info(form: str) -> dict:
    f = FORMS[form]
    return {"form": form, "timing_only": form in TIMING_ONLY, "stamped": f.stamps, "warpgroups": f.warpgroups,
            "slabs_per_warpgroup": f.slabs, "turns": f.turns, "setmaxnreg": list(f.regs), "threads": threads_of(form),
            "consumer_threads": 128 * f.warpgroups, "smem": layout(form)["smem"], "bm": BM, "stage_bytes": STAGE_BYTES,
            "stages": f.stages, "epilogue": f.epilogue,
            "epilogue_setmaxnreg": epilogue_regs(form) if f.epilogue == "warpgroup" else None,
            "slab_stage_bytes": SLAB_STAGE_BYTES, "chunk_k128": CHUNK_K128,
            # the stamp buffer's shape for the device side, which has no CuTe DSL to import role2_config from
            "step_stamps": [STAMP_CTAS, STAMP_STEPS, list(STAMP_EVENTS)] if FORMS[form].stamps else None}


def main(argv=None):
    from .probe_build import probe_main

    from .kloop_ss_probe import SS_FORMS, build_ss_probe, ss_probe_info

    args = trace_args()

    def probes():
        for form in FORMS:
            host, kern = build_probe(form)
            yield f"kloop_probe_{form}", host, kern, args, probe_info(form)
        for form in SS_FORMS:  # the decoder-warpgroup forms (their own module), run by bench_kloop.py by name
            host, kern = build_ss_probe(form)
            yield f"kloop_probe_{form}", host, kern, args, ss_probe_info(form)

    probe_main(__doc__.splitlines()[0], probes, argv)


if __name__ == "__main__":
    main()
