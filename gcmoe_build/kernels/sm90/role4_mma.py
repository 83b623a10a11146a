"""The FP8-weight K128 step of role4 (SM90 shared experts): register-A ``wgmma m64nBMk32 .e4m3`` with the weight
fragments taken as they are (no FP4 decode), each warp's ``cp.async`` weight ring that streams them
(:class:`WeightRing`, session 16; a two-stage register stream one K128 ahead before), and a PTX helper.

Tile layout: ``gcmoe_runtime.numerics.transforms_sm90_shared`` (per 64-row slab and K128 step, warpgroup thread
``t`` owns code bytes ``[64t, 64t + 64)`` = K32 steps q = 0..3 x A registers a0..a3, and 8 scale bytes at row
group ``8w + g``: byte ``2q + hh`` is the UE8M0 code of row ``16w + g + 8hh`` for K32 ``q``). The scale FMA
schedule is role2's ``_k128_mma`` (``role2_mainloop``): per K32 a fresh partial (``p = false``), FMA'd with
``weight_scale[row] * act_scale[token]`` while the next K32's MMAs run (``lag``); for the 1x128x128 recipe
(``block_k128``) the four K32 MMAs chain on one partial and one FMA per K128 scales it (session 15: the per-K32 path
was 1 024 of BM 64's 1 246 instructions per K256).
"""
from __future__ import annotations

from cutlass import Int32, Int64

from .ptx_mem import cp_async_16_if, cp_async_commit, cp_async_wait_group, ld_shared_v2, ld_shared_v4
from .role1_sync import syncwarp
from .role2_mainloop import _k128_mma

#: Int32 words of one K128 step of a thread: 2 slabs x 16 code words (64 bytes each), then 2 slabs x 2 scale words
WORDS_PER_STAGE = 36
CODE_TILE_BYTES = 8192
SCALE_TILE_BYTES = 256


#: shared-memory bytes of one warp's K128 step in the weight ring (:class:`WeightRing`): the warp's 2 KB of each of
#: its two slabs' code tile (32 lanes x 64 B), then each slab's 64 scale bytes (row groups ``8 warp + g``)
RING_WARP_BYTES = 2 * 2048 + 2 * 64
#: warps of a role4 CTA (two consumer warpgroups)
RING_WARPS = 8
#: most weight-ring slots a role4 build gets (K128 steps in flight)
MAX_RING_SLOTS = 4


def _swizzle(chunk):
    """The stored position of 16-byte chunk ``chunk`` of a warp's 2 KB: XOR with bits 3-5, so that both the copies
    (lanes take consecutive chunks) and the reads (lane l takes chunks 4l..4l+3) hit eight different bank groups per
    eight lanes."""
    return chunk ^ ((chunk >> 3) & 7)


class WeightRing:
    """Each warp's own ``cp.async`` pipeline of K128 weight steps through ``slots`` shared-memory slots
    (``[slot][warp][RING_WARP_BYTES]`` at ``base``). The warp copies its 2 KB of each slab's code tile coalesced (lane
    l takes 16-byte chunk ``32 q + l`` in copy q: whole 128-byte lines, where each lane copying its own 64-byte
    fragment touched every line twice) and the 64 scale bytes of its row groups, one group per step (committed even
    when empty, so ``wait_group(slots - 1)`` always means "step i has landed"), then after the wait a ``bar.warp.sync``
    makes every lane's copies visible to the warp and each lane reads its own fragment (:func:`_swizzle`d). No
    CTA barrier or mbarrier is involved. A step's slot is refilled only after its MMAs were issued (their A registers
    hold the loaded words: the warp's reads are done).

    ``prologue(kb0, kend)`` issues the task's first ``slots`` steps (a W2 task before it waits for its W1 tiles, so
    its weights stream meanwhile); ``words(i, g)`` waits for step i and reads this lane's words; ``refill(i, kb, kend)`` issues step
    ``kb`` into step i's slot. Steps at or past ``kend`` copy nothing (predicated off, their groups empty), so no
    copy is pending into a slot when the next task's prologue writes it. ``wbases`` / ``sbases``: the warp's first
    code / scale byte of K128 step 0 of each of its two slabs."""

    def __init__(self, base, warp_id, lane, slots: int, wbases, sbases):
        self.base, self.warp_id, self.lane, self.slots = base, warp_id, lane, slots
        self.wbases, self.sbases = wbases, sbases

    def _slot_addr(self, i):
        return self.base + (i % self.slots) * (RING_WARPS * RING_WARP_BYTES) + self.warp_id * RING_WARP_BYTES

    def _issue(self, dst, kb, kend):  # step kb's copies where kb < kend (predicated: nothing past the range)
        ok = Int32(kb < kend)
        lane = self.lane
        for sl in range(2):
            for q in range(4):
                c = 32 * q + lane
                cp_async_16_if(dst + sl * 2048 + _swizzle(c) * 16,
                               self.wbases[sl] + Int64(kb) * CODE_TILE_BYTES + Int64(c) * 16, ok)
        sl, j = lane >> 2, lane & 3  # lanes 0-3: slab 0's 64 scale bytes, lanes 4-7: slab 1's
        src = self.sbases[0] + (self.sbases[1] - self.sbases[0]) * Int64(sl & 1)
        cp_async_16_if(dst + 4096 + (sl & 1) * 64 + j * 16, src + Int64(kb) * SCALE_TILE_BYTES + Int64(j) * 16,
                       ok * Int32(lane < 8))
        cp_async_commit()

    def prologue(self, kb0, kend):
        for j in range(self.slots):  # plain Python: unrolled at trace time
            self._issue(self._slot_addr(j), kb0 + j, kend)

    def words(self, i, g):
        """Step i's :data:`WORDS_PER_STAGE` words of this lane (``g`` = lane // 4: its scale row group)."""
        cp_async_wait_group(self.slots - 1)
        syncwarp()  # every lane's copies of the step, visible to the warp
        a = self._slot_addr(i)
        w = []
        for sl in range(2):
            for j in range(4):
                w.extend(ld_shared_v4(a + sl * 2048 + _swizzle(4 * self.lane + j) * 16))
        for sl in range(2):
            w.extend(ld_shared_v2(a + 4096 + sl * 64 + g * 8))
        return w

    def refill(self, i, kb, kend):
        self._issue(self._slot_addr(i), kb, kend)


def k128_mma_fp8(words, ascl, acc, act_smem, kl128, bm: int, lag: int, block_k128: bool = False,
                 scales_before_wait: bool = False):
    """One K128 step of one warpgroup: role2's ``_k128_mma`` with the A registers taken as they are (no FP4
    decode): K32 ``q`` uses code words ``[4q, 4q + 4)`` of slab 0 and ``[16 + 4q, 16 + 4q + 4)`` of slab 1, the
    scale words start at 32.

    ``words``: :data:`WORDS_PER_STAGE` Int32 (:meth:`WeightRing.words`); ``ascl[q]``: the token scales of the
    thread's BM/4 tokens for K32 ``q`` (``role2_mainloop.TokenScales``); ``acc``: 2 x BM/2 FP32 (slab 0, slab 1).
    ``block_k128``: the weight scale is one per slab and K128 (the 1x128x128 recipe): chained per K128."""
    _k128_mma(words, ascl, acc, act_smem, kl128, bm, lag,
              a_regs=lambda q: words[q * 4:q * 4 + 4] + words[16 + q * 4:16 + q * 4 + 4], scale_word=32,
              block_k128=block_k128, scales_before_wait=scales_before_wait)
