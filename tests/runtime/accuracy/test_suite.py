"""The suite end to end: reference vs itself passes, broken implementations fail, per-rank mode merges,
JSON/table writers, CLI."""
import json

import pytest
import torch

from gcmoe_runtime.accuracy.__main__ import main
from gcmoe_runtime.accuracy.config import SuiteConfig, make_layer_weights
from gcmoe_runtime.accuracy.report import format_table, merge_results, result_document, write_json
from gcmoe_runtime.accuracy.suite import BF16ReferenceImplementation, ReferenceImplementation, run_suite
from gcmoe_runtime.numerics.reference import reference_moe_forward

CFG = SuiteConfig("small", 256, 128, 8, 3, shared_experts=1, world=2, capacity=16)
SOME = ["default_T1", "T0_all_ranks", "empty_rank0", "all_tokens_to_expert0", "zipf_1.5", "tokens_one_heavy_rank"]


@pytest.fixture(scope="module")
def layer():
    return make_layer_weights(CFG)


def test_reference_vs_itself_full_suite_passes(layer):
    res = run_suite(CFG, layer=layer)
    doc = result_document(res)
    s = doc["summary"]
    assert s["rank_cases"] == 94 and s["rank_cases_passed"] == 94, s["failures"]
    assert [s["categories"][c]["cases"] for c in ("default", "boundary", "asymmetric")] == [9, 23, 15]
    assert s["max_repeat_diff"] == 0
    assert s["categories"]["default"]["max_processed_diff"] < 1e-6
    assert 0.9 < s["categories"]["default"]["min_cos_ref_vs_bf16_orig"] < 1.0
    table = format_table(doc)
    assert "default" in table and "9/9" in table and "23/23" in table and "15/15" in table


class _Broken:
    """Plausible operator bugs the suite must catch."""

    def __init__(self, layer, bug):
        self.ref, self.bug, self.layer = ReferenceImplementation(layer), bug, layer
        self.calls = 0

    def __call__(self, inp):
        self.calls += 1
        if self.bug == "no_shared":
            return reference_moe_forward(inp.x_q, inp.x_scale, inp.topk_idx, inp.topk_weights, self.ref.experts,
                                         None, spec=self.layer.cfg.swiglu)
        if self.bug == "weights_ignored":
            return reference_moe_forward(inp.x_q, inp.x_scale, inp.topk_idx, torch.ones_like(inp.topk_weights),
                                         self.ref.experts, self.layer.shared, spec=self.layer.cfg.swiglu)
        if self.bug == "wrong_local_expert":  # rank-local id used as global id
            idx = inp.topk_idx % self.layer.cfg.experts_per_rank
            return reference_moe_forward(inp.x_q, inp.x_scale, idx, inp.topk_weights, self.ref.experts,
                                         self.layer.shared, spec=self.layer.cfg.swiglu)
        y = self.ref(inp)
        if self.bug == "nondeterministic" and self.calls % 2 == 0 and y.numel():
            y = (y.float() * 1.2).to(torch.bfloat16)
        return y


@pytest.mark.parametrize("bug", ["no_shared", "weights_ignored", "wrong_local_expert", "nondeterministic"])
def test_broken_implementations_fail(layer, bug):
    res = run_suite(CFG, _Broken(layer, bug), layer=layer, case_names=SOME)
    s = result_document(res)["summary"]
    assert s["rank_cases_passed"] < s["rank_cases"], bug
    if bug == "nondeterministic":
        assert s["max_repeat_diff"] > 0.002


def test_bf16_reference_as_implementation_fails_processed_diff(layer):
    res = run_suite(CFG, BF16ReferenceImplementation(layer, "original"), layer=layer, case_names=SOME)
    s = result_document(res)["summary"]
    assert any("processed diff" in f for f in s["failures"])


