"""Self-test kernel ``selftest_tma_peer``: a TMA tensor map and the peer descriptor, end to end.

Small but real: it exercises exactly the ABI features the role kernels need (a by-value TMA
descriptor, the 592-byte peer descriptor, a dynamic-shape scalar, a pointer, a u64 scalar) so the
pipeline and the runtime can be tested before the role kernels exist.

Block ``b`` (``grid = (tiles, 1, 1)``, 128 threads) TMA-loads rows ``[64 b, 64 b + 64)`` x C
bytes of the uint8 matrix ``a`` (``rows`` x C, row-major; C = 64, or 128 with the 128-byte
swizzle) into shared memory, waits on an
mbarrier (bounded: traps after ``timeout_ns``), then writes ``out`` (Int64, ``tiles * 128``):

* thread ``t < 64``:  ``out[128 b + t] = sum of the C bytes of row 64 b + t`` (0 for rows past
  ``rows``: TMA fills out-of-bounds with zeros);
* thread ``t >= 64``: ``out[128 b + t] = base + offsets[t - 64] + rank`` from the peer descriptor.

Variant params: ``tiles`` (int, 1..1024, default 1) — the static length of ``out``; ``swizzle``
(0, 64 or 128; default 0) — the shared-memory swizzle of the tile, so the runtime's
cuTensorMapEncodeTiled path is tested with swizzled descriptors too.
"""
# no `from __future__ import annotations`: the DSL evaluates kernel annotations at trace time

from gcmoe_runtime.artifacts.record import LaunchFacts, TensorMapEncoding

ROLE = "selftest_tma_peer"
NAME_PREFIX = "gcmoe_selftest_tma_peer"
THREADS = 128
TILE_ROWS = 64


def tile_cols(swizzle: int) -> int:
    """Row length in bytes: 64, or 128 with the 128-byte swizzle (TMA lays a swizzled box out with
    rows of the swizzle span; a 64-byte box under SWIZZLE_128B faulted on H200)."""
    return 128 if swizzle == 128 else 64


def smem_bytes(swizzle: int) -> int:
    return TILE_ROWS * tile_cols(swizzle) + 128 + MBAR_BYTES  # tile (aligned) + mbarrier
MBAR_BYTES = 8


SWIZZLE_BITS = {0: 0, 64: 2, 128: 3}  # bytes -> CuTe Swizzle<B, 4, 3> B (32 B would split the 64-byte rows)


def tensormap_a(swizzle: int = 0) -> TensorMapEncoding:
    # dims innermost first, as cuTensorMapEncodeTiled takes them: (cols, rows)
    return TensorMapEncoding(
        param="tma_a", tensor="a", dtype="CU_TENSOR_MAP_DATA_TYPE_UINT8", rank=2,
        box=(tile_cols(swizzle), TILE_ROWS), element_strides=(1, 1),
        swizzle=f"CU_TENSOR_MAP_SWIZZLE_{swizzle}B" if swizzle else "CU_TENSOR_MAP_SWIZZLE_NONE",
    )


def abi_plan(swizzle: int = 0):
    from gcmoe_build.abi.plan import AbiPlan, Formal

    return AbiPlan(
        formals=(
            Formal("tma_a", "tensormap", tensormap_a(swizzle)),
            Formal("rows", "s32"),  # dynamic row count of `a` (the TMA tensor's shape)
            Formal("peer", "peer_desc"),
            Formal("out", "ptr"),
            Formal("timeout_ns", "u64"),
        ),
        required_instructions=("prefetch.tensormap", "cp.async.bulk.tensor.2d", "mbarrier.try_wait"),
    )


def _tiles(variant) -> int:
    tiles = dict(variant.params).get("tiles", 1)
    if not isinstance(tiles, int) or isinstance(tiles, bool) or not 1 <= tiles <= 1024:
        raise ValueError(f"role {ROLE}: variant param tiles={tiles!r} must be an int in 1..1024")
    return tiles


