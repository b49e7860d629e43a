"""Real Kafka clients as the workload's transport: librdkafka (confluent-kafka),
kafka-python and kcat (librdkafka's command-line client, one process per
produce or poll), over the reference broker's Kafka listener (or any Kafka
cluster's).

A driver does what a service using that client does -- hand values to the
client's producer and wait for its delivery reports, or poll its consumer --
and says what the client said, nothing more: the client's own retries,
batching, idempotence and leader-epoch handling decide. workloads.client_ops
turns what a driver reports into the history's ops.

Every driver takes the user's client settings (`config`, the client's own key
names) over isrlab's defaults, which only tie the client's timeouts to the
workload's (`timeout_ms` per request, `retry_ms` for retrying) so a send's
outcome is known within the workload's time.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol

CLIENTS = ("confluent-kafka", "kafka-python", "kcat")


class ClientConfigError(ValueError):
    """A client setting the client refused (a user error, exit 2)."""


@dataclass(frozen=True)
class Delivery:
    """What the client reported for one value: acknowledged (no `error`; its
    `offset`, unless acks 0), or the `error` it gave up with and whether the
    value certainly never reached a broker (`sent` false: refused before
    sending, e.g. an unknown partition or a full queue)."""

    offset: int | None = None
    error: str | None = None
    sent: bool = True


class ProducerDriver(Protocol):
    def produce(self, topic: str, partition: int, values: list[int],
                timeout: float) -> list[Delivery]: ...

    def close(self) -> None: ...


class ConsumerDriver(Protocol):
    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], str | None]:
        """Records [[offset, value], ...] the client returned, and an error it
        reported instead (None)."""
        ...

    def close(self) -> None: ...


def client_logger(path: Path | None) -> logging.Logger:
    """Where the clients' own log lines go: the run's `logs/clients.log` (not the
    terminal, which the harness's progress lines own); nowhere without a path.
    librdkafka logs through the logger given in its settings, kafka-python
    through its module loggers ("kafka"), which this takes over for the run."""
    logger = logging.getLogger("isrlab.clients")
    kafka_logger = logging.getLogger("kafka")
    for lg in (logger, kafka_logger):
        for h in list(lg.handlers):
            lg.removeHandler(h)
            h.close()
        lg.propagate = False
        lg.setLevel(logging.INFO)
    handler: logging.Handler = logging.NullHandler()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    kafka_logger.addHandler(handler)
    return logger


def _int_value(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


# -- librdkafka (confluent-kafka) ---------------------------------------------------


class ConfluentProducer:
    """librdkafka's producer: values go to its queue, the delivery reports say
    each one's fate (offset, or the error it gave up with)."""

    def __init__(self, bootstrap: str, acks: int | str, timeout_ms: int, retry_ms: int,
                 config: dict[str, Any]) -> None:
        import confluent_kafka
        self._ck = confluent_kafka
        settings = {"bootstrap.servers": bootstrap, "acks": str(acks),
                    "request.timeout.ms": timeout_ms,
                    # The client retries until this passes, then reports the error.
                    "message.timeout.ms": timeout_ms + retry_ms,
                    "linger.ms": 5, "retry.backoff.ms": 50,
                    "topic.metadata.refresh.interval.ms": 1000,
                    "logger": logging.getLogger("isrlab.clients"), **config}
        try:
            self._p = confluent_kafka.Producer(settings)
        except confluent_kafka.KafkaException as e:
            raise ClientConfigError(f"confluent-kafka refused the producer settings: {e}") \
                from None
        self._lock = threading.Lock()

    def produce(self, topic: str, partition: int, values: list[int],
                timeout: float) -> list[Delivery]:
        got: dict[int, Delivery] = {}

        def report(i: int, err: Any, msg: Any) -> None:
            if err is None:
                off = msg.offset()
                got[i] = Delivery(offset=off if off is not None and off >= 0 else None)
            else:
                got[i] = Delivery(error=err.name(), sent=err.code() not in self._never_sent())

        with self._lock:  # one batch at a time: its reports are this call's
            for i, v in enumerate(values):
                try:
                    self._p.produce(topic, str(v).encode(), partition=partition,
                                    on_delivery=lambda err, msg, i=i: report(i, err, msg))
                except BufferError as e:
                    got[i] = Delivery(error=f"queue full: {e}", sent=False)
                except self._ck.KafkaException as e:
                    got[i] = Delivery(error=str(e), sent=False)
            deadline = time.monotonic() + timeout
            while len(got) < len(values) and time.monotonic() < deadline:
                self._p.poll(0.02)
        return [got.get(i, Delivery(error="no delivery report in time")) for i in
                range(len(values))]

    def _never_sent(self) -> set[int]:
        e = self._ck.KafkaError
        return {e._UNKNOWN_PARTITION, e._UNKNOWN_TOPIC, e.MSG_SIZE_TOO_LARGE,
                e._INVALID_ARG, e._QUEUE_FULL}

    def close(self) -> None:
        self._p.flush(1.0)


class ConfluentConsumer:
    """librdkafka's consumer assigned one partition from `offset` (no group)."""

    def __init__(self, bootstrap: str, topic: str, partition: int, offset: int,
                 config: dict[str, Any], name: str) -> None:
        import confluent_kafka
        settings = {"bootstrap.servers": bootstrap, "group.id": name,
                    "enable.auto.commit": False, "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
                    "logger": logging.getLogger("isrlab.clients"), **config}
        try:
            self._c = confluent_kafka.Consumer(settings)
        except confluent_kafka.KafkaException as e:
            raise ClientConfigError(f"confluent-kafka refused the consumer settings: {e}") \
                from None
        self._c.assign([confluent_kafka.TopicPartition(topic, partition, offset)])

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], str | None]:
        records, error = [], None
        for m in self._c.consume(num_messages=max_records, timeout=timeout):
            if m.error() is not None:
                error = m.error().name()
                continue
            value = _int_value(m.value())
            if value is not None:
                records.append([m.offset(), value])
        return records, error if not records else None

    def close(self) -> None:
        self._c.close()


