"""GPU harness (issue 6 step 4, before role2 consumes the ring): role1 and role3 in isolation, from a
gcmoe-build bundle through the runtime only (loader, green partition, symmetric workspace).

``python gpu_role13.py OUT.jsonl`` (P = 1) or ``torchrun --nproc-per-node 2 gpu_role13.py OUT.jsonl``.

Per case (token counts per rank, random routing with some -1 slots):
* role1 alone on the dispatch green stream; checked against a host expectation computed from every
  rank's inputs (all-gathered): send/recv counters (packed contributors | tokens), prefixes, every
  ring block header and l1_full_count (== BM for generation 0), every pulled row's FP8 bytes,
  MN-major scales, routing weight and (src_rank, src_token, slot) metadata (per (expert, source)
  segment as a set: the order inside a segment follows atomic arrival);
* role3 alone on the compute green stream with a combine buffer of known BF16 partials (NaN in the
  slots that must be skipped): y must equal the FP32 slot-order reduction bit for bit; the reset
  state (ring signals, send/recv counters zero, parity flipped, readiness == phase; P = 1: never written) is checked.
Then the role1 -> role3 graph is replayed 10,000 times without host reset and re-checked, and (P = 2,
last) rank 0 runs role1 alone with a 0.3 s timeout while rank 1 stays away: the tag-1 wait must trap
and the trap record must name it.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
#: shape name -> (bundle file, E, k, H, I, capacity, token cases per rank). Production cases stay
#: small enough that the pool of ring blocks fits the ring without a consumer (no role2 here).
SHAPES = {
    "test": ("test-tiny-sm90a.gcmoe", 16, 4, 512, 256, 256,
             [("small", [37, 5]), ("one", [1, 1]), ("empty_rank", [0, 200]), ("full", [256, 256]),
              ("empty_all", [0, 0]), ("mixed", [129, 64])]),
    "glm52": ("glm-5.2-sm90a.gcmoe", 256, 8, 6144, 2048, 256,
              [("one", [1, 1]), ("small", [12, 7]), ("empty_rank", [0, 12])]),
    "dsv41flash": ("deepseek-v4.1-flash-sm90a.gcmoe", 384, 6, 5120, 2304, 256,
                   [("one", [1, 1]), ("small", [16, 9]), ("empty_rank", [16, 0])]),
    # the P = 8 per-rank shares (their large-BM role1 builds: GCMOE_ROLE13_BM=64 / 48)
    "sglm52": ("rank-share-glm-5.2-p8-sm90a.gcmoe", 32, 8, 6144, 2048, 256,
               [("one", [1, 1]), ("small", [12, 7]), ("more", [40, 9])]),
    "sdsv41flash": ("rank-share-deepseek-v4.1-flash-p8-sm90a.gcmoe", 48, 6, 5120, 2304, 256,
                    [("one", [1, 1]), ("small", [16, 9]), ("more", [48, 5])]),
}
SHAPE = os.environ.get("GCMOE_SHAPE", "test")
_B, E, K, H, I, CAP, CASES = SHAPES[SHAPE]
#: the shipped bundle by default (until session 18 this pointed at a session-4 role1 / role3 bundle beside it)
BUNDLE = Path(os.environ.get("GCMOE_OPERATOR_BUNDLE", ROOT / "results/operator/bundles" / _B))
BM = 16
TIMEOUT_NS = 5_000_000_000


def log(out, rec):
    rec = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **rec}
    print("EVIDENCE", json.dumps(rec, sort_keys=True), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")


class Setup:
    def __init__(self, rank, world, group):
        from gcmoe_runtime import green
        from gcmoe_runtime.loader import KernelLoader
        from gcmoe_runtime.workspace.layout import LayoutSpec, WorkspaceLayout
        from gcmoe_runtime.workspace.symmetric import get_workspace
        from gcmoe_runtime.workspace.trap import TrapRecord

        self.rank, self.world, self.group = rank, world, group
        torch.cuda.set_device(rank)
        self.dev = torch.device("cuda", rank)
        torch.zeros(1, device=self.dev)
        self.loader = KernelLoader.open(str(BUNDLE))
        self.gp = green.get_partition(rank, 4)
        self.layout = WorkspaceLayout.build(LayoutSpec(
            arch="sm_90a", world_size=world, num_experts=E, topk=K, hidden=H, intermediate=I, capacity=CAP,
            bm_candidates=(8, 16, 32, 64), compute_sms=self.gp.compute_sms, shared_experts=True))
        self.ws = get_workspace(self.layout, group, rank)
        self.trap = TrapRecord()
        global BM
        bms = sorted({r.variant["bm"] for r in self.loader.bundle.records
                      if r.role == "role1" and r.variant["ranks"] == world})
        BM = int(os.environ.get("GCMOE_ROLE13_BM", 16 if 16 in bms else bms[0]))
        self.r1 = self.loader.kernel("role1", arch="sm_90a", ranks=world, bm=BM)
        #: role1 writes W1's ring rows in the interleaved K order (its variant's ``k_interleave``; session 51)
        self.k_interleave = int(self.r1.record.variant.get("k_interleave", 0)) == 1
        self.r3 = self.loader.kernel("role3", arch="sm_90a", ranks=world, shared_experts=1)
        self.D = self.r1.record.variant["dispatch_sms"]
        assert self.gp.dispatch_sms >= self.D, (self.gp.dispatch_sms, self.D)

    def v(self, name):
        return self.ws.view(name)

    def values(self, ntok, y=0, timeout_ns=TIMEOUT_NS):
        from gcmoe_runtime.operator.values import role_values

        return role_values(self.ws, ntok=ntok, err=self.trap.address, timeout_ns=timeout_ns, y=y, stats=True)

    def gather(self, t):
        if self.world == 1:
            return [t]
        out = [torch.empty_like(t) for _ in range(self.world)]
        torch.distributed.all_gather(out, t.contiguous(), group=self.group)
        return out


def make_inputs(s, T, seed):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randint(0, 256, (CAP, H), generator=g, dtype=torch.uint8)
    sf = torch.rand(CAP, H // 128, generator=g) + 0.5
    idx = torch.argsort(torch.rand(CAP, E, generator=g), dim=1)[:, :K].to(torch.int32)
    idx[torch.rand(CAP, K, generator=g) < 0.1] = -1
    idx[T:] = -7  # beyond T: garbage the kernels must not read
    w = torch.rand(CAP, K, generator=g)
    s.v("x").copy_(x.to(s.dev))
    s.v("x_sf").copy_(sf.to(s.dev))
    s.v("topk_idx").copy_(idx.to(s.dev))
    s.v("topk_weights").copy_(w.to(s.dev))
    torch.cuda.synchronize()


def check_role1(s, Ts, par):
    """Compare role1's results with the expectation from every rank's inputs. Returns error strings."""
    from gcmoe_runtime.numerics.sm90_layout import interleave_k128

    errs = []
    P, me, EL = s.world, s.rank, E // s.world
    xs = [t.cpu() for t in s.gather(s.v("x"))]
    sfs = [t.cpu() for t in s.gather(s.v("x_sf"))]
    idxs = [t.cpu() for t in s.gather(s.v("topk_idx"))]
    ws_ = [t.cpu() for t in s.gather(s.v("topk_weights"))]
    D = s.D
    # send counters: mine
    send = s.v("send_count").cpu()
    my_idx = idxs[me][: Ts[me]]
    for e in range(E):
        c = int((my_idx == e).sum())
        if int(send[e]) != (D << 32) | c:
            errs.append(f"send_count[{e}]={int(send[e]):#x} want {(D << 32) | c:#x}")
    # receive counters / prefixes: from every source rank r, for my local experts
    rc = s.v("recv_count").cpu()[par]
    rp = s.v("recv_prefix").cpu()[par]
    segs = {}
    for r in range(P):
        ridx = idxs[r][: Ts[r]]
        cnt = torch.stack([(ridx == e).sum() for e in range(E)])
        pref = torch.cumsum(cnt, 0) - cnt
        for el in range(EL):
            e = me * EL + el
            if int(rc[el, r]) != (D << 32) | int(cnt[e]):
                errs.append(f"recv_count[{par}][{el}][{r}]={int(rc[el, r]):#x} want {(D << 32) | int(cnt[e]):#x}")
            if int(rp[el, r]) != int(pref[e]):
                errs.append(f"recv_prefix[{par}][{el}][{r}]={int(rp[el, r])} want {int(pref[e])}")
            toks, slots = torch.nonzero(ridx == e, as_tuple=True)
            segs[(el, r)] = sorted(zip(toks.tolist(), slots.tolist()))
    # ring: walk the expert-concatenated sequence
    rb_n = s.layout.ring_blocks
    meta = s.v("ring_meta").cpu()
    hdr = s.v("ring_block").cpu()
    rx = s.v("ring_x").cpu()
    rsf = s.v("ring_sf").cpu()
    full = s.v("l1_full_count").cpu()
    pool = 0
    rows_checked = 0
    for el in range(EL):
        seq = [(r, ts) for r in range(P) for ts in segs[(el, r)]]
        tot = len(seq)
        got = {r: [] for r in range(P)}
        for je, (r, _) in enumerate(seq):
            blk, row = divmod(je, BM)
            q = pool + blk
            gen, rb = divmod(q, rb_n)
            m = meta[rb, row].tolist()
            if m[1] != r:
                errs.append(f"el{el} pos{je}: src_rank {m[1]} want {r}")
                continue
            tok, slot = m[2], m[3]
            got[r].append((tok, slot))
            if not (0 <= tok < Ts[r] and 0 <= slot < K):
                errs.append(f"el{el} pos{je}: bad tok/slot {tok}/{slot}")
                continue
            if not torch.equal(rx[rb, row], interleave_k128(xs[r][tok]) if s.k_interleave else xs[r][tok]):
                errs.append(f"el{el} pos{je}: x row of rank {r} token {tok} differs")
            if not torch.equal(rsf[rb, :, row], sfs[r][tok]):
                errs.append(f"el{el} pos{je}: scale row differs")
            wb = torch.tensor([m[0]], dtype=torch.int32).view(torch.float32)[0]
            if float(wb) != float(ws_[r][tok, slot]):
                errs.append(f"el{el} pos{je}: weight {float(wb)} want {float(ws_[r][tok, slot])}")
            rows_checked += 1
        for r in range(P):
            if sorted(got[r]) != segs[(el, r)]:
                errs.append(f"el{el} src{r}: (token, slot) set differs")
        nb = (tot + BM - 1) // BM
        for b in range(nb):
            q = pool + b
            gen, rb = divmod(q, rb_n)
            want = [el, min(BM, tot - b * BM), q, gen]
            if hdr[rb].tolist() != want:
                errs.append(f"block {q}: header {hdr[rb].tolist()} want {want}")
            if int(full[rb]) != BM * (gen + 1):
                errs.append(f"block {q}: l1_full_count {int(full[rb])} want {BM * (gen + 1)}")
        pool += nb
    used = {divmod(q, rb_n)[1] for q in range(pool)}
    for rb in range(rb_n):
        if rb not in used and int(full[rb]) != 0:
            errs.append(f"unused ring block {rb}: l1_full_count {int(full[rb])}")
    return errs, rows_checked, pool


def fill_combine(s, T, seed):
    """Known partials; NaN in routed slots whose expert id is invalid (they must be skipped)."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    comb = (torch.randn(K + 1, CAP, H, generator=g) * 3).to(torch.bfloat16)
    idx = s.v("topk_idx").cpu()
    valid = torch.cat([(idx >= 0) & (idx < E), torch.ones(CAP, 1, dtype=torch.bool)], dim=1)  # [CAP, K+1]
    comb[~valid.t()] = float("nan")
    s.v("combine").copy_(comb.to(s.dev))
    acc = torch.zeros(CAP, H)
    for sl in range(K + 1):
        acc = acc + torch.where(valid[:, sl : sl + 1], comb[sl].float(), torch.zeros(()))
    torch.cuda.synchronize()
    return acc[:T].to(torch.bfloat16)


