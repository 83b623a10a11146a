"""PTX checks shared by the SM90 kernel compile tests (not a test module itself)."""
from __future__ import annotations

import re


def assert_only_printf_locals(ptx: str) -> None:
    """The only local memory is the argument buffer of the timeout message's printf (trap path)."""
    depots = [int(n) for n in re.findall(r"__local_depot\d+\[(\d+)\]", ptx)]
    sites = ptx.count("call.uni (retval0), vprintf,")
    assert sum(depots) <= 72 * sites, (depots, sites)  # 5 printf arguments (+ padding) per trap site
