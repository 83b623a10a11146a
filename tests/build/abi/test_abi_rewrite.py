"""By-value ABI rewrite on REAL DSL-generated PTX (selftest_tma_peer, traced once per session),
plus mutated copies of it that must be rejected (fail closed), and ptxas on the result."""
from __future__ import annotations

import re

import pytest

from gcmoe_build.abi import AbiPlan, AbiRewriteError, Formal, rewrite_by_value
from gcmoe_build.toolchain.elf import kernel_param_info, kernel_symbols
from gcmoe_build.toolchain.ptxas import assemble, effective_options

K = "gcmoe_selftest_tma_peer_0"
P = f"{K}_param_"  # the DSL's formal names: <entry>_param_<i>


def _peer_reg(ptx: str) -> str:
    return re.search(rf"ld\.param\.b64\s+(%rd\d+), \[{P}2\];", ptx).group(1)


def _tma_generic_reg(ptx: str) -> str:
    addr = re.search(rf"mov\.b64\s+(%rd\d+), {P}0;", ptx).group(1)
    return re.search(rf"cvta\.param\.u64\s+(%rd\d+), {re.escape(addr)};", ptx).group(1)


def _insert_after(ptx: str, pattern: str, new_line: str) -> str:
    m = re.search(pattern + r"[^\n]*\n", ptx)
    assert m, pattern
    return ptx[: m.end()] + "\t" + new_line + "\n" + ptx[m.end():]


def _drop_lines(ptx: str, pattern: str) -> str:
    out = [l for l in ptx.splitlines() if not re.search(pattern, l)]
    assert len(out) < len(ptx.splitlines()), pattern
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def real(selftest_build):
    kb, fr = selftest_build
    return kb.abi, fr.ptx


@pytest.fixture(scope="module")
def rewritten(real):
    plan, ptx = real
    return rewrite_by_value(ptx, K, plan)


def test_dsl_emits_what_the_rewrite_expects(real):
    """Measured shape of CuTe DSL 4.8.1 output (documented in gcmoe_build.abi.rewrite)."""
    _, ptx = real
    assert f".param .align 64 .b8 {P}0[128]" in ptx  # TMA descriptor: already by value
    assert re.search(rf"\.param \.u64 \.ptr (\.global )?\.align 8 {P}2\b", ptx)  # peer table: a pointer formal
    assert re.search(r"ld\.global\.\w+\s+%rd\d+, \[" + re.escape(_peer_reg(ptx)), ptx)


def test_schema_and_normalised_order(rewritten):
    got = [(p.index, p.name, p.kind, p.size, p.align) for p in rewritten.params]
    assert got == [(0, "tma_a", "tensormap", 128, 64), (1, "peer", "peer_desc", 592, 8), (2, "out", "ptr", 8, 8),
                   (3, "timeout_ns", "u64", 8, 8), (4, "rows", "s32", 4, 4)]
    assert [p.offset for p in rewritten.params] == [0, 128, 720, 728, 736]  # natural; compile.py uses the driver's
    assert rewritten.converted == ("peer",)
    assert rewritten.uses["tma_a"] == {"prefetch": 1, "tma": 1}
    assert rewritten.uses["peer"]["load"] == 3


def test_rewritten_ptx_shape(rewritten):
    ptx = rewritten.ptx
    decls = re.findall(r"^\s*(\.param [^\n]*?)(?:,)?$", ptx.split(".entry", 1)[1].split(")", 1)[0], re.M)
    assert decls == [f".param .align 64 .b8 {K}_p_tma_a[128]", f".param .align 8 .b8 {K}_p_peer[592]",
                     f".param .align 8 .b8 {K}_p_out[8]", f".param .u64 {K}_p_timeout_ns",
                     f".param .align 4 .b8 {K}_p_rows[4]"]
    assert P not in ptx  # every formal renamed
    reg = re.search(rf"mov\.b64\s+(%rd\d+), {K}_p_peer;", ptx).group(1)
    assert re.search(rf"cvta\.param\.u64\s+{reg}, {reg};", ptx)
    assert not re.search(rf"ld\.global[.\w]*\s+%rd\d+, \[{reg}", ptx)
    assert re.search(rf"ld\.b64\s+%rd\d+, \[{reg}\]", ptx) and re.search(rf"ld\.s32\s+%rd\d+, \[{reg}\+584\]", ptx)
    assert "prefetch.tensormap" in ptx and "cp.async.bulk.tensor.2d" in ptx


