"""The ``ci/`` scripts are not a package: ``ci_tool(name)`` loads ``ci/<name>.py`` as a module for its tests."""
import importlib.util
import sys
from pathlib import Path

import pytest

CI = Path(__file__).resolve().parents[2] / "ci"
sys.path.insert(0, str(CI))  # the tools import their siblings (raw_json) as a script run from ci/ would


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, CI / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def ci_tool():
    return _load
