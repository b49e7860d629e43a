"""broker/kafka: the stdlib Kafka wire codec, cross-checked against kio and kafka-python."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import importlib
import io
import random
import struct
import uuid

import pytest

from broker.kafka import codec, versions
from broker.kafka.codec import (
    APIS,
    MAX_VERSIONS,
    RequestHeader,
    UnknownApiKey,
    UnsupportedVersion,
    decode_body,
    decode_request,
    decode_response,
    encode_body,
    encode_request,
    encode_response,
)
from broker.kafka.crc32c import crc32c
from broker.kafka.primitives import KafkaCodecError, Reader, Writer
from broker.kafka.records import (
    GZIP,
    LZ4,
    SNAPPY,
    ZSTD,
    CorruptRecord,
    Rec,
    UnsupportedCompression,
    decode_records,
    encode_batch,
    encode_message_set,
    rewrite_batch_header,
)

CASES = [(k, v) for k, a in APIS.items() for v in range(a.max_version + 1)]
IDS = [f"{APIS[k].name}-v{v}" for k, v in CASES]


# ---- random bodies from the schema ------------------------------------------------------

def _gen_value(f, v, rnd: random.Random, depth: int):
    nullable = f.null is not None and v >= f.null
    if nullable and rnd.random() < 0.2:
        return None
    k = f.kind
    if k == "struct":
        return _gen_struct(f.sub, v, rnd, depth + 1)
    if k == "array":
        return [_gen_struct(f.sub, v, rnd, depth + 1) for _ in range(rnd.randint(0, 2))]
    if k == "parray":
        return [_gen_prim(f.elem, f.name, rnd) for _ in range(rnd.randint(0, 3))]
    return _gen_prim(k, f.name, rnd)


def _gen_prim(kind: str, name: str, rnd: random.Random):
    if name == "error_code":
        return rnd.choice([0, 3, 6, 15])  # kio maps error codes to an enum
    if name in ("api_key", "key_type"):
        return rnd.choice([0, 1])
    if kind in ("int8", "int16", "int32", "int64"):
        big = {"int8": 99, "int16": 300}.get(kind, 70000)
        return rnd.choice([-1, 0, 1, 7, big])
    if kind == "bool":
        return rnd.random() < 0.5
    if kind == "str":
        return rnd.choice(["", "t", "topic-é", "x" * 40])
    if kind == "bytes":
        return rnd.choice([b"", b"\x00\x01", bytes(range(50))])
    if kind == "records":
        return encode_batch([Rec(rnd.randint(0, 9), 1000, b"k", b"v")])
    if kind == "uuid":
        return uuid.UUID(int=rnd.getrandbits(128))
    raise AssertionError(kind)


def _gen_struct(fields, v, rnd, depth=0):
    return {f.name: _gen_value(f, v, rnd, depth) for f in fields if f.lo <= v <= f.hi}


def _normalize(fields, d, v):
    """What decoding returns for d: out-of-version fields at their defaults."""
    out = {}
    for f in fields:
        if not f.lo <= v <= f.hi or f.name not in d:
            val = f.default
            if f.name not in d and f.lo <= v <= f.hi and val is None and not (
                    f.null is not None and v >= f.null):
                val = f.zero()
            out[f.name] = _normalize(f.sub, val, v) if f.kind == "struct" else val
            continue
        val = d[f.name]
        if f.kind == "struct":
            val = _normalize(f.sub, val, v)
        elif f.kind == "array" and val is not None:
            val = [_normalize(f.sub, x, v) for x in val]
        out[f.name] = val
    return out


def _schema(api_key, response):
    return APIS[api_key].response if response else APIS[api_key].request


# ---- round trips ------------------------------------------------------------------------

@pytest.mark.parametrize("api_key,version", CASES, ids=IDS)
@pytest.mark.parametrize("response", [False, True], ids=["request", "response"])
def test_body_round_trip_every_version(api_key, version, response):
    for seed in range(3):
        rnd = random.Random(f"{api_key}/{version}/{response}/{seed}")
        body = _gen_struct(_schema(api_key, response), version, rnd)
        data = encode_body(api_key, version, body, response=response)
        got = decode_body(api_key, version, data, response=response)
        assert got == _normalize(_schema(api_key, response), body, version)
        assert encode_body(api_key, version, got, response=response) == data


@pytest.mark.parametrize("api_key,version", CASES, ids=IDS)
def test_frames_round_trip(api_key, version):
    rnd = random.Random(f"frame/{api_key}/{version}")
    req = _gen_struct(APIS[api_key].request, version, rnd)
    hdr = RequestHeader(api_key, version, 123456, "client-é")
    frame = encode_request(hdr, req)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    h2, body = decode_request(frame[4:])
    assert h2 == hdr
    assert body == _normalize(APIS[api_key].request, req, version)
    resp = _gen_struct(APIS[api_key].response, version, rnd)
    rframe = encode_response(hdr, resp)
    assert struct.unpack(">i", rframe[:4])[0] == len(rframe) - 4
    corr, rbody = decode_response(api_key, version, rframe[4:])
    assert corr == 123456
    assert rbody == _normalize(APIS[api_key].response, resp, version)


def test_missing_fields_take_schema_defaults():
    _, body = decode_response(3, 12, encode_response(RequestHeader(3, 12, 1), {})[4:])
    assert body["controller_id"] == -1 and body["cluster_id"] is None
    assert body["brokers"] == [] and body["topics"] == []
    _, fetch = decode_response(1, 4, encode_response(RequestHeader(1, 4, 1), {
        "responses": [{"topic": "t", "partitions": [{"partition_index": 2}]}]})[4:])
    p = fetch["responses"][0]["partitions"][0]
    assert p["last_stable_offset"] == -1 and p["records"] is None
    assert p["aborted_transactions"] is None


# ---- kafka-python (kafka.protocol) cross-checks: every version ---------------------------

def _kp_classes():
    mods = ["kafka.protocol.producer.produce", "kafka.protocol.producer.transaction",
            "kafka.protocol.consumer.fetch", "kafka.protocol.consumer.offsets",
            "kafka.protocol.consumer.group", "kafka.protocol.metadata.metadata",
            "kafka.protocol.metadata.find_coordinator", "kafka.protocol.metadata.api_versions"]
    out = {}
    for m in mods:
        for obj in vars(importlib.import_module(m)).values():
            j = getattr(obj, "_json", None)
            if isinstance(obj, type) and isinstance(j, dict) and j.get("apiKey") in APIS:
                out[(j["apiKey"], j["type"] == "response")] = obj
    return out


KP = _kp_classes()


def _kp_plain(x):
    if isinstance(x, dict):
        return {k: _kp_plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_kp_plain(v) for v in x]
    return x


# kafka-python renames these (to share a property between Metadata versions)
_KP_ALIAS = {"topic_authorized_operations": "authorized_operations",
             "cluster_authorized_operations": "authorized_operations"}


def _assert_same_content(fields, ours, theirs, v, path=""):
    """Every in-version field kafka-python decoded equals ours (absent tagged struct = default)."""
    for f in fields:
        if not f.lo <= v <= f.hi:
            continue
        a = ours[f.name]
        b = theirs.get(f.name, theirs.get(_KP_ALIAS.get(f.name), f.default))
        if isinstance(b, set):  # kafka-python reads authorized operations as a bit set
            b = sum(1 << i for i in b)
            b = b - (1 << 32) if b >= 1 << 31 else b
        if b is None and a == -1 and f.kind == "int64":
            b = -1  # kio reads a -1 timestamp as None
        where = path + f.name
        if f.kind == "struct":
            _assert_same_content(f.sub, a, b if b is not None else f.default, v, where + ".")
        elif f.kind == "array" and a is not None:
            assert b is not None and len(a) == len(b), where
            for x, y in zip(a, b, strict=True):
                _assert_same_content(f.sub, x, y, v, where + "[].")
        else:
            assert a == b, (where, a, b)


def test_kafka_python_has_every_api():
    assert {k for k, _ in KP} == set(APIS)


@pytest.mark.parametrize("api_key,version", CASES, ids=IDS)
@pytest.mark.parametrize("response", [False, True], ids=["request", "response"])
def test_kafka_python_agrees_byte_for_byte(api_key, version, response):
    cls = KP[(api_key, response)]
    for seed in range(3):
        rnd = random.Random(f"kp/{api_key}/{version}/{response}/{seed}")
        body = _gen_struct(_schema(api_key, response), version, rnd)
        if api_key == 18 and response:
            body["error_code"] = 0  # kafka-python reads an ApiVersions error as v0 (KIP-511)
        ours = encode_body(api_key, version, body, response=response)
        theirs = cls.decode(ours, version=version)
        # Their reading of our bytes has our content ...
        _assert_same_content(_schema(api_key, response),
                             decode_body(api_key, version, ours, response=response),
                             _kp_plain(theirs.to_dict(json=False)), version)
        # ... and their encoding of that content is our bytes.
        assert theirs.encode() == ours


@pytest.mark.parametrize("api_key,version", [(0, 3), (0, 9), (1, 11), (1, 12), (3, 8), (3, 9),
                                             (18, 2), (18, 3), (22, 1), (22, 2)])
def test_kafka_python_frames_match(api_key, version):
    """Whole frames, headers included: header v1/v2 and ApiVersions' response header v0."""
    rnd = random.Random(f"kpframe/{api_key}/{version}")
    req = _gen_struct(APIS[api_key].request, version, rnd)
    hdr = RequestHeader(api_key, version, 77, "kp")
    ours = encode_request(hdr, req)
    theirs = KP[(api_key, False)].decode(encode_body(api_key, version, req), version=version)
    theirs.with_header(correlation_id=77, client_id="kp")
    assert theirs.encode(header=True, framed=True) == ours
    resp = _gen_struct(APIS[api_key].response, version, rnd)
    resp["error_code"] = 0  # (an ApiVersions error response is read as v0)
    ours = encode_response(hdr, resp)
    theirs = KP[(api_key, True)].decode(
        encode_body(api_key, version, resp, response=True), version=version)
    theirs.with_header(correlation_id=77)
    assert theirs.encode(header=True, framed=True) == ours


