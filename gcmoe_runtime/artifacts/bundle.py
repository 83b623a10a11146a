"""Bundles: one verified file holding everything a cluster needs to load a build's kernels.

Format (member names and constants in ``layout.py``): an uncompressed POSIX ustar archive written
by ``write_bundle`` with canonical headers (mtime 0, uid/gid 0, mode 0644, no user names), members
sorted by name after the index member ``BUNDLE.json``, zero padding, the two-block end marker and
zero fill to a multiple of 10240 bytes. Equal inputs therefore give byte-identical files, and the
reader can demand that every byte of the file is exactly what the writer would have produced.

``open_bundle`` reads the whole file and checks, before returning anything: every header
(re-rendered and compared byte for byte), the padding, the end marker, the index's top hash, each
member's size and sha256, that the member set equals the index's list (nothing missing, nothing
extra), every object's decompressed sha256, every record's key, object and compiler identity. Any
failure raises ``BundleError`` naming the member; nothing is loaded. Runtime dependencies only
(stdlib + zstandard).
"""
from __future__ import annotations

import json
import os
import tarfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from gcmoe_runtime.artifacts import layout
from gcmoe_runtime.artifacts.record import ArtifactRecord, canonical_json, sha256_hex
from gcmoe_runtime.artifacts.store import (
    Store,
    StoreCorruption,
    atomic_write,
    decompress_verified,
    json_object,
)

_BLOCK = 512
_RECORD = 20 * _BLOCK  # tar "record": the file length is a multiple of this


class BundleError(Exception):
    """A bundle is malformed, corrupt, incomplete, or lacks a requested variant."""


class VariantNotInBundle(BundleError, LookupError):
    """``Bundle.find`` found no matching variant; the message names the manifest entry to add."""


# --------------------------------------------------------------------------------------------
# container (ustar, canonical)
# --------------------------------------------------------------------------------------------
def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = layout.BUNDLE_MTIME
    info.mode = layout.BUNDLE_MEMBER_MODE
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    try:
        return info.tobuf(tarfile.USTAR_FORMAT, "ascii", "strict")
    except (ValueError, UnicodeEncodeError) as e:
        raise BundleError(f"member name {name!r} cannot be stored in a bundle: {e}") from None


def _pad(n: int) -> int:
    return (-n) % _BLOCK


def _pack(members: list[tuple[str, bytes]]) -> bytes:
    out = bytearray()
    for name, data in members:
        out += _header(name, len(data))
        out += data
        out += b"\0" * _pad(len(data))
    out += b"\0" * (2 * _BLOCK)
    out += b"\0" * ((-len(out)) % _RECORD)
    return bytes(out)


def _unpack(blob: bytes, where: str) -> list[tuple[str, bytes]]:
    """Split a canonical bundle into (name, data); every byte outside member data is checked."""
    if len(blob) == 0:
        raise BundleError(f"{where}: empty file")
    if len(blob) % _RECORD:
        raise BundleError(
            f"{where}: size {len(blob)} is not a multiple of {_RECORD} bytes (truncated or extended file)"
        )
    members: list[tuple[str, bytes]] = []
    off = 0
    prev = "(start of file)"
    while True:
        if off + _BLOCK > len(blob):
            raise BundleError(f"{where}: truncated after member {prev} (no end-of-archive marker)")
        hdr = blob[off : off + _BLOCK]
        if hdr == b"\0" * _BLOCK:
            break
        raw_name = hdr[0:100].split(b"\0", 1)[0]
        try:
            name = raw_name.decode("ascii")
            size = int(hdr[124:136].split(b"\0", 1)[0].strip() or b"x", 8)
        except (UnicodeDecodeError, ValueError):
            raise BundleError(
                f"{where}: corrupt member header at byte {off} (after member {prev})"
            ) from None
        if _header(name, size) != hdr:
            raise BundleError(
                f"{where}: member {name!r}: header at byte {off} is corrupt (differs from the canonical header)"
            )
        start = off + _BLOCK
        end = start + size
        if end + _pad(size) > len(blob):
            raise BundleError(f"{where}: member {name!r}: truncated (needs {size} bytes at byte {start})")
        if blob[end : end + _pad(size)].strip(b"\0"):
            raise BundleError(f"{where}: member {name!r}: non-zero padding after its data")
        members.append((name, blob[start:end]))
        prev = repr(name)
        off = end + _pad(size)
    tail = blob[off:]
    if len(tail) < 2 * _BLOCK or tail.strip(b"\0"):
        raise BundleError(f"{where}: corrupt end-of-archive marker after member {prev}")
    expected_len = off + 2 * _BLOCK + ((-(off + 2 * _BLOCK)) % _RECORD)
    if len(blob) != expected_len:
        raise BundleError(f"{where}: {len(blob) - expected_len} unexpected trailing bytes after the end marker")
    return members


