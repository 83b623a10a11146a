"""The FP8-weight K128 step of role4 (SM90 shared experts): register-A ``wgmma m64nBMk32 .e4m3`` with the weight
fragments taken as they are (no FP4 decode), the per-thread ``cp.async`` weight ring that streams them
(:class:`WeightRing`, session 16; a two-stage register stream one K128 ahead before), and a PTX helper.

Tile layout: ``gcmoe_runtime.numerics.transforms_sm90_shared`` (per 64-row slab and K128 step, warpgroup thread
``t`` owns code bytes ``[64t, 64t + 64)`` = K32 steps q = 0..3 x A registers a0..a3, and 8 scale bytes at row
group ``8w + g``: byte ``2q + hh`` is the UE8M0 code of row ``16w + g + 8hh`` for K32 ``q``). The scale FMA
schedule is role2's ``_k128_mma`` (``role2_gemm``): per K32 a fresh partial (``p = false``), FMA'd with
``weight_scale[row] * act_scale[token]`` while the next K32's MMAs run (``lag``); for the 1x128x128 recipe
(``block_k128``) the four K32 MMAs chain on one partial and one FMA per K128 scales it (session 15: the per-K32 path
was 1 024 of BM 64's 1 246 instructions per K256).
"""
from __future__ import annotations

from cutlass import Int32, Int64
from cutlass.cutlass_dsl import dsl_user_op

from .ptx_mem import cp_async_8_if, cp_async_16_if, cp_async_commit, cp_async_wait_group, ld_shared_v4
from .role2_gemm import _k128_mma
from .wgmma_rs import _asm, _v

#: Int32 words of one K128 step of a thread: 2 slabs x 16 code words (64 bytes each), then 2 slabs x 2 scale words
WORDS_PER_STAGE = 36
CODE_TILE_BYTES = 8192
SCALE_TILE_BYTES = 256


@dsl_user_op
def st_relaxed_gpu_u32(addr, val, *, loc=None, ip=None):
    _asm("st.relaxed.gpu.global.u32 [$0], $1;", "l,r", [_v(addr, Int64), _v(val)], 0)


#: shared-memory bytes of one thread's K128 step in the weight ring (:class:`WeightRing`): the
#: :data:`WORDS_PER_STAGE` words in that order (16-byte aligned: the thread's slice is read as 9 x 16 B)
RING_THREAD_BYTES = 4 * WORDS_PER_STAGE
#: most weight-ring slots a role4 build gets (K128 steps in flight per thread)
MAX_RING_SLOTS = 4


class WeightRing:
    """Each consumer thread's own ``cp.async`` pipeline of K128 weight steps through ``slots`` shared-memory slots
    (``[slot][thread][RING_THREAD_BYTES]`` at ``base``): a thread copies and reads only its own fragments, so no
    barrier or mbarrier is involved, only its ``cp.async`` groups (one per step, committed even when empty so
    ``wait_group(slots - 1)`` always means "step i has landed"). ``slots - 1`` to ``slots`` steps are in flight per
    thread (one step of the register stream it replaces). Slot of a task's step i: ``i % slots``; a step's slot is
    refilled only after its MMAs were issued (their A registers hold the loaded words: the reads are done).

    ``prologue(kb0, kend)`` issues the task's first ``slots`` steps (a W2 task before it waits for its W1 tiles, so
    its weights stream meanwhile); ``words(i)`` waits for step i and reads it; ``refill(i, kb, kend)`` issues step
    ``kb`` into step i's slot. Steps at or past ``kend`` copy nothing (predicated off, their groups empty), so no
    copy is pending into a slot when the next task's prologue writes it."""

    def __init__(self, base, ctid, slots: int, wbases, sbases):
        self.base, self.ctid, self.slots, self.wbases, self.sbases = base, ctid, slots, wbases, sbases

    def _slot_addr(self, i):
        return self.base + (i % self.slots) * (256 * RING_THREAD_BYTES) + self.ctid * RING_THREAD_BYTES

    def _issue(self, dst, kb, kend):  # step kb's copies where kb < kend (predicated: nothing past the range)
        ok = Int32(kb < kend)
        for sl in range(2):
            for q in range(4):
                cp_async_16_if(dst + sl * 64 + 16 * q, self.wbases[sl] + Int64(kb) * CODE_TILE_BYTES + 16 * q, ok)
            cp_async_8_if(dst + 128 + sl * 8, self.sbases[sl] + Int64(kb) * SCALE_TILE_BYTES, ok)
        cp_async_commit()

    def prologue(self, kb0, kend):
        for j in range(self.slots):  # plain Python: unrolled at trace time
            self._issue(self._slot_addr(j), kb0 + j, kend)

    def words(self, i):
        cp_async_wait_group(self.slots - 1)
        a = self._slot_addr(i)
        w = []
        for u in range(WORDS_PER_STAGE // 4):
            w.extend(ld_shared_v4(a + 16 * u))
        return w

    def refill(self, i, kb, kend):
        self._issue(self._slot_addr(i), kb, kend)


def k128_mma_fp8(words, ascl, acc, act_smem, kl128, bm: int, lag: int, block_k128: bool = False):
    """One K128 step of one warpgroup: role2's ``_k128_mma`` with the A registers taken as they are (no FP4
    decode): K32 ``q`` uses code words ``[4q, 4q + 4)`` of slab 0 and ``[16 + 4q, 16 + 4q + 4)`` of slab 1, the
    scale words start at 32.

    ``words``: :data:`WORDS_PER_STAGE` Int32 (:meth:`WeightRing.words`); ``ascl[q]``: the token scales of the
    thread's BM/4 tokens for K32 ``q`` (``role2_gemm.TokenScales``); ``acc``: 2 x BM/2 FP32 (slab 0, slab 1).
    ``block_k128``: the weight scale is one per slab and K128 (the 1x128x128 recipe): chained per K128."""
    _k128_mma(words, ascl, acc, act_smem, kl128, bm, lag,
              a_regs=lambda q: words[q * 4:q * 4 + 4] + words[16 + q * 4:16 + q * 4 + 4], scale_word=32,
              block_k128=block_k128)
