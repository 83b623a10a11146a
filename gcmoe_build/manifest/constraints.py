"""Every value rule a manifest must satisfy: paper Appendix A (Table 12) plus the ones our kernels add.

``check_manifest`` returns all violations as ``(loc, value, limit, reason)`` tuples, ``loc`` being the
path of the offending field; the loader maps each to its YAML line and raises one ManifestError.
The numbers and their reasons live in ``limits``; partition rules in gcmoe_runtime.heuristics.
"""
from __future__ import annotations

import math
import re
from typing import Any

from gcmoe_build.manifest import limits as L
from gcmoe_runtime.heuristics import PartitionError, arch_family, green_partition

Violation = tuple[tuple, Any, str, str]
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_manifest(m: Any) -> list[Violation]:
    out: list[Violation] = []

    def bad(loc: tuple, value: Any, limit: str, reason: str) -> None:
        out.append((loc, value, limit, reason))

    if not _NAME_RE.match(m.name):
        bad(("name",), m.name, "1-64 characters of [A-Za-z0-9._-], starting alphanumeric",
            "the name keys bundles and error messages")
    _check_model(m.model, bad)
    _check_activation(m.activation, bad)
    if not m.targets:
        bad(("targets",), m.targets, "at least one target", "nothing to build")
    seen: dict[tuple, int] = {}
    for i, t in enumerate(m.targets):
        ident = (t.arch, t.device.name, t.dispatch_request)
        if ident in seen:
            bad(("targets", i), f"{t.arch} on {t.device.name}, dispatch request {t.dispatch_request}",
                f"distinct from targets[{seen[ident]}]", "duplicate target")
        seen.setdefault(ident, i)
        _check_target(m.model, t, ("targets", i), bad)
    return out


def _check_model(s: Any, bad) -> None:
    loc = ("model",)
    H, I, E, k = s.hidden, s.intermediate, s.experts, s.top_k
    if H < L.HIDDEN_MULTIPLE or H % L.HIDDEN_MULTIPLE:
        bad(loc + ("hidden",), H, f"a positive multiple of {L.HIDDEN_MULTIPLE}", L.WHY_HIDDEN)
    if I < L.INTERMEDIATE_MULTIPLE or I % L.INTERMEDIATE_MULTIPLE:
        bad(loc + ("intermediate",), I, f"a positive multiple of {L.INTERMEDIATE_MULTIPLE}", L.WHY_INTERMEDIATE)
    if I > L.MAX_INTERMEDIATE:
        bad(loc + ("intermediate",), I, f"<= {L.MAX_INTERMEDIATE}", L.WHY_INTERMEDIATE)
    if k < L.MIN_TOP_K:
        bad(loc + ("top_k",), k, f">= {L.MIN_TOP_K}", "every token is routed to at least one expert")
    if E < 1:
        bad(loc + ("experts",), E, ">= 1", "a MoE layer needs experts")
    elif E > L.MAX_EXPERTS:
        bad(loc + ("experts",), E, f"<= {L.MAX_EXPERTS}", L.WHY_MAX_EXPERTS)
    if E >= 1 and k > E:
        bad(loc + ("top_k",), k, f"<= experts ({E})", "a token picks k distinct experts")
    sh = s.shared_experts
    sloc = loc + ("shared_experts",)
    if sh.count < 0:
        bad(sloc + ("count",), sh.count, ">= 0", "a count of shared experts")
    elif k >= L.MIN_TOP_K and k + sh.count > L.MAX_COMBINE_SLOTS:
        bad(sloc + ("count",), sh.count, f"top_k + count <= {L.MAX_COMBINE_SLOTS} (top_k = {k})",
            L.WHY_COMBINE_SLOTS)
    if sh.count > 0 and sh.k_group not in L.SHARED_K_GROUPS:
        bad(sloc + ("k_group",), sh.k_group, f"one of {list(L.SHARED_K_GROUPS)}", L.WHY_SHARED_K_GROUP)
    if sh.count == 0 and sh.k_group is not None:
        bad(sloc + ("k_group",), sh.k_group, "null when count is 0", "no shared experts to apply it to")


def _check_activation(a: Any, bad) -> None:
    for field in ("alpha", "clamp"):
        v = getattr(a, field)
        if not math.isfinite(v) or v <= 0:
            bad(("activation", field), v, "a finite number > 0",
                "SwiGLU scale and clamp are applied in the W1 epilogue; NaN, inf or <= 0 break it")


