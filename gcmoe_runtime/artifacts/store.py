"""Content-addressed artifact store: zstd objects by sha256, artifact records by variant key,
compiler identity records by digest (layout in ``layout.py``).

Writes are crash-safe: each file goes to a temporary name in its final directory, is fsynced and
renamed into place (``os.replace`` is atomic), then the directory is fsynced. An object is written
before the record naming it, so a visible record always has its object. Two processes writing the
same key or object race harmlessly: both write complete files and the last rename wins.
Reads decompress and verify the sha256 of the raw bytes; a mismatch is a ``StoreCorruption``.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import zstandard

from gcmoe_runtime.artifacts import layout
from gcmoe_runtime.artifacts.record import ArtifactRecord, canonical_json, sha256_hex


class StoreError(Exception):
    """Base class for store errors."""


class UnknownKey(StoreError, KeyError):
    """No record / object / identity under the requested name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class StoreCorruption(StoreError):
    """A stored file does not match its name (hash) or cannot be parsed."""


def _fsync_dir(path: Path) -> None:
    # The rename is only durable once the directory entry is on disk.
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either nothing or the whole file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{layout.TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex}-{path.name}"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def compress(data: bytes) -> bytes:
    """The store's zstd frame for ``data`` (fixed level, content size and checksum in the frame)."""
    return zstandard.ZstdCompressor(level=layout.ZSTD_LEVEL, write_checksum=True).compress(data)


def decompress_verified(frame: bytes, sha: str, what: str) -> bytes:
    """Decompress one object frame and check its raw sha256 equals ``sha``."""
    try:
        data = zstandard.ZstdDecompressor().decompress(frame)
    except zstandard.ZstdError as e:
        raise StoreCorruption(f"{what}: not a valid zstd frame ({e})") from None
    got = sha256_hex(data)
    if got != sha:
        raise StoreCorruption(f"{what}: content sha256 {got} != expected {sha}")
    return data


def _check_hex(name: str, value: str) -> None:
    if not isinstance(value, str) or not layout.HEX64.match(value):
        raise StoreError(f"{name} must be 64 lowercase hex digits, got {value!r}")


