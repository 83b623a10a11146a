"""Inline-PTX memory accesses for the SM90 role2 kernels.

Owns the loads/stores whose width and cache policy matter and which we want to see verbatim in the
PTX: 16-byte global loads of streamed weights with an L2 EVICT_FIRST policy (decode streams every
routed weight once per layer; keeping them out of L2 protects the activation/scale working set),
16-byte shared stores, and plain global/shared scalar accesses by byte address. Addresses are
integers: global = Int64 (generic == global on sm_90 for cudaMalloc memory), shared = Int32
offsets in the CTA window (``cvta``-free, as produced by ``Pointer.toint()`` of an smem pointer).
Also the one prologue every 1-D persistent kernel starts with (:func:`launch_coords`).
"""
from __future__ import annotations

from cutlass import Int32, Int64, Float32
from cutlass.cutlass_dsl import T, dsl_user_op

from .wgmma_rs import _asm, _v


def launch_coords():
    """``(thread, block, blocks)`` of a 1-D launch as Int32: x of the thread index, block index and grid size."""
    import cutlass.cute as cute

    tid, _, _ = cute.arch.thread_idx()
    cta, _, _ = cute.arch.block_idx()
    ncta, _, _ = cute.arch.grid_dim()
    return Int32(tid), Int32(cta), Int32(ncta)


@dsl_user_op
def evict_first_policy(*, loc=None, ip=None) -> Int64:
    """An L2 cache policy register: evict-first for the whole access (``createpolicy``)."""
    return Int64(_asm("createpolicy.fractional.L2::evict_first.b64 $0, 1.0;", "=l", [], 1, T.i64())[0])


@dsl_user_op
def ld_global_v4_stream(addr, policy, *, loc=None, ip=None):
    """16-byte read-only global load with an L2 cache policy, L1 not allocated. 4 Int32."""
    r = _asm(
        "ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {$0, $1, $2, $3}, [$4], $5;",
        "=r,=r,=r,=r,l,l", [_v(addr, Int64), _v(policy, Int64)], 4)
    return [Int32(x) for x in r]


@dsl_user_op
def ld_global_v4(addr, *, loc=None, ip=None):
    """16-byte global load (coherent: data written earlier in the stream / by other kernels)."""
    r = _asm("ld.global.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l", [_v(addr, Int64)], 4)
    return [Int32(x) for x in r]


@dsl_user_op
def ld_global_f32(addr, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("ld.global.f32 $0, [$1];", "=f,l", [_v(addr, Int64)], 1, T.f32())[0])


@dsl_user_op
def ld_global_cg_f32(addr, *, loc=None, ip=None) -> Float32:
    """FP32 load cached in L2 only (``.cg``): data another CTA wrote during this kernel, read after an acquire."""
    return Float32(_asm("ld.global.cg.f32 $0, [$1];", "=f,l", [_v(addr, Int64)], 1, T.f32())[0])


@dsl_user_op
def ld_global_s32(addr, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("ld.global.s32 $0, [$1];", "=r,l", [_v(addr, Int64)], 1)[0])


@dsl_user_op
def st_shared_v4(saddr, x0, x1, x2, x3, *, loc=None, ip=None):
    _asm("st.shared.v4.u32 [$0], {$1, $2, $3, $4};", "r,r,r,r,r",
         [_v(saddr), _v(x0), _v(x1), _v(x2), _v(x3)], 0)


@dsl_user_op
def stmatrix_x4_trans(saddr, r0, r1, r2, r3, *, loc=None, ip=None):
    """Warp-collective (every lane, converged): four 8x8 b16 matrices, each lane's register ``j`` holding row
    ``lane / 4``, columns ``2 (lane % 4)`` and ``+1`` of matrix ``j`` (an MMA accumulator fragment), stored
    transposed: column ``c`` of matrix ``j`` becomes the 16 contiguous bytes at lane ``8 j + c``'s ``saddr``."""
    _asm("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [$0], {$1, $2, $3, $4};", "r,r,r,r,r",
         [_v(saddr), _v(r0), _v(r1), _v(r2), _v(r3)], 0)