def test_rewritten_ptx_assembles_with_stable_symbol(rewritten):
    cubin = assemble(rewritten.ptx, effective_options("sm_90a"), what=K)
    assert kernel_symbols(cubin) == [K]  # vprintf is only referenced, not defined
    info = kernel_param_info(cubin, K)
    assert [size for _, _, size in info] == [128, 592, 8, 8, 4]
    assert info[0][1] % 64 == 48 and info[1][1] == info[0][1] + 128  # 64-aligned in the parameter bank


def test_rewrite_is_deterministic(real, rewritten):
    plan, ptx = real
    assert rewrite_by_value(ptx, K, plan).ptx == rewritten.ptx


def test_pointer_form_tensor_map_is_converted(real):
    """Should the DSL pass a tensor map as a pointer formal, the rewrite converts it like the peer table."""
    plan, ptx = real
    addr = re.search(rf"mov\.b64\s+(%rd\d+), {P}0;", ptx).group(1)
    mutated = ptx.replace(f".param .align 64 .b8 {P}0[128]", f".param .u64 .ptr .align 8 {P}0")
    mutated = mutated.replace(f"mov.b64 \t{addr}, {P}0;", f"ld.param.b64 \t{addr}, [{P}0];")
    mutated = re.sub(rf"cvta\.param\.u64(\s+%rd\d+, {re.escape(addr)};)", r"cvta.to.global.u64\1", mutated)
    res = rewrite_by_value(mutated, K, plan)
    assert res.converted == ("tma_a", "peer")
    assert f".param .align 64 .b8 {K}_p_tma_a[128]" in res.ptx
    assert re.search(rf"mov\.b64\s+{addr}, {K}_p_tma_a;\s+cvta\.param\.u64\s+{addr}, {addr};", res.ptx)
    assert not re.search(rf"cvta\.to\.global\.u64\s+%rd\d+, {re.escape(addr)};", res.ptx)
    cubin = assemble(res.ptx, effective_options("sm_90a"), what=K)
    assert [s for _, _, s in kernel_param_info(cubin, K)] == [128, 592, 8, 8, 4]


# ---- mutated PTX: every one must stop the build with an error naming the kernel -------------------
def _store_through_peer(ptx):
    return _insert_after(ptx, rf"ld\.param\.b64\s+%rd\d+, \[{P}2\];", f"st.global.u64 [{_peer_reg(ptx)}], 0;")


def _peer_as_data(ptx):
    return _insert_after(ptx, rf"ld\.param\.b64\s+%rd\d+, \[{P}2\];", f"setp.eq.u64 %p1, {_peer_reg(ptx)}, 0;")


def _redefine_peer_reg(ptx):
    m = list(re.finditer(r"ld\.global\.b64[^\n]*\n", ptx))[-1]
    return ptx[: m.end()] + f"\tmov.b64 {_peer_reg(ptx)}, 16;\n" + ptx[m.end():]


def _tma_desc_stored(ptx):
    return _insert_after(ptx, r"prefetch\.tensormap[^;]*;", f"st.shared.u64 [%r1], {_tma_generic_reg(ptx)};")


def _tma_addr_loaded(ptx):
    return _insert_after(ptx, r"prefetch\.tensormap[^;]*;", f"ld.global.u64 %rd2, [{_tma_generic_reg(ptx)}];")


def _unknown_load_qualifier(ptx):
    return ptx.replace("ld.global.b64", "ld.global.L1::no_allocate.b64", 1)


def _tma_formal_as_data(ptx):
    return _insert_after(ptx, rf"mov\.b64\s+%rd\d+, {P}0;", f"add.s64 %rd2, {P}0, 16;")


def _tma_formal_loaded(ptx):
    return _insert_after(ptx, rf"mov\.b64\s+%rd\d+, {P}0;", f"ld.param.u32 %r1, [{P}0+4];")


