"""Hopper FP4 tile byte layout: the lane permutation the in-register FP4->E4M3 decoder expects.

THE single definition of the SM90 routed-weight tile layout (the role2 kernel in gcmoe_build/kernels/sm90/
and the host transform both follow this module; change it here and both follow).

Operand: the weights are the **register A operand** of ``wgmma.mma_async.m64nNk32.f32.e4m3.e4m3`` (tokens are
N, from shared memory). PTX ISA "Register fragments for wgmma .m64nNk32, matrix A" (8-bit types): warp ``w``
of the warpgroup owns rows ``16w .. 16w+15``; lane ``l`` has ``group = l // 4``, ``tig = l % 4`` and holds 16
elements ``a0..a15`` (four 32-bit registers of four bytes each) at

    row(i) = 16w + group + 8 * ((i // 4) % 2)
    col(i) = 4 * tig + (i % 4) + 16 * (i // 8)          (within the K32 slice)

**Tile.** 64 rows x 128 K of E2M1 codes = 4096 bytes, one K128 step of one warpgroup. Thread ``t = 32w + l``
owns the 32 contiguous bytes ``[32t, 32t + 32)`` — two LDS.128 per K128 step (paper §4.4). Inside them, K32
slice ``j`` (0..3) is bytes ``[8j, 8j + 8)`` = two 32-bit words; word ``h`` (0, 1) holds elements
``a(8h) .. a(8h+7)`` with **byte b (0..3) = low nibble a(8h+b), high nibble a(8h+4+b)**. So one word decodes
into the two A registers ``{a(8h)..a(8h+3)}`` and ``{a(8h+4)..a(8h+7)}`` with
``lo = ((x << 4) & 0x80808080) | ((x << 2) & 0x1C1C1C1C)`` and the same on ``x >> 4`` (see
``sm90_window.decoder_e4m3_byte``: byte value = fp4 / 64).

**Tensor.** A weight matrix ``[E, N, K]`` (N multiple of 64, K multiple of 128) becomes
``uint8 [E, N/64, K/128, 4096]``: tiles of one 64-row slab are contiguous along K (one TMA/bulk copy per tile,
consecutive K128 steps consecutive in memory).

Everything is expressed through :func:`tile_nibble_source`, an explicit permutation of the 8192 nibble
positions of a tile; :func:`permute_tiles` applies it and :func:`unpermute_tiles` inverts it exactly.
"""
from __future__ import annotations

import functools

import torch

TILE_ROWS = 64
TILE_K = 128
TILE_BYTES = TILE_ROWS * TILE_K // 2
THREADS = 128


