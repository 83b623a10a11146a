"""Store: layout, verified reads, atomic writes under crashes and kills, concurrent writers."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import zstandard

from gcmoe_runtime.artifacts import layout
from gcmoe_runtime.artifacts.record import sha256_hex
from gcmoe_runtime.artifacts.store import Store, StoreCorruption, StoreError, UnknownKey

sys.path.insert(0, str(Path(__file__).parent))
from artifact_fakes import IDENTITY, IDENTITY_DIGEST, make_artifact, three_artifacts  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def visible_files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.startswith(layout.TEMP_PREFIX)
    )


def test_roundtrip_and_layout(tmp_path):
    store = Store(tmp_path / "s")
    rec, cubin, ptx = make_artifact()
    store.put_artifact(rec, cubin, IDENTITY, ptx=ptx)
    assert store.get_record(rec.key) == rec
    assert store.get_object(rec.cubin_sha256) == cubin
    assert store.get_object(rec.ptx_sha256) == ptx
    assert store.get_identity(IDENTITY_DIGEST) == IDENTITY
    obj = tmp_path / "s" / "objects" / rec.cubin_sha256[:2] / f"{rec.cubin_sha256}.zst"
    assert obj.is_file() and obj.stat().st_size < len(cubin)  # compressed
    assert zstandard.ZstdDecompressor().decompress(obj.read_bytes()) == cubin
    assert (tmp_path / "s" / "records" / f"{rec.key}.json").is_file()
    assert (tmp_path / "s" / "identities" / f"{IDENTITY_DIGEST}.json").is_file()
    assert store.keys() == [rec.key]
    assert store.size_bytes() == sum((tmp_path / "s" / f).stat().st_size for f in visible_files(tmp_path / "s"))
    assert not list((tmp_path / "s").rglob(f"{layout.TEMP_PREFIX}*"))


def test_unknown_key_and_bad_key(tmp_path):
    store = Store(tmp_path)
    with pytest.raises(UnknownKey, match="no artifact record with key"):
        store.get_record("c" * 64)
    with pytest.raises(StoreError, match="64 lowercase hex"):
        store.get_record("../../etc/passwd")
    with pytest.raises(UnknownKey, match="no object"):
        store.get_object("d" * 64)


def test_resolve_key_prefix(tmp_path):
    artifacts = three_artifacts()
    store = Store(tmp_path)
    for rec, cubin, _ in artifacts:
        store.put_artifact(rec, cubin, IDENTITY)
    key = artifacts[0][0].key
    assert store.resolve_key(key[:10]) == key
    assert store.resolve_key(key.upper()) == key
    with pytest.raises(UnknownKey, match="not a variant key"):
        store.resolve_key("abc")
    with pytest.raises(UnknownKey, match="no artifact record with key starting"):
        store.resolve_key("ffffffffffff" if not key.startswith("ffff") else "000000000000")


def test_reads_verify_content(tmp_path):
    store = Store(tmp_path)
    rec, cubin, _ = make_artifact()
    store.put_artifact(rec, cubin, IDENTITY)
    path = store.object_path(rec.cubin_sha256)
    # A valid zstd frame of other content under this name: caught by the sha256 check.
    path.write_bytes(zstandard.ZstdCompressor().compress(cubin[:-1] + b"X"))
    with pytest.raises(StoreCorruption, match="content sha256"):
        store.get_object(rec.cubin_sha256)
    # A damaged frame: caught by zstd.
    frame = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(cubin))
    frame[len(frame) // 2] ^= 0xFF
    path.write_bytes(bytes(frame))
    with pytest.raises(StoreCorruption, match=rec.cubin_sha256):
        store.get_object(rec.cubin_sha256)
    # A record file renamed under another key.
    other = "e" * 64
    store.record_path(rec.key).rename(store.record_path(other))
    # putting the good bytes again heals the damaged object
    store.put_object(cubin)
    assert store.get_object(rec.cubin_sha256) == cubin
    with pytest.raises(StoreCorruption, match="holds key"):
        store.get_record(other)
    store.record_path(other).write_bytes(b"{not json")
    with pytest.raises(StoreCorruption, match="not valid JSON"):
        store.get_record(other)


def test_record_requires_object_and_hashes(tmp_path):
    store = Store(tmp_path)
    rec, cubin, ptx = make_artifact()
    with pytest.raises(StoreError, match="objects must be written before"):
        store.put_record(rec)
    with pytest.raises(StoreError, match="cubin_sha256 does not match"):
        store.put_artifact(rec, cubin + b"x", IDENTITY)
    with pytest.raises(StoreError, match="ptx_sha256 does not match"):
        store.put_artifact(rec, cubin, IDENTITY, ptx=b"other")
    assert store.keys() == []


# -- crashes ---------------------------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, {repo!r}); sys.path.insert(0, {tests!r})
    from artifact_fakes import make_artifact, IDENTITY
    from gcmoe_runtime.artifacts import store as S
    mode = {mode!r}
    rec, cubin, ptx = make_artifact()
    real_replace, real_fsync = os.replace, os.fsync
    def replace(src, dst):
        # crash between the object write and the record write
        if mode == "before_record" and "/records/" in str(dst):
            os._exit(3)
        return real_replace(src, dst)
    def fsync(fd):
        real_fsync(fd)
        if mode == "in_object" and "/objects/" in os.readlink(f"/proc/self/fd/{{fd}}"):
            os._exit(3)  # the temp file is complete on disk but not renamed
        if mode == "kill" and "/objects/" in os.readlink(f"/proc/self/fd/{{fd}}"):
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            import time; time.sleep(60)
    os.replace, os.fsync = replace, fsync
    S.Store({root!r}).put_artifact(rec, cubin, IDENTITY, ptx=ptx)
    """
)


