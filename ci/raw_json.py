"""Read a raw JSON result that may have been archived as ``name.json.gz`` (results/README.md, "Archived raw files").

The ``ci/`` comparison tools load older sessions' runs through :func:`load_json`, so a folder reads the same before
and after its raw files are gzipped.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path


def _gz(path: Path) -> Path:
    return path.with_name(path.name + ".gz")


def json_exists(path) -> bool:
    """Whether ``path`` or its archived ``path.gz`` is a file."""
    path = Path(path)
    return path.is_file() or _gz(path).is_file()


def load_json(path) -> object:
    """Parse ``path``, or ``path.gz`` where only the archived copy exists; names both when neither does."""
    path = Path(path)
    if path.is_file():
        with open(path) as f:
            return json.load(f)
    gz = _gz(path)
    if gz.is_file():
        with gzip.open(gz, "rt") as f:
            return json.load(f)
    raise FileNotFoundError(f"neither {path} nor {gz} exists")
