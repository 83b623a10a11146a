"""Ring-protocol signal operations for the registered SM90 role2 kernel (:mod:`.role2_ring`), with
*run-time* timeouts.

The verified GEMM kernels (:mod:`.role2_persistent`) bound their waits with a compile-time timeout
(``ptx_mem.wait_geq_u32_or_trap``); the registered kernel takes ``timeout_ns`` as a by-value
parameter like role1/role3 (``gcmoe_runtime.operator.values``: long by default, short in tests), so
every wait here reads the bound from a register. Each wait is one inline-PTX scope (local labels,
visible verbatim in the PTX for the protocol-order tests): acquire load, ``nanosleep`` back-off,
``%globaltimer`` bound, then the trap record of ``gcmoe_runtime.workspace.trap`` (magic written last
after a system fence) and ``trap``.

``bra.uni`` promises ptxas that every active thread of the warp takes the branch alike; ptxas then lays out the
warp's reconvergence on that promise. It holds where one thread waits (the producer thread) or where the whole warp
polls one address in one instruction (every lane loads the same value). A wait whose lanes poll *different* words
(:func:`wait_arrived_count`: one receive counter per lane) branches with plain ``bra``: with ``bra.uni`` there
(session 30) the lanes that saw their counter late split from the others, warp 0 of the 32-expert builds left the
poll in two halves, ran ``setmaxnreg`` and the task loop split (undefined), and the layer trapped or faulted about
once in ten calls whenever role1 was still publishing while role2 polled (results/operator/2026-12-02-h200-session30).
"""
from __future__ import annotations

from cutlass import Int32, Int64
from cutlass.cutlass_dsl import dsl_user_op

from gcmoe_runtime.workspace.trap import TRAP_MAGIC

from .role1_sync import ld_u32 as ld_relaxed_gpu_u32  # noqa: F401  (ring header / parity words)
from .wgmma_rs import _asm, _v


def _record(code: int, err: str, expected: str, observed: str) -> str:
    """Trap-record PTX: (magic, code, expected, observed) to the host-mapped address ``err`` (skipped
    when 0), then ``trap``. Needs a predicate register ``p`` declared by the caller."""
    return (
        f"setp.eq.u64 p, {err}, 0;\n@p bra.uni GCMOE_R_TRAP;\n"
        f"st.relaxed.sys.u32 [{err}+4], {int(code)};\n"
        f"st.relaxed.sys.u32 [{err}+8], {expected};\n"
        f"st.relaxed.sys.u32 [{err}+12], {observed};\n"
        "fence.sc.sys;\n"
        f"st.relaxed.sys.u32 [{err}], {int(TRAP_MAGIC)};\n"
        "fence.sc.sys;\n"
        "GCMOE_R_TRAP:\ntrap;\n"
    )


@dsl_user_op
def wait_geq_u32_rt(addr, target, err, code: int, timeout_ns, *, loc=None, ip=None):
    """Spin (``ld.acquire.gpu``) until the u32 at ``addr`` >= ``target``; after ``timeout_ns`` (Int64
    register) record (code, target, seen) and trap."""
    _asm(
        "{\n.reg .pred p;\n.reg .u32 v;\n.reg .u64 t0, t1;\n"
        "ld.acquire.gpu.global.u32 v, [$0];\nsetp.ge.u32 p, v, $1;\n@p bra.uni GCMOE_R_DONE;\n"
        "mov.u64 t0, %globaltimer;\n"
        "GCMOE_R_LOOP:\nnanosleep.u32 64;\n"
        "ld.acquire.gpu.global.u32 v, [$0];\nsetp.ge.u32 p, v, $1;\n@p bra.uni GCMOE_R_DONE;\n"
        "mov.u64 t1, %globaltimer;\nsub.u64 t1, t1, t0;\n"
        "setp.lt.u64 p, t1, $3;\n@p bra.uni GCMOE_R_LOOP;\n"
        + _record(code, "$2", "$1", "v") +
        "GCMOE_R_DONE:\n}",
        "l,r,l,l", [_v(addr, Int64), _v(target), _v(err, Int64), _v(timeout_ns, Int64)], 0)


@dsl_user_op
def wait_mask_u64_rt(addr, need, err, code: int, timeout_ns, *, loc=None, ip=None):
    """Spin until every bit of ``need`` (Int64) is set in the u64 at ``addr`` (acquire, gpu scope);
    on timeout record (code, low 32 bits of need, low 32 bits seen) and trap."""
    _asm(
        "{\n.reg .pred p;\n.reg .u64 v, m, t0, t1;\n.reg .u32 e32, o32;\n"
        "ld.acquire.gpu.global.u64 v, [$0];\nand.b64 m, v, $1;\nsetp.eq.u64 p, m, $1;\n@p bra.uni GCMOE_R_DONE;\n"
        "mov.u64 t0, %globaltimer;\n"
        "GCMOE_R_LOOP:\nnanosleep.u32 64;\n"
        "ld.acquire.gpu.global.u64 v, [$0];\nand.b64 m, v, $1;\nsetp.eq.u64 p, m, $1;\n@p bra.uni GCMOE_R_DONE;\n"
        "mov.u64 t1, %globaltimer;\nsub.u64 t1, t1, t0;\n"
        "setp.lt.u64 p, t1, $3;\n@p bra.uni GCMOE_R_LOOP;\n"
        "cvt.u32.u64 e32, $1;\ncvt.u32.u64 o32, v;\n"
        + _record(code, "$2", "e32", "o32") +
        "GCMOE_R_DONE:\n}",
        "l,l,l,l", [_v(addr, Int64), _v(need, Int64), _v(err, Int64), _v(timeout_ns, Int64)], 0)


@dsl_user_op
def wait_arrived_count(addr, contributors: int, err, code: int, timeout_ns, scope: str, *, loc=None,
                       ip=None) -> Int32:
    """Spin (``ld.acquire`` at the protocol's ``scope``, ``role_common.peer_scope``: "sys" where a peer wrote it
    over NVLink) until the packed receive counter at
    ``addr`` — ``(contributors << 32) | tokens``, published by role1 once every source CTA has added —
    has exactly ``contributors`` in its high word; return the token count (low word). On timeout
    record (code, contributors, high word seen) and trap. The lanes of a warp poll different counters, so every
    branch is a plain (divergent) ``bra`` (module docstring)."""
    return Int32(_asm(arrived_count_ptx(contributors, code, scope), "=r,l,l,l",
                      [_v(addr, Int64), _v(err, Int64), _v(timeout_ns, Int64)], 1)[0])


def arrived_count_ptx(contributors: int, code: int, scope: str) -> str:
    """The PTX of :func:`wait_arrived_count` (``$0`` count out, ``$1`` address, ``$2`` trap record, ``$3`` timeout)."""
    return (
        "{\n.reg .pred p;\n.reg .u64 v, t0, t1;\n.reg .u32 hi;\n"
        f"ld.acquire.{scope}.global.u64 v, [$1];\nshr.u64 t1, v, 32;\ncvt.u32.u64 hi, t1;\n"
        f"setp.eq.u32 p, hi, {int(contributors)};\n@p bra GCMOE_R_DONE;\n"
        "mov.u64 t0, %globaltimer;\n"
        "GCMOE_R_LOOP:\nnanosleep.u32 128;\n"
        f"ld.acquire.{scope}.global.u64 v, [$1];\nshr.u64 t1, v, 32;\ncvt.u32.u64 hi, t1;\n"
        f"setp.eq.u32 p, hi, {int(contributors)};\n@p bra GCMOE_R_DONE;\n"
        "mov.u64 t1, %globaltimer;\nsub.u64 t1, t1, t0;\n"
        "setp.lt.u64 p, t1, $3;\n@p bra GCMOE_R_LOOP;\n"
        + _record(code, "$2", str(int(contributors)), "hi") +
        "GCMOE_R_DONE:\ncvt.u32.u64 $0, v;\n}")


@dsl_user_op
def mbar_wait_rt(saddr, parity, err, code: int, timeout_ns, *, loc=None, ip=None):
    """Wait for the phase with ``parity`` of the shared mbarrier at ``saddr``; trap (with a record)
    after ``timeout_ns`` (Int64 register)."""
    _asm(
        "{\n.reg .pred p;\n.reg .u64 t0, t1;\n.reg .u32 par;\nmov.u32 par, $1;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n"
        "@p bra.uni GCMOE_R_DONE;\n"
        "mov.u64 t0, %globaltimer;\n"
        "GCMOE_R_LOOP:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n"
        "@p bra.uni GCMOE_R_DONE;\n"
        "mov.u64 t1, %globaltimer;\nsub.u64 t1, t1, t0;\n"
        "setp.lt.u64 p, t1, $3;\n@p bra.uni GCMOE_R_LOOP;\n"
        + _record(code, "$2", "par", "par") +
        "GCMOE_R_DONE:\n}",
        "r,r,l,l", [_v(saddr), _v(parity), _v(err, Int64), _v(timeout_ns, Int64)], 0)


@dsl_user_op
def trap_if_ne(value, expected, err, code: int, *, loc=None, ip=None):
    """Protocol check: record (code, expected, value) and trap when ``value != expected``."""
    _asm(
        "{\n.reg .pred p;\nsetp.eq.u32 p, $0, $1;\n@p bra.uni GCMOE_R_DONE;\n"
        + _record(code, "$2", "$1", "$0") +
        "GCMOE_R_DONE:\n}",
        "r,r,l", [_v(value), _v(expected), _v(err, Int64)], 0)