def test_api_versions_response_header_is_v0_even_when_flexible():
    frame = encode_response(RequestHeader(18, 3, 5, "c"), {"api_keys": []})
    # length, correlation id, then straight into the body (error_code): no tag buffer
    assert frame[4:8] == struct.pack(">i", 5) and frame[8:10] == b"\x00\x00"
    meta = encode_response(RequestHeader(3, 9, 5, "c"), {})
    assert meta[8] == 0  # Metadata v9 has response header v1: an empty tag buffer


# ---- kio cross-checks (kio's schemas start at each api's Kafka 4.x baseline) -------------

_KIO_MOD = {0: "produce", 1: "fetch", 2: "list_offsets", 3: "metadata", 8: "offset_commit",
            9: "offset_fetch", 10: "find_coordinator", 11: "join_group", 12: "heartbeat",
            13: "leave_group", 14: "sync_group", 18: "api_versions", 22: "init_producer_id",
            23: "offset_for_leader_epoch"}


def _kio_class(api_key, version, response):
    kind = "response" if response else "request"
    try:
        mod = importlib.import_module(f"kio.schema.{_KIO_MOD[api_key]}.v{version}.{kind}")
    except ModuleNotFoundError:
        return None
    name = APIS[api_key].name + ("Response" if response else "Request")
    return getattr(mod, name)


