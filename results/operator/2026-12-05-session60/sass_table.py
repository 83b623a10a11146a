"""Session 60's CPU evidence for the epilogue warpgroup (no device was lent): the SASS of the BM 64 builds with and
without it — the dev kernel's forms (``role2_devbuild``: ``_ppksafwr`` / ``_ppksafwre``, ``_ppksafr`` / ``_ppksafre``)
and the ring kernel's variant (``epilogue_wg``) at the GLM-5.2 and DSV-4.1-Flash shapes: instructions per innermost MMA
loop, spill instructions (all / in MMA loops), ``R2UR`` per MMA loop (0: on the uniform datapath), and each
``setmaxnreg`` region's cap and highest register.

    .venv/bin/python results/operator/2026-12-05-session60/sass_table.py > results/operator/2026-12-05-session60/sass_table.md
"""
from __future__ import annotations

SHAPES = {"GLM-5.2": (6144, 2048), "DSV-4.1-Flash": (5120, 2304)}


def main():
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from gcmoe_build import sass
    from gcmoe_build.compile import compile_variant
    from gcmoe_build.kernels.sm90.role2_config import Role2GemmConfig
    from gcmoe_build.kernels.sm90.role2_devbuild import ACT2_EXPERIMENTS, compile_one
    from gcmoe_build.variants import FrozenParams, Variant

    def row(label, cubin):
        s = sass.summarize(cubin)
        loops = " / ".join(str(n) for n, _ in s.mma_loops)
        regions = ", ".join(f"{cap}: R{used}" for cap, used in sass.setmaxnreg_regions(sass.disassemble(cubin)))
        r2ur = " / ".join(str(n) for n in s.r2ur_in_mma_loops)
        print(f"| {label} | {loops} | {s.spill_ops} ({s.spill_ops_in_mma_loops}) | {r2ur} | {regions} |", flush=True)

    print("| build | instructions per MMA loop | spills (in MMA loops) | R2UR per MMA loop | setmaxnreg cap: highest "
          "register |")
    print("|---|---|---|---|---|")
    for shape, (h, i) in SHAPES.items():
        for mode, k, rows in (("w1", h, 2 * i), ("w2", i, h)):
            for sfx in ("_ppksafwr", "_ppksafwre", "_ppksafr", "_ppksafre"):
                cfg = Role2GemmConfig(mode=mode, k=k, rows=rows, bm=64, pipelined=True, **ACT2_EXPERIMENTS[sfx])
                _, cubin, _ = compile_one(f"role2_{mode}_bm64{sfx}", cfg)
                row(f"dev {shape} {mode.upper()} {sfx}", cubin)
    base = dict(experts=256, top_k=8, ranks=1, capacity=256, threads=384, dispatch_sms=8, compute_sms=124,
                act_alpha=1.0, act_clamp=10.0, act_fast_math=True, activation="swiglu", ctas_per_sm=1, w1_split=1,
                recipe_routed="e4m3-fp32k128_x_mxfp4", shared_experts=1, k_interleave=2, bm=64)
    for shape, (h, i) in SHAPES.items():
        for ewg in (0, 1):
            p = {**base, "hidden": h, "intermediate": i, **({"epilogue_wg": 1} if ewg else {})}
            art = compile_variant(Variant("role2", "sm_90a", FrozenParams(p), "session60"))
            row(f"ring {shape} BM 64" + (" epilogue_wg" if ewg else ""), art.cubin)


if __name__ == "__main__":
    main()
