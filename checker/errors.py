"""Errors the checker raises for an unusable Spark master or Java runtime.

The CLI prints ``str(err)`` as one line and exits 2, so every message names the
master. A run directory the checker cannot read is contract.rundir.RunDirError
(naming run, file and line); one run's does not stop a batch: check_runs sets
that run aside (verdict ``error``, RunResult.error) and checks the others.
"""

from __future__ import annotations


class CheckerError(Exception):
    """Base class: anything the checker reports to the user as one line (exit 2)."""

    exit_code = 2


class JavaNotFoundError(CheckerError):
    """No Java runtime for Spark could be found."""


class SparkMasterError(CheckerError):
    """The Spark master given cannot be used: a malformed URL, an address that does
    not answer, or a session that failed to start on it. The message names the
    master (exit 2)."""