@dsl_user_op
def st_shared_f32(saddr, x, *, loc=None, ip=None):
    _asm("st.shared.f32 [$0], $1;", "r,f", [_v(saddr), _v(x, Float32)], 0)


@dsl_user_op
def ld_shared_f32(saddr, *, loc=None, ip=None) -> Float32:
    return Float32(_asm("ld.shared.f32 $0, [$1];", "=f,r", [_v(saddr)], 1, T.f32())[0])


@dsl_user_op
def ld_shared_v4(saddr, *, loc=None, ip=None):
    r = _asm("ld.shared.v4.u32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r", [_v(saddr)], 4)
    return [Int32(x) for x in r]


@dsl_user_op
def st_shared_u64(saddr, x, *, loc=None, ip=None):
    _asm("st.shared.u64 [$0], $1;", "r,l", [_v(saddr), _v(x, Int64)], 0)


@dsl_user_op
def ld_shared_u64(saddr, *, loc=None, ip=None) -> Int64:
    return Int64(_asm("ld.shared.u64 $0, [$1];", "=l,r", [_v(saddr)], 1, T.i64())[0])


@dsl_user_op
def st_shared_u8(saddr, x, *, loc=None, ip=None):
    _asm("st.shared.u8 [$0], $1;", "r,r", [_v(saddr), _v(x)], 0)


@dsl_user_op
def st_global_v4(addr, x0, x1, x2, x3, *, loc=None, ip=None):
    _asm("st.global.v4.u32 [$0], {$1, $2, $3, $4};", "l,r,r,r,r",
         [_v(addr, Int64), _v(x0), _v(x1), _v(x2), _v(x3)], 0)


@dsl_user_op
def st_global_f32(addr, x, *, loc=None, ip=None):
    _asm("st.global.f32 [$0], $1;", "l,f", [_v(addr, Int64), _v(x, Float32)], 0)


@dsl_user_op
def globaltimer(*, loc=None, ip=None) -> Int64:
    """``%globaltimer`` (ns, the GPU-wide clock every SM reads alike): for stamps compared across SMs."""
    return Int64(_asm("mov.u64 $0, %globaltimer;", "=l", [], 1, T.i64())[0])


@dsl_user_op
def clock32(*, loc=None, ip=None) -> Int32:
    """``%clock``: the SM's 32-bit cycle counter (dev stamps compared within one SM only; volatile, so ``ptxas``
    keeps it in order with the other side-effecting instructions: barriers, waits, stores)."""
    return Int32(_asm("mov.u32 $0, %clock;", "=r", [], 1)[0])


@dsl_user_op
def st_global_u32_if(addr, x, pred, *, loc=None, ip=None):
    """Store ``x`` to ``addr`` if ``pred`` (Int32) != 0: one predicated store, no branch in the caller's loop."""
    _asm("{\n.reg .pred p;\nsetp.ne.s32 p, $2, 0;\n@p st.global.u32 [$0], $1;\n}", "l,r,r",
         [_v(addr, Int64), _v(x), _v(pred)], 0)


@dsl_user_op
def smid(*, loc=None, ip=None) -> Int32:
    """``%smid``: the SM this thread runs on (for traces; not a stable id across launches)."""
    return Int32(_asm("mov.u32 $0, %smid;", "=r", [], 1)[0])


@dsl_user_op
def block_coords(*, loc=None, ip=None):
    """``(%ctaid.x, %nctaid.x)`` read by this call's own instructions (volatile: never merged with
    :func:`launch_coords`' values, whose uses in a warp's branch before role2's first barrier took every K loop of its
    two-CTA builds off the uniform datapath, session 47)."""
    return (Int32(_asm("mov.u32 $0, %ctaid.x;", "=r", [], 1)[0]), Int32(_asm("mov.u32 $0, %nctaid.x;", "=r", [], 1)[0]))


