"""role2's static task order (host mirror of the kernel's arithmetic in :mod:`.role2_ring`) and a makespan model
used to predict what a task order costs before it is measured (docs/PERFORMANCE.md).

The replay's work is ``nq`` pool blocks (``gcmoe_runtime.operator.ring``), each with ``nt1 = 2I/256`` W1 tasks and
``nt2 = H/256`` W2 tasks; the persistent grid's CTA ``c`` of ``G`` runs tasks ``c, c + G, c + 2G, ...`` in order.
Correctness needs only that every task depends on earlier tasks (then the smallest unfinished task can always run:
no deadlock with co-resident CTAs). Speed depends on how long a CTA waits for the tasks it depends on.

* :func:`block_major_coords` — the first order (per pool block: its W1 tasks, then its W2 tasks). A W2 task of block
  ``q`` lands in the same round of ``G`` tasks as the W1 tasks it waits for, so every round costs about one W1 task
  *plus* one W2 task; measured on the H200 at 2.7-4.5x the byte floor.
* :func:`task_coords` — generation-phased: per ring generation (``ring_blocks`` consecutive pool blocks), all W1
  tasks of its blocks, then all their W2 tasks. Every W2 task then waits only for W1 tasks of earlier rounds, and
  ring reuse stays safe: W1 of generation ``g + 1`` comes after W2 of generation ``g`` (which frees the blocks).
* :func:`split_task_coords` — the same order when a small replay runs each W1 tile as several K-range tasks.
"""
from __future__ import annotations


def block_major_coords(task, nt1, nt2, nq=None, ring_blocks=None):
    """The first order: task -> (pool block, W1 task?, tile)."""
    q, r = divmod(task, nt1 + nt2)
    return q, r < nt1, (r if r < nt1 else r - nt1)


def task_coords(task, nt1, nt2, nq, ring_blocks):
    """The registered order (generation-phased): task -> (pool block, W1 task?, tile). ``nq``: pool blocks of this
    replay; ``ring_blocks``: the ring's size (one generation)."""
    return split_task_coords(task, nt1, nt2, nq, ring_blocks, 1)[:3]


def split_task_coords(task, nt1, nt2, nq, ring_blocks, split):
    """:func:`task_coords` of a replay that runs each W1 tile as ``split`` tasks over equal K ranges (``role2_ring``
    "W1 split-K"; ``split`` = ``role2_ring.w1_split_runs``): task -> (pool block, W1 task?, tile, K range). A tile's
    W1 tasks are consecutive, the K range fastest; the W2 tasks are unchanged."""
    n1 = nt1 * split
    g, u = divmod(task, ring_blocks * (n1 + nt2))
    nb = min(ring_blocks, nq - g * ring_blocks)  # blocks in this generation (the last one may be partial)
    if u < nb * n1:
        bt, sp = divmod(u, split)
        return g * ring_blocks + bt // nt1, True, bt % nt1, sp
    v = u - nb * n1
    return g * ring_blocks + v // nt2, False, v % nt2, 0


def makespan(coords, nq, ring_blocks, ctas, nt1, nt2, d1, d2):
    """Time to run every task when a W1 task takes ``d1`` and a W2 task ``d2`` and a W2 task starts only once every
    W1 task of its block has finished (the kernel's W2 waits on the block's W1 mask bits: all of them while the W2
    activation chunk is all of I, i.e. at small BM). Producer (role1) and memory contention are not modelled: this
    compares orders, it does not predict absolute time."""
    tpb = nt1 + nt2
    w1_done = {}  # pool block -> time its last W1 task finished
    w1_left = {q: nt1 for q in range(nq)}
    free = [0.0] * ctas
    tasks = [coords(t, nt1, nt2, nq, ring_blocks) for t in range(nq * tpb)]
    # process in task order: a task's dependencies (W1 of its block) are all earlier tasks, already placed
    for t, (q, w1, _) in enumerate(tasks):
        c = t % ctas
        start = free[c] if w1 else max(free[c], w1_done[q])
        free[c] = start + (d1 if w1 else d2)
        if w1:
            w1_left[q] -= 1
            if w1_left[q] == 0:
                w1_done[q] = free[c]
    return max(free) if tasks else 0.0