def _child(tmp_path: Path, mode: str) -> subprocess.Popen:
    code = CHILD.format(repo=str(REPO), tests=str(Path(__file__).parent), mode=mode, root=str(tmp_path / "s"))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to find the fd's path")
@pytest.mark.parametrize("mode", ["before_record", "in_object"])
def test_crash_leaves_nothing_half_visible(tmp_path, mode):
    proc = _child(tmp_path, mode)
    assert proc.wait(timeout=60) == 3
    store = Store(tmp_path / "s")
    rec, cubin, ptx = make_artifact()
    assert store.keys() == []
    assert not store.has_record(rec.key)
    for f in visible_files(tmp_path / "s"):
        # whatever is visible is complete and correct (objects before records)
        if f.startswith("objects/"):
            sha = Path(f).name[: -len(layout.OBJECT_SUFFIX)]
            assert store.get_object(sha) in (cubin, ptx)
    if mode == "in_object":
        assert not store.has_object(rec.cubin_sha256) or not store.has_object(rec.ptx_sha256)
        assert list((tmp_path / "s").rglob(f"{layout.TEMP_PREFIX}*"))  # the orphan temp file
    # a rerun completes the artifact; stale temp files are swept
    store.put_artifact(rec, cubin, IDENTITY, ptx=ptx)
    assert store.get_record(rec.key) == rec
    store.remove_stale_temp(max_age_s=0)
    assert not list((tmp_path / "s").rglob(f"{layout.TEMP_PREFIX}*"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to find the fd's path")
def test_sigkill_mid_write(tmp_path):
    proc = _child(tmp_path, "kill")
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    store = Store(tmp_path / "s")
    rec, _, _ = make_artifact()
    assert store.keys() == [] and not store.has_record(rec.key)
    for f in visible_files(tmp_path / "s"):
        assert not f.startswith("records/")
        if f.startswith("objects/"):
            store.get_object(Path(f).name[: -len(layout.OBJECT_SUFFIX)])  # complete and verified
    assert list((tmp_path / "s").rglob(f"{layout.TEMP_PREFIX}*"))


def _hammer(root: str, n: int) -> None:
    store = Store(root)
    rec, cubin, ptx = make_artifact()
    for _ in range(n):
        store.put_artifact(rec, cubin, IDENTITY, ptx=ptx)
        assert store.get_record(rec.key) == rec
        assert store.get_object(rec.cubin_sha256) == cubin


def test_concurrent_writers_same_key(tmp_path):
    root = str(tmp_path / "s")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(root, 30)) for _ in range(4)]
    for p in procs:
        p.start()
    store = Store(root)
    rec, cubin, _ = make_artifact()
    deadline = time.time() + 60
    while any(p.is_alive() for p in procs) and time.time() < deadline:
        if store.has_record(rec.key):  # a visible record is always whole, with its object
            assert store.get_record(rec.key) == rec
            assert store.get_object(rec.cubin_sha256) == cubin
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert store.keys() == [rec.key]
    assert not list(Path(root).rglob(f"{layout.TEMP_PREFIX}*"))


def test_remove_stale_temp_keeps_fresh(tmp_path):
    store = Store(tmp_path)
    d = tmp_path / "objects" / "ab"
    d.mkdir(parents=True)
    old, fresh = d / f"{layout.TEMP_PREFIX}old", d / f"{layout.TEMP_PREFIX}fresh"
    old.write_bytes(b"x")
    fresh.write_bytes(b"y")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert store.remove_stale_temp(max_age_s=3600) == [old]
    assert fresh.exists()
    assert sha256_hex(b"") not in store.keys()
