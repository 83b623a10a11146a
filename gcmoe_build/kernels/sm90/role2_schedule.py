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
    "W1 split-K"; ``split`` = ``role2_ring_config.w1_split_runs``): task -> (pool block, W1 task?, tile, K range). A
    tile's W1 tasks are consecutive, the K range fastest; the W2 tasks are unchanged."""
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


# ---- Stream-K (session 23: built and measured on branch ``stream-k``, 29fa2fb / 654765f; refuted) --------------------
# The per-task trace (session 23, ``bench tasks``) shows role2 at T = 1-4 losing 5-13 % of its span to whole-tile
# quantisation: 108 W1 tiles on 128 SMs (DSV-4.1-Flash T = 1), 198 tiles on 128 SM pairs (T = 2), 1.5 W2 tiles per SM
# (GLM-5.2 T = 1). Stream-K cuts each phase's work (W1, then W2) into K256 units, ``tile_units`` per tile, and gives
# CTA ``c`` of ``G`` the contiguous units ``[c*U//G, (c+1)*U//G)``; a tile split between CTAs is finished by the last
# of its pieces to arrive (FP32 partials in the workspace, summed in slot order so the bits do not depend on which
# arrives last). The kernel (the K-split build running these pieces) was correct and 5-23 % slower in the layer at
# T = 1-4 (docs/PERFORMANCE.md "Session 23"): a piece pays a task's fixed cost (task top, activation chunk, pipeline
# drain, epilogue: ~5-8 µs at BM 8), and Stream-K doubles the tasks per CTA. These functions stay as the model (and
# the host mirror the branch's kernel followed) for a design that hides a task's fixed cost first.


def stream_k_ctas(ctas, units, tile_units, max_pieces):
    """The CTAs a Stream-K phase runs on: all ``ctas`` when each then gets at least ``ceil(tile_units / (max_pieces -
    1))`` units (so no tile has more than ``max_pieces`` pieces, the partials' slots), else fewer; at least one."""
    cmin = -(-tile_units // (max_pieces - 1))
    return min(ctas, max(1, units // cmin))


def stream_k_range(cta, ctas, units):
    """CTA ``cta``'s units ``[a, b)`` of a phase of ``units`` units over ``ctas`` CTAs (may be empty)."""
    return cta * units // ctas, (cta + 1) * units // ctas


def stream_k_owner(unit, ctas, units):
    """The CTA whose range holds ``unit``: the largest ``c`` with ``c*units//ctas <= unit``."""
    return ((unit + 1) * ctas - 1) // units


def stream_k_pieces(cta, ctas, ntiles, tile_units, max_pieces=4):
    """CTA ``cta``'s pieces of a phase of ``ntiles`` tiles x ``tile_units`` units, in order: ``(tile, u0, u1, slot,
    npieces)``: units ``[u0, u1)`` of the tile (0-based within it), this piece's slot among the tile's pieces (the
    partial's index, 0 = the piece holding the tile's first unit) and how many pieces the tile has (the arrival count
    its last piece waits for). Every unit of every tile is in exactly one piece (tests/build/.../test_role2_schedule).
    The phase runs on :func:`stream_k_ctas` CTAs (the others get no piece): every range is non-empty, so a piece's
    slot is its CTA's distance from the tile's first owner. Branch ``stream-k``'s ``role2_ring`` (``sk_phase``,
    ``split_coords``; not on main) computed the same on the device, line for line, with ``max_pieces`` = its
    ``heuristics.SK_MAX_PIECES``."""
    units = ntiles * tile_units
    ctas = stream_k_ctas(ctas, units, tile_units, max_pieces)
    if cta >= ctas:
        return []
    a, b = stream_k_range(cta, ctas, units)
    out = []
    x = a
    while x < b:
        t = x // tile_units
        end = min(b, (t + 1) * tile_units)
        first = stream_k_owner(t * tile_units, ctas, units)
        last = stream_k_owner((t + 1) * tile_units - 1, ctas, units)
        out.append((t, x - t * tile_units, end - t * tile_units, cta - first, last - first + 1))
        x = end
    return out


def stream_k_span(w1_bytes, w2_bytes, rate_bps, start_us=4.0, handoff_us=1.0, tail_us=2.0):
    """Predicted role2 span (µs) of a Stream-K replay: both phases streamed at ``rate_bps`` (every SM busy, the
    phase's bytes balanced over them) after ``start_us`` (role2's first block arrives: role1 at P = 1 ~4 µs in the
    trace), one hand-over from W1 to W2 (the last W1 pieces' sums and epilogues, W2's first stages) and the last
    W2 epilogues. A model: the trace of the first Stream-K build is what tests it."""
    return start_us + (w1_bytes + w2_bytes) / rate_bps * 1e6 + handoff_us + tail_us
