"""The SM90 role2 weight streams. Pipelined variants: the producer thread bulk-copies each K128 step's code and scale
tiles of a task's slabs into a ring of shared-memory stages on full / empty mbarriers (bounded waits), and each
consumer thread reads its 16-byte fragments of a stage and releases it
(:attr:`.role2_config.Role2GemmConfig.stage_release`); :func:`stage_k128_step` turns a stream step into the
:class:`.role2_mainloop.K128Step` the MMA steps consume. The 256-thread variant: each consumer thread loads its
fragments from HBM into a two-stage register buffer one K128 ahead (:func:`_load_k128`).
"""
from __future__ import annotations

import cutlass.cute as cute
from cutlass import Int32, Int64, Uint32

from .ptx_mem import (bulk_copy_g2s, fence_proxy_async_shared, ld_global_v2_stream, ld_global_v4_stream, ld_shared_v2,
                      ld_shared_v4, mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_init_fence)
from .ring_sync import ld_shared_b32
from .role2_config import CONSUMER_THREADS, EARLY_RELEASE_K32, Role2GemmConfig, SLAB_STAGE_BYTES, STAGE_BYTES
from .role2_mainloop import K128Step


def _load_k128(wbuf, stage: int, kb, wbases, sbases, policy):
    """Issue the loads of one K128 step into register stage ``stage`` (of 2): for each of the thread's
    two slabs, its 32 bytes of the 4096-byte code tile (two 16-byte EVICT_FIRST loads) and its 8 bytes
    of the 256-byte UE8M0 scale tile (``gcmoe_runtime.numerics.sm90_layout``)."""
    for sl in range(2):
        for h in range(2):
            v = ld_global_v4_stream(wbases[sl] + Int64(kb) * 4096 + 16 * h, policy)
            for r in range(4):
                wbuf[stage * 20 + sl * 8 + h * 4 + r] = v[r]
        sc = ld_global_v2_stream(sbases[sl] + Int64(kb) * 256, policy)
        for r in range(2):
            wbuf[stage * 20 + 16 + sl * 2 + r] = sc[r]


def _issue_k128_stage(smem, bar_off: int, stage_off: int, s, w, ws, slab0, nk, kb, policy, nsl: int = 4,
                      sstride: int = 1):
    """Producer: arm full barrier ``s`` for one K128 stage and bulk-copy the code tiles (4096 B each) and scale
    tiles (256 B each) of ``nsl`` slabs ``slab0 + j * sstride`` into stage ``s`` (codes, then scales, in that order).
    ``slab0``: the first 64-row slab (expert * slabs + tile * 4 [+ pass]), ``nk``: K128 steps per slab, ``kb``: this
    step. All four slabs of the task (the default), or with ``Role2GemmConfig.slab_passes = 2`` the pass's two."""
    full = smem + bar_off + 8 * s
    nbytes = nsl * SLAB_STAGE_BYTES
    mbar_arrive_expect_tx(full, nbytes)
    dst = smem + stage_off + s * nbytes
    for j in range(nsl):  # plain Python: unrolled at trace time
        tile = (slab0 + j * sstride) * nk + Int64(kb)
        bulk_copy_g2s(dst + j * 4096, w + tile * 4096, 4096, full, policy)
        bulk_copy_g2s(dst + nsl * 4096 + j * 256, ws + tile * 256, 256, full, policy)


def _read_k128_stage(stage, wg, tw, warp, g, nslab: int = 2, k_interleave: bool = False, stage_slabs: int = 0):
    """Consumer: this thread's words of a shared-memory K128 stage (``nslab`` slabs per warpgroup), in
    :func:`_mma_k128_steps`' order (each slab's codes, 16 B each half, then each slab's UE8M0 scales, 8 B each;
    ``k_interleave``: 4 B each, the word holding its K32 block's bytes, ``sm90_layout.scale_tile_position``).
    ``stage_slabs``: the slabs the stage holds (its scale tiles follow their code tiles), default two warpgroups'
    ``2 * nslab``; the four-warpgroup probe (:mod:`.kloop_probe`) reads one slab of four."""
    stage_slabs = stage_slabs or 2 * nslab
    words = []
    for sl in range(nslab):
        for h2 in range(2):
            words.extend(ld_shared_v4(stage + (wg * nslab + sl) * 4096 + tw * 32 + 16 * h2))
    for sl in range(nslab):
        sc = stage + stage_slabs * 4096 + (wg * nslab + sl) * 256 + (warp * 8 + g) * 8
        if k_interleave:  # K32 block t = lane % 4: bytes 2t, 2t + 1 of the 8, in word t // 2
            words.append(ld_shared_b32(sc + ((tw & 3) >> 1) * 4))
        else:
            words.extend(ld_shared_v2(sc))
    return words


