"""The harness's own figures for scenario assertions (harness.run.assertions), from a
small hand-written history and event log: each figure measures what docs/scenarios.md
says it does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contract.rundir import RunDirError
from harness.run.assertions import harness_figures, judge

MS = 1_000_000  # history and event times are nanoseconds


def _write(run: Path, history: list[dict], events: list[dict]) -> Path:
    run.mkdir()
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in history))
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


def _send(process: int, t0: int, t1: int, type_: str, offset: int | None = None) -> list[dict]:
    done = {"process": process, "f": "send", "type": type_, "time": t1 * MS, "topic": "t",
            "partition": 0}
    if offset is not None:
        done["offset"] = offset
    return [{"process": process, "f": "send", "type": "invoke", "time": t0 * MS, "topic": "t",
             "partition": 0}, done]


def test_hw_stall_is_the_longest_wait_for_the_hw_to_pass_an_acked_record(tmp_path: Path):
    # Record 0 sent at 0, HW passes it at 10; record 1 sent at 20 (by another
    # process, interleaved), HW passes it only at 150: the stall is 130 ms.
    history = (_send(1, 0, 12, "ok", 0)[:1] + _send(2, 20, 160, "ok", 1)[:1]
               + _send(1, 0, 12, "ok", 0)[1:] + _send(2, 20, 160, "ok", 1)[1:])
    events = [{"type": "hw-advance", "node": "A", "topic": "t", "partition": 0,
               "time": t * MS, "new": new} for t, new in ((10, 1), (150, 2))]
    figures = harness_figures(_write(tmp_path / "r", history, events))
    assert figures["hw_stall_ms"] == 130.0


def test_unavailable_is_the_longest_span_without_an_ok_send(tmp_path: Path):
    # ok at 10; failed sends invoked at 20 and 40; the next ok completes at 520.
    history = (_send(1, 0, 10, "ok", 0) + _send(1, 20, 30, "fail")
               + _send(1, 40, 50, "info") + _send(1, 500, 520, "ok", 1))
    figures = harness_figures(_write(tmp_path / "r", history, []))
    assert figures["unavailable_ms"] == 500.0


def test_offline_and_rejoins_come_from_the_events(tmp_path: Path):
    part = {"topic": "t", "partition": 0}
    events = [
        {"type": "leader-offline", "node": "controller", "time": 100 * MS, **part},
        {"type": "leader-elected", "node": "controller", "time": 400 * MS, **part},
        {"type": "isr-shrink", "node": "A", "old": ["A", "B", "C"], "new": ["A"],
         "time": 500 * MS, **part},
        {"type": "isr-expand", "node": "A", "old": ["A"], "new": ["A", "B"], "time": 600 * MS,
         **part},
        # The controller's own ISR events do not count twice.
        {"type": "isr-expand", "node": "controller", "isr": ["A", "B"], "time": 601 * MS,
         **part},
    ]
    figures = harness_figures(_write(tmp_path / "r", [], events))
    assert figures["offline_ms"] == 300.0
    assert figures["isr_rejoins"] == 1, "B came back; C did not"


# -- judge: what it reads is read by contract.rundir ----------------------------


def _judged_run(tmp_path: Path, assertions: list) -> Path:
    """A run with run.json `assertions` and the checker's summary.json."""
    run = _write(tmp_path / "r", _send(1, 0, 10, "ok", 0), [])
    (run / "run.json").write_text(json.dumps({"run_id": "r", "protocol": "latest",
                                              "expect": [], "assertions": assertions},
                                             indent=2))
    (run / "check").mkdir()
    (run / "check" / "summary.json").write_text(json.dumps(
        {"checked_at": "now", "figures": {"sends": 1}}))
    return run


