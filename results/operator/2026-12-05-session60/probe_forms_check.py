"""One form's GPU check at the probe test's parameters (iters 16, every SM, task (8, 500)), in its own process."""
import sys
import torch
sys.path.insert(0, "tests/build/kernels/sm90")
from pathlib import Path
from bench_kloop import checked_sums, make_weights
from tests.build.kernels.sm90.role2_harness import Role2Kernels

form = sys.argv[1]
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 16
k = Role2Kernels(Path("build/kloop_probe"))
sms = torch.cuda.get_device_properties(0).multi_processor_count
codes, scales, tile_sums = make_weights(torch, sms * 4 * iters, torch.Generator(device="cuda").manual_seed(1))
ref = tile_sums.view(sms, 4 * iters).sum(1) * 64
got, err = checked_sums(torch, k, form, codes, scales, ref, iters, sms, (8, 500))
print(form, iters, "ok", err)