def _named_bar(op: str, bar_id, nthreads: int, pred=None):
    """``bar.<op>`` on named barrier ``bar_id``: an int is an immediate, an Int32 a register chosen at run time.
    ``pred`` (Int32, warp-uniform): only where it is != 0, as a predicated instruction — a branch around it would open
    a divergent region in ptxas's view, whose values leave the uniform datapath."""
    bid, args = (str(bar_id), []) if isinstance(bar_id, int) else ("$0", [_v(bar_id, Int32)])
    body = f"bar.{op} {bid}, {int(nthreads)};"
    if pred is not None:
        body = f"{{\n.reg .pred p;\nsetp.ne.s32 p, ${len(args)}, 0;\n@p {body}\n}}"
        args.append(_v(pred, Int32))
    _asm(body, ",".join("r" * len(args)), args, 0)


@dsl_user_op
def bar_sync(bar_id, nthreads: int, *, loc=None, ip=None):
    """Named barrier over ``nthreads`` threads (multiple of 32); ``bar_id`` an int or an Int32 (e.g. per
    warpgroup)."""
    _named_bar("sync", bar_id, nthreads)


@dsl_user_op
def bar_arrive(bar_id, nthreads: int, pred=None, *, loc=None, ip=None):
    """Arrive on named barrier ``bar_id`` without waiting: the producer half of a :func:`bar_sync` /
    ``bar.arrive`` pair over ``nthreads`` threads (``pred``: only where != 0, predicated: :func:`_named_bar`)."""
    _named_bar("arrive", bar_id, nthreads, pred)


# ---------------------------------------------------------------------------------------------
# mbarrier pipeline between a bulk-copy producer warp and consumer warpgroups (one CTA)
# ---------------------------------------------------------------------------------------------
@dsl_user_op
def mbar_init(saddr, count: int, *, loc=None, ip=None):
    _asm(f"mbarrier.init.shared::cta.b64 [$0], {int(count)};", "r", [_v(saddr)], 0)


@dsl_user_op
def mbar_init_fence(*, loc=None, ip=None):
    """Make mbarrier inits visible to the async proxy (bulk copies complete_tx on them)."""
    _asm("fence.mbarrier_init.release.cluster;", "", [], 0)


@dsl_user_op
def mbar_arrive(saddr, *, loc=None, ip=None):
    _asm("mbarrier.arrive.shared::cta.b64 _, [$0];", "r", [_v(saddr)], 0)


