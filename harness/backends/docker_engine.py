"""The Docker engine as isrlab reaches it: a checked client, the errors that say
why it cannot, and which isrlab container holds a host port (for the "address in
use" error of any backend).

The docker SDK is imported inside the functions that use it: it takes about a
second to import, and a run of the local backend needs it only once an address is
taken. Images are harness/backends/docker_image.py's.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from harness.backends.owner import Liveness, liveness_of
from harness.errors import HarnessError, UsageError, one_line

if TYPE_CHECKING:
    import docker.client

LABEL_RUN = "isrlab.run"  # every container, network and volume of a run: its run id


class DockerImageError(HarnessError):
    """A one-line, user-facing error; `exit_code` follows the CLI's exit statuses."""

    exit_code = 3

    def __init__(self, message: str) -> None:
        # Docker's messages often span lines; the CLI promises one line.
        super().__init__(one_line(message))


class DockerUnavailable(DockerImageError, UsageError):
    """No Docker engine answers: a configuration problem (exit 2), not a run failure."""

    exit_code = 2


def docker_client(timeout: float | None = None) -> docker.client.DockerClient:
    """A client for the engine in the environment (DOCKER_HOST or the local socket);
    `timeout` seconds per request (the SDK's default 60 if None)."""
    import docker.client  # heavy: see the module's docstring

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        kwargs = {} if timeout is None else {"timeout": timeout}
        client = docker.client.DockerClient.from_env(**kwargs)
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure here means "no engine"
        raise DockerUnavailable(f"no Docker engine reachable at {where}: {e}") from e
    return client


def port_holder(port: int, client: docker.client.DockerClient | None = None) -> str | None:
    """Which isrlab container publishes host port `port`, in words with what to do
    about it (for an "address in use" error); None if none does or no engine answers."""
    try:
        import docker.errors  # heavy: see the module's docstring
        import requests.exceptions
    except ImportError:
        return None
    own = client is None
    try:
        client = client or docker_client(timeout=5)
    except (DockerImageError, ImportError):
        return None
    try:
        for c in client.containers.list(filters={"label": LABEL_RUN}):
            ports = (c.attrs.get("NetworkSettings") or {}).get("Ports") or {}
            bound = {b.get("HostPort") for bs in ports.values() if bs for b in bs}
            if str(port) not in bound:
                continue
            run = c.labels.get(LABEL_RUN, "?")
            liveness, why = liveness_of(c.labels)
            if liveness is Liveness.GONE:
                return (f"container {c.name} of run {run} holds it and {why}: "
                        "`isrlab docker clean` removes it")
            if liveness is Liveness.ALIVE:
                return (f"container {c.name} of run {run} holds it and that run is still "
                        f"going ({why}): try another --port")
            return (f"container {c.name} of run {run} holds it ({why}): "
                    "`isrlab docker clean --force` removes it if that run is over, "
                    "or try another --port")
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return None
    finally:
        if own:
            client.close()
    return None
