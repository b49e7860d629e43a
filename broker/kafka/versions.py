"""Which versions of each api a Kafka broker of each release line offered.

RELEASES[line][api_key] = (min, max) as that release's broker answered ApiVersions; a
key absent = not offered. `magic` is the record-batch format the release writes.

Sources (apache/kafka mirror unless noted):
  0.10  tag 0.10.2.0: Protocol.java *_REQUEST schema arrays (versions 0..len-1); its
        ApiVersionsResponse lists every ApiKeys entry from v0. Message format v1.
  0.11  tag 0.11.0.0: same files. OffsetForLeaderEpoch is a cluster action but is still
        listed in ApiVersions (ApiKeys has no listener filtering yet).
  2.0   tag 2.0.0: requests/<Api>Request.java schemaVersions() array lengths.
  2.1   tag 2.1.0: same.
  2.7   tag 2.7.0: common/message/<Api>Request.json "validVersions".
  2.8   tag 2.8.0: same.
  3.7   tag 3.7.0: same; none of these is "latestVersionUnstable". Versions listed in
        "deprecatedVersions" (KIP-896) were still offered. Agrees with kafka-python
        3.0.12's recorded 3.7 ApiVersions (kafka/protocol/broker_version_data.py).
  4.0   4.0.0 is not in the mirror (trunk stops 2024-10-25). KIP-896 removed the
        deprecated versions (docs kafka.apache.org/40 upgrade + compatibility pages;
        the schemas' "removed in Apache Kafka 4.0" comments); exceptions: Produce still
        advertises v0-2 though it rejects them (KAFKA-18659, librdkafka), FindCoordinator
        v0 kept (KAFKA-18270), Metadata v0 kept (apache/kafka PR 19963). New maxima:
        Produce 12 (KIP-890), Fetch 17, ListOffsets 10, Metadata 13 (KIP-1102),
        ApiVersions 4, InitProducerId 5. Figures as recorded from a 4.0 broker in
        kafka-python 3.0.12 broker_version_data.py.
  4.1   as 4.0 plus Produce 13 (topic ids, KIP-516), Fetch 18 (high_watermark tag), and
        JoinGroup v0-1 added back (KAFKA-19444, apache/kafka PR 20116: in 4.0.1 and
        4.1.0, so 4.0.0 says 2-9). InitProducerId 6 exists in later schemas but is
        "latestVersionUnstable" there, so 4.1 offers 0-5. Established only from
        kafka-python's recorded 4.1 ApiVersions plus those PRs, not from a 4.1 tag.
"""

from __future__ import annotations

from ..protocol import canonical

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 8, 9, 10, 11
HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, API_VERSIONS = 12, 13, 14, 18
INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 22, 23

# Column order of the rows below.
_COLS = (PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH,
         FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, API_VERSIONS,
         INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH)

_R = tuple[int, int] | None
# line: (magic, Produce, Fetch, ListOffsets, Metadata, OffsetCommit, OffsetFetch,
#        FindCoordinator, JoinGroup, Heartbeat, LeaveGroup, SyncGroup, ApiVersions,
#        InitProducerId, OffsetForLeaderEpoch)
_ROWS: dict[str, tuple[int, tuple[_R, ...]]] = {
    "0.10": (1, ((0, 2), (0, 3), (0, 1), (0, 2), (0, 2), (0, 2),
                 (0, 0), (0, 1), (0, 0), (0, 0), (0, 0), (0, 0), None, None)),
    "0.11": (2, ((0, 3), (0, 5), (0, 2), (0, 4), (0, 3), (0, 3),
                 (0, 1), (0, 2), (0, 1), (0, 1), (0, 1), (0, 1), (0, 0), (0, 0))),
    "2.0": (2, ((0, 6), (0, 8), (0, 3), (0, 6), (0, 4), (0, 4),
                (0, 2), (0, 3), (0, 2), (0, 2), (0, 2), (0, 2), (0, 1), (0, 1))),
    "2.1": (2, ((0, 7), (0, 10), (0, 4), (0, 7), (0, 6), (0, 5),
                (0, 2), (0, 3), (0, 2), (0, 2), (0, 2), (0, 2), (0, 1), (0, 2))),
    "2.7": (2, ((0, 8), (0, 12), (0, 5), (0, 9), (0, 8), (0, 7),
                (0, 3), (0, 7), (0, 4), (0, 4), (0, 5), (0, 3), (0, 4), (0, 3))),
    "2.8": (2, ((0, 9), (0, 12), (0, 6), (0, 11), (0, 8), (0, 7),
                (0, 3), (0, 7), (0, 4), (0, 4), (0, 5), (0, 3), (0, 4), (0, 4))),
    "3.7": (2, ((0, 10), (0, 16), (0, 8), (0, 12), (0, 9), (0, 9),
                (0, 4), (0, 9), (0, 4), (0, 5), (0, 5), (0, 3), (0, 4), (0, 4))),
    "4.0": (2, ((0, 12), (4, 17), (1, 10), (0, 13), (2, 9), (1, 9),
                (0, 6), (2, 9), (0, 4), (0, 5), (0, 5), (0, 4), (0, 5), (2, 4))),
    "4.1": (2, ((0, 13), (4, 18), (1, 10), (0, 13), (2, 9), (1, 9),
                (0, 6), (0, 9), (0, 4), (0, 5), (0, 5), (0, 4), (0, 5), (2, 4))),
}

LINES: tuple[str, ...] = tuple(_ROWS)

RELEASES: dict[str, dict[int, tuple[int, int]]] = {
    line: {k: r for k, r in zip(_COLS, row, strict=True) if r is not None}
    for line, (_, row) in _ROWS.items()
}
MAGIC: dict[str, int] = {line: magic for line, (magic, _) in _ROWS.items()}

# Produce versions 4.0+ advertise but refuse (KAFKA-18659): the advertised minimum is 0
# only so that old librdkafka does not give up on the broker.
REJECTED_BELOW: dict[str, dict[int, int]] = {"4.0": {PRODUCE: 3}, "4.1": {PRODUCE: 3}}


def api_versions(line: str) -> dict[int, tuple[int, int]]:
    """The (min, max) per api key a broker of `line` (or its alias) offers."""
    return RELEASES[canonical(line)]


def accepts(line: str, api_key: int, version: int) -> bool:
    """Whether a broker of `line` would serve this request version (not just list it)."""
    line = canonical(line)
    rng = RELEASES[line].get(api_key)
    if rng is None or not rng[0] <= version <= rng[1]:
        return False
    return version >= REJECTED_BELOW.get(line, {}).get(api_key, 0)