def test_per_rank_mode_merges_to_global(layer, tmp_path):
    docs = []
    for r in range(CFG.world):
        res = run_suite(CFG, layer=layer, ranks=[r], case_names=SOME)
        assert {rec["rank"] for rec in res.records} == {r}
        doc = result_document(res)
        write_json(doc, str(tmp_path / f"r{r}.json"))
        docs.append(json.load(open(tmp_path / f"r{r}.json")))
    merged = merge_results(docs)
    glob = result_document(run_suite(CFG, layer=layer, case_names=SOME))
    key = lambda r: (r["case"], r["rank"], r.get("cos_vs_bf16"), r.get("processed_diff"))  # noqa: E731
    assert [key(r) for r in merged["records"]] == [key(r) for r in glob["records"]]
    with pytest.raises(ValueError, match="more than one"):
        merge_results([docs[0], docs[0]])


def test_graph_impl_metric(layer):
    ref = ReferenceImplementation(layer)
    res = run_suite(CFG, ref, layer=layer, graph_impl=ref, case_names=SOME[:2])
    assert all(r["graph_vs_eager_diff"] in (0.0, None) or r["graph_vs_eager_diff"] == 0 for r in res.records)
    assert result_document(res)["summary"]["max_graph_vs_eager_diff"] == 0


def test_unknown_case_and_rank_errors(layer):
    with pytest.raises(ValueError, match="unknown case"):
        run_suite(CFG, layer=layer, case_names=["nope"])
    with pytest.raises(ValueError, match="outside world"):
        run_suite(CFG, layer=layer, ranks=[5])


def test_cli_writes_json_and_table(tmp_path, capsys):
    out, table = tmp_path / "a.json", tmp_path / "a.txt"
    rc = main(["--config", "test-tiny", "--cases", "default_T1", "T0_all_ranks", "--out", str(out),
               "--table", str(table), "--quiet"])
    assert rc == 0
    doc = json.load(open(out))
    assert doc["summary"]["rank_cases"] == 4 and doc["environment"]["torch"] == torch.__version__
    assert "Impl/BF16" in table.read_text() and "Impl/BF16" in capsys.readouterr().out


@pytest.mark.gpu
def test_suite_runs_on_gpu_and_matches_cpu():
    cfg = SuiteConfig("small-gpu", 256, 128, 8, 3, shared_experts=1, world=2, capacity=16)
    lay = make_layer_weights(cfg)
    cpu = run_suite(cfg, layer=lay, case_names=SOME)
    gpu = run_suite(cfg, layer=lay, device="cuda", case_names=SOME)
    assert all(r["passed"] for r in gpu.records)
    for a, b in zip(cpu.records, gpu.records):
        assert a["case"] == b["case"] and a["rank"] == b["rank"]
        if a.get("cos_vs_bf16") is not None:
            assert abs(a["cos_vs_bf16"] - b["cos_vs_bf16"]) < 1e-4


def test_run_suite_rank_checks_world(layer):
    from gcmoe_runtime.accuracy.suite import run_suite_rank
    res = run_suite_rank(CFG, ReferenceImplementation(layer), 1, 2, layer=layer, case_names=SOME[:1])
    assert {r["rank"] for r in res.records} == {1}
    with pytest.raises(ValueError, match="models P=2"):
        run_suite_rank(CFG, ReferenceImplementation(layer), 0, 4, layer=layer)


def test_cli_per_rank_files_merge(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run.json"
    for r in range(2):  # what torchrun --nproc-per-node 2 does: one process per rank, RANK/WORLD_SIZE set
        monkeypatch.setenv("RANK", str(r))
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert main(["--config", "test-tiny", "--per-rank", "--cases", "empty_rank0", "--out", str(out),
                     "--quiet"]) == 0
    files = [str(tmp_path / f"run.json.rank{r}") for r in range(2)]
    assert main(["--merge", *files, "--out", str(out)]) == 0
    doc = json.load(open(out))
    assert doc["ranks"] == [0, 1] and [r["rank"] for r in doc["records"]] == [0, 1]
    assert doc["records"][0]["tokens"] == 0 and doc["records"][1]["tokens"] == 16
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(SystemExit, match="WORLD_SIZE=4"):
        main(["--config", "test-tiny", "--per-rank", "--quiet"])
