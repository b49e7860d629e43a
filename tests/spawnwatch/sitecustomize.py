"""Loaded by every Python process a test starts (tests/tiers.py puts this directory
on PYTHONPATH): records the processes it starts and the Docker engine / checker
server sockets it opens into the current test's spawn log, so a test is judged by
what its children did too. A no-op outside the test suite."""

import os
import sys

_LOG = os.environ.get("ISRLAB_TEST_SPAWN_LOG")


# A child on the Docker backend (or `isrlab docker ...`) counts its engine calls.
_on_docker = any("docker" in a for a in sys.argv)


def _watch(log: str) -> None:
    # Hook and line format shared with tests/tiers.py, which is not importable here.
    def hook(event: str, args: tuple) -> None:
        try:
            if event == "subprocess.Popen":
                line = "exec " + " ".join(map(str, args[1] or [args[0]]))
            elif event == "socket.connect" and isinstance(args[1], str):
                if args[1].endswith("docker.sock") and not _on_docker:
                    return  # a local run naming a port's holder asks Docker, starts nothing
                line = "connect " + args[1]
            else:
                return
            with open(log, "a") as f:
                f.write(line.replace("\n", " ") + "\n")
        except Exception:  # noqa: BLE001 - never break the process being watched
            pass

    sys.addaudithook(hook)


if _LOG:
    _watch(_LOG)
