"""What a killed harness left on SSH hosts: `isrlab collect` and `isrlab ssh clean`.

Every run's directory on a host (`<workdir>/<run-id>/`, harness/backends/ssh.py)
holds `isrlab-run.json`: the run, its local run directory, the isrlab process
that owns it and its iptables chain. `clean_hosts` (`isrlab ssh clean`) stops
the nodes, deletes the chain and removes the directory of every run whose owner
is gone -- but keeps the directory (data and logs) of a run whose local run
directory still waits for `isrlab collect`, as `isrlab docker clean` keeps such
a run's volumes -- and deletes `ISRLAB-*` chains no run directory names.
`salvage_run`/`discard_run` are the backend's half of `isrlab collect`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from contract import CONTROLLER, LOGS, RUNNING
from contract.rundir import run_status
from harness.backends.artefacts import Salvage
from harness.backends.fanout import parallel
from harness.backends.hostsfile import Host, load_hosts
from harness.backends.owner import Liveness, Owner
from harness.backends.ssh_remote import Remote
from harness.backends.ssh_run import (
    CHAIN_PREFIX,
    HOSTS_RECORD,
    MARKER,
    iptables,
    kill_run,
    remove_chain_script,
)
from harness.errors import HarnessError, RunIncomplete, UsageError

# Remotes of runs salvaged by this process, for discard_run (same `isrlab collect`).
_SALVAGED: dict[str, list[tuple[Host, str]]] = {}


def _hosts_of_run(run_dir: Path, brokers: list[str]) -> tuple[dict[str, Host], str]:
    """node -> Host of a crashed run (from the hosts file its ssh-hosts.json names),
    and the run's chain."""
    try:
        record = json.loads((run_dir / HOSTS_RECORD).read_text())
        hosts_path = Path(record["hosts_file"])
        chain = str(record["chain"])
        where = record["nodes"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{run_dir / HOSTS_RECORD}: cannot tell where the run ran: {e}") from None
    hosts = load_hosts(hosts_path).assign(brokers)
    for node, h in hosts.items():
        was = where.get(node) or {}
        if (was.get("address"), was.get("port")) != (h.address, h.port):
            raise UsageError(f"{hosts_path}: {node} ran on {was.get('address')}:"
                             f"{was.get('port')}, the file now says {h.address}:{h.port}")
    return hosts, chain


def salvage_run(run_dir: Path, run_id: str, brokers: list[str]) -> Salvage:
    hosts, chain = _hosts_of_run(run_dir, brokers)
    groups: dict[str, list[str]] = {}
    for node, h in hosts.items():
        groups.setdefault(h.target, []).append(node)
    stopped: list[str] = []
    data_dirs: dict[str, Path | None] = {}
    salvaged: list[tuple[Host, str]] = []

    def one(nodes: list[str]) -> None:
        host = hosts[nodes[0]]
        rdir = f"{host.workdir}/{run_id}"
        remote = Remote(host).connect()
        try:
            stopped.extend(kill_run(remote, rdir))
            remote.run(remove_chain_script(host, chain))
            for n in nodes:
                remote.get_file(f"{rdir}/logs/{n}.log", run_dir / LOGS / f"{n}.log")
                if n != CONTROLLER:
                    dest = run_dir / "data" / n
                    data_dirs[n] = dest if remote.get_tree(f"{rdir}/data/{n}", dest) else (
                        dest if dest.is_dir() else None)
            salvaged.append((host, rdir))
        finally:
            remote.close()

    parallel(groups.values(), one)
    _SALVAGED[run_id] = salvaged
    return Salvage(sorted(stopped), data_dirs)


def discard_run(run_id: str) -> str | None:
    """Remove a salvaged run's directories from its hosts."""
    done = []
    for host, rdir in _SALVAGED.pop(run_id, []):
        remote = Remote(host).connect()
        try:
            remote.run(f"rm -rf {shlex.quote(rdir)}")
            done.append(host.name)
        finally:
            remote.close()
    return f"its directory on {', '.join(done)}" if done else None


@dataclass
class HostSweep:
    """What `clean_hosts` did on one host."""

    host: str
    removed: list[str] = field(default_factory=list)  # in words
    kept: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _list_runs(remote: Remote, workdir: str) -> list[tuple[str, dict[str, object]]]:
    _, out = remote.run(
        f"for m in {shlex.quote(workdir)}/*/{MARKER}; do [ -f \"$m\" ] || continue; "
        "printf '%s\\t' \"$m\"; tr -d '\\n' < \"$m\"; echo; done", check=False)
    runs = []
    for line in out.splitlines():
        path, _, text = line.partition("\t")
        try:
            marker = json.loads(text)
        except ValueError:
            marker = {}
        runs.append((path.rsplit("/", 1)[0], marker if isinstance(marker, dict) else {}))
    return runs


def _chains(remote: Remote, host: Host) -> set[str]:
    code, out = remote.run(f"{iptables(host)} -S 2>/dev/null", check=False)
    if code != 0:
        return set()
    return set(re.findall(rf"-N ({re.escape(CHAIN_PREFIX)}[0-9A-F]{{8}})\b", out))


def clean_host(host: Host, force: bool) -> HostSweep:
    sweep = HostSweep(host.name)
    remote = Remote(host).connect()
    try:
        runs = _list_runs(remote, host.workdir)
        live_chains = set()
        for rdir, marker in runs:
            run_id = str(marker.get("run_id") or rdir.rsplit("/", 1)[-1])
            owner = Owner.of_record(marker.get("owner"))
            liveness, why = (owner.liveness() if owner is not None
                             else (Liveness.GONE, "no owner recorded"))
            chain = str(marker.get("chain") or "")
            if liveness is not Liveness.GONE and not force:
                sweep.kept.append(f"run {run_id} ({why})")
                live_chains.add(chain)
                continue
            try:
                stopped = kill_run(remote, rdir)
                if chain.startswith(CHAIN_PREFIX):
                    remote.run(remove_chain_script(host, chain))
                local = Path(str(marker.get("run_dir") or ""))
                if not force and marker.get("run_dir") and run_status(local) == RUNNING:
                    sweep.kept.append(f"run {run_id}'s data, for `isrlab collect {local}`")
                    what = "its nodes stopped" if stopped else "nothing running"
                    sweep.removed.append(f"run {run_id}: {what}, rules removed")
                    continue
                remote.run(f"rm -rf {shlex.quote(rdir)}")
                sweep.removed.append(f"run {run_id}" + (f" ({', '.join(stopped)} stopped)"
                                                        if stopped else ""))
            except HarnessError as e:
                sweep.errors.append(f"run {run_id}: {e}")
        named = {str(m.get("chain")) for _, m in runs}
        for chain in sorted(_chains(remote, host) - named - live_chains):
            try:
                remote.run(remove_chain_script(host, chain))
                sweep.removed.append(f"iptables chain {chain} (no run directory names it)")
            except RunIncomplete as e:
                sweep.errors.append(str(e))
    finally:
        remote.close()
    return sweep


def clean_hosts(hosts_path: Path, force: bool = False) -> list[HostSweep]:
    """`isrlab ssh clean`: every host of the hosts file, in parallel. UsageError if
    a host cannot be reached."""
    hf = load_hosts(hosts_path)
    distinct: dict[str, Host] = {}
    for h in (hf.controller, *hf.brokers):
        distinct.setdefault(f"{h.target}{h.workdir}", h)
    return parallel(distinct.values(), lambda h: clean_host(h, force))
