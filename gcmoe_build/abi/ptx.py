"""Minimal, strict PTX reading for the ABI rewrite: one kernel entry, its formals, its instructions.

This is not a PTX parser. It understands the shapes NVVM 13.4 emits for a CuTe DSL kernel (one
``.entry``, one formal per line, one instruction per line) and raises :class:`AbiRewriteError` on
anything else, so a change in the DSL's output stops the build instead of being misread.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


class AbiRewriteError(ValueError):
    """The PTX does not have the shape the by-value ABI rewrite expects. Names the kernel."""

    def __init__(self, kernel: str, message: str) -> None:
        super().__init__(f"kernel {kernel}: {message}")
        self.kernel = kernel


#: Byte sizes of the scalar formal types NVVM emits.
SCALAR_TYPE_BYTES = {
    "u8": 1, "s8": 1, "b8": 1, "u16": 2, "s16": 2, "b16": 2, "f16": 2,
    "u32": 4, "s32": 4, "b32": 4, "f32": 4, "u64": 8, "s64": 8, "b64": 8, "f64": 8,
}

_BYTES_DECL = re.compile(r"^\.param\s+(?:\.align\s+(\d+)\s+)?\.b8\s+([A-Za-z_$][\w$]*)\[(\d+)\]$")
_SCALAR_DECL = re.compile(
    r"^\.param\s+\.(\w+)(\s+\.ptr(?:\s+\.(?:global|const|shared|local))?(?:\s+\.align\s+(\d+))?)?"
    r"\s+([A-Za-z_$][\w$]*)$"
)
_ENTRY_HEAD = re.compile(r"^\.(?:visible|weak)\s+\.entry\s+([A-Za-z_$][\w$]*)\s*\($")


@dataclass(frozen=True)
class PtxFormal:
    name: str
    by_value_bytes: bool  # declared as ``.param [.align A] .b8 name[N]``
    type: str  # "b8" for byte arrays, else the scalar type
    is_pointer: bool  # a scalar declared with ``.ptr``
    size: int
    align: int
    line: int  # index into PtxKernel.lines of its declaration

    @property
    def is_address_sized(self) -> bool:
        return not self.by_value_bytes and self.type in ("u64", "b64")


@dataclass
class PtxKernel:
    lines: list[str]
    entry: str
    formals: list[PtxFormal]
    body_start: int  # index of the first line after the closing ')' of the formal list
    body_end: int  # index one past the kernel's closing '}'

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def parse_kernel(ptx: str, kernel: str) -> PtxKernel:
    """Split PTX into lines and locate the single entry and its formals (strictly)."""
    lines = ptx.splitlines()
    all_entries = re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)", "\n".join(strip_comment(l) for l in lines))
    if len(all_entries) != 1:
        raise AbiRewriteError(kernel, f"expected exactly one .entry, found {all_entries}")
    heads = [(i, m.group(1)) for i, l in enumerate(lines) if (m := _ENTRY_HEAD.match(l.strip()))]
    if len(heads) != 1:
        raise AbiRewriteError(kernel, f"expected exactly one .entry, found {[h[1] for h in heads]}")
    head, entry = heads[0]
    if entry != kernel:
        raise AbiRewriteError(kernel, f"the PTX entry is named {entry!r}, expected {kernel!r}")
    formals: list[PtxFormal] = []
    i = head + 1
    while True:
        if i >= len(lines):
            raise AbiRewriteError(kernel, "formal list of the entry is not closed by ')'")
        raw = lines[i].strip()
        if raw == ")":
            break
        decl = raw[:-1] if raw.endswith(",") else raw
        if m := _BYTES_DECL.match(decl):
            align = int(m.group(1)) if m.group(1) else 1
            formals.append(PtxFormal(m.group(2), True, "b8", False, int(m.group(3)), align, i))
        elif (m := _SCALAR_DECL.match(decl)) and m.group(1) in SCALAR_TYPE_BYTES:
            size = SCALAR_TYPE_BYTES[m.group(1)]
            align = int(m.group(3)) if m.group(3) else size
            formals.append(PtxFormal(m.group(4), False, m.group(1), bool(m.group(2)), size, align, i))
        else:
            raise AbiRewriteError(kernel, f"unrecognised formal declaration {raw!r}")
        i += 1
    body_start = i + 1
    depth, j, opened = 0, body_start, False
    while j < len(lines):
        code = strip_comment(lines[j])
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        j += 1
        if opened and depth == 0:
            break
    if not opened or depth != 0:
        raise AbiRewriteError(kernel, "kernel body braces do not balance")
    for k in range(j, len(lines)):
        if _ENTRY_HEAD.match(lines[k].strip()) or ".func" in strip_comment(lines[k]):
            raise AbiRewriteError(kernel, f"unexpected code after the kernel body: {lines[k].strip()!r}")
    return PtxKernel(lines, entry, formals, body_start, j)


def strip_comment(line: str) -> str:
    pos = line.find("//")
    return line if pos < 0 else line[:pos]


_INSTR = re.compile(r"^(@!?%?\w+\s+)?([a-z][\w.:]*)\s*(.*?);$")


@dataclass(frozen=True)
class Instr:
    pred: str
    opcode: str
    operands: tuple[str, ...]


def parse_instr(line: str) -> Instr | None:
    """One instruction per line; None for blank lines, labels, braces and directives."""
    code = strip_comment(line).strip()
    if not code or code in ("{", "}") or code.startswith(".") or code.endswith(":"):
        return None
    m = _INSTR.match(code)
    if not m:
        return None
    return Instr((m.group(1) or "").strip(), m.group(2), tuple(split_operands(m.group(3))))


def split_operands(text: str) -> list[str]:
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def registers_in(text: str) -> set[str]:
    return set(re.findall(r"%[A-Za-z_]\w*", text))
