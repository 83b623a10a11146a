"""CPU: the SASS of the shipped role2 / role4 cubins (gcmoe_build.sass, nvdisasm from the build extra): every MMA is
register-A QGMMA (FP8 operands, weights from registers: issue 5's SASS check); for the production shapes the parser
finds the two mainloops (W1, W2) of each kernel and no spill traffic inside them, and bounds the spills in the
producer's stage loop."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "results" / "operator" / "bundles"
PRODUCTION = ("glm-5.2", "deepseek-v4.1-flash")


def _role2_cubins(keep):
    """(bundle name, variant, cubin) of every role2 record of the production bundles whose variant ``keep`` accepts."""
    from gcmoe_runtime.artifacts.bundle import open_bundle

    for name in PRODUCTION:
        b = open_bundle(BUNDLES / f"{name}-sm90a.gcmoe")
        for r in b.records:
            if r.role == "role2" and keep(r.variant):
                yield name, r.variant, b.cubin(r.key)


@pytest.fixture(scope="module")
def summaries():
    from gcmoe_build.sass import summarize
    from gcmoe_runtime.artifacts.bundle import open_bundle

    from gcmoe_build.kernels.sm90.role2_ring_config import Role2RingConfig

    out = {}
    for name in ("test-tiny", "glm-5.2", "deepseek-v4.1-flash"):
        b = open_bundle(BUNDLES / f"{name}-sm90a.gcmoe")
        for r in b.records:
            if r.role in ("role2", "role4") and r.variant.get("ranks", 2) == 2:
                key = (name, r.role, r.variant["bm"], r.variant.get("threads"), r.variant.get("ctas_per_sm", 1))
                # QGMMAs per mainloop body, W1 and W2: 8 per K128 step (2 slabs x 4 K32); a role2 body holds
                # mma_steps_per_call steps (4 in the one-CTA lag-1 builds whose K chunk holds whole K512s); a build
                # with a narrow loop (Role2RingConfig.narrow_n: BM 48-80) has W1's twice, or with a shared loop
                # (Role2RingConfig.shared_loop) one per N serving both GEMMs
                bodies = [16, 16]
                if r.role == "role2":
                    c = Role2RingConfig(dict(r.variant))
                    bodies = [8 * c.w1.mma_steps_per_call] * (2 if c.narrow_n else 1) + [8 * c.w2.mma_steps_per_call]
                    if c.shared_loop:
                        bodies = [8 * c.w1.mma_steps_per_call] * 2
                out[key] = (summarize(b.cubin(r.key)), bodies)
    return out


def test_every_mma_is_register_a_qgmma_and_mainloops_do_not_spill(summaries):
    assert {k[1] for k in summaries} == {"role2", "role4"} and len(summaries) >= 10
    for key, (s, body) in summaries.items():
        # W1 (twice with a narrow copy) + W2, or the shared loops (the test model: its K unrolled, 2 K128 steps x 2
        # slabs x 4 K32 each)
        want = 16 * len(body) if key[0] == "test-tiny" else sum(body)
        assert s.qgmma == want and s.qgmma_register_a == want, key
        if key[0] != "test-tiny":  # production K: one loop per GEMM (W1's narrow copy too), no spill traffic in
            # it (the test model's K is 2-4 K128 steps: its K loops are unrolled into the task loop, which may spill)
            assert len(s.mma_loops) == len(body) and sorted(q for _, q in s.mma_loops) == sorted(body), key
            # two CTAs per SM cap the consumers at 104 registers: the BM 16 build spills one register around one
            # of its loops (1 STL + 1 LDL per K256 of ~600 instructions, since the W2 loop chains per K128 like
            # W1's, session 8); anything more is a regression
            assert s.spill_ops_in_mma_loops <= (2 if key[4] == 2 and key[2] == 16 else 0), key
            # the pipelined builds' loops stay on the uniform datapath: descriptors, stage indices and parities in
            # uniform registers, not moved there per QGMMA (sessions 35-36: 32 R2UR per K256 when ptxas thought the
            # loop divergent; session 39: the dynamic task claims' loop entry, a missing barrier or one producer
            # register too many did that to every build; the BM 80 build's wide W1 loop beside its narrow copy and
            # some BM 8 loops keep 1; the lag-1 BM 48 loops move 14 per K512, as they always did)
            if key[1] == "role2" and key[3] == 384:
                assert max(s.r2ur_in_mma_loops) <= (15 if key[2] == 48 else 1), (key, s.r2ur_in_mma_loops)
        # the producer's stage loop (pipelined role2): the two-CTA builds (32 producer registers with the signal
        # warp, session 13) spill 3 values around its empty-barrier wait, the one-CTA builds from BM 48 (24 producer
        # registers, session 35) 9, the others none; more is a regression
        if key[1] == "role2" and key[3] == 384:
            assert s.spill_ops_in_copy_loops <= (3 if key[4] == 2 else 9 if key[2] >= 48 else 0), key


def test_first_w1_weights_to_l2_only_in_the_one_gpu_small_bm_pipelined_builds():
    """role2_ring "First weights to L2": the P = 1 384-thread builds up to SM90_W1_PREFETCH_MAX_BM hold the prefetch
    warp's per-line ``prefetch.global.L2`` (CCTL.E.PF2: a loop over the lines of each of four slabs' codes and scales),
    every other build none; the checks above hold for the P = 2 builds, this one reads the P = 1 builds' loops too."""
    from gcmoe_build.sass import disassemble, parse, summarize
    from gcmoe_runtime.artifacts.bundle import open_bundle
    from gcmoe_runtime.heuristics import SM90_W1_PREFETCH_MAX_BM

    seen = set()
    for name in ("glm-5.2", "deepseek-v4.1-flash"):
        b = open_bundle(BUNDLES / f"{name}-sm90a.gcmoe")
        for r in b.records:
            v = r.variant
            if r.role != "role2" or v["bm"] > 16:
                continue
            cubin = b.cubin(r.key)
            insns, _ = parse(disassemble(cubin))
            on = v["threads"] == 384 and v["bm"] <= SM90_W1_PREFETCH_MAX_BM and v["ranks"] == 1
            assert sum(i.opcode + i.modifiers == "CCTL.E.PF2" for i in insns) == (8 if on else 0), (name, v)
            if on:  # its K loops stay on the uniform datapath, its stage loop as the P = 2 build's
                s = summarize(cubin)
                assert max(s.r2ur_in_mma_loops) <= 1 and s.spill_ops_in_mma_loops == 0, (name, v)
                assert s.spill_ops_in_copy_loops <= (3 if v["ctas_per_sm"] == 2 else 0), (name, v)
            seen.add(on)
    assert seen == {False, True}


def test_parser_on_a_handmade_listing():
    from gcmoe_build.sass import innermost_mma_loops, qgmma_register_a

    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   QGMMA.64x8x32.F32.E4M3.E4M3 R24, R88, gdesc[UR4], R24, gsb0 ;
        /*0020*/                   STL [R1], R0 ;
        /*0030*/               @P0 BRA `(.L_x_1) ;
        /*0040*/                   QGMMA.64x8x32.F32.E4M3.E4M3 R24, gdesc[UR4], gdesc[UR8], R24, gsb0 ;
"""
    loops = innermost_mma_loops(sass)
    assert len(loops) == 1 and loops[0].count("QGMMA") == 1 and loops[0].count("STL") == 1
    assert len(loops[0].insns) == 3
    assert qgmma_register_a(sass) == (2, 1)


def test_copy_loops_on_a_handmade_listing():
    """The producer's stage loop is the innermost backward branch around a bulk copy; a spill outside it (the
    task loop around it) does not count."""
    from gcmoe_build.sass import innermost_copy_loops

    sass = """
.L_x_1:
        /*0000*/                   LDL R2, [R1] ;
.L_x_2:
        /*0010*/                   STL [R1+0x4], R3 ;
        /*0020*/                   UBLKCP.S.G [UR4], [UR6], UR8, desc[UR10] ;
        /*0030*/              @!P0 BRA `(.L_x_2) ;
        /*0040*/               @P1 BRA `(.L_x_1) ;
"""
    loops = innermost_copy_loops(sass)
    assert len(loops) == 1 and loops[0].count("UBLKCP") == 1 and loops[0].count("STL", "LDL") == 1


def test_loop_spills_on_a_handmade_listing():
    """``loop_spills`` (``--loops``): every loop holding spills or QGMMAs, outermost first, counts including the inner
    loops'; a loop with neither is left out, and so is a spill outside every loop."""
    from gcmoe_build.sass import loop_spills

    sass = """
        /*0000*/                   STL [R1], R0 ;
.L_x_1:
        /*0010*/                   LDL R2, [R1] ;
.L_x_2:
        /*0020*/                   QGMMA.64x8x32.F32.E4M3.E4M3 R24, R88, gdesc[UR4], R24, gsb0 ;
        /*0030*/              @!P0 BRA `(.L_x_2) ;
        /*0040*/               @P1 BRA `(.L_x_1) ;
.L_x_3:
        /*0050*/                   IADD3 R4, R4, 0x1, RZ ;
        /*0060*/               @P2 BRA `(.L_x_3) ;
