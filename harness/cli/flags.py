"""The options the `isrlab` commands share, each defined once (--faults, --acks and
--set among them, for chaos and swarm alike), and the argparse types that turn bad
values into one-line errors."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from broker.sim_cluster import Network
from checker.spark import DEFAULT_MASTER
from contract import PROTOCOLS, utf8
from contract.rundir import RunWriteError, require_writable
from harness.backends import BACKENDS
from harness.backends.hostsfile import load_hosts
from harness.backends.ports import MAX_PORT
from harness.chaos.runs import parse_sets
from harness.duration import parse_duration
from harness.errors import UsageError
from harness.progress import Progress
from harness.scenario.loader import Scenario
from nemesis.schedule import FAULT_NAMES, FaultSpecError, parse_faults
from workloads.kafka_clients import CLIENTS

if TYPE_CHECKING:
    pass

T = TypeVar("T")

# -- argparse types ------------------------------------------------------------


def typed(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a parser that raises UsageError or ValueError."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except (UsageError, FaultSpecError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def number(text: str, convert: Callable[[str], Any], noun: str, ok: Callable[[Any], bool],
           bound: str) -> Any:
    """`text` as a number (ValueError naming `noun` or `bound` otherwise)."""
    try:
        x = convert(text)
    except ValueError:
        raise ValueError(f"{text!r} is not {noun}") from None
    if not ok(x):
        raise ValueError(f"{text} is not {bound}")
    return x


def positive_int(text: str) -> int:
    return number(text, int, "an integer", lambda n: n >= 1, ">= 1")


def positive_float(text: str) -> float:
    return number(text, float, "a number", lambda x: x > 0, "> 0")


def duration(what: str) -> Callable[[str], float]:
    """An argparse type: a duration in seconds (harness.duration's grammar, the one
    every duration option and file uses: `3`, `500ms`, `2m`; at most 7 days)."""
    return typed(lambda text: parse_duration(text, what))


def probability(text: str) -> float:
    return number(text, float, "a number", lambda x: 0 <= x <= 1, "in 0..1")


def message_probability(text: str) -> float:
    return number(text, float, "a number", lambda p: 0 <= p < 1, "a probability in [0, 1)")


def port(text: str) -> int:
    """An argparse type: a TCP port, 1..65535 (0 would let the nodes pick ports the
    harness never learns)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= n <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"port {n} is out of range; give 1..{MAX_PORT}")
    return n


def seed(text: str) -> int:
    """An argparse type: a non-negative integer."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"seed {n} is negative; give an integer >= 0")
    return n


def check_output_file(path: Path) -> None:
    """UsageError (one line) unless `path` can be written as a file: not a
    directory, in a directory it can be created in (check_writable_dir). For
    output paths, before any work."""
    if os.path.isdir(path):  # os.path's: a name too long for a file is none
        raise UsageError(f"{path} is a directory; give a file path, e.g. {path / 'NAME.yaml'}")
    check_writable_dir(path.parent, f"cannot write {path}")


def check_writable_dir(directory: Path, what: str) -> None:
    """UsageError `what: why` unless `directory` exists and a file can be created
    in it (a read-only mount, no permission: tried by creating and removing one,
    which also holds for root)."""
    if not os.path.isdir(directory):
        why = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise UsageError(f"{what}: {directory} {why}")
    probe = directory / f".isrlab-probe-{os.getpid()}"
    try:
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as e:
        raise UsageError(f"{what}: {directory}: {e.strerror or e}") from None


# The directories a command writes into, by option: each is tried before the
# command starts (contract.rundir.require_writable), whichever command has it.
OUTPUT_DIRS = {"runs_dir": "the runs directory", "results": "the results directory"}


def require_output_dirs(args: argparse.Namespace) -> None:
    """UsageError (one line, exit 2) for an output directory of ``args`` that cannot
    be written -- a file, a read-only mount, no permission -- before any work."""
    for attr, what in OUTPUT_DIRS.items():
        path = getattr(args, attr, None)
        if isinstance(path, Path):
            try:
                require_writable(path, what)
            except RunWriteError as e:
                raise UsageError(f"{e}; nothing was started") from None


def output_file(text: str) -> Path:
    """An argparse type: a file to write (--out), checked at parse time
    (check_output_file)."""
    path = Path(text)
    check_output_file(path)
    return path


def write_output(path: Path, text: str) -> None:
    """Write an output file checked by output_file; UsageError (one line) if that
    still fails (the disk filled up meanwhile, say)."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def set_item(text: str) -> str:
    parse_sets([text])  # refused here, at parse time: nothing has started
    return text


