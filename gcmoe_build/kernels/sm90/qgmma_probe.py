"""Dev probe (never in a bundle): the tensor-core rate of role2's MMA pattern alone, to tell whether the register-A
QGMMA at N = BM is what makes role2's consumers cost more per token column than the FP8 peak predicts (session 9,
docs/PERFORMANCE.md "the consumers alone").

One CTA per SM, two warpgroups (as role2's consumers), ``iters`` iterations of role2's K256 pattern with nothing
else: per K128 step 4 K32 x 2 slabs of ``wgmma m64n{n}k32 .e4m3`` chained on a partial per slab, one commit group per
step, the previous step's partials waited (``wait_group 1``) and FMA'd into the accumulators (promote), the last
drained. ``mode="rs"``: A from 8 constant registers (role2's operand form, no decode); ``mode="ss"``: A from a
shared-memory descriptor (the decode-to-shared alternative, minus the decode and its stores). B and A bytes are
whatever the shared memory holds; only the time is meaningful.

``slabs=1`` (session 19, for role4's large-T redesign, results/operator/NEXT.md item 1): one 64-row slab per
warpgroup at N = 64 / 128 tokens, the pattern a task of 128 rows x up to 128 tokens per weight read would run (two
partials of N/2 registers in flight plus the accumulator: N = 128 is the largest that fits).

    python -m gcmoe_build.kernels.sm90.qgmma_probe OUTDIR     # cubins + index.json for bench_qgmma.py
"""
from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass import Int32, Int64, Float32, Uint8

from .ptx_mem import st_global_f32
from .wgmma_rs import fence_f32, smem_desc, wgmma_commit, wgmma_fence, wgmma_rs_e4m3, wgmma_ss_e4m3, wgmma_wait

NS = (8, 16, 32, 64)
MODES = ("rs", "ss")
#: the one-slab-per-warpgroup builds: (mode, N)
ONE_SLAB = (("rs", 64), ("rs", 128), ("ss", 64), ("ss", 128))
THREADS = 256
A_BYTES = 2 * 4 * 2048  # SS: per warpgroup 2 slabs x 4 K32 x [2][64] 16-byte units


def _step(n: int, mode: str, smem, wg, a, b_off: int, slabs: int = 2):
    """One K128 step: 4 K32 x ``slabs`` slabs chained on a partial per slab, one commit group."""
    p = [None] * slabs
    for q in range(4):
        bdesc = smem_desc(smem + b_off + q * 2 * n * 16, n * 16, 128)
        wgmma_fence()
        for sl in range(slabs):
            if mode == "rs":
                p[sl] = wgmma_rs_e4m3(n, a[4 * sl:4 * sl + 4], bdesc, p[sl])
            else:
                base = smem + wg * A_BYTES + q * 2048 + sl * 4 * 2048
                p[sl] = wgmma_ss_e4m3(n, smem_desc(base, 1024, 128), bdesc, p[sl])
    wgmma_commit()
    return p


def _promote(acc, p, nd: int):
    for sl, part in enumerate(p):
        for i in range(nd):
            acc[sl * nd + i] = acc[sl * nd + i] + fence_f32(part[i]) * Float32(1.5)


def smem_bytes(n: int) -> int:
    return 2 * A_BYTES + 4 * 2 * n * 16


def build_probe(n: int, mode: str, slabs: int = 2):
    nd = n // 2
    b_off = 2 * A_BYTES

    @cute.kernel
    def probe_kernel(out: Int64, iters: Int32):
        tid, _, _ = cute.arch.thread_idx()
        tid = Int32(tid)
        smem = cute.arch.get_dyn_smem(Uint8, 1024).toint()
        wg = tid // 128
        a = [Int32(0x38383838) ^ (tid + r) for r in range(8)]
        acc = cute.make_rmem_tensor((slabs * nd,), Float32)
        for i in cutlass.range_constexpr(slabs * nd):
            acc[i] = Float32(0.0)

        for it in cutlass.range(iters, unroll=1):
            p0 = _step(n, mode, smem, wg, a, b_off, slabs)
            p1 = _step(n, mode, smem, wg, a, b_off, slabs)
            wgmma_wait(1)
            _promote(acc, p0, nd)
            wgmma_wait(0)
            _promote(acc, p1, nd)
        s = Float32(0.0)
        for i in cutlass.range_constexpr(slabs * nd):
            s = s + acc[i]
        st_global_f32(out + Int64(cute.arch.block_idx()[0] * THREADS + tid) * 4, s)

    @cute.jit
    def probe_host(out: Int64, iters: Int32, nblocks: Int32):
        probe_kernel(out, iters).launch(grid=[nblocks, 1, 1], block=[THREADS, 1, 1], smem=smem_bytes(n))

    return probe_host, probe_kernel


def main(argv=None):
    from .probe_build import probe_main

    def probes():
        for mode in MODES:
            for n in NS:
                host, kern = build_probe(n, mode)
                yield (f"qgmma_probe_{mode}_n{n}", host, kern, (Int64(0), Int32(1), Int32(1)),
                       {"n": n, "mode": mode, "slabs": 2, "threads": THREADS, "smem": smem_bytes(n)})
        for mode, n in ONE_SLAB:
            host, kern = build_probe(n, mode, slabs=1)
            yield (f"qgmma_probe_{mode}1_n{n}", host, kern, (Int64(0), Int32(1), Int32(1)),
                   {"n": n, "mode": f"{mode}1", "slabs": 1, "threads": THREADS, "smem": smem_bytes(n)})

    probe_main(__doc__.splitlines()[0], probes, argv)


if __name__ == "__main__":
    main()
