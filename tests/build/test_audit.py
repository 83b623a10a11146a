"""Audit logic with a fast fake chain: identical rebuilds, non-reproducible cubins/PTX, identity
field differences, variants the bundled manifests no longer produce, damaged bundles.
(The real chain is audited in test_cli.py's end-to-end test.)"""
from __future__ import annotations

import dataclasses
import io
import sys
from pathlib import Path

import pytest

from gcmoe_runtime.artifacts.bundle import BundleError, write_bundle
from gcmoe_runtime.artifacts.store import Store

from gcmoe_build import pipeline
from gcmoe_build.audit import audit_bundle, flatten, identity_diff

sys.path.insert(0, str(Path(__file__).parent))
from fake_backend import FakeBackend, write_manifest  # noqa: E402

VARIANTS = [{"role": "role1", "BM": 64}, {"role": "role2", "BM": 64}, {"role": "role3"}]


@pytest.fixture
def bundle(tmp_path):
    m = write_manifest(tmp_path / "tiny.json", VARIANTS)
    store = Store(tmp_path / "store")
    backend = FakeBackend()
    pipeline.run([m], store, jobs=1, backend=backend, progress=False)
    keys, _, _ = pipeline.bundle_plan([m], store, backend=backend)
    out = tmp_path / "tiny.bundle"
    write_bundle(out, store, keys, {m.name: m.read_bytes()})
    return out


def _audit(path, backend):
    return audit_bundle(path, jobs=1, backend=backend, stream=io.StringIO())


def test_identical(bundle):
    report = _audit(bundle, FakeBackend())
    assert report.ok, report.text()
    assert [v.identical for v in report.variants] == [True, True]
    assert "byte-identical: 2/2" in report.text()
    assert "identical to this machine's, field by field" in report.text()


def test_nonreproducible_cubin_same_identity(bundle):
    report = _audit(bundle, FakeBackend(salt=b"\x01"))
    assert not report.ok
    text = report.text()
    assert text.count("DIFFERS") == 2 and "cubin differs" in text
    assert "PTX is identical: the difference arises in the assembler" in text
    assert "compiler identity is identical: the build is not reproducible" in text
    assert "NOT reproducible: 2 of 2" in text


def test_ptx_difference_is_named(bundle):
    report = _audit(bundle, FakeBackend(ptx_salt="x"))
    assert not report.ok and "PTX differs" in report.text() and "artifact record differs in: ptx_sha256" in report.text()


def test_identity_field_differs(bundle):
    other = FakeBackend(identity_fields={"ptxas": {"sha256": "2" * 64, "version": "13.4.59"}, "dsl": "4.8.1"})
    report = _audit(bundle, other)
    assert not report.ok
    text = report.text()
    assert "1 field(s) differ" in text and "ptxas.sha256: recorded '1111" in text
    # the fake's cubins do not depend on the identity: identical bytes, but the audit still fails
    assert "cubin byte-identical despite the identity difference" in text
    assert "NOT reproducible: 0 of 2 variants differ (no cubin differs, but the compiler identity does)" in text
    # with different bytes too, each variant lists the identity field
    text = _audit(bundle, dataclasses.replace(other, salt=b"x")).text()
    assert "identity fields that differ: ptxas.sha256" in text and "cubin differs" in text
    assert "artifact record differs in: cubin_sha256" in text and "key" not in text.split("artifact record differs in:")[1].split("\n")[0]


def test_host_only_identity_field_is_not_a_difference(bundle):
    report = _audit(bundle, FakeBackend(identity_fields={**FakeBackend().identity_fields, "host_path": "/elsewhere/ptxas"}))
    assert report.ok, report.text()
    assert "host-only fields differ" in report.text() and "host_path" in report.text()


def test_variant_not_produced_by_manifest(tmp_path, bundle):
    class Fewer(FakeBackend):
        def variants_of(self, path):
            return [v for v in super().variants_of(path) if v.role != "role2"]

    report = _audit(bundle, Fewer())
    assert not report.ok
    assert "not produced by the bundled manifests" in report.text()


def test_damaged_bundle_is_refused(bundle):
    blob = bytearray(bundle.read_bytes())
    blob[600] ^= 1  # inside BUNDLE.json's data
    bundle.write_bytes(bytes(blob))
    with pytest.raises(BundleError, match="BUNDLE.json"):
        _audit(bundle, FakeBackend())


def test_flatten_and_diff():
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": "x"}) == {"a.b": 1, "a.c": [1, 2], "d": "x"}
    assert identity_diff({"a": {"b": 1}}, {"a": {"b": 2}, "e": 3}) == [("a.b", 1, 2), ("e", "<absent>", 3)]


def test_a_bundle_names_its_own_manifest_for_a_variant_another_manifest_compiled(tmp_path):
    """A store shared by two manifests (a rank share reuses its model's role4 variants): the shared variant's store
    record names the manifest that compiled it first. The bundle of the other manifest alone names itself in that
    record (``bundle_plan``'s ``manifest_of``) and audits clean; without it the audit rebuilds under another name."""
    a = write_manifest(tmp_path / "a.json", [{"role": "role1", "BM": 64}, {"role": "role2", "BM": 64}])
    b = write_manifest(tmp_path / "b.json", [{"role": "role2", "BM": 64}, {"role": "role2", "BM": 128}])
    store, backend = Store(tmp_path / "store"), FakeBackend()
    pipeline.run([a, b], store, jobs=1, backend=backend, progress=False)
    keys, _, manifest_of = pipeline.bundle_plan([b], store, backend=backend)
    assert {store.get_record(k).manifest for k in keys} == {"a.json", "b.json"}  # the shared one compiled by a
    named, plain = tmp_path / "b.bundle", tmp_path / "b-plain.bundle"
    write_bundle(named, store, keys, {b.name: b.read_bytes()}, manifest_of)
    write_bundle(plain, store, keys, {b.name: b.read_bytes()})
    from gcmoe_runtime.artifacts.bundle import open_bundle
    assert {r.manifest for r in open_bundle(named).records} == {"b.json"}
    assert _audit(named, backend).ok
    report = _audit(plain, backend)
    assert not report.ok and "artifact record differs in: manifest" in report.text()
    # both manifests in one bundle: the shared record names the first, and the audit rebuilds it as that one plans it
    keys2, _, manifest_of2 = pipeline.bundle_plan([a, b], store, backend=backend)
    both = tmp_path / "ab.bundle"
    write_bundle(both, store, keys2, {a.name: a.read_bytes(), b.name: b.read_bytes()}, manifest_of2)
    assert _audit(both, backend).ok
