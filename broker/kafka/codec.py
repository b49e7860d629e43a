"""Schema-driven encode/decode of Kafka request and response frames.

Bodies are plain dicts keyed by the snake_case names of schemas.py; nested arrays
are lists of dicts, `records` fields raw bytes (or None). Decoding fills every field
the schema knows, including those absent from the frame's version (with their
defaults), so a handler can read any key whatever version the client spoke.
"""

from __future__ import annotations

import copy
import struct
from dataclasses import dataclass
from typing import Any

from .primitives import ZERO_UUID, KafkaCodecError, Reader, Writer
from .schemas import SCHEMAS

API_VERSIONS_KEY = 18


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


class UnsupportedVersion(KafkaCodecError):
    """The header parsed, but this codec has no schema for its api key or version.

    The broker still has `header` to answer UNSUPPORTED_VERSION with its correlation id.
    """

    def __init__(self, header: RequestHeader, message: str | None = None):
        self.header = header
        super().__init__(message or (
            f"api {header.api_key} ({API_NAMES.get(header.api_key, 'unknown')}) "
            f"version {header.api_version} is not supported"))


class UnknownApiKey(UnsupportedVersion):
    """An api key this codec has no schema for at all."""


_ZERO: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "bool": False, "str": "",
    "bytes": b"", "records": None, "uuid": ZERO_UUID,
}
_MAX = 1 << 15  # an open-ended field: up to the api's newest version


class _Field:
    __slots__ = ("name", "kind", "elem", "lo", "hi", "null", "tag", "default", "sub", "_dflt")

    def __init__(self, spec: tuple[Any, ...]):
        name, typ, lo = spec[:3]
        hi = spec[3] if len(spec) > 3 else None
        opts = spec[4] if len(spec) > 4 else {}
        self.name, self.lo, self.hi = name, lo, _MAX if hi is None else hi
        self.null = opts.get("null")
        self.tag = opts.get("tag")
        self.elem = None
        self.sub: tuple[_Field, ...] = ()
        self._dflt: dict[int, bytes] = {}  # tagged fields: encoded default per version
        if isinstance(typ, list):
            self.kind, self.sub = "array", _compile(typ)
        elif isinstance(typ, tuple):
            self.kind, self.sub = "struct", _compile(typ)
        elif typ.startswith("[]"):
            self.kind, self.elem = "parray", typ[2:]
        else:
            self.kind = typ
        if "default" in opts:
            self.default = opts["default"]
        elif self.null is not None:
            self.default = None
        elif self.kind in ("array", "parray"):
            self.default = []
        elif self.kind == "struct":
            self.default = {f.name: f.default for f in self.sub}
        else:
            self.default = _ZERO[self.kind]

    def fresh_default(self) -> Any:
        d = self.default
        return copy.deepcopy(d) if isinstance(d, (list, dict)) else d

    def zero(self) -> Any:
        # What a missing non-nullable value encodes as when its default is None.
        if self.kind in ("array", "parray"):
            return []
        if self.kind == "struct":
            return {}
        return _ZERO[self.kind] if self.kind != "records" else b""


def _compile(specs: Any) -> tuple[_Field, ...]:
    return tuple(_Field(s) for s in specs)


class _Api:
    __slots__ = ("key", "name", "max_version", "flexible", "request", "response")

    def __init__(self, key: int, name: str, max_version: int, flexible: int | None,
                 request: Any, response: Any):
        self.key, self.name, self.max_version, self.flexible = key, name, max_version, flexible
        self.request, self.response = _compile(request), _compile(response)

    def is_flexible(self, version: int) -> bool:
        return self.flexible is not None and version >= self.flexible


APIS: dict[int, _Api] = {s[0]: _Api(*s) for s in SCHEMAS}
API_NAMES: dict[int, str] = {k: a.name for k, a in APIS.items()}
# Newest version of each api this codec can read and write (all from v0).
MAX_VERSIONS: dict[int, int] = {k: a.max_version for k, a in APIS.items()}


def is_flexible(api_key: int, version: int) -> bool:
    """Whether (api_key, version) uses compact encodings, tagged fields and header v2/v1."""
    return APIS[api_key].is_flexible(version)


