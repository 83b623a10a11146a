"""GPU correctness of the SM90 role2 GEMM cubins against the FP32 quantised reference
(``gcmoe_runtime.numerics.reference`` steps 2-5, with weights through the real SM90 transform).

Fresh random data per case, outputs poisoned (NaN bytes) before every launch, stale ring rows of
padded tokens filled with NaN, ten repeats bit-identical. Cubins are prebuilt on the build machine
(``python -m gcmoe_build.kernels.sm90.role2_devbuild build/role2_sm90 --shapes ...``) and loaded
through the driver library API; the test skips when they are absent.
"""
from __future__ import annotations

import json
import os

import pytest

from tests.build.kernels.sm90.role2_harness import CUBIN_DIR, RingSignals, Role2Kernels, sm90_weights
from gcmoe_runtime.numerics.sm90_layout import deinterleave_k128, interleave_k128
from gcmoe_runtime.numerics.recipes import SM90_INTERMEDIATE_SCALE_GROUP as G  # the intermediate's UE8M0 group along I

pytestmark = pytest.mark.gpu

E = 4
#: ring blocks per call and the persistent grid cap; raise them (GCMOE_ROLE2_NBLK / GCMOE_ROLE2_NCTA) to make two CTAs
#: of a two-CTA build really share an SM: at the defaults only the 24 x 6 = 144 CTA grid of W2 at the GLM-5.2 shape
#: exceeds the 132 SMs (session 5, call E)
NBLK = int(os.environ.get("GCMOE_ROLE2_NBLK", "6"))
NCTA = int(os.environ.get("GCMOE_ROLE2_NCTA", "132"))  # persistent grid: by default at most one CTA per SM
#: the grid of the builds with task slots (dynamic_tasks "t", task_records "k"): far fewer CTAs than tasks, so every
#: CTA runs several (the slots are reused, claims interleave across CTAs; the counter must come back to 0)
NCTA_DYNAMIC = 13
CASES = ([(sh, bm, v) for sh in ("test", "glm52", "dsv41flash") for bm in (8, 16, 32, 64) for v in ("", "_p", "_pp")]
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 16, 32)  # experiments (skip if not
            for v in ("_p_lag2", "_p_lag3", "_pp_lag3", "_p_nofold")]          # built: --experiments): MMA lag,
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 16)  # no fold, 2 CTAs per SM
            for v in ("_o2", "_p2", "_pp2")]
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 16)  # stage release after a proxy fence,
            for v in ("_p_fence", "_p_k32", "_pp_k32", "_p2_k32", "_pp2_k32")]  # or one K32 early (session 7)
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 16, 32, 64)  # the next activation chunk
            for v in ("_pd", "_ppd", "_ppt", "_ppk", "_ppkt", "_ppke", "_ppkf", "_ppkef", "_ppks", "_ppksa",
                      "_ppksag")
            + (("_p2d", "_pp2d", "_pp2t", "_pp2k", "_pp2kt", "_pp2ke", "_pp2kf", "_pp2kef", "_pp2ks", "_pp2ksa",
                "_pp2ksag")
               if bm <= 16 else ())]
            # prefetched (act_buffers = 2, session 9; _pp2d session 10; session 11: dynamic tasks _ppt / _pp2t, task
            # records _ppk / _pp2k, with dynamic tasks _ppkt / _pp2kt; session 12: W2's release before its stores
            # _ppke / _pp2ke, the staged x 2**FOLD_LOG2 _ppkf / _pp2kf; session 13: both _ppkef / _pp2kef, and the
            # releases on the signal warp _ppks / _pp2ks; session 14: their chunks by tensor map _ppksa / _pp2ksa,
            # whose padded rows the copy brings in as they are: NaN here; session 15: one commit group per (step,
            # slab) _ppksag / _pp2ksag)
         + [(sh, bm, "_pp2ksag1") for sh in ("glm52", "dsv41flash") for bm in (8, 16, 32)]  # one slab group at a
         # time: the two-CTA build that fits BM 32 (session 15)
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 16, 32, 64)  # the shipped forms with the
            for v in ("_ppksaf",) + (("_pp2ksaf",) if bm <= 16 else ("_pp2ksag1f",) if bm == 32 else ())]
         # sigmoid's rcp.approx (activation.fast_math; session 25)
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 16, 32, 64)  # ... with the warpgroups
            for v in ("_ppksafw",) + (("_pp2ksafw",) if bm <= 16 else ())]  # warpgroups taking turns at the
         # tensor pipe (pingpong; session 26; the slab passes with and without them below)
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (32, 64)
            for v in ("_pp2ksap", "_pp2ksapc", "_pp2ksapf", "_pp2ksapfw")]
         # each warpgroup's slabs one after the other over K (pass 0's epilogue values in the stash): BM 64 at two
         # CTAs (session 16; _pp2ksapc with 64 KB of activation chunks)
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 16, 32, 64)  # four K128 steps per MMA
            for v in ("_pd4",) + (("_p2d4",) if bm <= 16 else ())]  # call (built where the K chunk allows it)
         + [(sh, 48, v) for sh in ("glm52", "dsv41flash") for v in ("_ppksaf", "_ppksafl", "_ppksafw")]
         + [(sh, 80, v) for sh in ("glm52", "dsv41flash") for v in ("_ppksaf", "_ppksafw")]
         # the step-stamp builds (session 34: Role2GemmConfig.step_stamps): stamping must not change a result
         + [("glm52", 64, "_ppksafwc"), ("glm52", 48, "_ppksafc"), ("glm52", 16, "_pp2ksafc"),
            ("glm52", 64, "_ppksafwrc"), ("glm52", 64, "_ppksafwrec")]
         # four K128 steps per MMA call at lag 1, as the ring's one-CTA BM 8-48 builds (session 35), and stamped
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 48) for v in ("_ppksaf4",)]
         + [("glm52", 48, "_ppksafc4")]
         # the interleaved K order (session 50: Role2GemmConfig.k_interleave): each shipped form, its chunks permuted
         # in shared memory after they land and its weights packed to match
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (8, 16, 32, 48, 64, 80)
            for v in (("_pp2ksafi",) if bm <= 16 else ("_pp2ksag1fi",) if bm == 32 else ())
            + (("_ppksaf4i",) if bm in (8, 48) else ()) + (("_ppksafwi",) if bm >= 64 else ())]
         # ... and the one-CTA BM 48-80 forms fed W1 rows already interleaved (session 51: role1 writes them so)
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm, v in ((48, "_ppksaf4r"), (64, "_ppksafwr"),
                                                                       (80, "_ppksafwr"))]
         # ... with the next step's words loaded under this step's MMAs (session 57: dev_words_ahead), two and four
         # K128 steps per call, and four alone; stamped
         + [(sh, 64, v) for sh in ("glm52", "dsv41flash") for v in ("_ppksafwra", "_ppksafwr4", "_ppksafwra4")]
         + [("glm52", 64, "_ppksafwra4c")]
         # ... and the shipped BM 64 form without the turns (session 59)
         + [(sh, 64, "_ppksafr") for sh in ("glm52", "dsv41flash")]
         # ... and with the epilogue warpgroup (session 60: Role2GemmConfig.epilogue_warpgroup; bit-identical to the
         # forms without it: test_epilogue_warpgroup_is_bit_identical)
         + [(sh, bm, v) for sh in ("glm52", "dsv41flash") for bm in (32, 64)
            for v in ("_ppksafwre", "_ppksafre", "_ppksafwe")])
