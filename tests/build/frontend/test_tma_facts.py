"""TMA atom facts read from the DSL's IR, and the check of the plan's tensor-map encodings against
them (a wrong dtype / box / swizzle would make the runtime encode a descriptor the kernel misreads)."""
from __future__ import annotations

import dataclasses
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from gcmoe_build.frontend import trace_to_ptx
from gcmoe_build.frontend.tma_facts import TensorMapMismatchError, check_tensormaps, tma_atoms
from gcmoe_build.kernels import build_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "abi"))
from selftest_ptx import DuckVariant  # noqa: E402

K = "gcmoe_selftest_tma_peer_0"


@lru_cache(maxsize=None)
def traced(swizzle: int):
    kb = build_kernel(DuckVariant("selftest_tma_peer", "sm_90a", {"tiles": 1, "swizzle": swizzle}))
    return kb, trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, "sm_90a")


@pytest.mark.parametrize("swizzle,name", [(0, "NONE"), (64, "64B"), (128, "128B")])
def test_atom_facts_from_real_ir(swizzle, name):
    kb, fr = traced(swizzle)
    (atom,) = tma_atoms(fr.ir, K)
    assert (atom.tma_format, atom.dtype, atom.element_bits) == ("U8", "CU_TENSOR_MAP_DATA_TYPE_UINT8", 8)
    cols = 128 if swizzle == 128 else 64
    assert atom.copy_bits == 64 * cols * 8 and atom.gmem_modes == 2
    assert atom.swizzle == f"CU_TENSOR_MAP_SWIZZLE_{name}"
    check_tensormaps(K, kb.abi.tensormaps, [atom])


@pytest.mark.parametrize("change,why", [
    (dict(dtype="CU_TENSOR_MAP_DATA_TYPE_UINT16"), "dtype CU_TENSOR_MAP_DATA_TYPE_UINT16, the DSL atom uses"),
    (dict(box=(128, 32)), "moves 32768 bits, the DSL atom 65536"),
    (dict(box=(64, 128)), "inner box 64 x 8 bits must equal the 128-byte span of CU_TENSOR_MAP_SWIZZLE_128B"),
    (dict(swizzle="CU_TENSOR_MAP_SWIZZLE_NONE"), "swizzle CU_TENSOR_MAP_SWIZZLE_NONE, the DSL's smem layout needs "
                                                  "CU_TENSOR_MAP_SWIZZLE_128B"),
    (dict(interleave="CU_TENSOR_MAP_INTERLEAVE_16B"), "interleave"),
    (dict(rank=1, box=(8192,), element_strides=(1,)), "rank 1 < the 2 modes"),
    (dict(box=(64, 64, 1)), "rank 2 but box"),
])
def test_declared_encoding_must_match_the_atom(change, why):
    kb, fr = traced(128)
    atoms = tma_atoms(fr.ir, K)
    bad = (dataclasses.replace(kb.abi.tensormaps[0], **change),)
    with pytest.raises(TensorMapMismatchError, match=why) as err:
        check_tensormaps(K, bad, atoms)
    assert str(err.value).startswith(f"kernel {K}: tensor map 'tma_a'")


def test_count_and_unknown_shapes():
    kb, fr = traced(0)
    atoms = tma_atoms(fr.ir, K)
    with pytest.raises(TensorMapMismatchError, match="declares 0 tensor maps, the DSL kernel takes 1"):
        check_tensormaps(K, (), atoms)
    with pytest.raises(TensorMapMismatchError, match="TMA format U4 is not in"):
        tma_atoms(fr.ir.replace("tma_format = U8", "tma_format = U4"), K)
    with pytest.raises(TensorMapMismatchError, match="no cuda.kernel"):
        tma_atoms(fr.ir, "other_0")
    with pytest.raises(TensorMapMismatchError, match="not a TMA swizzle"):
        tma_atoms(traced(128)[1].ir.replace("S<3,4,3>", "S<3,3,3>"), K)


def test_compile_rejects_a_wrong_declared_encoding(monkeypatch):
    from gcmoe_build import compile as comp
    from gcmoe_build.abi import AbiPlan, Formal

    real = comp.build_kernel

    def wrong(v):
        kb = real(v)
        formals = tuple(Formal(f.name, f.kind, dataclasses.replace(f.tensormap, swizzle="CU_TENSOR_MAP_SWIZZLE_64B"))
                        if f.tensormap else f for f in kb.abi.formals)
        return dataclasses.replace(kb, abi=AbiPlan(formals, kb.abi.required_instructions))

    monkeypatch.setattr(comp, "build_kernel", wrong)
    with pytest.raises(TensorMapMismatchError, match="SWIZZLE_64B"):
        comp.compile_variant(DuckVariant("selftest_tma_peer", "sm_90a", {"tiles": 1, "swizzle": 128}))
