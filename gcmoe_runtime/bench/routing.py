"""Seeded routing and the per-rank dispatch plan: the identical inputs every implementation gets.

Layout. `ep` is the expert-parallel degree whose per-rank share is measured; `world` the number of
processes (GPUs) that actually run. Virtual rank v owns tokens [v*T, (v+1)*T) and experts
[v*E/ep, (v+1)*E/ep). Two layouts are supported:

* world == ep: real expert parallelism; rank r's tokens are dispatched to their experts' owners and the
  partials are combined back (the implementations move the bytes, e.g. NCCL all-to-all).
* world == 1 < ep: one GPU measures one rank's share at EP degree `ep` (e.g. E/8 experts at ep=8). All
  ep*T tokens are routed; the assignments that hit rank 0's experts are computed there, their token rows
  are resident (already dispatched) and their partials are reduced locally. No communication is timed.

Routing is random top-k per token without replacement (uniform over E), with softmax-normalised
weights, from a CPU generator seeded by (seed, T): the same for every implementation and every rank.
Activations are seeded standard-normal BF16 rows.
"""
from __future__ import annotations

import dataclasses

import torch

from .shapes import ModelShape


@dataclasses.dataclass(frozen=True)
class Layout:
    world: int
    ep: int

    def __post_init__(self) -> None:
        if self.world < 1 or self.ep < 1:
            raise ValueError(f"layout world={self.world} ep={self.ep}: both must be >= 1")
        if not (self.world == self.ep or self.world == 1):
            raise ValueError(f"layout world={self.world} ep={self.ep}: need world == ep (real expert parallelism) "
                             "or world == 1 (one rank's share at degree ep)")

    @property
    def emulated(self) -> bool:
        return self.world == 1 and self.ep > 1


def route(shape: ModelShape, tokens_total: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k expert ids (int64, [n, k]) and weights (float32, rows sum to 1) for `tokens_total` tokens."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(tokens_total, shape.experts, generator=g)
    ids = scores.topk(shape.top_k, dim=1).indices
    logits = torch.randn(tokens_total, shape.top_k, generator=g)
    return ids.to(torch.int64), torch.softmax(logits, dim=1).to(torch.float32)


@dataclasses.dataclass
class RankPlan:
    """What one rank sends, receives and computes at one point. All tensors on the CPU.

    Arrival order of received assignments: by source rank, then by expert, then by (token, slot)
    — the order each source sends them in. `sort_perm[i]` is the arrival index of the i-th row
    when rows are grouped by local expert (stable), `group_sizes` the rows per local expert.
    """

    rank: int
    local_experts: int
    expert_lo: int
    resident_tokens: int          # rows of `x` this rank holds (own tokens, or all tokens when emulated)
    resident_token_lo: int        # global index of resident row 0
    # send side (world == ep): this rank's own (token, slot) assignments ordered by (dest, expert)
    send_token: torch.Tensor      # int64 [n_send] resident row index
    send_weight: torch.Tensor     # float32 [n_send]
    send_counts: list[int]        # per destination rank
    # receive side
    recv_counts: list[int]        # per source rank (emulated: one entry, all assignments)
    recv_expert: torch.Tensor     # int64 [n_recv] local expert index, arrival order
    recv_token: torch.Tensor      # int64 [n_recv] resident row index (emulated layout; -1 when remote)
    recv_weight: torch.Tensor     # float32 [n_recv]
    sort_perm: torch.Tensor       # int64 [n_recv]
    group_sizes: torch.Tensor     # int64 [local_experts]

    @property
    def assignments(self) -> int:
        return int(self.recv_expert.numel())

    @property
    def active_experts(self) -> int:
        return int((self.group_sizes > 0).sum())

    @property
    def remote_sent(self) -> int:
        """Own assignments whose expert lives on another (real) rank."""
        if len(self.send_counts) <= 1:
            return 0
        return int(sum(self.send_counts) - self.send_counts[self.rank])


@dataclasses.dataclass
class PointInputs:
    """The inputs of one (model, T, layout, seed) point for one rank."""

    shape: ModelShape
    tokens_per_rank: int
    layout: Layout
    seed: int
    topk_ids: torch.Tensor        # [ep*T, k] global expert ids for all tokens
    topk_weights: torch.Tensor    # [ep*T, k]
    plan: RankPlan
    own_token_lo: int             # global index of this rank's own first token (shared expert input)

    def activations(self, device, dtype=torch.bfloat16) -> torch.Tensor:
        """Resident token rows [resident_tokens, H], seeded per (seed, T) — the same on every call."""
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + 7919 * self.tokens_per_rank + 1)
        x = torch.randn(self.layout.ep * self.tokens_per_rank, self.shape.hidden, generator=g)
        p = self.plan
        return x[p.resident_token_lo:p.resident_token_lo + p.resident_tokens].to(device=device, dtype=dtype)