# --------------------------------------------------------------------------------------------
# index
# --------------------------------------------------------------------------------------------
def _top_hash(members: list[dict[str, Any]]) -> str:
    return sha256_hex(
        canonical_json(
            {"format": layout.BUNDLE_FORMAT, "format_version": layout.BUNDLE_FORMAT_VERSION, "members": members}
        )
    )


def _index_bytes(contents: list[tuple[str, bytes]]) -> bytes:
    members = [{"name": n, "size": len(d), "sha256": sha256_hex(d)} for n, d in contents]
    return canonical_json(
        {
            "format": layout.BUNDLE_FORMAT,
            "format_version": layout.BUNDLE_FORMAT_VERSION,
            "members": members,
            "top_hash": _top_hash(members),
        }
    )


def _parse_index(data: bytes, where: str) -> tuple[list[dict[str, Any]], str]:
    what = f"{where}: member {layout.BUNDLE_INDEX_NAME!r}"
    try:
        idx = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BundleError(f"{what}: not valid JSON ({e})") from None
    if not isinstance(idx, dict) or set(idx) != {"format", "format_version", "members", "top_hash"}:
        raise BundleError(f"{what}: expected keys format, format_version, members, top_hash")
    if idx["format"] != layout.BUNDLE_FORMAT or idx["format_version"] != layout.BUNDLE_FORMAT_VERSION:
        raise BundleError(
            f"{what}: format {idx['format']!r} v{idx['format_version']!r} is not "
            f"{layout.BUNDLE_FORMAT!r} v{layout.BUNDLE_FORMAT_VERSION}"
        )
    members = idx["members"]
    if not isinstance(members, list) or not all(
        isinstance(m, dict)
        and set(m) == {"name", "size", "sha256"}
        and isinstance(m["name"], str)
        and isinstance(m["size"], int)
        and isinstance(m["sha256"], str)
        for m in members
    ):
        raise BundleError(f"{what}: 'members' must be a list of {{name, size, sha256}}")
    top = _top_hash(members)
    if idx["top_hash"] != top:
        raise BundleError(f"{what}: top hash {idx['top_hash']!r} does not match its member list (computed {top})")
    if data != canonical_json(idx):
        raise BundleError(f"{what}: not in canonical JSON form")
    return members, top


