"""Checking through the warm checker server (checker.server), started on demand.

`check` is what the CLI calls: it validates the master, then hands the run
directories to a server of this checker version on that master -- starting one
if there is none, replacing one of another version or master -- and relays its
progress. With the server off (``use_server=False``: `--no-server`, or
ISRLAB_CHECKER_SERVER=0 as in CI), or if the server fails, the check runs in this
process, with the same results.

The server is for local masters only: on a shared cluster a warm server would
hold its executors idle for ten minutes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from checker import remote
from checker.errors import CheckerError
from checker.heartbeat import heartbeat
from checker.spark import check_master

START_TIMEOUT_S = 15.0  # for the server to listen (its Python start), not for Spark


class ServerUnavailable(Exception):
    """The server could not be started or reached, or failed: check in-process."""

    def __init__(self, message: str, failed: bool = False) -> None:
        super().__init__(message)
        self.failed = failed  # the server answered: the request itself failed there

    def said(self, doing: str) -> str:
        """The progress line (``doing``: "checking", "writing"): the server is not
        called unavailable when it answered -- a run moved away mid-check fails
        there, and this process says why."""
        if self.failed:
            return f"{doing} failed on the checker server ({self}); {doing} again in this process"
        return f"checker server unavailable ({self}); {doing} in this process"


def server_wanted(use_server: bool | None, master: str) -> bool:
    """Whether a check on ``master`` goes through the server."""
    if use_server is False:
        return False
    if os.environ.get("ISRLAB_CHECKER_SERVER", "").lower() in ("0", "off", "no", "false"):
        return False
    return master.startswith("local")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_info() -> dict[str, Any] | None:
    """The running server's state file, None if there is no live server."""
    try:
        info = json.loads(remote.info_path().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return None
    return info if _alive(info["pid"]) else None


@contextlib.contextmanager
def _connect(timeout: float | None) -> Iterator[tuple[Any, Any]]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(str(remote.socket_path()))
        yield s.makefile("rb"), s.makefile("wb")
    finally:
        s.close()


def _request(op: dict[str, Any], timeout: float = 10.0) -> dict[str, Any] | None:
    try:
        with _connect(timeout) as (rfile, wfile):
            remote.send(wfile, op)
            return remote.receive(rfile)
    except (OSError, ValueError):
        return None


def status() -> dict[str, Any] | None:
    """The live server's state (with ``current``: whether it is this checker's
    version), None if none runs. Asks the server; a server still starting Spark
    is described from its state file."""
    info = read_info()
    if info is None:
        return None
    if info.get("ready"):
        info = _request({"op": "status"}, timeout=5.0) or info
    info["current"] = info.get("version") == remote.checker_version()
    return info


def stop(timeout: float = 60.0) -> dict[str, Any] | None:
    """Stop the live server (asking it, then SIGTERM, then SIGKILL); return what
    it was, None if none ran."""
    info = read_info()
    if info is None:
        return None
    pid = info["pid"]
    if not info.get("ready") or _request({"op": "stop"}, timeout=5.0) is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 15)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it if this process started it
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    return info


@contextlib.contextmanager
def _start_lock() -> Iterator[None]:
    d = remote.state_dir()
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(d / "start.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_server(master: str) -> dict[str, Any]:
    """A live server of this version on ``master``: the running one, or a new one
    (replacing a stale one). ServerUnavailable if it does not come up."""
    with _start_lock():
        info = read_info()
        if info is not None:
            if info.get("version") == remote.checker_version() and info.get("master") == master:
                return info
            stop()
        log = open(remote.log_path(), "ab")  # noqa: SIM115 - handed to the daemon
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "checker.server", "--master", master],
                cwd=remote.ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,  # not in the terminal's process group: Ctrl-C spares it
            )
        finally:
            log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            info = read_info()
            if info is not None and info.get("pid") == proc.pid:
                threading.Thread(target=proc.wait, daemon=True).start()  # no zombie
                return info
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        raise ServerUnavailable(f"the checker server did not start (see {remote.log_path()})")


def prestart(master: str | None = None, use_server: bool | None = None) -> None:
    """Start the server in the background now (its JVM starts while a run's
    cluster works), if checks go through it, else this process's own Spark
    session on a local master (the check's get_session waits for it, and starts
    one itself if this failed); never fails the caller."""
    try:
        master = check_master(master)
    except CheckerError:
        return  # the check says so, later
    if server_wanted(use_server, master):
        def start() -> None:
            with contextlib.suppress(Exception):
                ensure_server(master)
    elif master.startswith("local"):
        def start() -> None:
            from checker.spark import get_session

            with contextlib.suppress(Exception):
                get_session(master)
    else:
        return  # a cluster's executors are not held while the run works

    threading.Thread(target=start, name="isrlab-checker-prestart", daemon=True).start()


def _on_server(master: str, req: dict[str, Any], say: Callable[[str], None]) -> dict[str, Any]:
    """Send ``req`` to the server (started if need be), pass its progress lines to
    ``say`` and return its answer; a checker error it reports is raised as such,
    ServerUnavailable when the server itself fails or goes away."""
    info = ensure_server(master)
    # The server serves one client at a time, after its Spark has started: a
    # request queued behind another's check hears nothing until its turn (it
    # answers `accepted` then), so say what it waits for.
    why = "busy with another check" if info.get("ready") else "starting Spark"
    try:
        with _connect(None) as (rfile, wfile), \
                heartbeat(say, f"waiting for the checker server ({why})") as accepted:
            remote.send(wfile, req)
            while True:
                msg = remote.receive(rfile)
                accepted.set()
                if msg is None:
                    raise ServerUnavailable("the checker server closed the connection")
                if msg.get("accepted"):
                    continue
                if "progress" not in msg:
                    break
                say(msg["progress"])
    except (OSError, ValueError) as e:
        raise ServerUnavailable(f"lost the checker server: {e}") from None
    if "error" in msg:
        if msg["error"].get("type") == "ServerFailure":
            raise ServerUnavailable(msg["error"]["message"], failed=True)
        raise remote.error_from_wire(msg["error"])
    return msg


def append_results(results: list[Any], table: Path, master: str | None = None,
                   progress: Callable[[str], None] | None = None,
                   use_server: bool | None = None) -> Path:
    """checker.results.write_results of a batch's results as the caller finally
    judged them (the scenario's figure assertions can turn a checker's valid into
    invalid), through the warm server where it applies."""
    say = progress or (lambda _m: None)
    master = check_master(master)
    say(f"appending results to {table}")
    if server_wanted(use_server, master):
        req = {"op": "append-results", "table": str(Path(table).resolve()),
               "results": [remote.result_to_wire(r) for r in results]}
        try:
            return Path(_on_server(master, req, say)["table"])
        except ServerUnavailable as e:
            say(e.said("writing"))
    from checker.results import write_results
    from checker.spark import get_session

    return write_results(get_session(master), results, Path(table))


def check(paths: list[Path], master: str | None = None,
          progress: Callable[[str], None] | None = None, prune: bool | None = None,
          use_server: bool | None = None) -> list[Any]:
    """checker.api.check_runs, through the warm server where it applies."""
    say = progress or (lambda _m: None)
    master = check_master(master)
    if server_wanted(use_server, master):
        req = {"op": "check", "paths": [str(Path(p).resolve()) for p in paths],
               "prune": prune}
        try:
            answer = _on_server(master, req, say)
            return [remote.result_from_wire(r) for r in answer["results"]]
        except ServerUnavailable as e:
            say(e.said("checking"))
    from checker.api import check_runs

    return check_runs(paths, master=master, progress=say, prune=prune)