def supports(api_key: int, version: int) -> bool:
    api = APIS.get(api_key)
    return api is not None and 0 <= version <= api.max_version


# ---- bodies -----------------------------------------------------------------------------

_PRIM_READ = {
    "int8": Reader.int8, "int16": Reader.int16, "int32": Reader.int32,
    "int64": Reader.int64, "bool": Reader.boolean, "uuid": Reader.uuid,
}
_PRIM_WRITE = {
    "int8": Writer.int8, "int16": Writer.int16, "int32": Writer.int32,
    "int64": Writer.int64, "bool": Writer.boolean, "uuid": Writer.uuid,
}


def _read_value(r: Reader, f: _Field, v: int, flex: bool) -> Any:
    nullable = f.null is not None and v >= f.null
    k = f.kind
    if k in _PRIM_READ:
        return _PRIM_READ[k](r)
    if k == "str":
        return r.string(flex, nullable)
    if k in ("bytes", "records"):
        return r.bytes_(flex, nullable)
    if k == "struct":
        return _read_struct(r, f.sub, v, flex)
    n = r.array_length(flex, nullable)
    if n is None:
        return None
    if k == "array":
        return [_read_struct(r, f.sub, v, flex) for _ in range(n)]
    if f.elem == "str":
        return [r.string(flex) for _ in range(n)]
    read = _PRIM_READ[f.elem]
    return [read(r) for _ in range(n)]


