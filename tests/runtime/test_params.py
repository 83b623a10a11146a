import ctypes
import struct

import pytest

from gcmoe_runtime.artifacts.record import ParamSpec
from gcmoe_runtime.params import (
    KernelArgs,
    ParamSchemaError,
    check_against_driver,
    pack_args,
    signature,
    validate_schema,
)

SCHEMA = (
    ParamSpec(0, "tmap", "tensormap", 128, 64, 0),
    ParamSpec(1, "peers", "peer_desc", 592, 8, 128),
    ParamSpec(2, "ws", "ptr", 8, 8, 720),
    ParamSpec(3, "n", "u32", 4, 4, 728),
    ParamSpec(4, "scale", "f32", 4, 4, 732),
    ParamSpec(5, "t", "s64", 8, 8, 736),
)


def test_pack_places_every_param_at_its_offset():
    vals = {"tmap": bytes(range(128)), "peers": b"\x07" * 592, "ws": 0xDEAD_BEEF_0000, "n": 5, "scale": 1.5, "t": -3}
    validate_schema("k", SCHEMA)
    raw = pack_args("k", SCHEMA, vals)
    assert len(raw) == 744
    assert raw[:128] == bytes(range(128)) and raw[128:720] == b"\x07" * 592
    assert struct.unpack_from("<QIfq", raw, 720) == (0xDEAD_BEEF_0000, 5, 1.5, -3)


def test_kernel_args_pointer_array_points_into_aligned_buffer():
    vals = {"tmap": b"\x01" * 128, "peers": b"\x02" * 592, "ws": 9, "n": 1, "scale": 0.0, "t": 0}
    a = KernelArgs.build("k", SCHEMA, vals)
    assert a.address % 64 == 0
    ptrs = (ctypes.c_void_p * len(SCHEMA)).from_address(a.kernel_params)
    assert [p - a.address for p in ptrs] == [p.offset for p in SCHEMA]
    assert ctypes.string_at(ptrs[2], 8) == struct.pack("<Q", 9)


def test_missing_and_unknown_args_named():
    with pytest.raises(ParamSchemaError, match=r"missing arguments \['peers'.*unknown arguments \['bogus'\]"):
        pack_args("k", SCHEMA, {"tmap": b"\0" * 128, "ws": 0, "n": 0, "scale": 0, "t": 0, "bogus": 1})


def test_wrong_sizes_and_values():
    base = {"tmap": b"\0" * 128, "peers": b"\0" * 592, "ws": 0, "n": 0, "scale": 0, "t": 0}
    with pytest.raises(ParamSchemaError, match="'tmap'.*got 127 bytes"):
        pack_args("k", SCHEMA, {**base, "tmap": b"\0" * 127})
    with pytest.raises(ParamSchemaError, match="'n'.*does not fit"):
        pack_args("k", SCHEMA, {**base, "n": -1})
    with pytest.raises(ParamSchemaError, match="'ws'.*expected an int"):
        pack_args("k", SCHEMA, {**base, "ws": "x"})


def test_schema_validation():
    with pytest.raises(ParamSchemaError, match="not a multiple of its alignment"):
        validate_schema("k", (ParamSpec(0, "a", "u32", 4, 4, 0), ParamSpec(1, "t", "tensormap", 128, 64, 4)))
    with pytest.raises(ParamSchemaError, match="overlaps"):
        validate_schema("k", (ParamSpec(0, "a", "u64", 8, 8, 0), ParamSpec(1, "b", "u32", 4, 4, 4)))
    with pytest.raises(ParamSchemaError, match="size 8 != 592"):
        validate_schema("k", (ParamSpec(0, "p", "peer_desc", 8, 8, 0),))
    with pytest.raises(ParamSchemaError, match="index 1 != position 0"):
        validate_schema("k", (ParamSpec(1, "a", "u32", 4, 4, 0),))


def test_driver_comparison():
    info = [(p.offset, p.size) for p in SCHEMA]
    check_against_driver("k", SCHEMA, info)
    with pytest.raises(ParamSchemaError, match="cubin has 5 parameters"):
        check_against_driver("k", SCHEMA, info[:-1])
    bad = list(info)
    bad[1] = (128, 8)
    with pytest.raises(ParamSchemaError, match="'peers'.*cuKernelGetParamInfo says offset 128 size 8"):
        check_against_driver("k", SCHEMA, bad)
    assert signature(SCHEMA) == signature(tuple(SCHEMA))


def test_schema_accepts_driver_offsets_of_a_64_aligned_first_param():
    # what ptxas 13.4 / cuKernelGetParamInfo report for a tensor map first (sm_90a, measured on H200)
    validate_schema("k", (ParamSpec(0, "t", "tensormap", 128, 64, 48), ParamSpec(1, "p", "peer_desc", 592, 8, 176),
                          ParamSpec(2, "n", "s32", 4, 4, 768)))