KIO_CASES = [(k, v, r) for k, v in CASES for r in (False, True) if _kio_class(k, v, r)]


def _kio_plain(x):
    if dataclasses.is_dataclass(x):
        return {f.name: _kio_plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, tuple):
        return [_kio_plain(v) for v in x]
    if isinstance(x, enum.Enum):
        return x.value
    if isinstance(x, datetime.timedelta):
        return int(x.total_seconds() * 1000)
    if isinstance(x, datetime.datetime):
        return int(x.timestamp() * 1000)
    return x


def _kio_rename(ours: dict, theirs: dict) -> dict:
    # kio drops the unit of timedelta fields (throttle_time_ms -> throttle_time)
    out = {}
    for k, v in theirs.items():
        key = k if k in ours else k + "_ms"
        assert key in ours, (k, sorted(ours))
        if isinstance(v, dict) and isinstance(ours[key], dict):
            v = _kio_rename(ours[key], v)
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            v = [_kio_rename(o, t) for o, t in zip(ours[key], v, strict=True)]
        out[key] = v
    return out


def test_kio_covers_the_kafka_4_versions():
    # A guard against the kio cross-check silently checking nothing.
    assert len(KIO_CASES) > 150
    assert (1, 18, True) in KIO_CASES and (0, 13, False) in KIO_CASES


