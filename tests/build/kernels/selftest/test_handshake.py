"""The handshake self-test kernels through the real compile chain (CuTe DSL -> PTX -> ABI -> ptxas),
as `gcmoe-build` builds them from manifests/test-tiny.yaml: roles, schema, memory-order PTX, and that
the ABI pass fails closed when the protocol instructions are missing."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from gcmoe_build import compile as comp
from gcmoe_build.abi import rewrite_by_value
from gcmoe_build.abi.ptx import AbiRewriteError
from gcmoe_build.kernels import build_kernel, has_kernel
from gcmoe_build.kernels.selftest import handshake
from gcmoe_build.manifest.loader import load_manifest
from gcmoe_build.variants import enumerate_variants
from gcmoe_runtime.workspace import layout as L
from gcmoe_runtime.workspace.trap import TRAP_MAGIC

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def variants():
    vs = [v for v in enumerate_variants(load_manifest(ROOT / "manifests/test-tiny.yaml")) if v.role in handshake.ROLES]
    assert sorted(v.role for v in vs) == sorted(handshake.ROLES)
    return {v.role: v for v in vs}


@pytest.fixture(scope="module")
def artifacts(variants):
    return {r: comp.compile_variant(v) for r, v in variants.items()}


def test_registered():
    assert all(has_kernel(r) for r in handshake.ROLES)


def test_schema_is_four_u64_scalars_and_stable_names(artifacts):
    for role, art in artifacts.items():
        rec = art.record
        assert rec.kernel_name == f"{role}_0"
        assert [(p.name, p.kind, p.offset) for p in rec.params] == [
            ("ws", "u64", 0), ("err", "u64", 8), ("timeout_ns", "u64", 16), ("work_ns", "u64", 24)]
        assert rec.launch.block == (32, 1, 1) and rec.launch.grid == "fixed:1"
        assert art.cubin[:4] == b"\x7fELF"


def test_memory_order_protocol_in_ptx(artifacts):
    prod, cons, fin = (artifacts[r].ptx for r in handshake.ROLES)
    assert "st.release.gpu.global.u32" in prod and "ld.acquire" not in prod
    assert "ld.acquire.gpu.global.u32" in cons and "trap;" in cons and "%globaltimer" in cons
    assert "st.relaxed.sys.u32" in cons and "fence.sc.sys" in cons  # trap record reaches host memory first
    assert f" {TRAP_MAGIC};" in cons  # the trap record magic, as a PTX immediate
    assert "ld.acquire.gpu.global.u32" in fin and "st.release.gpu.global.u32" in fin
    # the counter/generation words are the layout's: producer releases word SELFTEST_COUNTER (offset 0)
    assert re.search(r"st\.release\.gpu\.global\.u32 \[%rd\d+\]", prod)
    assert L.SELFTEST_PAYLOAD + L.SELFTEST_PAYLOAD_WORDS <= L.SELFTEST_WORDS


def test_abi_fails_closed_without_the_acquire(variants):
    from gcmoe_build.frontend import trace_to_ptx

    kb = build_kernel(variants["selftest_handshake_consumer"])
    front = trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, "sm_90a")
    broken = front.ptx.replace("ld.acquire.gpu.global.u32", "ld.relaxed.gpu.global.u32")
    with pytest.raises(AbiRewriteError, match="ld.acquire.gpu.global.u32"):
        rewrite_by_value(broken, front.entry_name, kb.abi)


def test_unknown_role_refused():
    class V:
        role, arch, params = "selftest_handshake_bogus", "sm_90a", {}

    with pytest.raises(ValueError, match="unknown self-test role"):
        handshake.build(V())
