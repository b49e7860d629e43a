"""Errors that end a harness command, each carrying its exit status (docs/exit-codes.md).

The CLI turns any of these into one line on stderr and the exit status; nothing
below the CLI prints tracebacks or calls sys.exit. `one_line` is how any message
(an error of ours or a library's) is squeezed onto that line.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class: an error the user sees as one line, with an exit status."""

    exit_code = 3

    def __str__(self) -> str:
        # One line whatever the message quotes: a path or value given with a
        # newline in it would otherwise split the CLI's `isrlab: ...` line.
        return one_line(super().__str__())


class UsageError(HarnessError):
    """The user's mistake, exit 2: a bad command line, unknown scenario, malformed
    scenario file, port in use. (A bad broker or controller configuration value is
    the broker's own error, in broker/config.py; a scenario turns it into this.)"""

    exit_code = 2


class RunIncomplete(HarnessError):
    """The run itself could not complete (cluster failed to start, a wait timed out)."""

    exit_code = 3


class Interrupted(HarnessError):
    """The harness got SIGINT/SIGTERM/SIGHUP; the run is incomplete."""

    exit_code = 3


def one_line(e: BaseException | str) -> str:
    """A message on one line (whitespace runs, newlines included, become one space);
    an exception without a message is named by its type."""
    text = " ".join(str(e).split())
    if not text and isinstance(e, BaseException):
        return type(e).__name__
    return text
