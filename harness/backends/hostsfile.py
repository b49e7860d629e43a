"""The SSH backend's hosts file: which host runs which node, and how to reach it.

Jepsen's `--nodes` in one YAML file (docs/ssh.md):

    defaults:                 # optional; every host inherits these
      user: root
      key: id_ed25519         # private key, relative to this file; none: agent + ~/.ssh
      known_hosts: known_hosts
    controller: {address: 10.0.0.10}
    brokers:                  # broker i of the scenario runs on brokers[i]
      - {address: 10.0.0.11}
      - {address: 10.0.0.12}
      - {address: 10.0.0.13}

Every mistake is a `FILE:LINE: what` error (exit 2), a misspelt key with the
nearest known one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from contract import CONTROLLER
from harness.errors import UsageError
from harness.validate import Validator
from harness.yamlloc import LocMap, load

# Every key a host (or `defaults`) may carry, with its default.
HOST_DEFAULTS: dict[str, Any] = {
    "name": None,  # how messages name the host; default: its address
    "address": None,  # IP or name: isrlab connects to it and the node listens on it
    "ssh_port": 22,
    "user": "root",
    "key": None,  # private key file; None: the SSH agent and ~/.ssh's default keys
    "password": None,  # only where no key can be used; prefer keys
    "sudo": False,  # run iptables through `sudo -n`
    "port": 9092,  # the node's TCP port on this host
    "python": "python3",
    "workdir": "/tmp/isrlab",  # each run's directory on the host goes under here
    "known_hosts": None,  # None: ~/.ssh/known_hosts
    "host_key_check": "strict",  # or accept-new: trust (and remember) an unknown host key
    "connect_timeout": 10.0,  # seconds to connect and authenticate
    "command_timeout": 30.0,  # seconds any one command on the host may take
}
TOP_KEYS = ("defaults", "controller", "brokers")
HOST_KEY_CHECKS = ("strict", "accept-new")
MIN_PYTHON = (3, 9)  # what the broker (stdlib only) needs; docs/ssh.md


@dataclass(frozen=True)
class Host:
    """One node's host, every field resolved (paths absolute)."""

    node: str  # the node it runs: CONTROLLER, a broker, or "brokers[i]" until assigned
    address: str
    name: str
    ssh_port: int
    user: str
    key: Path | None
    password: str | None
    sudo: bool
    port: int
    python: str
    workdir: str
    known_hosts: Path
    host_key_check: str
    connect_timeout: float
    command_timeout: float

    @property
    def target(self) -> str:
        """The SSH endpoint: one connection serves every node on it."""
        return f"{self.user}@{self.address}:{self.ssh_port}"

    def label(self) -> str:
        """How an error names the host: `host 10.0.0.11 (broker B)`."""
        what = ("controller" if self.node == CONTROLLER
                else self.node if self.node.startswith("brokers[") else f"broker {self.node}")
        return f"host {self.name} ({what})"


@dataclass(frozen=True)
class HostsFile:
    path: Path
    controller: Host
    brokers: list[Host]

    def assign(self, brokers: list[str]) -> dict[str, Host]:
        """node -> Host for a cluster of `brokers` (broker i on brokers[i]);
        UsageError if the file names fewer hosts than the cluster has brokers."""
        if len(brokers) > len(self.brokers):
            raise UsageError(f"{self.path}: the cluster has {len(brokers)} brokers "
                             f"({', '.join(brokers)}) but the hosts file names "
                             f"{len(self.brokers)}; add hosts under `brokers`")
        out = {CONTROLLER: self.controller}
        for b, host in zip(brokers, self.brokers, strict=False):
            out[b] = replace(host, node=b)
        return out