@pytest.mark.parametrize("api_key,version,response", KIO_CASES,
                         ids=[f"{APIS[k].name}-v{v}-{'resp' if r else 'req'}"
                              for k, v, r in KIO_CASES])
def test_kio_agrees_byte_for_byte(api_key, version, response):
    from kio.serial import entity_reader, entity_writer
    cls = _kio_class(api_key, version, response)
    for seed in range(2):
        rnd = random.Random(f"kio/{api_key}/{version}/{response}/{seed}")
        body = _gen_struct(_schema(api_key, response), version, rnd)
        ours = encode_body(api_key, version, body, response=response)
        obj, n = entity_reader(cls)(memoryview(ours), 0)
        assert n == len(ours)
        buf = io.BytesIO()
        entity_writer(cls)(buf, obj)
        assert buf.getvalue() == ours
        decoded = decode_body(api_key, version, ours, response=response)
        theirs = _kio_rename(decoded, _kio_plain(obj))
        _assert_same_content(_schema(api_key, response), decoded, theirs, version)


# ---- headers and unsupported versions ----------------------------------------------------

def test_unknown_api_key_still_yields_header():
    frame = struct.pack(">hhih", 99, 3, 4242, 2) + b"id" + b"\x00\x00"
    with pytest.raises(UnknownApiKey) as e:
        decode_request(frame)
    assert e.value.header == RequestHeader(99, 3, 4242, "id")
    assert isinstance(e.value, UnsupportedVersion) and isinstance(e.value, KafkaCodecError)


@pytest.mark.parametrize("api_key,version", [(0, 14), (1, 19), (18, 5), (18, -1), (23, 5)])
def test_version_beyond_codec_yields_header(api_key, version):
    frame = struct.pack(">hhih", api_key, version, 9, -1) + b"\x00garbage"
    with pytest.raises(UnsupportedVersion) as e:
        decode_request(frame)
    assert type(e.value) is UnsupportedVersion
    assert e.value.header == RequestHeader(api_key, version, 9, None)


def test_api_versions_answer_at_v0_to_a_newer_client():
    hdr = RequestHeader(18, 7, 3, "new-client")
    frame = encode_response(hdr, {"error_code": 35, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 4}]}, version=0)
    resp = KP[(18, True)].decode(frame[4:], version=0, header=True)
    assert resp.error_code == 35 and resp.api_keys[0].max_version == 4
    assert resp.header.correlation_id == 3


