"""Bundles: round trip, determinism, and rejection of every kind of damage before anything loads."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gcmoe_runtime.artifacts import bundle as B
from gcmoe_runtime.artifacts import layout
from gcmoe_runtime.artifacts.bundle import BundleError, VariantNotInBundle, open_bundle, render_bundle, write_bundle
from gcmoe_runtime.artifacts.record import canonical_json, sha256_hex
from gcmoe_runtime.artifacts.store import Store, compress

sys.path.insert(0, str(Path(__file__).parent))
from artifact_fakes import IDENTITY, IDENTITY_DIGEST, three_artifacts  # noqa: E402

MANIFESTS = {"test-tiny.yaml": b"# verbatim, comments kept\nmodel: tiny\n"}


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store")
    for rec, cubin, ptx in three_artifacts():
        s.put_artifact(rec, cubin, IDENTITY, ptx=ptx)
    return s


@pytest.fixture
def bundle_path(tmp_path, store):
    out = tmp_path / "b.gcmoe"
    write_bundle(out, store, store.keys(), MANIFESTS)
    return out


def test_roundtrip(bundle_path, store):
    b = open_bundle(bundle_path)
    assert [r.key for r in b.records] == store.keys()
    for rec, cubin, _ in three_artifacts():
        assert b.cubin(rec.key) == cubin
        assert b.record(rec.key) == rec
    assert dict(b.identity) == IDENTITY
    assert dict(b.manifests) == MANIFESTS
    assert b.find("role1", BM=128).variant == {"BM": 128, "P": 2}
    assert b.find("role2", arch="sm_90a", P=2).role == "role2"
    assert b.top_hash == json.loads(B._unpack(bundle_path.read_bytes(), "x")[0][1])["top_hash"]
    assert open_bundle(bundle_path, expected_top_hash=b.top_hash).top_hash == b.top_hash
    # ptx objects stay in the store: the bundle carries only cubins
    names = [n for n, _ in B._unpack(bundle_path.read_bytes(), "x")]
    assert not any(three_artifacts()[0][0].ptx_sha256 in n for n in names)
    assert names[0] == layout.BUNDLE_INDEX_NAME and names[1:] == sorted(names[1:])


def test_is_a_standard_tar(bundle_path):
    import tarfile

    with tarfile.open(bundle_path) as tf:
        assert tf.getnames()[0] == "BUNDLE.json"
        assert all(m.mtime == 0 and m.uid == 0 and m.mode == 0o644 for m in tf.getmembers())


def test_deterministic(tmp_path, store):
    a, b = tmp_path / "a", tmp_path / "b"
    write_bundle(a, store, store.keys(), MANIFESTS)
    # another store filled in another order, keys given in another order
    other = Store(tmp_path / "other")
    for rec, cubin, _ in reversed(three_artifacts()):
        other.put_artifact(rec, cubin, IDENTITY)
    write_bundle(b, other, list(reversed(other.keys())), dict(reversed(list(MANIFESTS.items()))))
    assert a.read_bytes() == b.read_bytes()


def test_find_missing_variant_names_manifest_entry(bundle_path):
    b = open_bundle(bundle_path)
    with pytest.raises(VariantNotInBundle, match=r"no variant role='role1' BM=256.*BM=256 \(bundle has 128, 64\).*test-tiny.yaml"):
        b.find("role1", BM=256)
    with pytest.raises(VariantNotInBundle, match=r"P=8 \(bundle has 2\).*P=8 -> the entry that sets P"):
        b.find("role1", BM=64, P=8)
    with pytest.raises(VariantNotInBundle, match="no 'role3' kernels at all"):
        b.find("role3", BM=64)
    # a parameter the bundled records predate (e.g. role2's ctas_per_sm in a bundle built before session 6)
    with pytest.raises(VariantNotInBundle, match=r"ctas_per_sm=2 \(bundle has no such parameter\)"):
        b.find("role1", BM=64, P=2, ctas_per_sm=2)
    with pytest.raises(BundleError, match="2 variants match.*BM"):
        b.find("role1", P=2)
    with pytest.raises(VariantNotInBundle):
        b.cubin("f" * 64)


def _every_member_span(blob: bytes):
    """(name, header offset, data offset, size) for each member."""
    off, out = 0, []
    for name, data in B._unpack(blob, "x"):
        out.append((name, off, off + 512, len(data)))
        off += 512 + len(data) + (-len(data)) % 512
    return out


def test_flipped_byte_in_any_member_names_it(bundle_path):
    blob = bundle_path.read_bytes()
    spans = _every_member_span(blob)
    assert len(spans) == 1 + 3 * 2 + 1 + 1  # index, 3 records + 3 objects, identity, manifest
    for name, _, data_off, size in spans:
        for where in (data_off, data_off + size // 2, data_off + size - 1):
            bad = bytearray(blob)
            bad[where] ^= 0x01
            bundle_path.write_bytes(bytes(bad))
            with pytest.raises(BundleError, match=repr(name).replace(".", r"\.")):
                open_bundle(bundle_path)


def test_flipped_byte_in_header_padding_or_end(bundle_path):
    blob = bundle_path.read_bytes()
    spans = _every_member_span(blob)
    name, hdr, data_off, size = spans[3]
    cases = {
        hdr + 5: "header|corrupt",  # name field
        hdr + 140: "header",  # mtime field
        data_off + size + 1: "padding",
        len(blob) - 1: "end-of-archive",
    }
    for where, msg in cases.items():
        bad = bytearray(blob)
        bad[where] ^= 0x20
        bundle_path.write_bytes(bytes(bad))
        with pytest.raises(BundleError, match=msg):
            open_bundle(bundle_path)


@pytest.mark.parametrize("keep", [0, 100, 512, 3000, -10240, -1024, -1])
def test_truncated(bundle_path, keep):
    blob = bundle_path.read_bytes()
    bundle_path.write_bytes(blob[:keep] if keep >= 0 else blob[:keep])
    with pytest.raises(BundleError, match="empty|truncated|multiple of"):
        open_bundle(bundle_path)


def test_truncated_at_record_boundary(tmp_path, store):
    # cut the file right after a member, then pad to a legal size: a member goes missing
    out = tmp_path / "b"
    write_bundle(out, store, store.keys(), MANIFESTS)
    blob = out.read_bytes()
    name, hdr, _, _ = _every_member_span(blob)[-1]
    cut = blob[:hdr] + b"\0" * 1024
    cut += b"\0" * ((-len(cut)) % 10240)
    out.write_bytes(cut)
    with pytest.raises(BundleError, match=f"member '{name}' listed in BUNDLE.json is missing"):
        open_bundle(out)


def _members(store):
    recs = [store.get_record(k) for k in store.keys()]
    frames = {r.cubin_sha256: store.object_frame(r.cubin_sha256) for r in recs}
    return recs, frames


def test_missing_object(tmp_path, store):
    recs, frames = _members(store)
    del frames[recs[0].cubin_sha256]
    out = tmp_path / "b"
    out.write_bytes(render_bundle(recs, frames, {IDENTITY_DIGEST: IDENTITY}, MANIFESTS))
    with pytest.raises(BundleError, match=f"record {recs[0].key}.*cubin object 'objects/{recs[0].cubin_sha256}.zst' is missing"):
        open_bundle(out)


def test_missing_identity(tmp_path, store):
    recs, frames = _members(store)
    out = tmp_path / "b"
    out.write_bytes(render_bundle(recs, frames, {}, MANIFESTS))
    with pytest.raises(BundleError, match="compiler identity member .* is missing"):
        open_bundle(out)


def test_extra_members(tmp_path, store):
    recs, frames = _members(store)
    stray = b"not referenced"
    frames2 = {**frames, sha256_hex(stray): compress(stray)}
    out = tmp_path / "b"
    out.write_bytes(render_bundle(recs, frames2, {IDENTITY_DIGEST: IDENTITY}, MANIFESTS))
    with pytest.raises(BundleError, match="not used by any record"):
        open_bundle(out)
    # a member appended to the container but not listed in the index
    good = render_bundle(recs, frames, {IDENTITY_DIGEST: IDENTITY}, MANIFESTS)
    members = B._unpack(good, "x")
    out.write_bytes(B._pack([*members, ("manifests/zz.yaml", b"x: 1\n")]))
    with pytest.raises(BundleError, match="'manifests/zz.yaml' is not listed"):
        open_bundle(out)
    out.write_bytes(B._pack([*members, ("evil/../x", b"")]))
    with pytest.raises(BundleError, match="evil"):
        open_bundle(out)


def test_wrong_top_hash(tmp_path, bundle_path):
    members = B._unpack(bundle_path.read_bytes(), "x")
    idx = json.loads(members[0][1])
    idx["top_hash"] = "0" * 64
    bundle_path.write_bytes(B._pack([("BUNDLE.json", canonical_json(idx)), *members[1:]]))
    with pytest.raises(BundleError, match="top hash .* does not match its member list"):
        open_bundle(bundle_path)
    with pytest.raises(BundleError, match="!= expected"):
        good = tmp_path / "good"
        good.write_bytes(B._pack(members))
        open_bundle(good, expected_top_hash="1" * 64)


def test_consistently_forged_member_caught_by_object_hash(tmp_path, store):
    # rewrite an object AND its index entry (and top hash): the object's own name still fails
    recs, frames = _members(store)
    frames[recs[0].cubin_sha256] = compress(b"\x7fELF forged")
    out = tmp_path / "b"
    out.write_bytes(render_bundle(recs, frames, {IDENTITY_DIGEST: IDENTITY}, MANIFESTS))
    with pytest.raises(BundleError, match=f"objects/{recs[0].cubin_sha256}.zst.*content sha256"):
        open_bundle(out)


def test_not_a_bundle(tmp_path):
    with pytest.raises(BundleError, match="no such bundle"):
        open_bundle(tmp_path / "nope")
    p = tmp_path / "junk"
    p.write_bytes(b"\x01" * 10240)
    with pytest.raises(BundleError, match="corrupt member header"):
        open_bundle(p)


def test_writer_rejects_bad_manifest_name(tmp_path, store):
    with pytest.raises(BundleError, match="manifest file name"):
        write_bundle(tmp_path / "b", store, store.keys(), {"../escape.yaml": b""})
    assert not (tmp_path / "b").exists()


def test_reader_has_runtime_dependencies_only(bundle_path):
    code = (
        "import sys; from gcmoe_runtime.artifacts.bundle import open_bundle; "
        f"b = open_bundle({str(bundle_path)!r}); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pydantic', 'click', 'cutlass', 'cuda', 'gcmoe_build')]; "
        "assert not bad, bad; print(len(b.records))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[3])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"