"""
    loops = loop_spills(sass)
    assert [(sp, q) for _, _, sp, q in loops] == [(1, 1), (0, 1)]
    assert loops[0][0] < loops[1][0] and loops[1][1] < loops[0][1]


#: ptxas lays the 384-thread two-CTA BM 8 ring build's K256 loops out in one of two ways: ~530-536 instructions per
#: 16 QGMMA, or ~570-576 (7 % more issue in a consumer-bound loop). Session 22's W2 split-K flipped DSV-4.1-Flash's
#: split build into the long one and lost +6.9 % at T = 1; GLM-5.2's P = 8 build has been in it since session 18.
SHORT_K_LOOP = 540


def test_two_cta_bm8_k_loops_keep_the_short_layout():
    """The P = 1 / 2 two-CTA BM 8 records of the production bundles (the T = 1-64 workhorse at P = 1, and the W1 split
    build) keep ptxas' short K-loop layout: a kernel change that flips it costs ~7 % of their consumers' issue."""
    from gcmoe_build.sass import summarize

    seen = 0
    for name, v, cubin in _role2_cubins(lambda v: v["bm"] == 8 and v.get("threads") == 384
                                        and v.get("ctas_per_sm") == 2 and v["ranks"] in (1, 2)):
        loops = summarize(cubin).mma_loops
        assert len(loops) == 2 and all(n <= SHORT_K_LOOP for n, _ in loops), (name, dict(v), loops)
        seen += 1
    assert seen == 5  # GLM-5.2 P = 1 (split-free + w1_split = 2), P = 2; DSV-4.1-Flash P = 1, P = 2


def test_load_rounds():
    """A sum that reads a load's register between two loads makes the later load wait for the earlier one."""
    from gcmoe_build.sass import load_rounds

    def sass(*body):
        return "\n".join(f"        /*{16 * n:04x}*/                   {line} ;" for n, line in enumerate(body))

    loads = ("@P2 LDG.E.128 R8, desc[UR36][R12.64+-0x780000]", "@P6 LDG.E.128 R16, desc[UR36][R12.64]",
             "@P5 LDG.E.128 R20, desc[UR36][R12.64+0x280000]")
    assert load_rounds(sass("CS2R R8, SRZ", *loads, "FADD R4, R8, R16")) == [1, 1, 1]
    assert load_rounds(sass(loads[0], "CS2R R16, SRZ", loads[1], "IMAD.U32 R15, R9, 0x10000, RZ", loads[2])) == \
        [1, 1, 2]
    assert load_rounds(sass("LDG.E R2, desc[UR36][R2.64]", "FADD R3, R2, R2")) == []  # other widths: not counted
    # a 32-bit load writes one register: R6 is not its result, R5 is
    narrow = ("LDG.E.STRONG.GPU R5, desc[UR36][R2.64]", "IADD3 R7, R6, 0x1, RZ",
              "LDG.E.STRONG.GPU R9, desc[UR36][R2.64+0x4]", "IADD3 R7, R5, 0x1, RZ",
              "LDG.E.STRONG.GPU R10, desc[UR36][R2.64]")
    assert load_rounds(sass(*narrow), modifiers=".E.STRONG.GPU") == [1, 1, 2]
    # several kinds in one run, each with its own width: the 32-bit load's R24 is read before the last 128-bit load
    mixed = (loads[0], "LDG.E R24, desc[UR36][R2.64]", "FADD R4, R3, R1", "ISETP.GE.AND P0, PT, R24, RZ, PT",
             loads[1])
    assert load_rounds(sass(*mixed), modifiers=(".E.128", ".E")) == [1, 1, 2]
    assert load_rounds(sass(*mixed)) == [1, 1]  # the 128-bit loads alone do not see the wait on R24


