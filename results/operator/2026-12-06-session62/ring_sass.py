"""Session 62's SASS check of the ring kernel's role2 builds (GLM-5.2 / DSV-4.1-Flash shapes, BM 64 with the epilogue
warpgroup and the one-CTA BM 32): MMA-loop instruction counts, spills (all / in MMA loops), and the counts of 1-D bulk
copies (UBLKCP), tensor-map loads (UTMALDG), global loads and shared stores in the whole kernel. Run it on main and on
a tree with ``scales_in_copy.patch`` applied, with that tree first on the path:

    PYTHONPATH=. .venv/bin/python results/operator/2026-12-06-session62/ring_sass.py
"""
import re

from gcmoe_build.frontend.dsl import import_dsl

SHAPES = {"GLM-5.2": (6144, 2048), "DSV-4.1-Flash": (5120, 2304)}
BASE = dict(experts=256, top_k=8, ranks=1, capacity=256, threads=384, dispatch_sms=8, compute_sms=124,
            act_alpha=1.0, act_clamp=10.0, act_fast_math=True, activation="swiglu", ctas_per_sm=1, w1_split=1,
            recipe_routed="e4m3-fp32k128_x_mxfp4", shared_experts=1, k_interleave=2)


def main():
    import_dsl("sm_90a")
    from gcmoe_build import sass
    from gcmoe_build.compile import compile_variant
    from gcmoe_build.variants import FrozenParams, Variant

    for shape, (h, i) in SHAPES.items():
        for bm, ewg in ((64, 1), (32, 0)):
            p = {**BASE, "hidden": h, "intermediate": i, "bm": bm, **({"epilogue_wg": 1} if ewg else {})}
            art = compile_variant(Variant("role2", "sm_90a", FrozenParams(p), "s62"))
            d, s = sass.disassemble(art.cubin), sass.summarize(art.cubin)
            n = {op: len(re.findall(pat, d)) for op, pat in (("UBLKCP", r"UBLKCP"), ("UTMALDG", r"UTMALDG"),
                                                             ("LDG", r"LDG"), ("STS", r"\bSTS"))}
            print(f"{shape} BM {bm}{' epilogue_wg' if ewg else ''}: MMA loops {[k for k, _ in s.mma_loops]}, spills "
                  f"{s.spill_ops} ({s.spill_ops_in_mma_loops}), " + ", ".join(f"{k} {v}" for k, v in n.items()))


if __name__ == "__main__":
    main()
