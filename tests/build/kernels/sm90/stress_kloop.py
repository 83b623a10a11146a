"""Hunt for a moving failure in the K-loop probe (dev tool, not a test): the GPU test's launches
(``test_kloop_probe.test_every_form_matches_the_weights_and_each_other``: ``bench_kloop.check_inputs`` on every SM,
``CHECK_ITERS`` K128 steps per CTA, the epilogue forms at ``CHECK_TASK``) repeated, each form named before its launch,
so a launch that traps (a bounded mbarrier wait that timed out: "unspecified launch failure") or writes a wrong sum
names its form. A trap kills the CUDA context, so every pass runs in its own process.

``GCMOE_KLOOP_CUBINS=DIR python3 tests/build/kernels/sm90/stress_kloop.py [--passes 8] [--repeats 5] [--forms a,b]
[--json OUT]``: ``--passes`` child processes, each running every form ``--repeats`` times in the index's order
(odd passes reversed); then each form that failed alone in ``--passes`` fresh processes. Prints a table last.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kloop import CHECK_ITERS, CHECK_TASK, check_inputs, checked_sums  # noqa: E402



def child(forms: list[str], repeats: int, cubins: Path) -> int:
    """Run ``forms`` ``repeats`` times in this process; print ``RUN form`` before and ``OK form err`` after each
    launch (flushed: the last ``RUN`` without its ``OK`` names a launch that killed the process)."""
    import torch

    from tests.build.kernels.sm90.role2_harness import Role2Kernels

    k = Role2Kernels(cubins)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    codes, scales, ref = check_inputs(torch, sms)
    for r in range(repeats):
        for form in forms:
            print(f"RUN {r} {form}", flush=True)
            _, err = checked_sums(torch, k, form, codes, scales, ref, CHECK_ITERS, sms, CHECK_TASK)
            print(f"OK {r} {form} {err:.2e}", flush=True)
    return 0


def run_child(forms: list[str], repeats: int, cubins: Path, timeout: float) -> dict:
    """One child process: ``{ok, failed_form, tail, launches}``."""
    cmd = [sys.executable, __file__, "--child", "--repeats", str(repeats), "--forms", ",".join(forms)]
    env = {**os.environ, "GCMOE_KLOOP_CUBINS": str(cubins)}
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), -9
    runs = [ln.split()[2] for ln in out.splitlines() if ln.startswith("RUN ")]
    oks = sum(ln.startswith("OK ") for ln in out.splitlines())
    failed = runs[-1] if rc != 0 and len(runs) > oks else None
    return {"ok": rc == 0, "rc": rc, "failed_form": failed, "launches": oks,
            "tail": "\n".join(out.splitlines()[-6:]) if rc else ""}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--passes", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--forms", default="", help="comma-separated (default: every form of the cubins' index)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per child process")
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    cubins = Path(os.environ.get("GCMOE_KLOOP_CUBINS", "build/kloop_probe"))
    index = json.loads((cubins / "index.json").read_text())
    forms = a.forms.split(",") if a.forms else [n.removeprefix("kloop_probe_") for n in index]
    if a.child:
        return child(forms, a.repeats, cubins)
    passes = []
    for i in range(a.passes):
        order = forms if i % 2 == 0 else forms[::-1]
        res = run_child(order, a.repeats, cubins, a.timeout)
        print(f"pass {i}: {'ok' if res['ok'] else 'FAIL'} after {res['launches']} launches"
              + (f", at {res['failed_form']}\n{res['tail']}" if not res["ok"] else ""), flush=True)
        passes.append(res)
    alone = {}
    for form in sorted({p["failed_form"] for p in passes if p["failed_form"]}):
        alone[form] = [run_child([form], a.repeats * 4, cubins, a.timeout) for _ in range(a.passes)]
    print("\n| form | in sequence: failed passes | alone: failed / processes |\n|---|---|---|")
    for form in sorted({p["failed_form"] for p in passes if p["failed_form"]}) or ["(none)"]:
        seq = sum(p["failed_form"] == form for p in passes)
        al = alone.get(form, [])
        print(f"| {form} | {seq} / {len(passes)} | {sum(not r['ok'] for r in al)} / {len(al)} |")
    failed = sum(not p["ok"] for p in passes)
    print(f"\nfailed passes: {failed} of {len(passes)} ({a.repeats} x {len(forms)} forms each)")
    if a.json:
        Path(a.json).write_text(json.dumps({"passes": passes, "alone": alone, "forms": forms,
                                            "repeats": a.repeats, "iters": CHECK_ITERS, "task": CHECK_TASK}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
