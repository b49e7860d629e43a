"""The `isrlab` command, assembled from one module per command.

Each command is a module of this package (scenarios.py is `isrlab scenarios`,
reproduce.py `isrlab reproduce`, ...) with `add_parser(sub)`, which adds its
subcommand and options, and `run(args)`, which does it and returns the exit
status. What they share is in three modules: flags.py (the options, each defined
once), batchcheck.py (the interrupt-safe check, a batch checked in one Spark job with
its reports and exit codes) and cellrun.py (scenario x protocol cells); a command
module imports those and no other (tests/test_layering.py). The CLI's modules are
the only ones of the harness that wire it to the checker and the reports.

Every user error is one line on stderr and exit status 2; a run that cannot
complete is exit 3, and so is an interrupt (Ctrl-C, SIGTERM), also during the
check: one line, `isrlab: interrupted`. Each command's module says what its
exit status means (docs/exit-codes.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import NoReturn

from checker.errors import CheckerError
from contract.rundir import RunDirError, RunWriteError
from harness.backends import reaper
from harness.cli import (
    batchcheck,
    chaos,
    check,
    checker,
    collect,
    docker,
    export,
    flags,
    matrix,
    nightly,
    reproduce,
    scenarios,
    shrink,
    ssh,
    swarm,
    trace,
)
from harness.errors import HarnessError, RunIncomplete, one_line

# In the order `isrlab --help` lists them.
COMMANDS = (scenarios, reproduce, check, collect, docker, chaos, export, nightly, matrix,
            checker, ssh, swarm, trace, shrink)


class _UsageExit(SystemExit):
    """argparse's exit 2 for bad arguments, carrying the message for --json."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage block: the CLI contract for bad input (an argument
        # quoted in the message may hold a newline).
        message = one_line(message)
        line = (f"isrlab: error: {message} (see isrlab {self.prog.split()[-1]} --help)"
                if " " in self.prog else f"isrlab: error: {message}")
        print(line, file=sys.stderr)
        raise _UsageExit(line.removeprefix("isrlab: error: "))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="isrlab", description="Fault-injection harness for Kafka's "
                                           "replication protocol.",
                epilog="`isrlab COMMAND --help` says what a command does, with an example "
                       "and its exit statuses.\ndocs: docs/README.md, docs/exit-codes.md",
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in COMMANDS:
        command.add_parser(sub).set_defaults(handler=command.run)
    return p


# The shell's status of a process that wrote to a pipe its reader had closed
# (128 + SIGPIPE): the command's own status was never said.
BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
    except _UsageExit as e:
        if "--json" in argv:  # stdout is still one JSON object (docs/json.md#errors)
            _json_error(argv[0] if argv else None, e.message, 2)
        raise
    reaper.install_signal_handlers()
    code = _command(args)
    try:
        sys.stdout.flush()  # what is still buffered, before Python's own flush at exit
    except BrokenPipeError:
        code = _stdout_gone()
    if batchcheck.abandoned.is_set():
        # An interrupted check's thread is still inside a call into Spark's JVM:
        # leave without waiting for it (and without the py4j errors it would log on
        # the way out). The JVM exits by itself once its stdin, our pipe, closes.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _command(args: argparse.Namespace) -> int:
    try:
        flags.require_output_dirs(args)
        return args.handler(args)
    except (HarnessError, RunDirError, RunWriteError, CheckerError) as e:  # each: its exit status
        print(f"isrlab: {e}", file=sys.stderr)
        if getattr(args, "json", False):
            _json_error(args.command, one_line(e), e.exit_code)
        return e.exit_code
    except BrokenPipeError:
        return _stdout_gone()
    except KeyboardInterrupt:
        print("isrlab: interrupted", file=sys.stderr)
        if getattr(args, "json", False):
            _json_error(args.command, "interrupted", RunIncomplete.exit_code)
        return RunIncomplete.exit_code


def _stdout_gone() -> int:
    """The reader of stdout left (`isrlab check ... | head -1`): what the command
    did stands (a run is closed, a check written); it says no more, also not when
    Python flushes stdout on the way out."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    print("isrlab: stdout closed by its reader; the rest of the output dropped",
          file=sys.stderr)
    return BROKEN_PIPE


def _json_error(command: str | None, error: str, code: int) -> None:
    """An error under --json: the line said on stderr, also as a JSON object on
    stdout, so that a script reading stdout always gets one."""
    print(json.dumps({"command": command, "error": error, "exit_code": code}), flush=True)