def _swizzle(variant) -> int:
    sw = dict(variant.params).get("swizzle", 0)
    if isinstance(sw, bool) or sw not in SWIZZLE_BITS:
        raise ValueError(f"role {ROLE}: variant param swizzle={sw!r} must be one of {sorted(SWIZZLE_BITS)}")
    return sw


def build(variant):
    from gcmoe_build.frontend.dsl import import_dsl
    from gcmoe_build.kernels import KernelBuild

    tiles = _tiles(variant)
    swizzle = _swizzle(variant)
    import_dsl(variant.arch)
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.nvgpu import cpasync
    from cutlass.cute.runtime import make_fake_compact_tensor

    from gcmoe_build.kernels.common.device import SITE_SELFTEST_TMA, mbarrier_wait_or_trap
    from gcmoe_build.kernels.common.peer import PeerDesc, fake_peer_desc

    cols = tile_cols(swizzle)
    tile = (TILE_ROWS, cols)
    smem_size = smem_bytes(swizzle)

    @cute.kernel
    def kernel(tma_atom: cute.CopyAtom, m_a: cute.Tensor, peer: cute.Pointer, out: cute.Tensor,
               timeout_ns: cutlass.Int64, smem_layout: cute.ComposedLayout):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        if cute.arch.warp_idx() == 0:
            cpasync.prefetch_descriptor(tma_atom)
        smem = cutlass.memory.SmemAllocator()
        s_a = smem.allocate_tensor(cutlass.Uint8, smem_layout, byte_alignment=128)
        mbar = smem.allocate_array(cutlass.Int64, 1)
        g_a = cute.local_tile(m_a, tile, (bidx, 0))
        t_s, t_g = cpasync.tma_partition(
            tma_atom, 0, cute.make_layout(1), cute.group_modes(s_a, 0, 2), cute.group_modes(g_a, 0, 2)
        )
        if tidx == 0:
            cute.arch.mbarrier_init(mbar, 1)
            cute.arch.mbarrier_init_fence()
        cute.arch.barrier()
        if cute.arch.warp_idx() == 0:  # TMA issue is warp-collective (elect.sync inside)
            with cute.arch.elect_one():
                cute.arch.mbarrier_arrive_and_expect_tx(mbar, TILE_ROWS * cols)
            cute.copy(tma_atom, t_g, t_s, tma_bar_ptr=mbar)
        mbarrier_wait_or_trap(mbar, 0, timeout_ns, SITE_SELFTEST_TMA)
        if tidx < TILE_ROWS:
            acc = cutlass.Int64(0)
            for c in cutlass.range(cols, unroll_full=True):
                acc = acc + cutlass.Int64(s_a[tidx, c])
            out[bidx * THREADS + tidx] = acc
        else:
            pd = PeerDesc(peer)
            out[bidx * THREADS + tidx] = pd.base() + pd.offset(tidx - TILE_ROWS) + cutlass.Int64(pd.rank())

    @cute.jit
    def host(a: cute.Tensor, peer: cute.Pointer, out: cute.Tensor, timeout_ns: cutlass.Int64):
        smem_layout = cute.make_composed_layout(
            cute.make_swizzle(SWIZZLE_BITS[swizzle], 4, 3), 0, cute.make_layout(tile, stride=(cols, 1))
        )
        tma_atom, tma_tensor = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), a, smem_layout, tile)
        kernel(tma_atom, tma_tensor, peer, out, timeout_ns, smem_layout).launch(
            grid=(tiles, 1, 1), block=(THREADS, 1, 1), smem=smem_size
        )

    a = make_fake_compact_tensor(cutlass.Uint8, (cute.sym_int(), cols), stride_order=(1, 0), assumed_align=16)
    out = make_fake_compact_tensor(cutlass.Int64, (tiles * THREADS,), assumed_align=16)
    return KernelBuild(
        host=host, kernel=kernel, args=(a, fake_peer_desc(), out, cutlass.Int64(0)),
        name_prefix=NAME_PREFIX, abi=abi_plan(swizzle),
        launch=LaunchFacts(block=(THREADS, 1, 1), dynamic_smem=smem_size, grid=f"fixed:{tiles}"),
        extra={"tiles": tiles, "swizzle": swizzle},
    )