@dsl_user_op
def mbar_arrive_expect_tx(saddr, tx_bytes: int, *, loc=None, ip=None):
    _asm(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {int(tx_bytes)};", "r", [_v(saddr)], 0)


@dsl_user_op
def mbar_wait_or_trap(saddr, parity, timeout_ns: int, *, loc=None, ip=None):
    """Wait until the phase with ``parity`` of the mbarrier at ``saddr`` completed; after
    ``timeout_ns`` of %globaltimer without completion execute ``trap`` (DESIGN.md §3: every
    device-side wait is bounded). The loop lives in one PTX scope so its labels stay local."""
    _asm(
        "{\n.reg .pred p;\n.reg .u64 t0, t1;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n"
        "@p bra.uni GCMOE_MBW_DONE;\n"
        "mov.u64 t0, %globaltimer;\n"
        "GCMOE_MBW_LOOP:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1;\n"
        "@p bra.uni GCMOE_MBW_DONE;\n"
        "mov.u64 t1, %globaltimer;\nsub.u64 t1, t1, t0;\n"
        f"setp.lt.u64 p, t1, {int(timeout_ns)};\n"
        "@p bra.uni GCMOE_MBW_LOOP;\n"
        "trap;\n"
        "GCMOE_MBW_DONE:\n}",
        "r,r", [_v(saddr), _v(parity)], 0)


@dsl_user_op
def bulk_copy_g2s(sdst, gsrc, nbytes: int, mbar, policy, *, loc=None, ip=None):
    """1-D bulk copy global -> shared (``cp.async.bulk``, no tensor map), completing ``nbytes`` of
    transaction count on ``mbar``, with an L2 cache policy."""
    _asm(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint "
        f"[$0], [$1], {int(nbytes)}, [$2], $3;",
        "r,l,r,l", [_v(sdst), _v(gsrc, Int64), _v(mbar), _v(policy, Int64)], 0)


@dsl_user_op
def prefetch_l2(gaddr, *, loc=None, ip=None):
    """Bring the global line holding ``gaddr`` into the L2 (``prefetch.global.L2``): a hint, nothing to wait for. (The
    bulk form, ``cp.async.bulk.prefetch.L2``, runs on the uniform datapath: in a warp's branch before role2's first
    barrier it took every K loop of the two-CTA builds off that datapath, session 47.)"""
    _asm("prefetch.global.L2 [$0];", "l", [_v(gaddr, Int64)], 0)


@dsl_user_op
def setmaxnreg(n: int, inc: bool, *, loc=None, ip=None):
    op = "inc" if inc else "dec"
    _asm(f"setmaxnreg.{op}.sync.aligned.u32 {int(n)};", "", [], 0)


@dsl_user_op
def ld_global_v2_stream(addr, policy, *, loc=None, ip=None):
    """8-byte read-only global load with an L2 cache policy. 2 Int32."""
    r = _asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v2.u32 {$0, $1}, [$2], $3;", "=r,=r,l,l",
             [_v(addr, Int64), _v(policy, Int64)], 2)
    return [Int32(x) for x in r]


@dsl_user_op
def ld_shared_v2(saddr, *, loc=None, ip=None):
    r = _asm("ld.shared.v2.u32 {$0, $1}, [$2];", "=r,=r,r", [_v(saddr)], 2)
    return [Int32(x) for x in r]


@dsl_user_op
def ld_global_u8(addr, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("ld.global.u8 $0, [$1];", "=r,l", [_v(addr, Int64)], 1)[0])


@dsl_user_op
def ld_global_f32_if(addr, pred, l2_only: bool = False, *, loc=None, ip=None) -> Float32:
    """``addr``'s FP32 if ``pred`` (Int32) != 0, else +0.0 without reading: a prefetch whose first use is much later
    (a select on a plain load's value would wait for the load where the select is placed), or one of a group of loads
    issued together whose tail may run past the data (adding +0.0 leaves a sum's bits as they are). ``l2_only``: cached
    in L2 only (``.cg``, as :func:`ld_global_cg_f32`)."""
    op = "ld.global.cg.f32" if l2_only else "ld.global.f32"
    return Float32(_asm("{\n.reg .pred p;\nsetp.ne.s32 p, $2, 0;\nmov.f32 $0, 0f00000000;\n"
                        f"@p {op} $0, [$1];\n}}", "=f,l,r", [_v(addr, Int64), _v(pred)], 1, T.f32())[0])


@dsl_user_op
def ld_global_u8_if(addr, pred, *, loc=None, ip=None) -> Int32:
    """:func:`ld_global_f32_if` for one byte (zero-extended)."""
    return Int32(_asm("{\n.reg .pred p;\nsetp.ne.s32 p, $2, 0;\nmov.u32 $0, 0;\n@p ld.global.u8 $0, [$1];\n}",
                      "=r,l,r", [_v(addr, Int64), _v(pred)], 1)[0])


