"""The protocol versions the reference broker models, as one table of features.

Each version is a row of FEATURES: which replication rules of which Kafka
release it follows (docs/protocol-versions.md). The broker asks a feature
(`partition.features.leader_epochs`), never the version string, so adding a
version is a new row here plus its tests.

The broker is stdlib-only and ships alone (Docker image), so the names of its
versions live here; `contract` re-exports them for the rest of isrlab.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, get_args, get_type_hints

from .config import ConfigError

# How a replica that starts following a leader finds where its log diverges.
Truncation = Literal[
    "hw",                        # 0.10: truncate to its own HW (checkpointed HW after a restart)
    "offsets_for_leader_epoch",  # 0.11, KIP-101: ask the leader first, truncate to the answer
    "diverging_epoch",           # 2.7, KAFKA-10554: fetch at once; the leader's Fetch answer
                                 # names the diverging epoch and where it ends
]

# How a leader answers OffsetsForLeaderEpoch(epoch).
EpochAnswer = Literal[
    "none",    # 0.10: no such request (INVALID_REQUEST)
    "kip101",  # 0.11, KIP-101: end offset only (LEO for the latest epoch, else the start
               # of the first later epoch); the answer's epoch is UNDEFINED
    "kip279",  # 2.0, KIP-279: (largest epoch <= the one asked, its end offset)
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
    # See Truncation: 0.10 HW / 0.11 KIP-101 OffsetsForLeaderEpoch / 2.7 KAFKA-10554
    # diverging epoch in the Fetch response (then the follower sends its last fetched
    # epoch on every fetch and the leader checks it).
    truncation: Truncation
    # See EpochAnswer: 0.10 none / 0.11 KIP-101 / 2.0 KIP-279.
    epoch_answer: EpochAnswer
    # 2.0, KIP-279: the follower compares the answered epoch with its own and asks
    # again about an older epoch until both agree (several OffsetsForLeaderEpoch
    # rounds); before, one answer is final (UNDEFINED: truncate to the HW).
    epoch_iteration: bool
    # 2.1, KIP-320: Fetch and OffsetsForLeaderEpoch carry the sender's current leader
    # epoch; the leader answers FENCED_LEADER_EPOCH (older) or UNKNOWN_LEADER_EPOCH
    # (newer than its own).
    leader_epoch_fencing: bool
    # 2.1, KAFKA-7415: a new leader adds (its epoch, its LEO) to the epoch cache when
    # it becomes leader, not on its first append.
    epoch_on_become_leader: bool
    # 2.1, KAFKA-7128: a follower joins the ISR only once it also holds everything
    # from the start of the leader's current epoch, not just up to the HW.
    isr_join_waits_for_epoch_start: bool
    # 3.7, KAFKA-15583: the leader's HW does not advance while the ISR is smaller
    # than min.insync.replicas.
    hw_frozen_below_min_isr: bool

    def __post_init__(self) -> None:
        for f, kind in get_type_hints(Features).items():
            value = getattr(self, f)
            allowed = get_args(kind) or (True, False)
            if type(value) is not type(allowed[0]) or value not in allowed:
                raise ValueError(f"Features.{f} must be one of {allowed}, got {value!r}")


# One row per version, oldest first; `latest` is the newest row. Columns in the
# order of the fields above: leader_epochs, truncation, epoch_answer,
# epoch_iteration, leader_epoch_fencing, epoch_on_become_leader,
# isr_join_waits_for_epoch_start, hw_frozen_below_min_isr.
FEATURES: Mapping[str, Features] = MappingProxyType({
    #                  epochs truncation                  answer    iter   fence  lead   join   hw
    "0.10":   Features(False, "hw",                       "none",   False, False, False, False, False),  # noqa: E501
    "0.11":   Features(True,  "offsets_for_leader_epoch", "kip101", False, False, False, False, False),  # noqa: E501
    "2.0":    Features(True,  "offsets_for_leader_epoch", "kip279", True,  False, False, False, False),  # noqa: E501
    "latest": Features(True,  "diverging_epoch",          "kip279", True,  True,  True,  True,  True),   # noqa: E501
})

PROTOCOLS = tuple(FEATURES)


def features(protocol: str) -> Features:
    """The row of `protocol`; ConfigError (exit status 2) for an unknown version."""
    if protocol not in PROTOCOLS:
        raise ConfigError(
            f"unknown protocol version {protocol!r}; choose one of {', '.join(PROTOCOLS)}"
        )
    return FEATURES[protocol]