def test_flexible_request_header_has_tag_buffer_and_skips_unknown_tags():
    hdr = RequestHeader(3, 12, 1, "c")
    frame = bytearray(encode_request(hdr, {"topics": None})[4:])
    head = 2 + 2 + 4 + 2 + 1
    assert frame[head] == 0  # empty header tag buffer
    # an unknown header tag (tag 7, 3 bytes) and an unknown body tag are skipped
    frame[head:head + 1] = b"\x01\x07\x03abc"
    frame[-1:] = b"\x01\x09\x01z"
    h, body = decode_request(bytes(frame))
    assert h == hdr and body["topics"] is None


def test_tagged_fields_written_only_when_not_default():
    plain = encode_body(1, 12, {"responses": [{"topic": "t", "partitions": [{}]}]},
                        response=True)
    tagged = encode_body(1, 12, {"responses": [{"topic": "t", "partitions": [
        {"current_leader": {"leader_id": 2, "leader_epoch": 5}}]}]}, response=True)
    assert len(tagged) > len(plain)
    got = decode_body(1, 12, tagged, response=True)
    p = got["responses"][0]["partitions"][0]
    assert p["current_leader"] == {"leader_id": 2, "leader_epoch": 5}
    assert p["diverging_epoch"] == {"epoch": -1, "end_offset": -1}


def test_encoding_rejects_bad_values():
    with pytest.raises(KafkaCodecError, match="not nullable"):
        encode_body(3, 0, {"topics": None})  # nullable only from v1
    with pytest.raises(KafkaCodecError):
        encode_body(12, 0, {"generation_id": 1 << 40})
    with pytest.raises(KafkaCodecError):
        encode_body(12, 0, {"group_id": 5})
    with pytest.raises(KafkaCodecError):
        encode_body(99, 0, {})


# ---- bad input --------------------------------------------------------------------------

def _sample_frames():
    out = []
    for k, v in [(0, 3), (0, 9), (1, 4), (1, 12), (3, 1), (3, 12), (11, 5), (18, 3), (9, 8)]:
        rnd = random.Random(f"bad/{k}/{v}")
        out.append(encode_request(RequestHeader(k, v, 1, "c"),
                                  _gen_struct(APIS[k].request, v, rnd))[4:])
    return out


def test_every_truncation_raises_codec_error():
    for frame in _sample_frames():
        decode_request(frame)
        for cut in range(len(frame)):
            with pytest.raises(KafkaCodecError):
                decode_request(frame[:cut])


def test_negative_lengths_raise_codec_error():
    r = Reader(struct.pack(">h", -2))
    with pytest.raises(KafkaCodecError, match="negative"):
        r.string(nullable=True)
    with pytest.raises(KafkaCodecError, match="negative"):
        Reader(struct.pack(">i", -7)).bytes_(nullable=True)
    with pytest.raises(KafkaCodecError, match="negative"):
        Reader(struct.pack(">i", -3)).array_length(nullable=True)
    with pytest.raises(KafkaCodecError, match="non-nullable"):
        Reader(struct.pack(">h", -1)).string()
    # Heartbeat v0 whose group_id length is -5
    frame = struct.pack(">hhih", 12, 0, 1, -1) + struct.pack(">h", -5)
    with pytest.raises(KafkaCodecError):
        decode_request(frame)


def test_absurd_array_lengths_are_refused_before_allocating():
    # Metadata v1 claiming 2**31-1 topics in a 4-byte body
    frame = struct.pack(">hhih", 3, 1, 1, -1) + struct.pack(">i", 0x7FFFFFFF)
    with pytest.raises(KafkaCodecError, match="remaining"):
        decode_request(frame)
    # compact array (Metadata v9) of 2**32 elements
    w = Writer()
    w.uvarint(1 << 32)
    frame = struct.pack(">hhih", 3, 9, 1, -1) + b"\x00" + w.getvalue()
    with pytest.raises(KafkaCodecError):
        decode_request(frame)
    with pytest.raises(KafkaCodecError, match="tagged fields"):
        Reader(b"\xff\xff\xff\x0f").skip_tags()


def test_overlong_varint_is_refused():
    with pytest.raises(KafkaCodecError, match="longer than 10"):
        Reader(b"\xff" * 11).uvarint()


