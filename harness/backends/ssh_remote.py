"""One SSH connection to one host (paramiko), with a deadline on everything.

`Remote.connect` turns what can go wrong before a run into a one-line UsageError
naming the host (unreachable, refused key, unknown or changed host key); once a
run is going, a failed or overdue command is RunIncomplete. Every command runs
under a timeout, so one slow host never hangs the run. A Remote is shared by the
harness's threads: paramiko opens one channel per command on a single transport.
"""

from __future__ import annotations

import shlex
import socket
import stat
import threading
import time
from pathlib import Path

import paramiko

from harness.backends.hostsfile import Host
from harness.errors import RunIncomplete, UsageError, one_line

_KNOWN_HOSTS_LOCK = threading.Lock()


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """`host_key_check: accept-new` (OpenSSH's StrictHostKeyChecking=accept-new):
    trust a host seen for the first time and append its key to known_hosts; a key
    that changed is still refused (paramiko raises BadHostKeyException)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        with _KNOWN_HOSTS_LOCK:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


class Remote:
    """A connected host. `run` executes a shell command there."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._client: paramiko.SSHClient | None = None
        self._sftp_lock = threading.Lock()

    # -- connection -----------------------------------------------------------

    def connect(self) -> Remote:
        h = self.host
        client = paramiko.SSHClient()
        if h.known_hosts.is_file():
            try:
                client.load_host_keys(str(h.known_hosts))
            except (OSError, paramiko.SSHException) as e:
                raise UsageError(f"{h.label()}: cannot read known_hosts {h.known_hosts}: "
                                 f"{one_line(e)}") from None
        client.set_missing_host_key_policy(
            _AcceptNew(h.known_hosts) if h.host_key_check == "accept-new"
            else paramiko.RejectPolicy())
        where = f"{h.address}:{h.ssh_port}"
        try:
            sock = socket.create_connection((h.address, h.ssh_port), timeout=h.connect_timeout)
            # Without it every command waits out Nagle against the server's delayed ACK
            # (~40 ms a round trip instead of ~5 on a LAN).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.connect(
                h.address, port=h.ssh_port, username=h.user, sock=sock,
                key_filename=str(h.key) if h.key else None, password=h.password,
                allow_agent=h.key is None, look_for_keys=h.key is None,
                timeout=h.connect_timeout, banner_timeout=h.connect_timeout,
                auth_timeout=h.connect_timeout, channel_timeout=h.connect_timeout,
            )
        except paramiko.BadHostKeyException:
            client.close()
            raise UsageError(f"{h.label()}: the host key of {where} is not the one in "
                             f"{h.known_hosts} (the host was replaced, or this is not "
                             f"it); remove the old key if you trust the new one") from None
        except paramiko.AuthenticationException as e:
            client.close()
            how = f"key {h.key}" if h.key else "the SSH agent and ~/.ssh keys"
            raise UsageError(f"{h.label()}: {h.user}@{where} refused {how}: "
                             f"{one_line(e)}") from None
        except paramiko.SSHException as e:
            client.close()
            if "known_hosts" in str(e) or "not found in" in str(e):
                raise UsageError(
                    f"{h.label()}: host key of {where} is not in {h.known_hosts}; add it "
                    f"(ssh-keyscan -p {h.ssh_port} {h.address} >> {h.known_hosts}) or set "
                    f"host_key_check: accept-new") from None
            raise UsageError(f"{h.label()}: SSH to {where} failed: {one_line(e)}") from None
        except (OSError, EOFError) as e:  # refused, unreachable, timed out, DNS
            client.close()
            reason = "timed out" if isinstance(e, (socket.timeout, TimeoutError)) else one_line(e)
            raise UsageError(f"{h.label()}: cannot reach {where}: {reason}") from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(5)  # a dead host shows as a failed command, not a hang
        self._client = client
        return self

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def connected(self) -> bool:
        t = self._client.get_transport() if self._client else None
        return t is not None and t.is_active()

    # -- commands ---------------------------------------------------------------

    def run(self, command: str, timeout: float | None = None,
            check: bool = True) -> tuple[int, str]:
        """Run `command` (sh) on the host; (exit status, stdout + stderr). Raises
        RunIncomplete if it takes longer than `timeout` (the host's
        command_timeout by default), the connection is gone, or -- with `check` --
        it exits non-zero."""
        h = self.host
        limit = h.command_timeout if timeout is None else timeout
        if self._client is None or not self.connected:
            raise RunIncomplete(f"{h.label()}: not connected")
        try:
            transport = self._client.get_transport()
            assert transport is not None
            chan = transport.open_session(timeout=limit)
            chan.set_combine_stderr(True)
            chan.settimeout(limit)
            chan.exec_command(command)
            chan.shutdown_write()
            out = bytearray()
            deadline = time.monotonic() + limit
            while True:
                # The exit status comes after all output on the channel; wake on
                # it or on data, whichever comes first.
                while chan.recv_ready():
                    out += chan.recv(65536)
                if chan.exit_status_ready():
                    break
                if time.monotonic() > deadline:
                    chan.close()
                    raise RunIncomplete(f"{h.label()}: command timed out after {limit:g}s: "
                                        f"{_short(command)}")
                chan.status_event.wait(0.02)
            while True:
                chunk = chan.recv(65536)
                if not chunk:
                    break
                out += chunk
            code = chan.recv_exit_status()
            chan.close()
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise RunIncomplete(f"{h.label()}: command failed ({one_line(e)}): "
                                f"{_short(command)}") from None
        text = out.decode(errors="replace")
        if check and code != 0:
            raise RunIncomplete(f"{h.label()}: exit status {code} from {_short(command)}: "
                                f"{one_line(text[-300:])}")
        return code, text

    # -- files --------------------------------------------------------------------

    def _sftp(self) -> paramiko.SFTPClient:
        if self._client is None:
            raise RunIncomplete(f"{self.host.label()}: not connected")
        sftp = self._client.open_sftp()
        channel = sftp.get_channel()
        if channel is not None:
            channel.settimeout(self.host.command_timeout)
        return sftp

    def put_files(self, root: str, files: dict[str, bytes], mode: int = 0o644) -> None:
        """Write each files[rel] to root/rel, making directories as needed."""
        dirs = sorted({str(Path(root, rel).parent) for rel in files})
        self.run("mkdir -p " + " ".join(shlex.quote(d) for d in dirs))
        try:
            with self._sftp_lock, self._sftp() as sftp:
                for rel, data in files.items():
                    with sftp.open(f"{root}/{rel}", "wb") as f:
                        f.set_pipelined(True)
                        f.write(data)
                    sftp.chmod(f"{root}/{rel}", mode)
        except (OSError, paramiko.SSHException) as e:
            raise RunIncomplete(f"{self.host.label()}: cannot copy files to {root}: "
                                f"{one_line(e)}") from None

    def get_tree(self, remote: str, local: Path) -> bool:
        """Copy the directory `remote` (recursively) to `local`; False if it does not
        exist on the host."""
        try:
            with self._sftp_lock, self._sftp() as sftp:
                try:
                    sftp.stat(remote)
                except FileNotFoundError:
                    return False
                self._get_dir(sftp, remote, local)
        except (OSError, paramiko.SSHException) as e:
            raise RunIncomplete(f"{self.host.label()}: cannot copy {remote} back: "
                                f"{one_line(e)}") from None
        return True

    def _get_dir(self, sftp: paramiko.SFTPClient, remote: str, local: Path) -> None:
        local.mkdir(parents=True, exist_ok=True)
        for entry in sftp.listdir_attr(remote):
            src, dst = f"{remote}/{entry.filename}", local / entry.filename
            if stat.S_ISDIR(entry.st_mode or 0):
                self._get_dir(sftp, src, dst)
            elif stat.S_ISREG(entry.st_mode or 0):
                sftp.get(src, str(dst))

    def get_file(self, remote: str, local: Path) -> bool:
        """Copy one file; False if it does not exist on the host."""
        try:
            with self._sftp_lock, self._sftp() as sftp:
                local.parent.mkdir(parents=True, exist_ok=True)
                sftp.get(remote, str(local))
        except FileNotFoundError:
            return False
        except (OSError, paramiko.SSHException) as e:
            raise RunIncomplete(f"{self.host.label()}: cannot copy {remote} back: "
                                f"{one_line(e)}") from None
        return True


def _short(command: str, limit: int = 120) -> str:
    text = one_line(command)
    return text if len(text) <= limit else text[:limit] + "..."
