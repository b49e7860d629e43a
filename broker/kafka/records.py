"""Kafka record data: record batch v2 (magic 2) and legacy message sets (magic 0 and 1).

A `records` field of a Produce request or Fetch response is a concatenation of
batches; `decode_records` splits and decodes it, `encode_batch` / `encode_message_set`
build one (uncompressed or gzip). The broker can keep a v2 batch as opaque bytes and
only restamp it with `rewrite_batch_header`, since the CRC does not cover base offset
and partition leader epoch.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from .crc32c import crc32c
from .primitives import KafkaCodecError, Reader, Writer

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# Attribute bits (v2: int16, legacy: int8 with only codec and timestamp type).
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime
_TRANSACTIONAL = 0x10
_CONTROL = 0x20

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")  # base_offset .. records count
V2_HEADER_SIZE = _V2_HEADER.size  # 61
_LOG_OVERHEAD = 12  # offset int64 + length int32, before every batch or legacy message
_MIN_LEGACY = 14  # crc, magic, attributes, key length, value length (magic 0)
MAX_DECOMPRESSED = 256 * 1024 * 1024  # a gzip bomb is an error, not an OOM


class CorruptRecord(KafkaCodecError):
    """A CRC mismatch or a malformed batch (the broker answers CORRUPT_MESSAGE)."""


class UnsupportedCompression(KafkaCodecError):
    """A batch compressed with a codec this stdlib-only codec cannot (de)compress.

    Maps to UNSUPPORTED_COMPRESSION_TYPE; `codec` is the attribute value (2-4 known).
    """

    def __init__(self, codec: int):
        self.codec = codec
        super().__init__(f"compression codec {CODEC_NAMES.get(codec, codec)} is not supported")


@dataclass
class Rec:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class Batch:
    base_offset: int
    records: list[Rec]
    magic: int = 2
    partition_leader_epoch: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    is_control: bool = False
    timestamp_type: int = 0  # 0 CreateTime, 1 LogAppendTime
    compression: int = NONE
    last_offset_delta: int = 0
    base_timestamp: int = -1
    max_timestamp: int = -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


# ---- compression -------------------------------------------------------------------------

def _decompress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec != GZIP:
        raise UnsupportedCompression(codec)
    d = zlib.decompressobj(wbits=47)  # 32+15: gzip or zlib header, detected
    try:
        out = d.decompress(data, MAX_DECOMPRESSED)
    except zlib.error as e:
        raise CorruptRecord(f"bad gzip data: {e}") from None
    if d.unconsumed_tail:
        raise CorruptRecord(f"gzip data inflates beyond {MAX_DECOMPRESSED} bytes")
    return out


def _compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec != GZIP:
        raise UnsupportedCompression(codec)
    c = zlib.compressobj(wbits=31)  # gzip framing, as Kafka's GZIPOutputStream writes
    return c.compress(data) + c.flush()


# ---- splitting ---------------------------------------------------------------------------

def iter_batch_spans(blob: bytes | bytearray | memoryview,
                     allow_partial: bool = False) -> Iterator[tuple[int, int, int]]:
    """Yield (start, end, magic) of each batch or legacy top-level message in `blob`.

    A trailing incomplete batch is an error unless `allow_partial` (a Fetch response may
    end with one cut short by max_bytes).
    """
    mv = memoryview(blob)
    pos, n = 0, len(mv)
    while pos < n:
        if n - pos < _LOG_OVERHEAD + 5:
            if allow_partial:
                return
            raise CorruptRecord(f"{n - pos} trailing bytes are not a whole batch")
        (length,) = struct.unpack_from(">i", mv, pos + 8)
        magic = mv[pos + 16]
        if magic not in (0, 1, 2):
            raise CorruptRecord(f"unknown magic {magic} at offset {pos}")
        least = V2_HEADER_SIZE - _LOG_OVERHEAD if magic == 2 else _MIN_LEGACY + 8 * magic
        if length < least:
            raise CorruptRecord(f"batch length {length} at offset {pos} is too small")
        end = pos + _LOG_OVERHEAD + length
        if end > n:
            if allow_partial:
                return
            raise CorruptRecord(f"batch at offset {pos} needs {end - n} more bytes")
        yield pos, end, magic
        pos = end


def decode_records(blob: bytes | bytearray | memoryview | None, *, allow_partial: bool = False,
                   verify_crc: bool = True) -> list[Batch]:
    """Decode every batch (v2) or top-level message (legacy) in a records blob."""
    if not blob:
        return []
    mv = memoryview(blob)
    out = []
    for start, end, magic in iter_batch_spans(mv, allow_partial):
        if magic == 2:
            out.append(decode_batch(mv[start:end], verify_crc=verify_crc))
        else:
            out.append(_decode_legacy(mv[start:end], verify_crc))
    return out


# ---- v2 ---------------------------------------------------------------------------------

def decode_batch(data: bytes | bytearray | memoryview, verify_crc: bool = True) -> Batch:
    """Decode one magic-2 batch (exactly its bytes)."""
    mv = memoryview(data)
    if len(mv) < V2_HEADER_SIZE:
        raise CorruptRecord(f"batch of {len(mv)} bytes is shorter than its header")
    (base_offset, length, ple, magic, crc, attrs, last_delta, base_ts, max_ts, pid, epoch,
     base_seq, count) = _V2_HEADER.unpack_from(mv, 0)
    if magic != 2:
        raise CorruptRecord(f"expected magic 2, got {magic}")
    if length + _LOG_OVERHEAD != len(mv):
        raise CorruptRecord(f"batch length {length} does not match its {len(mv)} bytes")
    if verify_crc and crc32c(mv[21:]) != crc:
        raise CorruptRecord(f"batch at base offset {base_offset}: CRC-32C mismatch")
    codec = attrs & _CODEC_MASK
    body = _decompress(codec, bytes(mv[V2_HEADER_SIZE:]))
    if count < 0 or count > len(body):
        raise CorruptRecord(f"record count {count} in {len(body)} bytes")
    r = Reader(body)
    log_append = bool(attrs & _TIMESTAMP_TYPE)
    recs = []
    try:
        for _ in range(count):
            recs.append(_read_record(r, base_offset, base_ts, max_ts if log_append else None))
    except CorruptRecord:
        raise
    except KafkaCodecError as e:
        raise CorruptRecord(f"malformed record: {e}") from None
    if r.remaining():
        raise CorruptRecord(f"{r.remaining()} bytes after the batch's {count} records")
    return Batch(base_offset, recs, 2, ple, pid, epoch, base_seq,
                 bool(attrs & _TRANSACTIONAL), bool(attrs & _CONTROL), int(log_append), codec,
                 last_delta, base_ts, max_ts)


def _read_record(r: Reader, base_offset: int, base_ts: int, append_ts: int | None) -> Rec:
    length = r.varint()
    if length < 0 or length > r.remaining():
        raise CorruptRecord(f"record length {length} with {r.remaining()} bytes left")
    end = r.pos + length
    r.int8()  # record attributes: unused by every released format
    ts_delta = r.varlong()
    off_delta = r.varint()
    key = _varbytes(r)
    value = _varbytes(r)
    nh = r.varint()
    if nh < 0 or nh > r.remaining():
        raise CorruptRecord(f"header count {nh} with {r.remaining()} bytes left")
    headers = []
    for _ in range(nh):
        hk = _varbytes(r)
        if hk is None:
            raise CorruptRecord("null record header key")
        try:
            headers.append((hk.decode("utf-8"), _varbytes(r)))
        except UnicodeDecodeError:
            raise CorruptRecord("record header key is not UTF-8") from None
    if r.pos != end:
        raise CorruptRecord(f"record length {length} disagrees with its contents")
    ts = append_ts if append_ts is not None else base_ts + ts_delta
    return Rec(base_offset + off_delta, ts, key, value, headers)


def _varbytes(r: Reader) -> bytes | None:
    n = r.varint()
    if n < -1:
        raise CorruptRecord(f"negative length {n}")
    return None if n == -1 else r.raw(n)


def _write_varbytes(w: Writer, b: bytes | None) -> None:
    if b is None:
        w.varint(-1)
    else:
        w.varint(len(b))
        w.raw(b)


def encode_batch(records: list[Rec], *, base_offset: int | None = None,
                 partition_leader_epoch: int = -1, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 is_transactional: bool = False, is_control: bool = False,
                 timestamp_type: int = 0, compression: int = NONE,
                 max_timestamp: int | None = None) -> bytes:
    """Encode records (offsets absolute, timestamps in ms) as one magic-2 batch."""
    if base_offset is None:
        base_offset = records[0].offset if records else 0
    base_ts = records[0].timestamp if records else -1
    max_ts = max((r.timestamp for r in records), default=-1)
    if max_timestamp is not None:  # LogAppendTime batches carry the append time here
        max_ts = max_timestamp
    last_delta = max((r.offset - base_offset for r in records), default=0)
    w = Writer()
    for rec in records:
        rw = Writer()
        rw.int8(0)
        rw.varlong(rec.timestamp - base_ts)
        rw.varint(rec.offset - base_offset)
        _write_varbytes(rw, rec.key)
        _write_varbytes(rw, rec.value)
        rw.varint(len(rec.headers))
        for hk, hv in rec.headers:
            _write_varbytes(rw, hk.encode("utf-8"))
            _write_varbytes(rw, hv)
        w.varint(len(rw.buf))
        w.raw(rw.buf)
    body = _compress(compression, bytes(w.buf))
    attrs = (compression & _CODEC_MASK) | (_TIMESTAMP_TYPE if timestamp_type else 0)
    attrs |= (_TRANSACTIONAL if is_transactional else 0) | (_CONTROL if is_control else 0)
    out = bytearray(_V2_HEADER.pack(
        base_offset, V2_HEADER_SIZE - _LOG_OVERHEAD + len(body), partition_leader_epoch, 2, 0,
        attrs, last_delta, base_ts, max_ts, producer_id, producer_epoch, base_sequence,
        len(records)))
    out += body
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def rewrite_batch_header(batch: bytes | bytearray | memoryview, base_offset: int,
                         partition_leader_epoch: int | None = None) -> bytes:
    """Restamp a v2 batch's base offset (and leader epoch) without re-encoding it.

    Neither field is under the CRC, so the batch stays valid.
    """
    out = bytearray(batch)
    if len(out) < V2_HEADER_SIZE or out[16] != 2:
        raise CorruptRecord("not a magic-2 batch")
    struct.pack_into(">q", out, 0, base_offset)
    if partition_leader_epoch is not None:
        struct.pack_into(">i", out, 12, partition_leader_epoch)
    return bytes(out)


# ---- legacy message sets (magic 0 and 1) -------------------------------------------------

def _read_message(mv: memoryview, verify_crc: bool) -> tuple[int, int, int, int, bytes | None,
                                                               bytes | None]:
    """One legacy message (offset + size + body): (offset, magic, attrs, ts, key, value)."""
    r = Reader(mv)
    offset = r.int64()
    size = r.int32()
    if size != len(mv) - _LOG_OVERHEAD:
        raise CorruptRecord(f"message size {size} does not match its {len(mv) - 12} bytes")
    crc = r.uint32()
    if verify_crc and zlib.crc32(mv[16:]) != crc:
        raise CorruptRecord(f"message at offset {offset}: CRC-32 mismatch")
    magic = r.int8()
    attrs = r.int8()
    ts = r.int64() if magic == 1 else -1
    try:
        key = r.bytes_(nullable=True)
        value = r.bytes_(nullable=True)
    except KafkaCodecError as e:
        raise CorruptRecord(f"malformed message: {e}") from None
    if r.remaining():
        raise CorruptRecord(f"{r.remaining()} bytes after a message's value")
    return offset, magic, attrs, ts, key, value


def _decode_legacy(mv: memoryview, verify_crc: bool) -> Batch:
    offset, magic, attrs, ts, key, value = _read_message(mv, verify_crc)
    codec = attrs & _CODEC_MASK
    ts_type = 1 if magic == 1 and attrs & _TIMESTAMP_TYPE else 0
    if codec == NONE:
        return Batch(offset, [Rec(offset, ts, key, value)], magic, timestamp_type=ts_type,
                     base_timestamp=ts, max_timestamp=ts)
    inner_blob = _decompress(codec, value or b"")
    inner = []
    imv = memoryview(inner_blob)
    for start, end, imagic in iter_batch_spans(imv):
        if imagic != magic:
            raise CorruptRecord(f"magic {imagic} message inside a magic {magic} wrapper")
        o, _, iattrs, its, k, v = _read_message(imv[start:end], verify_crc)
        if iattrs & _CODEC_MASK:
            raise CorruptRecord("nested compressed message")
        inner.append(Rec(o, ts if ts_type else its, k, v))
    if not inner:
        raise CorruptRecord(f"compressed message at offset {offset} holds no messages")
    if magic == 1:
        # Inner offsets are relative; the wrapper carries the absolute last offset. A
        # producer's wrapper (offset 0, inner offsets as the client chose them) gives a
        # negative base: then, as Kafka does, the inner offsets stand as written.
        shift = offset - inner[-1].offset
        if shift >= 0:
            for rec in inner:
                rec.offset += shift
    base = inner[0].offset
    return Batch(base, inner, magic, timestamp_type=ts_type, compression=codec,
                 last_offset_delta=inner[-1].offset - base, base_timestamp=ts,
                 max_timestamp=ts)


def _encode_message(offset: int, magic: int, attrs: int, ts: int, key: bytes | None,
                    value: bytes | None) -> bytes:
    w = Writer()
    w.int8(magic)
    w.int8(attrs)
    if magic == 1:
        w.int64(ts)
    w.bytes_(key)
    w.bytes_(value)
    body = w.getvalue()
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


def encode_message_set(records: list[Rec], *, magic: int = 1, compression: int = NONE,
                       timestamp_type: int = 0) -> bytes:
    """Encode records as a legacy message set (magic 0 or 1), optionally one gzip wrapper."""
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    tbit = _TIMESTAMP_TYPE if magic == 1 and timestamp_type else 0
    if compression == NONE:
        return b"".join(_encode_message(r.offset, magic, tbit, r.timestamp, r.key, r.value)
                        for r in records)
    if not records:
        return b""
    first = records[0].offset
    inner = b"".join(
        _encode_message(r.offset - first if magic == 1 else r.offset, magic, 0, r.timestamp,
                        r.key, r.value)
        for r in records)
    wrapper_ts = max(r.timestamp for r in records)
    return _encode_message(records[-1].offset, magic, (compression & _CODEC_MASK) | tbit,
                           wrapper_ts, None, _compress(compression, inner))
