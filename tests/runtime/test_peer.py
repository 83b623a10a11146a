import struct

import pytest

from gcmoe_runtime.abi import PEER_DESC_BYTES, PEER_MAX_RANKS
from gcmoe_runtime.peer import make_peer_descriptor, pack_peer_descriptor, unpack_peer_descriptor


def test_pack_layout_and_signed_offsets():
    bases = [0x7F00_0000_0000, 0x7E00_0000_0000, 0x7F80_0000_0000]
    d = make_peer_descriptor(bases, rank=0)
    raw = pack_peer_descriptor(d)
    assert len(raw) == PEER_DESC_BYTES == 592
    assert struct.unpack_from("<Q", raw, 0)[0] == bases[0]
    offs = struct.unpack_from(f"<{PEER_MAX_RANKS}q", raw, 8)
    assert offs[:3] == (0, -0x100_0000_0000, 0x80_0000_0000)
    assert all(o == 0 for o in offs[3:])
    assert struct.unpack_from("<i", raw, 8 + 8 * PEER_MAX_RANKS)[0] == 0
    assert raw[-4:] == b"\0\0\0\0"
    for r in range(3):
        assert d.peer_base(r) == bases[r]


def test_round_trip_every_rank():
    bases = [0x1000_0000 * (i + 1) for i in range(8)]
    for r in range(8):
        d = make_peer_descriptor(bases, r)
        assert unpack_peer_descriptor(pack_peer_descriptor(d), 8) == d


def test_p72_ok_p73_refused():
    make_peer_descriptor([0x1000 * (i + 1) for i in range(72)], 71)
    with pytest.raises(ValueError, match="P=73.*limit of 72"):
        make_peer_descriptor([0x1000 * (i + 1) for i in range(73)], 0)


@pytest.mark.parametrize("rank", [-1, 2])
def test_bad_rank(rank):
    with pytest.raises(ValueError, match="rank"):
        make_peer_descriptor([0x1000, 0x2000], rank)


def test_bad_address():
    with pytest.raises(ValueError, match="rank 1 base address"):
        make_peer_descriptor([0x1000, 0], 0)
