"""CPU model of the registered role2's ring protocol (gcmoe_build/kernels/sm90/role2_ring.py; its host mirrors in
role2_ring_config.py) against role1's producer rule (gcmoe_runtime/operator/ring.py): random interleavings of G
persistent CTAs running the static task split or the dynamic claims (each CTA's first ``STATIC_ROUNDS`` tasks static,
every later one claimed from the ticket when the CTA takes up the task before it, ``claimed_task`` /
``claim_zeroes_ticket``), with role1 filling pool blocks strictly in pool order (the most constraining producer) and
waiting for ``l1_empty_count >= gen`` before overwriting a ring block. Checks: no deadlock; a task only ever sees its
own generation's ring data; W2 only ever sees mask bits set by its own generation's W1 tasks; every generation is
handed back to role1 exactly once (+1 on l1_empty); final counters equal the kernel's targets. The model uses the
kernel's own task order and counter formulas (split_task_coords, w1_split_runs, l2_empty_target, last_w2_old). With
the W1 split-K (role2_ring "W1 split-K"), only a tile's last K-range task publishes its bits, after every K range of
the tile has arrived, and the arrival count is back at zero when the replay ends. With claims: every task runs
exactly once, a launch makes ``ntasks - (STATIC_ROUNDS - 1) * G`` claims, and the ticket is back at zero when it
ends; with too few tasks per CTA (``claims_run``) the replay keeps the static split, as the kernel does."""
from __future__ import annotations

import random

import pytest

from gcmoe_build.kernels.sm90.role2_ring_config import (CLAIM_MIN_TASKS_PER_CTA, STATIC_ROUNDS, claim_zeroes_ticket,
                                                        claimed_task, claims_run, l2_empty_target, last_w2_old,
                                                        w1_split_runs)
from gcmoe_build.kernels.sm90.role2_schedule import split_task_coords
from gcmoe_runtime.operator.ring import ring_slot