# -- kafka-python -------------------------------------------------------------------


def _kafka_python_settings(config: dict[str, Any], role: str) -> dict[str, Any]:
    """The settings of `config` that kafka-python's producer or consumer knows.
    One --client-config serves both roles, and kafka-python refuses any key its
    class does not know (librdkafka ignores the other role's, with a warning), so
    `enable_idempotence=false` would fail the consumers; a key neither knows is
    refused here."""
    import kafka

    known = {"producer": set(kafka.KafkaProducer.DEFAULT_CONFIG),
             "consumer": set(kafka.KafkaConsumer.DEFAULT_CONFIG)}
    unknown = sorted(set(config) - known["producer"] - known["consumer"])
    if unknown:
        raise ClientConfigError(f"kafka-python refused the settings: unknown "
                                f"setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    return {k: v for k, v in config.items() if k in known[role]}


class KafkaPythonProducer:
    """kafka-python's KafkaProducer: each value's future gives its offset or error."""

    def __init__(self, bootstrap: str, acks: int | str, timeout_ms: int, retry_ms: int,
                 config: dict[str, Any]) -> None:
        import kafka
        import kafka.errors
        self._errors = kafka.errors
        settings = {"bootstrap_servers": bootstrap.split(","),
                    "acks": "all" if acks in ("all", -1) else int(acks),
                    "request_timeout_ms": timeout_ms,
                    "delivery_timeout_ms": timeout_ms + retry_ms, "linger_ms": 5,
                    "retry_backoff_ms": 50, "max_block_ms": retry_ms,
                    "metadata_max_age_ms": 1000, **_kafka_python_settings(config, "producer")}
        try:
            self._p = kafka.KafkaProducer(**settings)
        except (kafka.errors.KafkaConfigurationError, TypeError, AssertionError) as e:
            raise ClientConfigError(f"kafka-python refused the producer settings: {e}") \
                from None

    def produce(self, topic: str, partition: int, values: list[int],
                timeout: float) -> list[Delivery]:
        futures: list[Any] = []
        for v in values:
            try:
                futures.append(self._p.send(topic, str(v).encode(), partition=partition))
            except self._errors.KafkaTimeoutError as e:  # no metadata: never sent
                futures.append(Delivery(error=f"KafkaTimeoutError: {e}", sent=False))
        deadline = time.monotonic() + timeout
        out = []
        for f in futures:
            if isinstance(f, Delivery):
                out.append(f)
                continue
            try:
                md = f.get(timeout=max(deadline - time.monotonic(), 0.001))
                out.append(Delivery(offset=md.offset if md.offset >= 0 else None))
            except self._errors.KafkaTimeoutError:
                out.append(Delivery(error="no delivery report in time"))
            except self._errors.KafkaError as e:
                out.append(Delivery(error=type(e).__name__))
        return out

    def close(self) -> None:
        self._p.close(timeout=1)


class KafkaPythonConsumer:
    """kafka-python's KafkaConsumer assigned one partition from `offset` (no group)."""

    def __init__(self, bootstrap: str, topic: str, partition: int, offset: int,
                 config: dict[str, Any], name: str) -> None:
        import kafka
        import kafka.errors
        self._errors = kafka.errors
        settings = {"bootstrap_servers": bootstrap.split(","), "group_id": None,
                    "client_id": name, "enable_auto_commit": False,
                    "auto_offset_reset": "earliest", "fetch_max_wait_ms": 100,
                    "metadata_max_age_ms": 1000, **_kafka_python_settings(config, "consumer")}
        try:
            self._c = kafka.KafkaConsumer(**settings)
        except (kafka.errors.KafkaConfigurationError, TypeError, AssertionError) as e:
            raise ClientConfigError(f"kafka-python refused the consumer settings: {e}") \
                from None
        self._tp = kafka.TopicPartition(topic, partition)
        self._c.assign([self._tp])
        self._c.seek(self._tp, offset)

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], str | None]:
        try:
            batches = self._c.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        except self._errors.KafkaError as e:
            return [], type(e).__name__
        records = []
        for r in batches.get(self._tp, []):
            value = _int_value(r.value)
            if value is not None:
                records.append([r.offset, value])
        return records, None

    def close(self) -> None:
        self._c.close()


