"""Strict YAML reading for manifests: plain data plus the line of every value, nothing silently dropped.

PyYAML keeps the last of two equal keys, accepts an empty file as ``None`` and merges ``<<`` keys
without a word; a manifest reader must refuse all three. We compose the node tree ourselves (safe
scalar resolution only: str, int, float, bool, null), reject duplicate keys, non-string keys, merge
keys, recursive aliases and multiple documents, and record ``path -> line`` so that a schema error
deep in the file can still name the line it came from.
"""
from __future__ import annotations

from typing import Any

import yaml

from gcmoe_build.manifest.errors import ManifestError

Path = tuple  # a location: keys (str) and list indices (int)

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def parse_yaml(text: str, file: str) -> tuple[Any, dict[Path, int]]:
    """Parse one YAML document into plain Python data and a map from value path to 1-based line."""
    if not text.strip() or all(not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()):
        raise ManifestError.single(file, "", text[:40], "a non-empty YAML mapping", "the manifest is empty")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ManifestError.single(file, "", None, "a non-empty YAML mapping", "the manifest is empty")
        lines: dict[Path, int] = {}
        data = _build(node, (), lines, loader, file, frozenset())
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        what = str(e.problem or e.context or "unparseable")
        if e.context and e.problem:  # e.g. "while scanning a simple key" started on an earlier line
            ctx_line = e.context_mark.line + 1 if e.context_mark is not None else None
            where = f" started on line {ctx_line}" if ctx_line and ctx_line != line else ""
            what = f"{e.problem} ({e.context}{where})"
        raise ManifestError.single(file, "", _line_text(text, line), "well-formed YAML",
                                   f"malformed YAML: {what}", line) from None
    except yaml.YAMLError as e:  # unmarked reader/scanner errors (e.g. bad characters)
        raise ManifestError.single(file, "", "", "well-formed YAML", f"malformed YAML: {e}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ManifestError.single(file, "", data, "a YAML mapping at the top level",
                                   f"the document is a {type(data).__name__}", node.start_mark.line + 1)
    return data, lines


def line_of(lines: dict[Path, int], loc: Path) -> int | None:
    """Line of the deepest recorded prefix of ``loc`` (a missing key reports its parent's line)."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def format_path(loc: Path) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _line_text(text: str, line: int | None) -> str:
    if not line:
        return ""
    rows = text.splitlines()
    return rows[line - 1].strip() if 0 < line <= len(rows) else ""


def _build(node: yaml.Node, path: Path, lines: dict[Path, int], loader: yaml.SafeLoader, file: str,
           active: frozenset) -> Any:
    line = node.start_mark.line + 1
    lines[path] = line
    if id(node) in active:
        raise ManifestError.single(file, format_path(path), "<alias>", "a non-recursive structure",
                                   "recursive YAML alias", line)
    active = active | {id(node)}
    if isinstance(node, yaml.MappingNode):
        if node.tag != _MAP_TAG:
            raise ManifestError.single(file, format_path(path), node.tag, "no explicit YAML tags",
                                       "unsupported tag on a mapping", line)
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            kline = key_node.start_mark.line + 1
            if key_node.tag == _MERGE_TAG:
                raise ManifestError.single(file, format_path(path + ("<<",)), "<<", "no YAML merge keys",
                                           "merge keys hide where a value comes from", kline)
            if not isinstance(key_node, yaml.ScalarNode):
                raise ManifestError.single(file, format_path(path), "<complex key>", "string keys",
                                           "a mapping key must be a plain string", kline)
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                raise ManifestError.single(file, format_path(path + (str(key),)), key, "string keys",
                                           f"key is a {type(key).__name__}, not a string", kline)
            if key in out:
                raise ManifestError.single(file, format_path(path + (key,)), key, "each key once per mapping",
                                           f"duplicate key (first on line {first_line[key]})", kline)
            first_line[key] = kline
            out[key] = _build(value_node, path + (key,), lines, loader, file, active)
        return out
    if isinstance(node, yaml.SequenceNode):
        if node.tag != _SEQ_TAG:
            raise ManifestError.single(file, format_path(path), node.tag, "no explicit YAML tags",
                                       "unsupported tag on a sequence", line)
        return [_build(item, path + (i,), lines, loader, file, active) for i, item in enumerate(node.value)]
    # A scalar: the safe constructor resolves str/int/float/bool/null and refuses unknown tags.
    return loader.construct_object(node)
