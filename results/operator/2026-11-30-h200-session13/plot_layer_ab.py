"""Plot: the layer A/Bs of session 13, per T, GLM-5.2 and DeepSeek-V4.1-Flash at P = 2 routed, each the ratio of the
means of alternating runs per arm against the session-12 bundles: call A (the staged fold scale, session 12's last
change, vs call G's bundles), call C (the first signal warp, every 384-thread build), call D (the revised signal warp
and 32 producer registers at two CTAs, three runs per arm) and call E (the shipped bundles: call D's records but the
one-CTA BM 8 builds, which stay session 12's; one run per arm).

    python3 plot_layer_ab.py   (writes plots/layer_ab_signal_warp.png; needs matplotlib)
"""
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "ci"))
from layer_ab import ratio as _ratio  # noqa: E402


def ratio(call, old_runs, new_runs):
    return _ratio([HERE / call / "bench" / r for r in old_runs], [HERE / call / "bench" / r for r in new_runs])


series = [("A: staged fold scale (vs call G)", "o:", ratio("call-a", ("ab-old", "ab-oldb"), ("ab-new", "ab-newb"))),
          ("C: signal warp, first form", "s-", ratio("call-c", ("ab-old", "ab-oldb"), ("ab-new", "ab-newb"))),
          ("D: revised + 32 producer regs (2 CTAs)", "^-", ratio("call-d", ("ab-old", "ab-oldb", "ab-oldc"),
                                                                  ("ab-new", "ab-newb", "ab-newc"))),
          ("E: shipped (one-CTA BM 8 = session 12)", "kD--", ratio("call-e", ("ab-old",), ("ab-new",)))]
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
for ax, model in zip(axes, ("glm-5.2", "deepseek-v4.1-flash")):
    ts = sorted(t for (m, t) in series[0][2] if m == model)
    for label, fmt, r in series:
        ax.plot(ts, [r[(model, t)] for t in ts], fmt, label=label)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per rank (P = 2, routed)")
    ax.set_title(model)
    ax.grid(alpha=0.3)
axes[0].set_ylabel("layer latency, new / session 12")
axes[0].legend(fontsize=8)
fig.suptitle("Session 13 layer A/Bs (H200 x2, 2 + 10 windows per run, alternating arms)")
fig.tight_layout()
out = HERE / "plots" / "layer_ab_signal_warp.png"
fig.savefig(out, dpi=120)
print("wrote", out)
