"""Docker backend: the controller and each broker in a container of the broker image.

One user-defined network per run; on it every node has a short alias
(`controller`, `broker-a`, ...) that is also its listen/advertised address, so the
brokers reach each other by name. The harness reaches them through ports published
on 127.0.0.1 only (controller on `port`, broker i on `port + 1 + i`). Each node keeps
its data on a named volume, so a SIGKILL leaves its files exactly as written; a
container is reused across kill/start, so its `docker logs` hold every incarnation.

Faults: kill = SIGKILL to the container, pause/resume = the cgroup freezer
(`docker pause`), power-cycle = kill + `broker.storage.drop_unsynced` on the volume in
a one-off container, partitions = iptables DROP rules inside the containers (hence
NET_ADMIN). Everything carries the label `isrlab.run=<run-id>`, the run
directory's path (`isrlab.run_dir`) and the owner labels of this process
(harness.backends.owner), and teardown removes it all.

A killed harness leaves its containers running. `salvage` (`isrlab collect`) kills
them, saves their logs and copies each broker's volume into run_dir/data/<node>;
`discard` then removes the run's objects. `harness.backends.docker_image.sweep_leftovers()`
(`isrlab docker clean`) removes what a killed harness left once its owner is gone,
but keeps the volumes of a run whose directory still waits for `isrlab collect`.
"""

from __future__ import annotations

import atexit
import io
import json
import re
import shutil
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.client
import docker.errors
import docker.models.containers
import requests.exceptions

from broker.wire import parse_addr
from contract import CONTROLLER, LOGS
from harness.backends import reaper
from harness.backends.artefacts import Salvage
from harness.backends.base import Backend
from harness.backends.docker_engine import LABEL_RUN, DockerUnavailable, docker_client
from harness.backends.docker_image import (
    COLLECT_SUFFIX,
    LABEL_IMAGE,
    LABEL_NODE,
    POWER_CYCLE_SUFFIX,
    clean_leftovers,
    ensure_images,
    run_labels,
    tar_files,
)
from harness.backends.fanout import parallel
from harness.backends.net import Grudge
from harness.backends.nodes import DROP_UNSYNCED_PY, LOG_TAIL_LINES
from harness.backends.ports import address_in_use, check_port_range
from harness.backends.spec import ClusterSpec
from harness.errors import RunIncomplete, UsageError, one_line

Container = docker.models.containers.Container

NODE_PORT = 9092
CONFIG_DIR = "/etc/isrlab"
DATA_DIR = "/data"
STATE_TTL = 0.25  # seconds a cached container state is trusted by is_running()

# The container's entrypoint: apply this node's partition rules (put there before a
# (re)start, so a node restarted during a partition never talks to a peer it should
# not hear from), then become the broker process itself (PID 1 gets the signals).
_WRAPPER = (
    'if [ -s /etc/isrlab/net.sh ]; then sh -e /etc/isrlab/net.sh || exit 4; fi; '
    'exec python3 "$@"'
)
# Our own chain, so heal is one flush and nothing else in the container is touched.
_RULES_HEAD = (
    "iptables -w -N ISRLAB 2>/dev/null || iptables -w -F ISRLAB\n"
    "iptables -w -C INPUT -j ISRLAB 2>/dev/null || iptables -w -I INPUT -j ISRLAB\n"
)


def _name_part(s: str) -> str:
    """Docker object names allow [a-zA-Z0-9][a-zA-Z0-9_.-]*."""
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", s).strip("-.") or "x"


@dataclass
class _Node:
    container: Container
    host_port: int
    volume: str
    ip: str | None = None
    state: str = "created"  # docker's status: created, running, paused, exited, ...
    checked: float = 0.0
    rules_pending: bool = False  # partition rules to apply once unpaused


