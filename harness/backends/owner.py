"""Who owns a run, and whether that owner is still alive.

A run's owner is the isrlab process that runs it: the host name, its pid, that
process's start time (so a recycled pid is not mistaken for the owner) and its
PID namespace (so a pid seen from another namespace on the same host is not
checked against ours). It is recorded in run.json (`owner`, docs/run-directory.md)
and on every container, network and volume of a Docker run (labels).
`isrlab docker clean` removes only what belongs to an owner that is gone
(docker/README.md); `isrlab collect` and `isrlab check` treat a run still marked
"running" whose owner is gone as crashed, and refuse one whose owner is alive.
"""

from __future__ import annotations

import enum
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

LABEL_HOST = "isrlab.owner.host"
LABEL_PID = "isrlab.owner.pid"
LABEL_START = "isrlab.owner.start"  # /proc/<pid>/stat field 22, clock ticks since boot
LABEL_PIDNS = "isrlab.owner.pidns"  # readlink /proc/self/ns/pid, e.g. pid:[4026531836]


class Liveness(enum.Enum):
    ALIVE = "alive"
    GONE = "gone"
    UNKNOWN = "unknown"  # another host or PID namespace: cannot be checked from here


def process_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot ("22nd field of
    /proc/<pid>/stat"); None if there is no such process or no /proc. A zombie
    counts as no process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            # The command name (field 2) may hold spaces and parentheses.
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]  # field 22 counted from 1; fields[0] is field 3


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: str = ""  # "" where unknown (no /proc)
    pidns: str = ""

    @classmethod
    def this_process(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start(pid) or "", _pid_namespace())

    @classmethod
    def of_labels(cls, labels: Mapping[str, str] | None) -> Owner | None:
        """The owner recorded in a Docker object's labels; None if there is none
        (an object made by an isrlab older than the owner labels) or it is garbled."""
        labels = labels or {}
        host, pid = labels.get(LABEL_HOST), labels.get(LABEL_PID)
        if not host or not pid or not pid.isdigit():
            return None
        return cls(host, int(pid), labels.get(LABEL_START, ""), labels.get(LABEL_PIDNS, ""))

    @classmethod
    def of_record(cls, record: object) -> Owner | None:
        """The owner recorded in run.json (`as_record`'s shape); None if there is
        none (a run of an isrlab older than the record) or it is garbled."""
        if not isinstance(record, dict):
            return None
        host, pid = record.get("host"), record.get("pid")
        if not isinstance(host, str) or not host or not isinstance(pid, int) or pid <= 0:
            return None
        return cls(host, pid, str(record.get("start") or ""), str(record.get("pidns") or ""))

    def as_record(self) -> dict[str, str | int]:
        """The owner as run.json records it."""
        return {"host": self.host, "pid": self.pid, "start": self.start, "pidns": self.pidns}

    def labels(self) -> dict[str, str]:
        return {LABEL_HOST: self.host, LABEL_PID: str(self.pid), LABEL_START: self.start,
                LABEL_PIDNS: self.pidns}

    def liveness(self) -> tuple[Liveness, str]:
        """Whether the owner still runs, with the reason in words
        ("owner pid 1234 on host H is alive")."""
        who = f"owner pid {self.pid} on host {self.host}"
        if self.host != socket.gethostname():
            return Liveness.UNKNOWN, f"{who} is on another host and cannot be checked"
        here = _pid_namespace()
        if self.pidns and here and self.pidns != here:
            return Liveness.UNKNOWN, (f"{who} runs in another PID namespace ({self.pidns}) "
                                      "and cannot be checked")
        if os.path.isdir("/proc"):
            start = process_start(self.pid)
            if start is None:
                return Liveness.GONE, f"{who} is gone"
            if self.start and start != self.start:
                return Liveness.GONE, f"{who} is gone (the pid now belongs to another process)"
            return Liveness.ALIVE, f"{who} is alive"
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return Liveness.GONE, f"{who} is gone"
        except PermissionError:
            pass  # exists, belongs to someone else
        return Liveness.ALIVE, f"{who} is alive"


def liveness_of(labels: Mapping[str, str] | None) -> tuple[Liveness, str]:
    """The liveness of the owner recorded in `labels`; no owner recorded counts as gone."""
    owner = Owner.of_labels(labels)
    if owner is None:
        return Liveness.GONE, "no owner recorded (made by an older isrlab)"
    return owner.liveness()
