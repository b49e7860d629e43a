"""The hosts file of `isrlab chaos --target kafka --hosts`: where an existing Kafka
cluster's brokers run and how to fault each one's process there (docs/ssh.md,
"A target's hosts file").

The ssh backend's format (harness/backends/hostsfile.py) without `controller`
(isrlab runs no controller there); each broker entry names its Kafka broker id
(`node_id`, as the cluster's metadata does) and a `kafka:` mapping of shell
commands run on its host over SSH:

    defaults:
      user: root
      key: id_ed25519
      known_hosts: known_hosts
      kafka: {start: systemctl start kafka}   # every broker inherits, key by key
    brokers:
      - {address: 10.0.0.11, node_id: 1}
      - {address: 10.0.0.12, node_id: 2, kafka: {start: /opt/kafka/start.sh}}

Every mistake is a `FILE:LINE: what` error (exit 2), as in the ssh backend's file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.hostsfile import (
    HOST_DEFAULTS,
    Host,
    check_key,
    host_fields,
    resolve_host,
)
from harness.errors import UsageError
from harness.validate import Validator
from harness.yamlloc import LocMap, ScenarioError, load

# `pkill -f` matches the shell that runs it too, whose command line holds the
# pattern: `kafka[.]Kafka` matches Kafka's main class `kafka.Kafka` but not itself.
PATTERN = "'kafka[.]Kafka'"
_GONE = f"while pgrep -f {PATTERN} >/dev/null; do sleep 0.2; done"
# Each fault's command, where a Kafka installed as its own distribution runs it
# (one broker per host). `start` has none: how a broker starts is the operator's.
KAFKA_DEFAULTS: dict[str, str | None] = {
    "kill": f"pkill -KILL -f {PATTERN}; {_GONE}",
    # SIGCONT first: a frozen JVM acts on SIGTERM only once it runs again.
    "stop": f"pkill -CONT -f {PATTERN}; pkill -TERM -f {PATTERN}; {_GONE}",
    "pause": f"pkill -STOP -f {PATTERN}",
    "resume": f"pkill -CONT -f {PATTERN}",
    "start": None,
}
KAFKA_KEYS = (*KAFKA_DEFAULTS, "ready_timeout")
READY_TIMEOUT = 60.0  # seconds a started broker has to answer a metadata request
# The commands each fault of the schedule runs (its own and its recovery's).
NEEDS: dict[str, tuple[str, ...]] = {
    "kill": ("kill", "start"), "stop": ("stop", "start"), "flip": ("stop", "start"),
    "pause": ("pause", "resume"),
}
# Keys of the ssh backend's hosts that mean nothing here: isrlab starts no node of
# its own on a target's hosts (no port to listen on, no python, no run directory).
_UNUSED = ("port", "python", "workdir")
HOST_KEYS = tuple(k for k in HOST_DEFAULTS if k not in _UNUSED)
ENTRY_KEYS = (*HOST_KEYS, "node_id", "kafka")
TOP_KEYS = ("defaults", "brokers")


@dataclass(frozen=True)
class TargetBroker:
    """One broker of the cluster: its host and its fault commands."""

    node: str  # the Kafka broker id, as the metadata names it
    host: Host
    commands: dict[str, str]  # kill, stop, pause, resume, start: those given or defaulted
    defaulted: frozenset[str]  # which of `commands` are KAFKA_DEFAULTS'
    ready_timeout: float
    line: int  # the entry's line in the file


@dataclass(frozen=True)
class TargetHosts:
    path: Path
    brokers: dict[str, TargetBroker]  # node id -> broker

    def _err(self, line: int, msg: str) -> ScenarioError:
        return ScenarioError(self.path, line, msg)

    def require(self, faults: set[str]) -> None:
        """A FILE:LINE error for a broker without a command the faults need."""
        for b in self.brokers.values():
            for f in sorted(faults):
                for cmd in NEEDS.get(f, ()):
                    if cmd not in b.commands:
                        raise self._err(b.line, f"broker {b.node}: no kafka.{cmd} command; "
                                        f"--faults {f} needs one to {_WHY[cmd]} (isrlab "
                                        f"does not guess how your brokers are started)")

    def match(self, cluster: list[str]) -> None:
        """A FILE:LINE error unless the file names exactly the cluster's brokers."""
        extra = [b for b in self.brokers.values() if b.node not in cluster]
        if extra:
            raise self._err(extra[0].line, f"node_id {extra[0].node} is no broker of the "
                            f"cluster (its metadata names {', '.join(cluster)})")
        missing = [n for n in cluster if n not in self.brokers]
        if missing:
            raise self._err(1, f"the cluster's broker(s) {', '.join(missing)} have no entry "
                            f"under brokers: a fault may target any broker (a `leader` "
                            f"target whichever leads); add one per broker with its node_id")


