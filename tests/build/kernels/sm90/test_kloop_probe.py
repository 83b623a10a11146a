"""The K-loop probe (gcmoe_build.kernels.sm90.kloop_probe, a dev measurement kernel, never bundled): each form builds
with its warpgroups, register split and MMA count, without local memory (CPU); the bench's reference sums are the
weights' (CPU); on a GPU, with cubins from ``python -m gcmoe_build.kernels.sm90.kloop_probe DIR``
(``GCMOE_KLOOP_CUBINS``), every form's output matches the weights and the forms match each other."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: form -> (threads, producer / consumer registers, register-A wgmmas per K loop iteration: 2 K128 steps x 4 K32 x
#: the warpgroup's slabs, named-barrier syncs + arrives in the PTX)
EXPECT = {"wg2": (384, (24, 240), 16), "wg4": (640, (24, 112), 8), "wg4n": (640, (24, 112), 8),
          "wg2x": (384, (24, 240), 16), "wg2p": (384, (24, 240), 16), "wg2xp": (384, (24, 240), 16),
          "wg2c": (384, (24, 240), 16), "wg4c": (640, (24, 112), 8), "wg2b2": (384, (24, 240), 16),
          "wg2b8": (384, (24, 240), 16), "wg2b16": (384, (24, 240), 16), "wg2b32": (384, (24, 240), 16),
          "wg2s": (384, (24, 240), 16), "wg2cs": (384, (24, 240), 16), "wg2b2s": (384, (24, 240), 16),
          "wg2b8s": (384, (24, 240), 16), "wg2ce": (384, (24, 240), 16), "wg2ce6": (384, (24, 200), 16),
          "wg2cw": (512, (24, 200), 16), "wg2ne": (384, (24, 240), 16), "wg2nt": (384, (24, 240), 16),
          "wg2cw4": (512, (24, 200), 16), "wg2ce4": (384, (24, 200), 16), "wg2ct": (384, (24, 240), 16),
          "wg2cm": (384, (24, 240), 16), "wg2ctq": (384, (24, 240), 16), "wg2cmq": (384, (24, 240), 16),
          "wg2ca": (384, (24, 240), 16), "wg2ct1": (384, (24, 240), 16), "wg2cwh": (512, (24, 200), 16),
          "wg2ce7": (384, (24, 200), 16), "wg2ctw": (384, (24, 240), 16), "wg2cts": (384, (24, 240), 16),
          "wg2ctc": (384, (24, 240), 16), "wg2ctb": (384, (24, 240), 16),
          "wg2ctb4": (384, (24, 240), 16)}
#: what the timing-only forms leave out, in the SASS of their K loop: (PRMT, FFMA) there
LEFT_OUT = {"wg2": (72, 128), "wg2x": (0, 128), "wg2p": (72, 0), "wg2xp": (0, 0)}


@pytest.fixture(scope="module")
def built():
    from gcmoe_build.frontend.dsl import import_dsl, trace_to_ptx

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.kloop_probe import build_probe, trace_args
    from gcmoe_build.toolchain.ptxas import assemble, effective_options

    out = {}
    for form in EXPECT:
        host, kern = build_probe(form)
        ptx = trace_to_ptx(host, kern, trace_args(), f"kloop_probe_{form}", "sm_90a").ptx
        out[form] = (ptx, assemble(ptx, effective_options("sm_90a", []), what=form))
    return out


@pytest.mark.parametrize("form", sorted(EXPECT))
def test_probe_forms_build_as_described(built, form):
    ptx, cubin = built[form]
    threads, (prod, cons), wgmmas = EXPECT[form]
    assert cubin[:4] == b"\x7fELF"
    assert f".reqntid {threads}, 1, 1" in ptx and ".minnctapersm 1" in ptx
    assert f"setmaxnreg.dec.sync.aligned.u32 {prod};" in ptx and f"setmaxnreg.inc.sync.aligned.u32 {cons};" in ptx
    shapes = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k32\.f32\.e4m3\.e4m3\s+\{[^}]*\},\s*"
                        r"\{%r\d+, %r\d+, %r\d+, %r\d+\}", ptx)
    assert shapes == ["64"] * wgmmas, shapes
    # the turns: a named-barrier sync per burst and an arrive per hand-over, none without them
    from gcmoe_build.kernels.sm90.kloop_probe import FORMS, epilogue_regs

    turns = len(re.findall(r"bar\.arrive", ptx))
    assert (turns > 0) == FORMS[form].turns, turns
    assert "ld.local" not in ptx and "st.local" not in ptx
    # the consumers' named barrier 1 over all consumer threads, only in the forms that ask for it
    consumers = 128 * FORMS[form].warpgroups
    assert (f"bar.sync 1, {consumers};" in ptx) == (FORMS[form].barrier_every > 0), form
    # the epilogue warpgroup's register share: what the producer and the consumers leave (88 of 128 at 512 threads)
    if FORMS[form].epilogue == "warpgroup":
        assert epilogue_regs(form) == 88 and "setmaxnreg.dec.sync.aligned.u32 88;" in ptx
    assert ("%clock" in ptx) == (FORMS[form].stamps or FORMS[form].epilogue != ""), form


def test_probe_forms_do_not_spill(built):
    from gcmoe_build import sass

    try:
        sass.locate_nvdisasm()
    except sass.SassError as e:
        pytest.skip(str(e))
    for form in EXPECT:
        text = sass.disassemble(built[form][1])
        loops = sass.innermost_mma_loops(text)
        assert len(loops) == 1 and loops[0].count("QGMMA") == EXPECT[form][2], form
        assert "STL" not in text and "LDL" not in text, form
        if form in LEFT_OUT:  # the decode's PRMTs and the promote's FFMAs, or not
            assert (loops[0].count("PRMT"), loops[0].count("FFMA")) == LEFT_OUT[form], form


def test_chunk_parts_leave_out_what_they_say(built, monkeypatch):
    """``Form.chunk_parts`` (session 60): a "tma" chunk form without ``c`` issues no chunk copy (the weight stages'
    bulk copies only, as ``wg2c``), without ``s`` loads no token scale from global, with ``b`` copies the scales
    beside each chunk copy; a wait without its copy, the scales both ways, or parts on another chunk mode, are refused
    by name."""
    from gcmoe_build.kernels.sm90 import kloop_probe

    def counts(form):
        ptx = built[form][0]
        return len(re.findall(r"cp\.async\.bulk\.shared", ptx)), len(re.findall(r"ld\.global\.f32", ptx))

    (copies0, _), (copies, scales) = counts("wg2c"), counts("wg2ct")
    assert copies > copies0 and scales > 0 and counts("wg2c")[1] == 0
    assert counts("wg2ctw") == (copies, scales)
    assert counts("wg2cts") == (copies0, scales)
    assert counts("wg2ctc") == (copies, 0)
    assert counts("wg2ctb") == (copies + (copies - copies0), 0)  # each chunk copy with its scales' copy beside it
    assert counts("wg2ctb4") == (copies + 4 * (copies - copies0), 0)  # ... or four, one per K128 group
    # the bounded mbarrier waits (two try_waits each): without "w" the copying thread waits for the buffer's
    # previous copy before re-arming its count-1 mbarrier, and every consumer for the last copy after the loop
    # (session 63: re-armed unwaited, the test's launches trapped now and then)
    waits = {f: len(re.findall(r"mbarrier\.try_wait", built[f][0])) // 2 for f in ("wg2cts", "wg2ct", "wg2ctw")}
    assert waits["wg2ct"] == waits["wg2cts"] + 1 and waits["wg2ctw"] == waits["wg2cts"] + 2, waits
    small = {f: len(re.findall(r"cp\.async\.bulk\.shared[^;]*, 256, ", built[f][0])) for f in ("wg2ctb", "wg2ctb4")}
    assert small["wg2ctb4"] - small["wg2ctb"] == 4 * (copies - copies0)  # 256 bytes each (the stages' scales too)
    for bad in (kloop_probe.Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_parts="ws"),
                kloop_probe.Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_parts="cwbs"),
                kloop_probe.Form(2, 2, True, (24, 240), barrier_every=4, chunks="tma", chunk_parts="cwbq"),
                kloop_probe.Form(2, 2, True, (24, 240), chunks="mbar", chunk_parts="c")):
        monkeypatch.setitem(kloop_probe.FORMS, "_bad", bad)
        with pytest.raises(ValueError, match="chunk_parts"):
            kloop_probe.build_probe("_bad")


def test_reference_sums_are_the_dequantised_weights():
    torch = pytest.importorskip("torch")
    from bench_kloop import make_weights

    gen = torch.Generator().manual_seed(3)
    codes, scales, sums = make_weights(torch, 3, gen, device="cpu")
    assert codes.shape == (3, 4096) and scales.shape == (3, 256) and (codes & 0x88).eq(0).all()
    e2m1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    for t in range(3):
        r = int(scales[t, 0]) - 133
        assert 0 <= r <= 3 and scales[t].eq(scales[t, 0]).all()  # one exponent per tile: no layout needed
        nibbles = [b & 7 for b in codes[t].tolist()] + [(b >> 4) & 7 for b in codes[t].tolist()]
        assert sums[t].item() == sum(e2m1[n] for n in nibbles) * 2.0 ** r


def test_unknown_form_is_refused():
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.kloop_probe import build_probe

    with pytest.raises(KeyError):
        build_probe("wg3")


def test_barrier_period_outside_the_loop_structure_is_refused(monkeypatch):
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90 import kloop_probe

    monkeypatch.setitem(kloop_probe.FORMS, "wg2b3", kloop_probe.Form(2, 2, True, (24, 240), barrier_every=3))
    with pytest.raises(ValueError, match="barrier_every=3"):
        kloop_probe.build_probe("wg2b3")


@pytest.mark.gpu
def test_every_form_matches_the_weights_and_each_other():
    torch = pytest.importorskip("torch")  # the gpu marker skips it without a GPU (tests/conftest.py)
    d = Path(os.environ.get("GCMOE_KLOOP_CUBINS", "build/kloop_probe"))
    if not (d / "index.json").is_file():
        pytest.skip(f"K-loop probe cubins not built at {d}")
    from bench_kloop import CHECK_ITERS, CHECK_TASK, check_inputs, checked_sums

    from tests.build.kernels.sm90.role2_harness import Role2Kernels

    k = Role2Kernels(d)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    iters = CHECK_ITERS
    codes, scales, ref = check_inputs(torch, sms)
    # every form the cubins' index holds (the decoder-warpgroup forms too); the epilogue forms at CHECK_TASK
    forms = [name.removeprefix("kloop_probe_") for name in k.index]
    assert set(EXPECT) <= set(forms) and any(k.index[f"kloop_probe_{f}"].get("decoder_warpgroup") for f in forms)
    sums = {form: checked_sums(torch, k, form, codes, scales, ref, iters, sms, CHECK_TASK)[0] for form in forms}
    for form, got in sums.items():  # the device has no CuTe DSL: what a form is comes from the cubins' index
        if not k.index[f"kloop_probe_{form}"]["timing_only"]:
            assert torch.allclose(got, sums["wg2"], rtol=1e-5, atol=0), form
    from bench_kloop import stamped_run
    from stamp_role2 import POISON, phases

    raw = stamped_run(torch, k, "wg2s", codes, scales, iters, sms)
    st = torch.tensor(raw["stamps"])  # [cta][warpgroup][step][event]: every consumer event of every step stored
    consumer = [i for i, e in enumerate(raw["events"]) if e != "produced"]
    assert st.shape[2] == iters and (st[..., consumer] != POISON).all()
    ph = phases(raw["stamps"], raw["events"], iters)
    assert all(v > 0 for (wg, name), vals in ph.items() if name == "period" for v in vals)


def test_promote_fmas_off_is_refused_outside_the_per_k128_chain():
    """The probe's ``promote_fmas=False`` exists only on the per-K128 chain; elsewhere it is refused, not ignored."""
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.role2_mainloop import K128Step, _mma_k128_steps

    class PerK32Scales:  # W2's activation scales per K32: the per-K32 groups, not the chain
        group = 32

    with pytest.raises(ValueError, match="promote_fmas=False"):
        _mma_k128_steps([K128Step(lambda: [], PerK32Scales(), 0)], [], 0, 64, 1, promote_fmas=False)


