"""Kafka wire primitives: a bounds-checked reader and an appending writer.

Every decoding failure surfaces as KafkaCodecError (never IndexError or
struct.error), so the broker can answer or drop a connection on one type.
"""

from __future__ import annotations

import struct
import uuid

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)


class KafkaCodecError(ValueError):
    """Bytes that are not a valid encoding of what the schema says is there."""


class Reader:
    """Reads Kafka primitives from a buffer; raises KafkaCodecError on any shortfall."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int, what: str) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise KafkaCodecError(
                f"truncated: {what} needs {n} bytes at offset {p}, {self.end - p} left")
        self.pos = p + n
        return p

    def _fixed(self, s: struct.Struct, what: str):
        return s.unpack_from(self.buf, self._take(s.size, what))[0]

    def int8(self) -> int:
        return self._fixed(_I8, "int8")

    def int16(self) -> int:
        return self._fixed(_I16, "int16")

    def int32(self) -> int:
        return self._fixed(_I32, "int32")

    def int64(self) -> int:
        return self._fixed(_I64, "int64")

    def uint32(self) -> int:
        return self._fixed(_U32, "uint32")

    def float64(self) -> float:
        return self._fixed(_F64, "float64")

    def boolean(self) -> bool:
        return self._fixed(_I8, "boolean") != 0

    def uuid(self) -> uuid.UUID:
        p = self._take(16, "uuid")
        return uuid.UUID(bytes=bytes(self.buf[p:p + 16]))

    def raw(self, n: int, what: str = "bytes") -> bytes:
        p = self._take(n, what)
        return bytes(self.buf[p:p + n])

    def uvarint(self, what: str = "unsigned varint") -> int:
        # At most 5 bytes for a 32-bit value, 10 for 64-bit; more is malformed.
        result = shift = 0
        for _ in range(10):
            b = self.buf[self._take(1, what)]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise KafkaCodecError(f"{what} longer than 10 bytes at offset {self.pos}")

    def varint(self) -> int:
        u = self.uvarint("varint")
        return (u >> 1) ^ -(u & 1)

    varlong = varint

    # Length-prefixed values. `compact` selects the flexible-version encodings
    # (unsigned varint of length+1, 0 = null) over the classic int16/int32 ones.
    def _length(self, compact: bool, wide: bool, what: str) -> int | None:
        if compact:
            n = self.uvarint(what) - 1
        else:
            n = self.int32() if wide else self.int16()
        if n < 0:
            if n == -1:
                return None
            raise KafkaCodecError(f"negative {what} length {n} at offset {self.pos}")
        return n

    def string(self, compact: bool = False, nullable: bool = False) -> str | None:
        n = self._length(compact, False, "string")
        if n is None:
            if not nullable:
                raise KafkaCodecError(f"null in a non-nullable string at offset {self.pos}")
            return None
        try:
            return self.raw(n, "string").decode("utf-8")
        except UnicodeDecodeError as e:
            raise KafkaCodecError(f"string is not UTF-8: {e}") from None

    def bytes_(self, compact: bool = False, nullable: bool = False) -> bytes | None:
        n = self._length(compact, True, "bytes")
        if n is None:
            if not nullable:
                raise KafkaCodecError(f"null in non-nullable bytes at offset {self.pos}")
            return None
        return self.raw(n, "bytes")

    def array_length(self, compact: bool = False, nullable: bool = False) -> int | None:
        n = self._length(compact, True, "array")
        if n is None:
            if not nullable:
                raise KafkaCodecError(f"null in a non-nullable array at offset {self.pos}")
            return None
        # Every element takes at least one byte: a count beyond what is left is a
        # lie, and believing it would let a 5-byte frame allocate a huge list.
        if n > self.remaining():
            raise KafkaCodecError(
                f"array of {n} elements in {self.remaining()} remaining bytes")
        return n

    def skip_tags(self) -> None:
        for _ in range(self.tag_count()):
            self.uvarint("tag")
            self._take(self.uvarint("tag size"), "tagged field")

    def tag_count(self) -> int:
        n = self.uvarint("tag count")
        if n > self.remaining():
            raise KafkaCodecError(f"{n} tagged fields in {self.remaining()} remaining bytes")
        return n


class Writer:
    """Appends Kafka primitives to a bytearray."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def _fixed(self, s: struct.Struct, v, what: str) -> None:
        try:
            self.buf += s.pack(v)
        except struct.error as e:
            raise KafkaCodecError(f"cannot encode {v!r} as {what}: {e}") from None

    def int8(self, v: int) -> None:
        self._fixed(_I8, v, "int8")

    def int16(self, v: int) -> None:
        self._fixed(_I16, v, "int16")

    def int32(self, v: int) -> None:
        self._fixed(_I32, v, "int32")

    def int64(self, v: int) -> None:
        self._fixed(_I64, v, "int64")

    def uint32(self, v: int) -> None:
        self._fixed(_U32, v, "uint32")

    def float64(self, v: float) -> None:
        self._fixed(_F64, v, "float64")

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID | None) -> None:
        self.buf += (v or ZERO_UUID).bytes

    def raw(self, b: bytes | bytearray | memoryview) -> None:
        self.buf += b

    def uvarint(self, v: int) -> None:
        if v < 0:
            raise KafkaCodecError(f"unsigned varint cannot hold {v}")
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def varint(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 63))

    varlong = varint

    def _length(self, n: int | None, compact: bool, wide: bool) -> None:
        if compact:
            self.uvarint(0 if n is None else n + 1)
        elif wide:
            self.int32(-1 if n is None else n)
        else:
            self.int16(-1 if n is None else n)

    def string(self, v: str | None, compact: bool = False) -> None:
        if v is None:
            self._length(None, compact, False)
            return
        b = v.encode("utf-8")
        if not compact and len(b) > 0x7FFF:
            raise KafkaCodecError(f"string of {len(b)} bytes exceeds int16 length")
        self._length(len(b), compact, False)
        self.buf += b

    def bytes_(self, v: bytes | bytearray | memoryview | None, compact: bool = False) -> None:
        self._length(None if v is None else len(v), compact, True)
        if v is not None:
            self.buf += v

    def array_length(self, n: int | None, compact: bool = False) -> None:
        self._length(n, compact, True)
