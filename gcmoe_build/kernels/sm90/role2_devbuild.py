"""Developer build of the SM90 role2 GEMM cubins for the GPU correctness/timing harness.

``python -m gcmoe_build.kernels.sm90.role2_devbuild OUTDIR [--shapes test,glm52,dsv41flash]``
compiles W1 and W2 for every BM, in the 256-thread and the 384-thread pipelined variant (suffix ``_p``), through the
project's chain (``gcmoe_build.frontend.dsl`` -> PTX -> locked ptxas) and writes ``OUTDIR/<name>.cubin``, ``<name>.ptx``
and ``index.json`` (entry name, config, dynamic smem, threads). This is a stop-gap until role2 is registered with
the bundle pipeline; the GPU harness loads these cubins with ``cuLibraryLoadData`` only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

#: model shapes (H, I) from the manifests (paper Table 4) and a small test model
SHAPES = {"test": (1024, 512), "glm52": (6144, 2048), "dsv41flash": (5120, 2304)}
BMS = (8, 16, 32, 48, 64, 80)
#: name suffix -> kernel: 256-thread, 384-thread pipelined, 384-thread persistent ring consumer
VARIANTS = ("", "_p", "_pp")


#: experiment variants (``--experiments``): deeper MMA overlap (Role2GemmConfig.mma_lag) for BM <= 32, and the
#: 256-thread kernel built for two CTAs per SM (Role2GemmConfig.ctas_per_sm) at BM <= 16
LAG_EXPERIMENTS = {"_p_lag2": 2, "_p_lag3": 3, "_pp_lag3": 3}
OCC_EXPERIMENTS = {"_o2": 2}
#: ... and the 384-thread kernels (one-CTA-per-task and persistent) built for two CTAs per SM (BM <= 16)
PIPE2_EXPERIMENTS = ("_p2", "_pp2")
#: ... and the stage-release A/B (session 6): Role2GemmConfig.stage_release "read" (the race two CTAs per SM exposed)
#: and "fence", against the shipped "decoded"; session 7: "decoded_k32_2" (one K32 earlier), one-CTA-per-task and
#: persistent (``_pp`` in the name builds the persistent kernel), one and two CTAs per SM
RELEASE_EXPERIMENTS = {"_p_read": dict(stage_release="read"), "_p_fence": dict(stage_release="fence"),
                       "_p2_read": dict(stage_release="read", ctas_per_sm=2),
                       "_p_k32": dict(stage_release="decoded_k32_2"),
                       "_pp_k32": dict(stage_release="decoded_k32_2"),
                       "_p2_k32": dict(stage_release="decoded_k32_2", ctas_per_sm=2),
                       "_pp2_k32": dict(stage_release="decoded_k32_2", ctas_per_sm=2)}
#: ... and the A/B of the exponent-folding decoder: the pipelined kernel with per-K32 scale FMAs instead (BM <= 32)
NOFOLD_EXPERIMENTS = ("_p_nofold",)
#: ... and the activation-chunk prefetch (session 9): Role2GemmConfig.act_buffers = 2, one and two CTAs per SM, and the
#: persistent kernel (its W2 acquires the prefetched chunk's mask bits, as the ring kernel does)
ACT2_EXPERIMENTS = {"_pd": dict(act_buffers=2), "_ppd": dict(act_buffers=2),
                    "_p2d": dict(act_buffers=2, ctas_per_sm=2),
                    # persistent at two CTAs per SM: the structure of the ring kernel's BM 8 / 16 builds (session 10)
                    "_pp2d": dict(act_buffers=2, ctas_per_sm=2),
                    # ... and with dynamic task claiming (task_queue; session 11: _pp2d lost 5-15 % to _p2d)
                    "_pp2t": dict(act_buffers=2, ctas_per_sm=2, dynamic_tasks=True),
                    "_ppt": dict(act_buffers=2, dynamic_tasks=True),
                    # ... and task records (the producer acquires; the consumers read a record: task_queue)
                    "_pp2k": dict(act_buffers=2, ctas_per_sm=2, task_records=True),
                    "_ppk": dict(act_buffers=2, task_records=True),
                    "_pp2kt": dict(act_buffers=2, ctas_per_sm=2, task_records=True, dynamic_tasks=True),
                    "_ppkt": dict(act_buffers=2, task_records=True, dynamic_tasks=True),
                    # (measured and removed: the release queue _ppr / _pp2r / _pp2tr / _pp2kr, session 11-12; the next
                    # task's chunk 0 during the last chunk _pp2kn / _ppkn, session 12: docs/PERFORMANCE.md)
                    # ... and W2's release inside the epilogue, before its stores (session 12 call C: the fence
                    # after the stores held the other consumer warps at the next task's first barrier)
                    "_pp2ke": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True),
                    "_ppke": dict(act_buffers=2, task_records=True, w2_early_release=True),
                    # ... and the promote's x 2**FOLD_LOG2 applied when the token scales are staged (session 12)
                    "_pp2kf": dict(act_buffers=2, ctas_per_sm=2, task_records=True, staged_fold_scale=True),
                    "_ppkf": dict(act_buffers=2, task_records=True, staged_fold_scale=True),
                    # ... and the ring's shipped form (records, W2 released before its stores, staged fold scale;
                    # session 12), alone and with the releases on the signal warp (session 13)
                    "_pp2kef": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                    staged_fold_scale=True),
                    "_ppkef": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True),
                    "_pp2ks": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                   staged_fold_scale=True, signal_warp=True),
                    "_ppks": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                  signal_warp=True),
                    # ... and the activation chunks by tensor map (session 14: Role2GemmConfig.act_tma)
                    "_pp2ksa": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                    staged_fold_scale=True, signal_warp=True, act_tma=True),
                    "_ppksa": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                   signal_warp=True, act_tma=True),
                    # ... and one commit group per (K128 step, slab) (session 15: Role2GemmConfig.slab_groups)
                    "_pp2ksag": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                     staged_fold_scale=True, signal_warp=True, act_tma=True, slab_groups=2),
                    "_ppksag": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                    signal_warp=True, act_tma=True, slab_groups=2),
                    # ... one group at a time: BM 32 at two CTAs per SM (the only two-CTA experiment built at BM 32)
                    "_pp2ksag1": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, slab_groups=1),
                    # ... and the shipped forms with the manifests' activation.fast_math (session 25: the sigmoid's
                    # rcp.approx; the ring and role4 builds take it from the variant's act_fast_math)
                    "_pp2ksaf": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                     staged_fold_scale=True, signal_warp=True, act_tma=True, fast_math=True),
                    "_ppksaf": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                    signal_warp=True, act_tma=True, fast_math=True),
                    "_pp2ksag1f": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                       staged_fold_scale=True, signal_warp=True, act_tma=True, slab_groups=1,
                                       fast_math=True),
                    # ... and the two consumer warpgroups taking turns at the tensor pipe (session 26:
                    # Role2GemmConfig.pingpong), on the fast_math forms above
                    "_ppksafl": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                     signal_warp=True, act_tma=True, fast_math=True, mma_lag=1),
                    "_ppksafw": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                     signal_warp=True, act_tma=True, fast_math=True, pingpong=True),
                    "_pp2ksafw": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, fast_math=True,
                                      pingpong=True),
                    # ... and the same two forms stamping %clock at each K128 step's events (session 34:
                    # Role2GemmConfig.step_stamps; the stamp buffer is the ticket formal)
                    "_ppksafc": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                     signal_warp=True, act_tma=True, fast_math=True, step_stamps=True),
                    "_ppksafwc": dict(act_buffers=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, fast_math=True,
                                      pingpong=True, step_stamps=True),
                    "_pp2ksafc": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, fast_math=True,
                                      step_stamps=True),
                    # ... and the one-CTA form (lag 1 at BM <= 48) with four K128 steps per MMA call, one drain per
                    # K512 as the ring's one-CTA BM 8-48 builds (session 35: role2_ring_config.steps_per_call_build)
                    "_ppksaf4": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                     signal_warp=True, act_tma=True, fast_math=True, mma_steps_per_call=4),
                    "_ppksafc4": dict(act_buffers=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, fast_math=True,
                                      step_stamps=True, mma_steps_per_call=4),
                    # ... each warpgroup's two slabs one after the other over K: BM 64 at two CTAs per SM (session 16:
                    # Role2GemmConfig.slab_passes; built at BM 32 / 64)
                    "_pp2ksap": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                     staged_fold_scale=True, signal_warp=True, act_tma=True, slab_passes=2),
                    # ... with 64 KB of activation chunks (BM 64: 512 columns, a chunk barrier per K512; 3 stages)
                    "_pp2ksapc": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, slab_passes=2,
                                      act_kb=64),
                    # ... and the shipped forms (and the slab passes) without the FP4 decode: a timing probe of what
                    # the decode costs the MMA warps (session 17: Role2GemmConfig.dev_no_decode; outputs meaningless)
                    "_ppksax": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                    signal_warp=True, act_tma=True, dev_no_decode=True),
                    "_pp2ksag1x": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                       staged_fold_scale=True, signal_warp=True, act_tma=True, slab_groups=1,
                                       dev_no_decode=True),
                    "_pp2ksapx": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, slab_passes=2,
                                      dev_no_decode=True),
                    # ... and the shipped forms in the interleaved K order (session 50: Role2GemmConfig.k_interleave;
                    # the harness packs their weights with k_interleave=True, index.json says so)
                    "_pp2ksafi": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, fast_math=True,
                                      k_interleave=True),
                    "_pp2ksag1fi": dict(act_buffers=2, ctas_per_sm=2, task_records=True, w2_early_release=True,
                                        staged_fold_scale=True, signal_warp=True, act_tma=True, slab_groups=1,
                                        fast_math=True, k_interleave=True),
                    "_ppksafwi": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                      signal_warp=True, act_tma=True, fast_math=True, pingpong=True,
                                      k_interleave=True),
                    "_ppksaf4i": dict(act_buffers=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, fast_math=True,
                                      mma_steps_per_call=4, k_interleave=True),
                    # ... and the one-CTA BM 48-80 forms with W1's rows arriving interleaved (session 51: role1 puts
                    # them so for the ring's large-BM builds, Role2GemmConfig.w1_rows_interleaved; the harness writes
                    # them so)
                    "_ppksafwr": dict(act_buffers=2, task_records=True, w2_early_release=True, staged_fold_scale=True,
                                      signal_warp=True, act_tma=True, fast_math=True, pingpong=True,
                                      k_interleave=True, w1_rows_interleaved=True),
                    "_ppksaf4r": dict(act_buffers=2, task_records=True, w2_early_release=True,
                                      staged_fold_scale=True, signal_warp=True, act_tma=True, fast_math=True,
                                      mma_steps_per_call=4, k_interleave=True, w1_rows_interleaved=True),
                    # ... and their consumers alone (no weight stream: Role2GemmConfig.dev_compute_only; timing only)
                    "_pc": dict(act_buffers=2, dev_compute_only=True),
                    "_p2c": dict(act_buffers=2, ctas_per_sm=2, dev_compute_only=True),
                    # ... and four K128 steps per MMA call (one tensor-core drain per K512), full and consumers alone
                    "_pd4": dict(act_buffers=2, mma_steps_per_call=4),
                    "_pc4": dict(act_buffers=2, mma_steps_per_call=4, dev_compute_only=True),
                    "_p2d4": dict(act_buffers=2, ctas_per_sm=2, mma_steps_per_call=4),
                    "_p2c4": dict(act_buffers=2, ctas_per_sm=2, mma_steps_per_call=4, dev_compute_only=True)}


#: ... and (session 53) the BM 64 / 80 turns form fed interleaved rows (``_ppksafwr``) stamping %clock at each K128
#: step's events (c: stamp_role2.py). Sessions 53-55's burst halves (each burst's slabs committed and promoted one at
#: a time, ``Role2GemmConfig.burst_halves`` 1-3: forms h, h2, h3, h34, hc) were measured in session 55 without a gain
#: and removed (code at ``92b8fdb8``)
ACT2_EXPERIMENTS["_ppksafwrc"] = {**ACT2_EXPERIMENTS["_ppksafwr"], "step_stamps": True}
#: ... and (session 56) the turns form in the plain K order without the FP4 decode (x: ``dev_no_decode``, the raw
#: code words as the A registers, outputs meaningless; the interleaved order's tables need the decode), stamped too
#: (xc, beside the stamped decode form _ppksafwc): what the decode costs the BM 64 turns form today (session 17
#: measured it only for the slab passes)
ACT2_EXPERIMENTS["_ppksafwx"] = {**ACT2_EXPERIMENTS["_ppksafw"], "dev_no_decode": True}
ACT2_EXPERIMENTS["_ppksafwxc"] = {**ACT2_EXPERIMENTS["_ppksafwx"], "step_stamps": True}
#: ... and (session 57) the shipped mirror with the next step's words loaded under this step's MMAs (a:
#: ``dev_words_ahead``; a4: four K128 steps per call, so three of four steps get it; a4c stamped), beside _ppksafwr
#: with four steps per call alone (4): the no-decode probe's "stage wait" grew by the word loads' latency
ACT2_EXPERIMENTS["_ppksafwra"] = {**ACT2_EXPERIMENTS["_ppksafwr"], "dev_words_ahead": True}
ACT2_EXPERIMENTS["_ppksafwr4"] = {**ACT2_EXPERIMENTS["_ppksafwr"], "mma_steps_per_call": 4}
ACT2_EXPERIMENTS["_ppksafwra4"] = {**ACT2_EXPERIMENTS["_ppksafwra"], "mma_steps_per_call": 4}
ACT2_EXPERIMENTS["_ppksafwra4c"] = {**ACT2_EXPERIMENTS["_ppksafwra4"], "step_stamps": True}
ACT2_EXPERIMENTS["_ppksafwr4c"] = {**ACT2_EXPERIMENTS["_ppksafwr4"], "step_stamps": True}
#: ... and (session 59) the shipped BM 64 form without the turns: the K-loop probe's two warpgroups ran 1-2 % faster
#: without them (``kloop_probe`` wg2ne against wg2 / wg2ce), where session 26 measured the turns 4-7 % faster in role2
ACT2_EXPERIMENTS["_ppksafr"] = {**ACT2_EXPERIMENTS["_ppksafwr"], "pingpong": False}
#: ... and (session 60) both with the epilogue warpgroup (e: ``Role2GemmConfig.epilogue_warpgroup``; it releases, so no
#: signal warp): the consumers hand each task's accumulators over as BF16 pairs and go on (K-loop probe ``wg2cwh``)
ACT2_EXPERIMENTS["_ppksafwre"] = {**ACT2_EXPERIMENTS["_ppksafwr"], "signal_warp": False, "epilogue_warpgroup": True}
ACT2_EXPERIMENTS["_ppksafre"] = {**ACT2_EXPERIMENTS["_ppksafr"], "signal_warp": False, "epilogue_warpgroup": True}
#: ... and in the plain K order (the chained-launch GPU test's form: its data is not interleaved), and stamped (c:
#: where a K128 step's cycles go with the epilogue warpgroup beside the consumers, against _ppksafwrc)
ACT2_EXPERIMENTS["_ppksafwe"] = {**ACT2_EXPERIMENTS["_ppksafw"], "signal_warp": False, "epilogue_warpgroup": True}
ACT2_EXPERIMENTS["_ppksafwrec"] = {**ACT2_EXPERIMENTS["_ppksafwre"], "step_stamps": True}
#: ... and (session 60) the weight-stage count alone: the shipped mirror at 7 / 6 stages, the epilogue form at 6
#: (Role2GemmConfig.dev_stages_cap; the probe ran 7 stages 3-5 % slower than 6)
ACT2_EXPERIMENTS["_ppksafwr7"] = {**ACT2_EXPERIMENTS["_ppksafwr"], "dev_stages_cap": 7}
ACT2_EXPERIMENTS["_ppksafwr6"] = {**ACT2_EXPERIMENTS["_ppksafwr"], "dev_stages_cap": 6}
ACT2_EXPERIMENTS["_ppksafwre6"] = {**ACT2_EXPERIMENTS["_ppksafwre"], "dev_stages_cap": 6}


def configs(shapes, experiments: bool = False):
    from .role2_config import Role2GemmConfig

    if experiments:
        for sh in shapes:
            h, i = SHAPES[sh]
            for bm in BMS:
                for sfx, kw in ACT2_EXPERIMENTS.items():
                    if kw.get("ctas_per_sm", 1) == 2 and bm > (64 if kw.get("slab_passes") == 2 else
                                                               32 if kw.get("slab_groups") == 1 else 16):
                        continue
                    if kw.get("slab_passes") == 2 and bm < 32:
                        continue
                    for mode, k, rows in (("w1", h, 2 * i), ("w2", i, h)):
                        try:
                            cfg = Role2GemmConfig(mode=mode, k=k, rows=rows, bm=bm, pipelined=True, **kw)
                        except ValueError:  # e.g. four steps per call where the K chunk holds fewer
                            continue
                        yield f"role2_{mode}_{sh}_bm{bm}{sfx}", cfg
            for bm in (8, 16, 32):
                for sfx, lag in LAG_EXPERIMENTS.items():
                    yield (f"role2_w1_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w1", k=h, rows=2 * i, bm=bm, pipelined=True, mma_lag=lag))
                    yield (f"role2_w2_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w2", k=i, rows=h, bm=bm, pipelined=True, mma_lag=lag))
                for sfx in NOFOLD_EXPERIMENTS:
                    yield (f"role2_w1_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w1", k=h, rows=2 * i, bm=bm, pipelined=True, fold_scales=False))
                    yield (f"role2_w2_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w2", k=i, rows=h, bm=bm, pipelined=True, fold_scales=False))
            for bm in (8, 16):
                for sfx in PIPE2_EXPERIMENTS:
                    yield (f"role2_w1_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w1", k=h, rows=2 * i, bm=bm, pipelined=True, ctas_per_sm=2))
                    yield (f"role2_w2_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w2", k=i, rows=h, bm=bm, pipelined=True, ctas_per_sm=2))
                for sfx, kw in RELEASE_EXPERIMENTS.items():
                    yield (f"role2_w1_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w1", k=h, rows=2 * i, bm=bm, pipelined=True, **kw))
                    yield (f"role2_w2_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w2", k=i, rows=h, bm=bm, pipelined=True, **kw))
                for sfx, occ in OCC_EXPERIMENTS.items():
                    yield (f"role2_w1_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w1", k=h, rows=2 * i, bm=bm, ctas_per_sm=occ))
                    yield (f"role2_w2_{sh}_bm{bm}{sfx}",
                           Role2GemmConfig(mode="w2", k=i, rows=h, bm=bm, ctas_per_sm=occ))
        return
    for sh in shapes:
        h, i = SHAPES[sh]
        for bm in BMS:
            for sfx in VARIANTS:
                pipe = sfx != ""
                yield f"role2_w1_{sh}_bm{bm}{sfx}", Role2GemmConfig(mode="w1", k=h, rows=2 * i, bm=bm, pipelined=pipe)
                yield f"role2_w2_{sh}_bm{bm}{sfx}", Role2GemmConfig(mode="w2", k=i, rows=h, bm=bm, pipelined=pipe)


def compile_one(name, cfg):
    """Return (ptx, cubin, entry) for one config through the project's frontend and ptxas."""
    from gcmoe_build.frontend.dsl import trace_to_ptx
    from gcmoe_build.toolchain.ptxas import assemble, effective_options
    from cutlass import Int32, Int64
    from .role2_gemm import build_role2_gemm

    if "_pp" in name:
        from .role2_persistent import build_role2_persistent

        host, kern = build_role2_persistent(cfg)
        args = tuple([Int64(0)] * 17 + [Int32(1), Int32(1)])
    else:
        host, kern = build_role2_gemm(cfg)
        args = tuple([Int64(0)] * 10 + [Int32(1)])
    res = trace_to_ptx(host, kern, args, name, "sm_90a")
    cubin = assemble(res.ptx, effective_options("sm_90a", []), what=name)
    return res.ptx, cubin, res.entry_name


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--shapes", default="test")
    ap.add_argument("--experiments", action="store_true",
                    help="build the mma_lag experiment variants (merged into an existing index.json)")
    ap.add_argument("--only", default="",
                    help="comma-separated name suffixes to build (e.g. _p2,_pp2); default: all of the chosen set")
    ap.add_argument("--bms", default="", help="comma-separated BMs to build (default: every BM of the chosen set)")
    a = ap.parse_args(argv)
    from gcmoe_build.frontend.dsl import import_dsl

    import_dsl("sm_90a")
    from .role2_config import STAMP_CTAS, STAMP_EVENTS, STAMP_STEPS
    out = Path(a.outdir)
    out.mkdir(parents=True, exist_ok=True)
    index = {}
    if a.experiments and (out / "index.json").is_file():
        index = json.loads((out / "index.json").read_text())
    only = tuple(x for x in a.only.split(",") if x)
    bms = {int(x) for x in a.bms.split(",") if x}
    for name, cfg in configs(a.shapes.split(","), a.experiments):
        if (only and not name.endswith(only)) or (bms and cfg.bm not in bms):
            continue
        t0 = time.perf_counter()
        ptx, cubin, entry = compile_one(name, cfg)
        (out / f"{name}.ptx").write_text(ptx)
        tmp = out / f".{name}.cubin.tmp"
        tmp.write_bytes(cubin)
        os.replace(tmp, out / f"{name}.cubin")
        index[name] = {"entry": entry, "mode": cfg.mode, "k": cfg.k, "rows": cfg.rows, "bm": cfg.bm,
                       "alpha": cfg.alpha, "clamp": cfg.clamp, "smem": cfg.smem_bytes, "threads": cfg.threads,
                       "pipelined": cfg.pipelined, "stages": cfg.stages, "kc": cfg.kc,
                       "persistent": "_pp" in name, "dynamic_tasks": cfg.dynamic_tasks,
                       "task_records": cfg.task_records, "w2_early_release": cfg.w2_early_release,
                       "staged_fold_scale": cfg.staged_fold_scale, "signal_warp": cfg.signal_warp,
                       "act_tma": cfg.act_tma, "slab_groups": cfg.slab_groups, "slab_passes": cfg.slab_passes,
                       "dev_no_decode": cfg.dev_no_decode, "fast_math": cfg.fast_math, "pingpong": cfg.pingpong,
                       "mma_lag": cfg.lag, "ctas_per_sm": cfg.ctas_per_sm,
                       "step_stamps": [STAMP_CTAS, STAMP_STEPS, list(STAMP_EVENTS)] if cfg.step_stamps else None,
                       "fold_scales": cfg.fold_scales, "act_buffers": cfg.act_buffers,
                       "mma_steps_per_call": cfg.mma_steps_per_call, "k_interleave": cfg.k_interleave,
                       "w1_rows_interleaved": cfg.w1_rows_interleaved, "row_tiles": cfg.row_tiles,
                       "epilogue_warpgroup": cfg.epilogue_warpgroup}
        print(f"{name}: {len(cubin)} B cubin, {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    tmp = out / ".index.json.tmp"
    tmp.write_text(json.dumps(index, indent=1, sort_keys=True))
    os.replace(tmp, out / "index.json")


if __name__ == "__main__":
    main()