def test_decoder_warpgroup_forms_build_as_described():
    """The decoder-warpgroup forms (:mod:`gcmoe_build.kernels.sm90.kloop_ss_probe`): 512 / 640 threads with the three
    register shares, both wgmma operands by descriptor (m64n128k32, four per K128 step in the MMA loop), a decoder
    thread's 32 / 16 words per step through the shipped decode (two PRMT each; none in the timing-only form), no local
    memory."""
    from gcmoe_build import sass
    from gcmoe_build.frontend.dsl import import_dsl, trace_to_ptx

    import_dsl("sm_90a")
    from gcmoe_build.kernels.sm90.kloop_probe import trace_args
    from gcmoe_build.kernels.sm90.kloop_ss_probe import SS_FORMS, build_ss_probe, ss_layout, threads_of
    from gcmoe_build.toolchain.ptxas import assemble, effective_options

    for form, f in SS_FORMS.items():
        host, kern = build_ss_probe(form)
        ptx = trace_to_ptx(host, kern, trace_args(), f"kloop_probe_{form}", "sm_90a").ptx
        threads = threads_of(form)
        assert threads == 128 * (3 + f.decoders) and f".reqntid {threads}, 1, 1" in ptx
        assert ss_layout(form)["smem"] <= 232448
        prod, dec, mma = f.regs
        start = 65536 // threads // 8 * 8  # 128 at 512 threads, 96 at 640
        assert f"setmaxnreg.dec.sync.aligned.u32 {prod};" in ptx and f"setmaxnreg.inc.sync.aligned.u32 {mma};" in ptx
        assert f"setmaxnreg.{'inc' if dec > start else 'dec'}.sync.aligned.u32 {dec};" in ptx
        assert len(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.e4m3\.e4m3 \{[^}]*\}, %rd\d+, %rd\d+",
                              ptx)) == 4
        assert "ld.local" not in ptx and "st.local" not in ptx
        try:
            text = sass.disassemble(assemble(ptx, effective_options("sm_90a", []), what=form))
        except sass.SassError as e:
            pytest.skip(str(e))
        loops = sass.innermost_mma_loops(text)
        assert len(loops) == 1 and loops[0].count("QGMMA") == 4, form
        # a decoder thread's words per step (8 units x 4 words / decoder warpgroups), two PRMT each
        assert text.count("PRMT") == (64 // f.decoders if f.decode else 0), form
        assert "STL" not in text and "LDL" not in text, form
