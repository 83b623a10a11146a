"""Kernel registry and the kernel protocol: role name -> the module that builds its CuTe DSL kernel.

Protocol (what a kernel module provides)
----------------------------------------
A kernel module exposes ``build(variant) -> KernelBuild``. ``variant`` has ``.role``, ``.arch``
and ``.params`` (a dict of the variant's parameters; see ``gcmoe_build.variants``). ``build``
must first call ``gcmoe_build.frontend.dsl.import_dsl(variant.arch)`` and only then import
``cutlass`` (the DSL reads its target arch once, at import). It returns a :class:`KernelBuild`:

* ``host``: a ``@cute.jit`` function that launches exactly one ``@cute.kernel`` (``kernel``);
* ``kernel``: that ``@cute.kernel`` function (the frontend gives it the stable name);
* ``args``: fake arguments for ``cute.compile(host, *args)`` — ``make_fake_compact_tensor`` /
  ``make_fake_tensor`` tensors, ``make_ptr(dtype, 0, ...)`` pointers, scalars (``Int64(0)``) — no
  GPU memory is touched;
* ``name_prefix``: the stable entry-name prefix; the cubin's entry symbol is ``<name_prefix>_0``
  (``ArtifactRecord.kernel_name``, what the runtime passes to cuLibraryGetKernel);
* ``abi``: a ``gcmoe_build.abi.plan.AbiPlan``: the PTX formals in the order the DSL emits them,
  each with a name and kind (``tensormap`` + its ``TensorMapEncoding``, ``peer_desc``, ``ptr``,
  scalars), and PTX opcodes that must occur. The ABI rewrite checks the PTX against it (fail
  closed) and records the by-value schema in normalised order;
* ``launch``: ``LaunchFacts`` (block, cluster, dynamic smem bytes, grid policy) — they must equal
  what ``host`` launches with (checked: ``gcmoe_build.frontend.launch_facts``), because the runtime
  launches from the record only; each ``TensorMapEncoding`` must match the TMA atom the DSL built
  (dtype, box volume, swizzle; ``gcmoe_build.frontend.tma_facts``);
* ``ptxas_options``: whitelisted extra ptxas flags (see ``gcmoe_build.toolchain.ptxas.WHITELIST``);
* ``extra``: small JSON-able facts for ``ArtifactRecord.extra`` (e.g. the workspace layout version).

Peer descriptor: pass it to the kernel as a ``cute.Pointer`` to Int64 (trace with
``kernels.common.peer.fake_peer_desc()``), declare it ``Formal(name, "peer_desc")`` and read it only
through ``kernels.common.peer.PeerDesc`` (base / offset(r) / rank / peer_address). The ABI rewrite
turns it into the 592-byte by-value parameter. Device waits: bound them (``kernels.common.device``).

Registering a role
------------------
Add one line to :data:`ROLES`: ``"role_name": "gcmoe_build.kernels.<pkg>.<module>",``. Several
roles may share one module (``build`` then dispatches on ``variant.role``). The module is imported
lazily, so a role whose module does not exist yet is simply "no kernel yet" (:func:`has_kernel`).

Shared device helpers (peer descriptor access, timeouts that trap, inline PTX) live in
``gcmoe_build.kernels.common``. Everything under ``gcmoe_build/kernels`` and the repository
modules it imports is hashed into the kernel source hash (``gcmoe_build.toolchain.identity``).
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable

from gcmoe_runtime.artifacts.record import LaunchFacts

#: role name -> module path. One line per role; keep sorted by role family.
ROLES: dict[str, str] = {
    "role1": "gcmoe_build.kernels.sm90.role1_dispatch",
    "role2": "gcmoe_build.kernels.sm90.role2_ring",
    "role3": "gcmoe_build.kernels.sm90.role3_finalize",
    "role4": "gcmoe_build.kernels.sm90.role4_shared",
    "selftest_tma_peer": "gcmoe_build.kernels.selftest.tma_peer",
    "selftest_handshake_producer": "gcmoe_build.kernels.selftest.handshake",
    "selftest_handshake_consumer": "gcmoe_build.kernels.selftest.handshake",
    "selftest_handshake_finalize": "gcmoe_build.kernels.selftest.handshake",
}


@dataclass(frozen=True)
class KernelBuild:
    host: Callable[..., Any]
    kernel: Callable[..., Any]
    args: tuple
    name_prefix: str
    abi: Any  # gcmoe_build.abi.plan.AbiPlan (imported lazily: keep this module DSL-free)
    launch: LaunchFacts
    ptxas_options: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kernel_name(self) -> str:
        return f"{self.name_prefix}_0"


class UnknownRoleError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def has_kernel(role: str) -> bool:
    """True when ``role`` is registered and its module exists (it may still fail to build)."""
    path = ROLES.get(role)
    return path is not None and importlib.util.find_spec(path) is not None


def kernel_module(role: str):
    if role not in ROLES:
        raise UnknownRoleError(f"no kernel is registered for role {role!r}; registered: {sorted(ROLES)}")
    return importlib.import_module(ROLES[role])


def build_kernel(variant: Any) -> KernelBuild:
    """Call the role's ``build(variant)`` and check it returned a KernelBuild."""
    kb = kernel_module(variant.role).build(variant)
    if not isinstance(kb, KernelBuild):
        raise TypeError(f"role {variant.role!r}: build() returned {type(kb).__name__}, expected KernelBuild")
    return kb