@dsl_user_op
def atom_add_acqrel_gpu_u32(addr, val, *, loc=None, ip=None) -> Int32:
    """``atom.acq_rel.gpu.add.u32``: returns the old value (orders this CTA's earlier accesses before
    the add and the caller's later accesses after every earlier add)."""
    return Int32(_asm("atom.acq_rel.gpu.global.add.u32 $0, [$1], $2;", "=r,l,r", [_v(addr, Int64), _v(val)], 1)[0])


@dsl_user_op
def atom_add_relaxed_gpu_u32_if(addr, val, pred, *, loc=None, ip=None) -> Int32:
    """``atom.relaxed.gpu.add.u32`` where ``pred`` (Int32) != 0, returning the old value (0 elsewhere, nothing
    added). Relaxed: no fence and no L1 invalidation wait on the result, so a ticket claimed ahead stays in flight
    until its first use; for counters that publish no data."""
    return Int32(_asm("{\n.reg .pred p;\nsetp.ne.s32 p, $3, 0;\nmov.u32 $0, 0;\n"
                      "@p atom.relaxed.gpu.global.add.u32 $0, [$1], $2;\n}", "=r,l,r,r",
                      [_v(addr, Int64), _v(val), _v(pred)], 1)[0])


@dsl_user_op
def atom_add_release_gpu_u32(addr, val, *, loc=None, ip=None) -> Int32:
    """``atom.release.gpu.add.u32``: returns the old value; orders this CTA's earlier accesses (through the caller's
    barrier) before the add, with no acquire half (no L1 invalidation): a caller that goes on to act on the other
    adders' releases adds ``fence.acq_rel.gpu`` on that path."""
    return Int32(_asm("atom.release.gpu.global.add.u32 $0, [$1], $2;", "=r,l,r", [_v(addr, Int64), _v(val)], 1)[0])


@dsl_user_op
def atom_add_relaxed_gpu_u32(addr, val, *, loc=None, ip=None) -> Int32:
    """``atom.relaxed.gpu.add.u32``: returns the old value; no ordering (a ticket counter that publishes no data)."""
    return Int32(_asm("atom.relaxed.gpu.global.add.u32 $0, [$1], $2;", "=r,l,r", [_v(addr, Int64), _v(val)], 1)[0])


@dsl_user_op
def st_relaxed_gpu_u32(addr, val, *, loc=None, ip=None):
    _asm("st.relaxed.gpu.global.u32 [$0], $1;", "l,r", [_v(addr, Int64), _v(val)], 0)


@dsl_user_op
def st_relaxed_gpu_u64(addr, val, *, loc=None, ip=None):
    _asm("st.relaxed.gpu.global.u64 [$0], $1;", "l,l", [_v(addr, Int64), _v(val, Int64)], 0)


@dsl_user_op
def shfl_bfly_s32(x, lane_mask: int, *, loc=None, ip=None) -> Int32:
    return Int32(_asm(f"shfl.sync.bfly.b32 $0, $1, {int(lane_mask)}, 31, -1;", "=r,r", [_v(x)], 1)[0])


@dsl_user_op
def st_shared_b32(saddr, x, *, loc=None, ip=None):
    _asm("st.shared.b32 [$0], $1;", "r,r", [_v(saddr), _v(x)], 0)


@dsl_user_op
def ld_shared_b32(saddr, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("ld.shared.b32 $0, [$1];", "=r,r", [_v(saddr)], 1)[0])


@dsl_user_op
def redux_min_u32(x, *, loc=None, ip=None) -> Int32:
    """The warp's minimum of ``x`` (all 32 lanes must execute it). ``REDUX`` writes a uniform register, so ptxas
    treats the result, and what is computed from it, as warp-uniform; role2_ring's task-loop exit takes it (session
    39: with ``make_warp_uniform``, a shuffle, the BM 48 build's K loops took 7-9 more instructions and 24 more
    spills)."""
    return Int32(_asm("redux.sync.min.u32 $0, $1, -1;", "=r,r", [_v(x)], 1)[0])


__all__ = ["atom_add_acqrel_gpu_u32", "atom_add_release_gpu_u32", "atom_add_relaxed_gpu_u32", "ld_relaxed_gpu_u32", "ld_shared_b32",
           "mbar_wait_rt", "redux_min_u32", "shfl_bfly_s32", "st_relaxed_gpu_u32", "st_relaxed_gpu_u64", "st_shared_b32",
           "trap_if_ne", "wait_arrived_count", "wait_geq_u32_rt", "wait_mask_u64_rt"]
