"""``gcmoe-build``: the command line over the pipeline, store, bundles and audit.

    gcmoe-build compile MANIFEST... [--store DIR] [--jobs N] [--arch ARCH]
    gcmoe-build ls MANIFEST
    gcmoe-build inspect KEY [--store DIR]
    gcmoe-build bundle MANIFEST... -o FILE [--store DIR] [--arch ARCH]
    gcmoe-build verify BUNDLE [--expect TOP_HASH]
    gcmoe-build audit BUNDLE [--jobs N]

Exit status: 0 on success, 1 on any failure (failed compile, damaged bundle, audit difference),
2 on usage errors. Errors are one clear message on stderr, never a traceback, unless
GCMOE_BUILD_TRACEBACK=1.
"""
from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import click

from gcmoe_runtime.artifacts import layout
from gcmoe_runtime.artifacts.bundle import BundleError, open_bundle, write_bundle
from gcmoe_runtime.artifacts.store import Store, StoreError

from gcmoe_build import pipeline

_store_option = click.option(
    "--store",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=layout.DEFAULT_STORE_ROOT,
    show_default=True,
    help="Artifact store directory.",
)
_manifests_arg = click.argument(
    "manifests", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)


def _errors_as_messages(fn):
    """Turn our expected errors into one-line click errors (exit 1)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except click.ClickException:
            raise
        except Exception as e:  # noqa: BLE001
            if os.environ.get("GCMOE_BUILD_TRACEBACK"):
                raise
            if not _is_user_error(e):
                raise
            raise click.ClickException(str(e)) from None

    return wrapper


def _is_user_error(e: Exception) -> bool:
    if isinstance(e, (BundleError, StoreError, pipeline.PipelineError, OSError)):
        return True
    # the manifest schema's / toolchain's own error types: named, not imported (they load lazily)
    return any(c.__name__.endswith(("ManifestError", "ToolchainError", "ToolchainOptionError", "FrontendError", "ValidationError"))
               for c in type(e).__mro__)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Ahead-of-time compiler for gc-moe kernels: manifests -> cubins -> store -> bundles."""


@main.command("compile")
@_manifests_arg
@_store_option
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Parallel compiles [default: CPU cores].")
@click.option("--arch", default=None, help="Only this target arch (e.g. sm_90a) [default: all the manifests list].")
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")
@_errors_as_messages
def compile_cmd(manifests, store_dir, jobs, arch, progress):
    """Compile every variant of MANIFEST... into the store (cached variants are not recompiled)."""
    report = pipeline.run(manifests, Store(store_dir), jobs=jobs, arch=arch, progress=progress)
    click.echo(report.summary())
    if not report.ok:
        raise click.ClickException(f"{len(report.by_status(pipeline.FAILED))} variant(s) failed to compile")


@main.command("ls")
@click.argument("manifest", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_errors_as_messages
def ls_cmd(manifest):
    """List the role variants of MANIFEST with their keys."""
    from gcmoe_build.variants import format_variant_table

    backend = pipeline.Backend()
    variants = backend.variants_of(manifest)
    keys = {v: backend.variant_key(v) for v in variants if backend.has_kernel(v.role)}
    click.echo(format_variant_table(variants, keys))
    no_kernel = sorted({v.role for v in variants if v not in keys}, key=lambda r: [v.role for v in variants].index(r))
    if no_kernel:
        click.echo(f"no kernel yet (KEY '-'): role(s) {', '.join(no_kernel)}")


@main.command("inspect")
@click.argument("key")
@_store_option
@click.option("--identity", is_flag=True, help="Also print the compiler identity record.")
@_errors_as_messages
def inspect_cmd(key, store_dir, identity):
    """Show the artifact record of KEY (a full key or a unique prefix of >= 6 hex digits)."""
    store = Store(store_dir)
    record = store.get_record(store.resolve_key(key))
    click.echo(json.dumps(record.to_json(), indent=2, sort_keys=True))
    cubin = store.get_object(record.cubin_sha256)  # raises if missing or damaged
    click.echo(f"cubin object {store.object_path(record.cubin_sha256)}: present, verified ({len(cubin)} bytes)")
    if identity:
        click.echo(f"compiler identity {record.compiler_identity}:")
        click.echo(json.dumps(store.get_identity(record.compiler_identity), indent=2, sort_keys=True))


@main.command("bundle")
@_manifests_arg
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Bundle file to write.")
@_store_option
@click.option("--arch", default=None, help="Only this target arch.")
@_errors_as_messages
def bundle_cmd(manifests, output, store_dir, arch):
    """Write one bundle file with the compiled variants of MANIFEST... (all must be in the store)."""
    store = Store(store_dir)
    keys, no_kernel, manifest_of = pipeline.bundle_plan(manifests, store, arch)
    sources: dict[str, bytes] = {}
    for m in manifests:
        if m.name in sources and sources[m.name] != m.read_bytes():
            raise click.ClickException(f"two different manifests are named {m.name!r}; bundle members need distinct names")
        sources[m.name] = m.read_bytes()
    if not keys:
        raise click.ClickException("no compiled variants to bundle (no role of these manifests has a kernel yet)")
    b = write_bundle(output, store, keys, sources, manifest_of)
    click.echo(
        f"wrote {output}: {len(b.records)} variant(s), {len(b.manifests)} manifest(s), "
        f"{output.stat().st_size / 1024:.1f} KiB\ntop hash {b.top_hash}"
    )
    if no_kernel:
        roles = sorted({p.variant.role for p in no_kernel})
        click.echo(f"not in the bundle (no kernel yet): {len(no_kernel)} variant(s) of role(s) {', '.join(roles)}")


@main.command("verify")
@click.argument("bundle", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--expect", "expect", default=None, help="Require this top hash.")
@_errors_as_messages
def verify_cmd(bundle, expect):
    """Check every hash of BUNDLE (members, objects, records, top hash)."""
    b = open_bundle(bundle, expected_top_hash=expect)
    click.echo(
        f"OK {bundle}: {len(b.records)} record(s), {len({r.cubin_sha256 for r in b.records})} cubin(s), "
        f"{len(b.identities)} compiler identit{'y' if len(b.identities) == 1 else 'ies'}, "
        f"{len(b.manifests)} manifest(s)\ntop hash {b.top_hash}"
    )


@main.command("audit")
@click.argument("bundle", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Parallel rebuilds [default: CPU cores].")
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr.")
@_errors_as_messages
def audit_cmd(bundle, jobs, progress):
    """Rebuild every variant of BUNDLE from source and compare the cubins byte for byte."""
    from gcmoe_build.audit import audit_bundle

    report = audit_bundle(bundle, jobs=jobs, progress=progress)
    click.echo(report.text())
    if not report.ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