def _init_stage_barriers(smem, bar_off: int, ns: int, consumers: int = CONSUMER_THREADS):
    """One thread: the ``ns`` full barriers of the weight stages (one arrival: the producer's expect_tx) and the
    ``ns`` empty barriers (each of the ``consumers`` threads arrives), then the fence that makes them visible to the
    async proxy (the bulk copies complete on them). Plain Python: the loop unrolls at trace time."""
    for s in range(ns):
        mbar_init(smem + bar_off + 8 * s, 1)
        mbar_init(smem + bar_off + 8 * (ns + s), consumers)
    mbar_init_fence()


def stage_slot(gs, ns: int):
    """Stream step ``gs`` (an Int32, never negative) -> (its stage ``gs % ns``, the number of earlier uses of that
    stage ``gs // ns``), as Int32. Divided unsigned: a signed ``%`` / ``//`` by a constant costs the sign fix-ups
    (shift, lea.hi, compare, select: ~10 instructions per K128 step on a consumer's path, session 34), an unsigned one
    by a power of two is a mask and a shift."""
    u = Uint32(gs)
    return Int32(u % Uint32(ns)), Int32(u // Uint32(ns))


@cute.jit
def _produce_k128(smem, bar_off: int, stage_off: int, ns: int, gs, wait_empty, w, ws, slab0, nk, kb, policy,
                  nsl: int = 4, sstride: int = 1):
    """Producer, stream step ``gs`` (stage ``gs % ns``): once the stage has been used, wait for its empty
    barrier (``wait_empty(bar, parity)``, a bounded wait), then :func:`_issue_k128_stage` for K128 ``kb``."""
    s = gs % ns  # signed here: stage_slot cost the 32-register producer of the two-CTA builds spills (session 34)
    use = gs // ns
    if gs >= ns:
        wait_empty(smem + bar_off + 8 * (ns + s), (use - 1) & 1)
    _issue_k128_stage(smem, bar_off, stage_off, s, w, ws, slab0, nk, kb, policy, nsl, sstride)


def _consume_k128(smem, bar_off: int, stage_off: int, ns: int, gs, wait_full, wg, tw, warp, g, release: str,
                  nslab: int = 2, stage_bytes: int = STAGE_BYTES, k_interleave: bool = False, stage_slabs: int = 0):
    """Consumer, stream step ``gs``: wait for the stage's full barrier (``wait_full(bar, parity)``), read
    this thread's words of its ``nslab`` slabs (:func:`_read_k128_stage`) and, unless ``release``
    (Role2GemmConfig.stage_release) is "decoded" (then :func:`_release_k128` after the step's MMAs), arrive on the
    empty barrier. Returns the words."""
    s, use = stage_slot(gs, ns)
    wait_full(smem + bar_off + 8 * s, use & 1)
    words = _read_k128_stage(smem + stage_off + s * stage_bytes, wg, tw, warp, g, nslab, k_interleave, stage_slabs)
    if release == "fence":
        fence_proxy_async_shared()
    if not release.startswith("decoded"):
        mbar_arrive(smem + bar_off + 8 * (ns + s))
    return words


def _release_k128(smem, bar_off: int, ns: int, gs):
    """Consumer: arrive on stream step ``gs``'s empty barrier (``stage_release="decoded"``)."""
    mbar_arrive(smem + bar_off + 8 * (ns + stage_slot(gs, ns)[0]))


def stage_k128_step(cfg: Role2GemmConfig, smem, bar_off: int, stage_off: int, ns: int, gs, wait_full, lane, ascl,
                    kl128) -> K128Step:
    """The :class:`K128Step` of stream step ``gs`` (an Int32, or a callable returning it where it depends on loop
    state) fed from the producer's shared-memory stages: :func:`_consume_k128` on first use, and the stage released
    as ``cfg.stage_release`` says. ``lane``: the consumer's (warpgroup, thread in warpgroup, warp, g)."""
    step_of = gs if callable(gs) else (lambda: gs)
    wg, tw, warp, g = lane
    release = ((lambda: _release_k128(smem, bar_off, ns, step_of())) if cfg.stage_release.startswith("decoded")
               else None)
    return K128Step(lambda: _consume_k128(smem, bar_off, stage_off, ns, step_of(), wait_full, wg, tw, warp, g,
                                          cfg.stage_release, cfg.slabs_per_pass, cfg.stage_bytes,
                                          cfg.k_interleave), ascl, kl128,
                    release, EARLY_RELEASE_K32 if cfg.stage_release == "decoded_k32_2" else 3)
