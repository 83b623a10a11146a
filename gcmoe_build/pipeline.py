"""The compile pipeline: manifests -> variants -> keys -> parallel compile -> store.

Owns the orchestration only; each stage is someone else's module (manifest schema, variants,
compiler identity, ``compile_variant``, the store). For every variant of every manifest it

* computes the variant key from the compiler identity and kernel source hash of its arch;
* skips a variant whose key is already in the store ("cached": a warm lookup, verified read);
* lists a variant whose role has no kernel yet as "no kernel yet" (never compiled, never faked);
* compiles the rest in a process pool (``--jobs``, default: cores) and files each result in the
  store as it completes (objects, identity, then the record);

and reports per-variant status and timings (cold = compiled now, warm = found in the store) and
the store size. A progress bar goes to stderr.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterable, Sequence

from gcmoe_runtime.artifacts.record import ArtifactRecord
from gcmoe_runtime.artifacts.store import Store, StoreError

COMPILED, CACHED, NO_KERNEL, FAILED = "compiled", "cached", "no kernel yet", "failed"
#: The same variant (same key) already listed by an earlier manifest of this run: built once.
SAME_AS_EARLIER = "same as above"


class PipelineError(RuntimeError):
    """A manifest could not be planned (bad file, unknown arch) — raised before anything compiles."""


# --------------------------------------------------------------------------------------------
# the stages, behind one seam (tests substitute a fake with the same methods; it must pickle)
# --------------------------------------------------------------------------------------------
class Backend:
    """The real chain: manifest schema + variants, compiler identity, kernel registry, compile."""

    def __init__(self) -> None:
        self._identity: dict[str, tuple[str, dict[str, Any]]] = {}
        self._source_hash: str | None = None

    def variants_of(self, path: Path) -> list[Any]:
        from gcmoe_build.manifest import load_manifest
        from gcmoe_build.variants import enumerate_variants

        return list(enumerate_variants(load_manifest(path)))

    def has_kernel(self, role: str) -> bool:
        from gcmoe_build.kernels import has_kernel

        return has_kernel(role)

    def identity(self, arch: str) -> tuple[str, dict[str, Any]]:
        """(digest, identity record) of the compiler for ``arch`` on this machine."""
        if arch not in self._identity:
            from gcmoe_build.toolchain import compiler_identity

            ident = compiler_identity(arch)
            self._identity[arch] = (ident.digest, ident.record)
        return self._identity[arch]

    def source_hash(self) -> str:
        if self._source_hash is None:
            from gcmoe_build.toolchain import kernel_source_hash

            self._source_hash = kernel_source_hash()
        return self._source_hash

    def identity_digest(self, record: dict[str, Any]) -> str:
        """Digest of an identity record (host paths such as ptxas.path are not part of it)."""
        from gcmoe_build.toolchain.identity import identity_digest

        return identity_digest(record)

    def variant_key(self, variant: Any) -> str:
        return variant.key(self.identity(variant.arch)[0], self.source_hash())

    def warm_up(self, arches: Sequence[str] = ()) -> None:
        """Pay the per-process start-up (DSL import, identity hashes) before the first timed compile."""
        from gcmoe_build.compile import identity_for

        for arch in arches:
            identity_for(arch)

    def compile(self, variant: Any) -> Any:
        from gcmoe_build.compile import compile_variant

        return compile_variant(variant)


def variant_label(variant: Any) -> str:
    if isinstance(getattr(variant, "label", None), str):
        return variant.label
    params = " ".join(f"{k}={v}" for k, v in sorted(dict(variant.params).items()))
    return f"{variant.role} {variant.arch} {params}".strip()


@dataclass
class Planned:
    """One variant to build, with its key (None when its role has no kernel yet)."""

    manifest_path: Path
    variant: Any  # gcmoe_build.variants.Variant
    key: str | None
    #: the earlier Planned with the same key (another manifest listed the same variant), if any
    same_as: "Planned | None" = None

    @property
    def label(self) -> str:
        return variant_label(self.variant)


@dataclass
class VariantResult:
    planned: Planned
    status: str
    seconds: float = 0.0
    error: str | None = None
    record: ArtifactRecord | None = None
    note: str | None = None


@dataclass
class PipelineReport:
    results: list[VariantResult]
    wall_seconds: float
    store_root: Path
    store_bytes: int
    jobs: int

    def by_status(self, status: str) -> list[VariantResult]:
        return [r for r in self.results if r.status == status]

    @property
    def ok(self) -> bool:
        return not self.by_status(FAILED)

    def summary(self) -> str:
        lines = []
        by_manifest: dict[Path, list[VariantResult]] = {}
        for r in self.results:
            by_manifest.setdefault(r.planned.manifest_path, []).append(r)
        for path, results in by_manifest.items():
            lines.append(f"{path}:")
            no_kernel: dict[str, int] = {}
            for r in results:
                if r.status == NO_KERNEL:
                    no_kernel[r.planned.variant.role] = no_kernel.get(r.planned.variant.role, 0) + 1
                    continue
                key = r.planned.key[:12]
                t = f"{r.seconds:8.2f}s" if r.status in (COMPILED, CACHED) else " " * 9
                size = f"{r.record.cubin_size / 1024:7.1f} KiB" if r.record else " " * 11
                lines.append(f"  {key}  {r.status:<13} {t} {size}  {r.planned.label}")
                for text in (r.note if r.status != SAME_AS_EARLIER else None, r.error):
                    if text:
                        lines.extend("      " + ln for ln in text.rstrip().splitlines())
            if no_kernel:
                lines.append(
                    "  no kernel yet (not compiled): "
                    + ", ".join(f"{role} x{n}" for role, n in no_kernel.items())
                )
            cold = [r.seconds for r in results if r.status == COMPILED]
            warm = [r.seconds for r in results if r.status == CACHED]
            lines.append(
                f"  -- {len(cold)} compiled (cold {sum(cold):.2f}s total), {len(warm)} cached "
                f"(warm {sum(warm):.3f}s total), {len([r for r in results if r.status == NO_KERNEL])} no kernel yet, "
                f"{len([r for r in results if r.status == FAILED])} failed"
                + (f", {len(same)} same as an earlier manifest's" if (same := [r for r in results if r.status == SAME_AS_EARLIER]) else "")
            )
        lines.append(
            f"wall {self.wall_seconds:.2f}s, {self.jobs} compile process(es); store {self.store_root}: "
            f"{self.store_bytes / 1024:.1f} KiB"
        )
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# planning
# --------------------------------------------------------------------------------------------
def plan(
    manifest_paths: Iterable[str | os.PathLike[str]], arch: str | None = None, backend: Backend | None = None
) -> list[Planned]:
    """Every variant of every manifest (optionally only ``arch``), keyed.

    A variant listed again (same key, e.g. by a second manifest) points to its first listing
    through ``same_as``; it is built once.
    """
    backend = backend or Backend()
    planned: list[Planned] = []
    seen: dict[str, Planned] = {}
    for mp_ in manifest_paths:
        path = Path(mp_)
        variants = backend.variants_of(path)
        if arch is not None:
            arches = sorted({v.arch for v in variants})
            variants = [v for v in variants if v.arch == arch]
            if not variants:
                raise PipelineError(f"{path}: no variants for --arch {arch}; the manifest targets {arches}")
        for v in variants:
            key = backend.variant_key(v) if backend.has_kernel(v.role) else None
            p = Planned(path, v, key, seen.get(key) if key is not None else None)
            if key is not None and p.same_as is None:
                seen[key] = p
            planned.append(p)
    return planned


# --------------------------------------------------------------------------------------------
# compiling
# --------------------------------------------------------------------------------------------
def _compile_one(backend: Backend, variant: Any) -> tuple[bytes | None, bytes | None, ArtifactRecord | None, float, str | None]:
    """Worker: compile one variant; errors come back as text so one failure does not stop the rest."""
    t0 = time.perf_counter()
    try:
        art = backend.compile(variant)
        ptx = art.ptx.encode() if isinstance(art.ptx, str) else art.ptx
        return art.cubin, ptx, art.record, time.perf_counter() - t0, None
    except Exception as e:  # noqa: BLE001 - reported per variant, with its type and message
        tb = traceback.format_exc(limit=4) if os.environ.get("GCMOE_BUILD_TRACEBACK") else ""
        return None, None, None, time.perf_counter() - t0, f"{type(e).__name__}: {e}\n{tb}".rstrip()


def _worker_init(backend: Backend, arches: Sequence[str]) -> None:
    # Import the compiler stack once per worker, before the first timed compile.
    backend.warm_up(arches)


class Progress:
    """A one-line progress bar on a TTY, one line per finished variant otherwise."""

    def __init__(self, total: int, stream: IO[str] | None = None, enabled: bool = True) -> None:
        self.total, self.done = total, 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and total > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.perf_counter()

    def step(self, label: str, status: str, seconds: float) -> None:
        self.done += 1
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.t0
        if self.tty:
            width = 30
            fill = int(width * self.done / self.total)
            line = f"\r[{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total} {elapsed:6.1f}s  {status}: {label}"
            self.stream.write(line[:160].ljust(160))
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"[{self.done}/{self.total} {elapsed:6.1f}s] {status} ({seconds:.2f}s): {label}\n")
        self.stream.flush()


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def workers_for(n_variants: int, jobs: int) -> int:
    """Compile processes used for ``n_variants``: 1 means in this process (no pool)."""
    return max(1, min(jobs, n_variants))


def compile_variants(
    planned: Sequence[Planned],
    jobs: int,
    on_result,
    backend: Backend,
) -> None:
    """Compile ``planned`` variants (all with keys) with ``jobs`` processes; ``on_result(p, out)`` per result.

    ``jobs == 1`` compiles in this process (no pool start-up); otherwise a spawn-context pool, so
    no worker inherits a half-initialised DSL/MLIR state through fork.
    """
    if not planned:
        return
    arches = sorted({p.variant.arch for p in planned})
    if workers_for(len(planned), jobs) <= 1:
        _worker_init(backend, arches)
        for p in planned:
            on_result(p, _compile_one(backend, p.variant))
        return
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(
        max_workers=workers_for(len(planned), jobs), mp_context=ctx, initializer=_worker_init, initargs=(backend, arches)
    ) as pool:
        futures = {pool.submit(_compile_one, backend, p.variant): p for p in planned}
        try:
            for fut in cf.as_completed(futures):
                try:
                    out = fut.result()
                except Exception as e:  # noqa: BLE001 - e.g. a worker killed by a signal (BrokenProcessPool)
                    out = (None, None, None, 0.0, f"compile process failed: {type(e).__name__}: {e}")
                on_result(futures[fut], out)
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def run(
    manifest_paths: Sequence[str | os.PathLike[str]],
    store: Store,
    jobs: int | None = None,
    arch: str | None = None,
    progress: bool = True,
    stream: IO[str] | None = None,
    backend: Backend | None = None,
) -> PipelineReport:
    """Build every variant of ``manifest_paths`` into ``store``; see the module docstring."""
    t0 = time.perf_counter()
    jobs = jobs or default_jobs()
    if jobs < 1:
        raise PipelineError(f"--jobs must be >= 1, got {jobs}")
    backend = backend or Backend()
    planned = plan(manifest_paths, arch, backend)
    store.remove_stale_temp()
    bar = Progress(sum(p.key is not None and p.same_as is None for p in planned), stream, enabled=progress)
    results: dict[int, VariantResult] = {}
    notes: dict[int, str] = {}
    todo: list[Planned] = []
    for i, p in enumerate(planned):
        if p.key is None:
            results[i] = VariantResult(p, NO_KERNEL)
            continue
        if p.same_as is not None:
            continue  # resolved from its first listing below
        t = time.perf_counter()
        if store.has_record(p.key):
            try:
                rec = store.get_record(p.key)
                store.get_object(rec.cubin_sha256)  # a warm hit is a verified hit
            except StoreError as e:
                notes[id(p)] = f"store entry was damaged ({e}); rebuilt"
            else:
                results[i] = VariantResult(p, CACHED, time.perf_counter() - t, record=rec)
                bar.step(p.label, CACHED, results[i].seconds)
                continue
        todo.append(p)
    index = {id(p): i for i, p in enumerate(planned)}

    def on_result(p: Planned, out) -> None:
        cubin, ptx, record, seconds, error = out
        if error is None and record.key != p.key:
            error = (
                f"compile_variant produced key {record.key}, the pipeline planned {p.key} (key derivation "
                "disagrees; did the kernel sources or toolchain change during the build?)"
            )
        if error is None:
            try:
                store.put_artifact(record, cubin, backend.identity(p.variant.arch)[1], ptx=ptx)
            except Exception as e:  # noqa: BLE001
                error = f"storing failed: {type(e).__name__}: {e}"
        r = VariantResult(p, FAILED if error else COMPILED, seconds, error, None if error else record, notes.get(id(p)))
        results[index[id(p)]] = r
        bar.step(p.label, r.status, seconds)

    compile_variants(todo, jobs, on_result, backend)
    for i, p in enumerate(planned):
        if p.same_as is not None:
            first = results[index[id(p.same_as)]]
            status = SAME_AS_EARLIER if first.status in (COMPILED, CACHED) else first.status
            results[i] = VariantResult(p, status, 0.0, first.error, first.record, f"built for {p.same_as.manifest_path}")
    return PipelineReport(
        results=[results[i] for i in range(len(planned))],
        wall_seconds=time.perf_counter() - t0,
        store_root=store.root,
        store_bytes=store.size_bytes(),
        jobs=workers_for(len(todo), jobs) if todo else 0,
    )


def bundle_plan(
    manifest_paths: Sequence[str | os.PathLike[str]],
    store: Store,
    arch: str | None = None,
    backend: Backend | None = None,
) -> tuple[list[str], list[Planned], dict[str, str]]:
    """What a bundle of the manifests holds: the keys of every compilable variant (an error if one is not in the
    store), the variants without a kernel yet, and per key the name of the first of these manifests that plans it:
    what the bundled record names (``write_bundle``'s ``manifest_of``). The store's record names the manifest that
    compiled it first, which in a store shared by several manifests (a rank share reuses its model's role4
    variants) may be one the bundle does not hold: its audit would then rebuild under another name, and its "add
    this entry" errors point at a file that is not there."""
    planned = plan(manifest_paths, arch, backend)
    missing = [p for p in planned if p.key is not None and p.same_as is None and not store.has_record(p.key)]
    if missing:
        shown = "\n".join(f"  {p.key[:12]}  {p.manifest_path}: {p.label}" for p in missing[:20])
        more = f"\n  ... and {len(missing) - 20} more" if len(missing) > 20 else ""
        raise PipelineError(
            f"{len(missing)} variant(s) are not compiled in store {store.root}:\n{shown}{more}\n"
            f"run `gcmoe-build compile {' '.join(str(m) for m in manifest_paths)} --store {store.root}` first"
        )
    first = [p for p in planned if p.key is not None and p.same_as is None]
    return [p.key for p in first], [p for p in planned if p.key is None], {p.key: str(p.variant.manifest) for p in first}
