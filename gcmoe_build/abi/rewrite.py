"""The by-value ABI rewrite (paper §5, DESIGN.md §3): DSL PTX -> graph-ready PTX + parameter schema.

What CuTe DSL 4.8.1 (NVVM 13.4.59) emits, measured on the selftest kernel:

* a TMA descriptor is already by value, ``.param .align 64 .b8 X[128]``, used as
  ``mov.b64 %a, X`` -> ``cvta.param.u64 %g, %a`` -> ``prefetch.tensormap [%g]`` /
  ``cp.async.bulk.tensor ... [%g, {...}]``. It is validated, not changed. Should the DSL ever emit a
  pointer formal for it instead, the pointer rule below converts it.
* the peer table, passed as a ``cute.Pointer``, is a pointer formal ``.param .u64 .ptr .align 8 X``
  used as ``ld.param.b64 %p, [X]`` -> ``cvta.to.global.u64 %g, %p`` -> ``ld.global.b64 .., [%g+off]``
  (plus ``add``/``mad`` address arithmetic). The rewrite turns the formal into
  ``.param .align 8 .b8 X[592]``, the ``ld.param`` into ``mov.b64 %p, X; cvta.param.u64 %p, %p``
  (a generic address of the by-value parameter), the ``cvta.to.global`` into ``mov.b64`` and every
  ``ld.global`` through it into a generic ``ld``.

Every register derived from a rewritten/validated formal is tracked; any use the rewrite does not
understand (a store, an atomic, a compare, a redefinition, an unparsable line), a missing or extra
formal, a renamed formal, or a formal with no use raises :class:`AbiRewriteError` naming the kernel
and the line. The formals are then renamed ``<entry>_p_<plan name>`` and put in the normalised
order (tensor maps, peer descriptor, pointers, 64-bit scalars, 32-bit scalars; stable). The
schema's offsets here are natural PTX packing from 0; ``gcmoe_build.compile`` replaces them with
the offsets ptxas assigned (what cuKernelGetParamInfo reports) after checking sizes and order.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from gcmoe_runtime.abi import PEER_DESC_ALIGN, PEER_DESC_BYTES, SCALAR_SIZES, TENSORMAP_ALIGN, TENSORMAP_BYTES
from gcmoe_runtime.artifacts.record import ParamSpec

from .plan import AbiPlan, Formal
from .ptx import AbiRewriteError, Instr, PtxFormal, PtxKernel, parse_instr, parse_kernel, registers_in, strip_comment

BLOB_LAYOUT = {"tensormap": (TENSORMAP_BYTES, TENSORMAP_ALIGN), "peer_desc": (PEER_DESC_BYTES, PEER_DESC_ALIGN)}
KIND_ORDER = {"tensormap": 0, "peer_desc": 1, "ptr": 2, "u64": 3, "s64": 3, "f32": 4, "u32": 4, "s32": 4}
_ADDR = re.compile(r"^\[\s*(%?[\w$]+)\s*(?:\+\s*(-?\d+))?\s*\]$")
_LD_SPACES = ("param", "global", "shared", "const", "local")
_LD_OK_QUALIFIERS = {"v2", "v4", "nc"} | {t for t in ("u8 s8 b8 u16 s16 b16 f16 u32 s32 b32 f32 u64 s64 b64 f64").split()}
_TMA_OPS = ("cp.async.bulk.tensor.", "cp.reduce.async.bulk.tensor.", "cp.async.bulk.prefetch.tensor.")


@dataclass(frozen=True)
class AbiResult:
    ptx: str
    params: tuple[ParamSpec, ...]
    converted: tuple[str, ...]  # plan names of formals turned from pointer into by-value
    uses: dict[str, dict[str, int]]  # per blob formal: counts of load / prefetch / tma uses


def rewrite_by_value(ptx: str, kernel: str, plan: AbiPlan) -> AbiResult:
    """Validate + rewrite ``kernel``'s PTX to the by-value ABI declared by ``plan``."""
    k = parse_kernel(ptx, kernel)
    got = [f.name for f in k.formals]
    if len(k.formals) != len(plan.formals):
        raise AbiRewriteError(
            kernel,
            f"the PTX has {len(k.formals)} formals {got}, the ABI plan declares {len(plan.formals)} "
            f"{[f.name for f in plan.formals]}",
        )
    for i, pf in enumerate(k.formals):
        if pf.name != f"{kernel}_param_{i}":
            raise AbiRewriteError(kernel, f"formal {i} is named {pf.name!r}, expected {kernel}_param_{i}")

    edits: dict[int, list[str]] = {}
    converted: list[str] = []
    uses: dict[str, dict[str, int]] = {}
    owners: dict[str, str] = {}
    for pf, f in zip(k.formals, plan.formals):
        mode = _check_declaration(kernel, pf, f)
        if f.kind in BLOB_LAYOUT:
            counts, tainted = _trace_blob(k, pf, f, mode, edits)
            for reg in tainted:
                if reg in owners:
                    raise AbiRewriteError(kernel, f"register {reg} derives from both {owners[reg]!r} and {f.name!r}")
                owners[reg] = f.name
            need = "tma" if f.kind == "tensormap" else "load"
            if counts[need] == 0:
                raise AbiRewriteError(
                    kernel, f"formal {f.name!r} ({f.kind}) has no {'cp.async.bulk.tensor' if need == 'tma' else 'load'} use"
                )
            uses[f.name] = dict(sorted(counts.items()))
            if mode == "pointer":
                converted.append(f.name)

    body = "\n".join(k.lines[k.body_start:k.body_end])
    for op in plan.required_instructions:
        if not re.search(rf"^\s*(?:@!?%?\w+\s+)?{re.escape(op)}", body, re.M):
            raise AbiRewriteError(kernel, f"required instruction {op!r} does not occur in the PTX")

    order = sorted(range(len(plan.formals)), key=lambda i: (KIND_ORDER[plan.formals[i].kind], i))
    new_names = {pf.name: f"{kernel}_p_{f.name}" for pf, f in zip(k.formals, plan.formals)}
    decls = []
    for i in order:
        pf, f = k.formals[i], plan.formals[i]
        if f.kind in BLOB_LAYOUT:
            size, align = BLOB_LAYOUT[f.kind]
            decl = f".param .align {align} .b8 {pf.name}[{size}]"
        else:
            decl = k.lines[pf.line].strip().rstrip(",")
        decls.append("\t" + decl)
    head = k.formals[0].line if k.formals else k.body_start - 1
    out = k.lines[:head] + [",\n".join(decls)] if k.formals else k.lines[:head]
    for i in range(k.body_start - 1, len(k.lines)):
        out.extend(edits.get(i, [k.lines[i]]))
    text = "\n".join(out) + "\n"
    rename = re.compile(r"(?<![\w$])(" + "|".join(re.escape(n) for n in new_names) + r")(?![\w$])") if new_names else None
    if rename:
        text = rename.sub(lambda m: new_names[m.group(1)], text)

    params = _schema(plan, order)
    _verify_result(text, kernel, plan, order, params)
    return AbiResult(ptx=text, params=params, converted=tuple(converted), uses=uses)


