"""Fixtures shared by the baseline tests."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import bench_reference  # noqa: E402


@pytest.fixture
def mxfp4_reference(monkeypatch):
    """The FP32 reference with the routed weights MXFP4-rounded as ours are: what is left is E4M3 rounding of
    the activations and the intermediate, so a wrong row, expert or scale shows up plainly."""
    from gcmoe_runtime.numerics.quant import dequantize_mxfp4, quantize_mxfp4

    draw = bench_reference._weights

    def rounded(*a, **k):
        return tuple(dequantize_mxfp4(*quantize_mxfp4(w)).to(w.dtype) for w in draw(*a, **k))

    monkeypatch.setattr(bench_reference, "_weights", rounded)
    return bench_reference.reference