# -- options -------------------------------------------------------------------


def command_parser(sub: argparse._SubParsersAction, name: str, help: str, *,
                   description: str, example: str, exit_codes: str,
                   docs: str) -> argparse.ArgumentParser:
    """A subcommand's parser whose --help says what it does, shows an example,
    lists its exit statuses and points to its docs page (docs/exit-codes.md is
    the contract; `docs` is a path under docs/)."""
    epilog = (f"example:\n  {example}\n\nexit status:\n"
              + "\n".join(f"  {line}" for line in exit_codes.strip().splitlines())
              + f"\n\ndocs: docs/{docs}, docs/exit-codes.md")
    # Raw: the example and the exit-status lines keep their lines; so the
    # description is wrapped here.
    return sub.add_parser(name, help=help, description=textwrap.fill(description, 79),
                          epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_output_flags(p: argparse.ArgumentParser, verbose: bool = False) -> None:
    """--quiet and --json; with ``verbose`` (the commands that check runs), --verbose."""
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    if verbose:
        p.add_argument("--verbose", action="store_true",
                       help="also explain every anomaly found (the report always does)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout (docs/json.md); progress on stderr")


def add_protocol_flag(p: argparse.ArgumentParser, *, repeatable: bool = False) -> None:
    """--protocol: the Kafka release whose replication protocol the brokers run."""
    if repeatable:
        p.add_argument("--protocol", action="append", choices=PROTOCOLS, metavar="VERSION",
                       help="only these Kafka versions' protocols (repeatable; default: "
                            "every one): " + ", ".join(PROTOCOLS))
    else:
        p.add_argument("--protocol", required=True, choices=PROTOCOLS, metavar="VERSION",
                       help="the Kafka version whose replication protocol the brokers run: "
                            + ", ".join(PROTOCOLS) + " (docs/protocol-versions.md)")


def progress_of(args: argparse.Namespace) -> Progress:
    """The progress lines of a command with output flags: on stderr under --json,
    so that stdout is the JSON alone."""
    return Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)


def add_master_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", help="Spark master URL, e.g. local[*] or spark://HOST:7077 "
                   f"(default: embedded {DEFAULT_MASTER}; ISRLAB_SPARK_MASTER overrides)")


def add_no_server_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-server", action="store_true",
                   help="check in this process, not on the warm checker server "
                        "(also ISRLAB_CHECKER_SERVER=0)")


def use_server(args: argparse.Namespace) -> bool | None:
    """None (the default: the server where it applies) or False (--no-server)."""
    return False if getattr(args, "no_server", False) else None


SEED_DEFAULT = 0  # one convention for every command: same command, same runs


def add_seed_flag(p: argparse.ArgumentParser, help: str) -> None:
    """--seed S, default 0 for every command (docs/json.md#seeds): run i of a batch
    uses S+i, the seed is printed and in --json, and the same seed makes the same
    run again (exactly, on the sim backend)."""
    p.add_argument("--seed", type=seed, default=SEED_DEFAULT, metavar="S",
                   help=f"{help} (default {SEED_DEFAULT}; printed)")


def add_runs_flag(p: argparse.ArgumentParser, help: str | None = None, default: int | None = 1,
                  required: bool = False) -> None:
    p.add_argument("--runs", type=typed(positive_int), default=default, required=required,
                   metavar="N", help=help or f"runs, checked in one batch (default {default})")


def add_runs_dir_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), metavar="DIR",
                   help="where run directories are written (default: runs; "
                        "docs/run-directory.md)")


