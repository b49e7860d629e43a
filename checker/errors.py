"""Errors the checker raises for bad run directories and an unusable Spark master.

The CLI prints ``str(err)`` as one line and exits 2, so every message names the
run, the file and (when known) the line -- or the master. A RunDirError of one run
of a batch does not stop the batch: check_runs sets that run aside (verdict
``error``, RunResult.error) and checks the others.
"""

from __future__ import annotations

from pathlib import Path


class CheckerError(Exception):
    """Base class: anything the checker reports to the user as one line (exit 2)."""

    exit_code = 2


class RunDirError(CheckerError):
    """A run directory that cannot be checked: missing file, bad JSON, unknown value."""

    def __init__(
        self,
        run: str | Path,
        file: str | Path | None,
        message: str,
        line: int | None = None,
    ) -> None:
        self.run = str(run)
        self.file = str(file) if file is not None else None
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"run {self.run}"
        if self.file:
            where += f": {self.file}"
            if self.line is not None:
                where += f" line {self.line}"
        # Keep the whole thing on one line whatever the message contains.
        return f"{where}: {' '.join(self.message.split())}"


class JavaNotFoundError(CheckerError):
    """No Java runtime for Spark could be found."""


class SparkMasterError(CheckerError):
    """The Spark master given cannot be used: a malformed URL, an address that does
    not answer, or a session that failed to start on it. The message names the
    master (exit 2)."""
