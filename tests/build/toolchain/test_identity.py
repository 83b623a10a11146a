"""Compiler identity: the record's fields, a digest free of host paths, and source hashes that
follow exactly the kernel sources and what they import."""
from __future__ import annotations

import copy
import json
import re
import shutil

import pytest

from gcmoe_build.toolchain import identity as ident


@pytest.fixture(scope="module")
def record_and_digest():
    got = ident.compiler_identity("sm_90a")
    return got.record, got.digest


def test_record_fields(record_and_digest):
    rec, digest = record_and_digest
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert rec["arch"] == "sm_90a"
    assert rec["options"] == ["--gpu-name", "sm_90a", "-O3"]
    assert set(rec["ptxas"]) == {"size", "version", "sha256", "package"}  # no host path: bundles are portable
    assert str(ident.REPO_ROOT) not in json.dumps(rec) and "/.venv/" not in json.dumps(rec)
    assert rec["ptxas"]["version"] == "13.4.59"
    dsl = rec["dsl"]
    assert (dsl["version"], dsl["flavor"], dsl["cuda_version"]) == ("4.8.1", "cu13", "13.4")
    assert re.fullmatch(r"[0-9a-f]{64}", dsl["frontend_hash"])
    assert dsl["settings"]["arch"] == "sm_90a" and dsl["settings"]["lineinfo"] is False
    assert dsl["compile_options"] == ["--gpu-arch", "sm_90a"]
    assert not dsl["settings"]["shared_libs"].startswith("/")  # no host path
    assert rec["kernel_sources"] == ident.kernel_source_hash()
    assert rec["pipeline_sources"] == ident.pipeline_source_hash()


def test_digest_is_stable_and_ignores_host_paths(record_and_digest):
    rec, digest = record_and_digest
    assert ident.compiler_identity("sm_90a").digest == digest
    moved = copy.deepcopy(rec)
    moved["ptxas"]["path"] = "/elsewhere/bin/ptxas"  # as records written before session 4 carried it
    assert ident.identity_digest(moved) == digest
    for section, field, value in [("ptxas", "sha256", "0" * 64), ("dsl", "version", "4.8.0"),
                                  (None, "kernel_sources", "x"), (None, "options", ["--gpu-name", "sm_90a", "-O2"])]:
        changed = copy.deepcopy(rec)
        (changed[section] if section else changed)[field] = value
        assert ident.identity_digest(changed) != digest, field
        assert ident.diff_identity(rec, changed) == [f"{section}.{field}" if section else field]


def test_other_arch_other_digest(record_and_digest):
    other = ident.compiler_identity("sm_100a")
    assert other.record["options"][:2] == ["--gpu-name", "sm_100a"]
    assert other.digest != record_and_digest[1]
    ident.compiler_identity("sm_90a")  # leave the DSL pinned to sm_90a for later tests


def test_kernel_source_closure_follows_imports():
    files = ident.kernel_source_files()
    for must in ("gcmoe_build/kernels/__init__.py", "gcmoe_build/kernels/selftest/tma_peer.py",
                 "gcmoe_build/kernels/common/peer.py", "gcmoe_build/kernels/common/device.py",
                 "gcmoe_runtime/abi.py",  # imported by kernels/common/peer.py
                 "gcmoe_runtime/artifacts/record.py"):  # imported by the kernel registry
        assert must in files, must
    assert "gcmoe_build/compile.py" not in files
    assert "gcmoe_build/pipeline.py" not in files


def test_source_hash_changes_with_imported_module_only(tmp_path, monkeypatch):
    for pkg in ("gcmoe_build", "gcmoe_runtime"):
        shutil.copytree(ident.REPO_ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(ident, "REPO_ROOT", tmp_path)
    before = ident.kernel_source_hash()
    assert before == ident.kernel_source_hash()
    # a module the kernels do not import: no effect
    (tmp_path / "gcmoe_build" / "compile.py").write_text("# changed\n")
    assert ident.kernel_source_hash() == before
    # a module they import (via kernels/common/peer.py): the hash changes
    abi = tmp_path / "gcmoe_runtime" / "abi.py"
    abi.write_text(abi.read_text() + "\n# changed\n")
    after = ident.kernel_source_hash()
    assert after != before
    # a new kernel file: the hash changes again
    (tmp_path / "gcmoe_build" / "kernels" / "selftest" / "new_kernel.py").write_text("X = 1\n")
    assert ident.kernel_source_hash() != after


def test_frontend_hash_ignores_installation_specific_files():
    """Two installs of the same DSL wheel (different venv paths, installed by name or as a dependency) must give
    the same identity: console scripts (their shebang holds the venv's interpreter path) and pip's bookkeeping are
    not part of the hash."""
    from pathlib import PurePosixPath

    from gcmoe_build.toolchain.identity import _installation_specific

    for p in ("../../../bin/run-iket", "nvidia_cutlass_dsl-4.8.1.dist-info/REQUESTED",
              "nvidia_cutlass_dsl-4.8.1.dist-info/RECORD", "cutlass/__pycache__/x.cpython-311.pyc"):
        assert _installation_specific(PurePosixPath(p)), p
    for p in ("cutlass/cute/__init__.py", "nvidia_cutlass_dsl-4.8.1.dist-info/METADATA", "cutlass/_mlir/lib.so"):
        assert not _installation_specific(PurePosixPath(p)), p
