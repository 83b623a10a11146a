"""Task hand-offs inside a persistent role2 CTA: dynamic task claiming (``Role2GemmConfig.dynamic_tasks``) and task
records (``Role2GemmConfig.task_records``). (A release queue, a producer-warpgroup thread running each finished
task's release, was measured in sessions 11-12 and removed: slower at two CTAs per SM, docs/PERFORMANCE.md.)

**Task records.** Without them every consumer thread starts a task with a chain of dependent global loads: the
ring block's acquire (``ld.acquire.gpu`` + the L1 invalidation it implies), the expert, then its factor and the
scale addresses; W2 adds an acquire of the W1 mask bits per chunk. ncu (session 11, call E) put 6.6 % of the
persistent W1 BM 8 kernel's stall samples and ~16 % of W2 BM 16's there, none of which the one-task-per-CTA kernels
pay. With records the producer thread, which runs NS weight stages ahead, does the acquires (W2: every mask bit the
task needs, before it streams the task's weights) and the loads, and publishes ``(task, expert, tokens, factor)`` in
the task slot; the consumers read 16 bytes of shared memory. Ordering: the producer's ``ld.acquire.gpu`` then its
``mbarrier.arrive`` (release, CTA) and the consumers' ``try_wait`` (acquire, CTA) chain the writers' releases to the
consumers' loads; the acquire's L1 invalidation is per SM, and any line filled after it comes from the coherent L2.

**Dynamic tasks.** A static split (CTA ``c`` of ``G`` takes tasks ``c, c + G, ...``) lasts as long as its slowest
CTA. Measured (session 11, calls B-D), claiming does not close the persistent kernels' gap to one CTA per task at two
CTAs per SM and helps one CTA at BM 8 only (task records address that gap). Each CTA's producer thread claims its next task from a counter
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
* **Slot reuse** (``n`` slots). The producer writes slot ``li % n`` only after it issued every weight stage of
  task ``li - 1``; the last of them waited for the release of the stage NS before it, and the consumers read slot
  ``li - n`` before they consume the first stage of task ``li - n``. So ``n`` consecutive tasks must span more than
  the stage ring: ``n * min(K/128) > NS`` (:func:`task_slot_count`, :func:`check_slot_reuse`, at build time). No
  back-pressure barrier on the hot path.
"""
from __future__ import annotations

import cutlass.cute as cute
from cutlass import Int32

from .ptx_mem import ld_shared_f32, mbar_arrive, mbar_init, st_shared_f32
from .ring_sync import atom_add_relaxed_gpu_u32, ld_shared_b32, st_relaxed_gpu_u32, st_shared_b32

#: shared memory of one task slot: its mbarrier (8 B) and its 16-byte record (task, expert, tokens, expert factor;
#: only the task index without ``task_records``); the slots' barriers come first, then their records
TASK_SLOT_BYTES = 24
#: the persistent dev kernel's two slots
TASK_SLOTS_BYTES = 2 * TASK_SLOT_BYTES


def task_slot_count(min_nk128: int, stages: int) -> int:
    """Slots that make reuse safe without a back-pressure barrier (module note, "Slot reuse"): ``n`` consecutive
    tasks must span more than the stage ring, ``n * min_nk128 > stages``; at least two."""
    return max(2, -(-(stages + 1) // min_nk128))


def check_slot_reuse(nk128: int, stages: int, what: str, nslots: int = 2):
    if nslots * nk128 <= stages:
        raise ValueError(f"{what}: {nslots} task slots need tasks of more than {stages}/{nslots} weight stages "
                         f"(K/128 = {nk128}; task_queue.task_slot_count)")


def init_task_slots(saddr, nslots: int = 2):
    """One thread, before the CTA's first barrier: the slots' mbarriers (one arrival each)."""
    for s in range(nslots):
        mbar_init(saddr + 8 * s, 1)


@cute.jit
def claim_task(ticket, ntasks, ncta):
    """Producer thread: the next task of this launch, or -1 when none is left (see the module note on the reset)."""
    t = atom_add_relaxed_gpu_u32(ticket, Int32(1))
    if t == ntasks + ncta - 1:
        st_relaxed_gpu_u32(ticket, Int32(0))
    ok = Int32(t < ntasks)
    return ok * (t + 1) - 1


def task_record(saddr, li, nslots: int = 2):
    """The shared-memory address of the record of this CTA's ``li``-th task (its slot's 16 bytes)."""
    return saddr + 8 * nslots + 16 * (li % nslots)


def publish_task(saddr, li, task, expert=None, ntok=None, efac=None, nslots: int = 2):
    """Producer thread: ``task`` (or -1) is this CTA's ``li``-th; with ``Role2GemmConfig.task_records`` also its
    record (expert, tokens, expert factor), which the producer loaded after its acquire."""
    rec = task_record(saddr, li, nslots)
    st_shared_b32(rec, task)
    if expert is not None:
        st_shared_b32(rec + 4, expert)
        st_shared_b32(rec + 8, ntok)
        st_shared_f32(rec + 12, efac)
    mbar_arrive(saddr + 8 * (li % nslots))


def next_task(saddr, li, wait, record: bool = False, nslots: int = 2):
    """Consumer: this CTA's ``li``-th task (-1: done) once the producer published it; ``wait(bar, parity)`` is the
    caller's bounded mbarrier wait. ``record``: ``(task, expert, ntok, efac)``."""
    wait(saddr + 8 * (li % nslots), (li // nslots) & 1)
    rec = task_record(saddr, li, nslots)
    if record:
        return ld_shared_b32(rec), ld_shared_b32(rec + 4), ld_shared_b32(rec + 8), ld_shared_f32(rec + 12)
    return ld_shared_b32(rec)
