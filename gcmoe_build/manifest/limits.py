"""The supported shape envelope: every limit a manifest is checked against, with the reason it exists.

Paper Appendix A (Table 12) plus the limits our own kernels add. One place for each number; the
partition rules and BM menus live in gcmoe_runtime.heuristics (the runtime applies them too) and the
rank limit in gcmoe_runtime.abi (it is the size of the by-value peer descriptor).
"""
from __future__ import annotations

from gcmoe_runtime.abi import PEER_MAX_RANKS
from gcmoe_runtime.heuristics import (
    MIN_COMPUTE_SMS,
    MIN_DISPATCH_SMS,
    SM90_BM_CANDIDATES,
    SM100_BM_CANDIDATES,
)

# ---- model shape (Appendix A) -------------------------------------------------------------------
MAX_INTERMEDIATE = 4096
INTERMEDIATE_MULTIPLE = 128
WHY_INTERMEDIATE = ("W1 has 2I/128 N128 output tiles and the 64-bit l2_full_mask keeps one bit per tile "
                    "(2I/128 <= 64); W2 reads I in whole K128 tiles")

HIDDEN_MULTIPLE = 256
WHY_HIDDEN = ("SM100: 2-CTA clusters pair N128 tiles, so H/128 must be even. SM90 keeps the rule: role3 reduces "
              "and role2's W2 epilogue scatters a BF16 token row in warp-wide steps of 32 lanes x 16 B = 256 "
              "values, so H % 256 == 0 leaves no tail to predicate (and one manifest serves both archs)")

MIN_TOP_K = 1
MAX_COMBINE_SLOTS = 32
WHY_COMBINE_SLOTS = ("one warp lane carries one combine slot (k routed + shared), and dispatch reads 32/k "
                     "tokens per warp")

MAX_EXPERTS = 2048
WHY_MAX_EXPERTS = "static per-expert signal region sized for 2048 experts"
MAX_LOCAL_EXPERTS = 512
WHY_LOCAL_EXPERTS = "lane-held per-expert counters: at most 512 experts per rank"
WHY_EXPERTS_DIVISIBLE = "experts are distributed evenly, e = E/P per rank"

MAX_RANKS = PEER_MAX_RANKS  # 72
WHY_MAX_RANKS = "the 592-byte by-value peer descriptor carries 72 rank offsets"

# ---- ours ---------------------------------------------------------------------------------------
SM90_INTERMEDIATE_MULTIPLE = 256
WHY_SM90_INTERMEDIATE = ("SM90 role2 (gcmoe_build/kernels/sm90/role2_config.py) contracts W2 over I in K256 "
                         "steps: two K128 halves with the weight registers double-buffered one K128 ahead")

MAX_CAPACITY = 4096
WHY_CAPACITY = ("the symmetric workspace is sized statically from the per-rank capacity (combine buffer "
                "capacity x (k + shared) x H x 2 B, token ring from the paper §4.3 model); 4096 (16x the "
                "paper's decode capacity of 256) bounds it to a few hundred MB per rank for the shipped models")

SHARED_K_GROUPS = (32, 128)
WHY_SHARED_K_GROUP = ("shared-expert weight scales are staged per K32 ((1,1,32) recipe) or per 128x128 block "
                      "((1,128,128) recipe); the selector logic exists for these two only")

#: Routed recipe names, per arch family. SM90: E4M3FN activations with FP32 scales per 128 along K times
#: MXFP4 weights (E2M1, UE8M0 scale per 32 along K), decoded in registers. SM100: (1,1,32) block scaling,
#: E4M3 activations and E2M1 weights both with UE8M0 scales per 32 along K (tcgen05 block_scale).
ROUTED_RECIPE_SM90 = "e4m3-fp32k128_x_mxfp4"
ROUTED_RECIPE_SM100 = "1x1x32"
ROUTED_RECIPES = {"sm90": (ROUTED_RECIPE_SM90,), "sm100": (ROUTED_RECIPE_SM100,)}
WHY_ROUTED_RECIPE = {
    "sm90": "Hopper has no FP4 MMA: FP32-K128-scaled E4M3 activations x MXFP4 weights decoded in registers",
    "sm100": "the tcgen05 block-scaled MMA scale path hard-codes K32 UE8M0 for both operands",
}
#: Shared recipe name -> the shared K group it implies (weights FP8 in both).
SHARED_RECIPES = {"1x1x32": 32, "1x128x128": 128}

BM_CANDIDATES_BY_FAMILY = {"sm90": SM90_BM_CANDIDATES, "sm100": SM100_BM_CANDIDATES}
WHY_BM = {
    "sm90": "BM is the register-A WGMMA N (m64nNk32): the compiled ladder is 8, 16, 32, 48, 64, 80",
    "sm100": "2-CTA MMA alignment and the TMEM/SMEM budget",
}

__all__ = [n for n in dir() if n.isupper()] + ["MIN_COMPUTE_SMS", "MIN_DISPATCH_SMS"]
