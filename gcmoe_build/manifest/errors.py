"""ManifestError: every way a manifest can be wrong, as one exception naming file, field, value and limit."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_MISSING_REPR = "<missing>"


@dataclass(frozen=True)
class Problem:
    """One violated rule: where (field path, YAML line), what (value) and the rule (limit, reason)."""

    field: str  # dotted path, e.g. "targets[0].capacity"; "" for the whole document
    value: Any
    limit: str  # the rule the value broke, e.g. "<= 4096", "one of ['sm_90a', ...]", "a mapping"
    reason: str = ""  # why the rule exists or what went wrong, one short clause
    line: int | None = None  # 1-based YAML line of the value, when known

    def describe(self, file: str) -> str:
        where = f"{file}:{self.line}" if self.line else file
        what = f"{self.field} = {_short(self.value)}" if self.field else f"value {_short(self.value)}"
        why = f": {self.reason}" if self.reason else ""
        return f"{where}: {what} violates {self.limit}{why}"


class ManifestError(ValueError):
    """A manifest that cannot be used. ``file``/``field``/``value``/``limit``/``line`` describe the first
    problem; ``problems`` holds all of them. ``str()`` is one line naming every problem."""

    def __init__(self, file: str, problems: list[Problem] | tuple[Problem, ...]):
        if not problems:
            raise ValueError("ManifestError needs at least one problem")
        self.file = str(file)
        self.problems = tuple(problems)
        first = self.problems[0]
        self.field, self.value, self.limit, self.reason, self.line = (
            first.field, first.value, first.limit, first.reason, first.line)
        super().__init__(" | ".join(p.describe(self.file) for p in self.problems))

    @classmethod
    def single(cls, file: str, field: str, value: Any, limit: str, reason: str = "",
               line: int | None = None) -> "ManifestError":
        return cls(file, [Problem(field, value, limit, reason, line)])


class _Missing:
    def __repr__(self) -> str:
        return _MISSING_REPR


MISSING = _Missing()


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    text = " ".join(text.split())  # one line, always
    return text if len(text) <= width else text[: width - 3] + "..."
