"""Message schemas of the Kafka APIs the reference broker serves.

Restated from Kafka's message definitions (clients/src/main/resources/common/
message/*Request.json / *Response.json at apache/kafka trunk of 2024-10-25, plus the
Kafka 4.1 additions Produce v13 topic ids, Fetch v18 high_watermark and Metadata v13
error_code). The JSON schemas describe every version back to v0 wire-compatibly, so
they also give the 0.10.2 / 0.11 layouts (cross-checked in the tests).

A field is (name, type, first_version[, last_version[, options]]):
  type     "int8" "int16" "int32" "int64" "bool" "str" "bytes" "uuid" "records",
           "[]int32" / "[]int64" / "[]str" (arrays of primitives), a list of fields
           (array of structs) or a tuple of fields (a single struct);
  last     None or absent = up to the api's newest version here;
  options  "null": first version where the field is nullable,
           "tag": tag number (a tagged field in flexible versions, not inline),
           "default": value when the dict omits it (else 0 / "" / b"" / [] / False,
           or None for a nullable field).
Names are the snake_case of Kafka's JSON field names.
"""

from __future__ import annotations

from typing import Any

Field = tuple[Any, ...]


def _api(key: int, name: str, max_version: int, flexible: int | None,
         request: tuple[Field, ...], response: tuple[Field, ...]) -> tuple[Any, ...]:
    return key, name, max_version, flexible, request, response


