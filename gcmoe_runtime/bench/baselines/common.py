"""What the grouped-GEMM baselines share besides data movement (that is `routed.py`): the seeded routed-weight
draw of one rank's share (the same numbers for every baseline, so their outputs are comparable), its MXFP4
quantisation as for gc-moe, and the holder of the one loaded model."""
from __future__ import annotations

import torch

from ..routing import Layout
from ..shapes import ModelShape


def routed_share(shape: ModelShape, layout: Layout, ctx) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's ``E / ep`` routed experts as BF16 ``(w1 [G, 2I, H], w2 [G, H, I])`` on ``ctx.device``; the
    seed depends on the run seed and the rank only."""
    from .torch_grouped import _weights

    return _weights(shape, shape.experts // layout.ep, shape.intermediate, 1000 + 7 * ctx.seed + ctx.rank,
                    ctx.device)


def routed_share_mxfp4(shape: ModelShape, layout: Layout, ctx):
    """:func:`routed_share` quantised to MXFP4 exactly as for gc-moe (``impl_gcmoe._quant_routed``):
    ``((q1, s1), (q2, s2))``, packed E2M1 ``uint8 [G, N, K/2]`` and UE8M0 ``uint8 [G, N, K/32]``."""
    from ..impl_gcmoe import _quant_routed

    w1, w2 = routed_share(shape, layout, ctx)
    l1 = _quant_routed(w1)
    del w1  # the BF16 share of a production model is GBs: free each matrix before the next
    return l1, _quant_routed(w2)


class ModelHolder:
    """The one model a baseline has loaded (``load_model`` sets ``self._m``); ``prepare`` reads it via
    :meth:`model`."""

    name = "baseline"
    _m = None

    def model(self) -> dict:
        if self._m is None:
            raise RuntimeError(f"{self.name}: prepare() before load_model()")
        return self._m

    def unload_model(self) -> None:
        self._m = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
