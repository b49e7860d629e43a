"""A run's footprint on its SSH hosts, shared by the backend (harness/backends/ssh.py)
and by what cleans up after a killed harness (harness/backends/ssh_clean.py): the
run's directory marker, its iptables chain, and stopping its nodes."""

from __future__ import annotations

import hashlib
import shlex

from contract import CONTROLLER
from harness.backends.hostsfile import Host
from harness.backends.ssh_remote import Remote

HOSTS_RECORD = "ssh-hosts.json"  # in the run directory: where each node ran (salvage)
MARKER = "isrlab-run.json"  # in the run's directory on each host
CHAIN_PREFIX = "ISRLAB-"

# sh: SIGKILL every node of the run directory $1 still running (a paused one too:
# SIGCONT would let it answer what it holds, SIGKILL works on a stopped process),
# checking by its working directory that the pid is still the node's; prints
# "STOPPED node pid" for each, once it has exited.
_KILL_RUN = r"""
cd "$1" 2>/dev/null || exit 0
for f in pids/*.pid; do
  [ -s "$f" ] || continue
  n=${f#pids/}; n=${n%.pid}; p=$(cat "$f")
  [ -s "pids/$n.exit" ] && continue
  [ "$(readlink /proc/$p/cwd 2>/dev/null)" = "$(pwd -P)" ] || continue
  kill -KILL "$p" 2>/dev/null || continue
  i=0; while [ -d /proc/$p ] && [ $i -lt 500 ]; do i=$((i+1)); sleep 0.02; done
  echo "STOPPED $n $p"
done
"""


def chain_name(run_id: str) -> str:
    """The run's iptables chain (28 characters at most)."""
    return CHAIN_PREFIX + hashlib.sha256(run_id.encode()).hexdigest()[:8].upper()


def iptables(host: Host) -> str:
    return "sudo -n iptables -w" if host.sudo else "iptables -w"


def remove_chain_script(host: Host, chain: str) -> str:
    """sh that removes `chain` and INPUT's jumps to it; a no-op where there is none."""
    ipt = iptables(host)
    return (f"if {ipt} -n -L {chain} >/dev/null 2>&1; then "
            f"while {ipt} -D INPUT -j {chain} 2>/dev/null; do :; done; "
            f"{ipt} -F {chain} && {ipt} -X {chain}; fi")


def kill_run(remote: Remote, rdir: str) -> list[str]:
    """Stop every node of the run directory `rdir` on the host; "node (pid P on H)"."""
    _, out = remote.run(f"sh -c {shlex.quote(_KILL_RUN)} isrlab {shlex.quote(rdir)}",
                        timeout=remote.host.command_timeout + 20)
    stopped = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "STOPPED":
            what = "controller" if parts[1] == CONTROLLER else f"broker {parts[1]}"
            stopped.append(f"{what} (pid {parts[2]} on {remote.host.name})")
    return stopped
