"""By-value kernel ABI: the kernel author's plan (plan.py), strict PTX reading (ptx.py) and the
fail-closed rewrite that produces the recorded parameter schema (rewrite.py)."""
from .plan import AbiPlan, AbiPlanError, Formal
from .ptx import AbiRewriteError
from .rewrite import AbiResult, rewrite_by_value

__all__ = ["AbiPlan", "AbiPlanError", "Formal", "AbiRewriteError", "AbiResult", "rewrite_by_value"]
