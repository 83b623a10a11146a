"""A kernel's ABI plan: what each PTX formal the DSL emits *is*, declared by the kernel author.

The DSL flattens a ``@cute.kernel``'s arguments into PTX formals (a TMA atom -> one 128-byte
descriptor, a tensor with a static layout -> one pointer, each dynamic shape mode -> one int32,
a ``cute.Pointer`` -> one pointer formal, constexprs -> nothing). The plan lists those formals in
the order the DSL emits them, each with a name and a kind from ``gcmoe_runtime.abi.PARAM_KINDS``:

* ``tensormap``: a TMA descriptor; carries its :class:`TensorMapEncoding` (what the runtime passes
  to cuTensorMapEncodeTiled). Ends up ``.param .align 64 .b8 name[128]``.
* ``peer_desc``: the peer table, passed in the DSL as a ``cute.Pointer`` to Int64 (see
  ``gcmoe_build.kernels.common.peer``). Ends up ``.param .align 8 .b8 name[592]``.
* ``ptr`` / scalars: left as emitted; their size and alignment are checked.

``required_instructions`` lists PTX opcode prefixes the kernel must contain (e.g. ``wgmma.mma_async``,
``cp.async.bulk.tensor``): a cheap check that the DSL produced the kernel we think it did.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from gcmoe_runtime.abi import PARAM_KINDS
from gcmoe_runtime.artifacts.record import TensorMapEncoding


class AbiPlanError(ValueError):
    """The plan itself is malformed (a kernel author's mistake, found before any PTX is read)."""


@dataclass(frozen=True)
class Formal:
    name: str
    kind: str
    tensormap: TensorMapEncoding | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", self.name):
            raise AbiPlanError(f"formal name {self.name!r} must be a lower-case identifier")
        if self.kind not in PARAM_KINDS:
            raise AbiPlanError(f"formal {self.name!r}: unknown kind {self.kind!r}; known: {PARAM_KINDS}")
        if (self.kind == "tensormap") != (self.tensormap is not None):
            raise AbiPlanError(f"formal {self.name!r}: a TensorMapEncoding is required exactly for kind 'tensormap'")
        if self.tensormap is not None and self.tensormap.param != self.name:
            raise AbiPlanError(
                f"formal {self.name!r}: its TensorMapEncoding names param {self.tensormap.param!r}"
            )


@dataclass(frozen=True)
class AbiPlan:
    formals: tuple[Formal, ...]  # in DSL emission order
    required_instructions: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        names = [f.name for f in self.formals]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise AbiPlanError(f"ABI plan names formals more than once: {dup}")
        if sum(f.kind == "peer_desc" for f in self.formals) > 1:
            raise AbiPlanError("ABI plan declares more than one peer_desc formal")

    @property
    def tensormaps(self) -> tuple[TensorMapEncoding, ...]:
        return tuple(f.tensormap for f in self.formals if f.tensormap is not None)
