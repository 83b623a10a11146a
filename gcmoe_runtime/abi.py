"""By-value kernel ABI constants shared by the builder and the runtime (paper §5, DESIGN.md §3).

One place for these facts: the PTX rewrite (build side) produces parameters of exactly these
sizes, and the runtime packs arguments to them and checks them against cuKernelGetParamInfo.
"""

#: A CUtensorMap is 128 opaque bytes and must be 64-byte aligned in parameter space.
TENSORMAP_BYTES = 128
TENSORMAP_ALIGN = 64

#: Peer descriptor: base pointer (u64), 72 signed int64 offsets, rank (i32) + padding to 8.
PEER_MAX_RANKS = 72
PEER_DESC_BYTES = 8 + 8 * PEER_MAX_RANKS + 8  # = 592
PEER_DESC_ALIGN = 8
#: Byte offsets inside the peer descriptor (kernels read, the runtime packs these).
PEER_BASE_OFFSET = 0  # u64: this rank's symmetric-workspace base address
PEER_OFFSETS_OFFSET = 8  # s64[PEER_MAX_RANKS]: peer r's workspace = base + offsets[r]
PEER_RANK_OFFSET = 8 + 8 * PEER_MAX_RANKS  # s32: this rank (followed by 4 bytes of zero padding)

assert PEER_DESC_BYTES == 592

#: Parameter kinds the schema knows. Scalars carry their PTX type name.
PARAM_KINDS = ("tensormap", "peer_desc", "ptr", "u32", "s32", "u64", "s64", "f32")
SCALAR_SIZES = {"ptr": 8, "u32": 4, "s32": 4, "u64": 8, "s64": 8, "f32": 4}
