"""What every SM90 role kernel's host side shares: the shared-memory limit, validating an integer variant parameter,
the memory scope of the cross-rank protocol, and the ABI plan of a kernel whose formals are the peer descriptor, then
by-value u64 workspace-region offsets (``o_<region>``), then u64 and s32 scalars — the shape of role1-role4's
parameter lists."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

SMEM_LIMIT = 227 * 1024  # sm_90 opt-in dynamic shared memory per block (one CTA per SM)


def int_param(params: Mapping[str, Any], name: str, role: str, minimum: int = 1) -> int:
    """``params[name]`` as an int >= ``minimum``; a clear error naming the role, the field and the limit."""
    v = params.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise ValueError(f"{role}: variant param {name}={v!r} must be an int >= {minimum}")
    return v


def peer_scope(ranks: int) -> str:
    """The PTX memory scope of the cross-rank protocol (tag-1 barrier, receive counts, combine readiness, the routing
    entries and counts peers store into our workspace): ``"sys"`` when the peers are other GPUs (NVLink stores), but
    ``"gpu"`` at P = 1, where every party of the protocol is a role kernel on this GPU. There a system-scope fence or
    acquire only waits for traffic nobody outside the GPU observes (session 18: role1's grid barriers and role3's
    readiness). The trap records keep their system-scope stores at every P: the host reads them."""
    if not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"peer_scope: ranks={ranks!r} must be an int >= 1")
    return "sys" if ranks > 1 else "gpu"


def peer_abi_plan(offset_params: Sequence[str], u64: Sequence[str], s32: Sequence[str],
                  required_instructions: Sequence[str]):
    """The AbiPlan ``(peer: peer_desc, o_<offset>: u64 ..., <u64> ..., <s32> ...)``."""
    from gcmoe_build.abi.plan import AbiPlan, Formal

    formals = [Formal("peer", "peer_desc")]
    formals += [Formal(f"o_{n}", "u64") for n in offset_params]
    formals += [Formal(n, "u64") for n in u64]
    formals += [Formal(n, "s32") for n in s32]
    return AbiPlan(formals=tuple(formals), required_instructions=tuple(required_instructions))
