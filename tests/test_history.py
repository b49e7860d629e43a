"""The history recorder: indices, times, completion fields, flush-as-you-go."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from contract.history import History
from contract.rundir import read_history
from harness.run.clock import RunClock


def test_append_and_complete(tmp_path: Path) -> None:
    h = History(tmp_path / "history.jsonl", RunClock())
    inv = h.invoke(0, "send", 5, topic="t", partition=0, acks="all", label="m0")
    ok = h.complete(inv, "ok", offset=3)
    fail = h.complete(h.invoke(0, "send", 6, topic="t", partition=0, acks=1), "fail",
                      error="NOT_ENOUGH_REPLICAS")
    h.invoke("nemesis", "kill", ["A"])
    h.close()
    ops = read_history(tmp_path)
    assert [o["index"] for o in ops] == [0, 1, 2, 3, 4]
    assert ops[1] == ok and ok["type"] == "ok" and ok["value"] == 5 and ok["offset"] == 3
    assert ok["topic"] == "t" and ok["acks"] == "all" and ok["label"] == "m0"
    assert fail["error"] == "NOT_ENOUGH_REPLICAS" and fail["process"] == 0
    assert ops[4]["process"] == "nemesis" and ops[4]["value"] == ["A"]
    assert all(0 <= a["time"] <= b["time"] for a, b in zip(ops, ops[1:], strict=False))


def test_each_op_is_on_disk_before_the_next(tmp_path: Path) -> None:
    """A crashed run leaves a checkable prefix: every op is flushed as it happens."""
    path = tmp_path / "history.jsonl"
    h = History(path, RunClock())
    for i in range(3):
        h.invoke(0, "send", i)
        lines = path.read_text().splitlines()  # another reader, file still open
        assert len(lines) == i + 1 and json.loads(lines[-1])["value"] == i
    # no close(): simulate the harness dying here
    with open(path, "a") as f:
        f.write('{"index": 3, "ti')  # a torn last line
    assert [o["value"] for o in read_history(tmp_path)] == [0, 1, 2]


def test_thread_safe_indices(tmp_path: Path) -> None:
    h = History(tmp_path / "history.jsonl", RunClock())

    def work(p: int) -> None:
        for i in range(200):
            h.complete(h.invoke(p, "send", p * 1000 + i), "ok", offset=i)

    threads = [threading.Thread(target=work, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.close()
    ops = read_history(tmp_path)
    assert [o["index"] for o in ops] == list(range(1600))


def test_rejects_unknown_type(tmp_path: Path) -> None:
    h = History(tmp_path / "history.jsonl", RunClock())
    with pytest.raises(ValueError):
        h.append(0, "done", "send", 1)


def test_clock_converts_unix_times() -> None:
    clock = RunClock(start_unix_ns=1_000)
    assert clock.from_unix(4_500) == 3_500


def test_lines_are_the_bytes_json_dumps_writes(tmp_path: Path) -> None:
    # The recorder writes with orjson (cheaper); what it writes must stay what
    # json.dumps(op, separators=(",", ":")) wrote, so that a seed's simulated run
    # replays byte for byte across the change and every reader reads it as before.
    h = History(tmp_path / "history.jsonl", RunClock())
    h.invoke("nemesis", "partition", {"A": ["B", "C"], 1: None}, note='a "q" \\ b')
    h.append_many([(100, "invoke", "send", 7, {"topic": "t", "partition": 0, "acks": "all"}),
                   (100, "ok", "send", 7, {"offset": 3, "appended": True, "nodes": ("A",)})])
    h.close()
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert len(lines) == 3
    for line, op in zip(lines, read_history(tmp_path), strict=True):
        assert line == json.dumps(op, separators=(",", ":"))
    assert json.loads(lines[0])["value"] == {"A": ["B", "C"], "1": None}
