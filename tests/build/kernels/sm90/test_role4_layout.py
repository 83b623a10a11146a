"""CPU: role4's index math (how a thread addresses the transformed FP8 tiles in role4_mma.WeightRing / k128_mma_fp8, and
how the W1 epilogue maps accumulator rows to intermediate columns) agrees with the host transform
(gcmoe_runtime.numerics.transforms_sm90_shared): rebuilding both shared GEMMs from the tiles the way the kernel
reads them reproduces the numerics reference's shared-expert partial bit for bit (both recipes). This checks the
layout contract on CPU; the kernel itself runs in test_role4_gpu.py."""
from __future__ import annotations

import pytest
import torch

from gcmoe_runtime.numerics.quant import (dequantize_e4m3_ue8m0, quantize_e4m3_fp32_k128, quantize_e4m3_ue8m0,
                                          quantize_fp8_weight)
from gcmoe_runtime.numerics.reference import (FloatExperts, SharedWeights, SwiGLUSpec, _bf16, dequantize_activations,
                                              reference_moe_forward)
from gcmoe_runtime.numerics.recipes import SM90_INTERMEDIATE_SCALE_GROUP
from gcmoe_runtime.numerics.sm90_layout import a_fragment_coord
from gcmoe_runtime.numerics.transforms_sm90_shared import transform_shared_sm90

H, I, K, T = 512, 256, 4, 37


def _kernel_view(tiles, scales, rows, k):
    """The FP32 weight [rows, k] as role4's threads see it: thread tw of warpgroup slab reads code byte
    ``tw*64 + 16q + 4r + b`` of tile (slab, kb) as element a_(4r+b) of K32 q (register r, byte b), and scale byte
    ``(8w + g)*8 + 2q + hh`` (word q//2, byte (q%2)*2 + hh) for row 16w + g + 8hh."""
    pos, prow, pcol = [], [], []
    for tw in range(128):
        for q in range(4):
            for r in range(4):
                for b in range(4):
                    row, col = a_fragment_coord(tw, 4 * r + b)
                    pos.append(tw * 64 + 16 * q + 4 * r + b)
                    prow.append(row)
                    pcol.append(32 * q + col)
    spos, srow, sq = [], [], []
    for w in range(4):
        for g in range(8):
            for q in range(4):
                for hh in range(2):
                    spos.append((8 * w + g) * 8 + 4 * (q // 2) + (q % 2) * 2 + hh)
                    srow.append(16 * w + g + 8 * hh)
                    sq.append(q)
    ns, nkb = rows // 64, k // 128
    vals = tiles.view(torch.float8_e4m3fn).float()
    W = torch.zeros(ns, nkb, 64, 128)
    W[:, :, torch.tensor(prow), torch.tensor(pcol)] = vals[:, :, torch.tensor(pos)]
    S = torch.zeros(ns, nkb, 64, 4)
    codes = scales[:, :, torch.tensor(spos)].long()
    S[:, :, torch.tensor(srow), torch.tensor(sq)] = torch.ldexp(torch.ones(codes.shape), codes - 127)
    W = W * S.repeat_interleave(32, dim=-1)
    return W.permute(0, 2, 1, 3).reshape(rows, k)


@pytest.mark.parametrize("recipe", [(1, 128, 128), (1, 1, 32)])
def test_kernel_view_of_the_tiles_reproduces_the_reference(recipe):
    g = torch.Generator().manual_seed(5)
    w1 = torch.randn(2 * I, H, generator=g) * (2.0 / H ** 0.5)
    w2 = torch.randn(H, I, generator=g) / I ** 0.5
    q1, s1 = quantize_fp8_weight(w1, recipe)
    q2, s2 = quantize_fp8_weight(w2, recipe)
    sw = transform_shared_sm90(q1, s1, q2, s2, recipe)
    xq, xs = quantize_e4m3_fp32_k128(torch.randn(T, H, generator=g) * 3.0)
    none = FloatExperts(torch.zeros(1, 2, 2), torch.zeros(1, 2, 1))
    _, parts = reference_moe_forward(xq, xs, torch.full((T, K), -1, dtype=torch.int32), torch.zeros(T, K), none,
                                     shared=SharedWeights(q1, s1, q2, s2, recipe), spec=SwiGLUSpec(1.0, 10.0),
                                     return_partials=True)
    acc = dequantize_activations(xq, xs) @ _kernel_view(sw.w1_tiles, sw.w1_scales, 2 * I, H).t()
    # W1 epilogue: tile, slab, warp, g -> gate row 256 tile + 64 slab + 16 warp + g (up: + 8), column
    # 128 tile + 32 slab + 8 warp + g
    cols, grows = [], []
    for tile in range(2 * I // 256):
        for slab in range(4):
            for warp in range(4):
                for gg in range(8):
                    grows.append(256 * tile + 64 * slab + 16 * warp + gg)
                    cols.append(128 * tile + 32 * slab + 8 * warp + gg)
    gate = _bf16(acc[:, grows]).clamp(max=10.0)
    up = _bf16(acc[:, [r + 8 for r in grows]]).clamp(-10.0, 10.0)
    inter = torch.zeros(T, I)
    inter[:, cols] = gate * torch.sigmoid(gate) * up
    qi, ci = quantize_e4m3_ue8m0(inter, SM90_INTERMEDIATE_SCALE_GROUP, name="intermediate")
    inter_q = dequantize_e4m3_ue8m0(qi, ci, SM90_INTERMEDIATE_SCALE_GROUP)
    out = (inter_q @ _kernel_view(sw.w2_tiles, sw.w2_scales, H, I).t()).to(torch.bfloat16)
    assert torch.equal(out, parts[:, K])