def check_reset(s, par_before, phase):
    errs = []
    for name in ("l1_full_count", "l1_empty_count", "l2_full_mask", "l2_empty_count", "send_count"):
        if int(s.v(name).abs().sum()) != 0:
            errs.append(f"{name} not reset")
    if int(s.v("recv_count")[par_before].abs().sum()) or int(s.v("recv_prefix")[par_before].abs().sum()):
        errs.append("recv counters of the consumed parity not reset")
    par = int(s.v("recv_parity")[0])
    if par != par_before ^ 1:
        errs.append(f"parity {par} want {par_before ^ 1}")
    ready = s.v("combine_ready").cpu().tolist()
    if s.world > 1 and any(rv != phase for rv in ready):
        errs.append(f"combine_ready {ready} want all {phase}")
    if s.world == 1 and any(ready):  # P = 1: no readiness handshake (session 18), the word is never written
        errs.append(f"combine_ready {ready} written at P = 1")
    return errs


def run_case(s, out, name, Ts, seed):
    from gcmoe_runtime.operator.values import kernel_args

    T = Ts[s.rank]
    make_inputs(s, T, seed + 1000 * s.rank)
    par = int(s.v("recv_parity")[0])
    phase0 = int(s.v("tag1_barrier")[s.world])
    a1 = kernel_args(s.r1, s.values(T))
    t0 = time.perf_counter()
    s.loader.launch(s.r1, s.D, a1, s.gp.dispatch_stream, s.rank)
    s.trap.check()
    torch.cuda.synchronize()
    t_r1 = time.perf_counter() - t0
    s.trap.check()
    phase = int(s.v("tag1_barrier")[s.world])
    errs, rows, blocks = check_role1(s, Ts, par)
    if phase != phase0 + 1:
        errs.append(f"tag-1 phase {phase} want {phase0 + 1}")
    want_y = fill_combine(s, T, seed + 7 + 1000 * s.rank)
    y = torch.full((max(T, 1), H), float("nan"), dtype=torch.bfloat16, device=s.dev)
    from gcmoe_runtime.graph import finalize_sms

    a3 = kernel_args(s.r3, s.values(T, y=y.data_ptr()))
    s.loader.launch(s.r3, finalize_sms(s.gp.compute_sms, T), a3, s.gp.compute_stream, s.rank)
    torch.cuda.synchronize()
    s.trap.check()
    y_ok = torch.equal(y[:T].cpu().view(torch.int16), want_y.view(torch.int16))
    if not y_ok:
        d = (y[:T].cpu().float() - want_y.float()).abs()
        errs.append(f"y differs: max abs {float(d.nan_to_num(1e9).max())}")
    errs += check_reset(s, par, phase)
    stats = s.v("expert_stats").cpu().tolist()
    log(out, {"kind": "role1_role3_isolated", "case": name, "rank": s.rank, "P": s.world, "T": Ts,
              "rows_checked": rows, "pool_blocks": blocks, "y_bitexact": y_ok, "errors": errs[:20],
              "n_errors": len(errs), "expert_stats": stats, "role1_host_s": round(t_r1, 6), "ok": not errs})
    return not errs


