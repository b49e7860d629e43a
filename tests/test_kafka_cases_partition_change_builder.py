"""Kafka's PartitionChangeBuilderTest (metadata/src/test/java/org/apache/kafka/
controller/PartitionChangeBuilderTest.java at trunk 2024-10-25, commit 1eb7644),
election and ELR cases, restated against broker/controller_core.py.

Kafka's test hands the builder a partition registration, a liveness predicate
(`isAcceptableLeader`), min ISR and one change (a target ISR, a leader that went
offline, unclean-shutdown replicas), and checks the PartitionChangeRecord. The
model's controller takes changes only as inputs from brokers, so a row gives:

- the partition state, put into a ControllerCore whose live brokers are those the
  predicate accepts (brokers that are not live have registered once and left);
- the input that makes Kafka's change: the leader's AlterPartition (a target ISR
  with the leader in it), a broker leaving (its replica offline), a broker
  registering after an unclean shutdown (no clean-shutdown marker), or a broker
  registering cleanly (a controller event that runs the election);
- the state after it: Kafka's record applied to the registration.

PartitionChangeRecord versions 0 and 1 (metadata versions 3.7-IV0 / 3.7-IV2) have no
ELR: the model's protocol 3.7. Version 2 (4.0-IV1) has it: protocol 4.1 with the
ELR on. Kafka's ELR is a set built from a HashSet; it is compared as a set.

Several ELR cases run the builder with useLastKnownLeaderInBalancedRecovery=false,
which keeps every last-known ELR member in lastKnownElr. The model keeps Kafka's
default (true: lastKnownElr holds the last known leader alone), so in those rows
lastKnownElr is not compared (`lke=None`); ISR, ELR, leader and epochs are.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from controller_client import ControllerClient
from kafka_cases import NotApplicable, Ref, case

from broker.controller_core import ControllerCore, PartitionState
from broker.partition import Event

CLS = "PartitionChangeBuilderTest"
TAG = "trunk"
REPLICAS_1234 = ("1", "2", "3", "4")
FOO_REPLICAS = ("2", "1", "3")  # Kafka's FOO / OFFLINE partitions


def r(method: str) -> Ref:
    return Ref(CLS, method, TAG)


@dataclass(frozen=True)
class State:
    """A partition registration (Kafka's PartitionRegistration.Builder)."""

    replicas: tuple[str, ...]
    leader: str | None
    isr: tuple[str, ...]
    elr: tuple[str, ...] = ()
    lke: tuple[str, ...] = ()  # lastKnownElr
    leader_epoch: int = 100
    partition_epoch: int = 200


@dataclass(frozen=True)
class Setup:
    protocol: str             # the model's line for the record version / metadata version
    elr: bool                 # eligibleLeaderReplicasEnabled
    min_isr: int
    dead: tuple[str, ...]     # brokers isAcceptableLeader refuses
    unclean: bool = False     # Election.UNCLEAN


@dataclass(frozen=True)
class Expect:
    leader: str | None
    isr: tuple[str, ...]
    elr: tuple[str, ...]
    lke: tuple[str, ...] | None   # None: not compared (see the module docstring)
    leader_epoch: int
    partition_epoch: int
    unclean: bool | None = None   # LeaderRecoveryState RECOVERING = an unclean election


# An input: ("alter", isr) -- the leader's AlterPartition; ("dies", broker);
# ("registers", broker, clean).
Input = tuple

NO_ELR_37 = Setup("3.7", elr=False, min_isr=3, dead=("3",))
ELR_41 = Setup("4.1", elr=True, min_isr=3, dead=("3",))


def build(setup: Setup, state: State, trigger: Input) -> ControllerClient:
    """A controller where every replica has registered once, the dead ones (and
    the broker whose registration is the input) have left, holding `state`."""
    topics = [{"name": "t", "partitions": 1, "replicas": [list(state.replicas)]}]
    c = ControllerClient(ControllerCore(topics, 1_000_000, setup.unclean, protocol=setup.protocol,
                                        min_insync_replicas=setup.min_isr, elr=setup.elr))
    for b in state.replicas:
        c.register(b, f"{b}-1", 0)
    leaving = set(setup.dead)
    if trigger[0] == "registers":
        leaving.add(trigger[1])
    for b in state.replicas:
        if b in leaving:
            c.shutdown(b)
    c.core.partitions[("t", 0)] = PartitionState(
        "t", 0, list(state.replicas), leader=state.leader, leader_epoch=state.leader_epoch,
        isr=list(state.isr), partition_epoch=state.partition_epoch, elr=list(state.elr),
        last_known_elr=list(state.lke))
    return c


def apply(c: ControllerClient, state: State, trigger: Input) -> None:
    kind = trigger[0]
    if kind == "alter":
        resp = c.alter_partition(state.leader, state.leader_epoch, state.partition_epoch,
                                 list(trigger[1]))
        assert resp["error"] is None, resp
    elif kind == "dies":
        c.shutdown(trigger[1])
    elif kind == "registers":
        broker, clean = trigger[1], trigger[2]
        marker = c.core.broker_epochs[broker] if clean else -1
        assert c.register(broker, f"{broker}-2", 1, marker)["error"] is None
    else:
        raise AssertionError(f"unknown input {kind!r}")


CASES = [
    # -- ISR shrinks below min ISR: the members that leave go to the ELR ------------------
    case(r("testEligibleLeaderReplicas_IsrShrinkBelowMinISR"), NO_ELR_37,
         State(REPLICAS_1234, "1", ("1", "2", "3", "4")), ("alter", ("1", "2")),
         Expect("1", ("1", "2"), (), (), 100, 201), variant="pcr-v0-v1"),
    case(r("testEligibleLeaderReplicas_IsrShrinkBelowMinISR"), ELR_41,
         State(REPLICAS_1234, "1", ("1", "2", "3", "4")), ("alter", ("1", "2")),
         Expect("1", ("1", "2"), ("3", "4"), None, 100, 201), variant="pcr-v2"),
    # -- ISR back at min ISR: ELR and lastKnownElr cleared. Broker 3 is live here:
    #    the builder's liveness predicate (3 offline) only matters for an election,
    #    which this change does not run, while the model's controller (as Kafka's
    #    ReplicationControlManager, KIP-841) refuses to add an offline broker.
    case(r("testEligibleLeaderReplicas_IsrExpandAboveMinISR"),
         Setup("4.1", elr=True, min_isr=3, dead=()),
         State(REPLICAS_1234, "1", ("1", "2"), elr=("3",), lke=("4",)),
         ("alter", ("1", "2", "3")), Expect("1", ("1", "2", "3"), (), None, 100, 201),
         variant="pcr-v2"),
    # -- a new ISR member that was not in the ELR: the ELR keeps its member ------------
    case(r("testEligibleLeaderReplicas_IsrAddNewMemberNotInELR"), ELR_41,
         State(REPLICAS_1234, "1", ("1",), elr=("3",), lke=("2",)),
         ("alter", ("1", "4")), Expect("1", ("1", "4"), ("3",), None, 100, 201),
         variant="pcr-v2"),
    # -- an unclean shutdown takes the replica out of the ELR (KIP-966) ------------------
    case(r("testEligibleLeaderReplicas_RemoveUncleanShutdownReplicasFromElr"), ELR_41,
         State(REPLICAS_1234, "1", ("1",), elr=("2", "3")),
         ("registers", "3", False), Expect("1", ("1",), ("2",), None, 100, 201),
         variant="pcr-v2"),
    # -- the leader goes offline with the ISR at {1}: the ELR member 3 leads ------------
    case(r("testEligibleLeaderReplicas_ElrCanBeElected"),
         Setup("4.1", elr=True, min_isr=3, dead=()),
         State(REPLICAS_1234, "1", ("1",), elr=("3",)),
         ("dies", "1"), Expect("3", ("3",), ("1",), (), 101, 201, unclean=False),
         variant="lastKnownLeaderEnabled-true"),
    # -- ISR and ELR empty: the last known leader leads again (balanced recovery) -------
    case(r("testEligibleLeaderReplicas_ElectLastKnownLeader"),
         Setup("4.1", elr=True, min_isr=3, dead=()),
         State(REPLICAS_1234, None, (), lke=("1",)),
         ("registers", "1", True), Expect("1", ("1",), (), (), 101, 201, unclean=True)),
    # -- ... but not while the ELR has a member (even an offline one) --------------------
    case(r("testEligibleLeaderReplicas_ElectLastKnownLeaderShouldFail"),
         Setup("4.1", elr=True, min_isr=3, dead=("3",)),
         State(REPLICAS_1234, None, (), elr=("3",), lke=("1",)),
         ("registers", "1", True), Expect(None, (), ("3",), ("1",), 100, 200)),
    # -- unclean election of an offline partition: the one live replica, 1 ---------------
    case(r("testUncleanLeaderElection"),
         Setup("3.7", elr=False, min_isr=2, dead=("2", "3"), unclean=True),
         State(FOO_REPLICAS, None, ("3",)),
         ("registers", "1", True), Expect("1", ("1",), (), (), 101, 201, unclean=True),
         variant="offline-pcr-v0-v1"),
    case(r("testUncleanLeaderElection"),
         Setup("4.1", elr=True, min_isr=2, dead=("2", "3"), unclean=True),
         State(FOO_REPLICAS, None, (), elr=("3",), lke=("2",)),
         ("registers", "1", True), Expect("1", ("1",), (), (), 101, 201, unclean=True),
         variant="offline-pcr-v2"),
    # -- an ISR shrink by the leader does not bump the leader epoch (3.6+) -------------
    *[case(r("testNoLeaderEpochBumpOnIsrShrink"),
           Setup(protocol, elr=False, min_isr=2, dead=("3",)),
           State(FOO_REPLICAS, "1", ("2", "1", "3")), ("alter", ("2", "1")),
           Expect("1", ("2", "1"), (), (), 100, 201), variant=mv)
      for mv, protocol in (("3.6-IV0", "3.7"), ("3.7-IV2", "3.7"), ("4.0-IV0", "4.0"))],
    case(r("testIsrChangeDoesntBumpLeaderEpoch"),
         Setup("3.7", elr=False, min_isr=2, dead=("3",)),
         State(FOO_REPLICAS, "1", ("2", "1", "3")), ("alter", ("2", "1")),
         Expect("1", ("2", "1"), (), (), 100, 201), variant="pcr-v0-v1"),
    case(r("testIsrChangeDoesntBumpLeaderEpoch"),
         Setup("4.1", elr=True, min_isr=2, dead=("3",)),
         State(FOO_REPLICAS, "1", ("2", "1", "3")), ("alter", ("2", "1")),
         Expect("1", ("2", "1"), (), (), 100, 201), variant="pcr-v2"),
]


@pytest.mark.parametrize("ref,setup,state,trigger,expect", CASES)
def test_partition_change_builder(ref: Ref, setup: Setup, state: State, trigger: Input,
                                  expect: Expect) -> None:
    c = build(setup, state, trigger)
    before = len(c.events)
    apply(c, state, trigger)
    st = c.core.partitions[("t", 0)]
    assert (st.leader, st.isr) == (expect.leader, list(expect.isr))
    assert set(st.elr) == set(expect.elr)
    if expect.lke is not None:
        assert st.last_known_elr == list(expect.lke)
    assert (st.leader_epoch, st.partition_epoch) == (expect.leader_epoch,
                                                     expect.partition_epoch)
    if expect.unclean is not None:
        elected = [e for e in c.events[before:]
                   if isinstance(e, Event) and e.type == "leader-elected"]
        assert [e.fields["unclean"] for e in elected] == [expect.unclean]


# -- left out ------------------------------------------------------------------------------

_REASSIGN = ("not applicable: replica reassignment (adding / removing replicas, target "
             "replica sets) is not modelled; a partition's replicas are fixed")
_DOWNGRADE = ("not applicable (record versions 0-1 only; version 2 is restated): the "
              "partition already holds ELR fields while the ELR feature is off, i.e. the "
              "feature was switched off after use; the model's ELR switch is fixed for a run")
_MODE = ("not applicable (this variant only): it runs with "
         "useLastKnownLeaderInBalancedRecovery=false and checks the lastKnownElr that mode "
         "keeps; the model always uses Kafka's default (true)")

NOT_APPLICABLE = [
    NotApplicable(r("testChangeRecordIsNoOp"),
                  "not applicable: a check of the record schema's fields, no replication rule"),
    NotApplicable(r("testElectLeader"), (
        "not applicable: it sets target ISRs that drop live replicas or the leader "
        "(e.g. {3} with 1 and 2 live), which the model's controller never produces: its "
        "ISR changes come from the leader's AlterPartition (the leader stays in it) or from "
        "a broker leaving")),
    NotApplicable(r("testNoLeaderEpochBumpIfNothingChanged"),
                  "not applicable: a call of the builder's internal epoch-bump step with no "
                  "change; the model has no such step to call"),
    NotApplicable(r("testLeaderEpochBumpOnIsrShrink"),
                  "not applicable: metadata versions 3.4-IV0 / 3.5-IV2 (KAFKA-15021's epoch "
                  "bump on ISR shrink); the model has no 3.4 or 3.5 line"),
    NotApplicable(r("testNoLeaderEpochBumpOnIsrExpansion"), (
        "not applicable: the target ISR {2, 1, 3, 4} names 4, not a replica of FOO; the "
        "model's controller refuses such an AlterPartition (INVALID_REQUEST) before any "
        "epoch question")),
    NotApplicable(r("testLeaderEpochBumpOnNewReplicaSetDisjoint"), _REASSIGN),
    NotApplicable(r("testNoLeaderEpochBumpOnEmptyTargetIsr"), _REASSIGN),
    NotApplicable(r("testNoChange"),
                  "not applicable: a builder with no change; the model has no input that "
                  "changes nothing to replay"),
    NotApplicable(r("testIsrChangeAndLeaderChange"), (
        "not applicable: the target ISR {2, 3} drops the live leader 1 and keeps offline "
        "3; neither an AlterPartition (the leader stays in it) nor a broker leaving (an "
        "offline replica leaves the ISR) gives it in the model")),
    NotApplicable(r("testReassignmentRearrangesReplicas"), _REASSIGN),
    NotApplicable(r("testIsrEnlargementCompletesReassignment"), _REASSIGN),
    NotApplicable(r("testRevertReassignment"), _REASSIGN),
    NotApplicable(r("testRemovingReplicaReassignment"), _REASSIGN),
    NotApplicable(r("testAddingReplicaReassignment"), _REASSIGN),
    NotApplicable(r("testStoppedLeaderIsDemotedAfterReassignmentCompletesEvenIfNoNewEligibleLeaders"),
                  _REASSIGN),
    NotApplicable(r("testKeepsDirectoriesAfterReassignment"),
                  _REASSIGN + " (nor log directories)"),
    NotApplicable(r("testUpdateDirectories"),
                  "not applicable: log directories (KIP-858) are not modelled"),
    NotApplicable(r("testChangeInLeadershipDoesNotChangeRecoveryState"),
                  "not applicable: the leader recovery state (KIP-704) is not modelled "
                  "(an unclean election is an event flag, not partition state)"),
    NotApplicable(r("testUncleanSetsLeaderRecoveringState"),
                  "not applicable: the leader recovery state (KIP-704) is not modelled"),
    NotApplicable(r("testUncleanLeaderElection#foo"), (
        "not applicable (the FOO half; the offline-partition half is restated): the "
        "target ISR {3} drops live replicas 1 and 2, an input the model's controller does "
        "not produce")),
    NotApplicable(r("testEligibleLeaderReplicas_IsrExpandAboveMinISR#pcr-v0-v1"), _DOWNGRADE),
    NotApplicable(r("testEligibleLeaderReplicas_IsrAddNewMemberNotInELR#pcr-v0-v1"), _DOWNGRADE),
    NotApplicable(r("testEligibleLeaderReplicas_RemoveUncleanShutdownReplicasFromElr"
                    "#pcr-v0-v1"), _DOWNGRADE),
    NotApplicable(r("testEligibleLeaderReplicas_ElrCanBeElected#lastKnownLeaderEnabled-false"),
                  _MODE),
    NotApplicable(r("testEligibleLeaderReplicas_IsrCanShrinkToZero"), (
        "not applicable: all four replicas go offline in one change; the model's "
        "controller handles brokers leaving one at a time (each an election), so the "
        "leader moves 1 -> 2 -> 3 -> 4 before the ISR empties, and the ELR and last known "
        "leader differ from one simultaneous change")),
]
