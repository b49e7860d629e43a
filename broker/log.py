"""The in-memory model of one replica's log (offsets from 0, no retention)."""

from __future__ import annotations

from typing import NamedTuple


class Record(NamedTuple):
    offset: int
    epoch: int
    value: int


class Log:
    def __init__(self, records: list[Record] | None = None) -> None:
        self.records: list[Record] = list(records or [])

    @property
    def leo(self) -> int:
        """Log end offset: the offset the next record will get."""
        return len(self.records)

    def append(self, epoch: int, value: int) -> Record:
        rec = Record(self.leo, epoch, value)
        self.records.append(rec)
        return rec

    def append_replicated(self, rec: Record) -> None:
        if rec.offset != self.leo:
            raise ValueError(f"record at {rec.offset} appended to a log ending at {self.leo}")
        self.records.append(rec)

    def truncate_to(self, offset: int) -> bool:
        """Keep records below `offset`; True if anything was removed."""
        if offset >= self.leo:
            return False
        del self.records[max(offset, 0):]
        return True

    def read(self, start: int, end: int, max_records: int) -> list[Record]:
        end = min(end, self.leo, start + max_records)
        return self.records[start:end] if start < end else []
