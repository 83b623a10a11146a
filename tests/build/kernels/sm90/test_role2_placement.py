"""CPU model of role2's placement classes (gcmoe_build/kernels/sm90/role2_ring.py, "Placement"): each CTA of a two-CTA
build counts itself in on its SM, then in its class, then as started, with the kernel's word indices
(``gcmoe_runtime.workspace.layout``: ``PLACE_*``) and its index rule (``placed_cta``); the launch's last starter zeroes
the region. Over consecutive launches with random start orders, CTAs that exit before others start (so an SM hosts a
third CTA) and SM ids that alias modulo ``ROLE2_PLACE_SMS``: the logical indices are always a permutation of the grid,
the region is zero after every launch, and where every SM hosts two CTAs each holds one index below G/2 and one above;
CTAs that arrive in SM order pair as ``(k, G/2 + k)``, the launch's own pairing."""
from __future__ import annotations

import random

import pytest

from gcmoe_build.kernels.sm90.role2_ring_config import placed_cta
from gcmoe_runtime.workspace.layout import (PLACE_CLASS, PLACE_SM, PLACE_STARTED, ROLE2_PLACE_SMS,
                                            ROLE2_PLACE_WORDS)


def start_cta(words, sm, ncta, rule=placed_cta):
    """One CTA's start on SM ``sm``, as the kernel's ``place_cta`` does it on ``words`` (the region): counted in on
    its SM, then in its class, then as started (the launch's last starter zeroes the region); returns its index."""
    w = PLACE_SM + sm % ROLE2_PLACE_SMS
    cls = int(words[w] != 0)
    words[w] += 1
    n = words[PLACE_CLASS + cls]
    words[PLACE_CLASS + cls] += 1
    old = words[PLACE_STARTED]
    words[PLACE_STARTED] += 1
    if old == ncta - 1:
        words[:] = [0] * ROLE2_PLACE_WORDS
    return rule(cls == 0, n, ncta)


def launch(words, sm_ids, ncta, rng, early_exits=0, busy=(), rule=placed_cta):
    """One launch: CTAs start in random order on SMs with two slots each (none on the SMs in ``busy``: another kernel
    holds them throughout); ``early_exits`` CTAs finish before the last ones start, freeing their slot (more when no
    slot is free). Returns ``{cta: (sm, logical index)}``; ``words`` (the region) is updated in place as the kernel's
    atomics would."""
    order = list(range(ncta))
    rng.shuffle(order)
    free = {sm: 0 if sm in busy else 2 for sm in sm_ids}
    running, placed = [], {}
    exits_left = early_exits
    for c in order:
        while running and ((exits_left and rng.random() < 0.5) or not any(free.values())):
            gone = running.pop(rng.randrange(len(running)))  # a CTA that started earlier has finished
            free[placed[gone][0]] += 1
            exits_left = max(0, exits_left - 1)
        sm = rng.choice([s for s in sm_ids if free[s] > 0])
        free[sm] -= 1
        running.append(c)
        placed[c] = (sm, start_cta(words, sm, ncta, rule))
    return placed


@pytest.mark.parametrize("sms", [128, 66, 132])
def test_indices_are_a_permutation_and_the_region_resets(sms):
    rng = random.Random(sms)
    words = [0] * ROLE2_PLACE_WORDS
    ncta = 2 * sms
    for rep in range(40):
        # SM ids as a green context hands them out: any subset of the GPU's, here also past 255 (aliasing)
        sm_ids = rng.sample(range(300 if rep % 4 == 3 else 132 if sms <= 132 else 264), sms)
        busy = set(rng.sample(sm_ids, 3)) if rep % 5 == 4 else ()
        placed = launch(words, sm_ids, ncta, rng, early_exits=rng.choice([0, 0, 3, 20]), busy=busy)
        assert sorted(i for _, i in placed.values()) == list(range(ncta)), rep
        assert words == [0] * ROLE2_PLACE_WORDS, rep


def test_the_kth_ctas_of_both_classes_pair_as_the_launch_does():
    """Two CTAs on each SM arriving in SM order (the first of every SM, then the second: a launch's dispatch, or SMs
    freed one by one) hold indices ``k`` and ``G/2 + k``."""
    words = [0] * ROLE2_PLACE_WORDS
    for order in ("launch", "freed"):
        idx = {}
        arrivals = [(sm, slot) for slot in range(2) for sm in range(128)] if order == "launch" else [
            (sm, slot) for sm in range(128) for slot in range(2)]
        for sm, slot in arrivals:
            idx.setdefault(sm, []).append(start_cta(words, sm, 256))
        assert all(v == [sm, sm + 128] for sm, v in idx.items()), order


def test_two_ctas_per_sm_give_each_sm_one_index_of_each_half():
    rng = random.Random(7)
    words = [0] * ROLE2_PLACE_WORDS
    for rep in range(20):
        sm_ids = rng.sample(range(132), 128)
        placed = launch(words, sm_ids, 256, rng)
        halves = {}
        for sm, i in placed.values():
            halves.setdefault(sm, []).append(i < 128)
        assert all(sorted(h) == [False, True] for h in halves.values()), rep


def test_model_catches_a_rule_that_is_not_a_permutation():
    """The check can fail: class 1 at ``G/2 + n`` outright (the launch's pairing without the fill from both ends: not
    a permutation once fewer than G/2 SMs host the launch, e.g. some held by role4 throughout while others host a third
    CTA) repeats or overruns an index."""
    rng = random.Random(3)
    words = [0] * ROLE2_PLACE_WORDS
    sm_ids = list(range(64))
    placed = launch(words, sm_ids, 128, rng, busy=set(sm_ids[:4]), rule=lambda first, n, g: n if first else g // 2 + n)
    assert sorted(i for _, i in placed.values()) != list(range(128))
    placed = launch(words, sm_ids, 128, rng, busy=set(sm_ids[:4]))
    assert sorted(i for _, i in placed.values()) == list(range(128))
    assert words == [0] * ROLE2_PLACE_WORDS
