"""The sweep: gate -> floor -> (per rank) models x implementations x T under the protocol -> results.

`run_sweep(SweepConfig)` is the entry the CLI uses. With world == 1 everything runs in this process on
cuda:0; with world > 1 one process per GPU is spawned (NCCL, one GPU each) and rank 0 gathers every
rank's windows. The gate runs first, in this process, before CUDA is touched here; the ceilings are
measured in a short child process (so its contexts on every GPU are gone before the sweep starts).
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import socket
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from . import gate as gate_mod
from . import models as M
from .impl import RankContext, make
from .progress import Progress
from .protocol import (PAPER, L2Flusher, ProtocolConfig, capture_graph, measure_windows, measure_windows_host,
                       slowest_rank)
from .routing import Layout, build_point
from .shapes import ModelShape

PAPER_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SCHEMA = "gcmoe-bench/1"


@dataclasses.dataclass
class SweepConfig:
    models: list[ModelShape]
    impls: list[str]
    layout: Layout
    tokens: tuple[int, ...] = PAPER_TOKENS
    shared: bool = False
    protocol: ProtocolConfig = PAPER
    seed: int = 0
    gate: str = "enforce"            # enforce | record | skip
    floor: bool = True
    command: str = ""
    deviation: str | None = None     # stated in the JSON when the protocol is not the paper's
    impl_names: list[str] = dataclasses.field(default_factory=list)  # filled by run_sweep
    device: str = "cuda"             # "cpu": dry run of the whole harness (host timings, not performance)
    ablation: dict | None = None     # dispatch-SM ablation: {"requests": [...], "on": [names], "off": [names]}
    floor_json: str | None = None    # reuse ceilings measured earlier in the same session (`bench floor --json`)
    budget_s: float | None = None    # measurement time of this invocation; later points are recorded as not measured


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------------------------- env

def _smi(fields: str) -> list[list[str]] | None:
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=30, check=True)
        return [[c.strip() for c in line.split(",")] for line in r.stdout.strip().splitlines()]
    except Exception:
        return None


def gpu_clocks() -> list[dict] | None:
    f = "index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,power.limit,temperature.gpu"
    rows = _smi(f)
    if rows is None:
        return None
    return [dict(zip(f.split(","), r)) for r in rows]


def environment() -> dict:
    import platform

    env: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                           "hostname": socket.gethostname()}
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            env["gpu"] = p.name
            env["gpu_count"] = torch.cuda.device_count()
            env["sm_count"] = p.multi_processor_count
            env["l2_bytes"] = getattr(p, "L2_cache_size", None)
            env["capability"] = f"{p.major}.{p.minor}"
            try:
                env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
            except Exception:
                pass
    except ImportError:
        env["torch"] = None
    try:
        import cuda.bindings

        env["cuda_bindings"] = cuda.bindings.__version__
    except Exception:
        env["cuda_bindings"] = None
    env["nvidia_smi"] = gpu_clocks()
    commit = os.environ.get("GCMOE_GIT_COMMIT")
    if not commit:
        try:
            commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                                    cwd=Path(__file__).resolve().parent, check=True).stdout.strip()
        except Exception:
            commit = None
    env["git_commit"] = commit
    env["visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return env


# --------------------------------------------------------------------------------------------- floor

def measure_floor(world: int, out_json: Path, pingpong: bool = True) -> dict:
    """Child-process entry (`python -m gcmoe_runtime.bench floor`): bandwidth per rank device + NVLink RTT."""
    import torch

    from .floor import measure_nvlink_roundtrip, measure_read_bandwidth

    res: dict[str, Any] = {"read_bandwidth": [], "nvlink": None}
    for d in range(world):
        torch.cuda.set_device(d)
        r = measure_read_bandwidth(torch.device(f"cuda:{d}"))
        r["device"] = d
        res["read_bandwidth"].append(r)
    if pingpong and torch.cuda.device_count() >= 2:
        try:
            res["nvlink"] = measure_nvlink_roundtrip(0, 1)
        except Exception as e:  # recorded, and fatal for the floor only when world > 1
            res["nvlink"] = {"error": str(e)}
    _atomic_write(out_json, json.dumps(res, indent=1))
    return res


def _floor_in_child(world: int) -> dict:
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "floor.json"
        r = subprocess.run([sys.executable, "-m", "gcmoe_runtime.bench", "floor", "--world", str(world),
                            "--json", str(out)], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"floor measurement failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
        return json.loads(out.read_text())


# ------------------------------------------------------------------------------------------- workers

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, cfg: SweepConfig, port: int, out_path: str | None) -> list | None:
    """One rank's sweep; world == 1 returns [results], world > 1 writes out_path/rank{r}.json."""
    import torch

    layout = cfg.layout
    cpu = cfg.device == "cpu"
    if cpu:
        device = torch.device("cpu")
    else:
        torch.cuda.set_device(rank)
        device = torch.device(f"cuda:{rank}")
    group = None
    if layout.world > 1:
        import torch.distributed as dist

        if cpu:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=layout.world)
        else:
            dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                    world_size=layout.world, device_id=device)
        group = dist.group.WORLD

        def barrier() -> None:
            if cpu:
                dist.barrier(group=group)
            else:
                dist.barrier(group=group, device_ids=[rank])
    else:
        barrier = None  # type: ignore[assignment]
    flush = (lambda: None) if cpu else L2Flusher(cfg.protocol.l2_flush_bytes, device)
    ctx = RankContext(rank=rank, world=layout.world, device=device, group=group, seed=cfg.seed)
    impls = [make(s) for s in cfg.impls]
    total = len(cfg.models) * len(impls) * len(cfg.tokens)
    prog = Progress(total, enabled=(rank == 0))
    over_budget = _budget_check(cfg, group, device)
    budget_why = f"time budget of this invocation ({cfg.budget_s} s) spent before this point: not measured"
    rank_results: list[dict] = []
    for shape in cfg.models:
        m_res: dict[str, Any] = {"model": shape.name, "points": {}}
        outputs: dict[int, Any] = {}
        for impl in impls:
            why = budget_why if over_budget() else impl.unsupported(shape, layout, cfg.shared)
            if why is None:
                try:
                    impl.load_model(shape, layout, ctx, cfg.shared)
                except Exception as e:
                    why = f"load_model failed: {e!r}"
                    traceback.print_exc()
            if hasattr(impl, "describe"):  # what this rank got (e.g. the partition, or the split it could not run)
                try:
                    m_res.setdefault("loaded", {})[impl.name] = impl.describe()
                except Exception as e:  # noqa: BLE001 - a description must not stop the sweep
                    m_res.setdefault("loaded", {})[impl.name] = {"describe_failed": repr(e)}
            for T in cfg.tokens:
                pt = build_point(shape, T, layout, rank, cfg.seed)
                p = pt.plan
                entry = m_res["points"].setdefault(T, {
                    "counts": {"assignments": p.assignments, "active_experts": p.active_experts,
                               "remote_sent": p.remote_sent, "shared_tokens": T if cfg.shared else 0},
                    "impls": {}})
                if over_budget() and why is None:  # called at every point on every rank: a collective
                    why = budget_why
                if why is not None:
                    entry["impls"][impl.name] = {"status": "skipped", "reason": why}
                    prog.step(f"{shape.name} T={T} {impl.name}", "skipped")
                    continue
                try:
                    prep = impl.prepare(pt)
                    replay = prep.replay
                    graph = None
                    if cpu:
                        replay = replay or prep.step
                        wt = measure_windows_host(replay, cfg.protocol, barrier)
                    else:
                        if replay is None:
                            graph = capture_graph(prep.step)
                            replay = graph.replay
                        wt = measure_windows(replay, cfg.protocol, flush, barrier)
                    rec: dict[str, Any] = {"status": "ok", "warmup_us": wt.warmup_us, "measured_us": wt.measured_us,
                                           "median_us": wt.median_us, "info": prep.info}
                    if prep.output is not None:
                        replay()
                        if not cpu:
                            torch.cuda.synchronize()
                        o = prep.output.float().flatten()
                        if T in outputs:
                            ref = outputs[T]
                            rec["cos_vs_first"] = float(torch.nn.functional.cosine_similarity(o, ref, dim=0)) \
                                if o.numel() == ref.numel() else None
                        else:
                            outputs[T] = o.clone()
                        rec["output_finite"] = bool(torch.isfinite(o).all())
                        if not rec["output_finite"]:  # a latency of wrong numbers is not a result
                            rec.update(status="invalid", reason="non-finite output (NaN/Inf) after replay")
                    prep.close()
                    del graph, prep
                    prog.step(f"{shape.name} T={T} {impl.name}", f"{wt.median_us:9.2f} us (rank {rank})")
                except Exception as e:
                    traceback.print_exc()
                    rec = {"status": "failed", "reason": f"{type(e).__name__}: {e}"}
                    prog.step(f"{shape.name} T={T} {impl.name}", "FAILED")
                entry["impls"][impl.name] = rec
            impl.unload_model()
        rank_results.append(m_res)
    if layout.world == 1:
        return [rank_results]
    # Each rank writes its own file (no gather collective): GPU run 2 of 2026-11-30 measured every P=2 point
    # but did not finish its end-of-run gather/teardown within the smoke's time limit.
    _atomic_write(Path(out_path) / f"rank{rank}.json", json.dumps(rank_results))
    import torch.distributed as dist

    dist.barrier(group=group) if cpu else dist.barrier(group=group, device_ids=[rank])
    dist.destroy_process_group()
    return None