MUTATIONS = {
    "unknown use: store through the peer table": (_store_through_peer, r"unexpected use"),
    "unknown use: peer address compared as data": (_peer_as_data, r"unexpected use"),
    "peer register redefined": (_redefine_peer_reg, r"unexpected use|both"),
    "tensor map address stored": (_tma_desc_stored, r"outside the descriptor operand|unexpected use"),
    "tensor map read through global space": (_tma_addr_loaded, r"not loaded"),
    "tensor map formal loaded directly": (_tma_formal_loaded, r"unexpected use of the by-value formal"),
    "load qualifier the rewrite does not know": (_unknown_load_qualifier, r"not rewritable"),
    "tensor map formal used by an unknown instruction": (_tma_formal_as_data, r"unexpected use of the by-value formal"),
    "renamed formal": (lambda p: p.replace(f"{P}2", f"{K}_peer"), r"formal 2 is named"),
    "missing formal": (lambda p: _drop_lines(p, rf"^\s*\.param \.u64 {P}4$").replace(
        f"{P}3[8],", f"{P}3[8]"), r"the PTX has 4 formals"),
    "extra formal": (lambda p: p.replace(f"{P}3[8],", f"{P}3[8],\n\t.param .u32 {P}5,"), r"the PTX has 6 formals"),
    "tensor map with another size": (lambda p: p.replace(f"{P}0[128]", f"{P}0[64]"), r"expected 128 align 64"),
    "tensor map with another alignment": (lambda p: p.replace(f".align 64 .b8 {P}0[", f".align 16 .b8 {P}0["),
                                          r"expected 128 align 64"),
    "missing prefetch": (lambda p: _drop_lines(p, r"prefetch\.tensormap"), r"'prefetch\.tensormap' does not occur"),
    "missing TMA copy": (lambda p: _drop_lines(p, r"cp\.async\.bulk\.tensor"), r"no cp\.async\.bulk\.tensor use"),
    "missing load of the peer pointer": (lambda p: _drop_lines(p, rf"\[{P}2\]"), r"'peer' \(peer_desc\) has no load use"),
    "predicated load of the peer pointer": (lambda p: re.sub(rf"(\s)(ld\.param\.b64\s+%rd\d+, \[{P}2\])",
                                                              r"\1@%p1 \2", p), r"only 'ld\.param\.b64"),
    "second entry": (lambda p: p + "\n.visible .entry other_0()\n{\n\tret;\n}\n", r"exactly one \.entry"),
    "unparsable formal": (lambda p: p.replace(f".param .u64 {P}4", f".param .u64 .weird {P}4"),
                          r"unrecognised formal declaration"),
    "unbalanced body": (lambda p: p.rstrip().rstrip("}") + "\n", r"braces"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_ptx_is_rejected(real, name):
    plan, ptx = real
    mutate, why = MUTATIONS[name]
    bad = mutate(ptx)
    assert bad != ptx
    with pytest.raises(AbiRewriteError) as err:
        rewrite_by_value(bad, K, plan)
    assert err.value.kernel == K and str(err.value).startswith(f"kernel {K}: ")
    assert re.search(why, str(err.value)), str(err.value)


def _plan_with(plan: AbiPlan, i: int, formal: Formal) -> AbiPlan:
    f = list(plan.formals)
    if formal.kind == "peer_desc":  # one peer descriptor per plan: demote the real one
        f = [Formal(x.name, "ptr") if x.kind == "peer_desc" else x for x in f]
    f[i] = formal
    return AbiPlan(tuple(f), plan.required_instructions)


@pytest.mark.parametrize("i,formal,why", [
    (1, Formal("rows", "u64"), r"has 4 bytes align 4, expected 8 align 8"),
    (3, Formal("out", "f32"), r"expected 4 align 4"),
    (4, Formal("timeout_ns", "ptr"), None),  # a u64 scalar may be declared ptr: same size, accepted
    (4, Formal("timeout_ns", "peer_desc"), r"has no load use|unexpected use"),
    (2, Formal("peer", "ptr"), None),  # accepted: then it stays a pointer formal (not by value)
    (1, Formal("rows", "peer_desc"), r"is a \.b8\[4\]|by value with 4 bytes"),
])
def test_plan_mismatch(real, i, formal, why):
    plan, ptx = real
    bad = _plan_with(plan, i, formal)
    if why is None:
        rewrite_by_value(ptx, K, bad)
        return
    with pytest.raises(AbiRewriteError, match=why):
        rewrite_by_value(ptx, K, bad)


def test_wrong_kernel_name(real):
    plan, ptx = real
    with pytest.raises(AbiRewriteError, match="expected 'other_0'"):
        rewrite_by_value(ptx, "other_0", plan)


def test_plan_count_mismatch(real):
    plan, ptx = real
    with pytest.raises(AbiRewriteError, match="the ABI plan declares 4"):
        rewrite_by_value(ptx, K, AbiPlan(plan.formals[:4], plan.required_instructions))