def a_fragment_coord(thread: int, i: int) -> tuple[int, int]:
    """(row, col-within-K32) of element ``a_i`` (0..15) of warpgroup thread ``thread`` (0..127)."""
    w, lane = divmod(thread, 32)
    group, tig = divmod(lane, 4)
    return 16 * w + group + 8 * ((i // 4) % 2), 4 * tig + (i % 4) + 16 * (i // 8)


def _element_of_byte_nibble(b: int, high: int) -> int:
    """Within one K32 slice's 8 bytes: which fragment element sits in byte b (0..7), nibble high (0/1)."""
    h, bb = divmod(b, 4)
    return 8 * h + 4 * high + bb


@functools.lru_cache(maxsize=None)
def _source_list() -> tuple:
    src = []
    for p in range(2 * TILE_BYTES):          # nibble position p: byte p // 2, high nibble iff p odd
        byte, high = divmod(p, 2)
        t, rem = divmod(byte, 32)
        j, b = divmod(rem, 8)
        row, col = a_fragment_coord(t, _element_of_byte_nibble(b, high))
        src.append(row * TILE_K + 32 * j + col)
    assert sorted(src) == list(range(TILE_ROWS * TILE_K)), "tile layout must be a permutation"
    return tuple(src)


def tile_nibble_source(device=None) -> torch.Tensor:
    """LongTensor [8192]: nibble position p of a tile holds tile element ``src[p]`` (= row * 128 + k)."""
    return torch.tensor(_source_list(), dtype=torch.long, device=device)


def tile_nibble_destination(device=None) -> torch.Tensor:
    """Inverse permutation: tile element ``row * 128 + k`` sits at nibble position ``dst[row * 128 + k]``."""
    src = tile_nibble_source(device)
    dst = torch.empty_like(src)
    dst[src] = torch.arange(src.numel(), device=src.device)
    return dst


def permute_tiles(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes ``uint8 [E, N, K]`` (one code per byte) -> tiles ``uint8 [E, N/64, K/128, 4096]``."""
    if codes.dim() != 3 or codes.shape[1] % TILE_ROWS or codes.shape[2] % TILE_K:
        raise ValueError(f"sm90 tiles: codes {tuple(codes.shape)} must be [E, N, K] with N % {TILE_ROWS} == 0 "
                         f"and K % {TILE_K} == 0")
    e, n, k = codes.shape
    t = codes.reshape(e, n // TILE_ROWS, TILE_ROWS, k // TILE_K, TILE_K).permute(0, 1, 3, 2, 4)
    flat = t.reshape(e, n // TILE_ROWS, k // TILE_K, TILE_ROWS * TILE_K)
    nib = flat[..., tile_nibble_source(codes.device)].to(torch.uint8)
    return nib[..., 0::2] | (nib[..., 1::2] << 4)


def unpermute_tiles(tiles: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`permute_tiles`: ``[E, N/64, K/128, 4096]`` -> codes ``uint8 [E, N, K]``."""
    if tiles.dim() != 4 or tiles.shape[-1] != TILE_BYTES:
        raise ValueError(f"sm90 tiles: expected [E, N/64, K/128, {TILE_BYTES}], got {tuple(tiles.shape)}")
    e, nt, kt, _ = tiles.shape
    nib = torch.stack([tiles & 15, tiles >> 4], dim=-1).reshape(e, nt, kt, 2 * TILE_BYTES)
    flat = nib[..., tile_nibble_destination(tiles.device)]
    t = flat.reshape(e, nt, kt, TILE_ROWS, TILE_K).permute(0, 1, 3, 2, 4)
    return t.reshape(e, nt * TILE_ROWS, kt * TILE_K).contiguous()


def thread_fragment_codes(tiles: torch.Tensor, thread: int, j: int) -> torch.Tensor:
    """What the kernel sees: the 16 codes a0..a15 of ``thread`` for K32 slice ``j`` of every tile, read back
    from the tile bytes the way the decoder does (``[..., 16]``). Used by tests to check the lane semantics."""
    chunk = tiles[..., 32 * thread + 8 * j: 32 * thread + 8 * j + 8]
    out = []
    for i in range(16):
        h, rem = divmod(i, 8)
        high, bb = divmod(rem, 4)
        byte = chunk[..., 4 * h + bb]
        out.append((byte >> 4) if high else (byte & 15))
    return torch.stack(out, dim=-1)


def decode_thread_k32(tiles: torch.Tensor, thread: int, j: int) -> torch.Tensor:
    """Simulate the kernel's decoder on the tile bytes: for each of the two 32-bit words of K32 slice ``j`` of
    ``thread``, ``lo = ((x << 4) & 0x80808080) | ((x << 2) & 0x1C1C1C1C)`` and the same on ``x >> 4`` give the
    E4M3 bytes of a(8h)..a(8h+3) and a(8h+4)..a(8h+7). Returns uint8 ``[..., 16]`` = A-register bytes a0..a15."""
    chunk = tiles[..., 32 * thread + 8 * j: 32 * thread + 8 * j + 8].to(torch.int64)
    out = []
    for h in range(2):
        x = sum(chunk[..., 4 * h + b] << (8 * b) for b in range(4))
        for word in (x, x >> 4):
            d = ((word << 4) & 0x80808080) | ((word << 2) & 0x1C1C1C1C)
            out += [(d >> (8 * b)) & 0xFF for b in range(4)]
    return torch.stack(out, dim=-1).to(torch.uint8)


# ------------------------------------------------------------------------------------------------------------
# Scale tiles (added by the role2 kernel author: the layout the SM90 role2 kernel reads its UE8M0 K32 scales in)
# ------------------------------------------------------------------------------------------------------------
SCALE_TILE_BYTES = TILE_ROWS * TILE_K // 32  # 256: 64 rows x 4 K32 scales of one K128 step


def scale_tile_position(row: int, k32: int) -> int:
    """Byte of a scale tile (64 rows x one K128 step) holding the scale of tile row ``row``, K32 slice ``k32``.

    Thread (warp ``w``, lane group ``g``) needs the scales of its rows ``16w + g`` and ``16w + g + 8`` (the two
    rows of its A fragment) for the four K32 slices: 8 contiguous bytes at ``8 * (8w + g)``, byte
    ``2 * k32 + half`` (half = 1 for the row g+8). One 8-byte load per K128 step and warpgroup slab.
    """
    w, r = divmod(row, 16)
    half, g = divmod(r, 8)
    return 8 * (8 * w + g) + 2 * k32 + half


def permute_scales(scales: torch.Tensor) -> torch.Tensor:
    """UE8M0 codes ``uint8 [E, N, K/32]`` (row order as the tiles) -> ``uint8 [E, N/64, K/128, 256]``."""
    if scales.dim() != 3 or scales.shape[1] % TILE_ROWS or scales.shape[2] % (TILE_K // 32):
        raise ValueError(f"sm90 scale tiles: scales {tuple(scales.shape)} must be [E, N, K/32] with N % {TILE_ROWS}"
                         f" == 0 and K/32 % {TILE_K // 32} == 0")
    e, n, k32 = scales.shape
    t = scales.reshape(e, n // TILE_ROWS, 4, 2, 8, k32 // 4, 4)  # [e, slab, w, half, g, k128, k32l]
    return t.permute(0, 1, 5, 2, 4, 6, 3).reshape(e, n // TILE_ROWS, k32 // 4, SCALE_TILE_BYTES).contiguous()


def unpermute_scales(tiles: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`permute_scales`."""
    if tiles.dim() != 4 or tiles.shape[-1] != SCALE_TILE_BYTES:
        raise ValueError(f"sm90 scale tiles: expected [E, N/64, K/128, {SCALE_TILE_BYTES}], got {tuple(tiles.shape)}")
    e, nt, kt, _ = tiles.shape
    t = tiles.reshape(e, nt, kt, 4, 8, 4, 2)  # [e, slab, k128, w, g, k32l, half]
    return t.permute(0, 1, 3, 6, 4, 2, 5).reshape(e, nt * TILE_ROWS, kt * 4).contiguous()