def _budget_check(cfg: SweepConfig, group: Any, device: Any):
    """A callable telling whether this invocation's measurement budget is spent, agreed by every rank (MAX
    all-reduce of the ranks' own verdicts), so that all ranks skip from the same point on. Sticky once true."""
    import time

    import torch

    t0 = time.monotonic()
    state = {"over": False}

    def check() -> bool:
        if cfg.budget_s is None or state["over"]:
            return state["over"]
        mine = time.monotonic() - t0 > cfg.budget_s
        if group is not None:
            import torch.distributed as dist

            flag = torch.tensor([int(mine)], dtype=torch.int32, device=device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
            mine = bool(flag.item())
        state["over"] = mine
        return mine

    return check


def _spawn_entry(rank: int, cfg: SweepConfig, port: int, out_dir: str) -> None:
    _rank_main(rank, cfg, port, out_dir)


def _run_ranks(cfg: SweepConfig, out_dir: str, teardown_grace_s: float = 5.0) -> list:
    """Spawn one process per rank; once every rank's file exists, give teardown `teardown_grace_s`, then end
    the (our own) rank processes that are still alive, by their process objects. (Their results are on disk
    already; on the H200s the NCCL / symmetric-memory teardown sometimes never finishes, and the 30 s this grace
    used to be cost a paper-protocol step its timeout in session 4's call E.)"""
    import time

    import torch.multiprocessing as mp

    ctx = mp.start_processes(_spawn_entry, args=(cfg, _free_port(), out_dir), nprocs=cfg.layout.world,
                             join=False, start_method="spawn")
    files = [Path(out_dir) / f"rank{r}.json" for r in range(cfg.layout.world)]
    all_written_at = None
    while not ctx.join(timeout=1.0):   # raises ProcessRaisedException / ProcessExitedException on failure
        if all_written_at is None and all(f.exists() for f in files):
            all_written_at = time.monotonic()
        if all_written_at is not None and time.monotonic() - all_written_at > teardown_grace_s:
            print(f"[bench] rank processes still tearing down {teardown_grace_s:g} s after writing their "
                  "results: ending them", file=sys.stderr)
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.terminate()
            break
    per_rank = [json.loads(f.read_text()) for f in files]
    for rr in per_rank:   # JSON turned the int T keys into strings
        for m in rr:
            m["points"] = {int(k): v for k, v in m["points"].items()}
    return per_rank


# ------------------------------------------------------------------------------------------- assembly

def assemble(cfg: SweepConfig, per_rank: list[list[dict]], env: dict, gate: dict | None, floor: dict | None,
             impl_info: dict) -> dict:
    """Combine every rank's windows into the results document (medians, slowest rank, models, floor)."""
    world = cfg.layout.world
    bw = [r["gbps"] for r in floor["read_bandwidth"]] if floor else None
    rtt = None
    if floor and floor.get("nvlink") and "round_trip_us" in floor["nvlink"]:
        rtt = floor["nvlink"]["round_trip_us"]
    models_out = []
    for mi, shape in enumerate(cfg.models):
        points = []
        for T in cfg.tokens:
            ranks = [per_rank[r][mi]["points"][T] for r in range(world)]
            counts = [M.RankWork(**rk["counts"]) for rk in ranks]
            pm = M.point_model(shape, counts, cfg.shared)
            per_rank_bytes = [M.unique_active_bytes(shape, c.active_experts, cfg.shared) for c in counts]
            floor_us = None
            if bw is not None and (world == 1 or rtt is not None):
                floor_us = M.floor_us(per_rank_bytes, bw[:world], rtt if world > 1 else None)
            impls: dict[str, Any] = {}
            for name in cfg.impl_names:
                recs = [rk["impls"].get(name, {"status": "missing"}) for rk in ranks]
                status = "ok" if all(r["status"] == "ok" for r in recs) else next(
                    r["status"] for r in recs if r["status"] != "ok")
                item: dict[str, Any] = {"status": status, "per_rank": [dict(rank=i, **r) for i, r in enumerate(recs)]}
                if status == "ok":
                    lat = slowest_rank([r["median_us"] for r in recs])
                    item["latency_us"] = lat
                    item["slowest_rank"] = max(range(world), key=lambda i: recs[i]["median_us"])
                    item["tflops"] = pm.tflops(lat)
                    item["hbm_gbps"] = pm.hbm_gbps(lat)
                    item["nvlink_gbps"] = pm.nvlink_gbps(lat)
                    if floor_us:
                        item["floor_fraction"] = floor_us / lat
                else:
                    item["reason"] = next((r.get("reason") for r in recs if r.get("reason")), None)
                impls[name] = item
            points.append({"T": T, "total_tokens": cfg.layout.ep * T,
                           "ranks": [dataclasses.asdict(c) for c in counts],
                           "model": dataclasses.asdict(pm), "per_rank_hbm_bytes": per_rank_bytes,
                           "floor_us": floor_us, "impls": impls})
        loaded = {name: [per_rank[r][mi].get("loaded", {}).get(name) for r in range(world)] for name in cfg.impl_names}
        models_out.append({"shape": shape.to_json(), "points": points, "loaded": loaded})
    return {
        "schema": SCHEMA, "created_utc": utc_now(), "command": cfg.command,
        "protocol": {**dataclasses.asdict(cfg.protocol), "paper_protocol": cfg.protocol.is_paper,
                     "deviation": cfg.deviation},
        "layout": {"world": world, "ep": cfg.layout.ep, "emulated_share": cfg.layout.emulated,
                   "shared_experts": cfg.shared, "seed": cfg.seed},
        "implementations": impl_info, "environment": env, "gate": gate, "floor": floor,
        "models": models_out, **({"ablation": cfg.ablation} if cfg.ablation else {}),
        "definitions": {"latency": "slowest-rank median of per-invocation window latencies (µs)",
                        "tflops": "6*assignments*H*I (+shared) over all ranks / latency",
                        "hbm_gbps": "unique active MXFP4 expert weight+scale bytes (+FP8 shared) over ranks / latency",
                        "nvlink_gbps": "(H + H/32 + 2H) per remote assignment over ranks / latency",
                        "floor_us": "max_r unique active bytes_r / measured read bandwidth_r (+ NVLink RTT if P>1)",
                        "stream_fraction": "max_r (unique active bytes_r / measured read bandwidth_r) / latency: the "
                                           "share of the measured HBM read bandwidth the most-loaded rank streams at"},
    }


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def run_sweep(cfg: SweepConfig) -> dict:
    # fail fast on unknown names, before any device work
    cfg.impl_names = [make(s).name for s in cfg.impls]
    if cfg.device == "cpu":
        cfg.gate, cfg.floor = "skip", bool(cfg.floor_json)  # a given ceilings file only exercises the arithmetic
        cfg.deviation = "CPU dry run: host timings of eager calls, not performance" + (
            f"; {cfg.deviation}" if cfg.deviation else "")
    gate_res = None
    if cfg.gate != "skip":
        devs = gate_mod.visible_devices(dict(os.environ))
        print(f"[bench] idle-GPU gate: sampling for {gate_mod.GateCriteria().min_span_s:g} s ...", file=sys.stderr)
        g = gate_mod.run_gate(gate_mod.default_sampler(), devs)
        gate_res = g.to_json()
        print(f"[bench] gate {'passed' if g.passed else 'FAILED'} ({g.sampler})"
              + ("" if g.passed else ": " + "; ".join(g.reasons[:6])), file=sys.stderr)
        if not g.passed and cfg.gate == "enforce":
            raise SystemExit("idle-GPU gate failed (use --gate record to measure anyway, recorded in the JSON)")
    floor = None
    if cfg.floor and cfg.floor_json:
        floor = json.loads(Path(cfg.floor_json).read_text())
        if len(floor.get("read_bandwidth", [])) < cfg.layout.world:
            raise SystemExit(f"--floor-json {cfg.floor_json}: {len(floor.get('read_bandwidth', []))} devices measured, "
                             f"the sweep needs {cfg.layout.world}")
        floor["reused_from"] = str(cfg.floor_json)
        print(f"[bench] ceilings from {cfg.floor_json} (measured earlier in this session)", file=sys.stderr)
    elif cfg.floor:
        print("[bench] measuring ceilings (streaming read, NVLink round trip) ...", file=sys.stderr)
        floor = _floor_in_child(cfg.layout.world)
    if floor:
        for r in floor["read_bandwidth"]:
            print(f"[bench]   cuda:{r['device']} read {r['gbps']:.0f} GB/s ({r['best_variant']})", file=sys.stderr)
        nv = floor.get("nvlink")
        if nv:
            print(f"[bench]   NVLink: {nv.get('round_trip_us', nv.get('error'))}", file=sys.stderr)
        if cfg.layout.world > 1 and not (nv and "round_trip_us" in nv):
            print("[bench]   no NVLink round trip: the floor is left out for P>1", file=sys.stderr)
    env = environment()
    impl_info = {}
    for s in cfg.impls:
        i = make(s)
        impl_info[i.name] = i.describe() if hasattr(i, "describe") else {"precision": i.precision}
    if cfg.layout.world == 1:
        per_rank = _rank_main(0, cfg, 0, None)
    else:
        with tempfile.TemporaryDirectory() as td:
            per_rank = _run_ranks(cfg, td)
    env["clocks_after"] = gpu_clocks()
    return assemble(cfg, per_rank, env, gate_res, floor, impl_info)
