"""Diagnostic (not a test): the dev GPU checks of role2 variants under forced two-CTA co-residency, repeated.

    python3 tests/build/kernels/sm90/diag_two_cta.py _p2 _pp2 _p2_read     # on the GPU machine; REPS=3 by default

Session 6 found the stage-release race with it (docs/PERFORMANCE.md, "Session 6"): 12 ring blocks per launch make
every one-CTA-per-task grid exceed 132 CTAs, a persistent grid of 264 puts two CTAs on every SM. Prints a table of
pass / failure kind per (variant, GEMM, shape, BM); a race shows as "repeats" (ten launches not bit-identical).
"""
import collections
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
import tests.build.kernels.sm90.test_role2_gpu as T  # noqa: E402
from tests.build.kernels.sm90.role2_harness import Role2Kernels  # noqa: E402

T.NBLK = int(os.environ.get("GCMOE_ROLE2_NBLK", "12"))
T.NCTA = int(os.environ.get("GCMOE_ROLE2_NCTA", "264"))


def main(variants):
    kern = Role2Kernels()
    reps = int(os.environ.get("REPS", "3"))
    rows = []
    for variant in variants:
        for mode in ("w1", "w2"):
            check = T.test_role2_w1_matches_reference if mode == "w1" else T.test_role2_w2_matches_reference
            for sh in ("glm52", "dsv41flash"):
                for bm in (8, 16):
                    res = collections.Counter()
                    for _ in range(reps):
                        try:
                            check(kern, sh, bm, variant)
                            res["ok"] += 1
                        except AssertionError as e:
                            msg = str(e).split("\n")[0]
                            res["FAIL " + ("repeats" if "bit-identical" in msg else msg[-60:])] += 1
                        except BaseException as e:  # pytest.skip (not built) is a BaseException
                            if isinstance(e, KeyboardInterrupt):
                                raise
                            res[type(e).__name__] += 1
                    rows.append((variant, mode, sh, bm, dict(res)))
    print("| variant | GEMM | shape | BM | result |\n|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
