"""ABI plans are checked before any PTX is read; address derivations the rewrite follows
(unit-level, on a small PTX body in NVVM's shape, alongside the real-PTX tests)."""
from __future__ import annotations

import pytest

from gcmoe_runtime.artifacts.record import TensorMapEncoding

from gcmoe_build.abi import AbiPlan, AbiPlanError, AbiRewriteError, Formal, rewrite_by_value


def _enc(param="m"):
    return TensorMapEncoding(param=param, tensor="x", dtype="CU_TENSOR_MAP_DATA_TYPE_UINT8", rank=2,
                             box=(64, 64), element_strides=(1, 1))


@pytest.mark.parametrize("build,why", [
    (lambda: Formal("Bad-Name", "u32"), "lower-case identifier"),
    (lambda: Formal("x", "u128"), "unknown kind"),
    (lambda: Formal("m", "tensormap"), "TensorMapEncoding is required"),
    (lambda: Formal("x", "u64", _enc("x")), "TensorMapEncoding is required"),
    (lambda: Formal("m", "tensormap", _enc("other")), "names param 'other'"),
    (lambda: AbiPlan((Formal("a", "u32"), Formal("a", "u64"))), r"more than once: \['a'\]"),
    (lambda: AbiPlan((Formal("p", "peer_desc"), Formal("q", "peer_desc"))), "more than one peer_desc"),
])
def test_malformed_plans(build, why):
    with pytest.raises(AbiPlanError, match=why):
        build()


def test_plan_lists_its_tensormaps():
    plan = AbiPlan((Formal("n", "u32"), Formal("m", "tensormap", _enc())))
    assert plan.tensormaps == (_enc(),)


K = "k_0"
HEAD = """.version 9.4
.target sm_90a
.address_size 64

.visible .entry k_0(
\t.param .u64 .ptr .global .align 8 k_0_param_0,
\t.param .u32 k_0_param_1
)
{
\t.reg .b64 \t%rd<20>;
\t.reg .b32 \t%r<8>;
\t.reg .pred \t%p<2>;
\tld.param.b64 \t%rd1, [k_0_param_0];
\tld.param.b32 \t%r1, [k_0_param_1];
"""
TAIL = "\tret;\n}\n"
PLAN = AbiPlan((Formal("peer", "peer_desc"), Formal("n", "u32")))


def test_address_arithmetic_is_followed_and_rewritten():
    body = (
        "\tcvta.to.global.u64 \t%rd2, %rd1;\n"
        "\tmul.wide.s32 \t%rd3, %r1, 8;\n"
        "\tadd.s64 \t%rd4, %rd3, %rd2;\n"          # tracked on the right
        "\tmad.wide.u32 \t%rd5, %r1, 8, %rd2;\n"   # tracked as the addend
        "\tsub.s64 \t%rd6, %rd5, 8;\n"
        "\tmov.b64 \t%rd7, %rd6;\n"
        "\tld.global.nc.b64 \t%rd8, [%rd4+8];\n"
        "\tld.global.v2.u64 \t{%rd9, %rd10}, [%rd7];\n"
        "\tld.global.s32 \t%rd11, [%rd2+584];\n"
        "\tst.global.u64 \t[%rd12], %rd8;\n"         # an untracked store is none of our business
    )
    res = rewrite_by_value(HEAD + body + TAIL, K, PLAN)
    ptx = res.ptx
    assert "mov.b64 \t%rd1, k_0_p_peer;\n\tcvta.param.u64 \t%rd1, %rd1;" in ptx
    assert "mov.b64 \t%rd2, %rd1;" in ptx and "cvta.to.global" not in ptx
    assert "\tld.b64 \t%rd8, [%rd4+8];" in ptx and "\tld.v2.u64 \t{%rd9, %rd10}, [%rd7];" in ptx
    assert "\tld.s32 \t%rd11, [%rd2+584];" in ptx
    assert "st.global.u64 \t[%rd12], %rd8;" in ptx
    assert res.uses["peer"] == {"load": 3}
    assert [(p.name, p.size) for p in res.params] == [("peer", 592), ("n", 4)]


@pytest.mark.parametrize("body,why", [
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\tadd.s64 \t%rd3, %rd2, %rd2;\n\tld.global.b64 \t%rd4, [%rd3];\n",
     "unexpected use"),  # both operands tracked
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\t@%p1 mov.b64 \t%rd2, %rd9;\n\tld.global.b64 \t%rd4, [%rd2];\n",
     "unexpected use"),  # a merge with an untracked value
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\tadd.s64 \t%rd2, %rd2, 8;\n\tld.global.b64 \t%rd4, [%rd2];\n",
     "unexpected use"),  # in-place update
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\tatom.global.add.u64 \t%rd4, [%rd2], 1;\n", "unexpected use"),
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\tld.global.b64 \t%rd2, [%rd2];\n", "loaded into or used as data"),
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\tld.shared.b64 \t%rd4, [%rd2];\n", "state space 'shared'"),
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\tld.global.b64 \t%rd4, [%rd2+%rd3];\n", "non-trivial address"),
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\tcall.uni \tf, (%rd2);\n", "unexpected use"),
    ("\tcvta.to.global.u64 \t%rd2, %rd1;\n\tsomething weird %rd2\n", "does not understand"),
])
def test_unfollowable_uses_are_rejected(body, why):
    with pytest.raises(AbiRewriteError, match=why):
        rewrite_by_value(HEAD + body + TAIL, K, PLAN)