def simulate(nq, ring_blocks, ctas, nt1, nt2, seed, build_split=1, claims=False):
    rng = random.Random(seed)
    split = w1_split_runs(build_split, nq, nt1, ctas, ring_blocks)
    arrivals = {}  # (rb, tile) -> K-range tasks of the tile counted in (w1_split_count)
    filled = [0] * ring_blocks  # generations role1 has completed per ring block (l1_full == BM * filled)
    l1_empty = [0] * ring_blocks
    l2_empty = [0] * ring_blocks
    mask = [dict() for _ in range(ring_blocks)]  # bit -> generation that set it
    ntasks = nq * (nt1 * split + nt2)
    # the CTAs' task queues: the static split's whole queue, or (claims where the kernel has them:
    # claims_run) the first task only, the next one appended by the claim each CTA makes when it takes up a task
    dyn = claims and claims_run(split, ntasks, ctas)
    queues = [list(range(c, ntasks, ctas)) if not dyn else list(range(c, ntasks, ctas))[:STATIC_ROUNDS]
              for c in range(ctas)]
    taken = [0] * ctas  # tasks each CTA has taken up
    ticket, nclaims, ran = 0, 0, []
    state = [None] * ctas  # per CTA: the acquired task (q, rb, gen, w1, tile, next chunk bit) or None
    next_fill = 0
    steps = 0
    while any(queues) or any(s is not None for s in state) or next_fill < nq:
        moves = []
        if next_fill < nq:
            rb, gen = ring_slot(next_fill, ring_blocks)
            if l1_empty[rb] >= gen:  # role1's rule before writing generation gen
                moves.append(("fill", None))
        for c in range(ctas):
            if state[c] is None and queues[c]:
                q, w1, tile, _ = split_task_coords(queues[c][0], nt1, nt2, nq, ring_blocks, split)
                rb, gen = ring_slot(q, ring_blocks)
                if filled[rb] >= gen + 1 and (gen == 0 or l2_empty[rb] >= l2_empty_target(gen, nt2)):
                    moves.append(("start", c))
            elif state[c] is not None:
                q, rb, gen, w1, tile, bit = state[c]
                if w1 or bit == 2 * nt1 or bit in mask[rb]:
                    moves.append(("step", c))
        assert moves, f"deadlock: fill={next_fill} state={state} queues={[qq[:2] for qq in queues]}"
        kind, c = rng.choice(moves)
        steps += 1
        if kind == "fill":
            rb, gen = ring_slot(next_fill, ring_blocks)
            assert filled[rb] == gen
            filled[rb] = gen + 1
            next_fill += 1
        elif kind == "start":
            task = queues[c].pop(0)
            ran.append(task)
            taken[c] += 1
            if dyn and taken[c] >= STATIC_ROUNDS:  # the producer's claim of the CTA's next task, one task ahead
                old, ticket, nclaims = ticket, ticket + 1, nclaims + 1
                if claim_zeroes_ticket(old, ntasks, ctas):
                    ticket = 0
                if claimed_task(old, ctas, ntasks) >= 0:
                    queues[c].append(claimed_task(old, ctas, ntasks))
            q, w1, tile, _ = split_task_coords(task, nt1, nt2, nq, ring_blocks, split)
            rb, gen = ring_slot(q, ring_blocks)
            assert filled[rb] == gen + 1, "ring block overwritten while a task of its generation runs"
            state[c] = (q, rb, gen, w1, tile, 0)
        else:
            q, rb, gen, w1, tile, bit = state[c]
            assert filled[rb] == gen + 1, "ring block overwritten while a task of its generation runs"
            if w1:  # W1 epilogue: publish the task's two N128 bits (split: only the tile's last K range)
                old = arrivals.get((rb, tile), 0)
                arrivals[(rb, tile)] = (old + 1) % split
                if old != split - 1:
                    state[c] = None
                    continue
                for b in (2 * tile, 2 * tile + 1):
                    assert b not in mask[rb], "stale W1 bit of an older generation"
                    mask[rb][b] = gen
                state[c] = None
            elif bit < 2 * nt1:  # W2: acquire the next bit (chunk granularity does not change the argument)
                assert mask[rb][bit] == gen, "W2 consumed a bit of another generation"
                state[c] = (q, rb, gen, w1, tile, bit + 1)
            else:  # W2 done: completion count, last one clears the bitmap and hands the block back
                old = l2_empty[rb]
                l2_empty[rb] += 1
                if old == last_w2_old(gen, nt2):
                    mask[rb].clear()
                    l2_empty[rb] += 1
                    l1_empty[rb] += 1
                state[c] = None
    gens = [len([q for q in range(nq) if q % ring_blocks == rb]) for rb in range(ring_blocks)]
    assert l1_empty == gens and filled == gens
    assert l2_empty == [l2_empty_target(g, nt2) for g in gens]
    assert not any(arrivals.values()), "a W1 split count left non-zero for the next replay"
    assert sorted(ran) == list(range(ntasks)), "a task ran twice or never"
    nexp = max(0, ntasks - (STATIC_ROUNDS - 1) * ctas) if dyn else 0
    assert ticket == 0 and nclaims == nexp, "the ticket is not ready for the next launch"
    return steps, split, dyn


@pytest.mark.parametrize("nq,ring_blocks,ctas,nt1,nt2", [
    (1, 4, 3, 2, 2), (9, 2, 3, 2, 2), (17, 3, 5, 2, 2), (12, 1, 4, 2, 2),  # test-tiny: 2I/256 = H/256 = 2
    (20, 4, 16, 16, 24), (7, 2, 7, 18, 20), (0, 4, 4, 2, 2),  # glm-5.2 / dsv-4.1-flash task counts
    (10, 4, 5, 3, 2), (5, 5, 2, 2, 3), (6, 4, 40, 2, 2)])  # partial last generation, one full one, idle CTAs
def test_static_split_is_deadlock_free_and_generation_exact(nq, ring_blocks, ctas, nt1, nt2):
    for seed in range(10):
        simulate(nq, ring_blocks, ctas, nt1, nt2, seed)


