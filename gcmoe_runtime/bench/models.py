"""Analytic work models of paper §6.4: matmul FLOPs, HBM working set, NVLink payload, and the floor.

Definitions (one place for them; docs/PERFORMANCE.md quotes these):

* Matmul work of one routed assignment: W1 (2I x H) and W2 (H x I) -> 2*(2I*H) + 2*(H*I) = 6*H*I FLOPs.
  A shared expert applied to a token counts the same with its own intermediate size. Effective TFLOPS
  = total matmul FLOPs over all ranks / slowest-rank latency (matmul work only, paper Tables 9-10).
* HBM working set: each owner's *unique active* routed experts, counted once, in MXFP4
  (E2M1 0.5 B/element + one UE8M0 byte per 32 elements along K), plus, when shared experts are on,
  each rank's FP8 shared weights (1 B/element + one UE8M0 byte per `shared_k_group` along K).
  Working-set bandwidth = sum over ranks / slowest-rank latency. A model, not a hardware counter.
* NVLink payload: (H + H/32 + 2H) bytes per assignment whose expert lives on a *remote* rank
  (FP8 token row + its FP32-per-128 scales out, BF16 partial back). One-way payload bandwidth =
  sum over ranks / slowest-rank latency. Expected remote fraction (P-1)/P.
* Floor of a point: max over ranks of (unique active bytes / measured streaming-read bandwidth of that
  rank), plus the measured NVLink flag round trip when more than one rank communicates.
* Streamed routed bytes (a diagnostic, not the floor): role2 runs one task per (ring block, weight tile), so an
  expert whose tokens fill ``b`` blocks of BM has its weights streamed ``b`` times: sum over experts of
  ceil(tokens / BM) x its MXFP4 bytes. Unique bytes / streamed bytes is how much of the floor a tile can reach at
  best (session 30: GLM-5.2 at 64 tokens per expert, BM 64: 642 / 943 MB = 0.68).
"""
from __future__ import annotations

import dataclasses

from .shapes import ModelShape

MXFP4_SCALE_GROUP = 32


def matmul_flops(shape: ModelShape, assignments: int, shared_tokens: int = 0) -> int:
    routed = 6 * assignments * shape.hidden * shape.intermediate
    shared = 6 * shared_tokens * shape.shared_experts * shape.hidden * shape.shared_inter
    return routed + shared


def mxfp4_expert_bytes(shape: ModelShape) -> int:
    """Bytes of one routed expert's W1+W2 in MXFP4: 3*H*I elements at 0.5 B + 3*H*I/32 scale bytes."""
    elems = 3 * shape.hidden * shape.intermediate
    return elems // 2 + elems // MXFP4_SCALE_GROUP


def fp8_shared_bytes(shape: ModelShape) -> int:
    """Bytes of all shared experts' W1+W2 in FP8 with one UE8M0 scale byte per `shared_k_group` along K."""
    elems = 3 * shape.hidden * shape.shared_inter
    if elems % shape.shared_k_group:
        raise ValueError(f"model {shape.name}: 3*H*Is={elems} not divisible by shared_k_group={shape.shared_k_group}")
    return shape.shared_experts * (elems + elems // shape.shared_k_group)


def unique_active_bytes(shape: ModelShape, active_experts: int, shared: bool) -> int:
    return active_experts * mxfp4_expert_bytes(shape) + (fp8_shared_bytes(shape) if shared else 0)


def streamed_routed_bytes(shape: ModelShape, tokens_per_expert, bm: int) -> int:
    """The routed MXFP4 bytes role2 streams for these per-expert token counts at block size ``bm`` (module docstring:
    each ring block of an expert streams its weights once)."""
    if bm < 1:
        raise ValueError(f"streamed_routed_bytes: bm={bm} must be >= 1")
    return sum(-(-int(n) // bm) for n in tokens_per_expert if n > 0) * mxfp4_expert_bytes(shape)


def nvlink_bytes_per_remote_assignment(shape: ModelShape) -> int:
    h = shape.hidden
    return h + h // 32 + 2 * h


def nvlink_payload_bytes(shape: ModelShape, remote_assignments: int) -> int:
    return remote_assignments * nvlink_bytes_per_remote_assignment(shape)


def expected_remote_fraction(world: int) -> float:
    return (world - 1) / world


@dataclasses.dataclass(frozen=True)
class RankWork:
    """The per-rank counts one point's models need."""

    assignments: int
    active_experts: int
    remote_sent: int
    shared_tokens: int


@dataclasses.dataclass(frozen=True)
class PointModel:
    flops: int
    hbm_bytes: int
    nvlink_bytes: int
    max_rank_hbm_bytes: int

    def tflops(self, latency_us: float) -> float:
        return self.flops / (latency_us * 1e-6) / 1e12

    def hbm_gbps(self, latency_us: float) -> float:
        return self.hbm_bytes / (latency_us * 1e-6) / 1e9

    def nvlink_gbps(self, latency_us: float) -> float:
        return self.nvlink_bytes / (latency_us * 1e-6) / 1e9


def point_model(shape: ModelShape, ranks: list[RankWork], shared: bool) -> PointModel:
    flops = sum(matmul_flops(shape, r.assignments, r.shared_tokens if shared else 0) for r in ranks)
    per_rank = [unique_active_bytes(shape, r.active_experts, shared) for r in ranks]
    nv = sum(nvlink_payload_bytes(shape, r.remote_sent) for r in ranks)
    return PointModel(flops=flops, hbm_bytes=sum(per_rank), nvlink_bytes=nv, max_rank_hbm_bytes=max(per_rank))


def floor_us(per_rank_bytes: list[int], per_rank_read_gbps: list[float], nvlink_rtt_us: float | None) -> float:
    """max_r bytes_r / bandwidth_r, plus the NVLink round trip when more than one rank takes part."""
    if len(per_rank_bytes) != len(per_rank_read_gbps):
        raise ValueError("floor: one bandwidth per rank is needed")
    t = max(b / (bw * 1e9) * 1e6 for b, bw in zip(per_rank_bytes, per_rank_read_gbps))
    if len(per_rank_bytes) > 1:
        if nvlink_rtt_us is None:
            raise ValueError("floor: more than one rank but no measured NVLink round trip")
        t += nvlink_rtt_us
    return t