class DockerBackend(Backend):
    name = "docker"

    def __init__(
        self,
        spec: ClusterSpec,
        run_dir: Path,
        *,
        port: int = 29092,
        image: str | None = None,
        base_image: str | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        quiet: bool = False,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(spec, run_dir)
        # One host port per node: the controller on `port`, broker i on port + 1 + i;
        # then broker i's Kafka listener on port + nodes + i.
        check_port_range(self.name, port, len(self.nodes) + len(self.brokers))
        self.port = port
        self.image = image
        self.base_image = base_image
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.quiet = quiet
        self.progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
        self.run_id = run_dir.name
        self.labels = run_labels(self.run_id, run_dir=run_dir)
        self.prefix = f"isrlab-{_name_part(self.run_id)}"
        aliases = [self.alias(n) for n in self.nodes]
        if len(set(aliases)) != len(aliases):
            raise UsageError(f"broker names collide as host names: {', '.join(self.brokers)}")
        self._client: docker.client.DockerClient | None = None
        self._probe: docker.client.DockerClient | None = None  # other threads' client
        self._network: Any = None
        self._nodes: dict[str, _Node] = {}
        self._lock = threading.RLock()
        self._torn_down = False
        self._logs_saved = False
        atexit.register(self._atexit)

    # -- addresses ---------------------------------------------------------

    def alias(self, node: str) -> str:
        """The node's host name on the run's network."""
        return "controller" if node == CONTROLLER else f"broker-{_name_part(node).lower()}"

    def host_port(self, node: str) -> int:
        if node == CONTROLLER:
            return self.port
        try:
            return self.port + 1 + self.spec.brokers.index(node)
        except ValueError:
            raise UsageError(f"unknown node {node!r}") from None

    def address(self, node: str) -> str:
        return f"127.0.0.1:{self.host_port(node)}"

    def kafka_address(self, broker: str) -> str:
        """The host port published for the broker's Kafka listener (its container
        port NODE_PORT + 1), advertised to Kafka clients in Metadata."""
        return f"127.0.0.1:{self.port + len(self.nodes) + self.spec.brokers.index(broker)}"

    def listen_address(self, node: str) -> str:
        return f"{self.alias(node)}:{NODE_PORT}"

    def check_addresses(self) -> None:
        super().check_addresses()
        self._prepare()

    # -- set-up --------------------------------------------------------------

    def _prepare(self) -> docker.client.DockerClient:
        """Engine reachable and image present (built if missing): before anything exists,
        so these failures leave nothing behind."""
        if self._client is None:
            self._client = docker_client()
            self._probe = docker_client()
        if self.image is None:
            self.image = ensure_images(self.base_image, self.progress, self.quiet)
        return self._client

    def _ensure_network(self) -> Any:
        if self._network is not None:
            return self._network
        client = self._prepare()
        name = self.prefix
        # The engine's name filter matches substrings; compare exactly.
        if any(n.name == name for n in client.networks.list(names=[name])):
            raise UsageError(f"docker network {name} already exists (network clash)")
        try:
            with reaper.held():  # an interrupt waits for the engine's answer (reaper.held)
                self._network = client.networks.create(name, driver="bridge",
                                                       labels=self.labels)
        except docker.errors.APIError as e:
            raise UsageError(f"cannot create docker network {name}: {one_line(e)}") from e
        return self._network

    def _command(self, node: str) -> list[str]:
        common = [
            "--listen", self.listen_address(node),
            "--data-dir", DATA_DIR,
            "--config", f"{CONFIG_DIR}/cluster.json",
        ]
        if node == CONTROLLER:
            return ["-m", "broker.controller", *common]
        return [
            "-m", "broker.server", "--id", node, *common,
            "--controller", self.listen_address(CONTROLLER),
        ]

    def _create(self, node: str) -> _Node:
        client = self._prepare()
        net = self._ensure_network()
        config_path = self.run_dir / "cluster.json"
        if not config_path.exists():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.write_process_config(config_path)
        labels = {**self.labels, LABEL_NODE: node}
        volume = f"{self.prefix}-{_name_part(node)}-data"
        host_port = self.host_port(node)
        try:
            with reaper.held():  # (as the network's)
                client.volumes.create(volume, labels=labels)
                container = client.containers.create(
                    self.image,
                    self._command(node),
                    entrypoint=["sh", "-c", _WRAPPER, "isrlab-node"],
                    name=f"{self.prefix}-{_name_part(node)}",
                    hostname=self.alias(node),
                    labels=labels,
                    network=net.name,
                    networking_config={
                        net.name: client.api.create_endpoint_config(aliases=[self.alias(node)])
                    },
                    ports={f"{NODE_PORT}/tcp": ("127.0.0.1", host_port),
                           **({} if node == CONTROLLER else {
                               f"{NODE_PORT + 1}/tcp": parse_addr(self.kafka_address(node))})},
                    volumes={volume: {"bind": DATA_DIR, "mode": "rw"}},
                    cap_add=["NET_ADMIN"],  # iptables partitions inside the container
                    stop_signal="SIGTERM",
                )
                entry = _Node(container, host_port, volume)
                with self._lock:
                    self._nodes[node] = entry  # the teardown's, before any interrupt
                # Copied in, not bind-mounted: works with a remote engine too.
                container.put_archive(
                    "/", tar_files({"etc/isrlab/cluster.json": config_path.read_bytes()})
                )
        except docker.errors.APIError as e:
            raise RunIncomplete(f"cannot create the {node} container: {one_line(e)}") from e
        return entry

    # -- state (thread-safe) -------------------------------------------------

    def _state(self, node: str, fresh: bool = False) -> str:
        with self._lock:
            entry = self._nodes.get(node)
            if entry is None:
                return "absent"
            now = time.monotonic()
            # Only a live container can change state behind our back (a crash).
            if entry.state in ("running", "paused") and (fresh or now - entry.checked > STATE_TTL):
                if self._probe is None:  # torn down
                    return entry.state
                try:
                    attrs = self._probe.api.inspect_container(entry.container.id)
                    entry.state = attrs["State"]["Status"]
                except docker.errors.NotFound:
                    entry.state = "absent"
                except (docker.errors.APIError, requests.exceptions.RequestException):
                    pass  # keep the last known state; the engine hiccupped
                entry.checked = now
            return entry.state

    def _set_state(self, node: str, state: str) -> None:
        with self._lock:
            entry = self._nodes[node]
            entry.state = state
            entry.checked = time.monotonic()

    def is_running(self, node: str) -> bool:
        return self._state(node) in ("running", "paused")

    def is_paused(self, node: str) -> bool:
        return self._state(node) == "paused"

    def container(self, node: str) -> Container | None:
        entry = self._nodes.get(node)
        return entry.container if entry else None

    # -- lifecycle ---------------------------------------------------------

    def start_controller(self) -> None:
        self._start(CONTROLLER)

    def start(self, node: str) -> None:
        self.host_port(node)  # validates the name
        self._start(node)

    def _start(self, node: str) -> None:
        entry = self._nodes.get(node) or self._create(node)
        if self._state(node, fresh=True) in ("running", "paused"):
            self.wait_exited(node, self.stop_timeout)
        self._put_rules(node)
        try:
            entry.container.start()
        except docker.errors.APIError as e:
            msg = one_line(e)
            if "allocated" in msg or "address already in use" in msg:
                raise address_in_use(self.address(node), node) from e
            raise RunIncomplete(f"cannot start {node}: {msg}") from e
        self._set_state(node, "running")
        self._refresh_ip(node)
        self.wait_ready(node)
        self.net.reapply_delays(node)  # a delay outlives a restart

    # -- what the readiness wait (Nodes.wait_ready) asks -----------------------

    def has_exited(self, node: str) -> bool:
        return self._state(node, fresh=True) not in ("running", "paused")

    def exit_status(self, node: str) -> int | None:
        try:
            return self._nodes[node].container.wait(timeout=5)["StatusCode"]
        except Exception:  # noqa: BLE001 - only used to word an error message
            return None

    def log_tail(self, node: str) -> str:
        try:
            raw = self._nodes[node].container.logs(tail=LOG_TAIL_LINES)
        except docker.errors.APIError:
            return ""
        return raw.decode(errors="replace").rstrip("\n")

    def log_name(self, node: str) -> str:
        return "its container log"

    def node_log(self, node: str) -> str | None:
        # From the events collector's thread: the probe client, as _state does.
        with self._lock:
            entry = self._nodes.get(node)
            if entry is None or self._probe is None:
                return None
            try:
                raw = self._probe.api.logs(entry.container.id, stdout=True, stderr=True)
            except (docker.errors.APIError, requests.exceptions.RequestException):
                return None
        return raw.decode(errors="replace")

    def _running_entry(self, node: str, what: str) -> _Node:
        state = self._state(node, fresh=True)
        if state not in ("running", "paused"):
            raise RunIncomplete(f"cannot {what} {node}: it is not running ({state})")
        return self._nodes[node]

    def _signal_and_wait(self, node: str, sig: str, timeout: float) -> int | None:
        """Send `sig` to the container's PID 1 and wait for it to exit."""
        entry = self._nodes[node]
        if sig != "SIGKILL" and self._state(node, fresh=True) == "paused":
            # A frozen process cannot act on SIGTERM; thaw it first. Never for SIGKILL:
            # docker kills a frozen container as it is, and a thaw first would let the
            # process answer requests queued while it was paused (a "paused" leader
            # handing records to a follower just before it dies).
            entry.container.unpause()
        try:
            entry.container.kill(signal=sig)
        except docker.errors.APIError as e:
            if self._state(node, fresh=True) in ("running", "paused"):
                raise RunIncomplete(f"cannot send {sig} to {node}: {one_line(e)}") from e
        try:
            code = entry.container.wait(timeout=timeout)["StatusCode"]
        except (requests.exceptions.RequestException, docker.errors.APIError):
            code = None
        if code is None:
            entry.container.kill(signal="SIGKILL")
            entry.container.wait(timeout=30)
        self._set_state(node, "exited")
        return code

    def stop(self, node: str) -> int | None:
        self._running_entry(node, "stop")
        code = self._signal_and_wait(node, "SIGTERM", self.stop_timeout)
        if code is None:
            raise RunIncomplete(
                f"{node} did not shut down within {self.stop_timeout:.0f}s of SIGTERM"
            )
        return code

    def kill(self, node: str) -> None:
        self._running_entry(node, "kill")
        self._signal_and_wait(node, "SIGKILL", 30)

    def pause(self, node: str) -> None:
        entry = self._running_entry(node, "pause")
        entry.container.pause()
        self._set_state(node, "paused")

    def resume(self, node: str) -> None:
        entry = self._running_entry(node, "resume")
        entry.container.unpause()
        self._set_state(node, "running")
        if entry.rules_pending:
            self._apply_rules(node)

    def power_cycle(self, node: str) -> None:
        self.kill(node)
        self.drop_unsynced(node)

    def drop_unsynced(self, node: str) -> dict[str, int]:
        """Run broker.storage.drop_unsynced on the node's volume, in a one-off container
        (the broker owns its file format; the volume may not be readable from here)."""
        client = self._prepare()
        entry = self._nodes[node]
        box = client.containers.create(
            self.image,
            ["-c", DROP_UNSYNCED_PY, DATA_DIR],
            labels={**self.labels, LABEL_NODE: f"{node}{POWER_CYCLE_SUFFIX}"},
            volumes={entry.volume: {"bind": DATA_DIR, "mode": "rw"}},
            network_mode="none",
        )
        try:
            box.start()
            code = box.wait(timeout=60)["StatusCode"]
            out = box.logs(stdout=True, stderr=True).decode(errors="replace").strip()
        finally:
            box.remove(force=True)
        if code != 0:
            raise RunIncomplete(f"power-cycle of {node}: drop_unsynced failed: {out[-300:]}")
        return json.loads(out.splitlines()[-1]) if out else {}

    # -- network faults ------------------------------------------------------

    def firewall(self) -> Callable[[Grudge], None]:
        return lambda _grudge: self._sync_all_rules()  # the rules read self.net.grudge

    def _rules(self, node: str) -> str:
        """The node's whole rule set: drop everything from the peers it must not hear."""
        lines = [_RULES_HEAD]
        for peer in self.net.grudge.get(node, []):
            entry = self._nodes.get(peer)
            if entry is not None and entry.ip:
                lines.append(f"iptables -w -A ISRLAB -s {entry.ip} -j DROP\n")
        return "".join(lines)

    def _put_rules(self, node: str) -> None:
        """Leave the rules where the entrypoint applies them at the next start."""
        script = self._rules(node) if self.net.grudge else ""
        self._nodes[node].container.put_archive(
            "/", tar_files({"etc/isrlab/net.sh": script.encode()})
        )

    def _apply_rules(self, node: str) -> None:
        entry = self._nodes[node]
        result = entry.container.exec_run(["sh", "-e", "-c", self._rules(node)])
        if result.exit_code != 0:
            raise RunIncomplete(
                f"iptables in {node} failed: {one_line(result.output.decode(errors='replace'))}"
            )
        entry.rules_pending = False

    def _sync_all_rules(self) -> None:
        """The grudge on every node, applied on all running nodes at once: one after
        another (an engine call each, up to a second or more under load) the cluster
        sat half-cut long enough for the controller to end the sessions it had
        stopped hearing and elect a leader the finished partition would not have
        (kip320-stale-metadata-divergence's x acknowledged by B)."""
        nodes = list(self._nodes)
        states = {n: self._state(n, fresh=True) for n in nodes}  # (one lock: serial anyway)
        parallel([n for n in nodes if states[n] == "running"], self._apply_rules)
        for node in nodes:
            if states[node] == "paused":
                self._nodes[node].rules_pending = True  # no exec into a frozen container
        # Where a (re)start applies them; not in the window above.
        parallel(nodes, self._put_rules)

    def _refresh_ip(self, node: str) -> None:
        entry = self._nodes[node]
        entry.container.reload()
        nets = entry.container.attrs["NetworkSettings"]["Networks"]
        ip = (nets.get(self._network.name) or {}).get("IPAddress") or None
        changed = ip != entry.ip
        entry.ip = ip
        # Peers' rules name this node by address; a restart may have moved it.
        if changed and self.net.grudge:
            self._sync_all_rules()

    # -- observation -------------------------------------------------------

    def data_dir(self, node: str) -> Path | None:
        """A copy of the node's volume under run_dir/data/<node>, taken now."""
        entry = self._nodes.get(node)
        if entry is None:
            return None
        return _copy_data(entry.container, _data_copy(self.run_dir, node))

    def collect_logs(self, run_dir: Path) -> None:
        """Each container's log (every incarnation) into run_dir/logs/<node>.log.

        Teardown calls this before it removes the containers; a later call finds
        nothing left and keeps what was saved."""
        logs = run_dir / LOGS
        for node, entry in list(self._nodes.items()):
            try:
                raw = entry.container.logs(stdout=True, stderr=True)
            except docker.errors.APIError:
                continue
            logs.mkdir(parents=True, exist_ok=True)
            (logs / f"{node}.log").write_bytes(raw)

    def teardown(self) -> None:
        if self._torn_down:
            return
        try:
            if self._client is not None:
                # Brokers first (their controlled shutdown still finds the controller).
                brokers = [n for n in self._nodes if n != CONTROLLER]
                for group in (brokers, [n for n in self._nodes if n == CONTROLLER]):
                    self._stop_group(group)
                try:
                    self.collect_logs(self.run_dir)
                except OSError as e:
                    print(f"isrlab: docker logs not saved: {e}", file=sys.stderr)
        finally:
            self._remove_all()

    def _stop_group(self, nodes: list[str]) -> None:
        live = []
        for node in nodes:
            entry = self._nodes[node]
            try:
                if self._state(node, fresh=True) == "paused":
                    entry.container.unpause()
                if self._state(node, fresh=True) == "running":
                    entry.container.kill(signal="SIGTERM")
                    live.append(node)
            except docker.errors.APIError:
                pass
        deadline = time.monotonic() + 5.0
        for node in live:
            try:
                self._nodes[node].container.wait(timeout=max(0.1, deadline - time.monotonic()))
            except (requests.exceptions.RequestException, docker.errors.APIError):
                pass  # removal below forces it

    def _remove_all(self) -> None:
        if self._client is None and not self._nodes and self._network is None:
            self._torn_down = True  # nothing was ever created
            return
        try:
            client = self._client or docker_client()
            clean_leftovers(run_id=self.run_id, client=client)
        except DockerUnavailable:
            if self._nodes or self._network is not None:
                print(f"isrlab: could not remove the containers of run {self.run_id}; "
                      "run `isrlab docker clean`", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - teardown must not mask the run's error
            print(f"isrlab: docker teardown of run {self.run_id} incomplete: {e}; "
                  "run `isrlab docker clean`", file=sys.stderr)
        else:
            self._torn_down = True
        finally:
            for c in (self._client, self._probe):
                if c is not None:
                    c.close()
            self._client = self._probe = None
            with self._lock:
                for entry in self._nodes.values():
                    entry.state = "absent"

    # -- a run whose harness died --------------------------------------------

    @classmethod
    def salvage(cls, run_dir: Path, run_id: str, brokers: list[str]) -> Salvage:
        client = docker_client()
        try:
            return _salvage(client, run_dir, run_id, brokers)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            raise RunIncomplete(f"cannot collect docker run {run_id}: {one_line(e)}") from e
        finally:
            client.close()

    @classmethod
    def discard(cls, run_id: str) -> str | None:
        removed = clean_leftovers(run_id=run_id)
        return ", ".join(f"{n} {kind if n != 1 else kind[:-1]}"
                         for kind, n in removed.items() if n) or None

    def _atexit(self) -> None:
        # A harness that exits without reaching teardown (an exception in a thread,
        # sys.exit mid-run) still removes its containers.
        if not self._torn_down and (self._nodes or self._network is not None):
            self._remove_all()


def _data_copy(run_dir: Path, node: str) -> Path:
    """Where the harness keeps its copy of `node`'s volume."""
    return run_dir / "data" / node


def _copy_data(container: Container, dest: Path) -> Path | None:
    """Copy what `container` has at DATA_DIR (its volume) into dest, replacing what
    was there; None if the engine refuses."""
    try:
        chunks, _ = container.get_archive(f"{DATA_DIR}/.")
        blob = b"".join(chunks)
    except docker.errors.APIError:
        return None
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        if hasattr(tarfile, "data_filter"):  # 3.11.4+: refuse paths escaping dest
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)  # noqa: S202 - our own container's volume
    return dest


def _salvage(client: docker.client.DockerClient, run_dir: Path, run_id: str,
             brokers: list[str]) -> Salvage:
    filters = {"label": f"{LABEL_RUN}={run_id}"}
    nodes = [CONTROLLER, *brokers]
    containers = {c.labels.get(LABEL_NODE): c
                  for c in client.containers.list(all=True, filters=filters)}
    stopped = []
    for node in nodes:
        c = containers.get(node)
        if c is None or c.status not in ("running", "paused", "restarting"):
            continue
        try:
            c.kill(signal="SIGKILL")  # as it is: a frozen one too, where the engine can
        except docker.errors.APIError:
            c.unpause()  # older engines kill no paused container
            c.kill(signal="SIGKILL")
        c.wait(timeout=30)
        stopped.append(f"{'controller' if node == CONTROLLER else 'broker ' + node} "
                       f"(container {c.name})")
    logs = run_dir / LOGS
    for node in nodes:
        if node in containers:
            logs.mkdir(parents=True, exist_ok=True)
            (logs / f"{node}.log").write_bytes(containers[node].logs(stdout=True, stderr=True))
    volumes = {(v.attrs.get("Labels") or {}).get(LABEL_NODE): v.name
               for v in client.volumes.list(filters=filters)}
    data_dirs: dict[str, Path | None] = {}
    for node in brokers:
        dest = _data_copy(run_dir, node)
        if volumes.get(node) is None:
            # Never started, or its volume was removed: a copy taken earlier, if any.
            data_dirs[node] = dest if dest.is_dir() else None
        elif node in containers:  # the node's container mounts its volume at DATA_DIR
            data_dirs[node] = _copy_data(containers[node], dest)
        else:  # removed by `docker clean`: a throwaway container mounts the volume
            box = client.containers.create(
                _any_image(client, containers), ["-c", "pass"],
                labels={**run_labels(run_id, run_dir=run_dir),
                        LABEL_NODE: f"{node}{COLLECT_SUFFIX}"},
                volumes={volumes[node]: {"bind": DATA_DIR, "mode": "ro"}},
                network_mode="none",
            )
            try:
                data_dirs[node] = _copy_data(box, dest)
            finally:
                box.remove(force=True)
    return Salvage(stopped, data_dirs)


def _any_image(client: docker.client.DockerClient, containers: dict[Any, Container]) -> str:
    """An image to create a never-started container from: the run's own, else any
    isrlab image here, else the broker image (built if missing)."""
    for c in containers.values():
        return c.attrs.get("Image") or c.image.id
    for image in client.images.list(filters={"label": LABEL_IMAGE}):
        return image.id
    return ensure_images(quiet=True)
