"""Kafka's APIs on the reference broker: each request becomes the core's own
requests (broker/PROTOCOL.md), so a Kafka client drives the same `Partition`s as
the built-in workload -- no second replication path.

This layer only translates: Kafka's request fields to the core's, the core's
error strings to Kafka's codes (error_codes), record batches to the log's
integer values and back (records). Every decision -- leadership, KIP-320
fencing, the HW, acks=all waiting for it, idempotent producers' sequences -- is
the core's.

What a release offered is the release's (versions.api_versions): its ApiVersions
answer, and which requests it takes. As Kafka's SocketServer (RequestContext.
parseRequest, KafkaApis.handle), an ApiVersions request of a version the broker
does not offer is answered UNSUPPORTED_VERSION in version 0 with the versions it
does offer, so the client can ask again; any other request of an API or version
it does not offer closes the connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ..protocol import canonical
from ..wire import parse_addr
from . import codec, records, versions
from .error_codes import code
from .groups import GroupApis
from .listener import CLOSE, kafka_listen_address

log = logging.getLogger("broker.kafka")

CoreRequest = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]

API_PRODUCE, API_FETCH, API_LIST_OFFSETS, API_METADATA = 0, 1, 2, 3
API_VERSIONS, API_INIT_PRODUCER_ID, API_OFFSET_FOR_LEADER_EPOCH = 18, 22, 23
# The log's values are the workload's integers; a record value must be one in
# decimal ASCII (what every isrlab client writes).
_INT_VALUE = re.compile(rb"-?[0-9]{1,19}\Z")
FETCH_MAX_RECORDS = 500  # the core's page; a consumer asks again for more
CLUSTER_ID = "isrlab-reference-cluster"


def topic_id(name: str) -> uuid.UUID:
    """KIP-516's topic id (2.8+). Kafka draws a random one when the topic is made;
    the model's topics are made by the run's config, so the id is derived from
    the name: the same on every broker, never the zero UUID."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"isrlab:topic:{name}")


def log_batches(recs: list[list[Any]], magic: int) -> bytes:
    """The core's records ([offset, epoch, value(, producer batch header)]) as Kafka
    record data: magic 2 batches, one per run of records of one leader epoch and
    producer batch (the epoch as the partition leader epoch, the producer's id,
    epoch and base sequence as its header); a legacy message set for a Fetch
    older than v4 (down-conversion, as Kafka does for old consumers). The log
    keeps no timestamps: every record's is -1 (none)."""
    def rec(r: list[Any]) -> records.Rec:
        return records.Rec(r[0], -1, None, str(r[2]).encode())
    if magic < 2:
        return records.encode_message_set([rec(r) for r in recs], magic=magic)

    def head(r: list[Any]) -> tuple[int, tuple[int, ...] | None]:
        return r[1], tuple(r[3]) if len(r) > 3 and r[3] is not None else None
    out = []
    for (epoch, p), run in itertools.groupby(recs, key=head):
        producer = {} if p is None else {"producer_id": p[0], "producer_epoch": p[1],
                                         "base_sequence": p[2]}
        out.append(records.encode_batch([rec(r) for r in run],
                                        partition_leader_epoch=epoch, **producer))
    return b"".join(out)