@pytest.mark.parametrize("nq,ring_blocks,ctas,nt1,nt2", [
    (1, 4, 3, 2, 2), (9, 2, 3, 2, 2), (17, 3, 5, 2, 2), (12, 1, 4, 2, 2), (20, 4, 16, 16, 24), (7, 2, 7, 18, 20),
    (0, 4, 4, 2, 2), (10, 4, 5, 3, 2), (5, 5, 2, 2, 3), (6, 4, 40, 2, 2)])
def test_dynamic_claims_are_deadlock_free_exact_and_leave_the_ticket_at_zero(nq, ring_blocks, ctas, nt1, nt2):
    for seed in range(10):
        simulate(nq, ring_blocks, ctas, nt1, nt2, seed, claims=True)


def test_claims_run_only_with_enough_tasks_per_cta():
    """The producer's claims word (session 40): claims from CLAIM_MIN_TASKS_PER_CTA tasks per CTA, never in a split
    replay; below it the static split (the model runs both: the shapes above hold 0.6-50 tasks per CTA)."""
    n = CLAIM_MIN_TASKS_PER_CTA
    assert claims_run(1, n * 256, 256) and claims_run(1, n * 128 + 1, 128)
    assert not claims_run(2, 100 * n * 256 + 1000, 256)
    assert simulate(9, 2, 3, 2, 2, 0, claims=True)[2]
    if n > 0:  # (an experiment's threshold 0 claims at every load)
        assert not claims_run(1, n * 256 - 1, 256) and not claims_run(1, 0, 4)
        assert not simulate(6, 4, 40, 2, 2, 0, claims=True)[2]


def test_model_catches_a_wrong_claim():
    """The claim checks are not vacuous: a ticket the last claim does not zero, or a claim that skips a task, fail."""
    import gcmoe_build.kernels.sm90.role2_ring_config as r2

    for wrong in ({"claim_zeroes_ticket": lambda old, ntasks, ncta: False},
                  {"claimed_task": lambda old, ncta, ntasks: (lambda t: t if t < ntasks else -1)(ncta + 2 * old)}):
        saved = {k: globals()[k] for k in wrong}
        try:
            globals().update(wrong)
            with pytest.raises(AssertionError):
                simulate(9, 2, 3, 2, 2, 0, claims=True)
        finally:
            globals().update(saved)
    # the first claim takes the first task past the static rounds; the claim past the last task gets none
    assert r2.claimed_task(0, 3, 3 * STATIC_ROUNDS + 1) == 3 * STATIC_ROUNDS
    assert r2.claimed_task(1, 3, 3 * STATIC_ROUNDS + 1) == -1


def test_model_catches_a_wrong_completion_target():
    """The model is not vacuous: with the mask never cleared, the next generation's W1 trips the stale-bit check."""
    import gcmoe_build.kernels.sm90.role2_ring_config as r2

    with pytest.raises(AssertionError):
        orig = r2.last_w2_old
        try:
            globals()["last_w2_old"] = lambda gen, nt2: -1  # never "last": bitmap never cleared, never handed back
            simulate(5, 2, 3, 2, 2, 0)
        finally:
            globals()["last_w2_old"] = orig


@pytest.mark.parametrize("nq,ring_blocks,ctas,nt1,nt2,runs", [
    (1, 4, 8, 2, 2, 2), (3, 4, 12, 2, 2, 2), (2, 8, 64, 16, 24, 2), (4, 4, 256, 16, 24, 2),  # split replays
    (5, 4, 40, 2, 2, 1), (3, 4, 8, 2, 2, 1), (17, 32, 1024, 2, 2, 1)])  # > ring, too few CTAs, > W1_SPLIT_MAX_BLOCKS
def test_w1_split_is_deadlock_free_and_publishes_once(nq, ring_blocks, ctas, nt1, nt2, runs):
    for seed in range(10):
        assert simulate(nq, ring_blocks, ctas, nt1, nt2, seed, build_split=2)[1] == runs
