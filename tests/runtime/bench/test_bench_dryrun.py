"""The whole harness end to end on the CPU (runner -> assemble -> report), without a GPU."""
import json

from gcmoe_runtime.bench.protocol import ProtocolConfig
from gcmoe_runtime.bench.report import write_all
from gcmoe_runtime.bench.routing import Layout
from gcmoe_runtime.bench.runner import SweepConfig, run_sweep
from gcmoe_runtime.bench.shapes import ModelShape

TINY = ModelShape("test-tiny", 512, 256, 16, 4, shared_experts=1, shared_k_group=128)


def test_cpu_dry_run_one_rank_share(tmp_path):
    cfg = SweepConfig(models=[TINY], impls=["torch-bf16", "torch-fp8"], layout=Layout(1, 4), tokens=(1, 8),
                      shared=True, protocol=ProtocolConfig(replays_per_window=2, warmup_windows=1, measured_windows=3),
                      device="cpu", command="test")
    res = run_sweep(cfg)
    assert res["protocol"]["deviation"].startswith("CPU dry run")
    assert res["gate"] is None and res["floor"] is None
    pts = res["models"][0]["points"]
    bf = pts[1]["impls"]["torch-bf16"]
    assert bf["status"] == "ok" and len(bf["per_rank"][0]["measured_us"]) == 3
    assert bf["per_rank"][0]["output_finite"]
    assert pts[1]["impls"]["torch-fp8"]["status"] == "skipped"
    assert pts[1]["model"]["flops"] == 6 * (pts[1]["ranks"][0]["assignments"] + 8) * 512 * 256
    files = write_all(res, tmp_path)
    assert {f.name for f in files} == {"results.json", "results.md", "test-tiny.png"}
    assert json.loads((tmp_path / "results.json").read_text())["layout"]["emulated_share"] is True
