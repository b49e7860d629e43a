"""The one decoding policy for every file isrlab reads: its bytes are UTF-8, or
the file is refused at its first byte that is not, naming the line and the byte
offset (`history.jsonl line 13: byte 0xff at offset 412 is not UTF-8`). Nothing
is checked after decoding with errors="replace": a replaced byte would be judged
as if it had been written (in a label, a node name, a nemesis op).

The callers wrap NotUTF8 in their own error (contract.rundir.RunDirError,
harness.yamlloc.ScenarioError), which names the file. Standard library only.
"""

from __future__ import annotations

__all__ = ["NotUTF8", "decode"]


class NotUTF8(ValueError):
    """The first bytes of a file that are not UTF-8: ``line`` (1-based) and
    ``offset`` (from the start of the file, 0-based) of the first of them."""

    def __init__(self, bad: bytes, line: int, offset: int) -> None:
        self.bad, self.line, self.offset = bad, line, offset
        hexed = " ".join(f"0x{b:02x}" for b in bad)
        verb = "is" if len(bad) == 1 else "are"
        super().__init__(f"{'byte' if len(bad) == 1 else 'bytes'} {hexed} at offset {offset} "
                         f"{verb} not UTF-8")


def decode(raw: bytes, *, first_line: int = 1, offset: int = 0) -> str:
    """raw as UTF-8 text; NotUTF8 at its first byte that is not. ``first_line`` and
    ``offset``: where raw starts in its file, for a file read in blocks."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        # e.start..e.end: one invalid byte, or a character cut short (its lead
        # byte and the continuation bytes that came before the cut).
        raise NotUTF8(raw[e.start:e.end], first_line + raw.count(b"\n", 0, e.start),
                      offset + e.start) from None
