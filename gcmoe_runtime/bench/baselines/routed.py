"""The dispatch/combine skeleton of one MoE layer call that every grouped-GEMM baseline shares.

It owns moving rows to their experts and partials back (gather at P=1, NCCL all-to-all at P>1) and the
routing-weighted FP32 combine; a baseline supplies only `experts(a, sa)`: rows in expert order (+ their
scales) -> BF16 partials in the same order. Used by `torch_grouped` (torch-fp8 / torch-bf16) and `humming`
(humming-fp8-mxfp4), so those compare their GEMMs over the same data movement.

  world == 1 (one rank's share): gather the resident rows of the local assignments in expert order
    (index_select), experts(), scatter-add the routing-weighted partials (FP32).
  world > 1: gather own assignment rows in (destination, expert) order, NCCL `all_to_all_single` the
    rows (+ their FP32 scales, any trailing shape), sort received rows by expert, experts(), unsort,
    `all_to_all_single` the BF16 partials back, scatter-add with routing weights at the source.
    The split sizes come from the point's fixed routing at capture time: the count exchange a dynamic
    caller would need (a host sync, not capturable) is left out, which favours the baselines.
"""
from __future__ import annotations

from typing import Callable

import torch

from ..routing import PointInputs

FP8 = torch.float8_e4m3fn

Experts = Callable[[torch.Tensor, "torch.Tensor | None"], torch.Tensor]


def take_rows(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """index_select that also works for E4M3 (through a byte view: not every build indexes FP8)."""
    if t.dtype == FP8:
        return t.view(torch.uint8).index_select(0, idx).view(FP8)
    return t.index_select(0, idx)


def routed_step(point: PointInputs, dev, world: int, group, xq: torch.Tensor, xs: torch.Tensor | None,
                experts: Experts, extra: Callable[[torch.Tensor], None] | None = None
                ) -> tuple[Callable[[], None], torch.Tensor]:
    """(step, out): `step()` runs one layer call into `out` (BF16 [resident_tokens, H]).

    xq: resident rows [R, H] (E4M3 or BF16); xs: their scales [R, ...] (FP32) or None; `extra(out_acc)`
    adds anything beside the routed experts (the torch baselines' shared expert) into the FP32 sum."""
    p = point.plan
    H = xq.shape[1]
    M = p.assignments
    out_acc = torch.zeros(p.resident_tokens, H, dtype=torch.float32, device=dev)
    out = torch.zeros(p.resident_tokens, H, dtype=torch.bfloat16, device=dev)

    if world == 1:
        gather = p.recv_token[p.sort_perm].to(dev)
        w_sorted = p.recv_weight[p.sort_perm].to(dev).unsqueeze(1)

        def step() -> None:
            out_acc.zero_()
            if M:
                a = take_rows(xq, gather)
                sa = xs.index_select(0, gather) if xs is not None else None
                out_acc.index_add_(0, gather, experts(a, sa).float() * w_sorted)
            if extra is not None:
                extra(out_acc)
            out.copy_(out_acc)
        return step, out

    import torch.distributed as dist

    sort_perm = p.sort_perm.to(dev)
    send_tok = p.send_token.to(dev)
    send_w = p.send_weight.to(dev).unsqueeze(1)
    n_send = int(send_tok.numel())
    # E4M3 rows travel as bytes: NCCL/gloo have no FP8 type
    row_dtype = torch.uint8 if xq.dtype == FP8 else xq.dtype
    recv_rows = torch.empty(M, H, dtype=row_dtype, device=dev)
    recv_s = None if xs is None else torch.empty((M, *xs.shape[1:]), dtype=xs.dtype, device=dev)
    unsorted = torch.empty(M, H, dtype=torch.bfloat16, device=dev)
    back = torch.empty(n_send, H, dtype=torch.bfloat16, device=dev)
    sc, rc = list(p.send_counts), list(p.recv_counts)

    def step() -> None:
        out_acc.zero_()
        rows = take_rows(xq, send_tok)
        dist.all_to_all_single(recv_rows, rows.view(row_dtype), rc, sc, group=group)
        if xs is not None:
            dist.all_to_all_single(recv_s, xs.index_select(0, send_tok), rc, sc, group=group)
        if M:
            a = recv_rows.index_select(0, sort_perm)
            a = a.view(FP8) if row_dtype == torch.uint8 else a
            sa = recv_s.index_select(0, sort_perm) if recv_s is not None else None
            unsorted.index_copy_(0, sort_perm, experts(a, sa))
        dist.all_to_all_single(back, unsorted, sc, rc, group=group)
        out_acc.index_add_(0, send_tok, back.float() * send_w)
        if extra is not None:
            extra(out_acc)
        out.copy_(out_acc)
    return step, out
