"""The kernel's declared LaunchFacts checked against what the DSL traced and NVVM emitted.

The runtime launches with the recorded facts only (it never runs the DSL's host launcher), so a
kernel author's ``LaunchFacts`` must equal what the kernel was traced with:

* ``block`` == the DSL's ``exact_block_dim`` launch fact and the PTX ``.reqntid`` (when present);
* ``dynamic_smem`` == the DSL's ``smem.config_smem_size`` (the ``launch(smem=...)`` value; absent = 0);
* ``cluster`` == (1, 1, 1) unless the DSL marks a cluster launch, and == the PTX
  ``.reqnctapercluster`` when that is present.
"""
from __future__ import annotations

import re


class LaunchFactsError(ValueError):
    def __init__(self, kernel: str, message: str) -> None:
        super().__init__(f"kernel {kernel}: {message}")
        self.kernel = kernel


def _kernel_attrs(ir: str, kernel: str) -> str:
    m = re.search(rf"cuda\.kernel @{re.escape(kernel)}\(.*$", ir, re.M)
    if not m:
        raise LaunchFactsError(kernel, "the DSL IR has no cuda.kernel of this name")
    return m.group(0)


def _triple(text: str) -> tuple[int, int, int]:
    vals = [int(v) for v in re.findall(r"\d+", text)]
    return tuple((vals + [1, 1, 1])[:3])  # type: ignore[return-value]


def check_launch(kernel: str, ir: str, ptx: str, launch) -> None:
    line = _kernel_attrs(ir, kernel)
    block = tuple(launch.block)
    m = re.search(r"exact_block_dim = array<i64: ([\d, ]+)>", line)
    if m and _triple(m.group(1)) != block:
        raise LaunchFactsError(kernel, f"LaunchFacts.block {block} but the DSL traced block {_triple(m.group(1))}")
    m = re.search(r"^\.reqntid\s+([\d, ]+)$", ptx, re.M)
    if m and _triple(m.group(1)) != block:
        raise LaunchFactsError(kernel, f"LaunchFacts.block {block} but the PTX requires .reqntid {_triple(m.group(1))}")
    m = re.search(r"smem\.config_smem_size = (\d+)", line)
    smem = int(m.group(1)) if m else 0
    if smem != launch.dynamic_smem:
        raise LaunchFactsError(
            kernel, f"LaunchFacts.dynamic_smem {launch.dynamic_smem} but the DSL launch gives the kernel {smem} bytes"
        )
    cluster = tuple(launch.cluster)
    m = re.search(r"^\.reqnctapercluster\s+([\d, ]+)$", ptx, re.M)
    if m and _triple(m.group(1)) != cluster:
        raise LaunchFactsError(kernel, f"LaunchFacts.cluster {cluster} but the PTX requires {_triple(m.group(1))}")
    if "cluster_launch = false" in line and cluster != (1, 1, 1):
        raise LaunchFactsError(kernel, f"LaunchFacts.cluster {cluster} but the DSL traced a non-cluster launch")
