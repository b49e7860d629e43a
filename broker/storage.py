"""On-disk files of a broker, with written and fsynced bytes told apart.

Every file is append-only (a log of records, or a journal whose last complete
line is the current checkpoint), so a power loss is modelled in one way for all
of them: the file is cut back to the length it had at its last real fsync. That
length lives in a `<file>.fsynced` sidecar which is itself replaced atomically
and fsynced whenever the file is. A SIGKILL keeps every written byte (the page
cache survives a process crash); `drop_unsynced` is what a power cut adds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .log import Record

SIDECAR = ".fsynced"
LOG_FILE = "log.jsonl"
EPOCH_FILE = "leader-epoch-checkpoint"
HW_FILE = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_sidecar(path: Path) -> int | None:
    try:
        return int((path.parent / (path.name + SIDECAR)).read_text())
    except (FileNotFoundError, ValueError):
        return None


class DurableFile:
    """An append-only file that knows how much of it has really been fsynced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        synced = _read_sidecar(path)
        self.fsynced = min(synced, self.size) if synced is not None else 0

    def read(self) -> bytes:
        return os.pread(self._fd, self.size, 0)

    def append(self, data: bytes) -> None:
        os.write(self._fd, data)
        self.size += len(data)

    def truncate(self, size: int) -> None:
        if size >= self.size:
            return
        os.ftruncate(self._fd, size)
        self.size = size
        if self.fsynced > size:
            # Bytes appended later at these positions are not durable yet; the
            # sidecar must not vouch for them.
            self._write_sidecar(size)

    def fsync(self) -> None:
        os.fsync(self._fd)
        if self.fsynced != self.size:
            self._write_sidecar(self.size)

    def _write_sidecar(self, size: int) -> None:
        side = self.path.parent / (self.path.name + SIDECAR)
        tmp = side.with_name(side.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(str(size))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, side)
        _fsync_dir(self.path.parent)
        self.fsynced = size

    def close(self) -> None:
        os.close(self._fd)


def _complete_lines(data: bytes) -> tuple[list[bytes], int]:
    """The complete lines of `data` and the byte length they cover."""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), end


def _last_value(lines: list[bytes]) -> Any:
    """A Journal's value: its last complete line's (None without one)."""
    return json.loads(lines[-1]) if lines else None


def _record(line: bytes) -> Record:
    """One line of a partition's record log."""
    rec = json.loads(line)
    p = rec.get("producer")
    if p is None:
        return Record(rec["offset"], rec["epoch"], rec["value"])
    return Record(rec["offset"], rec["epoch"], rec["value"], (p[0], p[1], p[2], p[3]))


def _hw_key(topic: str, partition: int) -> str:
    """A partition's key in the HW checkpoint."""
    return f"{topic}-{partition}"


class Journal:
    """A checkpoint file: one JSON value per line, the last complete line wins."""

    def __init__(self, path: Path) -> None:
        self.file = DurableFile(path)
        lines, end = _complete_lines(self.file.read())
        self.file.truncate(end)
        self.value: Any = _last_value(lines)

    def write(self, value: Any, fsync: bool = True) -> None:
        self.file.append(json.dumps(value, separators=(",", ":")).encode() + b"\n")
        if fsync:
            self.file.fsync()
        self.value = value


