"""SSH hosts on one machine, for trying the SSH backend: `isrlab ssh hosts up/down`.

`hosts_up(n)` starts n+1 containers (a controller host and n broker hosts) of the
sshd image (docker/Dockerfile.sshhost, on the offline base) on a Docker network of
their own, and writes a hosts file with a fresh ed25519 key and the hosts' own host
keys (known_hosts), so the backend connects with strict host-key checking. The
containers are labelled like the Docker backend's (owner labels) plus
`isrlab.sshhosts=<set id>`; `hosts_down(file)` removes the ones the file names.
They carry no `isrlab.run` label: they outlive runs, and `isrlab docker clean`
leaves them alone. NET_ADMIN lets the backend's iptables rules work inside.
"""

from __future__ import annotations

import hashlib
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path

import docker.errors
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.backends.docker_image import (
    DOCKER_DIR,
    LABEL_NODE,
    ImageBuildError,
    base_ref_for,
    build_image,
    build_lock,
    docker_client,
    eprint,
    image_id,
    tar_files,
)
from harness.backends.hostsfile import load_hosts
from harness.backends.owner import Owner
from harness.errors import RunIncomplete, UsageError, one_line

LABEL_SSHHOSTS = "isrlab.sshhosts"
SSHHOST_REPO = "isrlab-sshhost"
DOCKERFILE = DOCKER_DIR / "Dockerfile.sshhost"
READY_TIMEOUT = 30.0
# The hosts' second login user (docker/Dockerfile.sshhost): not root, may run only
# iptables through `sudo -n` -- for `user: isrlab` + `sudo: true` in the hosts file.
SUDO_USER = "isrlab"
SUDO_USER_ID = 1000

Progress = Callable[[str], None]


def ensure_sshhost_image(client: docker.client.DockerClient, base_image: str | None = None,
                         progress: Progress = eprint, quiet: bool = False) -> str:
    """The sshd host image's tag (Dockerfile hash + base image id), built if missing."""
    with build_lock():
        base_ref = base_ref_for(client, base_image, progress, quiet)
        base_id = image_id(client, base_ref)
        if base_id is None:
            raise ImageBuildError(f"base image {base_ref} is missing")
        dockerfile = DOCKERFILE.read_bytes()
        tag = f"{SSHHOST_REPO}:{hashlib.sha256(base_id.encode() + dockerfile).hexdigest()[:12]}"
        if image_id(client, tag) is None:
            if not quiet:
                progress(f"[sshhost] building {tag} on {base_ref}")
            build_image(client, [("Dockerfile", dockerfile)], tag, base_ref, "sshhost",
                        progress, quiet)
    return tag