def direct_replays(s, out, Ts, n):
    """n consecutive role1 -> role3 launches on the two green streams with no host reset between
    them (a graph needs role2's node, which is not built yet); state and outputs re-checked after."""
    from gcmoe_runtime.graph import finalize_sms
    from gcmoe_runtime.operator.values import kernel_args

    T = Ts[s.rank]
    make_inputs(s, T, 4242 + s.rank)
    want_y = fill_combine(s, T, 99 + s.rank)
    y = torch.zeros((max(T, 1), H), dtype=torch.bfloat16, device=s.dev)
    vals = s.values(T, y=y.data_ptr())
    a1, a3 = kernel_args(s.r1, vals), kernel_args(s.r3, vals)
    g3 = finalize_sms(s.gp.compute_sms, T)
    drv = s.loader.drv
    phase0 = int(s.v("tag1_barrier")[s.world])
    t0 = time.perf_counter()
    for i in range(n):
        s.loader.launch(s.r1, s.D, a1, s.gp.dispatch_stream, s.rank)
        drv.call("cuStreamSynchronize", s.gp.dispatch_stream)
        s.loader.launch(s.r3, g3, a3, s.gp.compute_stream, s.rank)
        drv.call("cuStreamSynchronize", s.gp.compute_stream)
    dt = time.perf_counter() - t0
    s.trap.check()
    phase = int(s.v("tag1_barrier")[s.world])
    errs = []
    if phase != phase0 + n:
        errs.append(f"phase {phase} want {phase0 + n}")
    if not torch.equal(y[:T].cpu().view(torch.int16), want_y.view(torch.int16)):
        errs.append("y after replays differs")
    par = int(s.v("recv_parity")[0])
    s.loader.launch(s.r1, s.D, a1, s.gp.dispatch_stream, s.rank)
    torch.cuda.synchronize()
    s.trap.check()
    e1, rows, _ = check_role1(s, Ts, par)
    errs += e1
    s.loader.launch(s.r3, g3, a3, s.gp.compute_stream, s.rank)
    torch.cuda.synchronize()
    errs += check_reset(s, par, phase + 1)
    log(out, {"kind": "role1_role3_consecutive_launches", "rank": s.rank, "P": s.world, "T": Ts, "launch_pairs": n,
              "host_s_per_pair_incl_syncs": round(dt / n, 7), "phase_delta": phase - phase0, "rows_rechecked": rows,
              "errors": errs[:20], "ok": not errs})
    return not errs