# -- kcat ---------------------------------------------------------------------------

KCAT_MISSING = "kcat not found: install Debian's kcat package (apt-get install kcat)"
# How long a kcat process may take beyond its own deadline: starting, fetching
# metadata, connecting (tens of milliseconds on a local cluster).
KCAT_START_S = 3.0
# kcat's delivery report lines at -vv (kcat.c dr_msg_cb): neither names the
# message, so a failure cannot be tied to a value.
_DELIVERED = re.compile(r"^% Message delivered to partition -?\d+ \(offset (-?\d+)\)")
_FAILED = re.compile(r"^% Delivery failed for message: (.*)$")
# kcat exits at once (no delivery reports for what it had queued) when librdkafka
# refuses a message outright; that message never left.
_REFUSED = re.compile(r"^% ERROR: Failed to produce message \(\d+ bytes\): (.*)$")
# librdkafka's messages (rd_kafka_err2str) for errors raised before a value is
# sent (the confluent-kafka driver's _never_sent).
_NEVER_SENT = {"Local: Unknown partition", "Local: Unknown topic",
               "Local: Invalid argument or configuration", "Local: Queue full",
               "Broker: Message size too large"}


def require_kcat() -> str:
    """kcat's path; ClientConfigError (a user error, exit 2) when it is not installed."""
    path = shutil.which("kcat")
    if path is None:
        raise ClientConfigError(KCAT_MISSING)
    return path


def require_client(client: str, config: dict[str, Any] | None = None) -> None:
    """ClientConfigError when `client` is not installed here (kcat is a program on
    PATH; the Python clients are the package's dependencies) or refuses a setting
    of `config`: the client's own check, made before anything starts. A producer
    and a consumer are built as a run builds them, with no bootstrap (nothing is
    dialled), and closed; their log lines go nowhere (client_logger)."""
    if client == "kcat":
        require_kcat()
    if config is None:
        return
    if client not in CLIENTS:
        raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    client_logger(None)
    if client == "kafka-python":
        _kafka_python_settings(dict(config), "producer")  # a key neither role knows
        return
    producer_driver(client, "", "all", 1000, 1000, dict(config)).close()
    consumer_driver(client, "", "t", 0, 0, dict(config), "isrlab-settings-check").close()


