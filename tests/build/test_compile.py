"""compile_variant: the whole chain on the real selftest_tma_peer kernel (no GPU), its record, its
determinism, and the checks that stop a bad artifact."""
from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

from gcmoe_runtime.artifacts.record import ArtifactRecord, ParamSpec, sha256_hex

from gcmoe_build import compile as comp
from gcmoe_build.kernels import ROLES, UnknownRoleError, has_kernel
from gcmoe_build.toolchain import ToolchainOptionError, kernel_source_hash

sys.path.insert(0, str(Path(__file__).parent / "abi"))
from selftest_ptx import DuckVariant, selftest_variant  # noqa: E402


@pytest.fixture(scope="module")
def artifact():
    return comp.compile_variant(selftest_variant(tiles=2))


def test_record(artifact):
    v = selftest_variant(tiles=2)
    rec = artifact.record
    ident = comp.identity_for("sm_90a")
    assert rec.key == v.key(ident.digest, kernel_source_hash())
    assert (rec.role, rec.arch, rec.kernel_name) == ("selftest_tma_peer", "sm_90a", "gcmoe_selftest_tma_peer_0")
    assert rec.variant == {"tiles": 2} and rec.manifest == "tests"
    assert rec.compiler_identity == ident.digest
    assert rec.cubin_sha256 == sha256_hex(artifact.cubin) and rec.cubin_size == len(artifact.cubin)
    assert rec.ptx_sha256 == sha256_hex(artifact.ptx.encode())
    # offsets as the driver reports them (cuKernelGetParamInfo reads the cubin's KPARAM table)
    assert [(p.name, p.kind, p.size, p.offset) for p in rec.params] == [
        ("tma_a", "tensormap", 128, 48), ("peer", "peer_desc", 592, 176), ("out", "ptr", 8, 768),
        ("timeout_ns", "u64", 8, 776), ("rows", "s32", 4, 784)]
    assert rec.param_bytes() == 788
    assert rec.launch.block == (128, 1, 1) and rec.launch.grid == "fixed:2" and rec.launch.dynamic_smem > 4096
    assert [t.param for t in rec.tensormaps] == ["tma_a"] and rec.tensormaps[0].box == (64, 64)
    assert rec.extra["ptxas_options"] == ["--gpu-name", "sm_90a", "-O3"]
    assert rec.extra["abi_converted"] == ["peer"]
    assert ArtifactRecord.from_json(rec.to_json()) == rec
    assert set(artifact.timings) == {"build", "trace", "abi", "ptxas", "total"}


def test_compile_is_byte_identical(artifact):
    again = comp.compile_variant(selftest_variant(tiles=2))
    assert again.cubin == artifact.cubin and again.ptx == artifact.ptx and again.record == artifact.record


def test_variant_params_change_key_and_code(artifact):
    other = comp.compile_variant(selftest_variant(tiles=3))
    assert other.record.key != artifact.record.key
    assert other.record.launch.grid == "fixed:3"


def test_registry():
    assert ROLES["selftest_tma_peer"] == "gcmoe_build.kernels.selftest.tma_peer"
    assert has_kernel("selftest_tma_peer") and not has_kernel("no_such_role")
    with pytest.raises(UnknownRoleError, match="no kernel is registered for role 'no_such_role'"):
        comp.compile_variant(DuckVariant("no_such_role", "sm_90a", {}))


@pytest.mark.parametrize("tiles", [0, 2000, "2", True])
def test_bad_variant_param(tiles):
    with pytest.raises(ValueError, match=r"tiles=.*1\.\.1024"):
        comp.compile_variant(selftest_variant(tiles=tiles))


def test_kernel_options_outside_the_whitelist_are_rejected(monkeypatch):
    real = comp.build_kernel
    monkeypatch.setattr(comp, "build_kernel", lambda v: dataclasses.replace(real(v), ptxas_options=("-rdc",)))
    with pytest.raises(ToolchainOptionError, match="relocatable"):
        comp.compile_variant(selftest_variant())


def test_whitelisted_kernel_options_are_recorded(monkeypatch):
    real = comp.build_kernel
    opts = ("--register-usage-level=10",)
    monkeypatch.setattr(comp, "build_kernel", lambda v: dataclasses.replace(real(v), ptxas_options=opts))
    art = comp.compile_variant(selftest_variant())
    assert art.record.extra["ptxas_options"] == ["--gpu-name", "sm_90a", "-O3", "--register-usage-level=10"]


def test_cubin_checks(artifact):
    params = artifact.record.params
    name = artifact.record.kernel_name
    assert comp.check_cubin(artifact.cubin, name, params) == params
    with pytest.raises(comp.CompileError, match="stable name is missing"):
        comp.check_cubin(artifact.cubin, "gcmoe_other_0", params)
    with pytest.raises(comp.CompileError, match="schema has 4"):
        comp.check_cubin(artifact.cubin, name, params[:4])
    wrong = params[:1] + (dataclasses.replace(params[1], size=584),) + params[2:]
    with pytest.raises(comp.CompileError, match="has 592 bytes, schema says peer has 584"):
        comp.check_cubin(artifact.cubin, name, wrong)


def test_ptx_is_the_rewritten_one(artifact):
    assert re.search(r"\.param \.align 8 \.b8 gcmoe_selftest_tma_peer_0_p_peer\[592\]", artifact.ptx)


@pytest.mark.parametrize("swizzle", [32, 16, "128", None])
def test_bad_swizzle_param(swizzle):
    with pytest.raises(ValueError, match=r"swizzle=.*must be one of \[0, 64, 128\]"):
        comp.compile_variant(DuckVariant("selftest_tma_peer", "sm_90a", {"swizzle": swizzle}))
