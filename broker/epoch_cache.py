"""LeaderEpochCache: (leader epoch, start offset) pairs, as Kafka's LeaderEpochFileCache.

Pure data structure; persistence is the shell's business (the caller writes the
checkpoint whenever a method returns True).
"""

from __future__ import annotations

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = [tuple(e) for e in entries or []]  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries})"

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def start_offset_of(self, epoch: int) -> int | None:
        for e, start in self.entries:
            if e == epoch:
                return start
        return None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed.

        Entries whose epoch or start offset is not below the new one are replaced,
        so the cache stays strictly increasing in both.
        """
        if self.entries and self.entries[-1][0] == epoch:
            return False
        if self.entries and epoch < self.entries[-1][0]:
            return False  # an older epoch never rewrites history
        kept = [(e, s) for e, s in self.entries if s < start_offset and e < epoch]
        self.entries = kept + [(epoch, start_offset)]
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries that start at or after `end_offset` (the log was truncated there)."""
        kept = [(e, s) for e, s in self.entries if s < end_offset]
        changed = kept != self.entries
        self.entries = kept
        return changed

    def end_offset_v011(self, epoch: int, leo: int) -> int:
        """KIP-101 answer: the LEO for the latest epoch, else the start of the first later epoch."""
        if epoch == self.latest_epoch:
            return leo
        for e, start in self.entries:
            if e > epoch:
                return start
        return leo

    def end_offset_for(self, epoch: int, leo: int) -> tuple[int, int]:
        """KIP-279 answer: the largest epoch <= `epoch` and where it ends.

        The end is the start offset of the next epoch, or the LEO for the latest one.
        For an epoch older than every known one, Kafka answers with the requested
        epoch and the start of the first known epoch (the older data is gone).
        """
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        found = None
        for i, (e, _start) in enumerate(self.entries):
            if e <= epoch:
                found = i
        if found is None:
            return epoch, self.entries[0][1]
        e = self.entries[found][0]
        if found + 1 < len(self.entries):
            return e, self.entries[found + 1][1]
        return e, leo
