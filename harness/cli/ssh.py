"""`isrlab ssh check|clean|hosts up|hosts down`: the SSH backend's hosts (docs/ssh.md).

`check` connects to every host of a hosts file and runs the checks a run makes
before it starts; `clean` removes what runs whose harness died left on the hosts;
`hosts up N` / `hosts down` start and remove sshd containers to try the backend
on one machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from harness.backends.hostsfile import load_hosts
from harness.backends.spec import ClusterSpec
from harness.cli import flags
from harness.errors import HarnessError
from harness.progress import Progress


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    s = flags.command_parser(
        sub, "ssh", "the ssh backend's hosts: check, clean, hosts up/down",
        description="The ssh backend's hosts: check them, clean what crashed runs left, "
                    "or bring up sshd containers on this machine to try the backend.",
        example="isrlab ssh check --hosts hosts.yaml",
        exit_codes="0  done\n2  bad input: a bad hosts file, a host that fails its check",
        docs="ssh.md")
    ssub = s.add_subparsers(dest="ssh_command", required=True, parser_class=sub._parser_class)
    hosts_help = "which host runs which node (docs/ssh.md)"
    ch = flags.command_parser(
        ssub, "check", "connect to every host of a hosts file and check it "
                       "(python3, setsid, ports, iptables) as a run would",
        description="Connect to every host of a hosts file and check it as a run would: "
                    "python3, setsid, free ports, iptables.",
        example="isrlab ssh check --hosts hosts.yaml",
        exit_codes="0  every host is fit\n2  a bad hosts file, or a host that is not",
        docs="ssh.md")
    ch.add_argument("--hosts", type=Path, required=True, metavar="HOSTS.yaml", help=hosts_help)
    cl = flags.command_parser(
        ssub, "clean", "stop nodes, delete iptables rules and run directories "
                       "that runs whose isrlab process is gone left on the hosts",
        description="Stop the nodes, delete the iptables rules and run directories that "
                    "runs whose isrlab process is gone left on the hosts.",
        example="isrlab ssh clean --hosts hosts.yaml",
        exit_codes="0  cleaned\n2  a bad hosts file, an unreachable host", docs="ssh.md")
    cl.add_argument("--hosts", type=Path, required=True, metavar="HOSTS.yaml", help=hosts_help)
    cl.add_argument("--force", action="store_true",
                    help="also runs still going, of another machine, or awaiting "
                         "`isrlab collect`")
    h = flags.command_parser(
        ssub, "hosts", "sshd containers on this machine, to try the backend",
        description="sshd containers on this machine, to try the ssh backend without "
                    "other machines.",
        example="isrlab ssh hosts up 3 --out hosts.yaml",
        exit_codes="0  done\n2  bad input, no Docker engine", docs="ssh.md")
    hsub = h.add_subparsers(dest="hosts_command", required=True, parser_class=sub._parser_class)
    up = flags.command_parser(
        hsub, "up", "start N broker hosts and a controller host; write their hosts file",
        description="Start N broker hosts and a controller host as sshd containers and "
                    "write their hosts file.",
        example="isrlab ssh hosts up 3 --out hosts.yaml",
        exit_codes="0  started\n2  bad input, no Docker engine\n3  the Docker engine failed",
        docs="ssh.md")
    up.add_argument("n", type=int, metavar="N", help="broker hosts to start")
    up.add_argument("--out", type=Path, required=True, metavar="HOSTS.yaml",
                    help="the hosts file to write")
    up.add_argument("--base-image", metavar="IMAGE", help="e.g. python:3.11-slim")
    up.add_argument("--quiet", action="store_true", help="no progress lines")
    down = flags.command_parser(
        hsub, "down", "remove the containers a hosts file names",
        description="Remove the sshd containers a hosts file names.",
        example="isrlab ssh hosts down --hosts hosts.yaml",
        exit_codes="0  removed\n2  bad input, no Docker engine", docs="ssh.md")
    down.add_argument("--hosts", type=Path, required=True, metavar="HOSTS.yaml",
                      help="the hosts file `ssh hosts up` wrote")
    return s


def run(args: argparse.Namespace) -> int:
    if args.ssh_command == "check":
        return _check(args.hosts)
    if args.ssh_command == "clean":
        return _clean(args.hosts, args.force)
    from harness.backends import ssh_hosts  # the docker SDK only for those who use it

    if args.hosts_command == "up":
        progress = Progress(sys.stderr, quiet=args.quiet)
        out = ssh_hosts.hosts_up(args.n, args.out, base_image=args.base_image,
                                 progress=progress.line, quiet=args.quiet)
        print(out)
        return 0
    for name in ssh_hosts.hosts_down(args.hosts):
        print(f"removed {name}")
    return 0


def _check(hosts_path: Path) -> int:
    from harness.backends.ssh import SshBackend  # paramiko only for those who use it

    hf = load_hosts(hosts_path)
    brokers = [h.node for h in hf.brokers]
    spec = ClusterSpec(protocol="latest", brokers=brokers, topics=[])
    with tempfile.TemporaryDirectory(prefix="isrlab-ssh-check-") as tmp:
        backend = SshBackend(spec, Path(tmp) / "check", hosts=hf)
        backend.expect({"partition"})
        try:
            backend.check_addresses()
        finally:
            backend.teardown()
    for h in (hf.controller, *hf.brokers):
        print(f"ok: {h.label()} {h.target}, port {h.port} free")
    return 0


def _clean(hosts_path: Path, force: bool) -> int:
    from harness.backends.ssh_clean import clean_hosts  # paramiko, as above

    sweeps = clean_hosts(hosts_path, force=force)
    errors = []
    for s in sweeps:
        for what in s.removed:
            print(f"{s.host}: removed {what}")
        for what in s.kept:
            print(f"{s.host}: kept {what}")
        errors += [f"{s.host}: {e}" for e in s.errors]
    removed = sum(len(s.removed) for s in sweeps)
    print(f"{len(sweeps)} host(s): {removed} thing(s) removed")
    if errors:
        raise HarnessError(f"could not remove {len(errors)} thing(s): {errors[0]}")
    return 0
