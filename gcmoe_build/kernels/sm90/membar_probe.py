"""Dev probe (never in a bundle): what a GPU-scope fence costs the warps around it (session 12, docs/PERFORMANCE.md
"why the persistent kernel still trails one CTA per task").

Session 12 found that the persistent role2 kernel's per-task release (consumer thread 0: ``red.release.gpu``, one
``MEMBAR.GPU``) holds the seven other consumer warps for ~1 µs at the task's last barrier, whether or not stores are
outstanding, and that handing it to a producer-warpgroup thread (the release queue) made the kernel slower. Which of
two readings is right decides the fix: (a) the MEMBAR only stalls its own warp (then the release queue lost for
another reason, and a thread outside the consumers is the fix), or (b) a MEMBAR stalls the SM's other warps too (then
only fewer MEMBARs help: batch the releases).

Two CTAs per SM (role2's BM 8 tile), each two worker warpgroups and one side warp. Every worker iteration is role2's
consumer pattern at N = 8 (:mod:`.qgmma_probe`'s two K128 steps of register-A ``wgmma m64n8k32``, their promotes)
plus a 16-byte global load that streams a buffer larger than L2 and four shared loads, like the decode's. Modes:

* ``quiet``: the side warp does nothing (the reference);
* ``side``: side warp lane 0 runs ``red.release.gpu`` (one MEMBAR, the ring's release) every ``gap_ns``
  (``nanosleep``) until the workers finish: if the workers slow down against ``quiet``, a MEMBAR costs other warps
  (reading (b));
* ``side_store``: the same with one global store before each release (the MEMBAR has a store to wait for);
* ``side_acqrel``: ``fence.acq_rel.gpu`` + a relaxed ``red`` (a MEMBAR and the acquire half's L1 invalidation, which
  the workers' L1-cached loads may feel);
* ``inline``: every ``period`` iterations the workers pass a barrier, worker thread 0 runs ``red.release.gpu``
  (role2's release) and the workers pass a second barrier: role2's task end and next task top;
* ``inline_none``: the same two barriers without the release (the reference for ``inline``).

Parameters (runtime): ``iters`` worker iterations, ``period`` (inline modes), ``gap_ns`` (side modes). ``out`` gets one
float per worker thread (their sums: keeps the loads and MMAs alive) and, at ``out[grid * 256 + cta]``, the side warp's
fence count as a float. Every wait is bounded: the side loop stops after ``MAX_FENCES`` whatever the workers do.

    python -m gcmoe_build.kernels.sm90.membar_probe OUTDIR    # cubins + index.json for bench_membar.py
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, Uint8, const_expr
from cutlass.cutlass_dsl import dsl_user_op

from .ptx_mem import (bar_sync, fence_acq_rel_gpu, fence_proxy_async_shared, launch_coords, ld_global_v4,
                      red_release_add_u32, st_global_f32)
from .qgmma_probe import _promote, _step
from .ring_sync import st_relaxed_gpu_u32
from .wgmma_rs import _asm, _v, wgmma_wait

MODES = ("quiet", "side", "side_store", "side_acqrel", "inline", "inline_none")
N = 8
WORKERS = 256
THREADS = WORKERS + 32
A_BYTES = 0  # register-A only: the probe's B tile starts at the top of shared memory
B_BYTES = 4 * 2 * N * 16  # qgmma_probe's B layout: 4 K32 x [2][N] 16-byte units
FLAG_OFF = B_BYTES  # the workers' "done" flag (4 B), then 1 KB that the workers' shared loads read
LDS_OFF = FLAG_OFF + 16
SMEM = LDS_OFF + 1024
MAX_FENCES = 1 << 22
#: the streamed buffer is read in 16-byte units, wrapping at this many units (256 MiB: past the 60 MiB L2)
WRAP_UNITS = (256 << 20) // 16


@dsl_user_op
def _ld_volatile_shared(saddr, *, loc=None, ip=None) -> Int32:
    return Int32(_asm("ld.volatile.shared.b32 $0, [$1];", "=r,r", [_v(saddr)], 1)[0])


@dsl_user_op
def _st_volatile_shared(saddr, x, *, loc=None, ip=None):
    _asm("st.volatile.shared.b32 [$0], $1;", "r,r", [_v(saddr), _v(x)], 0)


@dsl_user_op
def _nanosleep(ns, *, loc=None, ip=None):
    _asm("nanosleep.u32 $0;", "r", [_v(ns)], 0)


@dsl_user_op
def _red_relaxed_add(addr, x, *, loc=None, ip=None):
    _asm("red.relaxed.gpu.global.add.u32 [$0], $1;", "l,r", [_v(addr, Int64), _v(x)], 0)


def build_probe(mode: str):
    if mode not in MODES:
        raise ValueError(f"membar probe mode {mode!r}: one of {MODES}")
    nd = N // 2
    side = mode.startswith("side")
    inline = mode in ("inline", "inline_none")

    @cute.kernel
    def probe_kernel(out: Int64, buf: Int64, sig: Int64, iters: Int32, period: Int32, gap_ns: Int32):
        tid, cta, ncta = launch_coords()
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        if tid == 0:
            _st_volatile_shared(smem + FLAG_OFF, Int32(0))
        if tid < B_BYTES // 4:
            # the B tile: finite E4M3 (1.0 and 1.125), so the workers' sums are finite (unwritten shared memory can
            # hold NaN encodings); wgmma reads it through the async proxy
            _st_volatile_shared(smem + tid * 4, Int32(0x38393839))
        fence_proxy_async_shared()
        bar_sync(0, THREADS)
        if tid < WORKERS:
            wg = tid // 128
            a = [Int32(0x38383838) ^ (tid + r) for r in range(8)]
            acc = cute.make_rmem_tensor((2 * nd,), Float32)
            for i in cutlass.range_constexpr(2 * nd):
                acc[i] = Float32(0.0)
            x = Int32(0)
            for it in cutlass.range(iters, unroll=1):
                unit = (Int64(it) * Int64(ncta) + Int64(cta)) * WORKERS + Int64(tid)
                v = ld_global_v4(buf + (unit % WRAP_UNITS) * 16)
                for r in range(4):
                    x = x ^ _ld_volatile_shared(smem + LDS_OFF + ((tid * 4 + r * 32) % 256) * 4)
                p0 = _step(N, "rs", smem, wg, a, A_BYTES)
                p1 = _step(N, "rs", smem, wg, a, A_BYTES)
                wgmma_wait(1)
                _promote(acc, p0, nd)
                wgmma_wait(0)
                _promote(acc, p1, nd)
                x = x ^ v[0] ^ v[3]
                if const_expr(inline):
                    if it % period == period - 1:
                        bar_sync(1, WORKERS)  # role2's task end: every consumer's stores issued
                        if const_expr(mode == "inline"):
                            if tid == 0:
                                red_release_add_u32(sig, Int32(1))
                        bar_sync(1, WORKERS)  # the next task's top
            bar_sync(1, WORKERS)
            if tid == 0:
                _st_volatile_shared(smem + FLAG_OFF, Int32(1))
            s = Float32(x & 1)
            for i in cutlass.range_constexpr(2 * nd):
                s = s + acc[i]
            st_global_f32(out + Int64(cta * WORKERS + tid) * 4, s)
        else:
            if const_expr(side):
                if tid == WORKERS:
                    count = Int32(0)
                    go = Int32(1)
                    while go != 0:
                        if const_expr(mode == "side_store"):
                            st_relaxed_gpu_u32(sig + 8, count)
                        if const_expr(mode == "side_acqrel"):
                            fence_acq_rel_gpu()
                            _red_relaxed_add(sig + 4, Int32(1))
                        else:
                            red_release_add_u32(sig + 4, Int32(1))
                        _nanosleep(gap_ns)
                        count = count + 1
                        go = Int32(_ld_volatile_shared(smem + FLAG_OFF) == 0) * Int32(count < MAX_FENCES)
                    st_global_f32(out + Int64(ncta * WORKERS + cta) * 4, Float32(count))

    @cute.jit
    def probe_host(out: Int64, buf: Int64, sig: Int64, iters: Int32, period: Int32, gap_ns: Int32, nblocks: Int32):
        probe_kernel(out, buf, sig, iters, period, gap_ns).launch(grid=[nblocks, 1, 1], block=[THREADS, 1, 1],
                                                                   smem=SMEM, min_blocks_per_mp=2,
                                                                   preferred_smem_carveout=100)

    return probe_host, probe_kernel


def main(argv=None):
    from .probe_build import probe_main

    def probes():
        for mode in MODES:
            host, kern = build_probe(mode)
            yield (f"membar_probe_{mode}", host, kern,
                   (Int64(0), Int64(0), Int64(0), Int32(1), Int32(1), Int32(0), Int32(1)),
                   {"mode": mode, "threads": THREADS, "smem": SMEM, "workers": WORKERS})

    probe_main(__doc__.splitlines()[0], probes, argv)


if __name__ == "__main__":
    main()
