"""What a backend leaves for the run directory (Jepsen's LogFiles): the nodes'
logs and data directories, also of a run whose harness died (`isrlab collect`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UsageError


@dataclass
class Salvage:
    """What `Artefacts.salvage` found of a crashed run."""

    stopped: list[str]  # what still ran and was stopped, in words ("broker A (pid 123)")
    data_dirs: dict[str, Path | None]  # broker -> its data directory here (None: no data)


class Artefacts(ABC):
    name: str = "abstract"

    def data_dir(self, node: str) -> Path | None:
        """The node's data directory, readable by the harness (docker: a copy taken
        now), or None if the harness cannot read it."""
        return None

    def node_log(self, node: str) -> str | None:
        """The node's process log as written so far, every incarnation, read now
        (None: unreadable, or a backend without process logs). The events
        collector reads a process's last events here once it has exited."""
        return None

    @abstractmethod
    def collect_logs(self, run_dir: Path) -> None:
        """Make sure every process log is under run_dir/logs/."""

    # -- a run whose harness died -------------------------------------------

    @classmethod
    def salvage(cls, run_dir: Path, run_id: str, brokers: list[str]) -> Salvage:
        """For run `run_id` (directory `run_dir`), whose harness died without a
        teardown: stop (SIGKILL) whatever of it still runs, so its files stop
        changing, save what logs only the backend holds under run_dir/logs/, and
        return each broker's data directory, readable here."""
        raise UsageError(f"the {cls.name} backend cannot collect a crashed run")

    @classmethod
    def discard(cls, run_id: str) -> str | None:
        """Remove what is left of crashed run `run_id` once its replicas are written;
        what was removed, in words (None: nothing to remove)."""
        return None
