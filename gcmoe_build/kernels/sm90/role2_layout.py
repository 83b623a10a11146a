"""Host-side weight layout the SM90 role2 kernels consume, and their FP32 quantised reference.

Pure numpy (+ torch for the reference); imports nothing from the DSL or from ``gcmoe_build``, so
the GPU machine (no CuTe DSL, no pydantic) can load this file directly. The packing belongs with
the Hopper weight transform in ``gcmoe_runtime/numerics/sm90_layout.py`` (numerics owner); it
lives here until that module adopts it. It composes with the window repack: the repack rewrites
the codes, the UE8M0 scales and the per-expert factor; this module only places bytes.

Layout (see :mod:`.role2_gemm` for the kernel side, :mod:`.fp4_decode` for the nibble rule):

* rows of an expert are cut in tiles of 256; local row ``r`` -> warpgroup ``wg = r // 128``,
  slot ``s = (r % 128) // 64``, warp ``w = (r % 64) // 16``, half ``hh = (r % 16) // 8``,
  group ``g = r % 8``;
* codes: ``w[e][tile][k32][thread = wg*128 + w*32 + g*4 + t][16 B]``; byte ``s*8 + kw*4 + j`` holds
  the code of (row hh=0, k = kw*16 + 4t + j) in its low nibble and of (row hh=1, same k) in its
  high nibble;
* scales: ``ws[e][tile][k128][wg*4 + w][g][16 B]``; byte ``k32l*4 + s*2 + hh``.
"""
from __future__ import annotations

import numpy as np

ROWS_PER_CTA = 256
#: E2M1 code -> value
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                       -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def _check(codes: np.ndarray, scales: np.ndarray):
    if codes.dtype != np.uint8 or codes.ndim != 3:
        raise ValueError(f"codes must be uint8 [E, R, K], got {codes.dtype} {codes.shape}")
    e, r, k = codes.shape
    if r % ROWS_PER_CTA or k % 128:
        raise ValueError(f"codes shape {codes.shape}: rows must be a multiple of 256 and K of 128")
    if int(codes.max(initial=0)) > 15:
        raise ValueError("codes must be 4-bit (0..15)")
    if scales.shape != (e, r, k // 32) or scales.dtype != np.uint8:
        raise ValueError(f"scales must be uint8 [E, R, K/32] = {(e, r, k // 32)}, got {scales.dtype} {scales.shape}")


def pack_weights(codes: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes uint8 [E,R,K] in 0..15, UE8M0 scales uint8 [E,R,K/32]) -> (w, ws) flat uint8 arrays."""
    _check(codes, scales)
    e, r, k = codes.shape
    nt, nk32, nk128 = r // 256, k // 32, k // 128
    # rows -> (tile, wg, s, w, hh, g); k -> (k32, kw, t, j)
    c = codes.reshape(e, nt, 2, 2, 4, 2, 8, nk32, 2, 4, 4)
    byte = c[:, :, :, :, :, 0] | (c[:, :, :, :, :, 1] << 4)  # [e,nt,wg,s,w,g,k32,kw,t,j]
    w = byte.transpose(0, 1, 6, 2, 4, 5, 8, 3, 7, 9)  # [e,nt,k32,wg,w,g,t,s,kw,j]
    s = scales.reshape(e, nt, 2, 2, 4, 2, 8, nk128, 4)  # [e,nt,wg,s,w,hh,g,k128,k32l]
    ws = s.transpose(0, 1, 7, 2, 4, 6, 8, 3, 5)  # [e,nt,k128,wg,w,g,k32l,s,hh]
    return np.ascontiguousarray(w).reshape(-1), np.ascontiguousarray(ws).reshape(-1)


def w1_rows_from_gate_up(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """Order [E, I, ...] gate and up rows into the kernel's W1 row order [E, 2I, ...]: tile j,
    warpgroup wg: slot A = gate rows 128j+64wg..+64, slot B = the same up rows."""
    if gate.shape != up.shape or gate.shape[1] % 128:
        raise ValueError(f"gate {gate.shape} / up {up.shape}: equal shapes with I a multiple of 128 required")
    e, i = gate.shape[:2]
    rest = gate.shape[2:]
    g = gate.reshape(e, i // 128, 2, 1, 64, *rest)
    u = up.reshape(e, i // 128, 2, 1, 64, *rest)
    return np.concatenate([g, u], axis=3).reshape(e, 2 * i, *rest)


def dequant_weights(codes: np.ndarray, scales: np.ndarray, efac: np.ndarray) -> np.ndarray:
    """FP32 weights [E,R,K] = fp4(code) * 2**(scale-127) * efac[e] / 64 (the kernel's contract)."""
    e, r, k = codes.shape
    sc = np.ldexp(np.float32(1.0), scales.astype(np.int32) - 127).astype(np.float32)
    sc = np.where(scales == 0, np.float32(0.0), sc)  # the kernel builds 2**(b-127) from bits: b=0 -> 0
    w = FP4_VALUES[codes] * np.repeat(sc, 32, axis=2)
    return (w * (efac.astype(np.float32)[:, None, None] / np.float32(64.0))).astype(np.float32)


def ue8m0_scale_for(amax):
    """Mirror of the kernel's requant scale: 2**ceil(log2(amax/448)) (FP32 division), amax=0 -> 1."""
    import torch

    s = (amax.float() / 448.0).contiguous()
    bits = s.view(torch.int32)
    e = (bits >> 23) & 0xFF
    e = e + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    e = e.clamp(1, 253)
    e = torch.where(amax == 0, torch.full_like(e, 127), e)
    return (e << 23).view(torch.float32), ((254 - e) << 23).view(torch.float32)


def reference_w1(act_q, act_scale, w1, rw, ntok, alpha: float, clamp: float):
    """FP32 quantised reference of one ring block's W1 stage.

    act_q: torch float32 [BM, H] (E4M3 values), act_scale [BM, H/128], w1 [2I, H] in the kernel's
    row order (dequantised, FP32), rw [BM]. Returns (y_q float32 [BM, I] E4M3 values, scale [BM, I/128])
    with padded tokens (>= ntok) zero."""
    import torch

    a = act_q * act_scale.repeat_interleave(128, dim=1)
    acc = a @ w1.t()  # [BM, 2I]
    bm, r2 = acc.shape
    acc = acc.view(bm, r2 // 256, 2, 2, 64)  # [tok, tile, wg, slot, 64]
    gate = acc[:, :, :, 0, :].reshape(bm, -1).to(torch.bfloat16).float()
    up = acc[:, :, :, 1, :].reshape(bm, -1).to(torch.bfloat16).float()
    gate = gate.clamp(max=clamp)
    up = up.clamp(-clamp, clamp)
    y = gate * torch.sigmoid(alpha * gate) * up * rw[:, None]
    y[ntok:] = 0
    i = y.shape[1]
    amax = y.abs().view(bm, i // 128, 128).amax(dim=2)
    scale, inv = ue8m0_scale_for(amax)
    yq = (y.view(bm, i // 128, 128) * inv[:, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    return yq.view(bm, i), scale


def reference_w2(l2_q, l2_scale, w2):
    """FP32 reference of W2: [BM, H] = (l2_q * scale per 128) @ w2.t()."""
    a = l2_q * l2_scale.repeat_interleave(128, dim=1)
    return a @ w2.t()
