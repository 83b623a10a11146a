"""Model shapes for the benchmark: the few fields the harness needs, read from a manifest or given.

The manifests under ``manifests/`` are the one place where model shapes are defined; the validated
schema lives in ``gcmoe_build.manifest``, which the runtime must not import. This module is a
deliberately small reader of *only* the shape fields, with PyYAML. It accepts the shape either at the
top level or under a ``model:`` mapping, and these spellings of each field (first one found wins):

    hidden:            hidden, hidden_size, H
    intermediate:      intermediate, intermediate_size, moe_intermediate_size, I
    experts:           experts, num_experts, n_experts, E
    top_k:             top_k, topk, k
    shared_experts:    shared_experts, num_shared_experts, n_shared_experts        (default 0)
    shared_k_group:    shared_k_group, shared_weight_k_group                       (default 32)
    shared_intermediate: shared_intermediate, shared_intermediate_size             (default intermediate)
    capacity:          capacity, token_capacity, per_rank_capacity, or the first
                       ``targets[].capacity``                                         (default 256)

``shared_experts`` may also be a mapping (``{count: 1, k_group: 128, ...}``). Anything else in the file
is ignored here: validating the manifest is the builder's job, and a missing or non-positive shape
field is an error naming the file and the field.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

import yaml

MANIFEST_DIR = Path(__file__).resolve().parents[2] / "manifests"


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """Shape of one MoE layer. Sizes in elements; `shared_k_group` is the shared-weight scale group along K."""

    name: str
    hidden: int
    intermediate: int
    experts: int
    top_k: int
    shared_experts: int = 0
    shared_k_group: int = 32
    shared_intermediate: int | None = None
    capacity: int = 256

    def __post_init__(self) -> None:
        for f in ("hidden", "intermediate", "experts", "top_k", "shared_k_group", "capacity"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"model {self.name!r}: field {f}={v!r} must be a positive integer")
        if self.shared_experts < 0:
            raise ValueError(f"model {self.name!r}: shared_experts={self.shared_experts} must be >= 0")
        if self.top_k > self.experts:
            raise ValueError(f"model {self.name!r}: top_k={self.top_k} exceeds experts={self.experts}")
        if self.hidden % 32 or self.intermediate % 32:
            raise ValueError(f"model {self.name!r}: hidden={self.hidden} and intermediate={self.intermediate} "
                             "must be multiples of 32 (the MXFP4 scale group)")

    @property
    def shared_inter(self) -> int:
        return self.shared_intermediate if self.shared_intermediate is not None else self.intermediate

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["shared_intermediate"] = self.shared_inter
        return d


_ALIASES = {
    "hidden": ("hidden", "hidden_size", "H"),
    "intermediate": ("intermediate", "intermediate_size", "moe_intermediate_size", "I"),
    "experts": ("experts", "num_experts", "n_experts", "E"),
    "top_k": ("top_k", "topk", "k"),
    "shared_experts": ("shared_experts", "num_shared_experts", "n_shared_experts"),
    "shared_k_group": ("shared_k_group", "shared_weight_k_group"),
    "shared_intermediate": ("shared_intermediate", "shared_intermediate_size"),
    "capacity": ("capacity", "token_capacity", "per_rank_capacity"),
}
_REQUIRED = ("hidden", "intermediate", "experts", "top_k")


def _find(maps: list[Mapping[str, Any]], field: str):
    for m in maps:
        for alias in _ALIASES[field]:
            if alias in m:
                return m[alias]
    return None


def shape_from_mapping(name: str, doc: Mapping[str, Any], source: str = "<mapping>") -> ModelShape:
    """Pick the shape fields out of a parsed manifest (see the module docstring for the spellings)."""
    if not isinstance(doc, Mapping):
        raise ValueError(f"{source}: expected a YAML mapping at the top level, got {type(doc).__name__}")
    maps: list[Mapping[str, Any]] = []
    for key in ("model", "shape"):
        if isinstance(doc.get(key), Mapping):
            maps.append(doc[key])
    maps.append(doc)
    vals: dict[str, Any] = {}
    for f in _ALIASES:
        v = _find(maps, f)
        if f == "shared_experts" and isinstance(v, Mapping):
            sub = v
            v = sub.get("count", sub.get("num", sub.get("n", 1 if sub else 0)))
            if "k_group" in sub and _find(maps, "shared_k_group") is None:
                vals["shared_k_group"] = sub["k_group"]
            if "intermediate" in sub and _find(maps, "shared_intermediate") is None:
                vals["shared_intermediate"] = sub["intermediate"]
        if v is not None and f not in vals:
            vals[f] = v
    targets = doc.get("targets")
    if "capacity" not in vals and isinstance(targets, list):
        caps = [t.get("capacity") for t in targets if isinstance(t, Mapping) and "capacity" in t]
        if caps:
            vals["capacity"] = caps[0]   # the first target's per-rank capacity
    for f in _REQUIRED:
        if f not in vals:
            raise ValueError(f"{source}: model shape field {f!r} not found (accepted spellings: {_ALIASES[f]})")
    for f, v in vals.items():
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{source}: field {f}={v!r} must be an integer")
    display = (doc.get("name") if isinstance(doc.get("name"), str) else None) or name
    return ModelShape(name=display, **vals)


def load_manifest_shape(path: str | os.PathLike) -> ModelShape:
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise ValueError(f"{p}: malformed YAML: {e}") from e
    return shape_from_mapping(p.stem, doc, str(p))


def parse_shape_spec(spec: str) -> ModelShape:
    """`NAME:H=5120,I=2304,E=384,k=6[,shared=1,kgroup=32,cap=256]` — a shape given on the command line."""
    if ":" not in spec:
        raise ValueError(f"shape spec {spec!r}: expected NAME:H=..,I=..,E=..,k=..")
    name, body = spec.split(":", 1)
    keymap = {"H": "hidden", "I": "intermediate", "E": "experts", "k": "top_k", "shared": "shared_experts",
              "kgroup": "shared_k_group", "Is": "shared_intermediate", "cap": "capacity"}
    vals: dict[str, int] = {}
    for item in filter(None, body.split(",")):
        if "=" not in item:
            raise ValueError(f"shape spec {spec!r}: item {item!r} is not KEY=VALUE")
        k, v = item.split("=", 1)
        if k not in keymap:
            raise ValueError(f"shape spec {spec!r}: unknown key {k!r} (known: {sorted(keymap)})")
        try:
            vals[keymap[k]] = int(v)
        except ValueError:
            raise ValueError(f"shape spec {spec!r}: {k}={v!r} is not an integer") from None
    for f in _REQUIRED:
        if f not in vals:
            raise ValueError(f"shape spec {spec!r}: missing {f}")
    return ModelShape(name=name, **vals)


def resolve_model(arg: str, manifest_dir: Path = MANIFEST_DIR) -> ModelShape:
    """A CLI model argument: a shape spec (contains ':'), a YAML path, or a manifest name in manifests/."""
    if ":" in arg and not arg.endswith((".yaml", ".yml")):
        return parse_shape_spec(arg)
    p = Path(arg)
    if p.suffix in (".yaml", ".yml"):
        if not p.is_file():
            raise FileNotFoundError(f"manifest {p} does not exist")
        return load_manifest_shape(p)
    for cand in (manifest_dir / f"{arg}.yaml", manifest_dir / f"{arg}.yml"):
        if cand.is_file():
            return load_manifest_shape(cand)
    raise FileNotFoundError(f"model {arg!r}: no {manifest_dir}/{arg}.yaml; pass a YAML path or a shape spec "
                            "NAME:H=..,I=..,E=..,k=..")
