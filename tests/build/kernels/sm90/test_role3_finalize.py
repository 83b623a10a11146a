"""CPU: role3 (SM90 finalize) compiles through the full chain for P = 1/2 with and without a shared slot; the
PTX shows the readiness release/acquire at system scope for P = 2 and none at P = 1 (the graph edge role2 ->
role3 is the readiness there; no system-scope operation but the trap record's), the ballot of valid slots, the predicated 16-byte
partial loads (one per combine slot), BF16x2 packing and the trap; bad params are refused by name.

The combine half's store path (issue 6 item 2): every role3 variant of the three shipped manifests compiles,
writes its BF16 chunk to warp-private shared memory (``st.shared.v4``), fences it to the async proxy, syncs the
warp and leaves with one ``cp.async.bulk.global.shared::cta.bulk_group`` + ``commit_group`` (no ``st.global.v4``
left), waits ``wait_group.read NBUF-1`` before reusing a buffer and ``wait_group 0`` before exit; its dynamic
shared memory is ``8 x NBUF x 2 H`` bytes within the 227 KiB limit and ptxas reports no spills (the GPU side: the
layer accuracy suites). Session 43: the chunks per token (as many as the combine warps can each take one of) and, in
SASS, every slot's load of a unit in one latency round."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from gcmoe_build.variants import Variant
from tests.build.kernels.sm90.ptx_checks import assert_only_printf_locals

ROOT = Path(__file__).resolve().parents[4]
MANIFESTS = ("test-tiny", "glm-5.2", "deepseek-v4.1-flash")
BASE = dict(hidden=512, experts=16, top_k=4, capacity=256, dispatch_sms=4, compute_sms=128)
BULK = "cp.async.bulk.global.shared::cta.bulk_group"


@pytest.fixture(scope="module", params=[(1, 1), (2, 0)])
def art(request):
    from gcmoe_build.compile import compile_variant

    ranks, shared = request.param
    return compile_variant(Variant("role3", "sm_90a", {**BASE, "ranks": ranks, "shared_experts": shared}))


@pytest.fixture(scope="module")
def shipped_arts():
    """Every role3 variant of the three shipped manifests (16; under 2 s each), keyed (manifest, (P, shared))."""
    from gcmoe_build.compile import compile_variant
    from gcmoe_build.manifest import load_manifest
    from gcmoe_build.variants import enumerate_variants

    arts = {}
    for m in MANIFESTS:
        for v in enumerate_variants(load_manifest(ROOT / "manifests" / f"{m}.yaml")):
            if v.role == "role3":
                arts[(m, (v.params["ranks"], v.params["shared_experts"]))] = compile_variant(v)
    return arts


def _ptxas_info(ptx: str) -> dict:
    """``ptxas -v`` (the locked assembler and options, plus -v) resource usage of the one entry."""
    from gcmoe_build.toolchain.ptxas import effective_options, locate_ptxas

    opts = effective_options("sm_90a")
    proc = subprocess.run([locate_ptxas().path, *opts, "-v", "-o", "/dev/null", "-"], input=ptx,
                          capture_output=True, text=True, check=True)
    log = proc.stdout + proc.stderr
    regs = re.search(r"Used (\d+) registers", log)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert regs and spills, log
    return {"registers": int(regs.group(1)), "spill_stores": int(spills.group(1)),
            "spill_loads": int(spills.group(2)), "log": log}


def test_protocol_instructions(art):
    ptx = art.ptx
    for op in ("vote.sync.ballot.b32", "cvt.rn.bf16x2.f32", "bar.sync 1, 128", "trap;"):
        assert op in ptx, op
    readiness = ("st.release.sys.global.u64", "ld.acquire.sys.global.u32", "ld.relaxed.sys.global.u64")
    if art.record.variant["ranks"] > 1:
        for op in readiness:
            assert op in ptx, op
        assert ptx.count("fence.sc.sys;") == 5  # the readiness fence + two trap records' two (arrival, readiness)
    else:  # P = 1: no readiness handshake; the receive counts read at GPU scope
        assert "ld.relaxed.gpu.global.u64" in ptx
        for op in readiness:
            assert op not in ptx, op
        assert ptx.count("fence.sc.sys;") == 2  # the arrival check's trap record, nothing else
    slots = 4 + art.record.variant["shared_experts"]
    # one load per combine slot, not predicated on the ballot of the token's expert indices (session 44)
    assert ptx.count("ld.global.v4.u32") == slots and "@p ld.global.v4.u32" not in ptx
    assert_only_printf_locals(ptx)


def test_combine_ballot_after_the_slot_loads(art):
    """PTX order in the combine half: every slot's load, the token's expert-index load, the warp sync, then the
    ballot that masks invalid slots — the slot loads do not wait for the indices (one round, session 44; loaded
    first, ptxas hoisted their validity test above the slot loads)."""
    ptx = art.ptx
    loads = [m.start() for m in re.finditer(re.escape("ld.global.v4.u32"), ptx)]
    topk = ptx.index("@p ld.global.s32")
    vote = ptx.index("vote.sync.ballot.b32")
    assert loads[-1] < topk < ptx.index("bar.warp.sync", topk) < vote


def test_bookkeeping_counts_in_one_round(art):
    """The bookkeeping half issues the parity load and both parities' receive-count loads before any use of them:
    no count load comes after a branch (the arrival check) or a store (session 44: one latency round)."""
    ptx = art.ptx
    first_book = ptx.index("ld.relaxed.")  # the parity word (the tag-1 phase load is compiled out at P = 1)
    cells = [m.start() for m in re.finditer(r"ld\.relaxed\.\w+\.global\.u64", ptx)]
    p, e = art.record.variant["ranks"], art.record.variant["experts"]
    assert len(cells) == 2 * p * -(-(e // p) // 128)
    between = ptx[first_book:cells[-1]]
    assert "st.global" not in between and "trap;" not in between


def test_schema_and_launch(art):
    from gcmoe_build.kernels.sm90.role3_finalize import Role3Config

    rec = art.record
    names = [p.name for p in rec.params]
    assert names[0] == "peer" and "y" in names and names[-3:] == ["ntok", "ring_blocks", "stats"]
    assert rec.launch.grid == "finalize_sms" and rec.launch.block == (384, 1, 1)
    assert rec.launch.dynamic_smem == Role3Config(rec.variant).smem_bytes == 8 * 2 * 2 * 512


def _combine_sequence(ptx: str) -> list[str]:
    """The store-path instructions of the combine half, in PTX order."""
    ops = ("cp.async.bulk.wait_group.read", "st.shared.v4.u32", "fence.proxy.async.shared::cta", "bar.warp.sync",
           BULK, "cp.async.bulk.commit_group", "cp.async.bulk.wait_group 0")
    seq = []
    for line in ptx.splitlines():
        s = line.strip()
        for op in ops:
            if s.startswith(op):
                seq.append(op)
                break
    return seq


def test_shipped_variants_bulk_store_path(shipped_arts):
    from gcmoe_build.kernels.sm90.role3_finalize import SMEM_LIMIT, Role3Config

    assert len(shipped_arts) == 16 and {m for m, _ in shipped_arts} == set(MANIFESTS)
    for (m, key), a in shipped_arts.items():
        rec, ptx = a.record, a.ptx
        cfg = Role3Config(rec.variant)
        assert a.cubin[:4] == b"\x7fELF"
        assert "st.global.v4" not in ptx, (m, key)  # y leaves through the bulk copy only
        assert re.search(r"^\.extern \.shared \.align (128|256|512|1024) \.b8 __dynamic_shmem__0\[\];$", ptx, re.M)
        assert ptx.count(BULK) == 1 and ptx.count("cp.async.bulk.commit_group") == 1
        assert re.search(rf"^\s*{re.escape(BULK)} \[%rd\d+\], \[%r\d+\], %r\d+;$", ptx, re.M)  # run-time size
        assert ptx.count(f"cp.async.bulk.wait_group.read {cfg.nbuf - 1};") == 1
        assert ptx.count("cp.async.bulk.wait_group 0;") == 1
        # per item: buffer free -> warp sync -> (per unit: the slots' loads -> warp sync -> shared store) ->
        # fence -> warp sync -> bulk copy + commit; the full wait after the item loop
        seq = _combine_sequence(ptx)
        i = seq.index("cp.async.bulk.wait_group.read")
        assert seq[i:] == ["cp.async.bulk.wait_group.read", "bar.warp.sync", "bar.warp.sync", "st.shared.v4.u32",
                           "fence.proxy.async.shared::cta", "bar.warp.sync", BULK, "cp.async.bulk.commit_group",
                           "cp.async.bulk.wait_group 0"], (m, key, seq)
        assert rec.launch.dynamic_smem == cfg.smem_bytes == 8 * cfg.nbuf * 2 * cfg.hidden <= SMEM_LIMIT
        assert cfg.nbuf == 2  # every shipped H (512, 5120, 6144) is double-buffered
        assert rec.extra["kernel"]["nbuf"] == cfg.nbuf
        assert_only_printf_locals(ptx)


def test_shipped_variants_ptxas_resources(shipped_arts):
    """384 threads, one CTA per SM: <= 168 registers a thread and no spills (the 72-byte stack frame is the
    timeout printf's argument buffer, as before). One exception since session 44: at P > 1 ptxas may keep one
    4-byte value (GLM-5.2 P = 2: the combine's item-loop bound) on the stack across the readiness wait's printf
    call (the call ABI, not register pressure: ~56 registers) and refill it once per work item (an L1 hit)."""
    for (m, (ranks, shared)), a in shipped_arts.items():
        info = _ptxas_info(a.ptx)
        allowed = 0 if ranks == 1 else 4
        assert info["spill_stores"] <= allowed and info["spill_loads"] <= allowed, (m, ranks, shared, info["log"])
        assert info["registers"] <= 168, (m, ranks, shared, info["log"])


def test_smem_plan():
    from gcmoe_build.kernels.sm90.role_common import SMEM_LIMIT as ROLE2_LIMIT
    from gcmoe_build.kernels.sm90.role3_finalize import SMEM_LIMIT, Role3Config

    assert SMEM_LIMIT == ROLE2_LIMIT == 227 * 1024

    def cfg(h):
        return Role3Config({**BASE, "ranks": 1, "shared_experts": 0, "hidden": h})

    expect = {512: (2, 16384), 5120: (2, 163840), 6144: (2, 196608), 7168: (2, 229376),  # 7168: the brief's max
              7424: (1, 118784), 14336: (1, 229376)}
    for h, (nbuf, smem) in expect.items():
        c = cfg(h)
        assert (c.nbuf, c.smem_bytes) == (nbuf, smem), h
        assert c.smem_bytes <= SMEM_LIMIT
    with pytest.raises(ValueError, match="shared-memory limit"):
        cfg(14592)


@pytest.mark.parametrize("bad,needle", [({"hidden": 384}, "multiple of 256"), ({"top_k": 32}, "k \\+ 1"),
                                        ({"shared_experts": -1}, "shared_experts")])
def test_bad_params(bad, needle):
    from gcmoe_build.kernels.sm90.role3_finalize import Role3Config

    with pytest.raises(ValueError, match=needle):
        Role3Config({**BASE, "ranks": 1, "shared_experts": 0, **bad})


def test_chunks_per_token():
    """The combine half cuts each token's row into as many chunks as give every work item its own warp (session
    43): the divisors of H / 256, so a chunk stays a multiple of 32 lanes x 8 BF16."""
    from gcmoe_build.kernels.sm90.role3_finalize import COMBINE_WARPS, chunk_options, chunks_per_token

    assert chunk_options(512) == (1, 2)
    assert chunk_options(5120) == (1, 2, 4, 5, 10, 20)
    assert chunk_options(6144) == (1, 2, 3, 4, 6, 8, 12, 24)
    warps = 64 * COMBINE_WARPS  # finalize_sms = 64 at T <= 128
    assert [chunks_per_token(t, warps, 6144) for t in (1, 2, 16, 21, 22, 64, 128, 256, 600)] == \
        [24, 24, 24, 24, 12, 8, 4, 2, 1]
    assert [chunks_per_token(t, warps, 5120) for t in (1, 25, 26, 64, 128)] == [20, 20, 10, 5, 4]
    for h in (512, 5120, 6144):
        for t in range(1, 300):
            d = chunks_per_token(t, warps, h)
            assert (h // d) % 256 == 0 and (t * d <= warps or d == 1)
            assert all(t * e > warps for e in chunk_options(h) if e > d)  # the most that fits


def test_chunk_choice_in_ptx(shipped_arts):
    """Each shipped H's candidate chunk counts are compared against the warps in the PTX (ntok x d), the
    largest last."""
    from gcmoe_build.kernels.sm90.role3_finalize import chunk_options

    for (m, key), a in shipped_arts.items():
        h = a.record.variant["hidden"]
        for d in chunk_options(h)[1:]:  # a power of two as a shift
            op = rf"shl\.b32\s+%r\d+, %r\d+, {d.bit_length() - 1};" if d & (d - 1) == 0 else \
                rf"mul\.lo\.s32\s+%r\d+, %r\d+, {d};"
            assert re.search(op, a.ptx), (m, key, d)


def test_combine_loads_in_one_round(shipped_arts):
    """SASS: every slot's 16-byte load of a combine unit issues before any instruction waits on one of them (one
    latency round per unit; session 43 found ptxas interleaving sums with the loads: 2-3 rounds, role3 +30 %)."""
    from gcmoe_build.sass import disassemble, load_rounds

    for (m, key), a in shipped_arts.items():
        slots = a.record.variant["top_k"] + (1 if a.record.variant["shared_experts"] else 0)
        sass = disassemble(a.cubin)
        assert load_rounds(sass) == [1] * slots, (m, key)
        # session 44: the token's expert-index load (32-bit) in the same round as the slot loads, wherever ptxas
        # puts it among them
        assert load_rounds(sass, modifiers=(".E.128", ".E")) == [1] * (slots + 1), (m, key)


def test_bookkeeping_loads_in_one_round(shipped_arts):
    """SASS at P = 1: the parity word and both parities' receive counts of every expert a bookkeeping thread owns
    are in flight together (session 44; before, the counts' addresses waited for the parity and each expert's
    arrival check for its counts)."""
    from gcmoe_build.sass import disassemble, load_rounds

    for (m, (ranks, shared)), a in shipped_arts.items():
        if ranks > 1:
            continue
        per_thread = -(-a.record.variant["experts"] // 128)
        got = load_rounds(disassemble(a.cubin), modifiers=(".E.STRONG.GPU", ".E.64.STRONG.GPU"))
        assert got == [1] * (1 + 2 * per_thread), (m, ranks, shared)