def _keypair() -> tuple[bytes, str]:
    """(private key in OpenSSH format, public key line)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return private, f"{public} isrlab-ssh-hosts\n"


def _wait_sshd(container: docker.models.containers.Container, ip: str) -> str:
    """Wait until sshd answers on ip:22; the host's ed25519 public key ("type base64")."""
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            with socket.create_connection((ip, 22), timeout=1) as s:
                if s.recv(4).startswith(b"SSH-"):
                    break
        except OSError:
            pass
        container.reload()
        if container.status != "running" or time.monotonic() > deadline:
            logs = container.logs(tail=5).decode(errors="replace")
            raise RunIncomplete(f"sshd in {container.name} did not come up: {one_line(logs)}")
        time.sleep(0.1)
    code, out = container.exec_run(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"])
    if code != 0:
        raise RunIncomplete(f"no host key in {container.name}: {one_line(out.decode())}")
    return " ".join(out.decode().split()[:2])


def hosts_up(n: int, out: Path, *, base_image: str | None = None,
             progress: Progress = eprint, quiet: bool = False) -> Path:
    """Start n broker hosts and a controller host; write the hosts file `out`, its key
    (`out` + .key) and known_hosts (`out` + .known_hosts). Returns `out`."""
    if n < 1:
        raise UsageError(f"need at least one broker host, got {n}")
    client = docker_client()
    set_id = secrets.token_hex(4)
    prefix = f"{SSHHOST_REPO}-{set_id}"
    labels = {LABEL_SSHHOSTS: set_id, **Owner.this_process().labels()}
    try:
        image = ensure_sshhost_image(client, base_image, progress, quiet)
        private, public = _keypair()
        network = client.networks.create(prefix, driver="bridge", labels=labels)
        names = ["controller", *(f"broker-{i}" for i in range(n))]
        hosts: list[tuple[str, str, str]] = []  # (container name, ip, host key)
        containers = []
        for name in names:
            c = client.containers.create(
                image, name=f"{prefix}-{name}", hostname=name, network=network.name,
                labels={**labels, LABEL_NODE: name}, cap_add=["NET_ADMIN"])
            c.put_archive("/root/.ssh", tar_files({"authorized_keys": public.encode()}, 0o600))
            c.put_archive("/home/isrlab/.ssh", tar_files({"authorized_keys": public.encode()},
                                                         0o600, owner=SUDO_USER_ID))
            c.start()
            containers.append(c)
        for c in containers:
            c.reload()
            ip = c.attrs["NetworkSettings"]["Networks"][network.name]["IPAddress"]
            hosts.append((c.name, ip, _wait_sshd(c, ip)))
    except BaseException:
        _remove_set(client, set_id)
        client.close()
        raise
    client.close()
    key_path = Path(f"{out}.key")
    known_path = Path(f"{out}.known_hosts")
    out.parent.mkdir(parents=True, exist_ok=True)
    key_path.write_bytes(private)
    key_path.chmod(0o600)
    known_path.write_text("".join(f"{ip} {hk}\n" for _, ip, hk in hosts))
    lines = [
        f"# `isrlab ssh hosts up {n}`: {n + 1} sshd containers on docker network {prefix}.",
        f"# Remove them with: isrlab ssh hosts down --hosts {out}",
        f"# Every host also has `user: {SUDO_USER}` (same key), which runs only iptables as "
        "root: with `sudo: true`.",
        "defaults:",
        "  user: root",
        f"  key: {key_path.name}",
        f"  known_hosts: {known_path.name}",
        f"controller: {{name: {hosts[0][0]}, address: {hosts[0][1]}}}",
        "brokers:",
        *(f"  - {{name: {name}, address: {ip}}}" for name, ip, _ in hosts[1:]),
    ]
    out.write_text("\n".join(lines) + "\n")
    return out


def _remove_set(client: docker.client.DockerClient, set_id: str,
                names: set[str] | None = None) -> list[str]:
    """Remove the containers of set `set_id` (those named in `names`, if given) and,
    once empty, its network; the removed containers' names."""
    removed = []
    for c in client.containers.list(all=True, filters={"label": f"{LABEL_SSHHOSTS}={set_id}"}):
        if names is None or c.name in names:
            c.remove(force=True)
            removed.append(c.name)
    if not client.containers.list(all=True, filters={"label": f"{LABEL_SSHHOSTS}={set_id}"}):
        for net in client.networks.list(filters={"label": f"{LABEL_SSHHOSTS}={set_id}"}):
            try:
                net.remove()
            except docker.errors.APIError:
                pass
    return removed


def hosts_down(path: Path) -> list[str]:
    """Remove the containers (and then their networks) the hosts file names; the
    removed containers' names."""
    hf = load_hosts(path)
    names = {h.name for h in (hf.controller, *hf.brokers)}
    client = docker_client()
    try:
        sets = {c.labels[LABEL_SSHHOSTS]
                for c in client.containers.list(all=True, filters={"label": LABEL_SSHHOSTS})
                if c.name in names}
        if not sets:
            raise UsageError(f"{path}: none of its hosts is a container of `isrlab ssh hosts up`")
        removed = []
        for set_id in sorted(sets):
            removed += _remove_set(client, set_id, names)
        return removed
    finally:
        client.close()
