"""What the DSL itself built for each TMA descriptor, read from its IR, checked against the plan.

The DSL's own host launcher encodes TMA descriptors inline; our runtime encodes them itself with
cuTensorMapEncodeTiled from the recorded ``TensorMapEncoding``. If the kernel author's declared
encoding and the DSL's atom disagree (element type, box size, smem swizzle), the kernel would read
garbage with no error. So for every TMA atom formal of the kernel (in formal order) we read from the
DSL's MLIR (after canonicalize+cse):

* the atom type ``!cute_nvgpu.atom.non_exec_tiled_tma_*<sm_90, i8, copy_bits = N, tma_gbasis =
  <...>, tma_format = U8>`` from the ``cuda.kernel`` signature: format, element bits, box bits;
* the shared-memory layout it was made with (``make_non_exec_tiled_tma_*`` operand), whose
  ``S<B,M,S>`` swizzle gives the descriptor swizzle (B = 1/2/3 -> 32/64/128 bytes; the swizzle must
  act on 16-byte units within 128-byte rows, as TMA swizzles do);

and :func:`check_tensormaps` compares them with the plan's encodings: dtype, ``prod(box) *
element bits == copy_bits``, swizzle, interleave NONE, rank covering the atom's gmem modes, and —
a hardware rule the DSL does not enforce — a swizzled box's inner extent equal to the swizzle span.
(The order of the box dimensions is not visible in the atom type; only their product is checked.)
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: tma_format in the DSL IR -> (CUtensorMapDataType name, element bits). Unknown formats fail closed.
TMA_FORMATS = {
    "U8": ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 8),
    "U16": ("CU_TENSOR_MAP_DATA_TYPE_UINT16", 16),
    "U32": ("CU_TENSOR_MAP_DATA_TYPE_UINT32", 32),
    "S32": ("CU_TENSOR_MAP_DATA_TYPE_INT32", 32),
    "U64": ("CU_TENSOR_MAP_DATA_TYPE_UINT64", 64),
    "S64": ("CU_TENSOR_MAP_DATA_TYPE_INT64", 64),
    "F16_RN": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT16", 16),
    "BF16_RN": ("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 16),
    "F32_RN": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT32", 32),
    "F32_FTZ_RN": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ", 32),
    "F64_RN": ("CU_TENSOR_MAP_DATA_TYPE_FLOAT64", 64),
    "TF32_RN": ("CU_TENSOR_MAP_DATA_TYPE_TFLOAT32", 32),
    "TF32_FTZ_RN": ("CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ", 32),
}
_SWIZZLE_BYTES = {1: 32, 2: 64, 3: 128}
_SWIZZLE_SPAN = {f"CU_TENSOR_MAP_SWIZZLE_{b}B": b for b in _SWIZZLE_BYTES.values()}


class TensorMapMismatchError(ValueError):
    """The plan's TensorMapEncoding disagrees with the TMA atom the DSL built (names kernel + param)."""

    def __init__(self, kernel: str, message: str) -> None:
        super().__init__(f"kernel {kernel}: {message}")
        self.kernel = kernel


@dataclass(frozen=True)
class TmaAtomFacts:
    atom_type: str
    tma_format: str
    dtype: str  # CUtensorMapDataType name
    element_bits: int
    copy_bits: int  # bits moved per copy = box volume x element bits
    gmem_modes: int  # distinct global modes the atom's basis touches
    swizzle: str  # CU_TENSOR_MAP_SWIZZLE_*


def _split_top(text: str) -> list[str]:
    """Split on commas outside <>, (), [], {} and quotes."""
    out, depth, cur, quoted = [], 0, [], False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        elif not quoted:
            if ch in "<([{":
                depth += 1
            elif ch in ">)]}":
                depth -= 1
            elif ch == "," and depth == 0:
                out.append("".join(cur).strip())
                cur = []
                continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _balanced(text: str, start: int, open_ch: str = "(", close_ch: str = ")") -> tuple[str, int]:
    """The text inside the bracket opening at ``start`` and the index after its closing bracket."""
    depth, quoted = 0, False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == open_ch:
            depth += 1
        elif not quoted and ch == close_ch:
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    raise ValueError("unbalanced brackets in the DSL IR")


def _swizzle_of(layout_type: str, element_bits: int, kernel: str) -> str:
    m = re.search(r"S<(\d+),(\d+),(\d+)>", layout_type)
    if not m:
        return "CU_TENSOR_MAP_SWIZZLE_NONE"
    b, base, shift = (int(x) for x in m.groups())
    if b == 0:
        return "CU_TENSOR_MAP_SWIZZLE_NONE"
    unit_bytes = (1 << base) * element_bits // 8
    if b not in _SWIZZLE_BYTES or unit_bytes != 16 or (1 << (base + shift)) * element_bits // 8 != 128:
        raise TensorMapMismatchError(
            kernel, f"shared-memory swizzle {m.group(0)} on {element_bits}-bit elements is not a TMA swizzle"
        )
    return f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE_BYTES[b]}B"


