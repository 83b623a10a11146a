"""CuTe DSL -> PTX without a GPU (see dsl.py)."""
from .dsl import FrontendError, FrontendResult, import_dsl, trace_to_ptx

__all__ = ["FrontendError", "FrontendResult", "import_dsl", "trace_to_ptx"]
