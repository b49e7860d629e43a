"""Kafka's defaults per release (broker/defaults.py) and how a config reads them."""

from __future__ import annotations

import re

import pytest

from broker.config import BrokerConfig, ConfigError, ControllerConfig
from broker.defaults import RELEASE_DEFAULTS, release_defaults
from broker.protocol import VERSIONS
from harness.backends.spec import ClusterSpec
from harness.errors import UsageError


@pytest.mark.parametrize(("release", "unclean", "lag", "session", "elr"), [
    # KIP-106 (0.11.0.0): unclean election off by default; 0.10.2.0 KafkaConfig: true.
    ("0.10", True, 10_000, 6_000, 0),
    ("0.11", False, 10_000, 6_000, 0),
    ("2.1", False, 10_000, 6_000, 0),
    # KIP-537 (2.5.0): replica.lag.time.max.ms 30 s, zookeeper.session.timeout.ms 18 s.
    ("2.7", False, 30_000, 18_000, 0),
    ("2.8", False, 30_000, 18_000, 0),
    # KRaft: broker.session.timeout.ms 9 s.
    ("3.7", False, 30_000, 9_000, 0),
    # KIP-966: "The ELR is not enabled by default for 4.0"; on for new clusters in 4.1.
    ("4.0", False, 30_000, 9_000, 0),
    ("4.1", False, 30_000, 9_000, 1),
])
def test_release_defaults(release, unclean, lag, session, elr):
    b = BrokerConfig.from_dict({}, release)
    c = ControllerConfig.from_dict({}, release)
    assert (b.unclean_leader_election_enable, b.replica_lag_time_max_ms,
            c.broker_session_timeout_ms, c.eligible_leader_replicas_version) == (
        unclean, lag, session, elr)
    assert (b.min_insync_replicas, b.replica_high_watermark_checkpoint_interval_ms,
            b.flush_messages) == (1, 5_000, None)


def test_every_release_has_every_default_and_latest_is_the_newest():
    keys = set(RELEASE_DEFAULTS[VERSIONS[0]])
    assert all(set(row) == keys for row in RELEASE_DEFAULTS.values())
    assert tuple(RELEASE_DEFAULTS) == VERSIONS
    assert release_defaults("latest") is RELEASE_DEFAULTS[VERSIONS[-1]]


def test_a_config_value_wins_over_the_release_default():
    b = BrokerConfig.from_dict({"unclean.leader.election.enable": False,
                                "replica.lag.time.max.ms": 500}, "0.10")
    assert (b.unclean_leader_election_enable, b.replica_lag_time_max_ms) == (False, 500)
    c = ControllerConfig.from_dict({"eligible.leader.replicas.version": 1}, "4.0")
    assert c.eligible_leader_replicas_version == 1


@pytest.mark.parametrize(("release", "value", "message"), [
    ("3.7", 1, "needs protocol 4.0 or later"),
    ("4.1", 2, "must be 0 or 1"),
])
def test_elr_switch_is_checked_against_the_release(release, value, message):
    with pytest.raises(ConfigError, match=message):
        ControllerConfig.from_dict({"eligible.leader.replicas.version": value}, release)
    with pytest.raises(UsageError, match=f"protocol {release}: .*{message}"):
        ClusterSpec(release, ["A"], [], controller_config={
            "eligible.leader.replicas.version": value})


def test_unknown_release_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown protocol version"):
        BrokerConfig.from_dict({}, "3.0")


@pytest.mark.parametrize(("release", "config", "elr"), [
    ("4.0", {}, False),                                        # 4.0's default: off
    ("4.0", {"eligible.leader.replicas.version": 1}, True),    # switched on
    ("4.1", {}, True),                                         # 4.1's default: on
    ("4.1", {"eligible.leader.replicas.version": 0}, False),   # switched off
])
def test_the_controller_keeps_an_elr_as_its_release_and_config_say(release, config, elr):
    """The cluster config reaches the controller (the simulator's shell, the same
    ControllerCore as the controller process): the ELR acts exactly when Kafka's
    feature is on."""
    from broker.sim_cluster import CONTROLLER, SimCluster

    cluster = SimCluster({"protocol": release, "brokers": {"A": "A", "B": "B"},
                          "topics": [{"name": "t", "partitions": 1, "replicas": [["A", "B"]]}],
                          "broker": {}, "controller": config}, seed=0)
    cluster.start(CONTROLLER)
    assert cluster.nodes[CONTROLLER].core._elr is elr


def test_every_setting_has_kafkas_range_and_is_held_to_it():
    """Each key's Kafka type and atLeast (3.9.0's ConfigDefs): an INT past a Java int,
    or min.insync.replicas 0, is refused as Kafka's parser and validator refuse it."""
    from dataclasses import fields

    from broker.config import _RANGES, BrokerConfig, ControllerConfig

    keys = {f.name.replace("_", ".") for c in (BrokerConfig, ControllerConfig) for f in fields(c)}
    assert keys == set(_RANGES)
    for raw, message in (({"min.insync.replicas": 0}, "must be in 1..2147483647"),
                         ({"min.insync.replicas": 2**31}, "must be in 1..2147483647"),
                         ({"replica.fetch.backoff.ms": 10**30}, "got 100000000000... (31 digits)"),
                         ({"flush.messages": 0}, "must be in 1..9223372036854775807")):
        with pytest.raises(ConfigError, match=re.escape(message)):
            BrokerConfig.from_dict(raw, "3.7")
    assert BrokerConfig.from_dict({"replica.lag.time.max.ms": 2**40}, "3.7") \
        .replica_lag_time_max_ms == 2**40  # a LONG
    with pytest.raises(ConfigError, match="broker.session.timeout.ms"):
        ControllerConfig.from_dict({"broker.session.timeout.ms": 2**31}, "3.7")
