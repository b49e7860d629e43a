"""The owner of a run's Docker objects: recorded as labels, judged alive or gone
against real processes (no Docker needed)."""

from __future__ import annotations

import os
import socket
import subprocess

from conftest import dead_owner

from harness.backends.owner import LABEL_PID, Liveness, Owner, liveness_of, process_start


def test_this_process_is_alive_and_round_trips_through_labels() -> None:
    me = Owner.this_process()
    assert me.host == socket.gethostname() and me.pid == os.getpid()
    assert me.start == process_start(os.getpid()) and me.start.isdigit()
    assert Owner.of_labels(me.labels()) == me
    assert all(isinstance(v, str) for v in me.labels().values())  # docker labels are strings
    assert me.liveness() == (Liveness.ALIVE,
                             f"owner pid {me.pid} on host {me.host} is alive")


def test_an_exited_owner_is_gone() -> None:
    owner = dead_owner()
    liveness, why = owner.liveness()
    assert liveness is Liveness.GONE and why.endswith("is gone"), why


def test_a_recycled_pid_is_not_the_owner() -> None:
    # A live process with the owner's pid but another start time: the pid was reused.
    with subprocess.Popen(["sleep", "60"]) as proc:
        try:
            real = process_start(proc.pid)
            assert real is not None
            impostor = Owner(socket.gethostname(), proc.pid, str(int(real) + 1),
                             os.readlink("/proc/self/ns/pid"))
            liveness, why = impostor.liveness()
            assert liveness is Liveness.GONE and "belongs to another process" in why
            same = Owner(socket.gethostname(), proc.pid, real, os.readlink("/proc/self/ns/pid"))
            assert same.liveness()[0] is Liveness.ALIVE
        finally:
            proc.kill()
    assert process_start(proc.pid) is None  # reaped: no such process


def test_other_host_or_pid_namespace_cannot_be_checked() -> None:
    me = Owner.this_process()
    liveness, why = Owner("elsewhere.example", me.pid, me.start, me.pidns).liveness()
    assert liveness is Liveness.UNKNOWN and "on another host" in why
    liveness, why = Owner(me.host, me.pid, me.start, "pid:[1]").liveness()
    assert liveness is Liveness.UNKNOWN and "another PID namespace" in why


def test_no_owner_labels_count_as_orphaned() -> None:
    assert Owner.of_labels({"isrlab.run": "r"}) is None
    assert Owner.of_labels({**Owner.this_process().labels(), LABEL_PID: "x"}) is None
    liveness, why = liveness_of({"isrlab.run": "r"})
    assert liveness is Liveness.GONE and "no owner recorded" in why