_WHY = {"start": "start the broker again", "kill": "kill the broker",
        "stop": "stop the broker", "pause": "pause the broker",
        "resume": "resume the paused broker"}


def _kafka(v: Validator, m: LocMap, what: str) -> dict[str, Any]:
    v.keys(m, KAFKA_KEYS, what)
    out: dict[str, Any] = {}
    for k, raw in m.items():
        if k == "ready_timeout":
            out[k] = v.seconds(raw, m.line_of(k), f"{what}: ready_timeout")
        else:
            out[k] = v.string(raw, m.line_of(k), f"{what}: {k}")
    return out


def _split(v: Validator, m: LocMap, what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(host fields, kafka fields) of a broker entry or `defaults`."""
    fields = host_fields(v, m, what, ENTRY_KEYS)
    kafka = {}
    if "kafka" in m:
        kafka = _kafka(v, v.mapping(m["kafka"], m.line_of("kafka"), f"{what}: kafka"),
                       f"{what}: kafka")
    return fields, kafka


def load_target_hosts(path: Path) -> TargetHosts:
    """Parse and validate a target's hosts file; ScenarioError (exit 2) with the line
    otherwise. Which commands the faults need is `TargetHosts.require`'s check."""
    v = Validator(path)
    doc = load(path)
    top = v.mapping(doc, 1, "a target's hosts file")
    if "controller" in top:
        raise v.err(top.line_of("controller"), "a target's hosts file has no controller: "
                    "isrlab runs none on an existing cluster (list its brokers only)")
    v.keys(top, TOP_KEYS, "a target's hosts file", required=("brokers",))
    defaults = {k: HOST_DEFAULTS[k] for k in HOST_DEFAULTS}
    kafka_defaults: dict[str, Any] = {}
    if "defaults" in top:
        dm = v.mapping(top["defaults"], top.line_of("defaults"), "defaults")
        d, kafka_defaults = _split(v, dm, "defaults")
        for k in ("address", "name", "node_id"):
            if k in dm:
                raise v.err(dm.line_of(k), f"defaults cannot set {k} (one per broker)")
        defaults.update(d)
    seq = v.seq(top["brokers"], top.line_of("brokers"), "brokers")
    if not seq:
        raise v.err(seq.line, "brokers is empty; name one host per broker")
    brokers: dict[str, TargetBroker] = {}
    for i, raw in enumerate(seq):
        line, what = seq.line_of(i), f"brokers[{i}]"
        m = v.mapping(raw, line, what)
        fields, kafka = _split(v, m, what)
        fields = {**defaults, **fields}
        if fields["address"] is None:
            raise v.err(m.line, f"{what} has no address")
        if "node_id" not in m:
            raise v.err(m.line, f"{what} has no node_id (its Kafka broker id)")
        node = str(v.integer(m["node_id"], m.line_of("node_id"), f"{what}: node_id"))
        if node in brokers:
            raise v.err(m.line_of("node_id"), f"{what}: node_id {node} is also "
                        f"brokers[{list(brokers).index(node)}]'s")
        try:
            host = resolve_host(path, node, fields)
        except UsageError as e:
            raise v.err(m.line, f"{what}: {e}") from None
        check_key(v, line, host)
        given = {**kafka_defaults, **kafka}
        commands = {k: c for k, c in KAFKA_DEFAULTS.items() if c is not None}
        commands.update({k: c for k, c in given.items() if k != "ready_timeout"})
        brokers[node] = TargetBroker(
            node=node, host=host, commands=commands,
            defaulted=frozenset(k for k in commands if k not in given),
            ready_timeout=given.get("ready_timeout", READY_TIMEOUT), line=m.line)
    return TargetHosts(path, brokers)
