"""The transforms run on the caller's device (GPU) and give the same bytes as on CPU."""
import pytest
import torch

from gcmoe_runtime.numerics.quant import quantize_mxfp4
from gcmoe_runtime.numerics.reference import RoutedWeights
from gcmoe_runtime.numerics.shared_scales import stage_shared_act_scales
from gcmoe_runtime.numerics.transforms_sm90 import transform_weights_sm90
from gcmoe_runtime.numerics.transforms_sm100 import transform_weights_sm100


@pytest.mark.gpu
def test_transforms_on_gpu_match_cpu():
    g = torch.Generator().manual_seed(0)
    a, b = quantize_mxfp4(torch.randn(2, 256, 256, generator=g))
    c, d = quantize_mxfp4(torch.randn(2, 256, 128, generator=g))
    cpu = RoutedWeights(a, b, c, d)
    gpu = RoutedWeights(a.cuda(), b.cuda(), c.cuda(), d.cuda())
    # quantising on the GPU gives the same bytes as on the CPU
    a2, b2 = quantize_mxfp4(torch.randn(2, 256, 256, generator=torch.Generator().manual_seed(0)).cuda())
    assert torch.equal(a2.cpu(), a) and torch.equal(b2.cpu(), b)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        m90 = transform_weights_sm90(gpu)
        m100 = transform_weights_sm100(gpu)
    s.synchronize()
    r90, r100 = transform_weights_sm90(cpu), transform_weights_sm100(cpu)
    for x, y in zip(m90, r90):
        assert x.tiles.is_cuda and torch.equal(x.tiles.cpu(), y.tiles) and torch.equal(x.scales.cpu(), y.scales)
        assert torch.equal(x.dequantize().cpu(), y.dequantize())
    for x, y in zip(m100, r100):
        assert torch.equal(x.tiles.cpu(), y.tiles) and torch.equal(x.scales.cpu(), y.scales)
    sc = torch.randint(0, 2**31 - 1, (40, 8), dtype=torch.int32)
    assert torch.equal(stage_shared_act_scales(sc.cuda(), 16, 64).cpu(), stage_shared_act_scales(sc, 16, 64))