def test_random_garbage_only_raises_codec_error():
    rnd = random.Random(5)
    frames = _sample_frames()
    for _ in range(3000):
        f = bytearray(rnd.choice(frames))
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(f))
            f[i] = rnd.randrange(256)
        try:
            decode_request(bytes(f))
        except KafkaCodecError:
            pass


# ---- primitives -------------------------------------------------------------------------

@pytest.mark.parametrize("value,encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01"),
    (-65, b"\x81\x01"), (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-(2**31), b"\xff\xff\xff\xff\x0f"),
])
def test_zigzag_varint_vectors(value, encoded):
    w = Writer()
    w.varint(value)
    assert w.getvalue() == encoded
    assert Reader(encoded).varint() == value


def test_varlong_extremes_and_compact_encodings():
    for v in (2**63 - 1, -(2**63), 1 << 40):
        w = Writer()
        w.varlong(v)
        assert Reader(w.getvalue()).varlong() == v
    w = Writer()
    w.string(None, compact=True)
    w.string("hé", compact=True)
    w.bytes_(b"", compact=True)
    w.array_length(None, compact=True)
    assert w.getvalue() == b"\x00\x04h\xc3\xa9\x01\x00"
    r = Reader(w.getvalue())
    assert r.string(True, True) is None and r.string(True) == "hé"
    assert r.bytes_(True) == b"" and r.array_length(True, True) is None


# ---- CRC-32C ----------------------------------------------------------------------------

def test_crc32c_vectors():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    assert crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def test_crc32c_matches_kafka_python():
    from kafka.record._crc32c import crc as kp_crc
    rnd = random.Random(1)
    for n in (1, 7, 100, 4099):
        data = rnd.randbytes(n)
        assert crc32c(data) == kp_crc(data)


# ---- record batches ---------------------------------------------------------------------

def _kp_v2(records, compression=0, pid=-1, epoch=-1, seq=-1, txn=False):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(2, compression, txn, pid, epoch, seq, 1 << 20)
    for off, ts, k, v, h in records:
        b.append(off, ts, k, v, h)
    return bytes(b.build())


RECS = [(0, 1_700_000_000_000, b"k0", b"v0", [("h", b"1"), ("n", None)]),
        (1, 1_700_000_000_005, None, b"v1" * 50, []),
        (2, 1_699_999_999_990, b"k2", None, [])]


@pytest.mark.parametrize("compression", [0, GZIP])
def test_decode_kafka_python_v2_batch(compression):
    blob = _kp_v2(RECS, compression, pid=4242, epoch=3, seq=17, txn=True)
    (b,) = decode_records(blob)
    assert (b.magic, b.producer_id, b.producer_epoch, b.base_sequence) == (2, 4242, 3, 17)
    assert b.is_transactional and not b.is_control and b.compression == compression
    assert b.last_offset_delta == 2 and b.max_timestamp == 1_700_000_000_005
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records] == [
        (o, t, k, v, h) for o, t, k, v, h in RECS]


@pytest.mark.parametrize("compression", [0, GZIP])
def test_kafka_python_reads_our_v2_batch(compression):
    from kafka.record.default_records import DefaultRecordBatch
    recs = [Rec(100 + o, t, k, v, h) for o, t, k, v, h in RECS]
    blob = encode_batch(recs, partition_leader_epoch=9, producer_id=77, producer_epoch=2,
                        base_sequence=5, compression=compression)
    kb = DefaultRecordBatch(bytearray(blob))
    assert kb.validate_crc()
    assert (kb.base_offset, kb.leader_epoch, kb.producer_id, kb.producer_epoch,
            kb.base_sequence, kb.compression_type) == (100, 9, 77, 2, 5, compression)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kb]
    assert got == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]
    assert decode_records(blob)[0].records == recs


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", [0, GZIP])
def test_decode_kafka_python_legacy(magic, compression):
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    b = LegacyRecordBatchBuilder(magic, compression, 1 << 20)
    for off, ts, k, v, _ in RECS:
        b.append(off + 10, ts if magic else None, k, v)
    blob = bytes(b.build())
    batches = decode_records(blob)
    recs = [r for bt in batches for r in bt.records]
    assert len(batches) == (1 if compression else 3)
    assert all(bt.magic == magic for bt in batches)
    assert [(r.offset, r.key, r.value) for r in recs] == [
        (o + 10, k, v) for o, _, k, v, _ in RECS]
    assert [r.timestamp for r in recs] == [t if magic else -1 for _, t, _, _, _ in RECS]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", [0, GZIP])
