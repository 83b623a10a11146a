"""Session fixtures: real DSL-generated PTX of the selftest_tma_peer kernel (traced once)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "abi"))
from selftest_ptx import selftest_trace  # noqa: E402


@pytest.fixture(scope="session")
def selftest_build():
    return selftest_trace("sm_90a")
