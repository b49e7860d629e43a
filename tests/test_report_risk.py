"""checker.reportrisk's driver side: the became-follower windows and the offsets
the events name, read from events.jsonl; and which sends the story of what kept
the records at risk needs (the runs' ends, the first values each line names)."""

from __future__ import annotations

import json
from pathlib import Path

from checker.reportrisk import RunRisk, scan, wanted_offsets
from contract import EVENTS, STORY_VALUES


def test_windows_and_marked_offsets_come_from_the_events(tmp_path: Path) -> None:
    part = {"topic": "t", "partition": 1}
    events = [
        {"time": 5, "node": "B", "type": "became-follower", **part, "leo": 40, "hw": 10,
         "leader": "A", "leader_epoch": 1},
        {"time": 6, "node": "C", "type": "became-follower", **part, "leo": 7, "hw": 7,
         "leader": "A", "leader_epoch": 1},  # nothing above its HW: no window
        {"time": 7, "node": "B", "type": "hw-advance", **part, "hw": 12},  # names no cut
        {"time": 8, "node": "B", "type": "truncate", **part, "to": 30, "from": 40},
        {"time": 9, "node": "B", "type": "epoch-response", **part, "end_offset": 33},
        {"time": 10, "node": "A", "type": "became-leader", **part, "leo": 41, "hw": 11},
    ]
    (tmp_path / EVENTS).write_text(
        "".join(json.dumps(e) + "\n" + ("\n" if i == 0 else "") for i, e in enumerate(events)))
    got = scan(tmp_path)
    # ev-<index among the non-blank lines>, as the report names events
    assert got.windows == [("ev-0", "t", 1, 5, 10, 40)]
    assert got.marks == {"t/1": {40, 10, 7, 30, 33, 41, 11}}


def test_the_sends_wanted_are_the_runs_ends_and_the_first_values() -> None:
    risk = RunRisk([("ev-3", "t", 0, 100, 0, 50)], {"t/0": {45}})
    runs = {"ev-3": [[2, 4], [10, 30]]}
    # 2, 3 of the first run and 10..13 of the second are the first six it names
    assert STORY_VALUES == 6
    assert wanted_offsets(risk, runs) == {"t/0": {2, 3, 4, 10, 11, 12, 13, 30, 45}}