def _check_declaration(kernel: str, pf: PtxFormal, f: Formal) -> str:
    """Return 'byvalue', 'pointer' (a blob passed as a pointer: to convert) or 'plain'."""
    where = f"formal {f.name!r} ({f.kind}, PTX {pf.name})"
    if f.kind in BLOB_LAYOUT:
        size, align = BLOB_LAYOUT[f.kind]
        if pf.by_value_bytes:
            if (pf.size, pf.align) != (size, align):
                raise AbiRewriteError(
                    kernel, f"{where} is by value with {pf.size} bytes align {pf.align}, expected {size} align {align}"
                )
            return "byvalue"
        if pf.is_address_sized:
            return "pointer"
        raise AbiRewriteError(kernel, f"{where} is a .{pf.type} scalar; expected a pointer or a .b8[{size}] array")
    size = SCALAR_SIZES[f.kind]
    if pf.size != size or pf.align != size:
        raise AbiRewriteError(kernel, f"{where} has {pf.size} bytes align {pf.align}, expected {size} align {size}")
    if not pf.by_value_bytes:
        family = {"ptr": ("u64", "b64", "s64"), "u64": ("u64", "b64", "s64"), "s64": ("u64", "b64", "s64"),
                  "u32": ("u32", "b32", "s32"), "s32": ("u32", "b32", "s32"), "f32": ("f32", "b32")}[f.kind]
        if pf.type not in family:
            raise AbiRewriteError(kernel, f"{where} is declared .{pf.type}, expected one of {family}")
    return "plain"


