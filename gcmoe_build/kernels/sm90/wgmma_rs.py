"""Inline-PTX building blocks for the SM90 role2 kernels (CuTe DSL 4.8.1).

Owns the few sm_90a instructions the role2 kernels issue directly rather than through the DSL's
tiled-MMA/TMA abstractions, and the facts about them other kernel authors need:

* **Inline PTX in the DSL.** ``cutlass._mlir.dialects.llvm.inline_asm(result_type, operands, ptx,
  constraints, has_side_effects=..., is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)``.
  Several results: ``result_type = llvm.StructType.get_literal([T.i32(), ...])`` and
  ``llvm.extractvalue(T.i32(), res, [i])``. Constraints are LLVM-NVPTX: ``r`` (b32), ``l`` (b64),
  ``f`` (f32), ``h`` (b16), outputs ``=r`` first; ``$n`` numbers outputs first, then inputs.
  Operands must be raw ``ir.Value`` (``Int32(x).ir_value()``). Volatile statements
  (``has_side_effects=True``) keep their relative order, which is what orders wgmma issue /
  commit / wait / operand fences below (the CUTLASS C++ ``warpgroup_fence_operand`` idiom).
* **wgmma with A from registers ("RS").** ``wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3
  {d..}, {a0,a1,a2,a3}, bdesc, p, 1, 1;`` - E4M3 supports only K-major operands (no transpose
  immediates). A fragment of thread ``(warp w, lane l)``, ``g = l // 4``, ``t = l % 4``:
  ``a0`` = row ``16w+g``, k ``4t..4t+3``; ``a1`` = row ``16w+g+8``, same k; ``a2`` = row ``16w+g``,
  k ``16+4t..``; ``a3`` = row ``16w+g+8``, k ``16+4t..`` (byte ``j`` of a register is k ``+j``).
  Accumulator ``d[i]``: row ``16w + g + 8*((i>>1)&1)``, column ``8*(i>>2) + 2t + (i&1)``.
  ``p = false`` (D := A*B) starts a partial; ``p = true`` with D tied to an earlier wgmma's outputs continues it.
  role2 chains the four K32 MMAs of a K128 step (the block scale is folded into the decoded operand,
  ``fp4_decode``) and FMAs the partial into the FP32 accumulator once per K128; role4 (FP8 weights, per-K32
  block scales) starts a fresh partial per K32.
* **Async hazards.** A wgmma writes its D registers asynchronously. LLVM sees them as defined at
  the asm statement, so every consumer must come after ``wait_group`` *and* read the value through
  :func:`fence_f32` (an empty volatile asm with a tied operand): volatile asms are never reordered
  among themselves, so the FMA cannot float above the wait. ``wgmma.fence`` must precede a wgmma
  whose A registers / accumulators were written by ordinary instructions (our decoded A always is).
* **Shared-memory matrix descriptor** (B operand, K-major, no swizzle): 64-bit, bits 0-13 start
  address >> 4, 16-29 leading byte offset (LBO) >> 4, 32-45 stride byte offset (SBO) >> 4, 62-63
  layout (0 = no swizzle). A core matrix is 8 rows (tokens) x 16 bytes stored as 128 contiguous
  bytes; for K-major no-swizzle, LBO = distance between the two core matrices along K,
  SBO = distance between 8-row groups along N.
"""
from __future__ import annotations

from cutlass import Int32, Int64, Float32
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op