#: the epilogue-warpgroup forms and the forms they hand the epilogue over from (bit-identical outputs); _ppksafwe in
#: the plain K order (W1's columns in their own order, not W2's interleaved one)
EPILOGUE_WG_PAIRS = (("_ppksafwre", "_ppksafwr"), ("_ppksafre", "_ppksafr"), ("_ppksafwe", "_ppksafw"))
# BM 48 (wgmma N = 48, session 29): the one-CTA forms at lag 0, lag 1 (a second partial set fits, unlike BM 64) and
# with the turns; BM 80 (session 31): lag 0 and the turns (the ring's BM 80 build), one block for 65-80 tokens
#: ("_p_read" / "_p2_read", the racy release, are built for diag_two_cta.py, which shows the race, not tested here:
#: a race passes or fails by timing)


def _grid(info):
    slots = info.get("dynamic_tasks") or info.get("task_records")
    return min(NCTA_DYNAMIC if slots else NCTA, NBLK * info["row_tiles"])


@pytest.fixture(scope="module")
def kernels():
    if not (CUBIN_DIR / "index.json").is_file():
        pytest.skip(f"role2 cubins not built at {CUBIN_DIR} (run gcmoe_build.kernels.sm90.role2_devbuild)")
    return Role2Kernels()


_WEIGHTS = {}


