"""The accuracy suite of paper §6.5: 47 cases per model configuration, metrics, Table-11 report.

* ``config``  — ``SuiteConfig`` presets (test-tiny, glm-5.2, deepseek-v4.1-flash), ``cpu_variant``, seeded weights.
* ``cases``   — the 47 ``CaseSpec``s and ``RankInputs`` (one rank's inputs of one case).
* ``metrics`` — cosine, processed difference, max abs / relative L2 error, thresholds, per-rank verdicts.
* ``suite``   — ``run_suite`` / ``run_suite_rank`` over any implementation ``impl(RankInputs) -> BF16 [T, H]``.
* ``report``  — summary, table, JSON (atomic), per-rank merge. CLI: ``python -m gcmoe_runtime.accuracy``.
"""
from .cases import RankInputs, suite_cases
from .config import PRESETS, SuiteConfig, cpu_variant, make_layer_weights
from .suite import ReferenceImplementation, BF16ReferenceImplementation, run_suite, run_suite_rank

__all__ = ["RankInputs", "suite_cases", "PRESETS", "SuiteConfig", "cpu_variant", "make_layer_weights",
           "ReferenceImplementation", "BF16ReferenceImplementation", "run_suite", "run_suite_rank"]