def _kcat_settings(settings: dict[str, Any]) -> list[str]:
    """-X key=value per setting, in order (kcat applies them in order: the last wins)."""
    out = []
    for k, v in settings.items():
        text = ("true" if v else "false") if isinstance(v, bool) else str(v)
        out += ["-X", f"{k}={text}"]
    return out


def _run_kcat(args: list[str], stdin: str, timeout: float) -> tuple[int | None, str, str]:
    """Run kcat to completion or `timeout`: (exit status, None if it was killed
    at the deadline; stdout; stderr)."""
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return None, out, err


def _log_kcat(what: str, rc: int | None, err: str) -> None:
    """kcat's own lines, except per-message delivery reports, to the clients' log."""
    logger = logging.getLogger("isrlab.clients")
    logger.info("kcat %s: %s", what, "killed at its deadline" if rc is None else f"exit {rc}")
    for line in err.splitlines():
        if line and not _DELIVERED.match(line):
            logger.info("kcat: %s", line)


class KcatProducer:
    """kcat in producer mode, one process per produce call: the values one per
    line on its stdin, its delivery reports (-vv) on stderr, its exit status 1
    when any delivery failed.

    kcat's reports do not name their message. With one request in flight (the
    default here) or idempotence librdkafka reports a partition's messages in
    the order they were produced, so the i-th report is the i-th value's;
    otherwise a retried batch may be reported after a later one, and a batch's
    offsets are unknown (its values `info`). When any report of a run is a
    failure (or kcat died, or missed its deadline) every value of that run is
    `info` -- which ones failed kcat does not say -- unless every value was
    refused before it was sent. A long-lived kcat would
    not help: it serves delivery reports only when it reads the next line, so
    the last value's report would wait for a value that may never come."""

    def __init__(self, bootstrap: str, acks: int | str, timeout_ms: int, retry_ms: int,
                 config: dict[str, Any]) -> None:
        self._kcat = require_kcat()
        settings = {"acks": str(acks), "request.timeout.ms": timeout_ms,
                    # The client retries until this passes, then reports the error.
                    "message.timeout.ms": timeout_ms + retry_ms,
                    "linger.ms": 5, "retry.backoff.ms": 50,
                    "topic.metadata.refresh.interval.ms": 1000,
                    # One request in flight: a retried batch is delivered (and
                    # reported) before any later one, so reports follow the values.
                    "max.in.flight.requests.per.connection": 1, **config}
        self._args = [self._kcat, "-P", "-b", bootstrap, *_kcat_settings(settings)]
        in_flight = settings.get("max.in.flight.requests.per.connection",
                                 settings.get("max.in.flight"))
        idempotent = str(settings.get("enable.idempotence", "false")).lower() == "true"
        # Whether the settings make librdkafka report a partition's messages in
        # the order they were produced (else a batch's offsets stay unknown).
        self._ordered = idempotent or str(in_flight) == "1"
        _check_kcat_settings(self._args, "producer")

    def produce(self, topic: str, partition: int, values: list[int],
                timeout: float) -> list[Delivery]:
        # -vv: a delivery report line per message. -E: no exit when every broker is
        # down (kcat's default, dropping what it queued); librdkafka retries until
        # message.timeout.ms, as the other clients do.
        args = [*self._args, "-t", topic, "-p", str(partition), "-v", "-v", "-E"]
        stdin = "".join(f"{v}\n" for v in values)
        rc, _, err = _run_kcat(args, stdin, timeout)
        offsets, failed, refused = [], [], []
        for line in err.splitlines():
            if m := _DELIVERED.match(line):
                offsets.append(int(m.group(1)))
            elif m := _FAILED.match(line):
                failed.append(m.group(1))
            elif m := _REFUSED.match(line):
                refused.append(m.group(1))
        n = len(values)
        if rc == 0 and not failed and not refused and len(offsets) == n:
            if all(o < 0 for o in offsets):  # acks 0: librdkafka's placeholders, no offset
                return [Delivery() for _ in values]
            if n == 1 or (self._ordered and all(a < b for a, b in pairwise(offsets))):
                # Alone, or reported in the order sent (one request in flight, or
                # idempotence): the i-th report is the i-th value's.
                return [Delivery(offset=o) for o in offsets]
            # Acknowledged, but which offset is whose kcat does not say (a history's
            # ok send has its offset): may-have-been-written, like a lost report.
            _log_kcat(f"produce {n} value(s) to {topic}-{partition}: reports out of order",
                      rc, err)
            return [Delivery(error="delivered, but kcat's reports cannot be matched to "
                                   "the values (offsets unknown)") for _ in values]
        _log_kcat(f"produce {n} value(s) to {topic}-{partition}", rc, err)
        errors = failed + refused
        if not offsets and len(errors) == n and all(e in _NEVER_SENT for e in errors):
            return [Delivery(error=e, sent=False) for e in errors]
        if rc is None:
            error = "no delivery report in time (kcat killed at its deadline)"
        elif errors and n == 1:
            error = errors[0]
        elif errors:
            # Which values failed kcat does not say: every one may have.
            error = (f"kcat: {len(errors)} of {n} deliveries failed ({errors[0]}), "
                     f"{len(offsets)} delivered, which ones unknown")
        else:
            last = [x for x in err.splitlines() if x.startswith("% ERROR")][-1:]
            error = (f"kcat exit {rc}, {len(offsets)} of {n} delivery reports"
                     + (f": {last[0][2:]}" if last else ""))
        return [Delivery(error=error) for _ in values]

    def close(self) -> None:
        pass  # every produce call's kcat has exited


