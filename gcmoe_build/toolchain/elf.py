"""Just enough ELF64 reading to check a cubin: its entry symbols and per-kernel parameter info.

``kernel_symbols(cubin)`` lists defined global function symbols (the entry names the driver resolves with
cuLibraryGetKernel). ``kernel_param_info(cubin, name)`` decodes the EIATTR_KPARAM_INFO records of
``.nv.info.<name>`` — the table cuKernelGetParamInfo answers from — as (ordinal, offset, size).
"""
from __future__ import annotations

import struct


class CubinFormatError(ValueError):
    pass


def _sections(data: bytes) -> list[tuple[str, int, int, int, int]]:
    """(name, type, offset, size, link) of every section."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise CubinFormatError("not a little-endian ELF64 file")
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        name, typ, _flags, _addr, offset, size, link = struct.unpack_from("<IIQQQQI", data, off)
        raw.append((name, typ, offset, size, link))
    if not raw or e_shstrndx >= len(raw):
        raise CubinFormatError("ELF has no section-name table")
    strtab_off = raw[e_shstrndx][2]

    def cstr(base: int, idx: int) -> str:
        end = data.index(b"\0", base + idx)
        return data[base + idx:end].decode()

    return [(cstr(strtab_off, n), t, o, s, l) for n, t, o, s, l in raw]


def kernel_symbols(data: bytes) -> list[str]:
    secs = _sections(data)
    out = []
    for name, typ, off, size, link in secs:
        if typ != 2:  # SHT_SYMTAB
            continue
        str_off = secs[link][2]
        for i in range(size // 24):
            st_name, st_info, _other, shndx, _value, _size = struct.unpack_from("<IBBHQQ", data, off + 24 * i)
            if (st_info & 0xF) == 2 and (st_info >> 4) == 1 and shndx != 0:  # defined global STT_FUNC
                end = data.index(b"\0", str_off + st_name)
                out.append(data[str_off + st_name:end].decode())
    return sorted(out)


EIATTR_KPARAM_INFO = 0x17
_EIFMT_SIZES = {0x01: 0, 0x02: 1, 0x03: 2}  # NVAL, BVAL, HVAL; 0x04 = SVAL (u16 length + payload)


def kernel_param_info(data: bytes, kernel: str) -> list[tuple[int, int, int]]:
    """Sorted (ordinal, offset, size) of ``kernel``'s parameters from ``.nv.info.<kernel>``."""
    secs = {name: (off, size) for name, _t, off, size, _l in _sections(data)}
    if f".nv.info.{kernel}" not in secs:
        raise CubinFormatError(f"cubin has no .nv.info.{kernel} section")
    off, size = secs[f".nv.info.{kernel}"]
    pos, end, out = off, off + size, []
    while pos < end:
        fmt, attr = data[pos], data[pos + 1]
        pos += 2
        if fmt == 0x04:
            n, = struct.unpack_from("<H", data, pos)
            payload = data[pos + 2:pos + 2 + n]
            pos += 2 + n
            if attr == EIATTR_KPARAM_INFO:
                _index, ordinal, offset, flags = struct.unpack_from("<IHHI", payload, 0)
                out.append((ordinal, offset, (flags >> 18) & 0x3FFF))
        elif fmt in _EIFMT_SIZES:
            # every non-SVAL record is 4 bytes: NVAL too carries 2 (zero) bytes after fmt/attr (seen: the
            # role2 cubin's ``01 54 00 00`` record followed by an SVAL at the next 4-byte boundary)
            pos += 2
        else:
            raise CubinFormatError(f".nv.info.{kernel}: unknown record format {fmt:#x}")
    return sorted(out)