def _read_struct(r: Reader, fields: tuple[_Field, ...], v: int, flex: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if f.tag is None and f.lo <= v <= f.hi:
            out[f.name] = _read_value(r, f, v, flex)
        else:
            out[f.name] = f.fresh_default()
    if flex:
        for _ in range(r.tag_count()):
            tag = r.uvarint("tag")
            size = r.uvarint("tag size")
            start = r.pos
            r.raw(size, "tagged field")
            f = next((f for f in fields if f.tag == tag and f.lo <= v <= f.hi), None)
            if f is not None:  # unknown tags are skipped, as Kafka does
                out[f.name] = _read_value(Reader(r.buf, start, start + size), f, v, flex)
    return out


def _write_value(w: Writer, f: _Field, val: Any, v: int, flex: bool) -> None:
    k = f.kind
    if val is None and not (f.null is not None and v >= f.null):
        raise KafkaCodecError(f"{f.name} is not nullable in version {v}")
    try:
        if k in _PRIM_WRITE:
            _PRIM_WRITE[k](w, val)
        elif k == "str":
            w.string(val, flex)
        elif k in ("bytes", "records"):
            w.bytes_(val, flex)
        elif k == "struct":
            _write_struct(w, f.sub, val, v, flex)
        elif val is None:
            w.array_length(None, flex)
        else:
            w.array_length(len(val), flex)
            if k == "array":
                for item in val:
                    _write_struct(w, f.sub, item, v, flex)
            elif f.elem == "str":
                for item in val:
                    w.string(item, flex)
            else:
                write = _PRIM_WRITE[f.elem]
                for item in val:
                    write(w, item)
    except (TypeError, AttributeError) as e:
        raise KafkaCodecError(f"cannot encode {f.name}={val!r}: {e}") from None


def _value(f: _Field, d: dict[str, Any], v: int) -> Any:
    if f.name in d:
        return d[f.name]
    val = f.default
    if val is None and not (f.null is not None and v >= f.null):
        val = f.zero()
    return val


def _write_struct(w: Writer, fields: tuple[_Field, ...], d: dict[str, Any], v: int,
                  flex: bool) -> None:
    if not isinstance(d, dict):
        raise KafkaCodecError(f"expected a dict for a struct, got {type(d).__name__}")
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if not f.lo <= v <= f.hi:
            continue
        val = _value(f, d, v)
        if f.tag is None:
            _write_value(w, f, val, v, flex)
        elif flex:
            # Kafka writes a tagged field only when it differs from its default.
            sub = Writer()
            _write_value(sub, f, val, v, flex)
            if v not in f._dflt:
                dw = Writer()
                _write_value(dw, f, _value(f, {}, v), v, flex)
                f._dflt[v] = dw.getvalue()
            if sub.buf != f._dflt[v]:
                tagged.append((f.tag, sub.getvalue()))
    if flex:
        w.uvarint(len(tagged))
        for tag, data in sorted(tagged):
            w.uvarint(tag)
            w.uvarint(len(data))
            w.raw(data)


def _api(api_key: int, version: int) -> _Api:
    api = APIS.get(api_key)
    if api is None:
        raise KafkaCodecError(f"unknown api key {api_key}")
    if not 0 <= version <= api.max_version:
        raise KafkaCodecError(f"{api.name} version {version} is not supported")
    return api


def decode_body(api_key: int, version: int, data: bytes | memoryview, *,
                response: bool = False) -> dict[str, Any]:
    """Decode a request (or response) body with no header."""
    api = _api(api_key, version)
    r = Reader(data)
    return _read_struct(r, api.response if response else api.request, version,
                        api.is_flexible(version))


def encode_body(api_key: int, version: int, body: dict[str, Any], *,
                response: bool = False) -> bytes:
    """Encode a request (or response) body with no header."""
    api = _api(api_key, version)
    w = Writer()
    _write_struct(w, api.response if response else api.request, body, version,
                  api.is_flexible(version))
    return w.getvalue()


# ---- frames -----------------------------------------------------------------------------

def _response_header_flexible(api_key: int, version: int) -> bool:
    # ApiVersions answers with header v0 at every version: a client that does not yet
    # know the broker's versions must be able to parse it (KIP-511).
    return api_key != API_VERSIONS_KEY and is_flexible(api_key, version)


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode a request frame (the bytes after the 4-byte length prefix).

    Raises UnknownApiKey / UnsupportedVersion (both carrying `.header`) when the header
    is readable but the body's schema is not known, KafkaCodecError when malformed.
    """
    r = Reader(frame)
    api_key, version, correlation_id = r.int16(), r.int16(), r.int32()
    client_id = r.string(nullable=True)  # a classic string even in header v2
    header = RequestHeader(api_key, version, correlation_id, client_id)
    api = APIS.get(api_key)
    if api is None:
        raise UnknownApiKey(header, f"unknown api key {api_key} (version {version})")
    if not 0 <= version <= api.max_version:
        raise UnsupportedVersion(header)
    flex = api.is_flexible(version)
    if flex:
        r.skip_tags()
    return header, _read_struct(r, api.request, version, flex)


def encode_request(header: RequestHeader, body: dict[str, Any]) -> bytes:
    """Encode a request frame with its 4-byte length prefix."""
    api = _api(header.api_key, header.api_version)
    w = Writer()
    w.int32(0)
    w.int16(header.api_key)
    w.int16(header.api_version)
    w.int32(header.correlation_id)
    w.string(header.client_id)
    flex = api.is_flexible(header.api_version)
    if flex:
        w.uvarint(0)
    _write_struct(w, api.request, body, header.api_version, flex)
    struct.pack_into(">i", w.buf, 0, len(w.buf) - 4)
    return w.getvalue()


def encode_response(header: RequestHeader, body: dict[str, Any],
                    version: int | None = None) -> bytes:
    """Encode the response to `header`'s request, with its 4-byte length prefix.

    `version` overrides the request's version: an ApiVersions request of a version this
    codec does not know is answered at v0 (with UNSUPPORTED_VERSION and our ranges).
    """
    v = header.api_version if version is None else version
    api = _api(header.api_key, v)
    w = Writer()
    w.int32(0)
    w.int32(header.correlation_id)
    if _response_header_flexible(api.key, v):
        w.uvarint(0)
    _write_struct(w, api.response, body, v, api.is_flexible(v))
    struct.pack_into(">i", w.buf, 0, len(w.buf) - 4)
    return w.getvalue()


def decode_response(api_key: int, version: int,
                    frame: bytes | bytearray | memoryview) -> tuple[int, dict[str, Any]]:
    """Decode a response frame (after the length prefix): (correlation_id, body)."""
    api = _api(api_key, version)
    r = Reader(frame)
    correlation_id = r.int32()
    if _response_header_flexible(api_key, version):
        r.skip_tags()
    return correlation_id, _read_struct(r, api.response, version, api.is_flexible(version))
