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

    def assign(self, epoch: int, start_offset: int, truncate_and_append: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed.

        `truncate_and_append` (2.1.0, KAFKA-7415, `LeaderEpochFileCache.assign`):
        unless it is the latest epoch again at the same or a later offset, the new
        entry replaces every entry whose epoch or start offset is not below its own,
        so the cache stays strictly increasing in both. Before (0.11.0.0, 2.0.0) an
        entry is only appended, and only for an epoch above the latest starting at
        or after the latest start; anything else is ignored.
        """
        if not truncate_and_append:
            if epoch < 0 or (self.entries and (epoch <= self.entries[-1][0]
                                               or start_offset < self.entries[-1][1])):
                return False
            self.entries = self.entries + [(epoch, start_offset)]
            return True
        if self.entries and self.entries[-1][0] == epoch \
                and start_offset >= self.entries[-1][1]:
            return False
        kept = [(e, s) for e, s in self.entries if s < start_offset and e < epoch]
        self.entries = kept + [(epoch, start_offset)]
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries that start at or after `end_offset` (the log was truncated
        there); an undefined (negative) offset changes nothing, as in Kafka."""
        if end_offset < 0:
            return False
        kept = [(e, s) for e, s in self.entries if s < end_offset]
        changed = kept != self.entries
        self.entries = kept
        return changed

    def end_offset_v011(self, epoch: int, leo: int) -> int:
        """0.11.0.0 LeaderEpochFileCache.endOffsetFor (KIP-101): an end offset only.

        The LEO for the latest epoch; UNDEFINED when no epoch is later than the one
        asked or it is below the first (the follower then truncates to its HW); else
        the start of the first later epoch.
        """
        if epoch == self.latest_epoch:
            return leo
        later = [start for e, start in self.entries if e > epoch]
        if not later or epoch < self.entries[0][0]:
            return UNDEFINED_OFFSET
        return later[0]

    def end_offset_v20(self, epoch: int, leo: int) -> tuple[int, int]:
        """2.0.0 LeaderEpochFileCache.endOffsetFor (KIP-279): (epoch, end offset).

        The largest epoch <= the one asked and where it ends, but (-1, -1) for an
        epoch above the latest or below the first: the gap KAFKA-7415 closed in 2.1.
        """
        if epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest_epoch:
            return epoch, leo
        later = [(e, s) for e, s in self.entries if e > epoch]
        earlier = [(e, s) for e, s in self.entries if e <= epoch]
        if not later or not earlier:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        return earlier[-1][0], later[0][1]

    def end_offset_for(self, epoch: int, leo: int) -> tuple[int, int]:
        """2.1.0+ LeaderEpochFileCache.endOffsetFor (KAFKA-7415): (epoch, end offset).

        The largest epoch <= `epoch` and where it ends: the start offset of the next
        epoch, or the LEO for the latest one. An epoch older than every known one gets
        (the asked epoch, the start of the first known epoch): the older data is gone.
        An epoch above the latest (Kafka: "should never be hit", a leader's latest
        epoch is its own) or an empty cache gets (-1, -1).
        """
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.latest_epoch:
            return epoch, leo
        later = [(e, s) for e, s in self.entries if e > epoch]
        earlier = [(e, s) for e, s in self.entries if e <= epoch]
        if not later:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if not earlier:
            return epoch, later[0][1]
        return earlier[-1][0], later[0][1]