class KcatConsumer:
    """kcat in consumer mode, one process per poll: from the next offset, at most
    `max_records`, exiting at the end of the partition (-e); its output is
    `offset value` per record. Records it printed are a read even when it then
    fails or misses its deadline."""

    def __init__(self, bootstrap: str, topic: str, partition: int, offset: int,
                 config: dict[str, Any], name: str) -> None:
        self._kcat = require_kcat()
        settings = {"client.id": name, "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 1000,
                    **config}
        self._args = [self._kcat, "-C", "-b", bootstrap, "-t", topic, "-p", str(partition),
                      "-e", "-u", "-f", "%o %s\\n", *_kcat_settings(settings)]
        _check_kcat_settings(self._args, "consumer")
        self._next = offset

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], str | None]:
        args = [*self._args, "-o", str(self._next), "-c", str(max_records)]
        rc, out, err = _run_kcat(args, "", timeout + KCAT_START_S)
        records = []
        for line in out.splitlines():
            offset, _, raw = line.partition(" ")
            value = _int_value(raw.encode())
            if offset.lstrip("-").isdigit() and value is not None:
                records.append([int(offset), value])
        if records:
            self._next = records[-1][0] + 1
        error = None
        if rc not in (0, None):
            _log_kcat(f"poll from offset {args[-3]}", rc, err)
            last = [x for x in err.splitlines() if x.startswith("% ERROR")][-1:]
            error = last[0][2:] if last else f"kcat exit {rc}"
        return records, error if not records else None

    def close(self) -> None:
        pass  # every poll's kcat has exited


def _check_kcat_settings(args: list[str], role: str) -> None:
    """kcat's own check of the settings (-X dump parses them and exits), so a
    bad key is a user error before the run, not a failed send."""
    rc, _, err = _run_kcat([*args, "-X", "dump"], "", 10.0)
    if rc != 0:
        raise ClientConfigError(f"kcat refused the {role} settings: "
                                f"{' '.join(err.split()) or f'exit {rc}'}")


