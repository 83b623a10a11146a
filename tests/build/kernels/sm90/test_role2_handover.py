"""CPU: the role2 epilogue warpgroup (``Role2GemmConfig.epilogue_warpgroup``,
:mod:`gcmoe_build.kernels.sm90.role2_handover`): the W1 hand-over's word map against the consumers' own epilogue's
element map, the configuration's rules (threads, registers, shared memory, refusals), and the dev builds' SASS and
PTX (four warpgroups' ``setmaxnreg``, the hand-over's mbarriers and the epilogue warpgroup's barrier, register-A
QGMMAs, no spill in an MMA loop). Their GPU check is ``test_role2_gpu.py`` (bit-identical to the forms without it)."""
from __future__ import annotations

import re

import pytest

from gcmoe_build.kernels.sm90.role2_config import (CONSUMER_REGS_EPI, CONSUMER_THREADS, EPILOGUE_BAR, EPILOGUE_REGS,
                                                   EPILOGUE_THREADS, HANDOVER_FIELDS, PRODUCER_REGS_EPI,
                                                   PRODUCER_THREADS, Role2GemmConfig)
from gcmoe_build.kernels.sm90 import role2_math
from gcmoe_build.kernels.sm90.role2_epilogue import W1_STAGE_STRIDE
from gcmoe_build.kernels.sm90.role2_handover import handover_layout, w1_packed_stage_offset, w1_word_map
from gcmoe_runtime.numerics.sm90_layout import k128_epilogue_position

SHAPES = {"glm52": (6144, 2048), "dsv41flash": (5120, 2304)}


def _cfg(mode="w1", shape="glm52", bm=64, sfx="_ppksafwre", **kw):
    """A dev form's configuration (``role2_devbuild.ACT2_EXPERIMENTS[sfx]``, ``kw`` on top)."""
    from gcmoe_build.kernels.sm90.role2_devbuild import ACT2_EXPERIMENTS

    h, i = SHAPES[shape]
    k, rows = (h, 2 * i) if mode == "w1" else (i, h)
    return Role2GemmConfig(mode=mode, k=k, rows=rows, bm=bm, pipelined=True, **{**ACT2_EXPERIMENTS[sfx], **kw})


@pytest.mark.parametrize("bm", [32, 64])
def test_w1_word_map_covers_the_consumer_epilogue(bm):
    """Every accumulator element of a consumer thread lands in exactly one hand-over word half, and the epilogue
    warpgroup reads it as what ``_w1_epilogue`` makes of it: a gate for token ``8 (i >> 2) + 2t + (i & 1)`` of slab
    ``slab``, whose up value is element ``i + 2``."""
    nd = bm // 2
    seen = {}
    for q, slab, pairs in w1_word_map(bm):
        for r_gate, r_up, m in pairs:
            for b in (0, 1):  # low / high half of the word
                gate_elem = 8 * q + 2 * r_gate + b
                up_elem = 8 * q + 2 * r_up + b
                for elem, role in ((gate_elem, "gate"), (up_elem, "up")):
                    assert elem not in seen, (bm, elem)
                    seen[elem] = (role, slab, m, b)
    assert sorted(seen) == list(range(2 * nd))
    for elem, (role, slab, m, b) in seen.items():
        assert slab == elem // nd
        i = elem % nd
        if role == "gate":
            assert (i >> 1) & 1 == 0 and (i >> 2, i & 1) == (m, b), (elem, role, slab, m, b)
            assert seen[elem + 2] == ("up", slab, m, b)  # the consumers' up value of this gate
        else:
            assert (i >> 1) & 1 == 1 and ((i - 2) >> 2, i & 1) == (m, b), (elem, role, slab, m, b)


def _prmt_model(a, b, selector):
    """``prmt.b32``'s default mode: result byte ``k`` is byte ``(selector >> 4k) & 7`` of ``b:a``."""
    src = [(a >> (8 * i)) & 0xFF for i in range(4)] + [(b >> (8 * i)) & 0xFF for i in range(4)]
    return sum(src[(selector >> (4 * k)) & 7] << (8 * k) for k in range(4))


def _byte(word, j):
    return (word >> (8 * j)) & 0xFF


def test_transpose_bytes_4x4(monkeypatch):
    """The PRMT selectors of ``transpose_bytes_4x4``: byte ``j`` of word ``i`` becomes byte ``i`` of word ``j``."""
    monkeypatch.setattr(role2_math, "_prmt", _prmt_model)
    words = [0x03020100 + 0x04040404 * i for i in range(4)]  # byte j of word i = 4i + j
    out = role2_math.transpose_bytes_4x4(words)
    want = [[4 * i + j for i in range(4)] for j in range(4)]  # result j's bytes: byte j of each word i
    assert [[_byte(out[j], i) for i in range(4)] for j in range(4)] == want