def trap_probes(s, out):
    """P = 2, last (each probe kills the trapping rank's context). A: both ranks run role1, rank 1
    skips role3, rank 0's role3 waits for rank 1's combine readiness -> trap code 4. B: rank 1 runs
    role1 alone, rank 0 (dead) never arrives at the tag-1 barrier -> trap code 3. Timeouts 0.3 s."""
    from gcmoe_runtime.graph import finalize_sms
    from gcmoe_runtime.operator.values import kernel_args
    from gcmoe_runtime.workspace.trap import DeviceTimeoutError

    flag = {r: Path(f"{out}.probe{r}_done") for r in range(2)}
    T = 8
    make_inputs(s, T, 1)
    torch.distributed.barrier()
    s.loader.launch(s.r1, s.D, kernel_args(s.r1, s.values(T)), s.gp.dispatch_stream, s.rank)
    torch.cuda.synchronize()
    s.trap.check()

    def attempt(launch, expect_code, what):
        t0 = time.perf_counter()
        msg, code = "", None
        try:
            launch()
            torch.cuda.synchronize()
        except Exception as exc:  # the sticky launch failure
            msg = f"{type(exc).__name__}: {str(exc)[:160]}"
        try:
            s.trap.check()
        except DeviceTimeoutError as exc:
            code, msg = exc.code, msg + " | " + str(exc)
        dt = time.perf_counter() - t0
        ok = code == expect_code and dt < 30
        log(out, {"kind": "timeout_trap", "probe": what, "rank": s.rank, "P": s.world, "timeout_s": 0.3,
                  "seconds_to_error": round(dt, 3), "trap_code": code, "expected_code": expect_code,
                  "message": msg[:500], "ok": ok})
        return ok

    def wait_flag(f):
        t0 = time.time()
        while not f.exists() and time.time() - t0 < 60:
            time.sleep(0.05)

    y = torch.zeros((T, H), dtype=torch.bfloat16, device=s.dev)
    if s.rank == 0:
        ok = attempt(lambda: s.loader.launch(
            s.r3, finalize_sms(s.gp.compute_sms, T), kernel_args(s.r3, s.values(T, y=y.data_ptr(), timeout_ns=300_000_000)),
            s.gp.compute_stream, 0), 4, "combine readiness: peer never ran role3")
        flag[0].write_text("done")
        wait_flag(flag[1])  # keep the workspace mapped while rank 1 probes
    else:
        wait_flag(flag[0])
        ok = attempt(lambda: s.loader.launch(
            s.r1, s.D, kernel_args(s.r1, s.values(T, timeout_ns=300_000_000)), s.gp.dispatch_stream, 1),
            3, "tag-1 barrier: peer never arrived")
        flag[1].write_text("done")
    return ok


