"""GC-MoE as an implementation of the accuracy suite's interface (``gcmoe_runtime.accuracy.suite``):
``impl(inputs: RankInputs) -> BF16 [T, H]`` through the public API only (``gcmoe_runtime.moe``).

Use in per-rank mode (torchrun, one process per GPU, ``run_suite(..., ranks=[rank])``): every process
calls the implementation for its own rank in the same case order, so the collective operator sees
matching calls. ``GcMoeImplementation(buffer, layer)`` transforms this rank's routed experts once;
``graph=True`` gives the CUDA-graph flavour (``torch.cuda.graph`` capture per token count, replayed)
for the suite's graph-vs-eager metric.

Status: needs a bundle with the ring-consuming role2 (and role4 with shared experts); without it the
first call raises ``GcMoeError`` naming the missing variant.
"""
from __future__ import annotations

from typing import Any

import torch

from gcmoe_runtime import moe


class GcMoeImplementation:
    name = "gc-moe"

    def __init__(self, buffer: moe.GcMoeBuffer, layer: Any, *, graph: bool = False, activation_alpha: float = 1.0,
                 activation_clamp: float = 10.0):
        self.buffer = buffer
        self.graph = graph
        self.opts = dict(activation_alpha=activation_alpha, activation_clamp=activation_clamp)
        local = layer.local(buffer.rank)
        dev = buffer.device
        l1, l2 = (local.w1.to(dev), local.w1_scale.to(dev)), (local.w2.to(dev), local.w2_scale.to(dev))
        self.shared = None
        if layer.shared is None:
            self.w1, self.w2 = moe.transform_weights_for_gc_moe(l1, l2, k_interleave=buffer.k_interleave)
        else:  # role4's layout (numerics.transforms_sm90_shared), from the layer's FP8 shared weights + recipe
            s = layer.shared
            self.w1, self.w2, self.shared = moe.transform_weights_for_gc_moe(
                l1, l2, shared_weights=tuple(t.to(dev) for t in (s.w1, s.w1_scale, s.w2, s.w2_scale)),
                shared_recipe=tuple(s.recipe), k_interleave=buffer.k_interleave)
        self._graphs: dict[int, tuple] = {}

    def _stage(self, inp: Any) -> int:
        b, T = self.buffer, inp.num_tokens
        if inp.act_recipe != "fp32_k128":
            raise moe.GcMoeError(f"gcmoe (Hopper): activation recipe {inp.act_recipe!r}; the SM90 path takes "
                                 "E4M3FN with FP32 scales per 128 (fp32_k128)")
        b.x[:T].copy_(inp.x_q.to(b.device))
        b.x_sf[:T].copy_(inp.x_scale.to(b.device))
        b.topk_idx[:T].copy_(inp.topk_idx.to(b.device, torch.int32))
        b.topk_weights[:T].copy_(inp.topk_weights.to(b.device, torch.float32))
        return T

    def _call(self, y: torch.Tensor) -> None:
        moe.fp8_fp4_gc_moe(y, self.w1, self.w2, self.buffer, shared_weights=self.shared, **self.opts)

    def __call__(self, inp: Any) -> torch.Tensor:
        T = self._stage(inp)
        if not self.graph:
            y = torch.empty(T, self.buffer.hidden, dtype=torch.bfloat16, device=self.buffer.device)
            self._call(y)
            torch.cuda.synchronize(self.buffer.device)
            self.buffer.check_errors()
            return y.cpu()
        if T not in self._graphs:
            # No eager warm-up: every rank must execute the layer exactly once per case (the ranks' token
            # counts differ, so one rank may capture while another only replays). Capture executes
            # nothing; kernel loading and child-graph building happen on the host inside the capture.
            y = torch.empty(T, self.buffer.hidden, dtype=torch.bfloat16, device=self.buffer.device)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, capture_error_mode="thread_local"):
                self._call(y)
            self._graphs[T] = (g, y)
        g, y = self._graphs[T]
        g.replay()
        torch.cuda.synchronize(self.buffer.device)
        self.buffer.check_errors()
        return y.cpu()