@dsl_user_op
def ld_global_word_if(addr, pred, *, loc=None, ip=None) -> Int32:
    """The 4-byte-aligned 32-bit word holding ``addr`` if ``pred`` (Int32) != 0, else 0 without reading: one load for a
    value whose width is known at run time only (role2's shared K loop: W1's FP32 or W2's UE8M0 token scale, the
    byte picked later by :func:`.role2_math.word_byte`). Two predicated loads of both widths into one register made
    the second wait for the first (a write-after-write on the register, whatever the predicates): a full global-load
    latency per K chunk in W1's tasks (session 37)."""
    return Int32(_asm("{\n.reg .pred p;\n.reg .b64 a;\nsetp.ne.s32 p, $2, 0;\nand.b64 a, $1, -4;\nmov.u32 $0, 0;\n"
                      "@p ld.global.b32 $0, [a];\n}", "=r,l,r", [_v(addr, Int64), _v(pred)], 1)[0])


@dsl_user_op
def st_global_u8(addr, x, *, loc=None, ip=None):
    _asm("st.global.u8 [$0], $1;", "l,r", [_v(addr, Int64), _v(x)], 0)


# ---------------------------------------------------------------------------------------------
# Cross-kernel ring signals (global memory, gpu scope): acquire waits with a trap record on timeout
# ---------------------------------------------------------------------------------------------
def _trap_record_ptx(code: int, expected: str, observed: str) -> str:
    """PTX that writes the gcmoe_runtime.workspace.trap record (magic, code, expected, observed) to
    the host-mapped address in ``$2`` (skipped when 0) and traps. ``expected``/``observed`` are u32
    registers. The magic is written last, after a system fence, so a reader never sees half a record."""
    from gcmoe_runtime.workspace.trap import TRAP_MAGIC

    return (
        "setp.eq.u64 p, $2, 0;\n@p bra.uni GCMOE_TRAP;\n"
        f"st.relaxed.sys.global.u32 [$2+4], {int(code)};\n"
        f"st.relaxed.sys.global.u32 [$2+8], {expected};\n"
        f"st.relaxed.sys.global.u32 [$2+12], {observed};\n"
        "fence.sc.sys;\n"
        f"st.relaxed.sys.global.u32 [$2], {int(TRAP_MAGIC)};\n"
        "fence.sc.sys;\n"
        "GCMOE_TRAP:\ntrap;\n"
    )


@dsl_user_op
def wait_geq_u32_or_trap(addr, target, err, code: int, timeout_ns: int, *, loc=None, ip=None):
    """Spin (``ld.acquire.gpu``, nanosleep backoff) until the u32 at ``addr`` >= ``target``; after
    ``timeout_ns`` write a trap record with ``code`` to ``err`` and trap."""
    _asm(
        "{\n.reg .pred p;\n.reg .u32 v;\n.reg .u64 t0, t1;\n"
        "ld.acquire.gpu.global.u32 v, [$0];\nsetp.ge.u32 p, v, $1;\n@p bra.uni GCMOE_W_DONE;\n"
        "mov.u64 t0, %globaltimer;\n"
        "GCMOE_W_LOOP:\nnanosleep.u32 64;\n"
        "ld.acquire.gpu.global.u32 v, [$0];\nsetp.ge.u32 p, v, $1;\n@p bra.uni GCMOE_W_DONE;\n"
        "mov.u64 t1, %globaltimer;\nsub.u64 t1, t1, t0;\n"
        f"setp.lt.u64 p, t1, {int(timeout_ns)};\n@p bra.uni GCMOE_W_LOOP;\n"
        + _trap_record_ptx(code, "$1", "v") +
        "GCMOE_W_DONE:\n}",
        "l,r,l", [_v(addr, Int64), _v(target), _v(err, Int64)], 0)