def test_judge_weighs_the_figures(tmp_path: Path) -> None:
    run = _judged_run(tmp_path, [{"figure": "sends", "ge": 2, "line": 7}])
    verdict, failed = judge(run, "valid")
    assert verdict == "invalid" and failed == ["assertion failed (scenario:7): sends >= 2, was 1"]
    assert json.loads((run / "check" / "assertions.json").read_text())["verdict"] == "invalid"


@pytest.mark.parametrize("bad", [{"figure": "sends", "ge": "many"}, {"figure": "sends"},
                                 {"ge": 1}, "sends >= 1", {"figure": "sends", "le": True}])
def test_an_assertion_not_as_the_harness_writes_it_names_run_json(tmp_path: Path, bad) -> None:
    """Not a comparison of a number with a str (a TypeError out of the batch): a
    RunDirError naming run.json and the line of `assertions`, and no judgement
    left from an earlier check."""
    run = _judged_run(tmp_path, [{"figure": "sends", "ge": 1}, bad])
    (run / "check" / "assertions.json").write_text("{}")
    with pytest.raises(RunDirError) as e:
        judge(run, "valid")
    line = (run / "run.json").read_text().split("\n").index('  "assertions": [') + 1
    assert (e.value.file, e.value.line) == ("run.json", line)
    assert str(e.value) == (f"run {run}: run.json line {line}: assertions[1]: expected a "
                            "figure's name and a number for one or more of eq, ne, lt, le, "
                            "gt, ge")
    assert not (run / "check" / "assertions.json").exists()


def test_a_summary_json_not_utf8_names_its_line_and_offset(tmp_path: Path) -> None:
    run = _judged_run(tmp_path, [{"figure": "sends", "ge": 1}])
    path = run / "check" / "summary.json"
    raw = b'{\n  "checked_at": "now",\n  "note": "caf\xe9",\n  "figures": {"sends": 1}\n}\n'
    path.write_bytes(raw)
    offset = raw.index(b"\xe9")
    with pytest.raises(RunDirError) as e:
        judge(run, "valid")
    assert str(e.value) == (f"run {run}: check/summary.json line 3: byte 0xe9 at offset "
                            f"{offset} is not UTF-8")


def test_a_record_without_the_fields_a_figure_reads_names_its_line(tmp_path: Path) -> None:
    """The checker does not need an event's `new` or a send's `time` to be a
    number; the figures do (a KeyError or TypeError out of the batch before)."""
    run = _judged_run(tmp_path, [{"figure": "hw_stall_ms", "le": 100}])
    ok = {"type": "hw-advance", "node": "A", "topic": "t", "partition": 0, "time": 5 * MS,
          "new": 1}
    (run / "events.jsonl").write_text(json.dumps(ok) + "\n\n" + json.dumps(
        {**ok, "new": None}) + "\n")
    with pytest.raises(RunDirError) as e:
        judge(run, "valid")
    assert str(e.value) == (f"run {run}: events.jsonl line 3: a hw-advance event without a "
                            "numeric 'new'")
    (run / "events.jsonl").write_text("")
    history = _send(1, 0, 10, "ok", 0)
    history[1]["time"] = "10 ms"
    (run / "history.jsonl").write_text("".join(json.dumps(o) + "\n" for o in history))
    with pytest.raises(RunDirError) as e:
        judge(run, "valid")
    assert (e.value.file, e.value.line) == ("history.jsonl", 2)
    assert e.value.message == "a send op without a numeric 'time'"


def test_a_process_or_topic_json_holds_as_a_list_is_still_a_key(tmp_path: Path) -> None:
    """The checker reads `process` and `topic` as text, so JSON may hold them as a
    list; the figures key on them too (an unhashable list was a TypeError)."""
    history = _send(1, 0, 10, "ok", 0) + _send(1, 20, 30, "fail") + _send(1, 500, 520, "ok", 1)
    for op in history:
        op["process"], op["topic"] = ["p", 1], ["t"]
    figures = harness_figures(_write(tmp_path / "r", history, []))
    assert figures["unavailable_ms"] == 500.0