def test_control_words_on_a_handmade_listing():
    """The scheduling word's fields (gcmoe_build.sass.Control) on three lines nvdisasm -hex printed for a role2 cubin:
    a relaxed add sets write scoreboard 2 and the compare that reads its result waits for 2."""
    from gcmoe_build.sass import control_words, first_wait

    pad = " " * 94
    sass = f"""
        /*08f0*/                   ATOMG.E.ADD.STRONG.GPU PT, R4, desc[UR22][R4.64], R13 ;     /* 0x0000000d040479a8 */
        {pad}/* 0x010ea400081ee1d6 */
        /*0900*/                   ISETP.NE.U32.AND P0, PT, R4, RZ, PT ;     /* 0x000000ff0400720c */
        {pad}/* 0x004fc80003f05070 */
        /*0910*/                   SEL R9, RZ, 0x4, !P0 ;     /* 0x00000004ff097807 */
        {pad}/* 0x000fc80004000000 */
"""
    ctl = control_words(sass)
    assert [c.addr for c in ctl] == [0x8F0, 0x900, 0x910]
    assert (ctl[0].write, ctl[0].read, ctl[0].wait, ctl[0].stall) == (2, None, frozenset({4}), 2)
    assert (ctl[1].write, ctl[1].wait, ctl[1].stall) == (None, frozenset({2}), 4)
    assert ctl[2].wait == frozenset() and ctl[2].text == "SEL R9, RZ, 0x4, !P0 ;"
    assert first_wait(ctl, 0) == 1
    with pytest.raises(ValueError, match="no write scoreboard"):
        first_wait(ctl, 1)


def test_two_cta_builds_wait_for_the_late_start_count_only_after_the_first_barrier():
    """role2_ring "Placement", ``place_ctas`` = 2: of the placing thread's adds before the first barrier (class
    counts, then the start count in either mode) exactly one, the late start count, has its value first waited for
    after the barrier; the class counts and the acq_rel start count are waited for before it. Every two-CTA role2
    record of the production bundles (P = 1 and P = 8)."""
    from gcmoe_build.sass import control_words, disassemble, first_wait

    n = 0
    for name, v, cubin in _role2_cubins(lambda v: v.get("ctas_per_sm") == 2):
        ctl = control_words(disassemble(cubin, encodings=True))
        bar0 = next(k for k, c in enumerate(ctl) if c.text.startswith("BAR.SYNC"))
        adds = [k for k, c in enumerate(ctl[:bar0]) if c.text.startswith("ATOMG.E.ADD")]
        late = [k for k in adds if first_wait(ctl, k) > bar0]
        assert len(adds) == 4 and len(late) == 1, (name, v, [ctl[k].text for k in adds])
        n += 1
    assert n >= 4


def test_mma_loop_schedules_on_a_handmade_listing():
    """An MMA loop's static schedule (gcmoe_build.sass.mma_loop_schedules): the stall fields of its instructions
    summed, its instructions that wait for a scoreboard counted; code outside the loop and an mbarrier wait's slow
    path (after a successful first probe's forward branch, up to its target) left out."""
    from gcmoe_build.sass import mma_loop_schedules

    def line(addr, text, stall, wait=()):
        hi = (stall | 7 << 5 | 7 << 8 | sum(1 << b for b in wait) << 11) << 41
        return (f"        /*{addr:04x}*/                   {text} ;     /* 0x0000000000000000 */\n"
                f"        {' ' * 94}/* 0x{hi:016x} */\n")

    sass = (line(0x0, "MOV R1, R2", 3) + ".L_x_1:\n" + line(0x10, "LDS.64 R4, [R6]", 1)
            + line(0x20, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR24], R2", 1)
            + line(0x30, "@P0 BRA `(.L_x_2)", 5)  # the first probe succeeded: past the slow path
            + line(0x40, "NANOSLEEP 0x40", 9) + line(0x50, "ST.E.STRONG.SYS desc[UR22][R12.64+0x4], R11", 6)
            + line(0x60, "BPT.TRAP 0x1", 5) + ".L_x_2:\n"
            + line(0x70, "QGMMA.64x8x32.F32.E4M3.E4M3 R8, R4, gdesc[UR4], R8, gsb0", 2, wait=(0,))
            + line(0x80, "FFMA R9, R9, R10, R11", 4, wait=(1, 2))
            + line(0x90, "@P0 BRA `(.L_x_1)", 5) + line(0xA0, "EXIT", 5))
    (ls,) = mma_loop_schedules(sass)
    assert (ls.instructions, ls.qgmma, ls.stall_cycles, ls.waits, ls.slow_path) == (6, 1, 1 + 1 + 5 + 2 + 4 + 5, 2, 3)


