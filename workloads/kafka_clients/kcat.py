"""kcat, librdkafka's command-line client: one process per produce or poll. No
metadata or final read of an existing cluster (`chaos --target kafka` takes a
Python client)."""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from itertools import pairwise
from typing import Any

from workloads.kafka_clients.base import ClientConfigError, Delivery, int_value

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


class Producer:
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


class Consumer:
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
        # The last poll's kcat exit status; None: killed at its deadline (-e makes
        # it exit by itself at the end of the partition).
        self.last_exit: int | None = None

    def poll(self, max_records: int, timeout: float) -> tuple[list[list[int]], str | None]:
        args = [*self._args, "-o", str(self._next), "-c", str(max_records)]
        rc, out, err = _run_kcat(args, "", timeout + KCAT_START_S)
        self.last_exit = rc
        records = []
        for line in out.splitlines():
            offset, _, raw = line.partition(" ")
            value = int_value(raw.encode())
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