def _asm(ptx: str, constraints: str, operands, n_out: int, out_ty=None, volatile: bool = True):
    """Run one inline PTX statement; return a list of ``n_out`` raw ir values."""
    out_ty = out_ty or T.i32()
    if n_out == 0:
        llvm.inline_asm(None, operands, ptx, constraints, has_side_effects=volatile,
                        is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
        return []
    if n_out == 1:
        return [llvm.inline_asm(out_ty, operands, ptx, constraints, has_side_effects=volatile,
                                is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)]
    st = llvm.StructType.get_literal([out_ty] * n_out)
    res = llvm.inline_asm(st, operands, ptx, constraints, has_side_effects=volatile,
                          is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)
    return [llvm.extractvalue(out_ty, res, [i]) for i in range(n_out)]


def _v(x, ty=Int32):
    return ty(x).ir_value()


@dsl_user_op
def wgmma_fence(*, loc=None, ip=None):
    _asm("wgmma.fence.sync.aligned;", "", [], 0)


@dsl_user_op
def wgmma_commit(*, loc=None, ip=None):
    _asm("wgmma.commit_group.sync.aligned;", "", [], 0)


@dsl_user_op
def wgmma_wait(n: int, *, loc=None, ip=None):
    _asm(f"wgmma.wait_group.sync.aligned {int(n)};", "", [], 0)


@dsl_user_op
def fence_f32(x, *, loc=None, ip=None) -> Float32:
    """Return ``x`` through an empty volatile asm so later uses cannot move above earlier waits."""
    return Float32(_asm("", "=f,0", [_v(x, Float32)], 1, T.f32())[0])


def _wgmma_e4m3(n: int, a_ptx: str, a_cons: list, a_ops: list, bdesc, d):
    """``wgmma.mma_async m64n{n}k32 .f32.e4m3.e4m3`` with the A operand given as its PTX text (``$k`` numbered after
    the ``n // 2`` outputs), constraints and values; B = descriptor ``bdesc``; ``d`` as in :func:`wgmma_rs_e4m3`."""
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma N must be a multiple of 8 in [8, 256], got {n}")
    nd = n // 2
    if d is not None and len(d) != nd:
        raise ValueError(f"wgmma m64n{n}: an accumulator of {nd} registers, got {len(d)}")
    dregs = ", ".join(f"${i}" for i in range(nd))
    ptx = (
        f"{{\n.reg .pred p;\nsetp.ne.b32 p, {0 if d is None else 1}, 0;\n"
        f"wgmma.mma_async.sync.aligned.m64n{n}k32.f32.e4m3.e4m3 {{{dregs}}}, {a_ptx}, ${nd + len(a_ops)}, p, 1, 1;\n}}"
    )
    cons = ["=f"] * nd + a_cons + ["l"]
    ops = a_ops + [_v(bdesc, Int64)]
    if d is not None:  # inputs tied to the outputs: the same registers carry the running sum
        cons += [str(i) for i in range(nd)]
        ops += list(d)
    return _asm(ptx, ",".join(cons), ops, nd, T.f32())


@dsl_user_op
def wgmma_rs_e4m3(n: int, a, bdesc, d=None, *, loc=None, ip=None):
    """Issue ``wgmma.mma_async m64n{n}k32 f32.e4m3.e4m3`` with A = 4 registers (``a``: 4 Int32),
    B = shared-memory descriptor ``bdesc`` (Int64). ``d=None``: D := A*B (scale-d false, a fresh partial);
    ``d`` = the ``n // 2`` raw outputs of an earlier wgmma of this warpgroup: D := A*B + d (scale-d true, tied
    registers; no wait needed between wgmmas chained on one accumulator). Returns the ``n // 2`` FP32 outputs as
    raw values; read them only via :func:`fence_f32` after a wait."""
    nd = n // 2
    return _wgmma_e4m3(n, "{" + ", ".join(f"${nd + i}" for i in range(4)) + "}", ["r"] * 4, [_v(x) for x in a],
                       bdesc, d)


@dsl_user_op
def wgmma_ss_e4m3(n: int, adesc, bdesc, d=None, *, loc=None, ip=None):
    """:func:`wgmma_rs_e4m3` with A from a shared-memory descriptor too (dev probe only: role2 feeds A from
    registers)."""
    return _wgmma_e4m3(n, f"${n // 2}", ["l"], [_v(adesc, Int64)], bdesc, d)


def smem_desc(addr_bytes, lbo_bytes: int, sbo_bytes: int):
    """No-swizzle K-major wgmma descriptor for a shared-memory byte address (Int32)."""
    hi = ((sbo_bytes >> 4) & 0x3FFF)  # bits 32-45; layout type 0 in bits 62-63
    lo_const = ((lbo_bytes >> 4) & 0x3FFF) << 16
    lo = ((Int32(addr_bytes) >> 4) & 0x3FFF) | lo_const
    return (Int64(hi) << 32) | Int64(lo)


#: bits 62-63 of a wgmma descriptor: the 128-byte swizzle (CUTLASS GmmaDescriptor::LayoutType::B128)
_LAYOUT_SW128 = 1
#: bytes between 8-row groups of a 128-byte-swizzled K-major operand: one 1024-byte swizzle atom (8 rows x 128 B)
SW128_ATOM_BYTES = 1024


def smem_desc_sw128(addr_bytes):
    """K-major wgmma descriptor for an operand a TMA box with ``CU_TENSOR_MAP_SWIZZLE_128B`` wrote: rows of 128 bytes
    (one K128 of E4M3), 8-row atoms of 1024 bytes, the atom 1024-byte aligned (base offset 0). The K32 step ``q``
    of the K128 starts ``32 q`` bytes in: the hardware applies the swizzle to the address it forms, so the start
    moves inside the row and the XOR stays right. LBO is unused for swizzled K-major operands (1, as CUTLASS)."""
    hi = (SW128_ATOM_BYTES >> 4) | (_LAYOUT_SW128 << 30)  # SBO in bits 32-45, layout type in bits 62-63
    lo = ((Int32(addr_bytes) >> 4) & 0x3FFF) | (1 << 16)
    return (Int64(hi) << 32) | Int64(lo)
