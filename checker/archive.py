"""Build the driver JVM's class-data archive (checker.spark.cds_archive) in a JVM
of its own.

A JVM that records its classes to archive them on exit
(``-XX:ArchiveClassesAtExit``) starts ~3 s slower and runs its first check ~2 s
slower than one that does not (bench/README.md, time to verdict). The checker
server's JVM answers a new user's very first check, so it never records: as the
server exits (its idle timeout, `isrlab checker stop`), it starts this module in
the background, at the lowest CPU priority -- not earlier, since a builder beside
a warm server slowed the checks it served, and only a new driver JVM reads the
archive. It checks a small made-up run in a recording JVM, lets the JVM write
the archive as it exits and moves the file into place. A lock file keeps two
builders from running at once.

    python -m checker.archive
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from checker.errors import CheckerError
from checker.remote import ROOT
from checker.spark import CDS_DUMP_ENV, DEFAULT_MASTER, cds_archive, driver_log_path


def build_in_background() -> None:
    """Start a builder unless the archive exists (the builder itself skips the
    work when another one holds the lock). Never raises: the archive only saves
    time."""
    try:
        if cds_archive().is_file():
            return
    except CheckerError:  # no Java: the check itself says so
        return
    with contextlib.suppress(OSError), open(driver_log_path(), "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "checker.archive"],
            cwd=ROOT,
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True,  # outlives the server that starts it
        )


@contextlib.contextmanager
def build_lock(wait: bool = False) -> Iterator[bool]:
    """The builders' lock; yields whether this process holds it. ``wait``: until a
    builder at work has finished (a benchmark of the first-ever check holds it so
    that no archive appears under it)."""
    target = cds_archive()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{target}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def build(wait: bool = False) -> bool:
    """Write the archive now, in this process's (new) driver JVM. False if it
    exists already or another process is building it (``wait``: until that one
    has finished, then False if it wrote the archive)."""
    from checker.api import check_runs
    from checker.spark import shutdown
    from checker.synth import sample_run

    target = cds_archive()
    with build_lock(wait) as held:
        if not held or target.is_file():
            return False
        for stale in target.parent.glob(f"{target.name}.*.tmp*"):
            stale.unlink(missing_ok=True)  # a killed builder's (~170 MB): the lock is ours
        dump = f"{target}.{os.getpid()}.tmp"
        os.environ[CDS_DUMP_ENV] = dump
        try:
            with tempfile.TemporaryDirectory(prefix="isrlab-archive-") as tmp:
                check_runs([sample_run(Path(tmp))], master=DEFAULT_MASTER)
        finally:
            # The JVM writes the archive on its way out (an AOT cache in a JVM it
            # starts: ~25 s more, longer at nice 19 on a busy machine).
            shutdown(timeout=600)
            del os.environ[CDS_DUMP_ENV]
        if not os.path.isfile(dump):
            return False
        os.replace(dump, target)
        return True


def main() -> int:
    os.nice(19)  # idle cores only: a user's check or cluster comes first
    try:
        built = build()
    except Exception as e:  # noqa: BLE001 - a background helper: say why, never a traceback
        print(f"checker archive: not built: {e!r}"[:500], flush=True)
        return 1
    if built:
        print(f"checker archive: wrote {cds_archive()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