def add_junit_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--junit", type=Path, metavar="FILE",
                   help="write a JUnit XML report here, one test case per run (for CI)")


def add_time_limit_flag(p: argparse.ArgumentParser, default: float | None = None) -> None:
    """--time-limit, required unless `default` (then virtual time, as a swarm's)."""
    p.add_argument("--time-limit", type=duration("time limit"), metavar="DURATION",
                   required=default is None, default=default,
                   help="faults start during this long: 60s, 2m, 1m30s" +
                        ("" if default is None else f" (virtual time; default {default:g}s)"))


# The backend's options: --backend, --port, --hosts (ssh), --base-image (docker),
# --net-loss and --net-duplicate (sim); backend_options turns them into one dict.


def add_backend_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="local", choices=sorted(BACKENDS),
                   help="where the brokers run: " + ", ".join(sorted(BACKENDS))
                        + " (default local; docs/sim.md, docs/ssh.md)")


def add_port_flag(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--port", type=port, default=19092,
                   help=help or "the first node's port (default 19092)")


def add_hosts_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hosts", type=Path, metavar="HOSTS.yaml",
                   help="ssh: which host runs which node; chaos --target kafka: the "
                        "brokers' hosts and how to fault them (docs/ssh.md)")


def add_base_image_flag(p: argparse.ArgumentParser, help: str | None = None) -> None:
    p.add_argument("--base-image", metavar="IMAGE", help=help or "e.g. python:3.11-slim")


def add_network_flags(p: argparse.ArgumentParser) -> None:
    """The simulator's message faults (broker.sim_cluster.Network)."""
    p.add_argument("--net-loss", type=typed(message_probability), default=0.0, metavar="P",
                   help="sim: lose each message (a request or its answer) with probability P; "
                        "its sender times out")
    p.add_argument("--net-duplicate", type=typed(message_probability), default=0.0,
                   metavar="P",
                   help="sim: handle each request twice with probability P (a resend)")


def network_option(args: argparse.Namespace) -> Any:
    """The --net-* flags as a broker.sim_cluster.Network; None when none is set."""
    loss, dup = getattr(args, "net_loss", 0.0), getattr(args, "net_duplicate", 0.0)
    if not loss and not dup:
        return None
    return Network(loss=loss, duplicate=dup)


def backend_options(args: argparse.Namespace, backend: str | None = None,
                    port: int | None = None) -> dict[str, Any]:
    """The backend's options from a command's flags: --port (local: every node's
    port; docker: the first of the host ports it maps; `port` overrides it),
    --base-image (docker only), --hosts (ssh only, parsed here so a bad file fails
    before anything starts) and quiet image builds and host checks."""
    backend = backend or args.backend
    hosts = getattr(args, "hosts", None)
    base_image = getattr(args, "base_image", None)
    if base_image and backend != "docker":
        raise UsageError("--base-image applies to --backend docker only")
    if backend == "ssh":
        if hosts is None:
            raise UsageError("--backend ssh needs --hosts HOSTS.yaml (docs/ssh.md); "
                             "`isrlab ssh hosts up 3 --out hosts.yaml` makes one here")
        return {"hosts": load_hosts(hosts)}
    if hosts is not None:
        raise UsageError("--hosts applies to --backend ssh only")
    options: dict[str, Any] = {"port": args.port if port is None else port}
    network = network_option(args)
    if network is not None:
        if backend != "sim":
            raise UsageError("--net-loss and --net-duplicate apply to --backend sim only "
                             "(docs/sim.md)")
        options["network"] = network
    if base_image:
        options["base_image"] = base_image
    if backend == "docker":
        # Image builds report progress on stderr unless the user asked for quiet.
        options["quiet"] = args.quiet
    return options


# A chaos run's fault mix, acks and configuration: chaos runs them as given
# (defaults kill and all); a swarm pins what they give and draws the rest per run.

ACKS = {"0": 0, "1": 1, "-1": -1, "all": "all"}


