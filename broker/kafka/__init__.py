"""A stdlib-only codec for the Kafka wire protocol (requests, responses, record batches)."""

from __future__ import annotations

from .codec import (
    API_NAMES,
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
    is_flexible,
    supports,
)
from .primitives import KafkaCodecError

__all__ = [
    "API_NAMES", "MAX_VERSIONS", "KafkaCodecError", "RequestHeader", "UnknownApiKey",
    "UnsupportedVersion", "decode_body", "decode_request", "decode_response", "encode_body",
    "encode_request", "encode_response", "is_flexible", "supports",
]
