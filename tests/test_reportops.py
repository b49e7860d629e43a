"""checker/reportops.read_ops: the story's history lines found by a binary search of
the file's bytes, as a line-by-line read finds them -- in a history written in
index order (short lines and lines longer than a probe), in one that is not, and
past a torn last line; and a final read parsed without the records Spark cut."""

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


@pytest.mark.parametrize("probe", [7, 64, reportops._PROBE])  # lines longer than a probe
def test_the_search_finds_the_lines_a_read_finds(tmp_path: Path, monkeypatch,
                                                 probe: int) -> None:
    monkeypatch.setattr(reportops, "_PROBE", probe)
    ops = [{"index": i, "f": "send", "value": i * 10, "records": [[i, i]] * (i % 7 * i % 300)}
           for i in range(3000)]
    run = _history(tmp_path, ops, b'{"index":3000,"f":"se')  # torn by a crash
    wanted = {0, 1, 9, 10, 99, 100, 1234, 2998, 2999, 3000}
    got = reportops.read_ops(run, wanted)
    assert got == [ops[i] for i in sorted(wanted - {3000})]
    with open(run / HISTORY, "rb") as f:
        assert [json.loads(x) for x in reportops._scanned(f, wanted) if x.endswith(b"\n")] == got
        assert reportops._spans(f, [5000]) is None  # past the last line


def test_a_history_out_of_index_order_is_read_line_by_line(tmp_path: Path) -> None:
    ops = [{"index": 1, "f": "a"}, {"index": 0, "f": "b"}, {"index": 2, "f": "c"}]
    run = _history(tmp_path, ops)
    assert reportops.read_ops(run, {0, 1}) == ops[:2]  # file order, both found
    assert reportops.read_ops(run, {3}) == []


def test_an_empty_history_has_no_lines(tmp_path: Path) -> None:
    assert reportops.read_ops(_history(tmp_path, []), {0}) == []


@pytest.mark.parametrize("line", [
    b'{"index":7,"process":"final","records":[[1,2],[3,4],[5,6]],"hw":9}\n',
    b'{"index":7, "process": "final", "records": [ [1, 2], [3,4] ,[5,6] ] , "hw": 9}\n',
    b'{"index":7,"process":"final","hw":9,"records":[[1,2],[3,4],[5,6]]}',
])
def test_a_cut_final_read_is_parsed_without_its_records(line: bytes) -> None:
    parse = reportops._parse_cut({7: ([[1, 2]], [3, 3, 6])})
    assert reportops._without_records(line, 3) is not None
    assert parse(line) == {"index": 7, "process": "final", "hw": 9, "records": [[1, 2]]}


def test_a_line_not_written_simply_is_parsed_whole() -> None:
    line = b'{"index":7,"records":[[1,2],[3,4]],"hw":9}\n'
    assert reportops._without_records(line, 3) is None  # Spark counted other records
    assert reportops._without_records(b'{"index":7,"hw":9}', 0) is None
    assert reportops._parse_cut({7: ([[1, 2]], [3, 3, 6])})(line)["records"] == [[1, 2]]
    assert reportops._parse_cut({})(line)["records"] == [[1, 2], [3, 4]]  # not cut