def _trace_blob(k: PtxKernel, pf: PtxFormal, f: Formal, mode: str, edits: dict[int, list[str]]):
    """Follow every use of a tensor-map / peer-descriptor formal; record edits; fail on the unknown."""
    kernel, name = k.entry, pf.name
    token = re.compile(rf"(?<![\w$]){re.escape(name)}(?![\w$])")
    taint: dict[str, str] = {}  # register -> "param" (param-space address) | "generic" (generic address)
    counts: Counter = Counter()
    direct: set[int] = set()
    body = range(k.body_start, k.body_end)

    def fail(i: int, why: str) -> None:
        raise AbiRewriteError(kernel, f"formal {f.name!r} ({f.kind}): {why}: {k.lines[i].strip()!r} (PTX line {i + 1})")

    for i in body:
        if not token.search(strip_comment(k.lines[i])):
            continue
        direct.add(i)
        ins = parse_instr(k.lines[i])
        if ins is None:
            fail(i, "referenced outside an instruction")
        ops = ins.operands
        if mode == "byvalue":
            if ins.opcode in ("mov.b64", "mov.u64") and len(ops) == 2 and ops[1] == name and _is_reg(ops[0]):
                taint[ops[0]] = "param"
            elif (f.kind == "peer_desc" and ins.opcode.startswith("ld.param.") and len(ops) == 2
                  and _addr_base(ops[1]) == name):
                counts["load"] += 1
            else:
                fail(i, "unexpected use of the by-value formal")
        else:
            if (ins.opcode in ("ld.param.b64", "ld.param.u64") and not ins.pred and len(ops) == 2
                    and _is_reg(ops[0]) and ops[1].replace(" ", "") == f"[{name}]"):
                reg, indent = ops[0], _indent(k.lines[i])
                taint[reg] = "generic"
                edits[i] = [f"{indent}mov.b64 \t{reg}, {name};", f"{indent}cvta.param.u64 \t{reg}, {reg};"]
            else:
                fail(i, "unexpected use of the pointer formal (only 'ld.param.b64 %r, [formal]' is rewritable)")

    changed = True
    while changed:  # propagate address derivations to a fixed point (register order is not program order)
        changed = False
        for i in body:
            if i in direct:
                continue
            ins = parse_instr(k.lines[i])
            if ins is None or not (registers_in(" ".join(ins.operands)) & taint.keys()):
                continue
            derived = _derive(ins, taint)
            if derived and derived[0] not in taint:
                taint[derived[0]] = derived[1]
                changed = True

    for i in body:
        if i in direct:
            continue
        code = strip_comment(k.lines[i])
        hit = registers_in(code) & taint.keys()
        if not hit:
            continue
        ins = parse_instr(k.lines[i])
        if ins is None:
            fail(i, f"register(s) {sorted(hit)} appear in a line the rewrite does not understand")
        derived = _derive(ins, taint)
        if derived is not None:
            dest, cls = derived
            if taint.get(dest) != cls:
                fail(i, f"register {dest} would hold both a {taint.get(dest)} and a {cls} address")
            if ins.opcode == "cvta.to.global.u64":
                edits[i] = [f"{_indent(k.lines[i])}{ins.pred + ' ' if ins.pred else ''}mov.b64 \t{dest}, {ins.operands[1]};"]
            continue
        _classify_use(ins, taint, f, counts, edits, i, k.lines[i], fail)
    return counts, set(taint)


def _derive(ins: Instr, taint: dict[str, str]) -> tuple[str, str] | None:
    """If ``ins`` computes an address from a tracked register, return (destination, class)."""
    op, ops = ins.opcode, ins.operands
    if not ops or not _is_reg(ops[0]) or ops[0] in registers_in(" ".join(ops[1:])):
        return None
    srcs = [o for o in ops[1:] if o in taint]
    if op in ("mov.b64", "mov.u64") and len(ops) == 2 and ops[1] in taint:
        return ops[0], taint[ops[1]]
    if op == "cvta.param.u64" and len(ops) == 2 and taint.get(ops[1]) == "param":
        return ops[0], "generic"
    if op == "cvta.to.global.u64" and len(ops) == 2 and taint.get(ops[1]) == "generic":
        return ops[0], "generic"
    if op in ("add.s64", "add.u64") and len(ops) == 3 and len(srcs) == 1:
        return ops[0], taint[srcs[0]]
    if op in ("sub.s64", "sub.u64") and len(ops) == 3 and ops[1] in taint and ops[2] not in taint:
        return ops[0], taint[ops[1]]
    if (op in ("mad.wide.s32", "mad.wide.u32", "mad.lo.s64", "mad.lo.u64") and len(ops) == 4
            and ops[3] in taint and not (set(ops[1:3]) & taint.keys())):
        return ops[0], taint[ops[3]]
    return None