def tma_atoms(ir: str, kernel: str) -> list[TmaAtomFacts]:
    """The TMA atom formals of ``kernel`` (in formal order), with their facts, from the DSL IR."""
    head = re.search(rf"cuda\.kernel @{re.escape(kernel)}\(", ir)
    if not head:
        raise TensorMapMismatchError(kernel, "the DSL IR has no cuda.kernel of this name")
    args, _ = _balanced(ir, head.end() - 1)
    atom_types = []
    for arg in _split_top(args):
        typ = arg.split(":", 1)[1].strip() if ":" in arg else ""
        typ = re.sub(r"\s*\{[^{}]*\}\s*$", "", typ)  # drop the argument's attribute dict
        if typ.startswith("!cute_nvgpu.atom.") and "tma" in typ:
            atom_types.append(typ)

    layouts: dict[str, set[str]] = {}
    for m in re.finditer(r"cute_nvgpu\.atom\.make_non_exec_tiled_tma_\w+\(", ir):
        sig = ir.index(" : (", m.end())
        ins, after = _balanced(ir, sig + 3)
        arrow = ir.index("(", after)
        outs, _ = _balanced(ir, arrow)
        in_types, out_types = _split_top(ins), _split_top(outs)
        if len(in_types) < 2 or not out_types:
            raise TensorMapMismatchError(kernel, f"unexpected TMA atom construction in the DSL IR: {ir[m.start():arrow]}")
        layouts.setdefault(out_types[0], set()).add(in_types[1])

    facts = []
    for typ in atom_types:
        fm = re.search(r"tma_format = (\w+)", typ)
        cb = re.search(r"copy_bits = (\d+)", typ)
        gb = re.search(r'tma_gbasis = <"([^"]*)">', typ)
        if not (fm and cb and gb):
            raise TensorMapMismatchError(kernel, f"TMA atom type not understood: {typ}")
        if fm.group(1) not in TMA_FORMATS:
            raise TensorMapMismatchError(
                kernel, f"TMA format {fm.group(1)} is not in gcmoe_build.frontend.tma_facts.TMA_FORMATS"
            )
        dtype, bits = TMA_FORMATS[fm.group(1)]
        smem = layouts.get(typ, set())
        swizzles = {_swizzle_of(s, bits, kernel) for s in smem}
        if len(swizzles) != 1:
            raise TensorMapMismatchError(
                kernel, f"cannot tell the shared-memory layout of TMA atom {typ}: constructions found {sorted(smem)}"
            )
        facts.append(TmaAtomFacts(
            atom_type=typ, tma_format=fm.group(1), dtype=dtype, element_bits=bits, copy_bits=int(cb.group(1)),
            gmem_modes=len(set(re.findall(r"@(\d+)", gb.group(1)))), swizzle=swizzles.pop(),
        ))
    return facts


def check_tensormaps(kernel: str, encodings, atoms: list[TmaAtomFacts]) -> None:
    """The plan's encodings (tensormap formals, in order) against the DSL's atoms (same order)."""
    if len(encodings) != len(atoms):
        raise TensorMapMismatchError(
            kernel, f"the ABI plan declares {len(encodings)} tensor maps, the DSL kernel takes {len(atoms)} TMA atoms"
        )
    for enc, atom in zip(encodings, atoms):
        where = f"tensor map {enc.param!r}"
        if enc.dtype != atom.dtype:
            raise TensorMapMismatchError(kernel, f"{where}: dtype {enc.dtype}, the DSL atom uses {atom.dtype}")
        if len(enc.box) != enc.rank or len(enc.element_strides) != enc.rank:
            raise TensorMapMismatchError(kernel, f"{where}: rank {enc.rank} but box {enc.box} / strides {enc.element_strides}")
        if math.prod(enc.box) * atom.element_bits != atom.copy_bits:
            raise TensorMapMismatchError(
                kernel, f"{where}: box {enc.box} moves {math.prod(enc.box) * atom.element_bits} bits, the DSL atom "
                f"{atom.copy_bits}"
            )
        if enc.rank < atom.gmem_modes:
            raise TensorMapMismatchError(kernel, f"{where}: rank {enc.rank} < the {atom.gmem_modes} modes the atom tiles")
        if enc.swizzle != atom.swizzle:
            raise TensorMapMismatchError(kernel, f"{where}: swizzle {enc.swizzle}, the DSL's smem layout needs {atom.swizzle}")
        span = _SWIZZLE_SPAN.get(enc.swizzle)
        if span is not None and enc.box[0] * atom.element_bits != span * 8:
            # TMA lays a swizzled box out in rows of the swizzle span; the DSL accepts a narrower
            # inner box (a 64-byte box under SWIZZLE_128B), which then faults on the GPU.
            raise TensorMapMismatchError(
                kernel, f"{where}: inner box {enc.box[0]} x {atom.element_bits} bits must equal the "
                f"{span}-byte span of {enc.swizzle}"
            )
        if enc.interleave != "CU_TENSOR_MAP_INTERLEAVE_NONE":
            raise TensorMapMismatchError(kernel, f"{where}: interleave {enc.interleave}; tiled DSL atoms use NONE")