# --------------------------------------------------------------------------------------------
# the loaded bundle
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bundle:
    """A fully verified bundle, in memory. Construct with ``open_bundle``."""

    path: str
    top_hash: str
    records: tuple[ArtifactRecord, ...]
    identities: Mapping[str, Mapping[str, Any]]
    manifests: Mapping[str, bytes]
    _cubins: Mapping[str, bytes] = field(repr=False)

    @property
    def identity(self) -> Mapping[str, Any]:
        """The compiler identity record (a bundle built under several identities must use ``identities``)."""
        if len(self.identities) != 1:
            raise BundleError(
                f"bundle {self.path} holds {len(self.identities)} compiler identities; use Bundle.identities"
            )
        return next(iter(self.identities.values()))

    def record(self, key: str) -> ArtifactRecord:
        for r in self.records:
            if r.key == key:
                return r
        raise VariantNotInBundle(f"bundle {self.path}: no artifact with key {key}")

    def cubin(self, key: str) -> bytes:
        """The cubin of variant ``key`` (verified against its record at open)."""
        return self._cubins[self.record(key).cubin_sha256]

    def find(self, role: str, **params: Any) -> ArtifactRecord:
        """The one record of ``role`` whose arch/variant parameters equal ``params``.

        ``arch`` matches the record's arch; every other name matches ``record.variant[name]``.
        No match raises ``VariantNotInBundle`` naming the wanted variant, the closest bundled
        variants and the manifest entry to add; several matches ask for the distinguishing parameter.
        """
        want = {"role": role, **params}

        def value(r: ArtifactRecord, name: str) -> Any:
            if name == "role":
                return r.role
            if name == "arch":
                return r.arch
            return r.variant.get(name, _MISSING)

        def mismatches(r: ArtifactRecord) -> list[str]:
            return [n for n, v in want.items() if value(r, n) != v]

        hits = [r for r in self.records if not mismatches(r)]
        if len(hits) == 1:
            return hits[0]
        wanted = " ".join(f"{k}={v!r}" for k, v in want.items())
        if len(hits) > 1:
            varying = sorted(
                n for n in set().union(*(h.variant for h in hits)) if len({repr(h.variant.get(n)) for h in hits}) > 1
            )
            raise BundleError(
                f"bundle {self.path}: {len(hits)} variants match {wanted}; also give one of: {', '.join(varying)}"
            )
        same_role = [r for r in self.records if r.role == role]
        manifests = sorted({r.manifest for r in self.records}) or sorted(self.manifests)
        if not same_role:
            roles = sorted({r.role for r in self.records})
            how = (
                "set selftest_kernels: true in the manifest"
                if role.startswith("selftest")
                else "if `gcmoe-build ls MANIFEST` lists it as 'no kernel yet', the build has no kernel for it"
            )
            raise VariantNotInBundle(
                f"bundle {self.path}: no variant {wanted}: the bundle has no {role!r} kernels at all "
                f"(roles present: {', '.join(roles) or 'none'}; manifests: {', '.join(manifests) or 'none'}). "
                f"To get it: {how}; then compile and rebuild the bundle (a role without a kernel is never bundled)."
            )
        best = min(same_role, key=lambda r: len(mismatches(r)))
        diffs = mismatches(best)
        have = {n: sorted({"no such parameter" if value(r, n) is _MISSING else repr(value(r, n)) for r in same_role})
                for n in diffs}
        hint = "; ".join(f"{n}={want[n]!r} (bundle has {', '.join(have[n])})" for n in diffs)
        entries = ", ".join(
            f"{n}={want[n]!r} -> {MANIFEST_FIELD_OF_PARAM.get(n, 'the entry that sets ' + n)}" for n in diffs
        )
        files = ", ".join(sorted(self.manifests)) or "none"
        raise VariantNotInBundle(
            f"bundle {self.path}: no variant {wanted}. Closest bundled variant ({best.key[:12]}, "
            f"manifest {best.manifest!r}) differs in: {hint}. Add to manifest {best.manifest!r} "
            f"(bundled files: {files}): {entries}; then run `gcmoe-build compile` and `gcmoe-build bundle` again."
        )


_MISSING = object()

#: Where each variant parameter comes from in a model manifest (gcmoe_build.manifest schema), so a
#: missing variant can name the entry to add. Kept complete by tests/build/test_cli.py, which checks
#: every parameter the shipped manifests produce (the runtime cannot import the builder).
MANIFEST_FIELD_OF_PARAM = {
    "arch": "targets[].arch",
    "ranks": "targets[].ranks",
    "capacity": "targets[].capacity",
    "bm": "targets[].bm (BM candidates)",
    "threads": "targets[].bm / targets[].capacity (the tile heuristic picks threads per BM and T)",
    "ctas_per_sm": "targets[].bm / targets[].capacity (the tile heuristic picks CTAs per SM per BM and T; a bundle "
                   "built before role2 variants carried it has no such parameter)",
    "w1_split": "targets[].capacity / targets[].ranks (the tile heuristic picks role2's W1 split-K build at small T; "
                "a bundle built before session 22 has no such parameter)",
    "dispatch_sms": "targets[].dispatch_sms_request / targets[].device",
    "compute_sms": "targets[].dispatch_sms_request / targets[].device",
    "hidden": "model.hidden",
    "intermediate": "model.intermediate",
    "experts": "model.experts",
    "top_k": "model.top_k",
    "shared_experts": "model.shared_experts.count",
    "activation": "activation.kind",
    "act_alpha": "activation.alpha",
    "act_clamp": "activation.clamp",
    "act_fast_math": "activation.fast_math",
    "recipe_routed": "targets[].recipe.routed",
    "recipe_shared": "targets[].recipe.shared",
    "k_interleave": "targets[].k_interleave (the routed tiles' K order; only set when true)",
    "epilogue_wg": "targets[].bm / targets[].capacity (the tile heuristic's one-CTA BM 64 tile has role2's epilogue "
                   "warpgroup, heuristics.SM90_EPILOGUE_WG_BM; a bundle built before session 60 has no such parameter)",
}