# (api_key, name, newest version covered, first flexible version, request, response)
SCHEMAS: tuple[tuple[Any, ...], ...] = (
    _api(0, "Produce", 13, 9, (
        ("transactional_id", "str", 3, None, {"null": 3, "default": None}),
        ("acks", "int16", 0),
        ("timeout_ms", "int32", 0),
        ("topic_data", [
            ("name", "str", 0, 12),
            ("topic_id", "uuid", 13),
            ("partition_data", [
                ("index", "int32", 0),
                ("records", "records", 0, None, {"null": 0}),
                ], 0),
            ], 0),
    ), (
        ("responses", [
            ("name", "str", 0, 12),
            ("topic_id", "uuid", 13),
            ("partition_responses", [
                ("index", "int32", 0),
                ("error_code", "int16", 0),
                ("base_offset", "int64", 0),
                ("log_append_time_ms", "int64", 2, None, {"default": -1}),
                ("log_start_offset", "int64", 5, None, {"default": -1}),
                ("record_errors", [
                    ("batch_index", "int32", 8),
                    ("batch_index_error_message", "str", 8, None, {"null": 8, "default": None}),
                    ], 8),
                ("error_message", "str", 8, None, {"null": 8, "default": None}),
                ("current_leader", (
                    ("leader_id", "int32", 10, None, {"default": -1}),
                    ("leader_epoch", "int32", 10, None, {"default": -1}),
                    ), 10, None, {"tag": 0}),
                ], 0),
            ], 0),
        ("throttle_time_ms", "int32", 1),
        ("node_endpoints", [
            ("node_id", "int32", 10),
            ("host", "str", 10),
            ("port", "int32", 10),
            ("rack", "str", 10, None, {"null": 10, "default": None}),
            ], 10, None, {"tag": 0}),
    )),
    _api(1, "Fetch", 18, 12, (
        ("cluster_id", "str", 12, None, {"null": 12, "tag": 0, "default": None}),
        ("replica_id", "int32", 0, 14, {"default": -1}),
        ("replica_state", (
            ("replica_id", "int32", 15, None, {"default": -1}),
            ("replica_epoch", "int64", 15, None, {"default": -1}),
            ), 15, None, {"tag": 1}),
        ("max_wait_ms", "int32", 0),
        ("min_bytes", "int32", 0),
        ("max_bytes", "int32", 3, None, {"default": 2147483647}),
        ("isolation_level", "int8", 4),
        ("session_id", "int32", 7),
        ("session_epoch", "int32", 7, None, {"default": -1}),
        ("topics", [
            ("topic", "str", 0, 12),
            ("topic_id", "uuid", 13),
            ("partitions", [
                ("partition", "int32", 0),
                ("current_leader_epoch", "int32", 9, None, {"default": -1}),
                ("fetch_offset", "int64", 0),
                ("last_fetched_epoch", "int32", 12, None, {"default": -1}),
                ("log_start_offset", "int64", 5, None, {"default": -1}),
                ("partition_max_bytes", "int32", 0),
                ("replica_directory_id", "uuid", 17, None, {"tag": 0}),
                ("high_watermark", "int64", 18, None, {"tag": 1, "default": 9223372036854775807}),
                ], 0),
            ], 0),
        ("forgotten_topics_data", [
            ("topic", "str", 7, 12),
            ("topic_id", "uuid", 13),
            ("partitions", "[]int32", 7),
            ], 7),
        ("rack_id", "str", 11),
    ), (
        ("throttle_time_ms", "int32", 1),
        ("error_code", "int16", 7),
        ("session_id", "int32", 7),
        ("responses", [
            ("topic", "str", 0, 12),
            ("topic_id", "uuid", 13),
            ("partitions", [
                ("partition_index", "int32", 0),
                ("error_code", "int16", 0),
                ("high_watermark", "int64", 0),
                ("last_stable_offset", "int64", 4, None, {"default": -1}),
                ("log_start_offset", "int64", 5, None, {"default": -1}),
                ("diverging_epoch", (
                    ("epoch", "int32", 12, None, {"default": -1}),
                    ("end_offset", "int64", 12, None, {"default": -1}),
                    ), 12, None, {"tag": 0}),
                ("current_leader", (
                    ("leader_id", "int32", 12, None, {"default": -1}),
                    ("leader_epoch", "int32", 12, None, {"default": -1}),
                    ), 12, None, {"tag": 1}),
                ("snapshot_id", (
                    ("end_offset", "int64", 0, None, {"default": -1}),
                    ("epoch", "int32", 0, None, {"default": -1}),
                    ), 12, None, {"tag": 2}),
                ("aborted_transactions", [
                    ("producer_id", "int64", 4),
                    ("first_offset", "int64", 4),
                    ], 4, None, {"null": 4}),
                ("preferred_read_replica", "int32", 11, None, {"default": -1}),
                ("records", "records", 0, None, {"null": 0}),
                ], 0),
            ], 0),
        ("node_endpoints", [
            ("node_id", "int32", 16),
            ("host", "str", 16),
            ("port", "int32", 16),
            ("rack", "str", 16, None, {"null": 16, "default": None}),
            ], 16, None, {"tag": 0}),
    )),
    _api(2, "ListOffsets", 10, 6, (
        ("replica_id", "int32", 0),
        ("isolation_level", "int8", 2),
        ("topics", [
            ("name", "str", 0),
            ("partitions", [
                ("partition_index", "int32", 0),
                ("current_leader_epoch", "int32", 4, None, {"default": -1}),
                ("timestamp", "int64", 0),
                ("max_num_offsets", "int32", 0, 0, {"default": 1}),
                ], 0),
            ], 0),
        ("timeout_ms", "int32", 10),
    ), (
        ("throttle_time_ms", "int32", 2),
        ("topics", [
            ("name", "str", 0),
            ("partitions", [
                ("partition_index", "int32", 0),
                ("error_code", "int16", 0),
                ("old_style_offsets", "[]int64", 0, 0),
                ("timestamp", "int64", 1, None, {"default": -1}),
                ("offset", "int64", 1, None, {"default": -1}),
                ("leader_epoch", "int32", 4, None, {"default": -1}),
                ], 0),
            ], 0),
    )),
    _api(3, "Metadata", 13, 9, (
        ("topics", [
            ("topic_id", "uuid", 10),
            ("name", "str", 0, None, {"null": 10}),
            ], 0, None, {"null": 1}),
        ("allow_auto_topic_creation", "bool", 4, None, {"default": True}),
        ("include_cluster_authorized_operations", "bool", 8, 10),
        ("include_topic_authorized_operations", "bool", 8),
    ), (
        ("throttle_time_ms", "int32", 3),
        ("brokers", [
            ("node_id", "int32", 0),
            ("host", "str", 0),
            ("port", "int32", 0),
            ("rack", "str", 1, None, {"null": 1, "default": None}),
            ], 0),
        ("cluster_id", "str", 2, None, {"null": 2, "default": None}),
        ("controller_id", "int32", 1, None, {"default": -1}),
        ("topics", [
            ("error_code", "int16", 0),
            ("name", "str", 0, None, {"null": 12}),
            ("topic_id", "uuid", 10),
            ("is_internal", "bool", 1),
            ("partitions", [
                ("error_code", "int16", 0),
                ("partition_index", "int32", 0),
                ("leader_id", "int32", 0),
                ("leader_epoch", "int32", 7, None, {"default": -1}),
                ("replica_nodes", "[]int32", 0),
                ("isr_nodes", "[]int32", 0),
                ("offline_replicas", "[]int32", 5),
                ], 0),
            ("topic_authorized_operations", "int32", 8, None, {"default": -2147483648}),
            ], 0),
        ("cluster_authorized_operations", "int32", 8, 10, {"default": -2147483648}),
        ("error_code", "int16", 13),
    )),
    _api(8, "OffsetCommit", 9, 8, (
        ("group_id", "str", 0),
        ("generation_id_or_member_epoch", "int32", 1, None, {"default": -1}),
        ("member_id", "str", 1),
        ("group_instance_id", "str", 7, None, {"null": 7, "default": None}),
        ("retention_time_ms", "int64", 2, 4, {"default": -1}),
        ("topics", [
            ("name", "str", 0),
            ("partitions", [
                ("partition_index", "int32", 0),
                ("committed_offset", "int64", 0),
                ("committed_leader_epoch", "int32", 6, None, {"default": -1}),
                ("commit_timestamp", "int64", 1, 1, {"default": -1}),
                ("committed_metadata", "str", 0, None, {"null": 0}),
                ], 0),
            ], 0),
    ), (
        ("throttle_time_ms", "int32", 3),
        ("topics", [
            ("name", "str", 0),
            ("partitions", [
                ("partition_index", "int32", 0),
                ("error_code", "int16", 0),
                ], 0),
            ], 0),
    )),
    _api(9, "OffsetFetch", 9, 6, (
        ("group_id", "str", 0, 7),
        ("topics", [
            ("name", "str", 0, 7),
            ("partition_indexes", "[]int32", 0, 7),
            ], 0, 7, {"null": 2}),
        ("groups", [
            ("group_id", "str", 8),
            ("member_id", "str", 9, None, {"null": 9, "default": None}),
            ("member_epoch", "int32", 9, None, {"default": -1}),
            ("topics", [
                ("name", "str", 8),
                ("partition_indexes", "[]int32", 8),
                ], 8, None, {"null": 8}),
            ], 8),
        ("require_stable", "bool", 7),
    ), (
        ("throttle_time_ms", "int32", 3),
        ("topics", [
            ("name", "str", 0, 7),
            ("partitions", [
                ("partition_index", "int32", 0, 7),
                ("committed_offset", "int64", 0, 7),
                ("committed_leader_epoch", "int32", 5, 7, {"default": -1}),
                ("metadata", "str", 0, 7, {"null": 0}),
                ("error_code", "int16", 0, 7),
                ], 0, 7),
            ], 0, 7),
        ("error_code", "int16", 2, 7),
        ("groups", [
            ("group_id", "str", 8),
            ("topics", [
                ("name", "str", 8),
                ("partitions", [
                    ("partition_index", "int32", 8),
                    ("committed_offset", "int64", 8),
                    ("committed_leader_epoch", "int32", 8, None, {"default": -1}),
                    ("metadata", "str", 8, None, {"null": 8}),
                    ("error_code", "int16", 8),
                    ], 8),
                ], 8),
            ("error_code", "int16", 8),
            ], 8),
    )),
    _api(10, "FindCoordinator", 6, 3, (
        ("key", "str", 0, 3),
        ("key_type", "int8", 1),
        ("coordinator_keys", "[]str", 4),
    ), (
        ("throttle_time_ms", "int32", 1),
        ("error_code", "int16", 0, 3),
        ("error_message", "str", 1, 3, {"null": 1}),
        ("node_id", "int32", 0, 3),
        ("host", "str", 0, 3),
        ("port", "int32", 0, 3),
        ("coordinators", [
            ("key", "str", 4),
            ("node_id", "int32", 4),
            ("host", "str", 4),
            ("port", "int32", 4),
            ("error_code", "int16", 4),
            ("error_message", "str", 4, None, {"null": 4}),
            ], 4),
    )),
    _api(11, "JoinGroup", 9, 6, (
        ("group_id", "str", 0),
        ("session_timeout_ms", "int32", 0),
        ("rebalance_timeout_ms", "int32", 1, None, {"default": -1}),
        ("member_id", "str", 0),
        ("group_instance_id", "str", 5, None, {"null": 5, "default": None}),
        ("protocol_type", "str", 0),
        ("protocols", [
            ("name", "str", 0),
            ("metadata", "bytes", 0),
            ], 0),
        ("reason", "str", 8, None, {"null": 8, "default": None}),
    ), (
        ("throttle_time_ms", "int32", 2),
        ("error_code", "int16", 0),
        ("generation_id", "int32", 0, None, {"default": -1}),
        ("protocol_type", "str", 7, None, {"null": 7, "default": None}),
        ("protocol_name", "str", 0, None, {"null": 7}),
        ("leader", "str", 0),
        ("skip_assignment", "bool", 9),
        ("member_id", "str", 0),
        ("members", [
            ("member_id", "str", 0),
            ("group_instance_id", "str", 5, None, {"null": 5, "default": None}),
            ("metadata", "bytes", 0),
            ], 0),
    )),
    _api(12, "Heartbeat", 4, 4, (
        ("group_id", "str", 0),
        ("generation_id", "int32", 0),
        ("member_id", "str", 0),
        ("group_instance_id", "str", 3, None, {"null": 3, "default": None}),
    ), (
        ("throttle_time_ms", "int32", 1),
        ("error_code", "int16", 0),
    )),
    _api(13, "LeaveGroup", 5, 4, (
        ("group_id", "str", 0),
        ("member_id", "str", 0, 2),
        ("members", [
            ("member_id", "str", 3),
            ("group_instance_id", "str", 3, None, {"null": 3, "default": None}),
            ("reason", "str", 5, None, {"null": 5, "default": None}),
            ], 3),
    ), (
        ("throttle_time_ms", "int32", 1),
        ("error_code", "int16", 0),
        ("members", [
            ("member_id", "str", 3),
            ("group_instance_id", "str", 3, None, {"null": 3}),
            ("error_code", "int16", 3),
            ], 3),
    )),
    _api(14, "SyncGroup", 5, 4, (
        ("group_id", "str", 0),
        ("generation_id", "int32", 0),
        ("member_id", "str", 0),
        ("group_instance_id", "str", 3, None, {"null": 3, "default": None}),
        ("protocol_type", "str", 5, None, {"null": 5, "default": None}),
        ("protocol_name", "str", 5, None, {"null": 5, "default": None}),
        ("assignments", [
            ("member_id", "str", 0),
            ("assignment", "bytes", 0),
            ], 0),
    ), (
        ("throttle_time_ms", "int32", 1),
        ("error_code", "int16", 0),
        ("protocol_type", "str", 5, None, {"null": 5, "default": None}),
        ("protocol_name", "str", 5, None, {"null": 5, "default": None}),
        ("assignment", "bytes", 0),
    )),
    _api(18, "ApiVersions", 4, 3, (
        ("client_software_name", "str", 3),
        ("client_software_version", "str", 3),
    ), (
        ("error_code", "int16", 0),
        ("api_keys", [
            ("api_key", "int16", 0),
            ("min_version", "int16", 0),
            ("max_version", "int16", 0),
            ], 0),
        ("throttle_time_ms", "int32", 1),
        ("supported_features", [
            ("name", "str", 3),
            ("min_version", "int16", 3),
            ("max_version", "int16", 3),
            ], 3, None, {"tag": 0}),
        ("finalized_features_epoch", "int64", 3, None, {"tag": 1, "default": -1}),
        ("finalized_features", [
            ("name", "str", 3),
            ("max_version_level", "int16", 3),
            ("min_version_level", "int16", 3),
            ], 3, None, {"tag": 2}),
        ("zk_migration_ready", "bool", 3, None, {"tag": 3}),
    )),
    _api(22, "InitProducerId", 5, 2, (
        ("transactional_id", "str", 0, None, {"null": 0}),
        ("transaction_timeout_ms", "int32", 0),
        ("producer_id", "int64", 3, None, {"default": -1}),
        ("producer_epoch", "int16", 3, None, {"default": -1}),
    ), (
        ("throttle_time_ms", "int32", 0),
        ("error_code", "int16", 0),
        ("producer_id", "int64", 0, None, {"default": -1}),
        ("producer_epoch", "int16", 0),
    )),
    _api(23, "OffsetForLeaderEpoch", 4, 4, (
        ("replica_id", "int32", 3, None, {"default": -2}),
        ("topics", [
            ("topic", "str", 0),
            ("partitions", [
                ("partition", "int32", 0),
                ("current_leader_epoch", "int32", 2, None, {"default": -1}),
                ("leader_epoch", "int32", 0),
                ], 0),
            ], 0),
    ), (
        ("throttle_time_ms", "int32", 2),
        ("topics", [
            ("topic", "str", 0),
            ("partitions", [
                ("error_code", "int16", 0),
                ("partition", "int32", 0),
                ("leader_epoch", "int32", 1, None, {"default": -1}),
                ("end_offset", "int64", 0, None, {"default": -1}),
                ], 0),
            ], 0),
    )),
)