class Store:
    """A store rooted at ``root`` (created on first write)."""

    def __init__(self, root: str | os.PathLike[str] = layout.DEFAULT_STORE_ROOT) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    # -- objects -------------------------------------------------------------------------
    def object_path(self, sha: str) -> Path:
        return self.root / layout.object_relpath(sha)

    def has_object(self, sha: str) -> bool:
        return self.object_path(sha).is_file()

    def put_object(self, data: bytes) -> str:
        """Store ``data``; returns its sha256. A present, intact object is not rewritten; a damaged one is."""
        sha = sha256_hex(data)
        path = self.object_path(sha)
        if path.is_file():
            try:
                decompress_verified(path.read_bytes(), sha, str(path))
                return sha
            except (StoreCorruption, FileNotFoundError):
                pass  # a damaged object is replaced by the good bytes we have in hand
        atomic_write(path, compress(data))
        return sha

    def object_frame(self, sha: str) -> bytes:
        """The stored (compressed) bytes of an object, unverified; bundles copy these verbatim."""
        _check_hex("object sha256", sha)
        try:
            return self.object_path(sha).read_bytes()
        except FileNotFoundError:
            raise UnknownKey(f"no object {sha} in store {self.root}") from None

    def get_object(self, sha: str) -> bytes:
        return decompress_verified(self.object_frame(sha), sha, f"store object {self.object_path(sha)}")

    # -- compiler identities -------------------------------------------------------------
    def identity_path(self, digest: str) -> Path:
        return self.root / layout.identity_relpath(digest)

    def has_identity(self, digest: str) -> bool:
        return self.identity_path(digest).is_file()

    def put_identity(self, digest: str, identity: dict[str, Any]) -> None:
        _check_hex("identity digest", digest)
        path = self.identity_path(digest)
        data = canonical_json(identity)
        if path.is_file() and path.read_bytes() == data:
            return
        atomic_write(path, data)

    def get_identity(self, digest: str) -> dict[str, Any]:
        _check_hex("identity digest", digest)
        path = self.identity_path(digest)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise UnknownKey(f"no compiler identity {digest} in store {self.root}") from None
        return json_object(raw, f"identity {path}")

    # -- records -------------------------------------------------------------------------
    def record_path(self, key: str) -> Path:
        return self.root / layout.record_relpath(key)

    def has_record(self, key: str) -> bool:
        return self.record_path(key).is_file()

    def put_record(self, record: ArtifactRecord) -> None:
        """Publish ``record``. Its cubin object and identity must already be stored."""
        _check_hex("variant key", record.key)
        if not self.has_object(record.cubin_sha256):
            raise StoreError(
                f"record {record.key}: cubin object {record.cubin_sha256} is not in the store; "
                "objects must be written before the records that name them"
            )
        if not self.has_identity(record.compiler_identity):
            raise StoreError(
                f"record {record.key}: compiler identity {record.compiler_identity} is not in the store"
            )
        atomic_write(self.record_path(record.key), canonical_json(record.to_json()))

    def get_record(self, key: str) -> ArtifactRecord:
        _check_hex("variant key", key)
        path = self.record_path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise UnknownKey(f"no artifact record with key {key} in store {self.root}") from None
        try:
            record = ArtifactRecord.from_json(json_object(raw, f"record {path}"))
        except (TypeError, ValueError, KeyError) as e:
            raise StoreCorruption(f"record {path}: malformed ({e})") from None
        if record.key != key:
            raise StoreCorruption(f"record {path}: holds key {record.key}, not {key}")
        return record

    def put_artifact(
        self, record: ArtifactRecord, cubin: bytes, identity: dict[str, Any], ptx: bytes | None = None
    ) -> None:
        """Store one compiled variant: objects and identity first, the record last."""
        if sha256_hex(cubin) != record.cubin_sha256:
            raise StoreError(f"record {record.key}: cubin_sha256 does not match the cubin given")
        if ptx is not None:
            if sha256_hex(ptx) != record.ptx_sha256:
                raise StoreError(f"record {record.key}: ptx_sha256 does not match the PTX given")
            self.put_object(ptx)
        self.put_object(cubin)
        self.put_identity(record.compiler_identity, identity)
        self.put_record(record)

    def keys(self) -> list[str]:
        """All published variant keys, sorted."""
        d = self.root / layout.RECORDS_DIR
        if not d.is_dir():
            return []
        return sorted(
            p.name[: -len(layout.JSON_SUFFIX)]
            for p in d.iterdir()
            if p.name.endswith(layout.JSON_SUFFIX) and layout.HEX64.match(p.name[: -len(layout.JSON_SUFFIX)])
        )

    def records(self) -> Iterator[ArtifactRecord]:
        for key in self.keys():
            yield self.get_record(key)

    def resolve_key(self, prefix: str) -> str:
        """The one key starting with ``prefix`` (at least 6 hex digits), for humans typing keys."""
        prefix = prefix.strip().lower()
        if layout.HEX64.match(prefix):
            if not self.has_record(prefix):
                raise UnknownKey(f"no artifact record with key {prefix} in store {self.root}")
            return prefix
        if len(prefix) < 6 or any(c not in "0123456789abcdef" for c in prefix):
            raise UnknownKey(f"{prefix!r} is not a variant key (64 hex digits, or a unique prefix of >= 6)")
        hits = [k for k in self.keys() if k.startswith(prefix)]
        if not hits:
            raise UnknownKey(f"no artifact record with key starting {prefix!r} in store {self.root}")
        if len(hits) > 1:
            raise UnknownKey(f"key prefix {prefix!r} is ambiguous: {', '.join(h[:16] for h in hits[:5])} ...")
        return hits[0]

    # -- maintenance ---------------------------------------------------------------------
    def size_bytes(self) -> int:
        """Bytes on disk of all published files (objects, records, identities)."""
        if not self.root.is_dir():
            return 0
        return sum(
            p.stat().st_size
            for p in self.root.rglob("*")
            if p.is_file() and not p.name.startswith(layout.TEMP_PREFIX)
        )

    def remove_stale_temp(self, max_age_s: float = 3600.0) -> list[Path]:
        """Delete temporary files left by crashed writers (older than ``max_age_s``)."""
        removed: list[Path] = []
        if not self.root.is_dir():
            return removed
        now = time.time()
        for p in self.root.rglob(f"{layout.TEMP_PREFIX}*"):
            try:
                if now - p.stat().st_mtime > max_age_s:
                    p.unlink()
                    removed.append(p)
            except FileNotFoundError:
                pass
        return removed


def json_object(raw: bytes, what: str, error: type[Exception] = StoreCorruption) -> dict[str, Any]:
    """``raw`` parsed as a JSON object, else ``error`` naming ``what`` (store files and bundle members)."""
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(f"{what}: not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise error(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj
