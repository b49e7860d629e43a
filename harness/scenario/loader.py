"""Scenario files: loading, validation and lookup (format: docs/scenarios.md).

Everything that can be checked before a cluster starts is checked here, and
every error names the file and line. The result is plain data the runner
executes; it never touches YAML again.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig, ControllerConfig
from broker.config import ConfigError as BrokerConfigError
from broker.protocol import ALIASES, VERSIONS, canonical
from contract import ANOMALY_KINDS, PROTOCOLS
from harness.backends.base import CONTROLLER, ClusterSpec
from harness.errors import UsageError
from harness.scenario.steps import COMPARISONS, Step, parse_steps
from harness.validate import LIMITS, Validator, check_topic_partition, in_range
from harness.yamlloc import LocMap, load
from workloads.kafka_clients import CLIENTS

SCENARIO_DIR = Path(__file__).resolve().parent / "catalogue"

NODE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
DEFAULT_RATE = 100  # background sends per second, over all producers
# A variant may replace the file's `reachable` as it replaces `expect`: it may
# have steps of its own, so its path may exist under other versions.
VARIANT_KEYS = ("description", "broker", "controller", "workload", "expect", "reachable",
                "assert")
REACHABLE_KEYS = ("since", "before", "why")
NOT_REACHABLE = "not reachable"  # how a cell outside a scenario's `reachable` is shown
# Figures an `assert` may name. The checker's, from check/summary.json `figures`
# (checker.figures), and the harness's own, computed from the run directory after
# the check (harness.run.assertions): each is documented in docs/scenarios.md.
CHECKER_FIGURES = ("isr_shrinks", "isr_expands", "leader_elections", "truncations", "sends",
                   "sends_ok", "sends_fail", "sends_info", "polls_ok", "unseen_acked",
                   "nemesis_ops")
HARNESS_FIGURES = ("hw_stall_ms", "unavailable_ms", "isr_rejoins", "offline_ms")
FIGURES = CHECKER_FIGURES + HARNESS_FIGURES
ASSERT_OPS = tuple(c for c in COMPARISONS if c != "same-as")


class NotReachable(UsageError):
    """A scenario asked to run under a version its path does not exist in (exit 2)."""


@dataclass(frozen=True)
class Reachable:
    """Where a scenario's path exists in Kafka: from `since` on and under the
    versions older than `before` (None: no bound), the same boundaries as a step's;
    `why` it does not exist elsewhere."""

    since: str | None
    before: str | None
    why: str

    def covers(self, protocol: str) -> bool:
        return in_range(protocol, self.since, self.before)

    def span(self) -> str:
        """The range as the file writes it: `from 2.7`, `before 2.1`, `from 2.0, before 3.7`."""
        return ", ".join(f"{word} {v}" for word, v in (("from", self.since),
                                                       ("before", self.before)) if v)


@dataclass
class Scenario:
    name: str
    description: str
    path: Path
    brokers: list[str]
    topics: list[dict[str, Any]]
    broker_config: dict[str, Any]
    controller_config: dict[str, Any]
    workload: dict[str, Any]
    expect: dict[str, list[str]]
    steps: list[Step]
    source: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Figure assertions ({figure, op: value, since?, before?, line}), judged after the check.
    assertions: list[dict[str, Any]] = field(default_factory=list)
    variant: str | None = None  # the variant this object is (None: the file has none)
    # Every variant the file declares: name -> the first line of its description.
    variants: dict[str, str] = field(default_factory=dict)
    reachable: Reachable | None = None  # None: the path exists under every version

    @property
    def run_name(self) -> str:
        """The name in run ids and run.json `scenario`: a variant's is NAME-VARIANT
        (`scenario_name` stays the file's)."""
        return f"{self.name}-{self.variant}" if self.variant else self.name

    def assertions_for(self, protocol: str) -> list[dict[str, Any]]:
        return [a for a in self.assertions if in_range(protocol, a["since"], a["before"])]

    def cluster_spec(self, protocol: str) -> ClusterSpec:
        return ClusterSpec(protocol=protocol, brokers=list(self.brokers), topics=self.topics,
                           broker_config=dict(self.broker_config),
                           controller_config=dict(self.controller_config))

    def expect_for(self, protocol: str) -> list[str]:
        """What `protocol` expects: its own entry, else the nearest older one's
        ("X+": an entry holds from its release on); `latest` is the newest release.
        NotReachable for a version the path does not exist in: it has no verdict."""
        self.require_reachable(protocol)
        return list(resolve_expect(self.expect, protocol))

    def reachable_at(self, protocol: str) -> bool:
        return self.reachable is None or self.reachable.covers(protocol)

    def unreachable(self, protocol: str) -> str | None:
        """Why the scenario's path does not exist under `protocol`, as one line naming
        the scenario, the version, the range and the file's `why`; None where it does."""
        reach = self.reachable
        if reach is None or reach.covers(protocol):
            return None
        return (f"{self.run_name} is {NOT_REACHABLE} under {protocol} "
                f"(reachable {reach.span()}): {reach.why}")

    def require_reachable(self, protocol: str) -> None:
        """NotReachable (exit 2) with `unreachable`'s line, unless the path exists."""
        why = self.unreachable(protocol)
        if why is not None:
            raise NotReachable(why)

    def steps_for(self, protocol: str) -> list[Step]:
        return [s for s in self.steps if s.applies_to(protocol)]


def resolve_expect(expect: dict[str, list[str]], protocol: str) -> list[str]:
    """The entry of `protocol` in a sparse expect table (aliases resolved)."""
    by_release = {canonical(k): v for k, v in expect.items()}
    release = canonical(protocol)
    for v in reversed(VERSIONS[:VERSIONS.index(release) + 1]):
        if v in by_release:
            return by_release[v]
    raise KeyError(protocol)


# -- lookup ----------------------------------------------------------------


def list_scenarios(directory: Path = SCENARIO_DIR) -> list[Scenario]:
    return [load_scenario(p) for p in sorted(directory.glob("*.yaml"))]


def all_variants(scenario: Scenario) -> list[Scenario]:
    """The scenario once per declared variant (itself when it declares none)."""
    if not scenario.variants:
        return [scenario]
    return [load_scenario(scenario.path, name) for name in scenario.variants]


def find_scenario(name_or_path: str, directory: Path = SCENARIO_DIR) -> Path:
    """A path if it looks like one (has a / or ends in .yaml/.yml), else a shipped name.
    (os.path's tests: a name no file can have, too long, is no file; pathlib's raise.)"""
    if "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        path = Path(name_or_path)
        if os.path.isdir(path):
            raise UsageError(f"{name_or_path} is a directory, not a scenario file; "
                             "give the path of a .yaml file")
        if not os.path.isfile(path):
            raise UsageError(f"no scenario file {name_or_path}" if not os.path.exists(path)
                             else f"{name_or_path} is not a regular file, not a scenario file")
        return path
    path = directory / f"{name_or_path}.yaml"
    if not os.path.isfile(path):
        known = ", ".join(p.stem for p in sorted(directory.glob("*.yaml")))
        if os.path.isdir(name_or_path):
            raise UsageError(f"{name_or_path} is a directory, not a scenario file, and no "
                             f"shipped scenario has that name; known: {known}")
        raise UsageError(f"unknown scenario {name_or_path!r}; known: {known}")
    return path


# -- validation --------------------------------------------------------------


def load_scenario(path: Path, variant: str | None = None) -> Scenario:
    """Load and validate one scenario file, as `variant` (default: the first the file
    declares, if any); every variant is validated. Raises ScenarioError (exit 2)."""
    v = Validator(path)
    doc = v.mapping(load(path), 1, "a scenario file")
    declared = _variants(v, doc)
    if variant is not None and variant not in declared:
        known = ", ".join(declared) or "none"
        raise v.err(doc.line_of("variants") if declared else doc.line,
                    f"no variant {variant!r} in this scenario; it declares: {known}")
    for name in declared:
        if name != (variant or next(iter(declared))):
            _load(v, path, doc, declared, name)  # errors in any variant are reported
    return _load(v, path, doc, declared, variant or next(iter(declared), None))


def _variants(v: Validator, doc: LocMap) -> dict[str, LocMap]:
    if "variants" not in doc:
        return {}
    m = v.mapping(doc["variants"], doc.line_of("variants"), "variants")
    if not m:
        raise v.err(m.line, "variants must declare at least one variant")
    out = {}
    for name, body in m.items():
        if not isinstance(name, str) or not NODE_NAME.match(name):
            raise v.err(m.line_of(name), f"variant name {name!r} must be a word like acks-1")
        if body is None:  # an empty variant: the file as it is
            body = LocMap()
            body.line, body.key_lines = m.line_of(name), {}
        body = v.mapping(body, m.line_of(name), f"variant {name}")
        v.keys(body, VARIANT_KEYS, f"variant {name}")
        out[name] = body
    return out


def _merged(base: Any, over: Any) -> Any:
    """Mapping `over` laid over `base` (line numbers kept: each key's from where it
    was written)."""
    if not isinstance(over, LocMap):
        return base
    if not isinstance(base, LocMap):
        return over
    m = LocMap({**base, **over})
    m.line, m.key_lines = base.line, {**base.key_lines, **over.key_lines}
    return m


def _load(v: Validator, path: Path, doc: LocMap, declared: dict[str, LocMap],
          variant: str | None) -> Scenario:
    if variant is not None:  # the variant's sections laid over the file's
        body = declared[variant]
        copy = LocMap(doc)
        copy.line, copy.key_lines = doc.line, dict(doc.key_lines)
        doc = copy
        for key in ("broker", "controller", "workload"):
            if key in body:
                doc[key] = _merged(doc.get(key), body[key])
                doc.key_lines.setdefault(key, body.line_of(key))
        for key in ("expect", "reachable"):  # replaced, not laid over
            if key in body:
                doc[key], doc.key_lines[key] = body[key], body.line_of(key)
    top = ("name", "description", "source", "cluster", "broker", "controller", "workload",
           "reachable", "expect", "steps", "variants", "assert")
    v.keys(doc, top, "the scenario", required=("name", "description", "cluster", "expect",
                                                "steps"))
    name = v.string(doc["name"], doc.line_of("name"), "name")
    description = v.string(doc["description"], doc.line_of("description"), "description")
    source = doc.get("source")
    if source is not None:
        source = v.string(source, doc.line_of("source"), "source")

    brokers, topics = _cluster(v, doc)
    broker_config = _config(v, doc, "broker", BrokerConfig)
    controller_config = _config(v, doc, "controller", ControllerConfig)
    workload = _workload(v, doc, topics)
    reachable = _reachable(v, doc)
    expect = _expect(v, doc, reachable, variant)
    steps = parse_steps(v, doc, brokers, topics, workload, tuple(declared))
    steps = [s for s in steps if s.variants is None or variant in s.variants]
    if workload["producers"] or workload["consumers"]:
        for s in steps:
            if s.kind == "load":  # the two would share process ids
                raise v.err(s.line, "a load step cannot be used with workload producers "
                                    "or consumers (they run for the whole scenario)")
    assertions = _assertions(v, doc)
    if variant is not None and "assert" in declared[variant]:
        assertions += _assertions(v, declared[variant])
    return Scenario(name=name, description=description.strip().splitlines()[0], path=path,
                    brokers=brokers, topics=topics, broker_config=broker_config,
                    controller_config=controller_config, workload=workload, expect=expect,
                    steps=steps, source=source, assertions=assertions, variant=variant,
                    variants={n: _first_line(b.get("description")) for n, b in declared.items()},
                    reachable=reachable)


def _first_line(text: Any) -> str:
    return str(text).strip().splitlines()[0] if text else ""


def _assertions(v: Validator, doc: LocMap) -> list[dict[str, Any]]:
    """`assert: [{figure: isr_shrinks, ge: 3, since: "2.1"}, ...]`."""
    if "assert" not in doc:
        return []
    sl = v.seq(doc["assert"], doc.line_of("assert"), "assert")
    out = []
    for i, raw in enumerate(sl):
        m = v.mapping(raw, sl.line_of(i), "an assertion")
        v.keys(m, ("figure", *ASSERT_OPS, "since", "before", "note"), "an assertion",
               required=("figure",))
        fig = m["figure"]
        if fig not in FIGURES:
            raise v.err(m.line_of("figure"), f"unknown figure {fig!r}; known: "
                                             f"{', '.join(FIGURES)}")
        ops = {op: m[op] for op in ASSERT_OPS if op in m}
        if not ops:
            raise v.err(m.line, f"an assertion needs a comparison: {', '.join(ASSERT_OPS)}")
        for op, x in ops.items():
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise v.err(m.line_of(op), f"{fig} {op} needs a number, got {x!r}")
        since, before = v.version_range(m)
        out.append({"figure": fig, **ops, "since": since, "before": before, "line": m.line,
                    "note": m.get("note")})
    return out


def _cluster(v: Validator, doc: LocMap) -> tuple[list[str], list[dict[str, Any]]]:
    c = v.mapping(doc["cluster"], doc.line_of("cluster"), "cluster")
    v.keys(c, ("brokers", "topics"), "cluster", required=("brokers", "topics"))
    bl = v.seq(c["brokers"], c.line_of("brokers"), "cluster.brokers")
    brokers: list[str] = []
    for i, b in enumerate(bl):
        if not isinstance(b, str) or not NODE_NAME.match(b) or b == CONTROLLER:
            raise v.err(bl.line_of(i), f"broker name {b!r} must be a word like A or b1")
        if b in brokers:
            raise v.err(bl.line_of(i), f"broker {b!r} listed twice")
        brokers.append(b)
    if not brokers:
        raise v.err(bl.line, "cluster.brokers must not be empty")
    tl = v.seq(c["topics"], c.line_of("topics"), "cluster.topics")
    topics: list[dict[str, Any]] = []
    for i, t in enumerate(tl):
        t = v.mapping(t, tl.line_of(i), "a topic")
        v.keys(t, ("name", "partitions", "replicas"), "a topic", required=("name", "replicas"))
        tname = v.string(t["name"], t.line_of("name"), "topic name")
        reps = v.seq(t["replicas"], t.line_of("replicas"), "replicas")
        count = v.integer(t.get("partitions", len(reps)), t.line_of("partitions"),
                          "partitions", 1, LIMITS["partitions"])
        if len(reps) != count:
            raise v.err(t.line_of("replicas"),
                        f"topic {tname!r} has {count} partition(s) but {len(reps)} replica "
                        f"list(s); give one list per partition")
        replicas = []
        for j, r in enumerate(reps):
            r = v.nodes(r, reps.line_of(j), brokers, f"replicas of {tname}/{j}")
            if len(set(r)) != len(r):
                raise v.err(reps.line_of(j), f"replicas of {tname}/{j} repeat a broker")
            replicas.append(r)
        topics.append({"name": tname, "partitions": count, "replicas": replicas})
    if not topics:
        raise v.err(tl.line, "cluster.topics must not be empty")
    return brokers, topics


def _config(v: Validator, doc: LocMap, key: str, cls: type) -> dict[str, Any]:
    raw = doc.get(key)
    if raw is None:
        return {}
    m = v.mapping(raw, doc.line_of(key), key)
    for k, value in m.items():
        try:
            # The broker's own validation, one key at a time; whether a value suits a
            # release is ClusterSpec's check, once the run's release is known.
            cls.from_dict({k: value}, "latest")
        except BrokerConfigError as e:
            raise v.err(m.line_of(k), str(e)) from None
    return dict(m)


def _workload(v: Validator, doc: LocMap, topics: list[dict[str, Any]]) -> dict[str, Any]:
    raw = doc.get("workload")
    m = v.mapping(raw, doc.line_of("workload"), "workload") if raw is not None else LocMap()
    if raw is None:
        m.line, m.key_lines = doc.line, {}
    v.keys(m, ("acks", "timeout_ms", "retry_ms", "topic", "partition", "consumers",
               "producers", "rate", "partitions", "seed", "batch", "linger", "poll_interval",
               "client", "config"), "workload")
    w = {
        "acks": v.acks(m.get("acks", "all"), m.line_of("acks")),
        "timeout_ms": v.integer(m.get("timeout_ms", 5000), m.line_of("timeout_ms"),
                                "timeout_ms", 1, LIMITS["ms"]),
        "retry_ms": v.integer(m.get("retry_ms", 10000), m.line_of("retry_ms"), "retry_ms", 0,
                              LIMITS["ms"]),
        "topic": m.get("topic", topics[0]["name"]),
        "partition": v.integer(m.get("partition", 0), m.line_of("partition"), "partition", 0,
                               LIMITS["partitions"] - 1),
        "consumers": v.integer(m.get("consumers", 0), m.line_of("consumers"), "consumers", 0,
                               LIMITS["clients"]),
        # The continuous background workload (workloads.continuous): producers
        # sending at `rate` per second in all, over `partitions`.
        "producers": v.integer(m.get("producers", 0), m.line_of("producers"), "producers", 0,
                               LIMITS["clients"]),
        "rate": v.rate(m.get("rate", DEFAULT_RATE), m.line_of("rate"), "rate"),
        "partitions": m.get("partitions", "one"),
    }
    # Batched sends (workloads.continuous; a chaos run's, kept by `isrlab export`):
    # at most `batch` records per produce request, waiting up to `linger` seconds.
    if "batch" in m:
        w["batch"] = v.integer(m["batch"], m.line_of("batch"), "batch", 1, LIMITS["batch"])
    if "linger" in m:
        w["linger"] = v.seconds(m["linger"], m.line_of("linger"), "linger")
    if "poll_interval" in m:  # background consumers: seconds between polls (default 0.05)
        w["poll_interval"] = v.seconds(m["poll_interval"], m.line_of("poll_interval"),
                                       "poll_interval")
    # A real Kafka client instead of the builtin one (workloads.client_ops), with
    # its own settings by the client's own names.
    if "client" in m:
        w["client"] = v.string(m["client"], m.line_of("client"), "client")
        if w["client"] not in CLIENTS:
            raise v.err(m.line_of("client"), f"unknown client {w['client']!r}; choose one "
                                             f"of {', '.join(CLIENTS)}")
    if "config" in m:
        if "client" not in m:
            raise v.err(m.line_of("config"), "config is a client's settings: give client too")
        cfg = v.mapping(m["config"], m.line_of("config"), "config")
        for k, val in cfg.items():
            if not isinstance(val, str | int | float | bool):
                raise v.err(cfg.line_of(k), f"config {k}: a string, number or boolean, "
                                            f"got {type(val).__name__}")
        w["config"] = dict(cfg)
    if "seed" in m:  # the background workload's choices; default: the run's seed
        w["seed"] = v.integer(m["seed"], m.line_of("seed"), "seed", 0, LIMITS["seed"])
    if w["partitions"] not in ("one", "all"):
        raise v.err(m.line_of("partitions"), "partitions must be one (the workload's topic "
                                             f"and partition) or all, got {w['partitions']!r}")
    check_topic_partition(v, m.line_of("topic"), topics, w["topic"], w["partition"])
    return w


def workload_partitions(workload: dict[str, Any],
                        topics: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """The (topic, partition)s the background producers and consumers use."""
    if workload.get("partitions") == "all":
        return [(t["name"], p) for t in topics for p in range(t["partitions"])]
    return [(workload["topic"], workload["partition"])]


def _reachable(v: Validator, doc: LocMap) -> Reachable | None:
    """`reachable: {since: "2.7", before: "X", why: ...}`: the versions the path exists in."""
    if "reachable" not in doc:
        return None
    line = doc.line_of("reachable")
    m = v.mapping(doc["reachable"], line, "reachable")
    v.keys(m, REACHABLE_KEYS, "reachable")
    if "why" not in m:  # the reason is what `reproduce` and the matrix show
        raise v.err(line, "reachable is missing 'why': say why the path does not exist "
                          "under the other versions")
    since, before = v.version_range(m)
    if since is None and before is None:
        raise v.err(line, "reachable needs since and/or before (a path that exists "
                          "under every version needs no reachable)")
    why = v.string(m["why"], m.line_of("why"), "reachable why")
    reach = Reachable(since, before, " ".join(why.split()))
    if not any(reach.covers(p) for p in VERSIONS):
        raise v.err(m.line_of("before"), f"reachable before {before} leaves no version: "
                                         f"{VERSIONS[0]} is the oldest")
    return reach


def _expect(v: Validator, doc: LocMap, reach: Reachable | None,
            variant: str | None) -> dict[str, list[str]]:
    m = v.mapping(doc["expect"], doc.line_of("expect"), "expect")
    out: dict[str, list[str]] = {}
    for k, kinds in m.items():
        if k not in PROTOCOLS:
            raise v.err(m.line_of(k), f"unknown protocol version {k!r} in expect; "
                                      f"known: {', '.join(PROTOCOLS)} (quote them)")
        if reach is not None and not reach.covers(k):
            of = f" of variant {variant}" if variant else ""
            raise v.err(m.line_of(k), f"expect {k}: the path{of} is {NOT_REACHABLE} under "
                                      f"{k} (reachable {reach.span()}), so an entry there "
                                      "would be a verdict on a path that does not exist; "
                                      "remove it")
        kinds = [] if kinds is None else v.seq(kinds, m.line_of(k), f"expect {k}")
        for kind in kinds:
            if kind not in ANOMALY_KINDS:
                raise v.err(m.line_of(k), f"unknown anomaly {kind!r}; known: "
                                          f"{', '.join(ANOMALY_KINDS)}")
        out[k] = list(kinds)
    for alias, release in ALIASES.items():
        if alias in out and release in out and sorted(out[alias]) != sorted(out[release]):
            raise v.err(m.line_of(alias), f"expect {alias} is {release}: the two entries differ")
    _expect_ends(v, doc, out, reach)
    return out


def _expect_ends(v: Validator, doc: LocMap, out: dict[str, list[str]],
                 reach: Reachable | None) -> None:
    """An entry holds from its version on ("X+"), so the oldest reachable version must
    be given, and the newest reachable one (or its alias, `latest`) so that what it
    expects is said."""
    reached = [p for p in VERSIONS if reach is None or reach.covers(p)]
    missing = []
    for end in dict.fromkeys((reached[0], reached[-1])):  # one, when only one is reached
        names = [end, *[a for a, r in ALIASES.items() if r == end]]
        if not any(n in out for n in names):
            missing.append(f"{names[-1]} (or {end})" if len(names) > 1 else end)
    if missing:
        which = "reachable " if reach is not None else ""
        raise v.err(doc.line_of("expect"), f"expect must list the oldest and the newest "
                    f"{which}protocol version (a version not listed expects what the nearest "
                    f"older one does); missing: {', '.join(missing)} (use [] for none)")