class Changes:
    """Wakes a long-polling Fetch when the broker's state may have moved."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass


class KafkaApis:
    """Answers one broker's Kafka requests, frame in, frame out."""

    def __init__(self, node: str, protocol: str, brokers: list[str],
                 topics: list[dict[str, Any]], core: CoreRequest, changes: Changes,
                 advertised: dict[str, str] | None = None,
                 controller: str | None = None, cluster_id: str | None = None) -> None:
        self.node = node
        # The run's own (broker/admin.py), as Metadata answers it; a constant without.
        self.cluster_id = cluster_id or CLUSTER_ID
        # Where clients reach each broker's Kafka listener, when not its own
        # address's port + 1 (Docker's published ports).
        self.advertised = dict(advertised or {})
        self.release = canonical(protocol)
        self.offered = versions.api_versions(self.release)
        self.node_ids = {b: i for i, b in enumerate(brokers)}  # the config's order
        self.topics = {t["name"]: int(t["partitions"]) for t in topics}
        self.topic_names = {topic_id(t): t for t in self.topics}
        self.core = core
        self.changes = changes
        # Consumer groups: forwarded to the controller (groups.py).
        self.groups = GroupApis(self, controller) if controller else None

    # -- frames ------------------------------------------------------------------

    async def handle_frame(self, frame: bytes) -> bytes | None:
        try:
            header, body = codec.decode_request(frame)
            if not versions.accepts(self.release, header.api_key, header.api_version):
                raise codec.UnsupportedVersion(header)
        except codec.UnsupportedVersion as e:
            if e.header.api_key == API_VERSIONS:
                return codec.encode_response(e.header, {
                    "error_code": code("UNSUPPORTED_VERSION"),
                    "api_keys": self._api_keys()}, version=0)
            log.warning("closing a Kafka connection: API %s version %s not offered by %s",
                        e.header.api_key, e.header.api_version, self.release)
            return CLOSE
        except codec.KafkaCodecError as e:
            log.warning("closing a Kafka connection: %s", e)
            return CLOSE
        handler = self._handlers().get(header.api_key)
        if handler is None:
            return CLOSE
        answer = await handler(header.api_version, body)
        if answer is None or answer is CLOSE:
            return answer
        return codec.encode_response(header, answer)

    def _handlers(self) -> dict[int, Callable[[int, dict[str, Any]],
                                              Awaitable[dict[str, Any] | bytes | None]]]:
        return {API_VERSIONS: self.api_versions, API_METADATA: self.metadata,
                API_PRODUCE: self.produce, API_FETCH: self.fetch,
                API_LIST_OFFSETS: self.list_offsets,
                API_OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
                API_INIT_PRODUCER_ID: self.init_producer_id,
                **(self.groups.handlers() if self.groups else {})}

    def _api_keys(self) -> list[dict[str, int]]:
        return [{"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(self.offered.items())]

    # -- ApiVersions, Metadata -----------------------------------------------------

    async def api_versions(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": self._api_keys()}

    async def metadata(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        meta = await self.core({"type": "metadata"}) or {}
        addresses: dict[str, str] = meta.get("brokers", {})
        brokers = []
        for name, nid in self.node_ids.items():
            addr = self.advertised.get(name) or (
                kafka_listen_address(addresses[name]) if name in addresses else None)
            if addr is None:
                continue
            host, port = parse_addr(addr)
            brokers.append({"node_id": nid, "host": host, "port": port, "rack": None})
        states = {(s["topic"], s["partition"]): s for s in meta.get("partitions", [])}
        asked = body.get("topics")
        # v0: an empty list means every topic; v1+: null does (empty means none).
        names = (list(self.topics) if asked is None or (version == 0 and not asked)
                 else [t.get("name") for t in asked])
        topics = []
        for name in names:
            if name not in self.topics:
                topics.append({"error_code": code("UNKNOWN_TOPIC_OR_PARTITION"), "name": name,
                               "topic_id": uuid.UUID(int=0), "partitions": []})
                continue
            parts = []
            for p in range(self.topics[name]):
                st = states.get((name, p), {})
                leader = st.get("leader")
                parts.append({
                    "error_code": 0 if leader is not None else code("LEADER_NOT_AVAILABLE"),
                    "partition_index": p,
                    "leader_id": self.node_ids.get(leader, -1),
                    "leader_epoch": st.get("leader_epoch", -1),
                    "replica_nodes": [self.node_ids[r] for r in st.get("replicas", [])],
                    "isr_nodes": [self.node_ids[r] for r in st.get("isr", [])],
                    "offline_replicas": []})
            topics.append({"error_code": 0, "name": name, "topic_id": topic_id(name),
                           "is_internal": False, "partitions": parts})
        controller = min(self.node_ids.values(), default=-1)
        return {"brokers": brokers, "cluster_id": self.cluster_id, "controller_id": controller,
                "topics": topics}

    # -- Produce --------------------------------------------------------------------

    async def produce(self, version: int, body: dict[str, Any]) -> dict[str, Any] | bytes | None:
        acks = int(body.get("acks", -1))
        jobs, where = [], []
        for t in body.get("topic_data", []):
            for pd in t.get("partition_data", []):
                where.append((t["name"], pd["index"]))
                jobs.append(self._produce_partition(version, t["name"], pd["index"],
                                                    pd.get("records"), acks,
                                                    int(body.get("timeout_ms", 30000))))
        answers = await asyncio.gather(*jobs)
        if acks == 0:
            # KafkaApis.handleProduceRequest: no response to acks 0; an error closes
            # the connection so the producer refreshes its metadata.
            return CLOSE if any(a.get("error_code") for a in answers) else None
        out: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), a in zip(where, answers, strict=True):
            out.setdefault(topic, []).append({"index": p, **a})
        return {"responses": [{"name": t, "partition_responses": ps} for t, ps in out.items()]}

    async def _produce_partition(self, version: int, topic: str, partition: int,
                                 data: bytes | None, acks: int,
                                 timeout_ms: int) -> dict[str, Any]:
        def failed(error: str) -> dict[str, Any]:
            return {"error_code": code(error), "base_offset": -1}
        if acks not in (-1, 0, 1):
            return failed("INVALID_REQUIRED_ACKS")
        if topic not in self.topics or not 0 <= partition < self.topics[topic]:
            return failed("UNKNOWN_TOPIC_OR_PARTITION")
        try:
            batches = records.decode_records(data or b"")
        except records.UnsupportedCompression:
            return failed("UNSUPPORTED_COMPRESSION_TYPE")
        except codec.KafkaCodecError as e:
            log.warning("produce to %s-%d: %s", topic, partition, e)
            return failed("CORRUPT_MESSAGE")
        if version >= 3 and len(batches) != 1:
            # ProduceRequest.validateRecords (0.11.0+): v3+ carries exactly one batch.
            return failed("INVALID_REQUEST" if batches else "CORRUPT_MESSAGE")
        values = []
        for b in batches:
            for r in b.records:
                if r.value is None or not _INT_VALUE.match(r.value):
                    log.warning("produce to %s-%d: a record value that is not a decimal "
                                "integer", topic, partition)
                    return failed("CORRUPT_MESSAGE")
                values.append(int(r.value))
        if not values:
            return failed("CORRUPT_MESSAGE")
        msg: dict[str, Any] = {"type": "produce", "topic": topic, "partition": partition,
                               "values": values, "acks": "all" if acks == -1 else acks,
                               "timeout_ms": timeout_ms}
        b = batches[0]
        if b.magic >= 2 and b.producer_id >= 0:
            msg["producer"] = {"producer_id": b.producer_id, "producer_epoch": b.producer_epoch,
                               "base_sequence": b.base_sequence}
        resp = await self.core(msg)
        if resp is None:
            return {"error_code": 0, "base_offset": -1}
        if resp.get("close"):
            return failed("NOT_LEADER_OR_FOLLOWER")
        err = resp.get("error")
        return {"error_code": code(err),
                "base_offset": resp.get("offset") if resp.get("offset") is not None else -1,
                "log_append_time_ms": -1, "log_start_offset": 0}

    # -- Fetch, ListOffsets, OffsetForLeaderEpoch ------------------------------------

    def _topic_of(self, t: dict[str, Any]) -> str | None:
        if "topic_id" in t and t.get("topic_id") is not None and not t.get("topic"):
            return self.topic_names.get(t["topic_id"])
        return t.get("topic")

    async def fetch(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        asked = [(t, p) for t in body.get("topics", []) for p in t.get("partitions", [])]
        deadline = time.monotonic() + max(int(body.get("max_wait_ms", 0)), 0) / 1000
        while True:
            answers = await asyncio.gather(*(self._fetch_partition(version, t, p)
                                             for t, p in asked))
            left = deadline - time.monotonic()
            # Kafka's DelayedFetch: wait for data (min_bytes, at least one byte
            # asked) until max_wait_ms, unless an answer is an error.
            if (left <= 0 or int(body.get("min_bytes", 1)) <= 0
                    or any(a["records"] or a["error_code"] for a in answers)):
                break
            await self.changes.wait(left)
        out: dict[Any, dict[str, Any]] = {}
        for (t, _), a in zip(asked, answers, strict=True):
            key = t.get("topic_id") if version >= 13 else t.get("topic")
            entry = out.setdefault(key, {"topic": t.get("topic"), "topic_id": t.get("topic_id"),
                                         "partitions": []})
            entry["partitions"].append(a)
        return {"error_code": 0, "session_id": 0, "responses": list(out.values())}

    async def _fetch_partition(self, version: int, t: dict[str, Any],
                               p: dict[str, Any]) -> dict[str, Any]:
        topic, index = self._topic_of(t), p["partition"]
        base = {"partition_index": index, "high_watermark": -1, "last_stable_offset": -1,
                "log_start_offset": -1, "records": b""}
        if topic is None or topic not in self.topics:
            return {**base, "error_code": code("UNKNOWN_TOPIC_OR_PARTITION")}
        msg: dict[str, Any] = {"type": "fetch", "topic": topic, "partition": index,
                               "offset": p["fetch_offset"], "max_records": FETCH_MAX_RECORDS}
        cle = p.get("current_leader_epoch", -1)
        if cle is not None and cle >= 0:
            msg["current_leader_epoch"] = cle
        resp = await self.core(msg) or {}
        err = resp.get("error")
        if err:
            return {**base, "error_code": code(err)}
        hw = resp["hw"]
        recs = resp.get("records", [])
        blob = log_batches(recs, 2 if version >= 4 else 1) if recs else b""
        return {**base, "error_code": 0, "high_watermark": hw, "last_stable_offset": hw,
                "log_start_offset": 0, "records": blob}

    async def list_offsets(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        topics = []
        for t in body.get("topics", []):
            parts = []
            for p in t.get("partitions", []):
                parts.append(await self._list_offsets_partition(version, t["name"], p))
            topics.append({"name": t["name"], "partitions": parts})
        return {"topics": topics}

    async def _list_offsets_partition(self, version: int, topic: str,
                                      p: dict[str, Any]) -> dict[str, Any]:
        index = p["partition_index"]
        if topic not in self.topics:
            return {"partition_index": index, "error_code": code("UNKNOWN_TOPIC_OR_PARTITION"),
                    "old_style_offsets": []}
        msg: dict[str, Any] = {"type": "list-offsets", "topic": topic, "partition": index,
                               "timestamp": p["timestamp"]}
        cle = p.get("current_leader_epoch", -1)
        if cle is not None and cle >= 0:
            msg["current_leader_epoch"] = cle
        resp = await self.core(msg) or {}
        if resp.get("error"):
            return {"partition_index": index, "error_code": code(resp["error"]),
                    "old_style_offsets": []}
        offset = resp["offset"]
        return {"partition_index": index, "error_code": 0,
                "old_style_offsets": [offset] if offset >= 0 else [],
                "timestamp": -1, "offset": offset, "leader_epoch": resp.get("leader_epoch", -1)}

    async def offset_for_leader_epoch(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        topics = []
        for t in body.get("topics", []):
            parts = []
            for p in t.get("partitions", []):
                msg: dict[str, Any] = {"type": "offsets-for-leader-epoch", "topic": t["topic"],
                                       "partition": p["partition"],
                                       "leader_epoch_request": p["leader_epoch"]}
                cle = p.get("current_leader_epoch", -1)
                if cle is not None and cle >= 0:
                    msg["current_leader_epoch"] = cle
                resp = (await self.core(msg) if t["topic"] in self.topics
                        else {"error": "UNKNOWN_TOPIC_OR_PARTITION"}) or {}
                parts.append({"error_code": code(resp.get("error")),
                              "partition": p["partition"],
                              "leader_epoch": resp.get("leader_epoch", -1),
                              "end_offset": resp.get("end_offset", -1)})
            topics.append({"topic": t["topic"], "partitions": parts})
        return {"topics": topics}

    # -- InitProducerId -----------------------------------------------------------------

    async def init_producer_id(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        resp = await self.core({"type": "init-producer-id",
                                "transactional_id": body.get("transactional_id")}) or {}
        return {"error_code": code(resp.get("error")),
                "producer_id": resp.get("producer_id", -1),
                "producer_epoch": resp.get("producer_epoch", -1)}