def test_kafka_python_reads_our_message_set(magic, compression):
    from kafka.record.memory_records import MemoryRecords
    recs = [Rec(o + 50, t if magic else -1, k, v) for o, t, k, v, _ in RECS]
    blob = encode_message_set(recs, magic=magic, compression=compression)
    got = []
    for batch in MemoryRecords(blob):
        assert batch.magic == magic
        for r in batch:
            assert r.validate_crc()
            got.append((r.offset, r.timestamp if magic else -1, r.key, r.value))
    assert got == [(r.offset, r.timestamp, r.key, r.value) for r in recs]
    assert [r for b in decode_records(blob) for r in b.records] == recs


def test_several_batches_in_one_blob_and_partial_tail():
    a = encode_batch([Rec(0, 1, b"a", b"1")])
    b = _kp_v2([(5, 2, b"b", b"2", [])], GZIP)
    c = encode_message_set([Rec(9, 3, None, b"3")])
    blob = a + b + c
    assert [r.value for bt in decode_records(blob) for r in bt.records] == [b"1", b"2", b"3"]
    assert [bt.magic for bt in decode_records(blob)] == [2, 2, 1]
    with pytest.raises(CorruptRecord):
        decode_records(blob[:-3])
    assert len(decode_records(blob[:-3], allow_partial=True)) == 2
    assert decode_records(None) == [] and decode_records(b"") == []


def test_rewrite_batch_header_keeps_crc_valid():
    from kafka.record.default_records import DefaultRecordBatch
    blob = encode_batch([Rec(0, 1, b"a", b"1"), Rec(1, 2, b"b", b"2")])
    moved = rewrite_batch_header(blob, 1000, partition_leader_epoch=12)
    assert moved[8:12] == blob[8:12] and moved[17:] == blob[17:]
    kb = DefaultRecordBatch(bytearray(moved))
    assert kb.validate_crc() and kb.base_offset == 1000 and kb.leader_epoch == 12
    assert [r.offset for r in decode_records(moved)[0].records] == [1000, 1001]


def _with_codec(blob: bytes, codec: int) -> bytes:
    out = bytearray(blob)
    attrs = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attrs & ~7) | codec)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


@pytest.mark.parametrize("codec", [SNAPPY, LZ4, ZSTD])
def test_other_codecs_reported_unsupported(codec):
    blob = _with_codec(encode_batch([Rec(0, 1, b"a", b"1")]), codec)
    with pytest.raises(UnsupportedCompression) as e:
        decode_records(blob)
    assert e.value.codec == codec
    with pytest.raises(UnsupportedCompression):
        encode_batch([Rec(0, 1, b"a", b"1")], compression=codec)


def test_corrupt_batches_raise_corrupt_record():
    blob = bytearray(encode_batch([Rec(0, 1, b"a", b"1")]))
    blob[-1] ^= 0xFF
    with pytest.raises(CorruptRecord, match="CRC"):
        decode_records(bytes(blob))
    legacy = bytearray(encode_message_set([Rec(0, 1, b"a", b"1")]))
    legacy[-1] ^= 0xFF
    with pytest.raises(CorruptRecord, match="CRC"):
        decode_records(bytes(legacy))
    bad_magic = bytearray(encode_batch([Rec(0, 1, b"a", b"1")]))
    bad_magic[16] = 7
    with pytest.raises(CorruptRecord, match="magic"):
        decode_records(bytes(bad_magic))
    # a record count far beyond the batch's bytes
    big = bytearray(encode_batch([Rec(0, 1, b"a", b"1")]))
    struct.pack_into(">i", big, 57, 1 << 30)
    struct.pack_into(">I", big, 17, crc32c(memoryview(big)[21:]))
    with pytest.raises(CorruptRecord):
        decode_records(bytes(big))


