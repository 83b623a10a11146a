"""Shared pytest set-up: the `gpu` marker skips cleanly on machines without a CUDA device."""
import pytest


def _cuda_devices() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def pytest_collection_modifyitems(config, items):
    n = _cuda_devices()
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU; none visible")
    skip_multi = pytest.mark.skip(reason=f"needs >= 2 GPUs; {n} visible")
    for item in items:
        if "gpu" in item.keywords and n == 0:
            item.add_marker(skip_gpu)
        elif "multigpu" in item.keywords and n < 2:
            item.add_marker(skip_multi)
