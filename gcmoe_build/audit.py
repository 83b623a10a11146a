"""Reproducibility audit: rebuild every variant of a bundle from source and compare byte for byte.

Steps: open (and fully verify) the bundle; compare this machine's compiler identity with each
recorded identity field by field; re-plan the variants from the bundle's own (verbatim) manifests;
recompile each one with the real chain (nothing is written to any store); compare the cubin
bytes, the PTX hash and the artifact record with the bundle's. The report says "byte-identical"
or lists each differing variant with what differs and which identity fields differ.
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gcmoe_runtime.artifacts.bundle import Bundle, BundleError, open_bundle
from gcmoe_runtime.artifacts.record import ArtifactRecord, canonical_json, sha256_hex

from gcmoe_build.pipeline import Backend, Planned, Progress, compile_variants, default_jobs, variant_label


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``{"a.b.c": leaf}`` (lists stay leaves), for field-by-field comparison."""
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for k in sorted(obj):
            out.update(flatten(obj[k], f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}


def identity_diff(recorded: dict[str, Any], current: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, recorded value, current value) for every identity field that differs."""
    a, b = flatten(dict(recorded)), flatten(dict(current))
    missing = object()
    return [
        (k, a.get(k, "<absent>"), b.get(k, "<absent>"))
        for k in sorted(set(a) | set(b))
        if a.get(k, missing) != b.get(k, missing)
    ]


@dataclass
class VariantAudit:
    record: ArtifactRecord
    identical: bool
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def label(self) -> str:
        params = " ".join(f"{k}={v}" for k, v in sorted(self.record.variant.items()))
        return f"{self.record.role} {self.record.arch} {params}"


@dataclass
class IdentityCheck:
    """One recorded compiler identity against this machine's."""

    recorded_digest: str
    current_digest: str
    diffs: list[tuple[str, Any, Any]]  # every differing field, host-only ones included

    @property
    def same(self) -> bool:
        return self.recorded_digest == self.current_digest

    @property
    def digest_fields(self) -> list[str]:
        """Differing fields that enter the digest (all of them when the digests differ)."""
        return [k for k, _, _ in self.diffs] if not self.same else []


@dataclass
class AuditReport:
    bundle: str
    top_hash: str
    identities: dict[str, IdentityCheck]  # by recorded digest
    variants: list[VariantAudit]
    wall_seconds: float

    @property
    def ok(self) -> bool:
        return all(c.same for c in self.identities.values()) and all(v.identical for v in self.variants)

    def text(self) -> str:
        lines = [f"audit {self.bundle} (top hash {self.top_hash})"]
        for digest, c in self.identities.items():
            if c.same and not c.diffs:
                lines.append(f"compiler identity {digest[:12]}: identical to this machine's, field by field")
            elif c.same:
                lines.append(
                    f"compiler identity {digest[:12]}: same digest; host-only fields differ (not part of the digest):"
                )
                lines.extend(f"  {k}: recorded {a!r}, here {b!r}" for k, a, b in c.diffs)
            else:
                lines.append(
                    f"compiler identity {digest[:12]}: DIFFERS on this machine (digest here "
                    f"{c.current_digest[:12]}); {len(c.diffs)} field(s) differ:"
                )
                lines.extend(f"  {k}: recorded {a!r}, here {b!r}" for k, a, b in c.diffs)
        same = [v for v in self.variants if v.identical]
        diff = [v for v in self.variants if not v.identical]
        for v in diff:
            lines.append(f"DIFFERS  {v.record.key[:12]}  {v.label}")
            lines.extend(f"    {p}" for p in v.problems)
            c = self.identities.get(v.record.compiler_identity)
            if c is not None and not c.same:
                lines.append(f"    identity fields that differ: {', '.join(c.digest_fields)}")
            else:
                lines.append("    compiler identity is identical: the build is not reproducible for this variant")
        for v in same:
            c = self.identities.get(v.record.compiler_identity)
            if c is not None and not c.same:
                lines.append(f"same     {v.record.key[:12]}  {v.label}  (cubin byte-identical despite the identity difference)")
        verdict = (
            f"byte-identical: {len(same)}/{len(self.variants)} variants rebuilt to the same cubins"
            if self.ok
            else f"NOT reproducible: {len(diff)} of {len(self.variants)} variants differ"
            + ("" if diff else " (no cubin differs, but the compiler identity does)")
        )
        lines.append(f"{verdict} ({self.wall_seconds:.1f}s)")
        return "\n".join(lines)


def _compare(rec: ArtifactRecord, bundle: Bundle, out, identity_differs: bool) -> list[str]:
    cubin, ptx, new, _, error = out
    if error:
        return [f"rebuild failed: {error}"]
    problems: list[str] = []
    old_cubin = bundle.cubin(rec.key)
    if cubin != old_cubin:
        first = next((i for i, (x, y) in enumerate(zip(cubin, old_cubin)) if x != y), min(len(cubin), len(old_cubin)))
        problems.append(
            f"cubin differs: rebuilt sha256 {sha256_hex(cubin)[:16]} ({len(cubin)} B) vs bundled "
            f"{rec.cubin_sha256[:16]} ({len(old_cubin)} B), first difference at byte {first}"
        )
    new_ptx_sha = sha256_hex(ptx)
    if new_ptx_sha != rec.ptx_sha256:
        problems.append(f"PTX differs: rebuilt sha256 {new_ptx_sha[:16]} vs recorded {rec.ptx_sha256[:16]} (frontend/rewrite stage)")
    elif cubin != old_cubin:
        problems.append("PTX is identical: the difference arises in the assembler")
    a, b = flatten(rec.to_json()), flatten(new.to_json())
    # Under a different compiler identity the key and identity digest differ by construction.
    implied = {"key", "compiler_identity"} if identity_differs else set()
    fields = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and k not in implied]
    if fields:
        problems.append(f"artifact record differs in: {', '.join(fields)}")
    return problems