def producer_driver(client: str, bootstrap: str, acks: int | str, timeout_ms: int,
                    retry_ms: int, config: dict[str, Any]) -> ProducerDriver:
    if client == "confluent-kafka":
        return ConfluentProducer(bootstrap, acks, timeout_ms, retry_ms, config)
    if client == "kafka-python":
        return KafkaPythonProducer(bootstrap, acks, timeout_ms, retry_ms, config)
    if client == "kcat":
        return KcatProducer(bootstrap, acks, timeout_ms, retry_ms, config)
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def consumer_driver(client: str, bootstrap: str, topic: str, partition: int, offset: int,
                    config: dict[str, Any], name: str) -> ConsumerDriver:
    if client == "confluent-kafka":
        return ConfluentConsumer(bootstrap, topic, partition, offset, config, name)
    if client == "kafka-python":
        return KafkaPythonConsumer(bootstrap, topic, partition, offset, config, name)
    if client == "kcat":
        return KcatConsumer(bootstrap, topic, partition, offset, config, name)
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


# -- an existing cluster: metadata and the final read ----------------------------


class ClusterUnreachable(RuntimeError):
    """The client could not get the cluster's metadata (a user error on an
    external target: a wrong --bootstrap, exit 2)."""


@dataclass(frozen=True)
class TopicMetadata:
    """What the client's metadata says of one topic: its partitions' leaders and
    replicas (broker ids as strings; a leader None while there is none), and every
    broker's host:port. `exists` false: the cluster does not know the topic."""

    exists: bool
    leaders: dict[int, str | None]
    replicas: dict[int, list[str]]
    brokers: dict[str, str]


def topic_metadata(client: str, bootstrap: str, topic: str, config: dict[str, Any],
                   timeout: float) -> TopicMetadata:
    """The topic's metadata as `client` sees it, within `timeout` seconds; raises
    ClusterUnreachable. Asks for every topic, never this one by name: a metadata
    request naming a topic may create it on a broker that auto-creates topics."""
    if client == "confluent-kafka":
        return _confluent_metadata(bootstrap, topic, config, timeout)
    if client == "kafka-python":
        return _kafka_python_metadata(bootstrap, topic, config, timeout)
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def _confluent_metadata(bootstrap: str, topic: str, config: dict[str, Any],
                        timeout: float) -> TopicMetadata:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient
    # Only the connection's settings apply to an admin client: the producer's
    # and consumer's keys (acks, enable.idempotence) would be refused here.
    settings = {"bootstrap.servers": bootstrap,
                "logger": logging.getLogger("isrlab.clients"),
                **{k: v for k, v in config.items()
                   if k.startswith(("security.", "sasl.", "ssl.", "socket.", "client."))}}
    try:
        md = AdminClient(settings).list_topics(timeout=timeout)
    except confluent_kafka.KafkaException as e:
        raise ClusterUnreachable(f"confluent-kafka got no metadata from {bootstrap}: "
                                 f"{e.args[0].str() if e.args else e}") from None
    brokers = {str(b.id): f"{b.host}:{b.port}" for b in md.brokers.values()}
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return TopicMetadata(False, {}, {}, brokers)
    leaders = {p.id: (str(p.leader) if p.leader >= 0 else None)
               for p in t.partitions.values()}
    replicas = {p.id: [str(r) for r in p.replicas] for p in t.partitions.values()}
    return TopicMetadata(True, leaders, replicas, brokers)


def _kafka_python_metadata(bootstrap: str, topic: str, config: dict[str, Any],
                           timeout: float) -> TopicMetadata:
    import kafka
    import kafka.errors
    try:
        admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap.split(","),
                                       request_timeout_ms=int(timeout * 1000),
                                       bootstrap_timeout_ms=int(timeout * 1000))
    except kafka.errors.KafkaError as e:
        raise ClusterUnreachable(f"kafka-python got no metadata from {bootstrap}: "
                                 f"{type(e).__name__}") from None
    try:
        brokers = {str(b["broker_id"]): f"{b['host']}:{b['port']}"
                   for b in admin.describe_cluster()["brokers"]}
        if topic not in admin.list_topics():
            return TopicMetadata(False, {}, {}, brokers)
        (t,) = admin.describe_topics([topic])
    except kafka.errors.KafkaError as e:
        raise ClusterUnreachable(f"kafka-python got no metadata from {bootstrap}: "
                                 f"{type(e).__name__}") from None
    finally:
        admin.close()
    parts = t["partitions"]  # DescribeTopics' (Metadata response) field names
    leaders = {p["partition_index"]: (str(p["leader_id"]) if p["leader_id"] >= 0 else None)
               for p in parts}
    replicas = {p["partition_index"]: [str(r) for r in p["replica_nodes"]] for p in parts}
    return TopicMetadata(True, leaders, replicas, brokers)