def _verify_and_load(blob: bytes, where: str, expected_top_hash: str | None) -> Bundle:
    members = _unpack(blob, where)
    if not members or members[0][0] != layout.BUNDLE_INDEX_NAME:
        raise BundleError(f"{where}: first member must be {layout.BUNDLE_INDEX_NAME!r}")
    listed, top = _parse_index(members[0][1], where)
    if expected_top_hash is not None and top != expected_top_hash:
        raise BundleError(f"{where}: top hash {top} != expected {expected_top_hash}")

    body = members[1:]
    names = [n for n, _ in body]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise BundleError(f"{where}: duplicate member(s) {dup}")
    listed_names = [m["name"] for m in listed]
    present = dict(body)
    for m in listed:
        if m["name"] not in present:
            raise BundleError(f"{where}: member {m['name']!r} listed in {layout.BUNDLE_INDEX_NAME} is missing")
    for n in names:
        if n not in set(listed_names):
            raise BundleError(f"{where}: member {n!r} is not listed in {layout.BUNDLE_INDEX_NAME} (extra member)")
    if names != listed_names or names != sorted(names):
        raise BundleError(f"{where}: members are not in the canonical (sorted, listed) order")
    for m in listed:
        data = present[m["name"]]
        if len(data) != m["size"]:
            raise BundleError(f"{where}: member {m['name']!r}: size {len(data)} != listed {m['size']}")
        got = sha256_hex(data)
        if got != m["sha256"]:
            raise BundleError(f"{where}: member {m['name']!r}: sha256 {got} != listed {m['sha256']}")

    cubins: dict[str, bytes] = {}
    identities: dict[str, dict[str, Any]] = {}
    manifests: dict[str, bytes] = {}
    records: dict[str, ArtifactRecord] = {}
    for name, data in body:
        folder, _, leaf = name.partition("/")
        stem = leaf.rsplit(".", 1)[0]
        if folder == layout.OBJECTS_DIR and name == layout.bundle_object_name(stem) and layout.HEX64.match(stem):
            try:
                cubins[stem] = decompress_verified(data, stem, f"{where}: member {name!r}")
            except StoreCorruption as e:
                raise BundleError(str(e)) from None
        elif folder == layout.IDENTITIES_DIR and name == layout.bundle_identity_name(stem) and layout.HEX64.match(stem):
            identities[stem] = json_object(data, f"{where}: member {name!r}", BundleError)
        elif folder == layout.RECORDS_DIR and name == layout.bundle_record_name(stem) and layout.HEX64.match(stem):
            try:
                rec = ArtifactRecord.from_json(json_object(data, f"{where}: member {name!r}", BundleError))
            except (TypeError, ValueError, KeyError) as e:
                raise BundleError(f"{where}: member {name!r}: not a valid artifact record ({e})") from None
            if rec.key != stem:
                raise BundleError(f"{where}: member {name!r}: holds record key {rec.key}")
            records[stem] = rec
        elif folder == layout.MANIFESTS_DIR and layout.MANIFEST_NAME.match(leaf):
            manifests[leaf] = data
        else:
            raise BundleError(f"{where}: member {name!r}: unexpected member name")

    used_objects: set[str] = set()
    used_identities: set[str] = set()
    for key, rec in sorted(records.items()):
        obj = layout.bundle_object_name(rec.cubin_sha256)
        if rec.cubin_sha256 not in cubins:
            raise BundleError(f"{where}: record {key} ({rec.role}): its cubin object {obj!r} is missing")
        if len(cubins[rec.cubin_sha256]) != rec.cubin_size:
            raise BundleError(f"{where}: record {key}: cubin_size {rec.cubin_size} != object size")
        if rec.compiler_identity not in identities:
            raise BundleError(
                f"{where}: record {key}: compiler identity member "
                f"{layout.bundle_identity_name(rec.compiler_identity)!r} is missing"
            )
        used_objects.add(rec.cubin_sha256)
        used_identities.add(rec.compiler_identity)
    for sha in sorted(set(cubins) - used_objects):
        raise BundleError(f"{where}: member {layout.bundle_object_name(sha)!r} is not used by any record (extra member)")
    for dig in sorted(set(identities) - used_identities):
        raise BundleError(
            f"{where}: member {layout.bundle_identity_name(dig)!r} is not used by any record (extra member)"
        )

    return Bundle(
        path=where,
        top_hash=top,
        records=tuple(records[k] for k in sorted(records)),
        identities=MappingProxyType({k: MappingProxyType(v) for k, v in identities.items()}),
        manifests=MappingProxyType(manifests),
        _cubins=MappingProxyType(cubins),
    )


