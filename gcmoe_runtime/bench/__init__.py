"""Decode benchmark harness (issue 7): the paper's §6.1 protocol, baselines, models, floor and reports.

CLI: ``python -m gcmoe_runtime.bench {sweep,ablation,floor,gate,report,list} ...`` (see ``--help``;
docs/BENCHMARK.md). Plug an implementation in through :mod:`gcmoe_runtime.bench.impl` (``Implementation`` /
``Prepared``); our operator's modes are in :mod:`gcmoe_runtime.bench.impl_gcmoe`, the issue's targets in
:mod:`gcmoe_runtime.bench.targets`.
This package imports torch lazily and never imports gcmoe_build.
"""
from .impl import Implementation, Prepared, RankContext, make, register, registered  # noqa: F401
from .protocol import PAPER, ProtocolConfig, mean_of_ratios, median, slowest_rank, speedups  # noqa: F401
from .routing import Layout, PointInputs, RankPlan, build_point  # noqa: F401
from .shapes import ModelShape, resolve_model  # noqa: F401
