"""CPU: the public API's host-side checks (gcmoe_runtime.moe) refuse bad input before anything is launched,
with messages naming the field and the limit; the weight transform returns marked SM90 matrices."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from gcmoe_runtime import moe
from gcmoe_runtime.numerics.quant import quantize_mxfp4

E, K, H, I, CAP = 8, 2, 256, 128, 16


@pytest.fixture(scope="module")
def weights():
    g = torch.Generator().manual_seed(0)
    l1 = quantize_mxfp4(torch.randn(E, 2 * I, H, generator=g))
    l2 = quantize_mxfp4(torch.randn(E, H, I, generator=g))
    return moe.transform_weights_for_gc_moe(l1, l2), (l1, l2)


def fake_buffer(shared=False):
    b = moe.GcMoeBuffer(group=None, rank=0, world_size=1, device=torch.device("cpu"), num_experts=E, capacity=CAP,
                        topk=K, hidden=H, intermediate=I, shared_experts=shared, timeout_ns=1, loader=None,
                        partition=None, ws=None, trap=None, bm_candidates=(8, 16))
    b.topk_idx = torch.zeros(CAP, K, dtype=torch.int32)
    b.topk_weights = torch.full((CAP, K), 0.5)
    return b


def check(y, w1, w2, buf, shared=None):
    return moe._check_call(y, w1, w2, buf, "swiglu", moe.ROUTED_RECIPE, shared)


def test_transform_marks_weights(weights):
    (w1, w2), _ = weights
    assert (w1.name, w1.experts, w1.rows, w1.k) == ("w1", E, 2 * I, H)
    assert (w2.name, w2.experts, w2.rows, w2.k) == ("w2", E, H, I)
    assert w1.tiles.shape == (E, 2 * I // 64, H // 128, 4096)


def test_transform_gives_the_kernel_scale_layout(weights):
    """The kernels read lane-permuted scale tiles (what the GPU-verified role2 harness feeds them); the first
    GPU run of the layer computed garbage because the API passed the row-order scales instead."""
    from gcmoe_runtime.numerics.sm90_layout import permute_scales, unpermute_scales
    from gcmoe_runtime.numerics.transforms_sm90 import transform_weights_sm90
    from gcmoe_runtime.numerics.reference import RoutedWeights

    (w1, w2), (l1, l2) = weights
    m1, m2 = transform_weights_sm90(RoutedWeights(l1[0], l1[1], l2[0], l2[1]))
    for w, m in ((w1, m1), (w2, m2)):
        assert w.scales.shape == (E, w.rows // 64, w.k // 128, 256)
        assert torch.equal(w.scales, permute_scales(m.scales)) and torch.equal(unpermute_scales(w.scales), m.scales)


def test_row_order_scales_are_refused(weights):
    (w1, w2), _ = weights
    m = dataclasses.replace(w1, scales=w1.scales.reshape(E, 2 * I, H // 32))
    with pytest.raises(moe.GcMoeError, match=r"w1.scales must be contiguous uint8 \[8, 4, 2, 256\]"):
        check(torch.empty(5, H, dtype=torch.bfloat16), m, w2, fake_buffer())


def test_transform_bad_shapes(weights):
    _, (l1, l2) = weights
    with pytest.raises(moe.GcMoeError, match="inconsistent shapes"):
        moe.transform_weights_for_gc_moe(l1, (l2[0][:, :128], l2[1][:, :128]))
    with pytest.raises(moe.GcMoeError, match="pairs"):
        moe.transform_weights_for_gc_moe(l1, (l2[0],))


def test_valid_call_passes_checks(weights):
    (w1, w2), _ = weights
    assert check(torch.empty(5, H, dtype=torch.bfloat16), w1, w2, fake_buffer()) == 5
    assert check(torch.empty(0, H, dtype=torch.bfloat16), w1, w2, fake_buffer()) == 0  # zero-token rank


@pytest.mark.parametrize("case,needle", [
    ("capacity", "exceeds the buffer capacity 16"), ("dtype", "bfloat16"), ("shape", "contiguous"),
    ("raw_weights", "not transformed"), ("swapped", "holds w2"), ("expert_id", "topk_idx[3, 1] = 8"),
    ("weight_nan", "non-finite"), ("shared", "shared_experts"), ("activation", "swiglu"),
    ("buffer", "get_symm_buffer_for_gc_moe")])
def test_bad_calls(weights, case, needle):
    (w1, w2), ((w1q, _), _) = weights
    buf = fake_buffer()
    y = torch.empty(5, H, dtype=torch.bfloat16)
    args = dict(y=y, w1=w1, w2=w2, buf=buf, shared=None)
    act = "swiglu"
    if case == "capacity":
        args["y"] = torch.empty(CAP + 1, H, dtype=torch.bfloat16)
    elif case == "dtype":
        args["y"] = y.float()
    elif case == "shape":
        args["y"] = torch.empty(5, 2 * H, dtype=torch.bfloat16)[:, :H]
    elif case == "raw_weights":
        args["w1"] = w1q
    elif case == "swapped":
        args["w1"], args["w2"] = w2, w1
    elif case == "expert_id":
        buf.topk_idx[3, 1] = E
    elif case == "weight_nan":
        buf.topk_weights[2, 0] = float("nan")
    elif case == "shared":
        args["shared"] = (y, y, y, y)
    elif case == "activation":
        act = "gelu"
    elif case == "buffer":
        args["buf"] = object()
    with pytest.raises(moe.GcMoeError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        moe._check_call(args["y"], args["w1"], args["w2"], args["buf"], act, moe.ROUTED_RECIPE, args["shared"])


def test_ids_beyond_T_are_not_checked(weights):
    (w1, w2), _ = weights
    buf = fake_buffer()
    buf.topk_idx[5:] = 99  # stale rows past T are never read by the kernels
    assert check(torch.empty(5, H, dtype=torch.bfloat16), w1, w2, buf) == 5


def test_buffer_rejects_bad_mma_type():
    with pytest.raises(moe.GcMoeError, match="mma_type"):
        moe.get_symm_buffer_for_gc_moe(None, E, CAP, K, H, I, bundle="x", mma_type="fp8xfp8")


def test_forced_tile_is_validated():
    assert moe.check_forced_tile(None, (8, 16)) is None
    assert moe.check_forced_tile((16, 384), (8, 16)) == (16, 384, 1, 1)
    assert moe.check_forced_tile((8, 256), (8, 16)) == (8, 256, 2, 1)  # the tile's default build
    assert moe.check_forced_tile((8, 384), (8, 16)) == (8, 384, 1, 1)
    assert moe.check_forced_tile((8, 384, 2), (8, 16)) == (8, 384, 2, 1)  # the build without split-K code
    assert moe.check_forced_tile((8, 384, 2, 2), (8, 16)) == (8, 384, 2, 2)
    for bad, needle in (((32, 256), "BM=32 is not among"), ((8, 128), "256 or 384"), ((8,), "ints"),
                        ("8:256", "ints"), ((8, 384, 3), "ctas_per_sm=3"), ((8, 384, 2, 3), "w1_split=3"),
                        ((8, 384, 2, 2, 1), "ints")):
        with pytest.raises(moe.GcMoeError, match=needle):
            moe.check_forced_tile(bad, (8, 16))


def test_forced_tile_replaces_the_heuristic():
    """A buffer built with tile=(BM, threads) runs that role2 variant at every token count (what the GPU harness
    uses to put every compiled variant through the layer)."""
    from types import SimpleNamespace

    buf = fake_buffer()
    buf.partition = SimpleNamespace(compute_sms=128)
    assert moe.select_tile(buf, 5) != (16, 384, 1, 1)
    buf.forced_tile = (16, 384, 1, 1)
    assert moe.select_tile(buf, 5) == moe.select_tile(buf, 256) == (16, 384, 1, 1)


def test_layer_kernels_are_looked_up_once_per_variant_choice():
    """Every call picks kernels by (BM, threads, CTAs per SM, W1 split, shared BM, activation); the bundle is scanned once
    per choice."""
    from types import SimpleNamespace

    calls = []

    class Loader:
        def kernel(self, role, **variant):
            calls.append((role, variant.get("bm")))
            if variant.get("bm") == 64:
                raise LookupError("no variant with bm=64")
            return SimpleNamespace(role=role, record=SimpleNamespace(variant={"shared_experts": 1}))

    buf = fake_buffer(shared=True)
    buf.loader, buf.partition = Loader(), SimpleNamespace(dispatch_sms=4, compute_sms=128)
    k1 = moe.layer_kernels(buf, (8, 256, 2, 1), 8, 1.0, 10.0)
    assert sorted(k1) == ["role1", "role2", "role3", "role4"] and len(calls) == 4
    assert moe.layer_kernels(buf, (8, 256, 2, 1), 8, 1.0, 10.0) is k1 and len(calls) == 4
    moe.layer_kernels(buf, (16, 256, 2, 1), 8, 1.0, 10.0)
    assert len(calls) == 8
    moe.layer_kernels(buf, (16, 256, 1, 1), 8, 1.0, 10.0)  # another CTA count is another choice
    assert len(calls) == 12
    moe.layer_kernels(buf, (16, 256, 1, 2), 8, 1.0, 10.0)  # and another W1 split
    assert len(calls) == 16
    with pytest.raises(moe.GcMoeError, match="cannot run this layer: no variant with bm=64"):
        moe.layer_kernels(buf, (64, 384, 1, 1), 8, 1.0, 10.0)
    assert (64, 384, 1, 1, 8, 1.0, 10.0) not in buf.kernel_cache


@pytest.fixture(scope="module")
def shared_weights():
    """FP8 shared expert (Is = 256, recipe 1x128x128): raw (w1, codes, w2, codes) and its role4 layout."""
    from gcmoe_runtime.numerics.quant import quantize_fp8_weight

    g = torch.Generator().manual_seed(1)
    a, sa = quantize_fp8_weight(torch.randn(2 * 256, H, generator=g))
    b, sb = quantize_fp8_weight(torch.randn(H, 256, generator=g))
    return (a, sa, b, sb), moe.transform_weights_for_gc_moe(*_l1l2(), shared_weights=(a, sa, b, sb))[2]


def _l1l2():
    g = torch.Generator().manual_seed(2)
    return quantize_mxfp4(torch.randn(E, 2 * I, H, generator=g)), quantize_mxfp4(torch.randn(E, H, I, generator=g))


def test_transformed_shared_weights_pass(weights, shared_weights):
    (w1, w2), _ = weights
    _, sh = shared_weights
    assert check(torch.empty(5, H, dtype=torch.bfloat16), w1, w2, fake_buffer(shared=True), sh.args()) == 5


@pytest.mark.parametrize("case,needle", [
    ("raw", "shared_w1 must be a contiguous uint8"),  # the 2026-11-30 benchmark's mistake: NaN, no fault
    ("scale_tiles_swapped", "shared_w1_scale must be a contiguous uint8 [rows/64, K/128, 256]"),
    ("other_hidden", "shared_w1 has tiles [8, 1], expected [8, 2] for hidden=256")])
def test_untransformed_shared_weights_are_refused(weights, shared_weights, case, needle):
    (w1, w2), _ = weights
    raw, sh = shared_weights
    args = {"raw": raw, "scale_tiles_swapped": (sh.w1_tiles, sh.w1_tiles, sh.w2_tiles, sh.w2_scales),
            "other_hidden": (sh.w1_tiles[:, :1].contiguous(), sh.w1_scales, sh.w2_tiles, sh.w2_scales)}[case]
    with pytest.raises(moe.GcMoeError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        check(torch.empty(5, H, dtype=torch.bfloat16), w1, w2, fake_buffer(shared=True), args)


def test_k_order_of_the_weights_must_be_the_bundles(weights):
    """Same shapes, other K order inside each K128 step: the call refuses it by name instead of computing wrong
    numbers (the bundle's role2 kernels set ``buffer.k_interleave``, the manifest target's ``k_interleave``)."""
    (w1, w2), (l1, l2) = weights
    y = torch.empty(5, H, dtype=torch.bfloat16)
    buf = fake_buffer()
    buf.k_interleave = True
    with pytest.raises(moe.GcMoeError, match=r"w1 was transformed with k_interleave=False, the bundle's role2 "
                                             r"kernels read k_interleave=True"):
        check(y, w1, w2, buf)
    i1, i2 = moe.transform_weights_for_gc_moe(l1, l2, k_interleave=True)
    assert i1.k_interleave and i2.k_interleave and not torch.equal(i1.tiles, w1.tiles)
    assert torch.equal(i1.scales, w1.scales)
    assert check(y, i1, i2, buf) == 5
    with pytest.raises(moe.GcMoeError, match="w1 was transformed with k_interleave=True"):
        check(y, i1, i2, fake_buffer())


def test_bundle_k_order_is_one_per_shape():
    from types import SimpleNamespace as NS

    def loader(*flags):
        recs = [NS(role="role2", arch=moe.ARCH, variant={"ranks": 1, "hidden": H, "experts": E,
                                                          **({"k_interleave": f} if f is not None else {})})
                for f in flags]
        return NS(bundle=NS(records=recs))

    assert moe._bundle_k_interleave(loader(None, None), ranks=1, hidden=H, experts=E) is False
    assert moe._bundle_k_interleave(loader(1, 1), ranks=1, hidden=H, experts=E) is True
    with pytest.raises(moe.GcMoeError, match="mix k_interleave=0 and 1"):
        moe._bundle_k_interleave(loader(1, None), ranks=1, hidden=H, experts=E)
    # session 51: role1 permutes W1's rows for the large-BM builds (role2 k_interleave 2): still one weight order
    assert moe._bundle_k_interleave(loader(1, 2), ranks=1, hidden=H, experts=E) is True


def test_role1_and_role2_agree_on_who_permutes_w1_rows():
    moe._check_row_order({"bm": 16}, {"bm": 16})
    moe._check_row_order({"bm": 16}, {"bm": 16, "k_interleave": 1})
    moe._check_row_order({"bm": 64, "k_interleave": 1}, {"bm": 64, "k_interleave": 2})
    for r1, r2 in (({"k_interleave": 1}, {"k_interleave": 1}), ({}, {"k_interleave": 2}),
                   ({"k_interleave": 1}, {})):
        with pytest.raises(moe.GcMoeError, match="disagree on who puts W1's ring rows"):
            moe._check_row_order(r1, {"bm": 64, **r2})