@dsl_user_op
def wait_mask_u64_or_trap(addr, need, err, code: int, timeout_ns: int, *, loc=None, ip=None):
    """Spin until every bit of ``need`` (Int64) is set in the u64 at ``addr`` (acquire, gpu scope);
    on timeout record (code, low 32 bits of need, low 32 bits seen) and trap."""
    _asm(
        "{\n.reg .pred p;\n.reg .u64 v, m, t0, t1;\n.reg .u32 e32, o32;\n"
        "ld.acquire.gpu.global.u64 v, [$0];\nand.b64 m, v, $1;\nsetp.eq.u64 p, m, $1;\n@p bra.uni GCMOE_M_DONE;\n"
        "mov.u64 t0, %globaltimer;\n"
        "GCMOE_M_LOOP:\nnanosleep.u32 64;\n"
        "ld.acquire.gpu.global.u64 v, [$0];\nand.b64 m, v, $1;\nsetp.eq.u64 p, m, $1;\n@p bra.uni GCMOE_M_DONE;\n"
        "mov.u64 t1, %globaltimer;\nsub.u64 t1, t1, t0;\n"
        f"setp.lt.u64 p, t1, {int(timeout_ns)};\n@p bra.uni GCMOE_M_LOOP;\n"
        "cvt.u32.u64 e32, $1;\ncvt.u32.u64 o32, v;\n"
        + _trap_record_ptx(code, "e32", "o32") +
        "GCMOE_M_DONE:\n}",
        "l,l,l", [_v(addr, Int64), _v(need, Int64), _v(err, Int64)], 0)


@dsl_user_op
def red_release_add_u32(addr, val, *, loc=None, ip=None):
    _asm("red.release.gpu.global.add.u32 [$0], $1;", "l,r", [_v(addr, Int64), _v(val)], 0)


@dsl_user_op
def red_release_or_b64(addr, bits, *, loc=None, ip=None):
    _asm("red.release.gpu.global.or.b64 [$0], $1;", "l,l", [_v(addr, Int64), _v(bits, Int64)], 0)


@dsl_user_op
def fence_acq_rel_gpu(*, loc=None, ip=None):
    _asm("fence.acq_rel.gpu;", "", [], 0)


@dsl_user_op
def ld_acquire_u32(addr, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("ld.acquire.gpu.global.u32 $0, [$1];", "=r,l", [_v(addr, Int64)], 1)[0])


# ---------------------------------------------------------------------------------------------
# Bulk stores shared -> global (async proxy, bulk-group completion); the constant-size copy, commit
# and full wait live in role1_sync (bulk_s2g, bulk_commit, bulk_wait)
# ---------------------------------------------------------------------------------------------
@dsl_user_op
def fence_proxy_async_shared(*, loc=None, ip=None):
    """Make this thread's earlier generic-proxy shared-memory writes visible to the async proxy (a
    later ``cp.async.bulk`` reading them); every writer executes it before the barrier that precedes
    the issuing thread's bulk copy."""
    _asm("fence.proxy.async.shared::cta;", "", [], 0)


@dsl_user_op
def bulk_s2g_n(gdst, ssrc, nbytes, *, loc=None, ip=None):
    """1-D bulk copy shared -> global of a run-time ``nbytes`` (Int32; multiple of 16, both addresses
    16-byte aligned), tracked by this thread's bulk groups (commit with ``bulk_commit``)."""
    _asm("cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], $2;", "l,r,r",
         [_v(gdst, Int64), _v(ssrc), _v(nbytes)], 0)


@dsl_user_op
def bulk_wait_read(n: int, *, loc=None, ip=None):
    """Wait until at most ``n`` of this thread's bulk groups still *read* their shared source (the
    source may then be overwritten; the global writes need not be performed yet)."""
    _asm(f"cp.async.bulk.wait_group.read {int(n)};", "", [], 0)


# ---------------------------------------------------------------------------------------------
# Non-bulk asynchronous copies global -> shared (``cp.async``, LDGSTS): the consumers' prefetch of the next
# activation chunk (role2_chunks.for_each_chunk). Generic proxy: wait, then fence.proxy.async before a barrier
# if wgmma (async proxy) reads the bytes.
# ---------------------------------------------------------------------------------------------
@dsl_user_op
def cp_async_16_zfill(sdst, gsrc, src_bytes, *, loc=None, ip=None):
    """Copy 16 bytes global -> shared without stopping the thread, L2 only (``.cg``); ``src_bytes`` (Int32, 0 or
    16) bytes are read and the rest of the 16 zero-filled, so ``src_bytes = 0`` writes zeros and reads nothing."""
    _asm("cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r", [_v(sdst), _v(gsrc, Int64), _v(src_bytes)], 0)


