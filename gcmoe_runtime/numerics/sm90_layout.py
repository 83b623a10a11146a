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
``lo_b = a(8h+b)`` (row g) and ``hi_b = a(8h+4+b)`` (row g+8), b = 0..3, which decode into the two A registers
``{a(8h)..a(8h+3)}`` and ``{a(8h+4)..a(8h+7)}``. **Bits of a word** (the exponent-folding decoder's order,
``sm90_window.FOLD_LUT``): magnitude (code & 7) of ``lo_b`` in bits ``4b..4b+2``, of ``hi_b`` in bits
``16+4b..16+4b+2``; sign of ``lo_b`` at bit ``8b+7``, of ``hi_b`` at bit ``8b+3``. So
``lo = prmt(lut_g, x & 0x7777) | (x & 0x80808080)`` and ``hi = prmt(lut_g8, (x >> 16) & 0x7777) |
((x << 4) & 0x80808080)``: four selector nibbles per register, signs already at each byte's bit 7.
(:data:`WORD_MAG_SRC` / :data:`WORD_SIGN_SRC` give the word's nibbles from the fragment order.)

**Tensor.** A weight matrix ``[E, N, K]`` (N multiple of 64, K multiple of 128) becomes
``uint8 [E, N/64, K/128, 4096]``: tiles of one 64-row slab are contiguous along K (one TMA/bulk copy per tile,
consecutive K128 steps consecutive in memory).

**K order inside a K128 step** (``k_interleave``, the manifest target's ``k_interleave``; session 50). Plain: K32
slice ``j`` of a step holds the step's columns ``[32j, 32j + 32)``, so every quad thread touches all four K32 scale
blocks and builds a decode table pair for each. Interleaved: slice ``j``'s position ``p = 16h + 4t + c`` holds column
``32t + 8j + 4h + c`` (:func:`k128_column`), so the positions a thread with ``tig = t`` owns come, in all four
slices, from K32 block ``t`` alone: one table pair per row and step. The activations must follow (the wgmma's B
operand pairs slice ``j``'s position ``p`` with byte ``32j + p`` of the token's K128 line): physical 32-bit word
``8j + 4h + t`` of a line holds original word ``8t + 2j + h`` (:func:`k128_word_source`; :func:`interleave_k128` is
the host mirror). The activation scales (per K128) and the weight scale tiles are unchanged. W2's activations are
W1's output: a ``k_interleave`` build's W1 epilogue writes each ``l2_x`` row's 128-column line in the interleaved
order already (column ``c`` at byte :func:`k128_position` ``(c)``). W1's (role1's ring rows) are permuted by one of
two parties, by the tile's BM (``heuristics.sm90_role1_interleaves_rows``, session 51): role2 permutes each
activation chunk in shared memory after it lands (once per task that reads it: cheap where the K loop waits on the
weight stream, BM 8-32), or role1 permutes each row in its staging buffer before the bulk store (once per row: BM
48-80, whose K loops are issue-bound and paid the chunk-top permutation on every task), each lane moving word
:func:`k128_word_source_bits` of every line.

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
# Nibble k (0..7) of a word = magnitude of fragment nibble WORD_MAG_SRC[k] | sign of WORD_SIGN_SRC[k], where
# fragment nibble 2b is lo_b and 2b+1 is hi_b (the word's elements in a(8h+b), a(8h+4+b) order).
WORD_MAG_SRC = (0, 2, 4, 6, 1, 3, 5, 7)
WORD_SIGN_SRC = (1, 0, 3, 2, 5, 4, 7, 6)


def fold_word_nibbles(frag: torch.Tensor) -> torch.Tensor:
    """``uint8 [..., 8]`` fragment-order codes of a word (lo_0, hi_0, lo_1, hi_1, ...) -> its 8 nibbles in bit order."""
    return (frag[..., list(WORD_MAG_SRC)] & 7) | (frag[..., list(WORD_SIGN_SRC)] & 8)


def unfold_word_nibbles(nib: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`fold_word_nibbles`."""
    out = torch.empty_like(nib)
    out[..., list(WORD_MAG_SRC)] = nib & 7
    out[..., list(WORD_SIGN_SRC)] |= nib & 8
    return out


def k128_column(j: int, p: int, k_interleave: bool = False) -> int:
    """Column of a K128 step (0..127) that K32 slice ``j`` (0..3), position ``p`` (0..31) holds (module docstring,
    "K order inside a K128 step")."""
    if not k_interleave:
        return 32 * j + p
    h, r = divmod(p, 16)
    t, c = divmod(r, 4)
    return 32 * t + 8 * j + 4 * h + c


def k128_word_source(word: int, k_interleave: bool = True) -> int:
    """The original 32-bit word (0..31) of a token's K128 line that physical word ``word`` holds: ``8t + 2j + h``
    for ``word = 8j + 4h + t``."""
    return k128_column(word // 8, 4 * (word % 8), k_interleave) // 4


def k128_word_source_bits(word):
    """:func:`k128_word_source` in bit operations only (``word`` an int or a kernel's Int32 lane): physical word
    ``8j + 4h + t`` <- ``8t + 2j + h``."""
    return ((word & 3) << 3) | ((word >> 3) << 1) | ((word >> 2) & 1)


def k128_position(column: int, k_interleave: bool = True) -> int:
    """Inverse of :func:`k128_column`: the byte of a K128 line (0..127) that holds ``column`` (``32j + p`` for the
    slice ``j`` and position ``p`` holding it). Interleaved, column ``32t + 8j + 4h + c`` sits at ``32j + 16h + 4t +
    c``."""
    if not k_interleave:
        return column
    t, r = divmod(column, 32)
    j, r = divmod(r, 8)
    h, c = divmod(r, 4)
    return 32 * j + 16 * h + 4 * t + c


def k128_epilogue_position(slab, warp, g):
    """:func:`k128_position` of column ``32 slab + 8 warp + g`` (slab, warp 0..3, g 0..7: where the role2 W1 epilogue's
    thread of warp ``warp``, lane group ``g`` has its value of slab ``slab``), without a branch, so the kernel runs the
    same integer arithmetic on its own values: ``32 warp + 16 (g >> 2) + 4 slab + (g & 3)``."""
    return 32 * warp + 16 * (g >> 2) + 4 * slab + (g & 3)


@functools.lru_cache(maxsize=None)
def _k128_line_index(inverse: bool) -> tuple:
    """Byte ``b`` of an interleaved K128 line takes original byte ``index[b]`` (``inverse``: the other way round)."""
    if inverse:
        return tuple(k128_position(c) for c in range(TILE_K))
    return tuple(k128_column(b // 32, b % 32, True) for b in range(TILE_K))


def _permute_k128_lines(x: torch.Tensor, inverse: bool, what: str) -> torch.Tensor:
    if x.shape[-1] % TILE_K:
        raise ValueError(f"{what}: K={x.shape[-1]} must be a multiple of {TILE_K}")
    idx = torch.tensor(_k128_line_index(inverse), dtype=torch.long, device=x.device)
    lines = x.reshape(*x.shape[:-1], x.shape[-1] // TILE_K, TILE_K)
    return lines[..., idx].reshape(x.shape)


def interleave_k128(x: torch.Tensor) -> torch.Tensor:
    """Activations ``[..., K]`` (one byte per E4M3 element, K a multiple of 128) in the interleaved K order: byte
    ``b`` of each K128 line holds original byte ``k128_column(b // 32, b % 32, True)``. What the role2 kernel's
    in-place chunk permutation (``role2_chunks.interleave_chunk``) and role1's row permutation produce; host mirror for
    tests and harnesses."""
    return _permute_k128_lines(x, False, "interleave_k128")


def deinterleave_k128(x: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`interleave_k128` (e.g. the role2 W1 epilogue's ``l2_x`` rows of a ``k_interleave`` build back
    in the plain K order)."""
    return _permute_k128_lines(x, True, "deinterleave_k128")


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
def _source_list(k_interleave: bool = False) -> tuple:
    src = []
    for p in range(2 * TILE_BYTES):          # nibble position p: byte p // 2, high nibble iff p odd
        byte, high = divmod(p, 2)
        t, rem = divmod(byte, 32)
        j, b = divmod(rem, 8)
        row, col = a_fragment_coord(t, _element_of_byte_nibble(b, high))
        src.append(row * TILE_K + k128_column(j, col, k_interleave))
    assert sorted(src) == list(range(TILE_ROWS * TILE_K)), "tile layout must be a permutation"
    return tuple(src)


def tile_nibble_source(device=None, k_interleave: bool = False) -> torch.Tensor:
    """LongTensor [8192]: nibble position p of a tile holds tile element ``src[p]`` (= row * 128 + k)."""
    return torch.tensor(_source_list(bool(k_interleave)), dtype=torch.long, device=device)


def tile_nibble_destination(device=None, k_interleave: bool = False) -> torch.Tensor:
    """Inverse permutation: tile element ``row * 128 + k`` sits at nibble position ``dst[row * 128 + k]``."""
    src = tile_nibble_source(device, k_interleave)
    dst = torch.empty_like(src)
    dst[src] = torch.arange(src.numel(), device=src.device)
    return dst


#: codes (one per byte) the tile (un)permutation transforms at once: its gathers and nibble folds make several
#: temporaries of a chunk's size, so a whole model's matrix at once (DSV-4.1-Flash's W1 at P = 1: 9 GB of codes) ran
#: an H100 out of memory (session 57); the result is the same chunked or not
PERMUTE_CHUNK_CODES = 1 << 28


def _expert_chunks(experts: int, codes_per_expert: int):
    step = max(1, PERMUTE_CHUNK_CODES // max(1, codes_per_expert))
    return (slice(e0, min(e0 + step, experts)) for e0 in range(0, experts, step))


def permute_tiles(codes: torch.Tensor, k_interleave: bool = False) -> torch.Tensor:
    """E2M1 codes ``uint8 [E, N, K]`` (one code per byte) -> tiles ``uint8 [E, N/64, K/128, 4096]`` (``k_interleave``:
    the interleaved K order inside each step, module docstring); a few experts at a time
    (:data:`PERMUTE_CHUNK_CODES`)."""
    if codes.dim() != 3 or codes.shape[1] % TILE_ROWS or codes.shape[2] % TILE_K:
        raise ValueError(f"sm90 tiles: codes {tuple(codes.shape)} must be [E, N, K] with N % {TILE_ROWS} == 0 "
                         f"and K % {TILE_K} == 0")
    e, n, k = codes.shape
    src = tile_nibble_source(codes.device, k_interleave)
    out = torch.empty(e, n // TILE_ROWS, k // TILE_K, TILE_BYTES, dtype=torch.uint8, device=codes.device)
    for sl in _expert_chunks(e, n * k):
        c = codes[sl]
        t = c.reshape(c.shape[0], n // TILE_ROWS, TILE_ROWS, k // TILE_K, TILE_K).permute(0, 1, 3, 2, 4)
        flat = t.reshape(c.shape[0], n // TILE_ROWS, k // TILE_K, TILE_ROWS * TILE_K)
        nib = flat[..., src].to(torch.uint8)
        nib = fold_word_nibbles(nib.reshape(*nib.shape[:-1], -1, 8)).reshape(nib.shape)
        out[sl] = nib[..., 0::2] | (nib[..., 1::2] << 4)
    return out


def unpermute_tiles(tiles: torch.Tensor, k_interleave: bool = False) -> torch.Tensor:
    """Inverse of :func:`permute_tiles`: ``[E, N/64, K/128, 4096]`` -> codes ``uint8 [E, N, K]``."""
    if tiles.dim() != 4 or tiles.shape[-1] != TILE_BYTES:
        raise ValueError(f"sm90 tiles: expected [E, N/64, K/128, {TILE_BYTES}], got {tuple(tiles.shape)}")
    e, nt, kt, _ = tiles.shape
    dst = tile_nibble_destination(tiles.device, k_interleave)
    out = torch.empty(e, nt * TILE_ROWS, kt * TILE_K, dtype=tiles.dtype, device=tiles.device)
    for sl in _expert_chunks(e, nt * kt * 2 * TILE_BYTES):
        x = tiles[sl]
        nib = torch.stack([x & 15, x >> 4], dim=-1).reshape(x.shape[0], nt, kt, 2 * TILE_BYTES // 8, 8)
        nib = unfold_word_nibbles(nib).reshape(x.shape[0], nt, kt, 2 * TILE_BYTES)
        flat = nib[..., dst]
        t = flat.reshape(x.shape[0], nt, kt, TILE_ROWS, TILE_K).permute(0, 1, 3, 2, 4)
        out[sl] = t.reshape(x.shape[0], nt * TILE_ROWS, kt * TILE_K)
    return out


def _thread_words(tiles: torch.Tensor, thread: int, j: int) -> torch.Tensor:
    """The two 32-bit words (int64 ``[..., 2]``) of K32 slice ``j`` of ``thread``, as the kernel loads them."""
    chunk = tiles[..., 32 * thread + 8 * j: 32 * thread + 8 * j + 8].to(torch.int64)
    return torch.stack([sum(chunk[..., 4 * h + b] << (8 * b) for b in range(4)) for h in range(2)], dim=-1)


def thread_fragment_codes(tiles: torch.Tensor, thread: int, j: int) -> torch.Tensor:
    """What the kernel sees: the 16 codes a0..a15 of ``thread`` for K32 slice ``j`` of every tile, read back
    from the tile bytes the way the decoder does (``[..., 16]``). Used by tests to check the lane semantics."""
    words = _thread_words(tiles, thread, j)
    out = []
    for h in range(2):
        x = words[..., h]
        nib = torch.stack([(x >> (4 * k)) & 15 for k in range(8)], dim=-1).to(torch.uint8)
        frag = unfold_word_nibbles(nib)  # lo_0, hi_0, lo_1, hi_1, ...
        out += [frag[..., 2 * b] for b in range(4)] + [frag[..., 2 * b + 1] for b in range(4)]
    return torch.stack(out, dim=-1)


def decode_thread_k32(tiles: torch.Tensor, thread: int, j: int, r_g=0, r_g8=0) -> torch.Tensor:
    """Simulate the kernel's folding decoder on the tile bytes: for each of the two 32-bit words ``x`` of K32 slice
    ``j`` of ``thread``, ``lo = prmt(lut(r_g), x & 0x7777) | (x & 0x80808080)`` and ``hi = prmt(lut(r_g8),
    (x >> 16) & 0x7777) | ((x << 4) & 0x80808080)`` (``r_g``, ``r_g8``: the relative exponents of the thread's rows
    g and g+8 for this K32). Returns uint8 ``[..., 16]`` = A-register bytes a0..a15."""
    from .sm90_window import fold_lut_words

    words = _thread_words(tiles, thread, j)
    luts = []
    for r in (r_g, r_g8):
        l0, l1 = fold_lut_words(int(r))
        luts.append([(l0 >> (8 * i)) & 0xFF for i in range(4)] + [(l1 >> (8 * i)) & 0xFF for i in range(4)])
    out = []
    for h in range(2):
        x = words[..., h]
        for lut, sel, sign in ((luts[0], x, x & 0x80808080), (luts[1], x >> 16, (x << 4) & 0x80808080)):
            table = torch.tensor(lut, dtype=torch.int64, device=x.device)
            out += [table[(sel >> (4 * b)) & 7] | ((sign >> (8 * b)) & 0xFF) for b in range(4)]
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
