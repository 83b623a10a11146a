"""The token-ring contract between role1 (producer, SM90 dispatch) and role2 (consumer), as data + host
mirrors (paper §4.3). role1 (``gcmoe_build/kernels/sm90/role1_dispatch.py``) implements the producer
side exactly as written here, GPU-checked against :func:`pool_blocks` / :func:`ring_slot`; role2 must
implement the consumer side the same way.

Per replay, on the owner rank:

* the received tokens form the *expert-concatenated sequence*: local expert major, then source rank,
  then arrival order (the order inside one (expert, source) segment follows atomic arrival and is not
  deterministic; outputs do not depend on it);
* each local expert's tokens are cut into pool blocks of BM tokens, numbered expert by expert
  (:func:`pool_blocks`); pool block ``q`` lives in ring block ``q % ring_blocks`` as generation
  ``q // ring_blocks`` (:func:`ring_slot`);
* ring block ``rb`` holds, for generation ``gen``: ``ring_block[rb] = (local expert, valid tokens,
  pool block, gen)``; per row ``i < valid``: ``ring_x[rb, i, :H]`` E4M3 bytes,
  ``ring_sf[rb, kb, i]`` FP32 scale of K128 block ``kb`` (MN-major), ``ring_meta[rb, i] = (routing weight
  as f32 bits, src_rank, src_token, topk slot)``. Rows ``>= valid`` are stale (never zero-filled);
* ``l1_full_count[rb]`` reaches :func:`l1_full_target` ``= BM * (gen + 1)`` (release) when generation
  ``gen`` is complete — acquire it before reading the block (then ``fence.proxy.async`` before bulk /
  TMA reads of the ring);
* the consumer adds 1 to ``l1_empty_count[rb]`` (release) when generation ``gen``'s activations are
  consumed; role1 writes generation ``gen > 0`` only after ``l1_empty_count[rb] >= gen``;
* W2 partials of row ``i`` go to rank ``src_rank``'s ``combine[slot, src_token, :]`` (BF16); the shared
  expert's output of local token ``t`` to the local ``combine[k, t, :]``;
* role3 zeroes ``l1_full_count``, ``l1_empty_count``, ``l2_full_mask``, ``l2_empty_count`` between replays.
"""
from __future__ import annotations

from typing import Sequence


def pool_blocks(tokens_per_local_expert: Sequence[int], bm: int) -> list[tuple[int, int, int]]:
    """``[(local expert, valid tokens, pool block)]`` in pool order for one replay."""
    if bm < 1:
        raise ValueError(f"ring: BM={bm} must be >= 1")
    out, q = [], 0
    for el, n in enumerate(tokens_per_local_expert):
        if n < 0:
            raise ValueError(f"ring: local expert {el} has a negative token count {n}")
        for b in range((n + bm - 1) // bm):
            out.append((el, min(bm, n - b * bm), q))
            q += 1
    return out


def ring_slot(pool_block: int, ring_blocks: int) -> tuple[int, int]:
    """``(ring block, generation)`` of a pool block."""
    if ring_blocks < 1 or pool_block < 0:
        raise ValueError(f"ring: pool block {pool_block} / ring_blocks {ring_blocks} out of range")
    gen, rb = divmod(pool_block, ring_blocks)
    return rb, gen


def l1_full_target(bm: int, generation: int) -> int:
    """The ``l1_full_count`` value at which generation ``generation`` of a ring block is complete."""
    return bm * (generation + 1)


def sequence_position(counts: Sequence[Sequence[int]], el: int, src_rank: int, j: int) -> int:
    """Position of the ``j``-th token from ``src_rank`` for local expert ``el`` in the expert-concatenated
    sequence; ``counts[el][r]`` tokens of local expert ``el`` come from rank ``r``."""
    before = sum(sum(c) for c in counts[:el]) + sum(counts[el][:src_rank])
    if not 0 <= j < counts[el][src_rank]:
        raise ValueError(f"ring: token {j} outside the {counts[el][src_rank]} of expert {el} from rank {src_rank}")
    return before + j
