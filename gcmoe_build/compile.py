"""Compile one variant: kernel module -> CuTe DSL -> PTX -> by-value ABI rewrite -> locked ptxas -> cubin.

Usage (no GPU needed)::

    from gcmoe_build.compile import compile_variant
    art = compile_variant(variant)      # variant: .role .arch .params .manifest .key(identity, source)
    art.cubin, art.ptx, art.record      # bytes, the assembled PTX, gcmoe_runtime ArtifactRecord

Steps: ``gcmoe_build.kernels.build_kernel(variant)`` gives the DSL functions, fake arguments, the
stable name prefix, the ABI plan and launch facts; ``gcmoe_build.frontend.trace_to_ptx`` traces with
the arch set explicitly; ``gcmoe_build.abi.rewrite_by_value`` validates/rewrites the formals and
yields the parameter schema; ``gcmoe_build.toolchain.assemble`` runs the pinned ptxas with the
locked options; the cubin's entry symbol and its parameter table (EIATTR_KPARAM_INFO, what
cuKernelGetParamInfo reports) are checked against the schema. Any mismatch raises; nothing is
returned half-done. The record's key is ``variant.key(identity_digest, kernel_source_hash)``
(both computed once per process).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from gcmoe_runtime.artifacts.record import ArtifactRecord, ParamSpec, sha256_hex

from gcmoe_build.abi import rewrite_by_value
from gcmoe_build.frontend import trace_to_ptx
from gcmoe_build.frontend.launch_facts import check_launch
from gcmoe_build.frontend.tma_facts import check_tensormaps, tma_atoms
from gcmoe_build.kernels import build_kernel
from gcmoe_build.toolchain import assemble, compiler_identity, effective_options, kernel_source_hash
from gcmoe_build.toolchain.elf import kernel_param_info, kernel_symbols


class CompileError(RuntimeError):
    """The cubin does not match what the pipeline recorded (symbol or parameter table)."""


@dataclass(frozen=True)
class CompiledArtifact:
    cubin: bytes
    ptx: str  # the rewritten PTX that was assembled
    record: ArtifactRecord
    timings: dict[str, float] = field(default_factory=dict, compare=False)  # seconds per stage (not recorded)


_identity_cache: dict[str, Any] = {}
_source_hash_cache: list[str] = []


def source_hash() -> str:
    """The kernel source hash, computed once per process (like the pipeline's key planning)."""
    if not _source_hash_cache:
        _source_hash_cache.append(kernel_source_hash())
    return _source_hash_cache[0]


def identity_for(arch: str):
    """The compiler identity for ``arch``, computed once per process."""
    if arch not in _identity_cache:
        _identity_cache[arch] = compiler_identity(arch)
    return _identity_cache[arch]


def compile_variant(variant: Any) -> CompiledArtifact:
    t0 = time.perf_counter()
    kb = build_kernel(variant)
    t_build = time.perf_counter()
    front = trace_to_ptx(kb.host, kb.kernel, kb.args, kb.name_prefix, variant.arch)
    t_trace = time.perf_counter()
    abi = rewrite_by_value(front.ptx, front.entry_name, kb.abi)
    check_tensormaps(front.entry_name, kb.abi.tensormaps, tma_atoms(front.ir, front.entry_name))
    check_launch(front.entry_name, front.ir, front.ptx, kb.launch)
    t_abi = time.perf_counter()
    options = effective_options(variant.arch, tuple(kb.ptxas_options))
    cubin = assemble(abi.ptx, options, what=front.entry_name)
    t_asm = time.perf_counter()
    params = check_cubin(cubin, front.entry_name, abi.params)

    ident = identity_for(variant.arch)
    record = ArtifactRecord(
        key=variant.key(ident.digest, source_hash()),
        role=variant.role,
        arch=variant.arch,
        kernel_name=front.entry_name,
        variant=dict(variant.params),
        manifest=str(variant.manifest),
        compiler_identity=ident.digest,
        cubin_sha256=sha256_hex(cubin),
        cubin_size=len(cubin),
        ptx_sha256=sha256_hex(abi.ptx.encode()),
        params=params,
        launch=kb.launch,
        tensormaps=kb.abi.tensormaps,
        extra={
            "ptxas_options": list(options),
            "abi_converted": list(abi.converted),
            "abi_uses": abi.uses,
            "kernel": dict(kb.extra),
        },
    )
    timings = {"build": t_build - t0, "trace": t_trace - t_build, "abi": t_abi - t_trace,
               "ptxas": t_asm - t_abi, "total": time.perf_counter() - t0}
    return CompiledArtifact(cubin=cubin, ptx=abi.ptx, record=record, timings=timings)


def check_cubin(cubin: bytes, kernel_name: str, params) -> tuple[ParamSpec, ...]:
    """Check the cubin defines ``kernel_name`` with exactly the schema's parameters; return the
    schema with the offsets the driver will report (cuKernelGetParamInfo reads the same
    EIATTR_KPARAM_INFO table; on sm_90a a 64-byte-aligned first parameter sits at offset 48
    because the parameter bank starts 16 bytes past a 64-byte boundary)."""
    syms = kernel_symbols(cubin)
    if kernel_name not in syms:
        raise CompileError(f"kernel {kernel_name}: cubin entry symbols are {syms}, the stable name is missing")
    info = kernel_param_info(cubin, kernel_name)
    if [o for o, _, _ in info] != list(range(len(params))):
        raise CompileError(
            f"kernel {kernel_name}: cubin lists parameter ordinals {[o for o, _, _ in info]}, schema has {len(params)}"
        )
    out, end = [], 0
    for (ordinal, offset, size), p in zip(info, params):
        if size != p.size:
            raise CompileError(f"kernel {kernel_name}: cubin parameter {ordinal} has {size} bytes, schema says {p.name} has {p.size}")
        if offset < end or offset % min(p.align, 16):
            raise CompileError(
                f"kernel {kernel_name}: cubin parameter {ordinal} ({p.name}) at offset {offset} overlaps the previous "
                f"one (ends at {end}) or breaks its {p.align}-byte alignment"
            )
        out.append(replace(p, offset=offset))
        end = offset + size
    return tuple(out)
