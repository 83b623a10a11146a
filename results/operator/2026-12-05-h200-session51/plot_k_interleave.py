"""Session 51's K interleave in the layer, one plot: `python3 plot_k_interleave.py` here (the repo's environment,
matplotlib) -> k_interleave_span.png. The span change against the plain order (A) of session 50's form (K, role2
permuting W1's chunks at every BM: call B, and call G's K arm) and the shipped form (R, role1 permuting W1's rows
from BM 48: call G); below BM 48 the two forms are the same cubins, so call B's K is the shipped form there."""
import sys
from pathlib import Path

here = Path(__file__).parent
sys.path.insert(0, str(here.parents[2] / "ci"))
from timeline_ab import change_pct, plot_changes, role_us  # noqa: E402


def changes(tl, pre, base_idx, arm, arm_idx, only=None):
    base = [role_us(tl / f"{pre}-A-{i}", "span") for i in base_idx]
    new = [role_us(tl / f"{pre}-{arm}-{i}", "span") for i in arm_idx]
    return [(t, change_pct(base, new, t)) for t in sorted(base[0]) if only is None or only(t)]


B, G = here / "call-b" / "tl", here / "call-g" / "tl"
BM48 = {"sglm": 128, "sdsv": 224}  # the first T whose tile is BM 48
bars = []
for pre, label in (("glm", "GLM-5.2"), ("dsv", "DSV-4.1-Flash")):
    bars += [(f"{label} T={t} (shipped = K)", c) for t, c in changes(B, pre, (1, 4), "K", (2, 3))]
for pre, label in (("sglm", "GLM-5.2 share"), ("sdsv", "DSV-4.1-Flash share")):
    bars += [(f"{label} T={t} (shipped = K)", c)
             for t, c in changes(B, pre, (1, 4), "K", (2, 3), lambda t, p=pre: t < BM48[p])]
    for arm, idx, name in (("K", (3, 4), "K, session 50"), ("R", (2, 5), "R, shipped")):
        bars += [(f"{label} T={t} ({name})", c) for t, c in changes(G, pre, (1, 6), arm, idx)]
plot_changes(bars, here / "k_interleave_span.png", "K interleave against the plain order: layer span, routed, one H200",
             xlabel="span change (%)")
print("\n".join(f"{lab}: {c:+.1f} %" for lab, c in bars))