def open_bundle(path: str | os.PathLike[str], expected_top_hash: str | None = None) -> Bundle:
    """Read and fully verify the bundle at ``path``; raises ``BundleError`` before loading anything.

    ``expected_top_hash`` (optional) pins the bundle: any other top hash is rejected.
    """
    where = str(path)
    try:
        blob = Path(path).read_bytes()
    except FileNotFoundError:
        raise BundleError(f"{where}: no such bundle file") from None
    except IsADirectoryError:
        raise BundleError(f"{where}: is a directory, not a bundle file") from None
    return _verify_and_load(blob, where, expected_top_hash)


# --------------------------------------------------------------------------------------------
# writer
# --------------------------------------------------------------------------------------------
def render_bundle(
    records: Iterable[ArtifactRecord],
    object_frames: Mapping[str, bytes],
    identities: Mapping[str, Mapping[str, Any]],
    manifests: Mapping[str, bytes],
) -> bytes:
    """The canonical bundle bytes for these contents (no verification; see ``write_bundle``).

    ``object_frames`` maps cubin sha256 -> the store's zstd frame; ``manifests`` maps a plain file
    name -> verbatim bytes.
    """
    contents: list[tuple[str, bytes]] = []
    for r in records:
        contents.append((layout.bundle_record_name(r.key), canonical_json(r.to_json())))
    for sha, frame in object_frames.items():
        contents.append((layout.bundle_object_name(sha), bytes(frame)))
    for digest, ident in identities.items():
        contents.append((layout.bundle_identity_name(digest), canonical_json(dict(ident))))
    for name, data in manifests.items():
        if not layout.MANIFEST_NAME.match(name):
            raise BundleError(f"manifest file name {name!r} cannot be stored (plain ASCII name, <= 90 chars)")
        contents.append((layout.bundle_manifest_name(name), bytes(data)))
    contents.sort(key=lambda nd: nd[0])
    names = [n for n, _ in contents]
    if len(set(names)) != len(names):
        raise BundleError(f"duplicate bundle members: {sorted({n for n in names if names.count(n) > 1})}")
    return _pack([(layout.BUNDLE_INDEX_NAME, _index_bytes(contents)), *contents])


def write_bundle(
    out: str | os.PathLike[str],
    store: Store,
    keys: Iterable[str],
    manifests: Mapping[str, bytes],
    manifest_of: Mapping[str, str] | None = None,
) -> Bundle:
    """Bundle the store's artifacts ``keys`` with ``manifests``; written atomically, verified first.
    ``manifest_of``: key -> the bundled manifest's name each record then names (default: the store record's, i.e.
    whichever manifest compiled the variant first; ``gcmoe_build.pipeline.bundle_plan``).

    Returns the verified ``Bundle`` as the reader sees it.
    """
    records = [store.get_record(k) for k in sorted(set(keys))]
    if manifest_of:
        records = [replace(r, manifest=manifest_of.get(r.key, r.manifest)) for r in records]
    frames: dict[str, bytes] = {}
    identities: dict[str, dict[str, Any]] = {}
    for r in records:
        store.get_object(r.cubin_sha256)  # verify before shipping
        frames[r.cubin_sha256] = store.object_frame(r.cubin_sha256)
        identities[r.compiler_identity] = store.get_identity(r.compiler_identity)
    blob = render_bundle(records, frames, identities, manifests)
    bundle = _verify_and_load(blob, str(out), None)
    atomic_write(Path(out), blob)
    return bundle