def test_record_garbage_only_raises_codec_errors():
    rnd = random.Random(9)
    base = encode_batch([Rec(0, 1, b"a", b"1", [("h", b"x")]), Rec(1, 2, None, b"2")])
    legacy = encode_message_set([Rec(0, 1, b"a", b"1"), Rec(1, 2, None, b"2")],
                                compression=GZIP)
    for _ in range(2000):
        f = bytearray(rnd.choice([base, legacy]))
        for _ in range(rnd.randint(1, 3)):
            f[rnd.randrange(len(f))] = rnd.randrange(256)
        try:
            decode_records(bytes(f), verify_crc=rnd.random() < 0.5)
        except KafkaCodecError:
            pass


# ---- per-release versions ----------------------------------------------------------------

def test_release_table_within_codec_and_monotonic():
    prev = {}
    for line in versions.LINES:
        for k, (lo, hi) in versions.RELEASES[line].items():
            assert 0 <= lo <= hi <= MAX_VERSIONS[k], (line, k)
            assert hi >= prev.get(k, 0), (line, k)  # no release lowered a maximum
            prev[k] = hi
    for k in MAX_VERSIONS:  # the codec covers exactly the union, no more
        assert MAX_VERSIONS[k] == max(r[k][1] for r in versions.RELEASES.values() if k in r)


def test_release_table_has_every_modelled_release():
    from broker.protocol import VERSIONS
    assert versions.LINES == VERSIONS


def test_release_table_facts():
    r = versions.RELEASES
    assert 22 not in r["0.10"] and 23 not in r["0.10"]
    assert versions.MAGIC["0.10"] == 1 and all(versions.MAGIC[x] == 2 for x in versions.LINES[1:])
    assert r["4.0"][1] == (4, 17) and r["3.7"][1] == (0, 16)  # KIP-896
    assert r["4.0"][11] == (2, 9) and r["4.1"][11] == (0, 9)  # KAFKA-19444
    assert versions.accepts("4.0", 0, 3) and not versions.accepts("4.0", 0, 2)
    assert versions.api_versions("latest") == r["4.1"]


def test_release_table_matches_kafka_python_recorded_brokers():
    """kafka-python records each broker release's ApiVersions answer independently."""
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
    keys = {"0.10": (0, 10, 2), "0.11": (0, 11), "2.0": (2, 0), "2.1": (2, 1), "2.7": (2, 7),
            "2.8": (2, 8), "3.7": (3, 7), "4.0": (4, 0), "4.1": (4, 1)}
    for line, kv in keys.items():
        theirs = {k: tuple(v) for k, v in BROKER_API_VERSIONS[kv].items() if k in APIS}
        assert theirs == versions.RELEASES[line], line


def test_codec_exports_flexible_boundaries():
    assert not codec.is_flexible(0, 8) and codec.is_flexible(0, 9)
    assert not codec.is_flexible(23, 3) and codec.is_flexible(23, 4)
    assert codec.supports(1, 18) and not codec.supports(1, 19) and not codec.supports(77, 0)


def test_broker_kafka_is_stdlib_only():
    """The broker ships alone (Docker image, SFTP): broker/kafka may import only the stdlib."""
    import ast
    import pathlib
    import sys
    pkg = pathlib.Path(codec.__file__).parent
    files = sorted(pkg.glob("*.py"))
    assert len(files) >= 7
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in sys.stdlib_module_names, (path.name, name)
