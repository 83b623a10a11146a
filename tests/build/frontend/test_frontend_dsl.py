"""Frontend: the real DSL traces to PTX for the arch we name (never its default), with a stable
entry name, locked settings and a private dump directory."""
from __future__ import annotations

import re
import tempfile

import pytest

from gcmoe_build.frontend import dsl as fe
from gcmoe_build.kernels import build_kernel

from selftest_ptx import selftest_variant

fe.import_dsl("sm_90a")  # before importing the DSL: the arch must be set first
import cutlass  # noqa: E402  (the DSL re-reads kernel globals, so these must be module-level)
import cutlass.cute as cute  # noqa: E402


def test_trace_targets_the_named_arch_with_a_stable_name(selftest_build):
    kb, fr = selftest_build
    assert fr.entry_name == "gcmoe_selftest_tma_peer_0" == kb.kernel_name
    assert re.search(r"^\.target sm_90a$", fr.ptx, re.M)
    assert re.search(r"^\.version 9\.4$", fr.ptx, re.M)  # cu13 flavour: PTX ISA 9.4
    assert "NVVM" in fr.ptx and "V13.4.59" in fr.ptx
    assert re.findall(r"\.entry\s+(\w+)", fr.ptx) == ["gcmoe_selftest_tma_peer_0"]
    assert fr.dsl_settings["arch"] == "sm_90a"


def test_trace_is_deterministic(selftest_build):
    kb, fr = selftest_build
    again = fe.trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, "sm_90a")
    assert again.ptx == fr.ptx


def test_each_trace_gets_the_arch_it_asks_for():
    kb = build_kernel(selftest_variant("sm_100a"))
    fr = fe.trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, "sm_100a")
    assert re.search(r"^\.target sm_100a$", fr.ptx, re.M)
    kb = build_kernel(selftest_variant("sm_90a"))
    fr = fe.trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, "sm_90a")
    assert re.search(r"^\.target sm_90a$", fr.ptx, re.M)
    assert fe.import_dsl("sm_90a").envar.arch == "sm_90a"


def test_unsupported_arch_and_bad_prefix(selftest_build):
    kb, _ = selftest_build
    with pytest.raises(fe.FrontendError, match="sm_80"):
        fe.trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, "sm_80")
    with pytest.raises(fe.FrontendError, match="C identifier"):
        fe.trace_to_ptx(kb.host, kb.kernel, kb.args, "bad-name", "sm_90a")


def test_locked_dsl_settings_are_enforced(monkeypatch):
    dsl = fe.import_dsl("sm_90a")
    assert fe.dsl_settings(dsl, "sm_90a")["debug"] is False
    monkeypatch.setattr(dsl.envar, "lineinfo", True)
    with pytest.raises(fe.FrontendError, match="CUTE_DSL_LINEINFO"):
        fe.dsl_settings(dsl, "sm_90a")
    monkeypatch.undo()
    monkeypatch.setattr(dsl.envar, "compiler_opt", "remarks")
    with pytest.raises(fe.FrontendError, match="CUTE_DSL_COMPILER_OPT"):
        fe.dsl_settings(dsl, "sm_90a")
    monkeypatch.undo()
    monkeypatch.setattr(dsl.envar, "shared_libs", "/x/nvidia_cutlass_dsl/cu12/lib/libcute_dsl_runtime.so")
    with pytest.raises(fe.FrontendError, match="cu13 flavour"):
        fe.dsl_settings(dsl, "sm_90a")


def test_dump_directory_is_private_and_removed(selftest_build, tmp_path, monkeypatch):
    kb, _ = selftest_build
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fe.trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, "sm_90a")
    assert list(tmp_path.iterdir()) == []


def test_dsl_failure_names_the_kernel():
    @cute.kernel
    def broken(x: cutlass.Int64):
        cute.arch.this_function_does_not_exist()

    @cute.jit
    def host(x: cutlass.Int64):
        broken(x).launch(grid=(1, 1, 1), block=(32, 1, 1))

    with pytest.raises(fe.FrontendError, match="kernel 'gcmoe_test_broken'"):
        fe.trace_to_ptx(host, broken, (cutlass.Int64(0),), "gcmoe_test_broken", "sm_90a")


def test_two_kernels_in_one_trace_are_rejected():
    @cute.kernel
    def first(x: cutlass.Int64):
        pass

    @cute.kernel
    def second(x: cutlass.Int64):
        pass

    @cute.jit
    def host(x: cutlass.Int64):
        first(x).launch(grid=(1, 1, 1), block=(32, 1, 1))
        second(x).launch(grid=(1, 1, 1), block=(32, 1, 1))

    with pytest.raises(fe.FrontendError, match="exactly one entry"):
        fe.trace_to_ptx(host, first, (cutlass.Int64(0),), "gcmoe_test_two", "sm_90a")
