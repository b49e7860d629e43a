"""The kcat driver's reading of kcat, with a stand-in `kcat` on PATH that prints
what kcat 1.7 prints (its delivery report lines at -vv, its `% ERROR:` lines,
its exit status) -- the cases a real cluster does not give on demand, above all
a run where some values were delivered and some were not. A value is `ok` only
when every report of its run is a delivery, with the offset of its report
only when reports follow the values; a consumer's printed records count even when kcat then fails.
And without kcat at all, a run is refused (exit 2, one line) before it starts."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from workloads.kafka_clients import (
    KCAT_MISSING,
    ClientConfigError,
    require_kcat,
)
from workloads.kafka_clients.kcat import Consumer as KcatConsumer
from workloads.kafka_clients.kcat import Producer as KcatProducer

# The stand-in: `-X dump` passes (the settings check); otherwise it records its
# arguments and stdin, prints $FAKE_OUT and $FAKE_ERR, then sleeps $FAKE_SLEEP (a
# kcat that hangs) or exits $FAKE_RC.
FAKE = """#!/bin/sh
for a in "$@"; do [ "$a" = dump ] && exit 0; done
echo "$@" > "$FAKE_DIR/args"
cat > "$FAKE_DIR/stdin"
printf '%b' "$FAKE_OUT"
printf '%b' "$FAKE_ERR" >&2
[ "${FAKE_SLEEP:-0}" = 0 ] || exec sleep "$FAKE_SLEEP"  # killed: nothing left holding the pipes
exit "${FAKE_RC:-0}"
"""

DELIVERED = "% Message delivered to partition 0 (offset {}) on broker 1\\n"
FAILED = "% Delivery failed for message: {}\\n"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    kcat = tmp_path / "kcat"
    kcat.write_text(FAKE)
    kcat.chmod(kcat.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))

    def says(out: str = "", err: str = "", rc: int = 0, sleep: float = 0) -> Path:
        monkeypatch.setenv("FAKE_OUT", out)
        monkeypatch.setenv("FAKE_ERR", err)
        monkeypatch.setenv("FAKE_RC", str(rc))
        monkeypatch.setenv("FAKE_SLEEP", str(sleep))
        return tmp_path

    return says


def producer(**config) -> KcatProducer:
    return KcatProducer("127.0.0.1:1", "all", 5000, 10000,
                        {"enable.idempotence": True, **config})


def outcomes(deliveries) -> list[tuple]:
    return [(d.offset, d.error, d.sent) for d in deliveries]


def test_values_go_one_per_line_with_the_settings_as_x(fake) -> None:
    d = fake(err=DELIVERED.format(4) * 3)
    producer().produce("t", 2, [7, 8, 9], 5)
    assert (d / "stdin").read_text() == "7\n8\n9\n"
    args = (d / "args").read_text().split()
    assert args[:3] == ["-P", "-b", "127.0.0.1:1"]
    assert ["-t", "t", "-p", "2"] == args[args.index("-t"):args.index("-t") + 4]
    assert "acks=all" in args and "message.timeout.ms=15000" in args
    # The user's settings come last (kcat applies -X in order), booleans as librdkafka's.
    assert args[args.index("-t") - 1] == "enable.idempotence=true"


def test_all_delivered_is_ok_with_offsets_when_reports_follow_the_values(fake) -> None:
    """The i-th report is the i-th value's when librdkafka reports in produce
    order: a value alone, one request in flight (isrlab's default), idempotence."""
    fake(err=DELIVERED.format(12))
    assert outcomes(producer().produce("t", 0, [3], 5)) == [(12, None, True)]
    fake(err=DELIVERED.format(10) + DELIVERED.format(11))
    assert outcomes(producer().produce("t", 0, [1, 2], 5)) == [(10, None, True), (11, None, True)]
    plain = KcatProducer("127.0.0.1:1", "all", 5000, 10000, {})  # max.in.flight 1
    assert outcomes(plain.produce("t", 0, [1, 2], 5)) == [(10, None, True), (11, None, True)]
    fake(err=DELIVERED.format(-1001) + DELIVERED.format(-1000))  # acks 0: placeholders
    assert outcomes(producer().produce("t", 0, [4, 5], 5)) == [(None, None, True)] * 2


def test_delivered_but_unmatchable_is_info(fake) -> None:
    """Several requests in flight without idempotence: a retried batch may be
    reported after a later one, so a batch's offsets are nobody's; reports out
    of order likewise."""
    fake(err=DELIVERED.format(10) + DELIVERED.format(11))
    unordered = KcatProducer("127.0.0.1:1", "all", 5000, 10000,
                             {"max.in.flight.requests.per.connection": 5})
    got = unordered.produce("t", 0, [1, 2], 5)
    assert all(d.error and d.sent and d.offset is None for d in got)
    assert "cannot be matched" in got[0].error
    fake(err=DELIVERED.format(11) + DELIVERED.format(10))
    assert all(d.error and d.sent for d in producer().produce("t", 0, [1, 2], 5))


def test_any_failure_in_a_run_makes_every_value_info(fake) -> None:
    """Two reports say delivered, one says failed: which value failed kcat does
    not say, so none of the three is ok."""
    fake(err=DELIVERED.format(5) + FAILED.format("Broker: Not enough in-sync replicas")
         + DELIVERED.format(6), rc=1)
    got = producer().produce("t", 0, [1, 2, 3], 5)
    assert all(d.error is not None and d.sent and d.offset is None for d in got)
    assert "1 of 3 deliveries failed (Broker: Not enough in-sync replicas), 2 delivered" \
        in got[0].error


def test_missing_reports_or_a_kill_make_every_value_info(fake) -> None:
    fake(err=DELIVERED.format(5))  # exit 0 but one report for two values
    assert all(d.error and d.sent for d in producer().produce("t", 0, [1, 2], 5))
    fake(err="% ERROR: Local: All broker connections are down: terminating\\n", rc=1)
    got = producer().produce("t", 0, [1, 2], 5)
    assert all(d.sent for d in got) and "All broker connections are down" in got[0].error
    fake(err=DELIVERED.format(5), sleep=5)
    got = producer().produce("t", 0, [1], 0.5)
    assert outcomes(got) == [(None, "no delivery report in time (kcat killed at its deadline)",
                              True)]


def test_refused_before_sending_is_fail(fake) -> None:
    fake(err=FAILED.format("Local: Unknown partition") * 2, rc=1)
    assert outcomes(producer().produce("t", 9, [1, 2], 5)) == [
        (None, "Local: Unknown partition", False)] * 2
    fake(err="% ERROR: Failed to produce message (1 bytes): Local: Unknown topic\\n", rc=1)
    assert outcomes(producer().produce("t", 0, [1], 5)) == [(None, "Local: Unknown topic", False)]
    # One refused, one timed out (perhaps written): both info.
    fake(err=FAILED.format("Local: Unknown partition") + FAILED.format("Local: Message timed out"),
         rc=1)
    assert all(d.sent for d in producer().produce("t", 0, [1, 2], 5))


def test_consumer_reads_from_the_tracked_offset(fake) -> None:
    d = fake(out="5 10\\n6 11\\n")
    consumer = KcatConsumer("127.0.0.1:1", "t", 0, 5, {}, "c")
    assert consumer.poll(100, 0.2) == ([[5, 10], [6, 11]], None)
    args = (d / "args").read_text().split()
    assert args[args.index("-o") + 1] == "5" and args[args.index("-c") + 1] == "100"
    assert "-e" in args
    fake(out="7 12\\n", err="% ERROR: Topic t [0] error: Broker: Not leader for partition\\n",
         rc=1)
    assert consumer.poll(100, 0.2) == ([[7, 12]], None)  # printed: read, whatever came next
    assert (d / "args").read_text().split()[args.index("-o") + 1] == "7"
    fake(err="% ERROR: Topic t [0] error: Broker: Not leader for partition\\n", rc=1)
    assert consumer.poll(100, 0.2) == ([], "ERROR: Topic t [0] error: Broker: Not leader for "
                                           "partition")
    assert (d / "args").read_text().split()[args.index("-o") + 1] == "8"
    assert consumer.last_exit == 1
    fake(sleep=30)  # a kcat that never exits by itself: killed at the poll's deadline
    assert consumer.poll(100, 0.2) == ([], None)
    assert consumer.last_exit is None


def test_no_kcat_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without kcat on PATH the driver refuses, and `isrlab reproduce --client
    kcat` exits 2 with one line saying how to install it, nothing started."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClientConfigError, match="apt-get install kcat"):
        require_kcat()
    r = subprocess.run([sys.executable, "-m", "harness.cli", "reproduce",
                        "kip101-hw-truncation-loss", "--protocol", "0.10", "--client", "kcat",
                        "--runs-dir", str(tmp_path / "runs"), "--no-server"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**os.environ, "PATH": str(tmp_path)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr == f"isrlab: {KCAT_MISSING}\n"
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