def add_chaos_flags(p: argparse.ArgumentParser, *, drawn: bool) -> None:
    """--faults, --acks and --set. `drawn` (a swarm): what a flag does not give,
    each run draws from its seed; else (chaos) --faults defaults to kill and
    --acks to all, and the config keys not set keep the broker's defaults."""
    p.add_argument("--faults", type=typed(parse_faults), metavar="FAULT[:TARGET],...",
                   default=None if drawn else parse_faults("kill"),
                   help=f"faults: {', '.join(FAULT_NAMES)}; targets: one, leader, minority, "
                        "all (default: " + ("each run draws its own mix" if drawn else "kill")
                        + ")")
    p.add_argument("--acks", choices=sorted(ACKS), default=None if drawn else "all",
                   help="the producers' acks (default: " +
                        ("each run draws all or 1" if drawn else "all") + ")")
    p.add_argument("--set", dest="sets", action="append", default=[], type=typed(set_item),
                   metavar="KEY=VALUE",
                   help="broker or controller config, e.g. min.insync.replicas=2 (repeatable)"
                        + ("; each run draws the keys not set" if drawn else ""))


def acks_of(args: argparse.Namespace) -> int | str | None:
    """--acks as the workload's value; None when not given (a swarm draws it)."""
    return ACKS[args.acks] if args.acks is not None else None


def client_config_item(text: str) -> list[tuple[str, Any]]:
    """--client-config KEY=VALUE (an integer, true/false, or else the string), or
    @FILE: a properties file of such settings, as clients are configured from
    (`key=value` or `key: value` per line, `#` and `!` comments; FILE:LINE names a
    line that is neither)."""
    if text.startswith("@"):
        return _client_config_file(Path(text[1:]))
    return [_setting(text, f"{text!r}: give KEY=VALUE or @FILE, e.g. enable.idempotence=true")]


def _setting(text: str, error: str, sep: str = "=") -> tuple[str, Any]:
    at = min((i for i in (text.find(c) for c in sep) if i >= 0), default=-1)
    key, raw = text[:at].strip(), text[at + 1:].strip()
    if at < 0 or not key:
        raise ValueError(error)
    if raw.lower() in ("true", "false"):
        return key, raw.lower() == "true"
    try:
        return key, int(raw)
    except ValueError:
        return key, raw


def _client_config_file(path: Path) -> list[tuple[str, Any]]:
    try:
        lines = utf8.decode(path.read_bytes()).splitlines()
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from None
    except utf8.NotUTF8 as e:
        raise ValueError(f"{path}:{e.line}: {e}") from None
    out = []
    for n, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        if text.endswith("\\"):
            raise ValueError(f"{path}:{n}: a line continued with \\ is not supported: "
                             "one setting per line")
        out.append(_setting(text, f"{path}:{n}: {text[:60]!r} is not key=value", "=:"))
    return out


def add_client_flags(p: argparse.ArgumentParser) -> None:
    """--client and --client-config: the workload on a real Kafka client."""
    p.add_argument("--client", choices=CLIENTS, default=None,
                   help="drive the workload with this real Kafka client over the brokers' "
                        "Kafka listeners (default: isrlab's own, or the scenario's)")
    p.add_argument("--client-config", dest="client_config", action="extend", default=[],
                   type=typed(client_config_item), metavar="KEY=VALUE|@FILE",
                   help="a setting of that client, by its own name, e.g. "
                        "enable.idempotence=true, or @FILE, a properties file of them "
                        "(repeatable; a later one wins)")


def with_client(args: argparse.Namespace, scenario: Scenario) -> Scenario:
    """The scenario with --client / --client-config applied to its workload."""
    client = getattr(args, "client", None)
    config = dict(getattr(args, "client_config", None) or [])
    if config and not client and not scenario.workload.get("client"):
        raise UsageError("--client-config sets a client's settings: give --client too")
    if not client and not config:
        return scenario
    workload = {**scenario.workload, "config": {**scenario.workload.get("config", {}),
                                               **config}}
    if client:
        workload["client"] = client
    return dataclasses.replace(scenario, workload=workload)
