"""CRC-32C (Castagnoli), the checksum of record batch v2, in pure Python.

Reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF; one table
lookup per byte (the broker is stdlib-only, and zlib only offers plain CRC-32).
"""

from __future__ import annotations


def _table() -> tuple[int, ...]:
    out = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        out.append(c)
    return tuple(out)


_TABLE = _table()


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of `data`; pass a previous result as `crc` to continue over more data."""
    table = _TABLE
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
