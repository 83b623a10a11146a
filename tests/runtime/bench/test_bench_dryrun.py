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


class _NanImpl:
    """Writes NaN: its latency must be recorded as invalid, not as a result."""
    name, precision = "nan-writer", "none"

    def unsupported(self, shape, layout, shared):
        return None

    def load_model(self, shape, layout, ctx, shared):
        pass

    def prepare(self, point):
        import torch

        from gcmoe_runtime.bench.impl import Prepared

        y = torch.empty(point.tokens_per_rank, TINY.hidden)
        return Prepared(step=lambda: y.fill_(float("nan")), output=y)

    def unload_model(self):
        pass

    def describe(self):
        return {"name": self.name, "precision": self.precision}


def test_non_finite_output_marks_the_point_invalid():
    from gcmoe_runtime.bench.impl import register

    register("nan-writer", _NanImpl)
    cfg = SweepConfig(models=[TINY], impls=["torch-bf16", "nan-writer"], layout=Layout(1, 1), tokens=(2,),
                      protocol=ProtocolConfig(replays_per_window=1, warmup_windows=0, measured_windows=1),
                      device="cpu", command="test")
    it = run_sweep(cfg)["models"][0]["points"][0]["impls"]
    assert it["torch-bf16"]["status"] == "ok"
    assert it["nan-writer"]["status"] == "invalid" and "non-finite" in it["nan-writer"]["reason"]
    assert it["nan-writer"]["per_rank"][0]["cos_vs_first"] != it["nan-writer"]["per_rank"][0]["cos_vs_first"]  # NaN