def _in_k_order(act, interleaved):
    """E4M3 activation rows as the kernel reads them: in the interleaved K order (``sm90_layout.interleave_k128``)
    when ``interleaved``, else as they are."""
    import torch

    if not interleaved:
        return act
    return interleave_k128(act.view(torch.uint8)).view(torch.float8_e4m3fn).contiguous()


def _weights(mode, e, n, k, seed, k_interleave=False):
    """Weights are the expensive part: share one set per (mode, shape, K order) across BM and variants."""
    import torch

    key = (mode, n, k, bool(k_interleave))
    if key not in _WEIGHTS:
        _WEIGHTS.clear()
        gen = torch.Generator(device="cuda").manual_seed(seed)
        _WEIGHTS[key] = sm90_weights(e, n, k, mode == "w1", gen, bool(k_interleave))
    return _WEIGHTS[key]


def _blocks(gen, bm):
    import torch

    bexp = torch.randint(0, E, (NBLK,), generator=gen, device="cuda", dtype=torch.int32)
    ntok = torch.randint(1, bm + 1, (NBLK,), generator=gen, device="cuda", dtype=torch.int32)
    ntok[0], ntok[-1] = bm, 1  # a full block and a one-token block always
    return bexp, ntok


def run_w1(kernels, shape, bm, seed, variant="", outputs=None):
    """The W1 check of one build; ``outputs`` (a dict, or None): gets the first repeat's ``(E4M3 bytes, scale
    bytes)``."""
    import torch

    from gcmoe_runtime.numerics.quant import quantize_e4m3_fp32_k128, quantize_e4m3_ue8m0
    from gcmoe_runtime.numerics.reference import SwiGLUSpec, _bf16, dequantize_activations, swiglu

    name = f"role2_w1_{shape}_bm{bm}{variant}"
    if name not in kernels.index:
        pytest.skip(f"{name} not built")
    info = kernels.index[name]
    h, rows = info["k"], info["rows"]
    i = rows // 2
    tiles, stiles, efac, wdq = _weights("w1", E, rows, h, seed=11, k_interleave=info.get("k_interleave"))
    gen = torch.Generator(device="cuda").manual_seed(seed)
    bexp, ntok = _blocks(gen, bm)
    x = torch.randn((NBLK * bm, h), generator=gen, device="cuda") * 3.0
    act, asc = quantize_e4m3_fp32_k128(x)
    act, asc = act.view(NBLK, bm, h).contiguous(), asc.view(NBLK, bm, h // 128).contiguous()
    rw = torch.rand((NBLK, bm), generator=gen, device="cuda")
    nt = ntok.tolist()
    for b in range(NBLK):  # stale ring rows: NaN everywhere the kernel must not look
        act[b, nt[b]:] = torch.tensor(float("nan")).to(torch.float8_e4m3fn)
        asc[b, nt[b]:] = float("nan")
        rw[b, nt[b]:] = float("nan")
    # role1 hands these builds W1's ring rows in the interleaved K order
    act_in = _in_k_order(act, info.get("w1_rows_interleaved"))
    out = torch.empty((NBLK, bm, i), dtype=torch.uint8, device="cuda")
    outs = torch.empty((NBLK, bm, i // G), dtype=torch.uint8, device="cuda")
    results = []
    sig = RingSignals(NBLK, bm, torch.randint(0, 3, (NBLK,), generator=gen, device="cuda", dtype=torch.int32))
    for rep in range(10):
        out.fill_(0x7F)  # E4M3 NaN
        outs.fill_(0xFF)  # UE8M0 NaN
        if "_pp" in variant:
            sig.reset()
            sig.ready()
            kernels.launch_persistent(name, _grid(info), [
                tiles.data_ptr(), stiles.data_ptr(), efac.data_ptr(), act_in.data_ptr(), asc.data_ptr(),
                bexp.data_ptr(), ntok.data_ptr(), sig.gen.data_ptr(), rw.data_ptr(), out.data_ptr(), outs.data_ptr(),
                sig.l1_full.data_ptr(), sig.empty.data_ptr(), sig.l2_mask.data_ptr(), 0], NBLK)
        else:
            kernels.launch(name, NBLK, [tiles.data_ptr(), stiles.data_ptr(), efac.data_ptr(), act_in.data_ptr(),
                                        asc.data_ptr(), bexp.data_ptr(), ntok.data_ptr(), rw.data_ptr(), out.data_ptr(),
                                        outs.data_ptr()])
        torch.cuda.synchronize()
        # a k_interleave build writes each 128-column line in W2's interleaved K order (sm90_layout.k128_epilogue_position)
        results.append((deinterleave_k128(out) if info.get("k_interleave") else out.clone(), outs.clone()))
    if "_pp" in variant:  # every W1 task released its two N128 mask bits and one l1_empty count
        assert kernels.ticket_value(name) == 0, "task counter not reset by the launch's last claim"
        nt1 = info["row_tiles"]
        assert (sig.empty == nt1).all(), sig.empty
        assert (sig.l2_mask == (1 << (2 * nt1)) - 1).all(), sig.l2_mask
    for o, s in results[1:]:
        assert torch.equal(o, results[0][0]) and torch.equal(s, results[0][1]), f"{name}: repeats not bit-identical"
    if outputs is not None:
        outputs["w1"] = results[0]
    spec = SwiGLUSpec(alpha=info["alpha"], clamp=info["clamp"])
    worst = {"rel_l2": 0.0, "byte_mismatch": 0.0, "scale_mismatch": 0.0}
    be = bexp.tolist()
    for b in range(NBLK):
        n = nt[b]
        xa = dequantize_activations(act[b, :n], asc[b, :n], "fp32_k128")
        a = swiglu(_bf16(xa @ wdq[be[b]].t()), spec) * rw[b, :n, None]
        q_ref, c_ref = quantize_e4m3_ue8m0(a, G, name="ref")
        got_q, got_c = results[0][0][b, :n], outs[b, :n]
        assert not (got_q == 0x7F).any() and not (got_c == 0xFF).any(), f"{name} block {b}: unwritten output"
        deq = lambda q, c: q.view(torch.float8_e4m3fn).float() * torch.ldexp(  # noqa: E731
            torch.ones_like(c, dtype=torch.float32), c.int() - 127).repeat_interleave(G, dim=1)
        ref = deq(q_ref.view(torch.uint8), c_ref)
        got = deq(got_q, got_c)
        rel = float((got - ref).norm() / ref.norm().clamp_min(1e-30))
        worst["rel_l2"] = max(worst["rel_l2"], rel)
        worst["byte_mismatch"] = max(worst["byte_mismatch"], float((got_q != q_ref.view(torch.uint8)).float().mean()))
        worst["scale_mismatch"] = max(worst["scale_mismatch"], float((got_c != c_ref).float().mean()))
    return worst


def run_w2(kernels, shape, bm, seed, variant="", outputs=None):
    """The W2 check of one build; ``outputs`` (a dict, or None): gets the first repeat's BF16 rows."""
    import torch

    from gcmoe_runtime.numerics.quant import dequantize_e4m3_ue8m0, quantize_e4m3_ue8m0

    name = f"role2_w2_{shape}_bm{bm}{variant}"
    if name not in kernels.index:
        pytest.skip(f"{name} not built")
    info = kernels.index[name]
    i, h = info["k"], info["rows"]
    tiles, stiles, efac, wdq = _weights("w2", E, h, i, seed=12, k_interleave=info.get("k_interleave"))
    gen = torch.Generator(device="cuda").manual_seed(seed)
    bexp, ntok = _blocks(gen, bm)
    y = torch.randn((NBLK * bm, i), generator=gen, device="cuda") * 2.0 ** torch.randint(
        -6, 2, (NBLK * bm, 1), generator=gen, device="cuda").float()
    act, codes = quantize_e4m3_ue8m0(y, G)
    act, codes = act.view(NBLK, bm, i).contiguous(), codes.view(NBLK, bm, i // G).contiguous()
    nrows_out = NBLK * bm
    rowidx = torch.randperm(nrows_out, generator=gen, device="cuda").to(torch.int32).view(NBLK, bm)
    nt = ntok.tolist()
    for b in range(NBLK):
        act[b, nt[b]:] = torch.tensor(float("nan")).to(torch.float8_e4m3fn)
        codes[b, nt[b]:] = 0xFF
        rowidx[b, nt[b]:] = -1  # a padded token's row index must never be used
    out = torch.empty((nrows_out, h), dtype=torch.bfloat16, device="cuda")
    act_in = _in_k_order(act, info.get("k_interleave"))  # W1's epilogue hands a k_interleave build l2_x so
    results = []
    sig = RingSignals(NBLK, bm, torch.randint(0, 3, (NBLK,), generator=gen, device="cuda", dtype=torch.int32))
    for rep in range(10):
        out.fill_(float("nan"))
        if "_pp" in variant:
            sig.reset()
            sig.ready()
            sig.l2_mask.fill_(-1)  # every W1 tile of every block finished
            kernels.launch_persistent(name, _grid(info), [
                tiles.data_ptr(), stiles.data_ptr(), efac.data_ptr(), act_in.data_ptr(), codes.data_ptr(),
                bexp.data_ptr(), ntok.data_ptr(), sig.gen.data_ptr(), rowidx.data_ptr(), out.data_ptr(), 0,
                sig.l1_full.data_ptr(), sig.empty.data_ptr(), sig.l2_mask.data_ptr(), 0], NBLK)
        else:
            kernels.launch(name, NBLK, [tiles.data_ptr(), stiles.data_ptr(), efac.data_ptr(), act_in.data_ptr(),
                                        codes.data_ptr(), bexp.data_ptr(), ntok.data_ptr(), rowidx.data_ptr(),
                                        out.data_ptr(), 0])
        torch.cuda.synchronize()
        results.append(out.clone())
    if "_pp" in variant:
        assert kernels.ticket_value(name) == 0, "task counter not reset by the launch's last claim"
        assert (sig.empty == info["row_tiles"]).all(), sig.empty
    for o in results[1:]:
        assert torch.equal(o.view(torch.int16), results[0].view(torch.int16)), f"{name}: repeats not bit-identical"
    if outputs is not None:
        outputs["w2"] = results[0]
    worst = {"rel_l2": 0.0, "unwritten": 0, "bf16_mismatch": 0.0}
    written = torch.zeros(nrows_out, dtype=torch.bool, device="cuda")
    be = bexp.tolist()
    for b in range(NBLK):
        n = nt[b]
        ref = (dequantize_e4m3_ue8m0(act[b, :n], codes[b, :n], G) @ wdq[be[b]].t()).to(torch.bfloat16).float()
        rows = rowidx[b, :n].long()
        got = out[rows].float()
        worst["unwritten"] += int((~torch.isfinite(got)).sum())
        worst["rel_l2"] = max(worst["rel_l2"], float((got - ref).norm() / ref.norm().clamp_min(1e-30)))
        worst["bf16_mismatch"] = max(worst["bf16_mismatch"], float((got != ref).float().mean()))
        written[rows] = True
    assert torch.isnan(out[~written].float()).all(), f"{name}: wrote rows of padded tokens"
    return worst


def _record(mode, shape, bm, metrics):
    """Append one line of evidence to $GCMOE_ROLE2_RESULTS (JSON lines) when set."""
    path = os.environ.get("GCMOE_ROLE2_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"mode": mode, "shape": shape, "bm": bm, **metrics}) + "\n")


@pytest.mark.parametrize("shape,bm,variant", CASES)
def test_role2_w1_matches_reference(kernels, shape, bm, variant):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    w = run_w1(kernels, shape, bm, seed=1000 + bm, variant=variant)
    _record("w1" + variant, shape, bm, w)
    assert w["rel_l2"] < 2e-2, w
    assert w["byte_mismatch"] < 0.02, w
    assert w["scale_mismatch"] < 0.01, w


@pytest.mark.parametrize("shape,bm,variant", CASES)
def test_role2_w2_matches_reference(kernels, shape, bm, variant):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    w = run_w2(kernels, shape, bm, seed=2000 + bm, variant=variant)
    _record("w2" + variant, shape, bm, w)
    assert w["unwritten"] == 0, w
    assert w["rel_l2"] < 1e-2, w


@pytest.mark.parametrize("shape", ["glm52", "dsv41flash"])
@pytest.mark.parametrize("bm", [32, 64])
@pytest.mark.parametrize("variant,base", EPILOGUE_WG_PAIRS)
def test_epilogue_warpgroup_is_bit_identical(kernels, shape, bm, variant, base):
    """The epilogue warpgroup (session 60) starts from the BF16 pairs of ``acc x efac`` that both consumer epilogues
    round to first, so its outputs (W1's E4M3 bytes and scales, W2's BF16 rows) equal the consumers' own epilogues'
    bit for bit on the same data — any layout or mapping slip of the hand-over shows here as a mismatch."""
    import torch

    got = {variant: {}, base: {}}
    for run, seed in ((run_w1, 3000 + bm), (run_w2, 4000 + bm)):  # GEMM-major: one weight set per GEMM (_weights)
        for v in (variant, base):
            run(kernels, shape, bm, seed=seed, variant=v, outputs=got[v])
    (q, c), (q0, c0) = got[variant]["w1"], got[base]["w1"]
    assert torch.equal(q, q0) and torch.equal(c, c0), f"{shape} BM {bm} {variant}: W1 differs from {base}"
    assert torch.equal(got[variant]["w2"].view(torch.int16), got[base]["w2"].view(torch.int16)), (
        f"{shape} BM {bm} {variant}: W2 differs from {base}")


@pytest.mark.parametrize("shape,variant", [("test", "_pp"), ("glm52", "_ppk"), ("glm52", "_pp2k"), ("glm52", "_ppke"),
                                           ("glm52", "_pp2ke"), ("glm52", "_ppkf"), ("glm52", "_pp2kf"),
                                           ("glm52", "_ppks"), ("glm52", "_pp2ks"), ("glm52", "_ppksa"),
                                           ("glm52", "_pp2ksa"), ("glm52", "_ppksag"), ("glm52", "_pp2ksag"),
                                           ("glm52", "_pp2ksag1"), ("glm52", "_pp2ksap"), ("glm52", "_ppksafw"),
                                           ("glm52", "_pp2ksafw"), ("glm52", "_ppksafwe")])
def test_role2_persistent_chain_waits_on_the_ring(kernels, shape, variant):
    """W2 is launched first and must wait for W1's l2_full_mask bits; W1 must wait for l1_full_count,
    which a third stream publishes ~1 ms later. Small grids so all three run side by side. W2's
    output must equal the reference computed from W1's actual output (the chained path). ``_ppk`` / ``_pp2k``
    (task records): the producer thread does both waits and the consumers only read its records."""
    import torch

    from gcmoe_runtime.numerics.quant import dequantize_e4m3_ue8m0, quantize_e4m3_fp32_k128

    bm = 64 if variant in ("_pp2ksap", "_ppksafwe") else 16  # slab passes, epilogue warpgroup: built at BM 32 / 64
    n1, n2 = f"role2_w1_{shape}_bm{bm}{variant}", f"role2_w2_{shape}_bm{bm}{variant}"
    if n1 not in kernels.index or n2 not in kernels.index:
        pytest.skip(f"{n1} / {n2} not built (role2_devbuild)")
    i1, i2 = kernels.index[n1], kernels.index[n2]
    h, i = i1["k"], i1["rows"] // 2
    gen = torch.Generator(device="cuda").manual_seed(77)
    t1, s1, e1, _ = sm90_weights(E, 2 * i, h, True, gen)
    t2, s2, e2, w2dq = sm90_weights(E, h, i, False, gen)
    bexp, ntok = _blocks(gen, bm)
    act, asc = quantize_e4m3_fp32_k128(torch.randn((NBLK * bm, h), generator=gen, device="cuda") * 3.0)
    act, asc = act.view(NBLK, bm, h).contiguous(), asc.view(NBLK, bm, h // 128).contiguous()
    rw = torch.rand((NBLK, bm), generator=gen, device="cuda")
    l2 = torch.full((NBLK, bm, i), 0x7F, dtype=torch.uint8, device="cuda")
    l2s = torch.full((NBLK, bm, i // G), 0xFF, dtype=torch.uint8, device="cuda")
    rowidx = torch.arange(NBLK * bm, dtype=torch.int32, device="cuda").view(NBLK, bm)
    out = torch.full((NBLK * bm, h), float("nan"), dtype=torch.bfloat16, device="cuda")
    sig = RingSignals(NBLK, bm, torch.randint(0, 3, (NBLK,), generator=gen, device="cuda", dtype=torch.int32))
    l2_empty = torch.zeros(NBLK, dtype=torch.int32, device="cuda")
    from gcmoe_runtime.workspace.trap import TrapRecord

    rec = TrapRecord()  # a timeout in either kernel leaves (magic, code, expected, observed) here
    # CUDA lazy loading: the first launch of a kernel may wait for the whole context to go idle. The
    # publisher's kernels (sleep, the signal arithmetic) must be loaded before the persistent kernels
    # spin, or their first launch waits for kernels that wait for them (seen: both traps after 2 s).
    # The same holds for our own cubins: resolving a function loads its module into the context, so
    # resolve W1 before W2 starts spinning (run 4: cuKernelGetFunction(W1) waited behind the spinning W2,
    # which then trapped on its 2 s timeout and returned CUDA_ERROR_LAUNCH_FAILED).
    kernels.function(n1)
    kernels.function(n2)
    warm = RingSignals(NBLK, bm, sig.gen.clone())
    torch.cuda._sleep(10)
    warm.ready()
    torch.cuda.synchronize()
    s_w2, s_w1, s_pub = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
    kernels.launch_persistent(n2, 8, [t2.data_ptr(), s2.data_ptr(), e2.data_ptr(), l2.data_ptr(), l2s.data_ptr(),
                                      bexp.data_ptr(), ntok.data_ptr(), sig.gen.data_ptr(), rowidx.data_ptr(),
                                      out.data_ptr(), 0, sig.l1_full.data_ptr(), l2_empty.data_ptr(),
                                      sig.l2_mask.data_ptr(), rec.address], NBLK, stream=s_w2)
    kernels.launch_persistent(n1, 16, [t1.data_ptr(), s1.data_ptr(), e1.data_ptr(), act.data_ptr(), asc.data_ptr(),
                                       bexp.data_ptr(), ntok.data_ptr(), sig.gen.data_ptr(), rw.data_ptr(),
                                       l2.data_ptr(), l2s.data_ptr(), sig.l1_full.data_ptr(), sig.empty.data_ptr(),
                                       sig.l2_mask.data_ptr(), rec.address], NBLK, stream=s_w1)
    try:
        with torch.cuda.stream(s_pub):
            torch.cuda._sleep(2_000_000)
            sig.ready()
        torch.cuda.synchronize()
    except Exception as exc:  # say which wait gave up (if any) before failing
        raise AssertionError(f"chained launch failed ({exc}); trap record words {rec.words()}") from exc
    assert (sig.empty == i1["row_tiles"]).all() and (l2_empty == i2["row_tiles"]).all()
    worst = 0.0
    for b, n in enumerate(ntok.tolist()):
        ref = (dequantize_e4m3_ue8m0(l2[b, :n].view(torch.float8_e4m3fn), l2s[b, :n], G)
               @ w2dq[int(bexp[b])].t()).to(torch.bfloat16).float()
        got = out[rowidx[b, :n].long()].float()
        assert torch.isfinite(got).all(), f"block {b}: W2 output not written"
        worst = max(worst, float((got - ref).norm() / ref.norm().clamp_min(1e-30)))
    _record("chain" + variant, shape, bm, {"rel_l2": worst})
    assert worst < 1e-2


_TRAP_SCRIPT = r"""
import sys, torch
sys.path.insert(0, {repo!r})
from tests.build.kernels.sm90.role2_harness import RingSignals, Role2Kernels
from gcmoe_runtime.workspace.trap import TrapRecord, DeviceTimeoutError
k = Role2Kernels()
name = "role2_w1_test_bm16_pp"
info = k.index[name]
h, rows = info["k"], info["rows"]
z = lambda n: torch.zeros(n, dtype=torch.uint8, device="cuda")
w, ws = z(rows * h // 2), z(rows * h // 32)
ef = torch.ones(1, device="cuda")
act, asc = z(16 * h), torch.ones(16 * h // 128, device="cuda")
bexp, ntok = torch.zeros(1, dtype=torch.int32, device="cuda"), torch.full((1,), 16, dtype=torch.int32, device="cuda")
rw, out, outs = torch.ones(16, device="cuda"), z(16 * rows // 2), z(16 * rows // 64)
sig = RingSignals(1, 16)  # l1_full never published
rec = TrapRecord()
k.launch_persistent(name, 2, [w.data_ptr(), ws.data_ptr(), ef.data_ptr(), act.data_ptr(), asc.data_ptr(),
                             bexp.data_ptr(), ntok.data_ptr(), sig.gen.data_ptr(), rw.data_ptr(), out.data_ptr(),
                             outs.data_ptr(), sig.l1_full.data_ptr(), sig.empty.data_ptr(), sig.l2_mask.data_ptr(),
                             rec.address], 1)
try:
    torch.cuda.synchronize()
    print("NO_TRAP")
except Exception as exc:
    print("launch failed:", type(exc).__name__)
    try:
        rec.check()
        print("NO_RECORD")
    except DeviceTimeoutError as t:
        print(f"TRAP_OK code={{t.code}} expected={{t.expected}} observed={{t.observed}}")
"""


def test_role2_persistent_times_out_with_a_trap_record(kernels):
    """A ring block that is never published: the kernel must trap after its timeout (2 s) and leave the
    l1_full_count record (code 2, expected BM*(gen+1) = 16, observed 0). Runs in a subprocess because
    the trap kills the CUDA context."""
    import subprocess
    import sys

    from tests.build.kernels.sm90.role2_harness import REPO

    if "role2_w1_test_bm16_pp" not in kernels.index:
        pytest.skip("role2_w1_test_bm16_pp not built (role2_devbuild --shapes test)")
    res = subprocess.run([sys.executable, "-c", _TRAP_SCRIPT.format(repo=str(REPO))], capture_output=True,
                         text=True, timeout=120)
    _record("trap_pp", "test", 16, {"stdout": res.stdout.strip()[-200:]})
    assert "TRAP_OK code=2 expected=16 observed=0" in res.stdout, (res.stdout, res.stderr[-2000:])