def test_w1_packed_staging_lands_in_the_interleaved_order(monkeypatch):
    """A token's four bytes staged as one word (:func:`w1_packed_stage_offset`, byte ``s``: the thread's column
    ``s``), then each 16-byte unit transposed on its way out (``w1_store_rows(..., transposed=True)``), put every
    byte at ``k128_epilogue_position(s, warp, g)`` — all 128 positions of a row once — and a warp's 32 words of one
    token step (lanes ``g``, ``t``: tokens ``8m + 2t + b``) fall on 32 different banks."""
    monkeypatch.setattr(role2_math, "_prmt", _prmt_model)
    row = {}  # staged byte offset -> (warp, g, s)
    for warp in range(4):
        for g in range(8):
            off = w1_packed_stage_offset(warp, g)
            assert off % 4 == 0
            for s in range(4):
                assert off + s not in row
                row[off + s] = (warp, g, s)
    assert sorted(row) == list(range(128))
    for unit in range(8):  # what leaves: the transposed unit, word by word
        staged = [sum(hash(row[16 * unit + 4 * j + s]) % 251 << (8 * s) for s in range(4)) for j in range(4)]
        out = role2_math.transpose_bytes_4x4(staged)
        for j in range(4):
            for s in range(4):
                warp, g, col = row[16 * unit + 4 * j + s]
                assert k128_epilogue_position(col, warp, g) == 16 * unit + 4 * s + j
                assert _byte(out[s], j) == hash(row[16 * unit + 4 * j + s]) % 251
    for warp in range(4):
        for m in range(8):
            for b in range(2):
                banks = {(((8 * m + 2 * t + b) * W1_STAGE_STRIDE + w1_packed_stage_offset(warp, g)) // 4) % 32
                         for g in range(8) for t in range(4)}
                assert len(banks) == 32, (warp, m, b)


def test_config_of_the_epilogue_warpgroup():
    """512 threads; the four warpgroups' registers fill the launch allocation exactly; the hand-over area (BF16 pairs =
    W2's staging, two mbarriers, the task's fields) after the chunk buffers' mbarriers, inside the misc area; BM 64 at
    the GLM-5.2 shape keeps 7 weight stages (8 without it); refused outside its rules, by name."""
    cfg, base = _cfg(), _cfg(sfx="_ppksafwr")
    assert cfg.threads == PRODUCER_THREADS + CONSUMER_THREADS + EPILOGUE_THREADS == 512
    prod, cons = cfg.setmaxnreg
    assert PRODUCER_THREADS * prod + CONSUMER_THREADS * cons + EPILOGUE_THREADS * cfg.epilogue_regs == 512 * 128
    assert cfg.launch_regs == 128 and base.epilogue_regs == 0 and base.handover_bytes == 0
    assert cfg.handover_bytes == CONSUMER_THREADS * 64 * 2 + 16 + 4 * HANDOVER_FIELDS
    lay = handover_layout(cfg.handover_off, cfg.bm)
    assert cfg.handover_off % 16 == 0 and lay["full"] % 8 == 0
    assert lay["info"] + 4 * HANDOVER_FIELDS == cfg.handover_off + cfg.handover_bytes <= cfg.misc_bytes
    assert lay["data"] >= cfg.misc_bytes - cfg.handover_bytes - cfg.stash_bytes
    assert (cfg.stages, base.stages) == (7, 8) and cfg.smem_bytes <= 232448
    for bad in (dict(signal_warp=True), dict(slab_passes=2), dict(bm=48), dict(bm=16), dict(ctas_per_sm=2)):
        with pytest.raises(ValueError, match="role2 epilogue_warpgroup"):
            _cfg(**bad)


@pytest.fixture(scope="module")
def built():
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_devbuild import compile_one

    return {mode: compile_one(f"role2_{mode}_glm52_bm64_ppksafwre", _cfg(mode)) for mode in ("w1", "w2")}


@pytest.mark.parametrize("mode", ["w1", "w2"])
def test_epilogue_warpgroup_build(built, mode):
    """The BM 64 build: 512 threads (``.reqntid``), ``setmaxnreg`` 24 (producer, dec) / 216 (consumers, inc) / 56
    (epilogue, dec), the hand-over's mbarriers (256 and 128 arrivals), the epilogue warpgroup's 128-thread barrier,
    W1's mask-bit release; register-A QGMMAs only and no spill in an MMA loop (SASS)."""
    from gcmoe_build import sass

    ptx, cubin, _ = built[mode]
    assert ".reqntid 512, 1, 1" in ptx
    regs = {(m.group(1), int(m.group(2)))
            for m in re.finditer(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 (\d+);", ptx)}
    assert regs == {("dec", PRODUCER_REGS_EPI), ("inc", CONSUMER_REGS_EPI), ("dec", EPILOGUE_REGS)}, regs
    inits = {int(m.group(1)) for m in re.finditer(r"mbarrier\.init\.shared::cta\.b64 \[[^]]+\], (\d+);", ptx)}
    assert {CONSUMER_THREADS, EPILOGUE_THREADS} <= inits, inits
    assert f"bar.sync {EPILOGUE_BAR}, {EPILOGUE_THREADS};" in ptx
    assert ("red.release.gpu.global.or.b64" in ptx) == (mode == "w1")
    if mode == "w1":  # each of a thread's bm values computed once; the interleaved order's bytes staged as words
        assert ptx.count("ex2.approx") == 64
        assert "st.shared.u8" not in ptx
    summary = sass.summarize(cubin)
    assert summary.qgmma == summary.qgmma_register_a > 0
    assert summary.spill_ops_in_mma_loops == 0
    # ptxas keeps each warpgroup's code inside its setmaxnreg cap: the code laid out after each USETMAXREG (the
    # producer's, the epilogue warpgroup's, the consumers') names no register at or above it
    regions = sass.setmaxnreg_regions(sass.disassemble(cubin))
    assert sorted(cap for cap, _ in regions) == sorted((PRODUCER_REGS_EPI, CONSUMER_REGS_EPI, EPILOGUE_REGS))
    assert all(used < cap for cap, used in regions), regions