def host_fields(v: Validator, m: LocMap, what: str,
                keys: tuple[str, ...] = tuple(HOST_DEFAULTS)) -> dict[str, Any]:
    """The host keys of `m`, each checked; `keys` are those allowed (a target hosts
    file's entries add their own, which are left to its loader)."""
    v.keys(m, keys, what)
    out: dict[str, Any] = {}
    for k, raw in m.items():
        line = m.line_of(k)
        if k not in HOST_DEFAULTS:
            continue
        if k in ("ssh_port", "port"):
            n = v.integer(raw, line, f"{what}: {k}", minimum=1)
            if n > 65535:
                raise v.err(line, f"{what}: {k} must be a TCP port 1..65535, got {n}")
            out[k] = n
        elif k == "sudo":
            if not isinstance(raw, bool):
                raise v.err(line, f"{what}: sudo must be true or false, got {raw!r}")
            out[k] = raw
        elif k in ("connect_timeout", "command_timeout"):
            out[k] = v.seconds(raw, line, f"{what}: {k}")
        elif k == "host_key_check":
            if raw not in HOST_KEY_CHECKS:
                raise v.err(line, f"{what}: host_key_check must be one of "
                                  f"{', '.join(HOST_KEY_CHECKS)}, got {raw!r}")
            out[k] = raw
        elif k == "workdir":
            s = v.string(raw, line, f"{what}: workdir")
            if not s.startswith("/") or s.rstrip("/") in ("", "/tmp", "/home", "/root"):
                raise v.err(line, f"{what}: workdir must be an absolute directory of its "
                                  f"own (isrlab removes what it puts there), got {s!r}")
            out[k] = s.rstrip("/")
        else:
            out[k] = v.string(raw, line, f"{what}: {k}")
    return out


def resolve_host(path: Path, node: str, fields: dict[str, Any]) -> Host:
    """A Host of `fields` (every key of HOST_DEFAULTS), its paths relative to the
    hosts file `path`; UsageError for a `~user` nobody here is."""
    def rel(p: str | None) -> Path | None:
        if p is None:
            return None
        try:
            q = Path(p).expanduser()
        except RuntimeError:  # `~name/...` of a user this machine does not know
            raise UsageError(f"{p}: no such user's home directory here") from None
        return q if q.is_absolute() else (path.parent / q).resolve()

    known = rel(fields["known_hosts"]) or Path("~/.ssh/known_hosts").expanduser()
    return Host(
        node=node, address=fields["address"], name=fields["name"] or fields["address"],
        ssh_port=fields["ssh_port"], user=fields["user"], key=rel(fields["key"]),
        password=fields["password"], sudo=fields["sudo"], port=fields["port"],
        python=fields["python"], workdir=fields["workdir"], known_hosts=known,
        host_key_check=fields["host_key_check"],
        connect_timeout=fields["connect_timeout"], command_timeout=fields["command_timeout"],
    )


def load_hosts(path: Path) -> HostsFile:
    """Parse and validate a hosts file; ScenarioError (exit 2) with the line otherwise."""
    v = Validator(path)
    doc = load(path)
    top = v.mapping(doc, 1, "a hosts file")
    v.keys(top, TOP_KEYS, "a hosts file", required=("controller", "brokers"))
    defaults = dict(HOST_DEFAULTS)
    if "defaults" in top:
        dm = v.mapping(top["defaults"], top.line_of("defaults"), "defaults")
        d = host_fields(v, dm, "defaults")
        if "address" in d or "name" in d:
            raise v.err(dm.line, "defaults cannot set address or name (one per host)")
        defaults.update(d)

    def host(raw: Any, line: int, node: str, what: str) -> Host:
        m = v.mapping(raw, line, what)
        fields = {**defaults, **host_fields(v, m, what)}
        if fields["address"] is None:
            raise v.err(m.line, f"{what} has no address")
        try:
            return resolve_host(path, node, fields)
        except UsageError as e:
            raise v.err(m.line, f"{what}: {e}") from None

    controller = host(top["controller"], top.line_of("controller"), CONTROLLER, "controller")
    seq = v.seq(top["brokers"], top.line_of("brokers"), "brokers")
    if not seq:
        raise v.err(seq.line, "brokers is empty; name one host per broker")
    brokers = [host(raw, seq.line_of(i), f"brokers[{i}]", f"brokers[{i}]")
               for i, raw in enumerate(seq)]
    seen: dict[tuple[str, int], str] = {}
    for h, line in [(controller, top.line_of("controller")),
                    *((b, seq.line_of(i)) for i, b in enumerate(brokers))]:
        where = (h.address, h.port)
        if where in seen:
            raise v.err(line, f"{h.address}:{h.port} is also {seen[where]}'s; nodes on one "
                              f"host need ports of their own")
        seen[where] = "the controller" if h.node == CONTROLLER else h.node
        check_key(v, line, h)
    return HostsFile(path, controller, brokers)


def check_key(v: Validator, line: int, h: Host) -> None:
    """A `FILE:LINE` error if the host's key file does not exist."""
    # os.path's test: a name too long for a file is no file (pathlib's raises).
    if h.key is not None and not os.path.isfile(h.key):
        raise v.err(line, f"{h.label()}: key file {h.key} does not exist")
