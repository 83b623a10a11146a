"""What every SM90 role kernel's host side shares: validating an integer variant parameter, and the ABI plan of a
kernel whose formals are the peer descriptor, then by-value u64 workspace-region offsets (``o_<region>``), then
u64 and s32 scalars — the shape of role1-role4's parameter lists."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


def int_param(params: Mapping[str, Any], name: str, role: str, minimum: int = 1) -> int:
    """``params[name]`` as an int >= ``minimum``; a clear error naming the role, the field and the limit."""
    v = params.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise ValueError(f"{role}: variant param {name}={v!r} must be an int >= {minimum}")
    return v


def peer_abi_plan(offset_params: Sequence[str], u64: Sequence[str], s32: Sequence[str],
                  required_instructions: Sequence[str]):
    """The AbiPlan ``(peer: peer_desc, o_<offset>: u64 ..., <u64> ..., <s32> ...)``."""
    from gcmoe_build.abi.plan import AbiPlan, Formal

    formals = [Formal("peer", "peer_desc")]
    formals += [Formal(f"o_{n}", "u64") for n in offset_params]
    formals += [Formal(n, "u64") for n in u64]
    formals += [Formal(n, "s32") for n in s32]
    return AbiPlan(formals=tuple(formals), required_instructions=tuple(required_instructions))
