"""The warm checker server: one long-lived process holding a SparkSession, so that
`reproduce`, `check` and `chaos` skip the JVM start and a cold JVM's compiling.

    python -m checker.server --master local[2] [--idle-timeout 600]

It listens on a Unix socket (checker.remote.socket_path, private to the user),
serves one check at a time, and exits after IDLE_TIMEOUT_S without a request, on
`isrlab checker stop`, on SIGTERM, or when a client of another checker version
replaces it. Requests and answers are JSON lines (checker.remote):

    {"op": "status"}                       -> the server's state
    {"op": "stop"}                         -> {"stopping": true}, then it exits
    {"op": "check", "paths": [...], ...}   -> {"progress": "..."} lines, then
                                              {"results": [...]} or {"error": {...}}
    {"op": "append-results", "table": T,   -> {"table": T} or {"error": {...}}: the
     "results": [...]}                        results, as judged, to the Parquet table

A client that goes away mid-check (Ctrl-C) cancels the check's Spark jobs. Where
no class-data archive exists yet (checker.spark.cds_archive), the server has
one built in the background as it exits (checker.archive), for the next driver
JVM, the first to read it: its own JVM does not record classes, which would slow the
check it answers, and a builder running beside it slowed the checks it served
(bench/README.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checker import remote
from checker.errors import CheckerError
from contract.rundir import RunDirError


class _ClientGone(Exception):
    """The client hung up during its check."""


class Server:
    def __init__(self, master: str, idle_timeout: float) -> None:
        self.master = master
        self.idle_timeout = idle_timeout
        self.started = time.time()
        self.last_used = self.started
        self.checks = 0
        self.warmup_checks = 0  # made-up checks the warm-up ran (_WarmUp)
        self.warmups_abandoned = 0  # a check request found it running
        self._info_lock = threading.Lock()
        self.stopping = False
        self.sock: socket.socket | None = None

    # -- state file -------------------------------------------------------------
    def info(self, ready: bool) -> dict[str, Any]:
        return {
            "pid": os.getpid(), "version": remote.checker_version(), "master": self.master,
            "socket": str(remote.socket_path()), "started": self.started,
            "last_used": self.last_used, "idle_timeout": self.idle_timeout,
            "checks": self.checks, "warmup_checks": self.warmup_checks,
            "warmups_abandoned": self.warmups_abandoned, "ready": ready,
        }

    def _write_info(self, ready: bool) -> None:
        path = remote.info_path()
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with self._info_lock:  # the warm-up thread writes it too
            tmp.write_text(json.dumps(self.info(ready)))
            tmp.replace(path)

    def _remove_own_files(self) -> None:
        """Remove the socket and state file if they are still this server's (a
        replacement may already have written its own)."""
        try:
            if json.loads(remote.info_path().read_text()).get("pid") == os.getpid():
                remote.info_path().unlink(missing_ok=True)
                remote.socket_path().unlink(missing_ok=True)
        except (OSError, ValueError):
            pass

    # -- main loop --------------------------------------------------------------
    def run(self) -> int:
        from checker.spark import get_session

        d = remote.state_dir()
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        remote.socket_path().unlink(missing_ok=True)
        self.sock.bind(str(remote.socket_path()))
        self.sock.listen(16)
        self._write_info(ready=False)
        try:
            # Clients may connect at once: they wait in the backlog while Spark starts.
            spark = get_session(self.master)
            if not self._waiting():
                # The first job brings the executor up. A check already waiting
                # (a `reproduce` whose cluster was quicker) runs its own sooner:
                # ~1 s less in all than this job and then the check.
                spark.range(1).count()
        except CheckerError as e:
            print(f"checker server: {e}", file=sys.stderr, flush=True)
            self._remove_own_files()
            return 2
        self.last_used = time.time()  # idle from here: Spark's start is not idleness
        self._write_info(ready=True)
        print(f"checker server {remote.checker_version()} ready on {self.master}", flush=True)
        # A client already waiting (a `reproduce` whose cluster was quicker than
        # Spark's start) is served first: a warm-up started now would be abandoned
        # at once, and the check would wait for that.
        warmup = _WarmUp(self.master, 0, self._warmed) if self._waiting() else self._warm_up()
        try:
            while not self.stopping:
                left = self.idle_timeout - (time.time() - self.last_used)
                if left <= 0:
                    print("checker server: idle timeout", flush=True)
                    break
                self.sock.settimeout(min(left, 5.0))
                try:
                    conn, _ = self.sock.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.settimeout(None)
                    # A check abandons the warm-up (what it compiled is kept);
                    # `checker status` does not.
                    self._serve(conn, before_check=functools.partial(self._abandon, warmup))
                self.last_used = time.time()
                self._write_info(ready=True)
                if not self.stopping and not warmup.is_alive():
                    warmup = self._warm_up()  # the rest of it, while the caller reads
        finally:
            warmup.abandon()
            self.sock.close()
            self._remove_own_files()
        return 0

    def _abandon(self, warmup: _WarmUp) -> None:
        if warmup.abandon():
            self.warmups_abandoned += 1

    def _waiting(self) -> bool:
        """Whether a client is waiting to be accepted."""
        assert self.sock is not None
        return bool(select.select([self.sock], [], [], 0)[0])

    def _warm_up(self) -> _WarmUp:
        """Start (or go on with) the warm-up checks, until warmup_checks() checks,
        real or made up, have run in this JVM."""
        left = warmup_checks() - self.checks - self.warmup_checks
        warmup = _WarmUp(self.master, left, self._warmed)
        if left > 0:
            warmup.start()  # unstarted, it is not alive and abandons at once
        return warmup

    def _warmed(self) -> None:
        self.warmup_checks += 1
        self._write_info(ready=True)

    def _serve(self, conn: socket.socket, before_check: Callable[[], None]) -> None:
        rfile, wfile = conn.makefile("rb"), conn.makefile("wb")
        try:
            req = remote.receive(rfile)
            if req is None:
                return
            op = req.get("op")
            if op == "status":
                remote.send(wfile, self.info(ready=True))
            elif op == "stop":
                self.stopping = True
                remote.send(wfile, {"stopping": True})
            elif op == "check":
                remote.send(wfile, {"accepted": True})  # the client stops waiting
                before_check()
                self._check(conn, wfile, req)
            elif op == "append-results":
                remote.send(wfile, {"accepted": True})
                before_check()  # the warm-up's end of check would drop what Spark holds
                self._append_results(wfile, req)
            else:
                remote.send(wfile, {"error": {"type": "CheckerError",
                                              "message": f"unknown request {op!r}"}})
        except (OSError, ValueError) as e:
            print(f"checker server: a client's request failed: {e}", flush=True)

    def _append_results(self, wfile: Any, req: dict[str, Any]) -> None:
        from checker.results import write_results
        from checker.spark import get_session

        try:
            results = [remote.result_from_wire(r) for r in req["results"]]
            table = write_results(get_session(self.master), results, Path(req["table"]))
            remote.send(wfile, {"table": str(table)})
        except CheckerError as e:
            remote.send(wfile, {"error": remote.error_to_wire(e)})
        except Exception as e:  # noqa: BLE001 - the client falls back to writing itself
            print(f"checker server: appending results failed: {e!r}", flush=True)
            remote.send(wfile, {"error": {"type": "ServerFailure",
                                          "message": " ".join(str(e).split())[:300]}})

    def _check(self, conn: socket.socket, wfile: Any, req: dict[str, Any]) -> None:
        from checker.api import check_runs
        from checker.spark import cancel_jobs, get_session

        gone = threading.Event()
        done = threading.Event()

        def watch() -> None:
            # The client sends nothing more; readable means it hung up.
            try:
                while not done.is_set():
                    r, _, _ = select.select([conn], [], [], 0.2)
                    if r and not done.is_set() and not conn.recv(1, socket.MSG_PEEK):
                        gone.set()
                        cancel_jobs(get_session(self.master))
                        return
            except (OSError, ValueError):
                return

        def say(msg: str) -> None:
            if gone.is_set():
                raise _ClientGone()
            try:
                remote.send(wfile, {"progress": msg})
            except OSError:
                gone.set()
                raise _ClientGone() from None

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        self.checks += 1
        try:
            results = check_runs([Path(p) for p in req["paths"]], master=self.master,
                                 progress=say, prune=req.get("prune"))
            remote.send(wfile, {"results": [remote.result_to_wire(r) for r in results]})
        except _ClientGone:
            print("checker server: client went away; check abandoned", flush=True)
        except (CheckerError, RunDirError) as e:
            remote.send(wfile, {"error": remote.error_to_wire(e)})
        except Exception as e:  # noqa: BLE001 - the client falls back to checking itself
            if gone.is_set():
                print("checker server: client went away; check cancelled", flush=True)
            else:
                print(f"checker server: check failed: {e!r}", flush=True)
                remote.send(wfile, {"error": {"type": "ServerFailure",
                                              "message": " ".join(str(e).split())[:300]}})
        finally:
            done.set()
            watcher.join()


# HotSpot keeps compiling Spark's planner over a JVM's first checks: a small run's
# check took 24.9, 9.7, 11.2, 7.9, 7.5, 6.3, 5.9, 5.4 s in one session, and levels
# off at ~4-5 s after about ten (bench/README.md, time to verdict).
WARMUP_CHECKS = 10


def warmup_checks() -> int:
    """WARMUP_CHECKS, or ISRLAB_CHECKER_WARMUP (0: no warm-up, for a machine whose
    cores are better left to the cluster)."""
    try:
        return max(0, int(os.environ.get("ISRLAB_CHECKER_WARMUP") or WARMUP_CHECKS))
    except ValueError:
        return WARMUP_CHECKS


class _WarmUp(threading.Thread):
    """Check a small made-up run ``count`` times: right after Spark starts, while the
    caller's cluster is still running (a cold JVM interprets and compiles Spark's
    planner on its first check), and again after each real check until the JVM has
    run warmup_checks(); the first after the JVM's first check also generates the
    check's classes (checker.spark.one_check). Abandoned -- its Spark
    jobs cancelled -- the moment a check request arrives; what it compiled by then
    stays compiled. ``done`` is called after each of its checks."""

    POLL_S = 0.05  # abandon(): how often it cancels the warm-up's jobs again

    def __init__(self, master: str, count: int, done: Callable[[], None]) -> None:
        super().__init__(name="isrlab-checker-warmup", daemon=True)
        self.master = master
        self.count = count
        self.done = done
        self._abandoned = threading.Event()

    def run(self) -> None:
        import tempfile

        from checker.api import check_runs
        from checker.synth import sample_run

        def say(_msg: str) -> None:
            if self._abandoned.is_set():
                raise _ClientGone()

        try:
            with tempfile.TemporaryDirectory(prefix="isrlab-warmup-") as tmp:
                run = sample_run(Path(tmp))
                for _ in range(self.count):
                    check_runs([run], master=self.master, progress=say)
                    self.done()
            print("checker server: warmed up", flush=True)
        except Exception as e:  # noqa: BLE001 - abandoned (cancelled jobs) or not: never fatal
            if not self._abandoned.is_set():
                print(f"checker server: warm-up failed: {e!r}"[:500], flush=True)

    def abandon(self) -> bool:
        """Stop the warm-up; whether it was running."""
        if not self.is_alive():
            return False
        from checker.spark import cancel_jobs, get_session

        self._abandoned.set()
        # Cancel until the thread is gone, not once: the check goes on planning
        # between its jobs and starts the next, and waiting for its next phase
        # kept a user's check waiting up to 2.4 s (mean 0.8 s). A job of its
        # started after the first cancel now dies within POLL_S.
        spark = get_session(self.master)
        while self.is_alive():
            cancel_jobs(spark)
            self.join(self.POLL_S)
        return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m checker.server")
    p.add_argument("--master", required=True)
    p.add_argument("--idle-timeout", type=float, default=remote.idle_timeout())
    args = p.parse_args(argv)
    from checker.archive import build_in_background
    from checker.spark import shutdown

    server = Server(args.master, args.idle_timeout)

    def on_term(_sig: int, _frame: Any) -> None:
        server.stopping = True
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a detached daemon; `checker stop` ends it
    code = 0
    try:
        code = server.run()
    finally:
        shutdown()
        build_in_background()  # for the next driver JVM: no check of this server waits on it
    return code


if __name__ == "__main__":
    sys.exit(main())
