"""Store layout and bundle format constants: the one place these on-disk facts are written down.

Store (a directory, default ``artifacts/store``)::

    objects/ab/<sha256>.zst      zstd frame of one blob (cubin or PTX); <sha256> is of the raw bytes
    records/<key>.json           ArtifactRecord of one variant, canonical JSON
    identities/<digest>.json     compiler identity record, canonical JSON, by its digest

Every file is written to a temporary name in its final directory (``.tmp-...``), fsynced, then
renamed with ``os.replace``; readers ignore temporary names, so a crash never exposes a partial
file. An object is always written before the record that names it.

Bundle (one file, an uncompressed POSIX ustar archive, normalised so equal inputs give equal bytes)::

    BUNDLE.json                  first member: format, member list {name, size, sha256}, top hash
    identities/<digest>.json     compiler identity records
    manifests/<file name>        the source manifests, verbatim bytes
    objects/<sha256>.zst         the cubins, as the store's zstd frames
    records/<key>.json           artifact records, canonical JSON

Members after BUNDLE.json are sorted by name; every header has mtime 0, uid/gid 0, empty
user/group names and mode 0644. The top hash is sha256 over the canonical JSON of
``{"format", "format_version", "members"}`` — pin it to pin the whole bundle. Objects are copied
verbatim from the store, so the same store gives the same bundle bytes; stores written by
different zstandard releases may hold different frames of the same cubin (the cubin hashes, and
so the records, stay equal; the bundle's member hashes would not).
"""
from __future__ import annotations

import re

#: Default store root, relative to the working directory (git-ignored).
DEFAULT_STORE_ROOT = "artifacts/store"

OBJECTS_DIR = "objects"
RECORDS_DIR = "records"
IDENTITIES_DIR = "identities"
MANIFESTS_DIR = "manifests"

OBJECT_SUFFIX = ".zst"
JSON_SUFFIX = ".json"
#: Prefix of in-flight files; never a valid final name (final names are hex digests).
TEMP_PREFIX = ".tmp-"

#: zstd level for objects. Fixed so that the same blob gives the same frame (and bundle bytes).
ZSTD_LEVEL = 19

BUNDLE_FORMAT = "gcmoe-bundle"
BUNDLE_FORMAT_VERSION = 1
BUNDLE_INDEX_NAME = "BUNDLE.json"
#: Normalised tar header fields.
BUNDLE_MEMBER_MODE = 0o644
BUNDLE_MTIME = 0

HEX64 = re.compile(r"^[0-9a-f]{64}$")
#: Manifest names in a bundle: a plain file name (no directories), ustar-safe ASCII.
MANIFEST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,89}$")


def object_relpath(sha: str) -> str:
    """Store path of the object with raw-content hash ``sha`` (two-level fan-out)."""
    return f"{OBJECTS_DIR}/{sha[:2]}/{sha}{OBJECT_SUFFIX}"


def record_relpath(key: str) -> str:
    return f"{RECORDS_DIR}/{key}{JSON_SUFFIX}"


def identity_relpath(digest: str) -> str:
    return f"{IDENTITIES_DIR}/{digest}{JSON_SUFFIX}"


def bundle_object_name(sha: str) -> str:
    """Bundle member name of an object (flat: a bundle holds few objects)."""
    return f"{OBJECTS_DIR}/{sha}{OBJECT_SUFFIX}"


def bundle_record_name(key: str) -> str:
    return f"{RECORDS_DIR}/{key}{JSON_SUFFIX}"


def bundle_identity_name(digest: str) -> str:
    return f"{IDENTITIES_DIR}/{digest}{JSON_SUFFIX}"


def bundle_manifest_name(file_name: str) -> str:
    return f"{MANIFESTS_DIR}/{file_name}"
