"""Cluster backends, by name: `local` (subprocesses on 127.0.0.x), `docker`
(one container per node), `ssh` (processes on the hosts of a hosts file) and
`sim` (the whole cluster in this process on a virtual clock).
A new backend is one more entry in BACKENDS."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from harness.backends.base import Backend
from harness.backends.spec import ClusterSpec
from harness.errors import UsageError

# name -> "module:Class"; imported lazily so a backend's dependencies (the docker
# SDK) are only needed when that backend is used.
BACKENDS: dict[str, str] = {
    "local": "harness.backends.local:LocalBackend",
    "docker": "harness.backends.docker:DockerBackend",
    "ssh": "harness.backends.ssh:SshBackend",
    "sim": "harness.backends.sim:SimBackend",
}
# Backends no --backend offers: `external` (an existing Kafka cluster) is chosen by
# `isrlab chaos --target kafka`, which reads the cluster's metadata first.
HIDDEN: dict[str, str] = {
    "external": "harness.backends.kafka_target:ExternalBackend",
}


def make_backend(name: str, spec: ClusterSpec, run_dir: Path, **options: Any) -> Backend:
    return backend_class(name)(spec, run_dir, **options)


def backend_class(name: str) -> type[Backend]:
    """The Backend subclass called `name`; UsageError if there is none or it cannot
    be imported (the docker SDK missing)."""
    try:
        target = BACKENDS[name] if name in BACKENDS else HIDDEN[name]
    except KeyError:
        raise UsageError(
            f"unknown backend {name!r}; choose one of {', '.join(sorted(BACKENDS))}"
        ) from None
    module, _, cls = target.partition(":")
    try:
        backend_cls = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"backend {name!r} is not available: {e}") from None
    return backend_cls


__all__ = ["BACKENDS", "Backend", "ClusterSpec", "backend_class", "make_backend"]