def point_seed(seed: int, tokens_per_rank: int) -> int:
    return seed * 65_537 + tokens_per_rank


def build_point(shape: ModelShape, tokens_per_rank: int, layout: Layout, rank: int, seed: int) -> PointInputs:
    if tokens_per_rank < 1:
        raise ValueError(f"tokens per rank T={tokens_per_rank} must be >= 1")
    if tokens_per_rank > shape.capacity:
        raise ValueError(f"tokens per rank T={tokens_per_rank} exceeds the per-rank capacity {shape.capacity}")
    if shape.experts % layout.ep:
        raise ValueError(f"experts E={shape.experts} not divisible by the EP degree {layout.ep}")
    if not 0 <= rank < layout.world:
        raise ValueError(f"rank {rank} outside world size {layout.world}")
    T, ep = tokens_per_rank, layout.ep
    ids, w = route(shape, ep * T, point_seed(seed, T))
    plan = _plan(ids, w, shape.experts // ep, T, layout, rank)
    return PointInputs(shape, T, layout, seed, ids, w, plan, own_token_lo=rank * T)


def _plan(ids: torch.Tensor, w: torch.Tensor, e_loc: int, T: int, layout: Layout, rank: int) -> RankPlan:
    n_tok, k = ids.shape
    tok = torch.arange(n_tok).repeat_interleave(k)
    flat_e = ids.reshape(-1)
    flat_w = w.reshape(-1)
    owner = flat_e // e_loc
    src = tok // T
    # order key: (source, owner, expert, token*k+slot) — the order each source sends its rows in
    order_key = ((src * layout.ep + owner) * (e_loc * layout.ep) + flat_e) * (n_tok * k) + torch.arange(n_tok * k)
    order = torch.argsort(order_key)
    tok, flat_e, flat_w, owner, src = tok[order], flat_e[order], flat_w[order], owner[order], src[order]

    if layout.emulated:
        mine = owner == rank
        r_tok, r_e, r_w = tok[mine], flat_e[mine] - rank * e_loc, flat_w[mine]
        recv_counts = [int(mine.sum())]
        send_token = torch.empty(0, dtype=torch.int64)
        send_weight = torch.empty(0, dtype=torch.float32)
        send_counts = [0]
        resident, res_lo = n_tok, 0
        recv_token = r_tok
    else:
        own = src == rank
        send_token = tok[own] - rank * T
        send_weight = flat_w[own]
        send_counts = [int((owner[own] == d).sum()) for d in range(layout.world)]
        mine = owner == rank
        r_e, r_w = flat_e[mine] - rank * e_loc, flat_w[mine]
        recv_counts = [int((src[mine] == s).sum()) for s in range(layout.world)]
        resident, res_lo = T, rank * T
        # rows from this rank's own tokens stay resident; remote ones have no local row
        r_src, r_tok = src[mine], tok[mine]
        recv_token = torch.where(r_src == rank, r_tok - rank * T, torch.full_like(r_tok, -1))
    sort_perm = torch.argsort(r_e, stable=True)
    group_sizes = torch.bincount(r_e, minlength=e_loc)
    return RankPlan(rank=rank, local_experts=e_loc, expert_lo=rank * e_loc, resident_tokens=resident,
                    resident_token_lo=res_lo, send_token=send_token, send_weight=send_weight,
                    send_counts=send_counts, recv_counts=recv_counts, recv_expert=r_e, recv_token=recv_token,
                    recv_weight=r_w, sort_perm=sort_perm, group_sizes=group_sizes)
