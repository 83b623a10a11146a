"""load_manifest: YAML file -> validated Manifest, or one ManifestError naming every problem.

Failures, each reported with file, field, value, limit and (where there is one) the YAML line:
unreadable file, empty file, malformed YAML, duplicate keys, merge keys, unknown keys, missing keys,
wrong types (strict: no silent coercion), and every Appendix A / own constraint.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from pydantic import BaseModel, ValidationError

from gcmoe_build.manifest.errors import MISSING, ManifestError, Problem
from gcmoe_build.manifest.schema import Manifest
from gcmoe_build.manifest.yaml_source import format_path, line_of, parse_yaml

_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "model_type": "a mapping",
    "dict_type": "a mapping",
    "model_attributes_type": "a mapping",
    "none_required": "null",
}


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate one manifest file. Raises ManifestError (a ValueError) on any problem."""
    file = os.fspath(path)
    try:
        with open(file, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ManifestError.single(file, "", file, "a readable file", e.strerror or str(e)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError.single(file, "", raw[max(0, e.start - 10): e.end + 10], "UTF-8 text",
                                   f"not UTF-8 at byte {e.start}") from None
    return manifest_from_text(text, file)


def manifest_from_text(text: str, file: str = "<text>") -> Manifest:
    data, lines = parse_yaml(text, file)
    return manifest_from_data(data, file, lines)


def manifest_from_data(data: Mapping[str, Any], file: str = "<data>",
                       lines: Mapping[tuple, int] | None = None) -> Manifest:
    """Validate already-parsed data (e.g. a dict built in a test); ``lines`` maps paths to YAML lines."""
    lines = dict(lines or {})
    try:
        return Manifest.model_validate(data)
    except ValidationError as e:
        raise ManifestError(file, _problems(e, data, lines)) from None


def _problems(err: ValidationError, data: Any, lines: dict[tuple, int]) -> list[Problem]:
    out: list[Problem] = []
    for e in err.errors(include_url=False):
        if e["type"] == "manifest_constraint":
            for loc, value, limit, reason in e["ctx"]["problems"]:
                out.append(Problem(format_path(loc), value, limit, reason, line_of(lines, loc)))
            continue
        loc = tuple(e["loc"])
        field = format_path(loc)
        line = line_of(lines, loc)
        kind = e["type"]
        if kind == "missing":
            out.append(Problem(field, MISSING, "a required key", "missing", line))
        elif kind == "extra_forbidden":
            known = _known_keys(loc[:-1])
            out.append(Problem(field, e["input"], f"one of the known keys {known}", "unknown key", line))
        elif kind == "literal_error":
            out.append(Problem(field, e["input"], f"one of {e['ctx']['expected']}", "unsupported value", line))
        elif kind in _EXPECTED or kind == "bm_spec":
            expected = _EXPECTED.get(kind) or e["ctx"]["expected"]
            got = type(e["input"]).__name__
            out.append(Problem(field, e["input"], expected, f"wrong type ({got})", line))
        else:  # anything else pydantic may report: keep its message, never drop it
            out.append(Problem(field, e.get("input"), e["msg"], kind, line))
    return out


def _known_keys(loc: tuple) -> list[str]:
    """The field names of the schema model at ``loc`` (list indices skipped)."""
    model: type[BaseModel] = Manifest
    for part in loc:
        if isinstance(part, int):
            continue
        info = model.model_fields.get(part)
        sub = _model_in(info.annotation) if info else None
        if sub is None:
            return []
        model = sub
    return sorted(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None