def _classify_use(ins: Instr, taint, f: Formal, counts: Counter, edits, i: int, line: str, fail) -> None:
    op, ops = ins.opcode, ins.operands
    parts = op.split(".")
    if parts[0] == "ld":
        if f.kind != "peer_desc":
            fail(i, "a tensor map is only used by prefetch.tensormap / cp.async.bulk.tensor, not loaded")
        if len(ops) != 2 or registers_in(ops[0]) & taint.keys():
            fail(i, "a tracked address is loaded into or used as data")
        base = _addr_base(ops[1])
        if base not in taint:
            fail(i, "a tracked register is used inside a non-trivial address expression")
        space = parts[1] if len(parts) > 1 and parts[1] in _LD_SPACES else ""
        quals = [p for p in parts[1:] if p != space]
        if any(q not in _LD_OK_QUALIFIERS for q in quals):
            fail(i, f"load qualifiers {quals} are not rewritable")
        if space == "param" and taint[base] == "param":
            counts["load"] += 1
        elif space == "" and taint[base] == "generic" and "nc" not in quals:
            counts["load"] += 1
        elif space == "global" and taint[base] == "generic":
            new_op = ".".join(["ld"] + [q for q in quals if q != "nc"])
            edits[i] = [line.replace(op, new_op, 1)]
            counts["load"] += 1
        else:
            fail(i, f"a {taint[base]} address of the formal is loaded through state space {space or 'generic'!r}")
        return
    if f.kind == "tensormap":
        if op == "prefetch.tensormap" and len(ops) == 1 and taint.get(_addr_base(ops[0])) == "generic":
            counts["prefetch"] += 1
            return
        if op.startswith(_TMA_OPS):
            for o in ops:
                hit = registers_in(o) & taint.keys()
                if not hit:
                    continue
                m = re.match(r"^\[\s*(%\w+)\s*,\s*\{", o)
                if not m or hit != {m.group(1)} or taint[m.group(1)] != "generic":
                    fail(i, "the tensor map address is used outside the descriptor operand")
            counts["tma"] += 1
            return
    fail(i, "unexpected use of an address derived from the formal")


def _schema(plan: AbiPlan, order: list[int]) -> tuple[ParamSpec, ...]:
    params, offset = [], 0
    for j, i in enumerate(order):
        f = plan.formals[i]
        size, align = BLOB_LAYOUT.get(f.kind, (SCALAR_SIZES.get(f.kind), SCALAR_SIZES.get(f.kind)))
        offset = (offset + align - 1) // align * align
        params.append(ParamSpec(index=j, name=f.name, kind=f.kind, size=size, align=align, offset=offset))
        offset += size
    return tuple(params)


def _verify_result(text: str, kernel: str, plan: AbiPlan, order: list[int], params) -> None:
    """Re-read the rewritten PTX: the formals must be exactly the schema, in order."""
    k = parse_kernel(text, kernel)
    if len(k.formals) != len(params):
        raise AbiRewriteError(kernel, f"rewritten PTX has {len(k.formals)} formals, schema has {len(params)}")
    for pf, p in zip(k.formals, params):
        if pf.name != f"{kernel}_p_{p.name}" or pf.size != p.size or pf.align != p.align:
            raise AbiRewriteError(
                kernel, f"rewritten formal {pf.name} ({pf.size} B, align {pf.align}) does not match schema {p}"
            )
        if p.kind in BLOB_LAYOUT and not pf.by_value_bytes:
            raise AbiRewriteError(kernel, f"rewritten formal {pf.name} is not by value")


def _is_reg(tok: str) -> bool:
    return bool(re.fullmatch(r"%[A-Za-z_]\w*", tok))


def _addr_base(operand: str) -> str | None:
    m = _ADDR.match(operand.strip())
    return m.group(1) if m else None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]
