import struct

import pytest

from gcmoe_runtime.artifacts.record import TensorMapEncoding
from gcmoe_runtime.tensormap import TensorMapError, encode, pack_opaque, prepare

ENC = TensorMapEncoding(
    param="tma_x", tensor="ring_x", dtype="CU_TENSOR_MAP_DATA_TYPE_UINT8", rank=3, box=(128, 16, 1),
    element_strides=(1, 1, 1), swizzle="CU_TENSOR_MAP_SWIZZLE_128B",
)


def test_prepare_reverses_to_driver_order_and_strides_in_bytes():
    a = prepare(ENC, 0x10000, sizes=(4, 64, 7168), strides=(64 * 7168, 7168, 1))
    assert a.global_dim == (7168, 64, 4)
    assert a.global_strides == (7168, 64 * 7168)
    assert a.box == (128, 16, 1) and a.rank == 3


def test_prepare_bf16_strides_scale_with_element_size():
    enc = TensorMapEncoding("t", "combine", "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 2, (64, 8), (1, 1))
    assert prepare(enc, 0x100, (10, 256), (256, 1)).global_strides == (512,)


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(address=0x10008), "not 16-byte aligned"),
        (dict(strides=(64 * 7168, 7168, 2)), "innermost dimension must be contiguous"),
        (dict(sizes=(64, 7168), strides=(7168, 1)), "bound tensor has 2 dims"),
        (dict(sizes=(4, 64, 7160), strides=(64 * 7160, 7160, 1)), "must be a multiple of 16"),
    ],
)
def test_prepare_rejects(kw, msg):
    args = dict(address=0x10000, sizes=(4, 64, 7168), strides=(64 * 7168, 7168, 1))
    args.update(kw)
    with pytest.raises(TensorMapError, match=msg):
        prepare(ENC, **args)


def test_box_larger_than_swizzle_span_rejected():
    enc = TensorMapEncoding("t", "x", "CU_TENSOR_MAP_DATA_TYPE_UINT8", 2, (256, 8), (1, 1), swizzle="CU_TENSOR_MAP_SWIZZLE_128B")
    with pytest.raises(TensorMapError, match="exceeds the CU_TENSOR_MAP_SWIZZLE_128B span"):
        prepare(enc, 0x100, (8, 256), (256, 1))


def test_pack_opaque():
    raw = pack_opaque(list(range(16)))
    assert len(raw) == 128 and struct.unpack("<16Q", raw) == tuple(range(16))
    with pytest.raises(TensorMapError):
        pack_opaque([0] * 15)


class _FakeDriver:
    """Records the encode call; returns a map whose opaque words echo the inputs."""

    def __init__(self):
        from cuda.bindings import driver as cu

        self.cu = cu
        self.calls = []

    def call(self, name, *args):
        self.calls.append((name, args))
        t = self.cu.CUtensorMap()
        return t


def test_encode_passes_driver_enums_and_packs_128_bytes():
    pytest.importorskip("cuda.bindings")
    fd = _FakeDriver()
    raw = encode(prepare(ENC, 0x10000, (4, 64, 7168), (64 * 7168, 7168, 1)), fd)
    assert len(raw) == 128
    name, args = fd.calls[0]
    assert name == "cuTensorMapEncodeTiled"
    assert args[0] == fd.cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8
    assert [int(x) for x in args[3]] == [7168, 64, 4]
    assert args[8] == fd.cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B
