"""Session 16: role4 alone (bench_role4.py, L2 flushed per launch) per local token count, the shipped register
stream against the two weight rings (call D: GLM-5.2; call E: DSV-4.1-Flash), each arm the mean of its two runs.
Run from the repository root: ``python3 results/operator/2026-12-01-h200-session16/plot_role4.py``."""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
ARMS = {"glm-5.2 (call D)": [("register stream (shipped before)", "call-d/json/role4_old.json,call-d/json/role4_oldb.json"),
                             ("per-thread cp.async ring", "call-d/json/role4_thr.json,call-d/json/role4_thrb.json"),
                             ("warp cp.async ring (shipped)", "call-d/json/role4_warp.json,call-d/json/role4_warpb.json")],
        "deepseek-v4.1-flash (call E)": [("register stream (shipped before)",
                                          "call-e/json/role4_dsv_old.json,call-e/json/role4_dsv_oldb.json"),
                                         ("warp cp.async ring (shipped)",
                                          "call-e/json/role4_dsv_new.json,call-e/json/role4_dsv_newb.json")]}


def mean_series(files):
    runs = [{r["T"]: r["us"] for r in json.loads((HERE / f).read_text()) if r["chosen"]} for f in files.split(",")]
    ts = sorted(runs[0])
    return ts, [sum(r[t] for r in runs) / len(runs) for t in ts]


fig, axes = plt.subplots(1, len(ARMS), figsize=(13, 4.5))
for ax, (model, arms) in zip(axes, ARMS.items()):
    floor = json.loads((HERE / arms[0][1].split(",")[0]).read_text())[0]["floor_us"]
    for label, files in arms:
        ts, us = mean_series(files)
        ax.plot(ts, us, "o-", label=label)
    ax.axhline(floor, color="grey", lw=1, ls="--", label=f"byte floor {floor:.1f} µs")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("local tokens T (the runtime's BM)")
    ax.set_ylabel("role4 alone, µs")
    ax.set_ylim(0, None)
    ax.set_title(model)
    ax.legend(fontsize=8)
fig.suptitle("role4 (fused shared expert) alone, one H200, session 16")
fig.tight_layout()
out = HERE / "plots" / "role4_alone_ring.png"
fig.savefig(out, dpi=110)
print("wrote", out)
