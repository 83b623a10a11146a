"""The plug-in interface: every measured thing (our operator, each baseline) is an `Implementation`.

The harness owns routing, inputs, graph capture, windows, statistics and reporting; an implementation
owns only its weights (in its own format, from the given seed) and the work of one MoE layer call.

Life cycle, per rank process (the harness calls, in this order):

    impl.unsupported(shape, layout, shared) -> None | "reason"     # skipped points are recorded, not faked
    impl.load_model(shape, layout, ctx, shared)                     # once per model: weights, transforms
    for each T:  prep = impl.prepare(point)                         # per point: buffers, plans
                 prep.step()  (captured by the harness into a CUDA graph, or prep.replay used as is)
                 prep.close()
    impl.unload_model()

`Prepared.step()` enqueues exactly one layer invocation on the current stream, with static shapes and
no host synchronisation, so that it can be captured. An implementation that builds its own graph (the
gc-moe runtime replays a cached 3/4-node layer graph) sets `Prepared.replay` to a callable that
launches one invocation; the harness then times that instead of capturing `step`.
`Prepared.output` is the layer output (BF16, [resident_tokens, H], rows in resident order); the
harness compares implementations against each other with it (cosine), as a sanity check only.

Registering: `register("name", factory)` here, or name any `module:attr` factory on the command line
(`--impl gcmoe_runtime.some.module:make_impl`). A factory takes no arguments. A *parametric* factory
(`register_parametric("name", factory(arg))`) is named `name@arg` (e.g. `gc-moe@16`: the dispatch-SM
request); `module:attr@arg` calls `attr(arg)` likewise. The argument is a string; the factory checks it.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, Protocol

from .routing import Layout, PointInputs
from .shapes import ModelShape


@dataclasses.dataclass
class RankContext:
    rank: int
    world: int
    device: Any                  # torch.device
    group: Any = None            # torch.distributed process group (None when world == 1)
    seed: int = 0


@dataclasses.dataclass
class Prepared:
    step: Callable[[], None]
    output: Any = None
    replay: Callable[[], None] | None = None
    info: dict = dataclasses.field(default_factory=dict)
    close: Callable[[], None] = lambda: None


class Implementation(Protocol):
    name: str
    precision: str               # stated in the report: what each operand and the output are

    def unsupported(self, shape: ModelShape, layout: Layout, shared: bool) -> str | None: ...

    def load_model(self, shape: ModelShape, layout: Layout, ctx: RankContext, shared: bool) -> None: ...

    def prepare(self, point: PointInputs) -> Prepared: ...

    def unload_model(self) -> None: ...

    def describe(self) -> dict: ...


_REGISTRY: dict[str, Callable[[], Implementation]] = {}
_PARAMETRIC: dict[str, Callable[[str], Implementation]] = {}


def register(name: str, factory: Callable[[], Implementation]) -> None:
    if name in _REGISTRY and _REGISTRY[name] is not factory:
        raise ValueError(f"implementation {name!r} already registered")
    _REGISTRY[name] = factory


def register_parametric(name: str, factory: Callable[[str], Implementation]) -> None:
    if name in _PARAMETRIC and _PARAMETRIC[name] is not factory:
        raise ValueError(f"parametric implementation {name!r} already registered")
    _PARAMETRIC[name] = factory


def registered() -> list[str]:
    _builtin()
    return sorted(_REGISTRY) + sorted(f"{n}@ARG" for n in _PARAMETRIC)


def make(spec: str) -> Implementation:
    """A registered name, or `module:attr` naming a factory."""
    _builtin()
    if spec in _REGISTRY:
        return _REGISTRY[spec]()
    base, at, arg = spec.partition("@")
    if at and not arg:
        raise ValueError(f"implementation {spec!r}: empty argument after '@'")
    if at and base in _PARAMETRIC:
        return _PARAMETRIC[base](arg)
    if ":" in base:
        mod, attr = base.split(":", 1)
        try:
            factory = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"implementation {spec!r}: cannot import {attr} from {mod}: {e}") from e
        return factory(arg) if at else factory()
    raise ValueError(f"unknown implementation {spec!r}; registered: {registered()}; or give module:factory")


def _builtin() -> None:
    from . import impl_gcmoe  # noqa: F401  (registers itself)
    from .baselines import humming, torch_grouped  # noqa: F401  (register themselves; humming imports lazily)
    from .baselines import deepgemm_mega  # noqa: F401  (registers itself; imports deep_gemm lazily)
    from .baselines import triton_ogs  # noqa: F401  (registers itself; imports triton_kernels lazily)