def test_mma_loop_schedules_leave_out_the_stage_waits_slow_paths():
    """In the shipped pipelined role2 builds every MMA loop holds its stage waits' slow paths (ring_sync.mbar_wait_rt:
    retries, timeout check, trap record); the first-probe path leaves them out and keeps every QGMMA."""
    from gcmoe_build.sass import disassemble, innermost_mma_loops, mma_loop_schedules

    _, _, cubin = next(_role2_cubins(lambda v: v.get("threads") == 384 and v["bm"] == 8 and v.get("ctas_per_sm") == 2
                                     and v["ranks"] == 1 and v.get("w1_split", 1) == 1))
    loops = innermost_mma_loops(disassemble(cubin))
    sched = mma_loop_schedules(disassemble(cubin, encodings=True))
    assert len(sched) == len(loops) == 2
    for lp, ls in zip(loops, sched):
        assert ls.qgmma == lp.count("QGMMA") == 16 and ls.instructions + ls.slow_path == len(lp.insns)
        assert 20 <= ls.slow_path <= 100 and ls.instructions < 480 and ls.stall_cycles > ls.instructions


def test_schedule_ab_pairs_records_across_bundles(capsys):
    """``schedule_ab`` / ``--against``: a bundle against itself pairs every record with its own (zero change); the
    pairing ignores the named parameter, so a K-order ablation bundle pairs with the plain one."""
    from types import SimpleNamespace as NS

    from gcmoe_build.sass import main, schedule_ab
    from gcmoe_runtime.artifacts.bundle import open_bundle

    path = BUNDLES / "rank-share-deepseek-v4.1-flash-p8-sm90a.gcmoe"
    b = open_bundle(path)
    rows = schedule_ab(b, b, where={"bm": "16"})
    assert rows and all(len(x) == len(y) > 0 and [s.instructions for s in x] == [s.instructions for s in y]
                        for _, x, y in rows)
    # a record whose partner differs only in an ignored parameter is still paired (a stub bundle: no cubins needed
    # for the pairing itself, so none of its records is disassembled unless paired)
    rec = next(r for r in b.records if r.role == "role2" and r.variant["bm"] == 16)
    plain = {k: v for k, v in rec.variant.items() if k != "k_interleave"}  # the shipped ones are interleaved
    assert rec.variant["k_interleave"] == 1
    other = NS(records=[NS(role="role2", variant=plain, key=rec.key)], cubin=b.cubin)
    assert len(schedule_ab(b, other, where={"bm": "16"})) == 1
    assert schedule_ab(b, other, where={"bm": "16"}, ignore=()) == []
    assert main([str(path), "--where", "bm=16", "--against", str(path)]) == 0
    assert "(+0)" in capsys.readouterr().out


def test_issue_bound_counts_both_warpgroups_bytes():
    """gcmoe_build.sass.issue_bound: a K256 iteration (16 QGMMA per warpgroup) streams 34 816 bytes per CTA (2
    warpgroups; 4 slabs x 2 K128 stages of 4 096 code + 256 scale bytes, role2_config.SLAB_STAGE_BYTES), each warp on a
    scheduler issuing its own iteration. BM 64's 476-instruction loop (one CTA) is then ~192 % of 4.4 TB/s at 1.75
    GHz, the two-CTA BM 8 loop of 445 ~205 % (session 53; sessions 49-51 wrote half of each)."""
    from gcmoe_build.sass import ROLE2_BYTES_PER_QGMMA, LoopSchedule, issue_bound

    assert 2 * 16 * ROLE2_BYTES_PER_QGMMA == 2 * 4 * (4096 + 256)
    assert issue_bound(LoopSchedule(476, 16, 771, 27)) == pytest.approx(1.92, abs=0.01)
    assert issue_bound(LoopSchedule(445, 16, 747, 20)) == pytest.approx(2.05, abs=0.01)
    # a K512 loop (BM 48's, 32 QGMMA) at twice the instructions has the same bound
    assert issue_bound(LoopSchedule(952, 32, 1500, 50)) == pytest.approx(issue_bound(LoopSchedule(476, 16, 0, 0)))


def test_setmaxnreg_regions():
    """Each ``USETMAXREG`` starts a region that runs to the next one: its cap and the highest register named there."""
    from gcmoe_build.sass import setmaxnreg_regions

    text = "\n".join([
        "        /*0000*/                   MOV R1, c[0x0][0x28] ;",
        "        /*0320*/                   USETMAXREG.DEALLOC.CTAPOOL 0x20 ;",
        "        /*0330*/                   IMAD R13, R2, R3, RZ ;",
        "        /*10d0*/                   USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xc8 ;",
        "        /*10e0*/                   FFMA R197, R1, R2, R3 ;",
        "        /*10f0*/                   EXIT ;"])
    assert setmaxnreg_regions(text) == [(32, 13), (200, 197)]
    assert setmaxnreg_regions("        /*0000*/                   EXIT ;") == []