def audit_bundle(
    path: str | Path,
    jobs: int | None = None,
    backend: Backend | None = None,
    progress: bool = True,
    stream: IO[str] | None = None,
) -> AuditReport:
    """Rebuild and compare every variant of the bundle at ``path`` (raises BundleError if it is damaged)."""
    t0 = time.perf_counter()
    backend = backend or Backend()
    bundle = open_bundle(path)

    arch_of_identity = {r.compiler_identity: r.arch for r in bundle.records}
    identities: dict[str, IdentityCheck] = {}
    for digest, arch in sorted(arch_of_identity.items()):
        current_digest, current = backend.identity(arch)
        recorded = dict(bundle.identities[digest])
        if backend.identity_digest(recorded) != digest:
            raise BundleError(f"{path}: compiler identity {digest}: the record does not hash to its digest")
        identities[digest] = IdentityCheck(digest, current_digest, identity_diff(recorded, current))

    # Re-plan from the bundle's own manifests, under their original file names. A variant several of them plan is
    # rebuilt as the manifest its record names plans it (the record's manifest field is compared too).
    by_params: dict[tuple[str, str, bytes], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="gcmoe-audit-") as tmp:
        for name, data in sorted(bundle.manifests.items()):
            p = Path(tmp) / name
            p.write_bytes(data)
            for v in backend.variants_of(p):
                by_params.setdefault((v.role, v.arch, canonical_json(dict(v.params))), {}).setdefault(
                    str(v.manifest), v)

    results: dict[str, VariantAudit] = {}
    todo: list[tuple[ArtifactRecord, Planned]] = []
    for rec in bundle.records:
        planners = by_params.get((rec.role, rec.arch, canonical_json(rec.variant)), {})
        v = planners.get(rec.manifest) or next(iter(planners.values()), None)
        if v is None:
            results[rec.key] = VariantAudit(rec, False, ["not produced by the bundled manifests under this source tree"])
        elif not backend.has_kernel(rec.role):
            results[rec.key] = VariantAudit(rec, False, [f"role {rec.role!r} has no kernel in this source tree"])
        else:
            key_now = backend.variant_key(v)
            problems = []
            if key_now != rec.key and identities[rec.compiler_identity].same:
                problems.append(f"variant key differs under the same identity: here {key_now[:16]}, recorded {rec.key[:16]}")
            results[rec.key] = VariantAudit(rec, not problems, problems)
            todo.append((rec, Planned(Path(rec.manifest), v, key_now)))

    bar = Progress(len(todo), stream, enabled=progress)
    rec_of = {id(p): rec for rec, p in todo}

    def on_result(p: Planned, out) -> None:
        rec = rec_of[id(p)]
        va = results[rec.key]
        va.problems.extend(_compare(rec, bundle, out, not identities[rec.compiler_identity].same))
        va.identical = not va.problems
        va.seconds = out[3]
        bar.step(variant_label(p.variant), "identical" if va.identical else "DIFFERS", out[3])

    compile_variants([p for _, p in todo], jobs or default_jobs(), on_result, backend)
    return AuditReport(
        bundle=str(path),
        top_hash=bundle.top_hash,
        identities=identities,
        variants=[results[r.key] for r in bundle.records],
        wall_seconds=time.perf_counter() - t0,
    )
