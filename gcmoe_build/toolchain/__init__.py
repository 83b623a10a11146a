"""The locked toolchain: pinned ptxas + locked options (ptxas.py), the compiler identity record and
source hashes (identity.py), and cubin inspection (elf.py)."""
from .identity import CompilerIdentity, compiler_identity, diff_identity, kernel_source_hash, pipeline_source_hash
from .ptxas import ToolchainError, ToolchainOptionError, assemble, effective_options, locate_ptxas

__all__ = [
    "CompilerIdentity", "compiler_identity", "diff_identity", "kernel_source_hash", "pipeline_source_hash",
    "ToolchainError", "ToolchainOptionError", "assemble", "effective_options", "locate_ptxas",
]