def _check_target(s: Any, t: Any, loc: tuple, bad) -> None:
    fam = arch_family(t.arch)
    d = t.device
    dev_ok = True
    for field, minimum in (("sms", 1), ("alignment", 1), ("min_partition", 1)):
        v = getattr(d, field)
        if v < minimum:
            bad(loc + ("device", field), v, f">= {minimum}", "a device property reported by the driver")
            dev_ok = False
    if not d.name.strip():
        bad(loc + ("device", "name"), d.name, "a non-empty name", "names the GPU in variant listings")

    if fam == "sm90" and s.intermediate % L.SM90_INTERMEDIATE_MULTIPLE and s.intermediate % L.INTERMEDIATE_MULTIPLE == 0:
        bad(("model", "intermediate"), s.intermediate,
            f"a multiple of {L.SM90_INTERMEDIATE_MULTIPLE} for {t.arch} (targets[{loc[1]}])", L.WHY_SM90_INTERMEDIATE)

    # ranks
    if not t.ranks:
        bad(loc + ("ranks",), t.ranks, "at least one rank count", "nothing to build")
    seen: set[int] = set()
    for j, P in enumerate(t.ranks):
        ploc = loc + ("ranks", j)
        if P in seen:
            bad(ploc, P, "each rank count once", "duplicate rank count")
            continue
        seen.add(P)
        if P < 1:
            bad(ploc, P, ">= 1", "a world size")
            continue
        if P > L.MAX_RANKS:
            bad(ploc, P, f"<= {L.MAX_RANKS}", L.WHY_MAX_RANKS)
        if s.experts >= 1:
            if s.experts % P:
                bad(ploc, P, f"a divisor of experts ({s.experts})", L.WHY_EXPERTS_DIVISIBLE)
            elif s.experts // P > L.MAX_LOCAL_EXPERTS:
                bad(ploc, P, f"experts / P <= {L.MAX_LOCAL_EXPERTS} (experts = {s.experts}, "
                    f"e = {s.experts // P})", L.WHY_LOCAL_EXPERTS)

    if not 1 <= t.capacity <= L.MAX_CAPACITY:
        bad(loc + ("capacity",), t.capacity, f"1 <= capacity <= {L.MAX_CAPACITY}", L.WHY_CAPACITY)

    # dispatch request -> driver-aligned partition
    req = t.dispatch_request
    rloc = loc + ("dispatch_sms_request",)
    if req < 1:
        bad(rloc, req, ">= 1", "the dispatch kernel needs SMs")
    elif dev_ok and req >= d.sms:
        bad(rloc, req, f"< device.sms ({d.sms})", "leaves no compute partition")
    elif dev_ok:
        try:
            green_partition(d.sms, req, d.alignment, d.min_partition)
        except PartitionError as e:
            compute = ((d.sms - req) // d.alignment) * d.alignment
            bad(rloc, req, f"{e.field} {e.limit} after alignment",
                f"on {d.name} ({d.sms} SMs, alignment {d.alignment}) it yields "
                f"{d.sms - compute} dispatch / {compute} compute SMs: {e.field} {e.reason}")

    # BM candidates
    allowed = L.BM_CANDIDATES_BY_FAMILY[fam]
    if t.bm != "auto":
        if not t.bm:
            bad(loc + ("bm",), t.bm, f"'auto' or a non-empty subset of {list(allowed)}", "no block size to build")
        dup: set[int] = set()
        for j, b in enumerate(t.bm):
            if b in dup:
                bad(loc + ("bm", j), b, "each BM once", "duplicate BM candidate")
            elif b not in allowed:
                bad(loc + ("bm", j), b, f"one of {list(allowed)} for {t.arch}", L.WHY_BM[fam])
            dup.add(b)

    if t.k_interleave:
        _check_k_interleave(s, t, fam, loc, bad)

    # recipes
    routed_ok = L.ROUTED_RECIPES[fam]
    if t.recipe.routed not in routed_ok:
        other = [f for f, names in L.ROUTED_RECIPES.items() if t.recipe.routed in names]
        hint = f" ({t.recipe.routed!r} is the {other[0]} recipe)" if other else ""
        bad(loc + ("recipe", "routed"), t.recipe.routed, f"one of {list(routed_ok)} for {t.arch}",
            L.WHY_ROUTED_RECIPE[fam] + hint)
    sh = s.shared_experts
    sr = t.recipe.shared
    srloc = loc + ("recipe", "shared")
    if sh.count > 0:
        if sr not in L.SHARED_RECIPES:
            bad(srloc, sr, f"one of {list(L.SHARED_RECIPES)}", "shared experts need a shared-weight recipe")
        elif sh.k_group in L.SHARED_K_GROUPS and L.SHARED_RECIPES[sr] != sh.k_group:
            bad(srloc, sr, f"the recipe of model.shared_experts.k_group = {sh.k_group} "
                f"({[n for n, g in L.SHARED_RECIPES.items() if g == sh.k_group][0]})",
                "the shared recipe's K scale group must match the model's shared K group")
    elif sr is not None:
        bad(srloc, sr, "null when model.shared_experts.count is 0", "no shared experts to apply it to")


def _check_k_interleave(s: Any, t: Any, fam: str, loc: tuple, bad) -> None:
    """The interleaved K order is a contract between the SM90 weight transform and the 384-thread role2 builds (their
    tensor-map activation chunks are what the kernel permutes): no other build may be reachable."""
    from gcmoe_runtime.heuristics import reachable_tiles

    kloc = loc + ("k_interleave",)
    if fam != "sm90":
        bad(kloc, True, f"false for {t.arch}", "the interleaved K order is the SM90 register-A decode's layout")
        return
    for P in sorted({p for p in t.ranks if p >= 1 and s.experts >= 1 and s.experts % p == 0}):
        try:
            tiles = reachable_tiles(t.arch, t.capacity, ranks=P, top_k=s.top_k, experts=s.experts, hidden=s.hidden,
                                    intermediate=s.intermediate, compute_sms=t.partition.compute_sms,
                                    candidates=t.bm_candidates)
        except (PartitionError, ValueError):
            return  # the partition, capacity or BM list is reported at its own field
        narrow = sorted({c.bm for c in tiles if c.threads != 384})
        if narrow:
            bad(kloc, True, f"false while a 256-thread role2 tile is reachable (BM {narrow} at ranks {P})",
                "only the 384-thread builds permute their activation chunks into the interleaved order")
