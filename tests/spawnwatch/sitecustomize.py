"""Loaded by every Python process a test starts (tests/tiers.py puts this directory
on PYTHONPATH): records the processes it starts and the Docker engine / checker
server sockets it opens into the current test's spawn log, so a test is judged by
what its children did too. A no-op outside the test suite."""

import os
import sys

_LOG = os.environ.get("ISRLAB_TEST_SPAWN_LOG")


def spawn_line(event: str, args: tuple, on_docker: bool = True) -> str | None:
    """The spawn-log line of an audit event (None: not one to log); tests/tiers.py
    logs the test process's own with it. A child not on the Docker backend (nor
    `isrlab docker ...`) does not count its engine calls: a local run that names a
    port's holder asks the engine and starts nothing."""
    if event == "subprocess.Popen":
        return ("exec " + " ".join(map(str, args[1] or [args[0]]))).replace("\n", " ")
    if event == "socket.connect" and isinstance(args[1], str):
        if args[1].endswith("docker.sock") and not on_docker:
            return None
        return "connect " + args[1].replace("\n", " ")
    return None


def _watch(log: str) -> None:
    on_docker = any("docker" in a for a in sys.argv)

    def hook(event: str, args: tuple) -> None:
        try:
            line = spawn_line(event, args, on_docker)
            if line is not None:
                with open(log, "a") as f:
                    f.write(line + "\n")
        except Exception:  # noqa: BLE001 - never break the process being watched
            pass

    sys.addaudithook(hook)


if _LOG and __name__ == "sitecustomize":  # not when tests/tiers.py loads it by path
    _watch(_LOG)
