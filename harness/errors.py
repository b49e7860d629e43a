"""Errors that end a harness command, each carrying its exit status (DESIGN.md).

The CLI turns any of these into one line on stderr and the exit status; nothing
below the CLI prints tracebacks or calls sys.exit.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class: an error the user sees as one line, with an exit status."""

    exit_code = 3


class ConfigError(HarnessError):
    """Usage or configuration error: unknown scenario, malformed file, port in use."""

    exit_code = 2


class RunIncomplete(HarnessError):
    """The run itself could not complete (cluster failed to start, a wait timed out)."""

    exit_code = 3


class Interrupted(HarnessError):
    """The harness got SIGINT/SIGTERM/SIGHUP; the run is incomplete."""

    exit_code = 3
