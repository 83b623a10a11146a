"""Locked assembler: the pinned ptxas is found and version-checked; options are locked; ptxas runs."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from gcmoe_build.toolchain import ptxas as px
from gcmoe_build.toolchain.elf import kernel_param_info, kernel_symbols

TINY_PTX = """.version 9.4
.target sm_90a
.address_size 64
.visible .entry tiny_0(.param .align 64 .b8 tiny_0_p_map[128], .param .u32 tiny_0_p_n)
{
\tret;
}
"""


def test_pinned_ptxas_found_and_checked():
    b = px.locate_ptxas()
    assert b.version == "13.4.59"
    assert b.package == "nvidia-cuda-nvcc==13.4.59"
    assert Path(b.path).is_file() and b.path.endswith("/nvidia/cu13/bin/ptxas")
    assert b.size == Path(b.path).stat().st_size > 1_000_000
    assert re.fullmatch(r"[0-9a-f]{64}", b.sha256)


def test_wrong_package_version_is_rejected(monkeypatch):
    px.locate_ptxas.cache_clear()
    monkeypatch.setattr(px.metadata, "distribution", lambda name: SimpleNamespace(version="13.0.88", files=[]))
    try:
        with pytest.raises(px.ToolchainError, match=r"13\.0\.88.*locked to 13\.4\.59"):
            px.locate_ptxas()
    finally:
        monkeypatch.undo()
        px.locate_ptxas.cache_clear()


def test_missing_package_says_how_to_install(monkeypatch):
    px.locate_ptxas.cache_clear()

    def missing(name):
        raise px.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(px.metadata, "distribution", missing)
    try:
        with pytest.raises(px.ToolchainError, match=r"pip install 'nvidia-cuda-nvcc==13\.4\.59'"):
            px.locate_ptxas()
    finally:
        monkeypatch.undo()
        px.locate_ptxas.cache_clear()


def test_locked_options_and_whitelist():
    assert px.effective_options("sm_90a") == ("--gpu-name", "sm_90a", "-O3")
    assert px.effective_options("sm_90a", ["--register-usage-level=10", "--fmad=true"]) == (
        "--gpu-name", "sm_90a", "-O3", "--fmad=true", "--register-usage-level=10")
    assert px.effective_options("sm_100a", ["--warn-on-spills"])[-1] == "--warn-on-spills"


@pytest.mark.parametrize("flag", ["-rdc", "--relocatable-device-code=true", "-c", "--compile-only",
                                  "--preserve-relocs", "-ewp", "--extensible-whole-program"])
def test_relocatable_code_rejected(flag):
    with pytest.raises(px.ToolchainOptionError, match="relocatable"):
        px.effective_options("sm_90a", [flag])


@pytest.mark.parametrize("flag", ["-O2", "-O0", "--opt-level=1", "--gpu-name=sm_80", "-arch=sm_80", "-g",
                                  "--device-debug", "--maxrregcount=64", "-lineinfo", "--output-file=x",
                                  "--options-file=f"])
def test_overrides_rejected(flag):
    with pytest.raises(px.ToolchainOptionError, match="overrides a locked option"):
        px.effective_options("sm_90a", [flag])


@pytest.mark.parametrize("extra,match", [
    (["--allow-expensive-optimizations=true"], "not in the whitelist"),
    (["--fmad=maybe"], r"value 'maybe' not in"),
    (["--register-usage-level=11"], "not in"),
    (["--warn-on-spills=1"], "takes no value"),
    (["fmad=true"], "expected a flag"),
    ("--fmad=true", "list of flags"),
    (["--fmad=true", "--fmad=false"], "given twice"),
])
def test_bad_extras_rejected(extra, match):
    with pytest.raises(px.ToolchainOptionError, match=match):
        px.effective_options("sm_90a", extra)


def test_unsupported_arch_rejected():
    with pytest.raises(px.ToolchainOptionError, match="sm_80"):
        px.effective_options("sm_80")


def test_assemble_only_takes_canonical_options():
    unsorted = ("--gpu-name", "sm_90a", "-O3", "--register-usage-level=10", "--fmad=true")
    with pytest.raises(px.ToolchainOptionError, match="canonical"):
        px.assemble(TINY_PTX, unsorted, what="tiny_0")
    with pytest.raises(px.ToolchainOptionError, match="overrides a locked option"):
        px.assemble(TINY_PTX, ("--gpu-name", "sm_90a", "-O3", "-g"), what="tiny_0")
    with pytest.raises(px.ToolchainOptionError):
        px.assemble(TINY_PTX, ("-O3",), what="tiny_0")


def test_assemble_tiny_kernel_and_read_its_elf():
    cubin = px.assemble(TINY_PTX, px.effective_options("sm_90a"), what="tiny_0")
    assert cubin[:4] == b"\x7fELF"
    assert kernel_symbols(cubin) == ["tiny_0"]
    # the parameter bank starts 16 bytes past a 64-byte boundary: a 64-aligned first param sits at 48
    assert kernel_param_info(cubin, "tiny_0") == [(0, 48, 128), (1, 176, 4)]


def test_assembler_failure_names_the_kernel():
    bad = TINY_PTX.replace("ret;", "bogus.instruction %r1;")
    with pytest.raises(px.ToolchainError, match=r"tiny_0: ptxas 13\.4\.59 failed"):
        px.assemble(bad, px.effective_options("sm_90a"), what="tiny_0")


def test_wgmma_serialization_advisory_fails_the_build(monkeypatch):
    """ptxas' C7512 (every wgmma waits for itself, for lack of registers) assembles fine and prints one line on
    stderr; assemble must turn it into an error that names the kernel and quotes ptxas."""
    real_run = px.subprocess.run
    line = ("ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
            "insufficient register resources for the function 'tiny_0'")

    def run_with_advisory(*args, **kwargs):
        proc = real_run(*args, **kwargs)
        proc.stderr = (proc.stderr or "") + line + "\n"
        return proc

    monkeypatch.setattr(px.subprocess, "run", run_with_advisory)
    with pytest.raises(px.ToolchainError, match=r"tiny_0: ptxas advisory C7512 .*serialized"):
        px.assemble(TINY_PTX, px.effective_options("sm_90a"), what="tiny_0")
