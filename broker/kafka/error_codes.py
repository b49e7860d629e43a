"""Kafka's error codes (org.apache.kafka.common.protocol.Errors), by the names the
reference broker's core answers with.

The core's errors are strings (broker/PROTOCOL.md); the Kafka listener sends
their numbers. The numbers never changed between releases; names did (code 6 was
NOT_LEADER_FOR_PARTITION until Kafka 2.6 renamed it, KAFKA-10223), and a release
only sends the codes it knew, which the core's feature rows already ensure (no
FENCED_LEADER_EPOCH before KIP-320's 2.1, no sequence errors before 0.11).
"""

from __future__ import annotations

CODES: dict[str | None, int] = {
    None: 0,
    "UNKNOWN_SERVER_ERROR": -1,
    "OFFSET_OUT_OF_RANGE": 1,
    "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3,
    "LEADER_NOT_AVAILABLE": 5,
    "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "NETWORK_EXCEPTION": 13,
    "COORDINATOR_LOAD_IN_PROGRESS": 14,
    "COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR": 16,
    "RECORD_LIST_TOO_LARGE": 18,
    "NOT_ENOUGH_REPLICAS": 19,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20,
    "INVALID_REQUIRED_ACKS": 21,
    "ILLEGAL_GENERATION": 22,
    "INCONSISTENT_GROUP_PROTOCOL": 23,
    "INVALID_GROUP_ID": 24,
    "UNKNOWN_MEMBER_ID": 25,
    "INVALID_SESSION_TIMEOUT": 26,
    "REBALANCE_IN_PROGRESS": 27,
    "UNSUPPORTED_VERSION": 35,
    "INVALID_REQUEST": 42,
    "UNSUPPORTED_FOR_MESSAGE_FORMAT": 43,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45,
    "DUPLICATE_SEQUENCE_NUMBER": 46,
    "INVALID_PRODUCER_EPOCH": 47,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53,
    "UNKNOWN_PRODUCER_ID": 59,
    "FENCED_LEADER_EPOCH": 74,
    "UNKNOWN_LEADER_EPOCH": 75,
    "UNSUPPORTED_COMPRESSION_TYPE": 76,
    "MEMBER_ID_REQUIRED": 79,
    "INVALID_RECORD": 87,
    "PRODUCER_FENCED": 90,
}


def code(error: str | None) -> int:
    """The wire code of a core error string (an unknown one is UNKNOWN_SERVER_ERROR)."""
    return CODES.get(error, -1)
