"""Role variants: the complete list of kernels a manifest needs, and each one's stable key.

A variant is one compiled kernel: role x arch x params, where ``params`` holds exactly the values that
change the generated code (shape, BM/threads, partition, recipe, activation options) and nothing else --
no addresses, times, host paths or manifest names -- so that equal inputs give equal keys and
byte-identical cubins (DESIGN.md §3).

Roles (the paper's graph nodes; the string is also the graph slot ``gcmoe_runtime.graph`` uses):

* ``role1`` dispatch (communication partition). BM is compile-time: role1 fills ring blocks of BM
  tokens that role2 consumes, so the pair is always selected with one BM and cannot disagree.
* ``role2`` grouped GEMM (compute partition): one variant per (BM, threads) the tile heuristic
  (``gcmoe_runtime.heuristics.choose_tile``) picks for some T in [1, capacity].
* ``role3`` finalize/combine (compute partition); BM-free (it resets the ring by counts it is given).
* ``role4`` fused shared experts, SM90 only (on SM100 they run inside role2): one per shared BM.
* self-test probes when the manifest sets ``selftest_kernels: true``: only arch and partition.

The partition is part of every variant: the driver-aligned dispatch/compute SM counts are
compile-time properties of the kernels (paper §4.2).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from gcmoe_runtime.artifacts.record import canonical_json, sha256_hex
from gcmoe_runtime.heuristics import (choose_shared_bm, reachable_tiles, sm90_epilogue_wg,
                                      sm90_role1_interleaves_rows)

ROLE1_DISPATCH = "role1"
ROLE2_GROUPED_GEMM = "role2"
ROLE3_FINALIZE = "role3"
ROLE4_SHARED_EXPERT = "role4"
SELFTEST_HANDSHAKE_PRODUCER = "selftest_handshake_producer"
SELFTEST_HANDSHAKE_CONSUMER = "selftest_handshake_consumer"
SELFTEST_HANDSHAKE_FINALIZE = "selftest_handshake_finalize"
SELFTEST_TMA_PEER = "selftest_tma_peer"

MODEL_ROLES = (ROLE1_DISPATCH, ROLE2_GROUPED_GEMM, ROLE3_FINALIZE, ROLE4_SHARED_EXPERT)
SELFTEST_ROLES = (SELFTEST_HANDSHAKE_PRODUCER, SELFTEST_HANDSHAKE_CONSUMER, SELFTEST_HANDSHAKE_FINALIZE,
                  SELFTEST_TMA_PEER)
ROLE_ORDER = MODEL_ROLES + SELFTEST_ROLES
ROLE_TITLES = {
    ROLE1_DISPATCH: "dispatch",
    ROLE2_GROUPED_GEMM: "grouped GEMM",
    ROLE3_FINALIZE: "finalize",
    ROLE4_SHARED_EXPERT: "shared expert",
}

_SCALARS = (str, int, float, bool, type(None))


class FrozenParams(dict):
    """A read-only, key-sorted dict of JSON scalars: JSON-able as a plain dict, hashable, immutable."""

    def __init__(self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()):
        data = dict(items)
        for k, v in data.items():
            if not isinstance(k, str) or not isinstance(v, _SCALARS):
                raise TypeError(f"variant param {k!r} = {v!r}: keys must be str, values JSON scalars")
            if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
                raise ValueError(f"variant param {k!r} = {v!r} is not finite")
        super().__init__(sorted(data.items()))
        self._hash = hash(canonical_json(self))

    def __hash__(self) -> int:  # type: ignore[override]
        return self._hash

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("variant params are read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]
    __ior__ = _readonly  # type: ignore[assignment]

    def __reduce__(self):  # pickle (process pools) as a plain rebuild
        return (FrozenParams, (dict(self),))


@dataclass(frozen=True)
class Variant:
    """One kernel to build. Equality and hash cover role, arch and params (not the manifest name)."""

    role: str
    arch: str
    params: FrozenParams
    manifest: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.params, FrozenParams):
            object.__setattr__(self, "params", FrozenParams(self.params))

    def key(self, identity_digest: str, source_hash: str) -> str:
        """sha256 hex of canonical_json({identity, source, role, arch, params})."""
        for name, v in (("identity_digest", identity_digest), ("source_hash", source_hash)):
            if not isinstance(v, str) or not v:
                raise ValueError(f"Variant.key: {name} must be a non-empty string, got {v!r}")
        return sha256_hex(canonical_json({
            "identity": identity_digest, "source": source_hash,
            "role": self.role, "arch": self.arch, "params": dict(self.params),
        }))

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "arch": self.arch, "params": dict(self.params)}

    @property
    def label(self) -> str:
        return f"{self.role} {self.arch} " + " ".join(f"{k}={v}" for k, v in self.params.items())


# --------------------------------------------------------------------------------------------------
# enumeration
# --------------------------------------------------------------------------------------------------


def _activation(manifest: Any) -> dict[str, Any]:
    a = manifest.activation
    return {"activation": a.kind, "act_alpha": float(a.alpha), "act_clamp": float(a.clamp),
            "act_fast_math": a.fast_math}


def enumerate_variants(manifest: Any) -> list[Variant]:
    """Every role variant of a validated Manifest, deduplicated, in a stable order."""
    s = manifest.model
    shared = s.shared_experts.count
    found: dict[Variant, None] = {}

    def add(role: str, arch: str, params: dict[str, Any]) -> None:
        v = Variant(role, arch, FrozenParams(params), manifest.name)
        found.setdefault(v, None)

    for t in manifest.targets:
        part = t.partition
        base = {"dispatch_sms": part.dispatch_sms, "compute_sms": part.compute_sms}
        cands = t.bm_candidates
        for P in sorted(t.ranks):
            shape = {"hidden": s.hidden, "experts": s.experts, "top_k": s.top_k, "ranks": P,
                     "capacity": t.capacity}
            tiles = reachable_tiles(t.arch, t.capacity, ranks=P, top_k=s.top_k, experts=s.experts,
                                    hidden=s.hidden, intermediate=s.intermediate,
                                    compute_sms=part.compute_sms, candidates=cands)
            for bm in sorted({c.bm for c in tiles}):
                p = {**base, **shape, "bm": bm, "recipe_routed": t.recipe.routed}
                if t.k_interleave and sm90_role1_interleaves_rows(bm):  # role1 writes W1's rows interleaved
                    p["k_interleave"] = 1
                add(ROLE1_DISPATCH, t.arch, p)
            for c in tiles:
                p = {**base, **shape, **_activation(manifest), "intermediate": s.intermediate, "bm": c.bm,
                     "threads": c.threads, "recipe_routed": t.recipe.routed, "shared_experts": shared}
                if t.family == "sm100":  # shared experts run inside role2's task stream on SM100
                    p["recipe_shared"] = t.recipe.shared
                else:  # the 384-thread BM 8 tile has a one- and a two-CTA build (heuristics.sm90_ctas_per_sm), the
                    # two-CTA one with and without the W1 split-K code (heuristics.sm90_w1_split)
                    p["ctas_per_sm"] = c.ctas_per_sm
                    p["w1_split"] = c.w1_split
                    if t.k_interleave:  # only when set: the plain builds' params (and keys) are as before; 2: W1's
                        # ring rows arrive interleaved (role1's), 1: role2 permutes them
                        p["k_interleave"] = 2 if sm90_role1_interleaves_rows(c.bm) else 1
                    if sm90_epilogue_wg(c.bm, c.threads, c.ctas_per_sm):  # only there: every other tile's params
                        # (and keys) are as before session 60
                        p["epilogue_wg"] = 1
                add(ROLE2_GROUPED_GEMM, t.arch, p)
            # the routed-only layer (shared_experts 0) too: a model with shared experts may run them outside the
            # operator (the paper's "routed" configurations), and role3 then must not reduce combine lane k
            for sh in sorted({0, shared}):
                add(ROLE3_FINALIZE, t.arch, {**base, **shape, "shared_experts": sh})
        if t.family == "sm90" and shared > 0:
            shared_bms = {choose_shared_bm(T, cands) for T in range(1, t.capacity + 1)}
            for bm in sorted(shared_bms):
                add(ROLE4_SHARED_EXPERT, t.arch, {
                    **base, **_activation(manifest), "hidden": s.hidden, "intermediate": s.intermediate,
                    "top_k": s.top_k, "capacity": t.capacity, "shared_experts": shared,
                    "recipe_shared": t.recipe.shared, "bm": bm})
        if manifest.selftest_kernels:
            for role in SELFTEST_ROLES:
                add(role, t.arch, dict(base))
    return sorted(found, key=_sort_key)


def _sort_key(v: Variant) -> tuple:
    p = v.params
    return (ROLE_ORDER.index(v.role) if v.role in ROLE_ORDER else len(ROLE_ORDER), v.role, v.arch,
            p.get("dispatch_sms", 0), p.get("ranks", 0), p.get("bm", 0), p.get("threads", 0), p.get("ctas_per_sm", 0),
            p.get("w1_split", 0),
            canonical_json(p))


# --------------------------------------------------------------------------------------------------
# lookup and listing
# --------------------------------------------------------------------------------------------------


def find_variant(variants: Iterable[Variant], role: str, arch: str | None = None, **params: Any) -> Variant:
    """The one variant of ``role`` (and ``arch``, if given) whose params include all of ``params``.

    LookupError when none matches (naming the values that exist) or several do (naming the params
    that tell them apart).
    """
    pool = [v for v in variants if v.role == role and (arch is None or v.arch == arch)]
    hits = [v for v in pool if all(k in v.params and v.params[k] == val for k, val in params.items())]
    if len(hits) == 1:
        return hits[0]
    want = ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))
    where = f"role {role!r}" + (f" arch {arch!r}" if arch else "")
    if not hits:
        if not pool:
            roles = sorted({v.role for v in variants})
            raise LookupError(f"no variant of {where}; roles present: {roles}")
        avail = {k: sorted({json.dumps(v.params.get(k)) for v in pool}) for k in params}
        shown = "; ".join(f"{k} in {{{', '.join(vals)}}}" for k, vals in avail.items())
        raise LookupError(f"no variant of {where} with {want}; available: {shown} "
                          f"(add the value to the manifest entry of {pool[0].manifest or 'the model'})")
    differing = sorted(k for k in set().union(*(h.params for h in hits))
                       if len({json.dumps(h.params.get(k)) for h in hits}) > 1)
    raise LookupError(f"{len(hits)} variants of {where} match {want or 'no params'}; "
                      f"narrow it with one of {differing or ['arch']}")


_SHAPE_KEYS = ("hidden", "intermediate", "experts", "top_k", "capacity", "shared_experts")
_SHAPE_ABBREV = {"hidden": "H", "intermediate": "I", "experts": "E", "top_k": "k", "capacity": "T",
                 "shared_experts": "s"}
_COLUMN_KEYS = ("ranks", "bm", "threads", "dispatch_sms", "compute_sms") + _SHAPE_KEYS


def format_variant_table(variants: Iterable[Variant], keys: Mapping[Variant, str] | None = None) -> str:
    """A fixed-width table for ``gcmoe-build ls``: one line per variant; ``keys`` adds a key column."""
    rows = []
    for v in variants:
        p = v.params
        shape = " ".join(f"{_SHAPE_ABBREV[k]}{p[k]}" for k in _SHAPE_KEYS if k in p)
        rest = " ".join(f"{k}={_fmt(val)}" for k, val in p.items() if k not in _COLUMN_KEYS)
        row = [v.role, ROLE_TITLES.get(v.role, "self-test"), v.arch, _fmt(p.get("ranks", "-")),
               _fmt(p.get("bm", "-")), _fmt(p.get("threads", "-")),
               f"{p.get('dispatch_sms', '-')}/{p.get('compute_sms', '-')}", shape or "-", rest or "-"]
        if keys is not None:
            row.insert(0, keys[v][:16] if v in keys else "-")
        rows.append(row)
    header = ["ROLE", "KIND", "ARCH", "P", "BM", "THREADS", "SMS d/c", "SHAPE", "OPTIONS"]
    if keys is not None:
        header.insert(0, "KEY")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    lines.append(f"{len(rows)} variant(s)")
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)
