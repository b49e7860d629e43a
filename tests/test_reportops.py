"""checker/reportops.read_ops: the story's history lines found by a byte search for
each line's start, as a line-by-line read finds them -- in a history written in
index order, in one that is not, and past a torn last line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checker import reportops
from contract import HISTORY


def _history(tmp_path: Path, ops: list[dict], tail: bytes = b"") -> Path:
    (tmp_path / HISTORY).write_bytes(
        b"".join(json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in ops) + tail)
    return tmp_path


@pytest.mark.parametrize("block", [37, 4096, reportops._BLOCK])  # lines cut by blocks
def test_the_search_finds_the_lines_a_read_finds(tmp_path: Path, monkeypatch,
                                                 block: int) -> None:
    monkeypatch.setattr(reportops, "_BLOCK", block)
    ops = [{"index": i, "f": "send", "value": i * 10, "records": [[i, i]] * (i % 7)}
           for i in range(5000)]
    run = _history(tmp_path, ops, b'{"index":5000,"f":"se')  # torn by a crash
    wanted = {0, 1, 9, 10, 99, 100, 4321, 4999, 5000}
    cut = []
    got = reportops.read_ops(run, wanted, cut.append)
    assert got == [ops[i] for i in sorted(wanted - {5000})]
    assert cut == got  # each op was handed over as it was read
    with open(run / HISTORY, "rb") as f:
        assert [json.loads(x) for x in reportops._scanned(f, wanted) if x.endswith(b"\n")] == got


def test_a_history_out_of_index_order_is_read_line_by_line(tmp_path: Path) -> None:
    ops = [{"index": 1, "f": "a"}, {"index": 0, "f": "b"}, {"index": 2, "f": "c"}]
    run = _history(tmp_path, ops)
    assert reportops.read_ops(run, {0, 1}) == ops[:2]  # file order, both found
    assert reportops.read_ops(run, {3}) == []


def test_an_empty_history_has_no_lines(tmp_path: Path) -> None:
    assert reportops.read_ops(_history(tmp_path, []), {0}) == []