def read_to_end(client: str, bootstrap: str, topic: str, partition: int,
                config: dict[str, Any], timeout: float) -> tuple[list[list[int]], int]:
    """Every record of one partition from offset 0 up to its high watermark as the
    client reports it when the read starts: (records [[offset, value], ...], hw).
    Raises ClusterUnreachable if the HW is not known, or the records up to it not
    read, within `timeout` seconds. Records whose value is not an integer (not the
    workload's) are passed over."""
    deadline = time.monotonic() + timeout
    if client == "confluent-kafka":
        return _confluent_read_to_end(bootstrap, topic, partition, config, deadline)
    if client == "kafka-python":
        return _kafka_python_read_to_end(bootstrap, topic, partition, config, deadline)
    raise ClientConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def _confluent_read_to_end(bootstrap: str, topic: str, partition: int,
                           config: dict[str, Any], deadline: float
                           ) -> tuple[list[list[int]], int]:
    import confluent_kafka
    settings = {"bootstrap.servers": bootstrap, "group.id": "isrlab-final-read",
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100, "logger": logging.getLogger("isrlab.clients"),
                **config}
    c = confluent_kafka.Consumer(settings)
    try:
        tp = confluent_kafka.TopicPartition(topic, partition)
        try:
            _, hw = c.get_watermark_offsets(tp, timeout=max(deadline - time.monotonic(), 0.1))
        except confluent_kafka.KafkaException as e:
            raise ClusterUnreachable(f"no high watermark for {topic}/{partition}: "
                                     f"{e.args[0].str() if e.args else e}") from None
        records: list[list[int]] = []
        position = 0
        c.assign([confluent_kafka.TopicPartition(topic, partition, 0)])
        while position < hw:
            if time.monotonic() >= deadline:
                raise ClusterUnreachable(f"read {topic}/{partition} up to offset {position} "
                                         f"of hw {hw} only")
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None or m.offset() >= hw:
                    continue
                position = m.offset() + 1
                value = _int_value(m.value())
                if value is not None:
                    records.append([m.offset(), value])
            # The client's position passes offsets that hold no record for it
            # (transaction markers, compacted ones).
            position = max(position, c.position([tp])[0].offset)
        return records, hw
    finally:
        c.close()


def _kafka_python_read_to_end(bootstrap: str, topic: str, partition: int,
                              config: dict[str, Any], deadline: float
                              ) -> tuple[list[list[int]], int]:
    import kafka
    import kafka.errors
    settings = {"bootstrap_servers": bootstrap.split(","), "group_id": None,
                "client_id": "isrlab-final-read", "enable_auto_commit": False,
                "auto_offset_reset": "earliest", "fetch_max_wait_ms": 100, **config}
    try:
        c = kafka.KafkaConsumer(**settings)
    except kafka.errors.KafkaError as e:
        raise ClusterUnreachable(f"kafka-python: {type(e).__name__}") from None
    try:
        tp = kafka.TopicPartition(topic, partition)
        c.assign([tp])
        try:
            hw = c.end_offsets([tp])[tp]
        except kafka.errors.KafkaError as e:
            raise ClusterUnreachable(f"no high watermark for {topic}/{partition}: "
                                     f"{type(e).__name__}") from None
        c.seek(tp, 0)
        records: list[list[int]] = []
        position = 0
        while position < hw:
            if time.monotonic() >= deadline:
                raise ClusterUnreachable(f"read {topic}/{partition} up to offset {position} "
                                         f"of hw {hw} only")
            try:
                batches = c.poll(timeout_ms=500, max_records=1000)
            except kafka.errors.KafkaError:
                continue  # asked again until the deadline
            for r in batches.get(tp, []):
                if r.offset >= hw:
                    continue
                position = r.offset + 1
                value = _int_value(r.value)
                if value is not None:
                    records.append([r.offset, value])
            position = max(position, c.position(tp))  # as librdkafka's, above
        return records, hw
    finally:
        c.close()