def main(out):
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    group = None
    if world > 1:
        import torch.distributed as dist

        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", rank))
        group = dist.group.WORLD
    s = Setup(rank, world, group)
    log(out, {"kind": "setup", "rank": rank, "P": world, "gpu": torch.cuda.get_device_name(rank),
              "partition": [s.gp.dispatch_sms, s.gp.compute_sms], "ring_blocks": s.layout.ring_blocks,
              "workspace_bytes": s.layout.total_bytes, "bundle": BUNDLE.name, "shape": SHAPE,
              "E": E, "k": K, "H": H, "capacity": CAP, "bm": BM, "k_interleave": s.k_interleave})
    ok = True
    for i, (name, Ts) in enumerate(CASES):
        ok &= run_case(s, out, name, Ts[:world], 17 * i + 3)
    nrep = int(os.environ.get("GCMOE_REPLAYS", "10000"))
    if nrep:
        ok &= direct_replays(s, out, [min(64, CASES[0][1][0] * 8), 5][:world], nrep)
        ok &= run_case(s, out, "after_replays", CASES[-1][1][:world], 555)
    if world > 1 and os.environ.get("GCMOE_TRAP_PROBES", "1") == "1":
        torch.distributed.barrier()
        ok &= trap_probes(s, out)
    print("RESULT", "PASS" if ok else "FAIL", f"rank={rank}", flush=True)
    sys.stdout.flush()
    os._exit(0 if ok else 1)  # the trap probe leaves a dead context on rank 0: skip teardown


if __name__ == "__main__":
    main(sys.argv[1])