class PartitionStore:
    """Files of one partition replica: the record log and the leader-epoch checkpoint."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.log_file = DurableFile(directory / LOG_FILE)
        self.records: list[Record] = []
        self._ends: list[int] = []  # byte offset where each record's line ends
        lines, end = _complete_lines(self.log_file.read())
        self.log_file.truncate(end)  # a line cut by a crash mid-write is not a record
        pos = 0
        for line in lines:
            pos += len(line) + 1
            self.records.append(_record(line))
            self._ends.append(pos)
        self.epochs = Journal(directory / EPOCH_FILE)

    @property
    def epoch_entries(self) -> list[tuple[int, int]]:
        return [tuple(e) for e in (self.epochs.value or [])]  # type: ignore[misc]

    @property
    def fsynced_leo(self) -> int:
        n = 0
        for end in self._ends:
            if end > self.log_file.fsynced:
                break
            n += 1
        return n

    def append(self, records: tuple[Record, ...] | list[Record]) -> None:
        data = b""
        pos = self.log_file.size
        for rec in records:
            # json.dumps's bytes for int fields (produce admits only ints), at a
            # tenth of its cost: a line for every record a replica appends.
            p = rec.producer
            if p is None:
                line = (f'{{"offset":{rec.offset:d},"epoch":{rec.epoch:d},'
                        f'"value":{rec.value:d}}}\n').encode()
            else:
                # An idempotent producer's batch header, [id, epoch, base seq, last
                # seq], to rebuild the producer state from on a restart.
                line = (f'{{"offset":{rec.offset:d},"epoch":{rec.epoch:d},'
                        f'"value":{rec.value:d},"producer":[{p[0]:d},{p[1]:d},'
                        f'{p[2]:d},{p[3]:d}]}}\n').encode()
            data += line
            pos += len(line)
            self._ends.append(pos)
            self.records.append(rec)
        self.log_file.append(data)

    def truncate(self, offset: int) -> None:
        if offset >= len(self._ends):
            return
        size = self._ends[offset - 1] if offset > 0 else 0
        del self._ends[offset:]
        del self.records[offset:]
        self.log_file.truncate(size)

    def write_epochs(self, entries: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> None:
        # Kafka fsyncs the leader-epoch checkpoint every time it writes it.
        self.epochs.write([list(e) for e in entries])

    def flush(self) -> None:
        self.log_file.fsync()
        self.epochs.file.fsync()

    def close(self) -> None:
        self.log_file.close()
        self.epochs.file.close()


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    return data_dir / f"{topic}-{partition}"


class BrokerStore:
    """All files of one broker: its partitions and the HW checkpoint."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self.partitions: dict[tuple[str, int], PartitionStore] = {}
        self.hw_checkpoint = Journal(data_dir / HW_FILE)
        # KIP-966's clean-shutdown marker: the broker epoch of a clean shutdown.
        self.clean_shutdown = Journal(data_dir / CLEAN_SHUTDOWN_FILE)

    def partition(self, topic: str, partition: int) -> PartitionStore:
        key = (topic, partition)
        if key not in self.partitions:
            self.partitions[key] = PartitionStore(partition_dir(self.data_dir, topic, partition))
        return self.partitions[key]

    def checkpointed_hw(self, topic: str, partition: int) -> int:
        return int((self.hw_checkpoint.value or {}).get(_hw_key(topic, partition), 0))

    def write_hw_checkpoint(self, hws: dict[tuple[str, int], int]) -> None:
        self.hw_checkpoint.write({_hw_key(t, p): hw for (t, p), hw in sorted(hws.items())})

    def flush(self) -> None:
        for store in self.partitions.values():
            store.flush()
        self.hw_checkpoint.file.fsync()

    def perform(self, eff: Any) -> None:
        """Carry out one of BrokerCore's storage effects (broker_core.STORAGE_EFFECTS)."""
        from .broker_core import (
            FlushAll,
            FlushPartition,
            StoreEffect,
            WriteCleanShutdown,
            WriteHwCheckpoint,
        )
        from .partition import AppendRecords, TruncateLog, WriteEpochCache

        if isinstance(eff, StoreEffect):
            store, e = self.partition(*eff.key), eff.effect
            if isinstance(e, AppendRecords):
                store.append(e.records)
            elif isinstance(e, TruncateLog):
                store.truncate(e.offset)
            elif isinstance(e, WriteEpochCache):
                store.write_epochs(e.entries)
        elif isinstance(eff, FlushPartition):
            self.partition(*eff.key).flush()
        elif isinstance(eff, FlushAll):
            self.flush()
        elif isinstance(eff, WriteHwCheckpoint):
            self.write_hw_checkpoint(eff.hws)
        elif isinstance(eff, WriteCleanShutdown):
            self.clean_shutdown.write(eff.broker_epoch)

    def close(self) -> None:
        for store in self.partitions.values():
            store.close()
        self.hw_checkpoint.file.close()
        self.clean_shutdown.file.close()


def drop_unsynced(data_dir: Path | str) -> dict[str, int]:
    """Make a stopped broker's files look as they would after a power cut.

    Cuts every file back to its last fsynced length (a file never fsynced loses
    everything). Returns the bytes dropped per file, relative to `data_dir`.
    """
    data_dir = Path(data_dir)
    dropped: dict[str, int] = {}
    for path in sorted(data_dir.rglob("*")):
        if not path.is_file() or path.name.endswith(SIDECAR) or path.name.endswith(".tmp"):
            continue
        synced = _read_sidecar(path) or 0
        size = path.stat().st_size
        if size > synced:
            with open(path, "r+b") as f:
                f.truncate(synced)
                os.fsync(f.fileno())
            dropped[str(path.relative_to(data_dir))] = size - synced
    return dropped


def read_offline(data_dir: Path | str) -> dict[str, Any]:
    """Read a stopped broker's replicas from its files (for collecting a run's
    results), as its next start would find them: the complete lines of each file,
    a line cut by a crash left out. Only reads -- opens nothing for writing,
    creates and cuts nothing -- so the data may be on a read-only mount."""
    data_dir = Path(data_dir)
    out: dict[str, Any] = {"partitions": []}
    hws = _last_value(_read_complete_lines(data_dir / HW_FILE)) or {}
    for log_path in sorted(data_dir.glob(f"*/{LOG_FILE}")):
        topic, _, part = log_path.parent.name.rpartition("-")
        records = [_record(line) for line in _read_complete_lines(log_path)]
        epochs = _last_value(_read_complete_lines(log_path.parent / EPOCH_FILE)) or []
        out["partitions"].append({
            "topic": topic, "partition": int(part), "role": "offline",
            "leo": len(records),
            "hw_checkpoint": int(hws.get(_hw_key(topic, int(part)), 0)),
            "epoch_cache": [list(e) for e in epochs],
            "records": [r.to_json() for r in records],
        })
    return out


def _read_complete_lines(path: Path) -> list[bytes]:
    """A file's complete lines ([] without the file), as PartitionStore and Journal
    take them, without cutting the file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return _complete_lines(data)[0]
