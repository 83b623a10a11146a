"""Task hand-offs inside a persistent role2 CTA: dynamic task claiming (``Role2GemmConfig.dynamic_tasks``) and
the release queue (``Role2GemmConfig.release_warp``, at the end).

A static split (CTA ``c`` of ``G`` takes tasks ``c, c + G, ...``) lasts as long as its slowest CTA: session 11
(call A) measured the persistent two-CTA dev kernel ``_pp2d`` 5-15 % slower than one CTA per task (``_p2d``, whose
CTAs the hardware hands to SMs as they free up). Here each CTA's producer thread claims its next task from a counter
in global memory (one relaxed ``atom.add`` per task, issued while the weight stages already queued keep the
consumers busy) and hands it to the consumers through one of two shared-memory slots, each with an mbarrier of one
arrival (``mbarrier.arrive`` releases the slot's store, ``try_wait`` acquires it).

* **No deadlock.** Claims are handed out in increasing order, so a task waits only for smaller tasks, all claimed
  by running CTAs of the same (co-resident) grid: the smallest unfinished task can always run, as with the static
  split.
* **No memset between launches.** Every CTA's last claim fails (returns ``>= ntasks``), so one launch makes exactly
  ``ntasks + G`` claims; the claim that returns ``ntasks + G - 1`` is the launch's last access to the counter and
  stores 0 for the next launch (stream order). A launch that traps leaves the counter dirty, but a trap ends the
  CUDA context and with it the workspace.
* **Slot reuse.** The producer writes slot ``li % 2`` only after it issued every weight stage of task ``li - 1``;
  the last of them waited for stage ``li * NK - 1 - NS`` to be released, and the consumers read slot ``li - 2``
  before they consume stage ``(li - 2) * NK``. So a task must span more than half the stage ring:
  ``2 * NK > NS`` (:func:`check_slot_reuse`, at build time).
"""
from __future__ import annotations

import cutlass.cute as cute
from cutlass import Int32

from .ptx_mem import mbar_arrive, mbar_init
from .ring_sync import atom_add_relaxed_gpu_u32, ld_shared_b32, st_relaxed_gpu_u32, st_shared_b32

#: shared memory of the two slots: two mbarriers (8 B each), then two Int32 task indices
TASK_SLOTS_BYTES = 32


def check_slot_reuse(nk128: int, stages: int, what: str):
    if 2 * nk128 <= stages:
        raise ValueError(f"{what}: dynamic_tasks needs a task of more than half the weight-stage ring "
                         f"(2 x K/128 = {2 * nk128} <= stages = {stages})")


def init_task_slots(saddr):
    """One thread, before the CTA's first barrier: the two slots' mbarriers (one arrival each)."""
    for s in range(2):
        mbar_init(saddr + 8 * s, 1)


@cute.jit
def claim_task(ticket, ntasks, ncta):
    """Producer thread: the next task of this launch, or -1 when none is left (see the module note on the reset)."""
    t = atom_add_relaxed_gpu_u32(ticket, Int32(1))
    if t == ntasks + ncta - 1:
        st_relaxed_gpu_u32(ticket, Int32(0))
    ok = Int32(t < ntasks)
    return ok * (t + 1) - 1


def publish_task(saddr, li, task):
    """Producer thread: task ``task`` (or -1) is this CTA's ``li``-th."""
    s = li % 2
    st_shared_b32(saddr + 16 + 4 * s, task)
    mbar_arrive(saddr + 8 * s)


def next_task(saddr, li, wait):
    """Consumer: this CTA's ``li``-th task (-1: done) once the producer published it; ``wait(bar, parity)`` is the
    caller's bounded mbarrier wait."""
    s = li % 2
    wait(saddr + 8 * s, (li // 2) & 1)
    return ld_shared_b32(saddr + 16 + 4 * s)


# ---------------------------------------------------------------------------------------------
# Release queue: the consumers hand each finished task to one thread of the producer warpgroup, which makes the
# task's stores visible at GPU (or system) scope and releases its signals, off the consumers' critical path. Before,
# consumer thread 0 ran ``fence.acq_rel`` + ``red.release`` after the epilogue's stores, and every consumer waited
# for it at the next task's first barrier (a fence waits for the CTA's outstanding stores: microseconds per task).
# Ordering: every consumer's stores -> consumer barrier -> ``mbarrier.arrive`` (release, CTA) -> the releaser's
# ``try_wait`` (acquire, CTA) -> its fence at GPU / system scope (cumulative) -> the signal.
# ---------------------------------------------------------------------------------------------
#: shared memory of the release queue: full[2], empty[2] mbarriers (8 B each), then two Int32 task indices
RELEASE_QUEUE_BYTES = 48


def init_release_queue(saddr):
    """One thread, before the CTA's first barrier: two slots, each a full and an empty mbarrier of one arrival."""
    for b in range(4):
        mbar_init(saddr + 8 * b, 1)


@cute.jit
def post_release(saddr, li, task, wait):
    """One consumer thread, after a barrier that orders every consumer's stores of task ``task`` (its ``li``-th)
    before this call (``mbarrier.arrive`` releases them to the releasing thread at CTA scope); ``task`` = -1 after
    the last one. Waits (``wait(bar, parity)``) until the releaser has taken slot ``li % 2``'s previous task."""
    s = li % 2
    use = li // 2
    if use > 0:
        wait(saddr + 16 + 8 * s, (use - 1) & 1)
    st_shared_b32(saddr + 32 + 4 * s, task)
    mbar_arrive(saddr + 8 * s)


def take_release(saddr, li, wait):
    """The releasing thread: the ``li``-th finished task (-1: none left); then :func:`free_release`."""
    s = li % 2
    wait(saddr + 8 * s, (li // 2) & 1)
    return ld_shared_b32(saddr + 32 + 4 * s)


def free_release(saddr, li):
    mbar_arrive(saddr + 16 + 8 * (li % 2))
