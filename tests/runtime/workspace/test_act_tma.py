"""role2's activation tensor maps (gcmoe_runtime.workspace.act_tma) and their slots in the workspace's act_maps."""
import struct

import pytest

from gcmoe_runtime.tensormap import prepare
from gcmoe_runtime.workspace.act_tma import BOX_K, act_encoding, encode_act_map, write_act_maps
from gcmoe_runtime.workspace.layout import (ACT_MAP_BMS, ACT_MAP_BYTES, ACT_MAP_SLOTS, LayoutError, LayoutSpec,
                                            WorkspaceLayout, act_map_slot)


def _layout(**kw):
    base = dict(arch="sm_90a", world_size=2, num_experts=16, topk=4, hidden=1024, intermediate=512,
                capacity=64, bm_candidates=(8, 16, 32, 64), compute_sms=128)
    base.update(kw)
    return WorkspaceLayout.build(LayoutSpec(**base))


def test_encoding_is_a_128_byte_swizzled_box_of_bm_rows():
    """The box the kernel's wgmma descriptors expect: 128 bytes of K (one swizzle row) x BM token rows, UINT8, rows of
    K bytes (one map over the whole ring)."""
    for bm in ACT_MAP_BMS:
        enc = act_encoding(bm)
        assert enc.box == (BOX_K, bm) and enc.swizzle == "CU_TENSOR_MAP_SWIZZLE_128B"
        args = prepare(enc, 0x10000, (72 * 64, 6144), (6144, 1))
        assert args.global_dim == (6144, 72 * 64) and args.global_strides == (6144,)
    with pytest.raises(ValueError, match="bm=24"):
        act_encoding(24)


def test_bad_ring_shapes_are_refused_by_name():
    with pytest.raises(ValueError, match="K=1000"):
        encode_act_map(0x10000, 64, 1000, 8)
    with pytest.raises(ValueError, match="rows=60"):
        encode_act_map(0x10000, 60, 1024, 8)
    with pytest.raises(ValueError, match="bm=80 boxes overrun"):
        encode_act_map(0x10000, 128, 1024, 80, stride=64)
    with pytest.raises(ValueError, match="rows=96 must be whole blocks of 64 rows"):
        encode_act_map(0x10000, 96, 1024, 48, stride=64)


def test_a_ring_of_two_64_row_blocks_takes_48_row_boxes():
    """The ring's maps are over whole blocks of its largest BM (``bm_stride``): 128 rows hold two 64-row blocks, read
    in 48-row boxes by the BM 48 build (session 36: the check wanted whole 48-row boxes and refused a capped ring)."""
    pytest.importorskip("cuda.bindings")
    drv = _RecordingDriver()
    encode_act_map(0x10000, 128, 1024, 48, drv, stride=64)
    assert len(drv.calls) == 1 and int(drv.calls[0][3][1]) == 128 and int(drv.calls[0][5][1]) == 48


def test_slots_are_distinct_and_fit_the_region():
    lay = _layout()
    slots = {act_map_slot(m, bm) for m in ("w1", "w2") for bm in ACT_MAP_BMS}
    assert slots == set(range(ACT_MAP_SLOTS))
    r = lay.region("act_maps")
    assert r.nbytes == ACT_MAP_SLOTS * ACT_MAP_BYTES and r.offset % 64 == 0 and r.persistent
    with pytest.raises(LayoutError, match="bm=12"):
        act_map_slot("w1", 12)
    with pytest.raises(LayoutError, match="mode='w3'"):
        act_map_slot("w3", 8)


class _RecordingDriver:
    """cuTensorMapEncodeTiled stand-in: the map's 16 words are (call number, dims, box rows, address)."""

    def __init__(self):
        from cuda.bindings import driver as cu

        self.cu = cu
        self.calls = []

    def call(self, name, *args):
        self.calls.append(args)
        t = self.cu.CUtensorMap()
        t.opaque = [len(self.calls), int(args[3][0]), int(args[5][1]), int(args[2])] + [0] * 12
        return t


def test_write_act_maps_fills_each_candidate_slot_over_its_ring():
    """Every BM candidate gets a W1 map over ring_x (K = H) and a W2 map over l2_x (K = I), whole rings
    (ring_blocks * bm_max rows), in its slot; other slots stay zero."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("cuda.bindings")
    lay = _layout(bm_candidates=(8, 16))
    buf = torch.zeros(lay.total_bytes, dtype=torch.uint8)
    drv = _RecordingDriver()
    write_act_maps(lay, buf, drv)
    assert len(drv.calls) == 4
    base = lay.offset("act_maps")
    rows = lay.ring_blocks * lay.bm_max
    for bm in (8, 16):
        for mode, region, k in (("w1", "ring_x", 1024), ("w2", "l2_x", 512)):
            off = base + act_map_slot(mode, bm) * ACT_MAP_BYTES
            words = struct.unpack("<16Q", bytes(buf[off:off + ACT_MAP_BYTES].tolist()))
            assert words[1:4] == (k, bm, buf.data_ptr() + lay.offset(region))
            assert int(drv.calls[words[0] - 1][3][1]) == rows
    for bm in (32, 64):
        off = base + act_map_slot("w1", bm) * ACT_MAP_BYTES
        assert not buf[off:off + 2 * ACT_MAP_BYTES].any()
