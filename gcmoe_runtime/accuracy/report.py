"""Suite results as a table shaped like paper Table 11, and as JSON (atomic writes, per-rank merge)."""
from __future__ import annotations

import json
import os
import platform
import socket
import sys
import tempfile
import time

import torch

from .cases import CATEGORIES
from .metrics import PROCESSED_DIFF_MAX, REPEAT_DIFF_MAX, cosine_threshold


def _min(vals):
    vals = [v for v in vals if v is not None]
    return min(vals) if vals else None


def _max(vals):
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def summarize(records: list, shared: bool) -> dict:
    """Per category: cases passed (a case passes when all its ranks pass), cosine minima, max processed diff;
    overall: max abs error, max relative L2, max repeat / graph-vs-eager diff, rank-case counts."""
    out = {"categories": {}}
    for cat in CATEGORIES:
        recs = [r for r in records if r["category"] == cat]
        cases = {}
        for r in recs:
            cases[r["case"]] = cases.get(r["case"], True) and r["passed"]
        out["categories"][cat] = {
            "cases_passed": sum(cases.values()), "cases": len(cases),
            "min_cos_impl_vs_bf16": _min(r.get("cos_vs_bf16") for r in recs),
            "min_cos_ref_vs_bf16": _min(r.get("cos_quant_ref_vs_bf16") for r in recs),
            "min_cos_impl_vs_ref": _min(r.get("cos_vs_quant") for r in recs),
            "max_processed_diff": _max(r.get("processed_diff") for r in recs),
            "min_cos_impl_vs_bf16_orig": _min(r.get("cos_vs_bf16_orig") for r in recs),
            "min_cos_ref_vs_bf16_orig": _min(r.get("cos_quant_ref_vs_bf16_orig") for r in recs),
        }
    out["rank_cases"] = len(records)
    out["rank_cases_passed"] = sum(r["passed"] for r in records)
    out["max_abs_error"] = _max(r.get("max_abs_error") for r in records)
    out["max_rel_l2"] = _max(r.get("rel_l2") for r in records)
    out["max_repeat_diff"] = _max(r.get("repeat_diff") for r in records)
    out["max_graph_vs_eager_diff"] = _max(r.get("graph_vs_eager_diff") for r in records)
    out["thresholds"] = {"cosine": cosine_threshold(shared), "processed_diff": PROCESSED_DIFF_MAX,
                         "repeat_diff": REPEAT_DIFF_MAX}
    out["failures"] = [f"{r['case']} rank{r['rank']}: {'; '.join(r['failures'])}" for r in records if not r["passed"]]
    return out


def _f(v, fmt="{:.6f}"):
    return "n/a" if v is None else fmt.format(v)


def format_table(doc: dict) -> str:
    """Plain-text table in the shape of paper Table 11 from a result document (see ``result_document``)."""
    s, cfg = doc["summary"], doc["config"]
    thr = s["thresholds"]
    lines = [
        f"Accuracy: {cfg['name']} (H={cfg['hidden']} I={cfg['intermediate']} E={cfg['num_experts']} "
        f"k={cfg['topk']} shared={cfg['shared_experts']} P={cfg['world']} capacity={cfg['capacity']} "
        f"act={cfg['act_recipe']}), implementation '{doc['implementation']}', ranks {doc['ranks']}.",
        f"Thresholds: cosine >= {thr['cosine']}; processed diff and repeat/graph diff <= {thr['processed_diff']}. "
        "Cosine columns are per-category minima; Impl = implementation, Ref = quantised FP32 reference, BF16 = "
        "BF16 ideal on the dequantised checkpoint; BF16o = BF16 ideal on the original weights (info, no threshold).",
        f"{'Category':<11} {'Cases':>7} {'Impl/BF16':>11} {'Ref/BF16':>11} {'Impl/Ref':>12} {'Max proc. diff':>15}"
        f" {'Impl/BF16o':>11} {'Ref/BF16o':>10}",
    ]
    for cat in CATEGORIES:
        c = s["categories"][cat]
        lines.append(f"{cat:<11} {str(c['cases_passed']) + '/' + str(c['cases']):>7} "
                     f"{_f(c['min_cos_impl_vs_bf16']):>11} {_f(c['min_cos_ref_vs_bf16']):>11} "
                     f"{_f(c['min_cos_impl_vs_ref'], '{:.8f}'):>12} {_f(c['max_processed_diff'], '{:.3g}'):>15}"
                     f" {_f(c['min_cos_impl_vs_bf16_orig']):>11} {_f(c['min_cos_ref_vs_bf16_orig']):>10}")
    lines.append(f"Impl: max absolute error {_f(s['max_abs_error'], '{:.6g}')}; max relative L2 "
                 f"{_f(s['max_rel_l2'], '{:.6g}')}; repeat diff {_f(s['max_repeat_diff'], '{:.3g}')}; "
                 f"graph/eager diff {_f(s['max_graph_vs_eager_diff'], '{:.3g}')}; "
                 f"{s['rank_cases_passed']}/{s['rank_cases']} rank-cases pass.")
    for f in s["failures"][:20]:
        lines.append(f"  FAIL {f}")
    if len(s["failures"]) > 20:
        lines.append(f"  ... {len(s['failures']) - 20} more failures")
    return "\n".join(lines)


def environment() -> dict:
    dev = "cpu"
    if torch.cuda.is_available():
        dev = torch.cuda.get_device_name(0)
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": socket.gethostname(),
            "platform": platform.platform(), "python": sys.version.split()[0], "torch": torch.__version__,
            "device": dev, "cpu_threads": torch.get_num_threads(), "command": " ".join(sys.argv)}


def result_document(result, extra: dict | None = None) -> dict:
    doc = {"config": result.config.to_dict(), "implementation": result.implementation, "ranks": result.ranks,
           "seconds": round(result.seconds, 2), "environment": environment(),
           "summary": summarize(result.records, bool(result.config.shared_experts)), "records": result.records}
    doc.update(extra or {})
    return doc


def merge_results(docs: list) -> dict:
    """Join per-rank documents of one config and implementation (torchrun: one file per rank)."""
    if not docs:
        raise ValueError("merge_results: no documents")
    base = docs[0]
    for d in docs[1:]:
        if d["config"] != base["config"] or d["implementation"] != base["implementation"]:
            raise ValueError("merge_results: documents differ in config or implementation")
    records = sorted((r for d in docs for r in d["records"]), key=lambda r: (r["case_index"], r["rank"]))
    ranks = sorted({r for d in docs for r in d["ranks"]})
    if len(ranks) != sum(len(d["ranks"]) for d in docs):
        raise ValueError("merge_results: a rank appears in more than one document")
    merged = dict(base, ranks=ranks, records=records, seconds=max(d["seconds"] for d in docs))
    merged["summary"] = summarize(records, bool(base["config"]["shared_experts"]))
    return merged


def write_json(doc: dict, path: str) -> None:
    """Atomic write: a temporary file in the same directory, then rename."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True, allow_nan=True)
            f.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be read by everyone
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
