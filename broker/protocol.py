"""The protocol versions the reference broker models, as one table of features.

Each version is a row of FEATURES: which replication rules of which Kafka
release it follows (docs/protocol-versions.md). The broker asks a feature
(`partition.features.leader_epochs`), never the version string, so adding a
version is a new row here, its api versions in kafka/versions.py (RELEASES), its
changed defaults in defaults.py, and their tests (docs/README.md, "a release line").

The broker is stdlib-only and ships alone (Docker image), so the names of its
versions live here; `contract` re-exports them for the rest of isrlab.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal, get_args, get_type_hints

from .errors import ConfigError

# How a replica that starts following a leader finds where its log diverges.
Truncation = Literal[
    "hw",                        # 0.10: truncate to its own HW (checkpointed HW after a restart)
    "offsets_for_leader_epoch",  # 0.11, KIP-101: ask the leader first, truncate to the answer
    "diverging_epoch",           # 2.8, KAFKA-10554: fetch at once; the leader's Fetch answer
                                 # names the diverging epoch and where it ends
]

# How a leader answers OffsetsForLeaderEpoch(epoch) (LeaderEpochFileCache.endOffsetFor).
EpochAnswer = Literal[
    "none",       # 0.10: no such request (INVALID_REQUEST)
    "kip101",     # 0.11.0, KIP-101: end offset only, epoch UNDEFINED: LEO for the latest
                  # epoch, else the start of the first later epoch; UNDEFINED offset when
                  # there is no later epoch or the epoch is below the first
    "kip279",     # 2.0.0, KIP-279: (largest epoch <= the one asked, its end offset), but
                  # (-1, -1) above the latest or below the first epoch (the KAFKA-7415 gap)
    "kafka7415",  # 2.1.0, KAFKA-7415: below the first epoch -> (asked epoch, first start)
]

# Who keeps broker liveness and the partition state (KIP-500; KRaft production-ready
# in 3.3, KIP-833). The model uses ZooKeeper up to 2.8 and KRaft from 3.7, because
# KIP-841 and KIP-903 (modelled from 3.7) are KRaft controller rules.
Quorum = Literal["zookeeper", "kraft"]

# How many of a producer's last batches a replica keeps to recognise a retry
# (ProducerStateManager): 0 without idempotence (0.10), 1 in 0.11.0, 5 from 1.0.0
# (KAFKA-5494: max.in.flight.requests.per.connection up to 5 with idempotence).
BatchesCached = Literal[0, 1, 5]

# How a leader answers a producer id it has no state for whose batch does not
# start at sequence 0 (broker/producer_state.py).
UnknownProducer = Literal[
    "none",                 # 0.10: no idempotent producer
    "out_of_order",         # 0.11.0: OUT_OF_ORDER_SEQUENCE_NUMBER
    "unknown_producer_id",  # 1.0.0, KAFKA-5793: UNKNOWN_PRODUCER_ID
    "accept",               # 2.5.0, KIP-360 (KAFKA-8710): appended at any sequence
]


@dataclass(frozen=True)
class Features:
    """The rules one protocol version follows; one field per rule that changed."""

    # 0.11, KIP-101: the leader-epoch cache (and its checkpoint file) gets
    # (epoch, start offset) on a leader's first append in an epoch and on a
    # follower's first fetched record of a newer epoch. (The model stamps every
    # record with its leader epoch in every version; without this rule nothing
    # keeps track of where epochs start.)
    leader_epochs: bool
    # See Truncation: 0.10 HW / 0.11 KIP-101 OffsetsForLeaderEpoch / 2.8 KAFKA-10554
    # diverging epoch in the Fetch response (then the follower sends its last fetched
    # epoch on every fetch and the leader checks it).
    truncation: Truncation
    # See EpochAnswer: 0.10 none / 0.11 KIP-101 / 2.0 KIP-279 / 2.1 KAFKA-7415.
    epoch_answer: EpochAnswer
    # 2.0, KIP-279: the follower compares the answered epoch with its own and asks
    # again about an older epoch until both agree (several OffsetsForLeaderEpoch
    # rounds); before, one answer is final (UNDEFINED: truncate to the HW).
    epoch_iteration: bool
    # 2.1, KIP-320: Fetch and OffsetsForLeaderEpoch carry the sender's current leader
    # epoch; the leader answers FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH
    # (newer than its own), checked before NOT_LEADER (Partition.getLocalReplica).
    leader_epoch_fencing: bool
    # 2.1, KAFKA-7415: a new leader adds (its epoch, its LEO) to the epoch cache when
    # it becomes leader, not on its first append.
    epoch_on_become_leader: bool
    # 2.1, KAFKA-7415 (LeaderEpochFileCache.truncateAndAppend): a new entry replaces
    # the entries it conflicts with; before, only a later epoch at or after the
    # latest start is appended and anything else ignored.
    epoch_cache_truncate_and_append: bool
    # 2.1, KAFKA-7128: a follower joins the ISR only once it also holds everything
    # from the start of the leader's current epoch, not just up to the HW.
    isr_join_waits_for_epoch_start: bool
    # 3.7, KAFKA-15583: the leader's HW does not advance while the ISR is smaller
    # than min.insync.replicas.
    hw_frozen_below_min_isr: bool
    # 2.1, KAFKA-7164: a follower restarts truncation on a new leader epoch even when
    # the leader is the same; before, Partition.makeFollower returned false (no
    # truncation, fetcher untouched) unless the leader changed.
    refollow_on_epoch_change: bool
    # 0.10-2.0: a leader LEO below the follower's, with unclean election off, stops
    # the follower's broker (ReplicaFetcherThread.handleOffsetOutOfRange, fatal +
    # exit); 2.1, KAFKA-7414: never fatal, the follower truncates to the leader's LEO.
    offset_out_of_range_halts: bool
    # 2.1, KAFKA-7152: a follower whose LEO equals the leader's is never out of sync,
    # even when it has not fetched for replica.lag.time.max.ms.
    caught_up_at_leader_leo: bool
    # See Quorum: how a second incarnation of a live broker is refused.
    quorum: Quorum
    # 0.10-2.8, the ZooKeeper controller: taking a dead or shutting-down follower out
    # of the ISR writes a new leader epoch of the same leader (0.10.2.0
    # KafkaController.removeReplicaFromIsr: leaderEpoch + 1; 1.1-2.8
    # ReplicaStateMachine.doRemoveReplicasFromIsr: LeaderAndIsr.newLeaderAndIsr),
    # sent to the remaining replicas. A leader's own ISR change does not bump it; nor
    # does the KRaft controller's ISR shrink (KAFKA-15021, 3.6): the partition epoch only.
    controller_isr_removal_bumps_leader_epoch: bool
    # 0.10-2.8, ReplicaManager.makeFollowers: a LeaderAndIsr whose leader (-1) is not a
    # live broker is ignored ("cannot become follower since the new leader -1 is
    # unavailable"): the follower keeps its leader, its epoch and its fetcher. KRaft
    # (3.7 applyLocalFollowersDelta) applies it: no leader, no fetcher.
    follower_ignores_offline_leader: bool
    # 0.10-0.11, KafkaController.removeReplicaFromIsr: with unclean election enabled
    # the ISR keeps no last member -- when the last one dies it empties (leader -1).
    # From 1.1 (KAFKA-5642, ReplicaStateMachine) the last member stays whatever the
    # setting, as it always does with unclean election off.
    isr_empties_under_unclean_election: bool
    # 3.3, KIP-841: the controller refuses an AlterPartition that adds a fenced or
    # shutting-down broker to the ISR (INELIGIBLE_REPLICA).
    fenced_replicas_kept_out_of_isr: bool
    # 3.5, KIP-903: a follower's fetch carries its broker epoch and AlterPartition
    # names it; the controller refuses a stale incarnation (INELIGIBLE_REPLICA).
    alter_partition_broker_epochs: bool
    # 2.7, KIP-497 (AlterIsr): the leader's ISR change is a request to the controller.
    # One the controller refuses as stale (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION,
    # UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST) leaves the change pending until
    # newer partition state arrives (Partition.handleAlterIsrResponse, 2.7.0: "Giving
    # up"); before, the leader's own conditional ZooKeeper write that fails leaves
    # the ISR as it was and a later check tries again (Partition.updateIsr).
    isr_change_via_controller: bool
    # 4.0, KIP-966: the release can keep eligible leader replicas -- switched on by
    # the `eligible.leader.replicas.version` feature (controller config; off by
    # default in 4.0, on for new clusters from 4.1: broker/defaults.py). When on,
    # below min.insync.replicas the members that leave the ISR stay electable in
    # the ELR (the ISR may become empty); a broker registering after an unclean
    # shutdown (no clean-shutdown marker) leaves ISR and ELR; with ISR and ELR empty
    # the last known leader may lead again.
    eligible_leader_replicas: bool
    # 0.11, KIP-98: the idempotent producer. A batch carries (producer id, epoch,
    # base sequence); the leader keeps each producer's state, answers a retried
    # batch with its original offsets instead of appending it again, and refuses
    # an older epoch (INVALID_PRODUCER_EPOCH) or a sequence gap
    # (OUT_OF_ORDER_SEQUENCE_NUMBER); replicas rebuild the state from the log.
    idempotence: bool
    # See BatchesCached: 0.11.0 one batch per producer (a retry of any earlier one
    # is out of order); 1.0, KAFKA-5494: the last 5.
    producer_batches_cached: BatchesCached
    # See UnknownProducer: 0.11.0 out of order / 1.0 KAFKA-5793 UNKNOWN_PRODUCER_ID /
    # 2.5 KIP-360 accepted.
    unknown_producer: UnknownProducer
    # 2.7, KAFKA-10134: the group coordinator answers a member's Heartbeat between
    # its JoinGroup and SyncGroup answers (CompletingRebalance) with no error and
    # resets its session timer; before, REBALANCE_IN_PROGRESS (AwaitingSync).
    group_heartbeat_while_awaiting_sync: bool

    def __post_init__(self) -> None:
        for f, kind in get_type_hints(Features).items():
            value = getattr(self, f)
            allowed = get_args(kind) or (True, False)
            if type(value) is not type(allowed[0]) or value not in allowed:
                raise ValueError(f"Features.{f} must be one of {allowed}, got {value!r}")


# One row per Kafka release line, oldest first; each row is the one before it plus
# the rules that release brought (checked against apache/kafka at the tag, see
# docs/protocol-versions.md). `latest` is an alias of the newest row.
_V0_10 = Features(  # 0.10.2.0
    leader_epochs=False, truncation="hw", epoch_answer="none", epoch_iteration=False,
    leader_epoch_fencing=False, epoch_on_become_leader=False,
    epoch_cache_truncate_and_append=False,
    isr_join_waits_for_epoch_start=False, hw_frozen_below_min_isr=False,
    refollow_on_epoch_change=False, offset_out_of_range_halts=True,
    caught_up_at_leader_leo=False,
    quorum="zookeeper",
    # KafkaController.removeReplicaFromIsr (0.10.2.0): leaderEpoch + 1; the last ISR
    # member kept only with unclean election off. ReplicaManager.makeFollowers: a
    # leader of -1 is not a live broker, the LeaderAndIsr is ignored.
    controller_isr_removal_bumps_leader_epoch=True, follower_ignores_offline_leader=True,
    isr_empties_under_unclean_election=True,
    fenced_replicas_kept_out_of_isr=False,
    alter_partition_broker_epochs=False, eligible_leader_replicas=False,
    isr_change_via_controller=False,
    idempotence=False, producer_batches_cached=0, unknown_producer="none",
    group_heartbeat_while_awaiting_sync=False)
_V0_11 = replace(  # 0.11.0.0
    _V0_10, leader_epochs=True,                            # KIP-101
    truncation="offsets_for_leader_epoch",                 # KIP-101
    epoch_answer="kip101",                                 # KIP-101
    idempotence=True, producer_batches_cached=1,           # KIP-98
    unknown_producer="out_of_order")                       # KIP-98
_V2_0 = replace(  # 2.0.0
    _V0_11, epoch_answer="kip279", epoch_iteration=True,   # KIP-279
    # ReplicaStateMachine.doRemoveReplicasFromIsr keeps the last ISR member whatever
    # unclean.leader.election.enable says (KAFKA-5642, 1.1.0).
    isr_empties_under_unclean_election=False,
    producer_batches_cached=5,                             # KAFKA-5494 (1.0.0)
    unknown_producer="unknown_producer_id")                # KAFKA-5793 (1.0.0)
_V2_1 = replace(  # 2.1.0
    _V2_0, leader_epoch_fencing=True,                      # KIP-320 (KAFKA-7395)
    epoch_answer="kafka7415", epoch_on_become_leader=True,  # KAFKA-7415
    epoch_cache_truncate_and_append=True,                  # KAFKA-7415
    isr_join_waits_for_epoch_start=True,                   # KAFKA-7128
    refollow_on_epoch_change=True,                         # KAFKA-7164
    offset_out_of_range_halts=False,                       # KAFKA-7414
    caught_up_at_leader_leo=True)                          # KAFKA-7152
# 2.7.0: AlterIsr (KIP-497) moves the leader's ISR writes from ZooKeeper to the
# controller, which also makes paths reachable (`reachable:` in a scenario); 2.5's
# new defaults (KIP-537) are in broker/defaults.py.
_V2_7 = replace(  # 2.7.0
    _V2_1, isr_change_via_controller=True,                 # KIP-497
    unknown_producer="accept",                             # KIP-360 (2.5.0)
    group_heartbeat_while_awaiting_sync=True)              # KAFKA-10134
_V2_8 = replace(  # 2.8.0
    _V2_7, truncation="diverging_epoch")                   # KAFKA-10554 (KIP-595 fields)
_V3_7 = replace(  # 3.7.0
    _V2_8, hw_frozen_below_min_isr=True,                   # KAFKA-15583
    quorum="kraft",                                        # KIP-500, KIP-833 (3.3)
    # ReplicationControlManager: an ISR shrink bumps the partition epoch only
    # (KAFKA-15021, 3.6); ReplicaManager.applyLocalFollowersDelta applies a leader
    # of -1 (makeFollower, fetcher removed).
    controller_isr_removal_bumps_leader_epoch=False,
    follower_ignores_offline_leader=False,
    fenced_replicas_kept_out_of_isr=True,                  # KIP-841 (3.3)
    alter_partition_broker_epochs=True)                    # KIP-903 (3.5)
_V4_0 = replace(  # 4.0.0 (see docs/protocol-versions.md)
    _V3_7, eligible_leader_replicas=True)                  # KIP-966 (off by default)
# 4.1.0: the same rules; ELR on by default for new clusters (broker/defaults.py).
_V4_1 = _V4_0

FEATURES: Mapping[str, Features] = MappingProxyType({
    "0.10": _V0_10,
    "0.11": _V0_11,
    "2.0": _V2_0,
    "2.1": _V2_1,
    "2.7": _V2_7,
    "2.8": _V2_8,
    "3.7": _V3_7,
    "4.0": _V4_0,
    "4.1": _V4_1,
    "latest": _V4_1,
})

# The alias and the version it names; every other key of FEATURES is a release.
ALIASES: Mapping[str, str] = MappingProxyType({"latest": "4.1"})
# Every name a cluster config may give, oldest first, the alias last.
PROTOCOLS = tuple(FEATURES)
# The releases alone (what a matrix runs: `latest` would repeat the newest).
VERSIONS = tuple(v for v in FEATURES if v not in ALIASES)


def canonical(protocol: str) -> str:
    """The release a version name stands for (`latest` -> the newest)."""
    return ALIASES.get(protocol, protocol)


def features(protocol: str) -> Features:
    """The row of `protocol`; ConfigError (exit status 2) for an unknown version."""
    if protocol not in PROTOCOLS:
        raise ConfigError(
            f"unknown protocol version {protocol!r}; choose one of {', '.join(PROTOCOLS)}"
        )
    return FEATURES[protocol]