@dsl_user_op
def cp_async_4_zfill(sdst, gsrc, src_bytes, *, loc=None, ip=None):
    """Copy 4 bytes global -> shared without stopping the thread (``.ca``, the only mode below 16 bytes);
    ``src_bytes`` (Int32, 0 or 4) as :func:`cp_async_16_zfill`: 0 writes zeros and reads nothing."""
    _asm("cp.async.ca.shared.global [$0], [$1], 4, $2;", "r,l,r", [_v(sdst), _v(gsrc, Int64), _v(src_bytes)], 0)


@dsl_user_op
def cp_async_16_if(sdst, gsrc, pred, *, loc=None, ip=None):
    """Copy 16 bytes global -> shared without stopping the thread, L2 only (``.cg``), only where ``pred`` (Int32)
    is nonzero: otherwise nothing is read or written (no zero-fill write that a later copy could race)."""
    _asm("{\n.reg .pred p;\nsetp.ne.u32 p, $2, 0;\n@p cp.async.cg.shared.global [$0], [$1], 16;\n}", "r,l,r",
         [_v(sdst), _v(gsrc, Int64), _v(pred)], 0)


@dsl_user_op
def cp_async_commit(*, loc=None, ip=None):
    """Close this thread's ``cp.async`` issued since the last commit into one group (an empty group if none)."""
    _asm("cp.async.commit_group;", "", [], 0)


@dsl_user_op
def cp_async_wait_group(n: int, *, loc=None, ip=None):
    """Wait until at most ``n`` of this thread's newest ``cp.async`` groups are pending (the older ones have written
    shared memory, visible to this thread)."""
    _asm(f"cp.async.wait_group {int(n)};", "", [], 0)


@dsl_user_op
def cp_async_wait_all(*, loc=None, ip=None):
    """Wait until every ``cp.async`` this thread issued has written shared memory (commit + wait_group 0)."""
    _asm("cp.async.wait_all;", "", [], 0)


# ---------------------------------------------------------------------------------------------
# Tensor-map (TMA) copies global -> shared: the activation chunk as KC/128 boxes of [BM rows x 128 B]
# (role2_chunks.for_each_chunk with Role2GemmConfig.act_tma). The tensor map lives in global memory, written by the
# host before the launch (gcmoe_runtime.workspace.act_tma): the kernel gets its address as a plain u64.
# ---------------------------------------------------------------------------------------------
@dsl_user_op
def tma_load_2d(sdst, tmap, c0, c1, mbar, *, loc=None, ip=None):
    """One box of the 2-D tensor map at global address ``tmap`` (Int64) at coordinates ``(c0, c1)`` (innermost
    first, Int32) into shared memory at ``sdst``, completing its bytes of transaction count on ``mbar``."""
    _asm("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];",
         "r,l,r,r,r", [_v(sdst), _v(tmap, Int64), _v(c0), _v(c1), _v(mbar)], 0)


@dsl_user_op
def fence_tensormap_acquire(tmap, *, loc=None, ip=None):
    """Order this thread's later tensor-map uses after the generic-proxy writes of the 128-byte map at ``tmap``
    (a map in global memory; once per kernel, by the thread that issues the copies), and prefetch it."""
    _asm("fence.proxy.tensormap::generic.acquire.gpu [$0], 128;\nprefetch.tensormap [$0];", "l", [_v(tmap, Int64)], 0)


@dsl_user_op
def fence_proxy_async_global(*, loc=None, ip=None):
    """Order this thread's earlier generic-proxy accesses (an acquire of data other CTAs stored) before its later
    async-proxy global reads (a tensor-map copy of that data)."""
    _asm("fence.proxy.async.global;", "", [], 0)
