"""contract.rundir, the one module that reads and writes a run directory: good
directories read back as written; a torn last line of an append-only file is the
prefix before it; a byte that is not UTF-8, bad JSON or a missing run.json is the
one RunDirError, naming run, file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checker.synth import RunBuilder
from contract.rundir import (
    RunDirError,
    RunDirWriter,
    TornTail,
    check_utf8,
    count_ops,
    discover,
    read_events,
    read_history,
    read_jsonl,
    read_log,
    read_meta,
    read_state,
    readable_meta,
    run_status,
    torn_tail,
    write_jsonl,
)


def small(tmp_path: Path) -> Path:
    rb = RunBuilder(tmp_path / "run")
    rb.send(0, 1, 0).send(0, 2, 1)
    rb.replica("A", [(0, 1), (0, 2)], role="leader")
    rb.replica("B", [(0, 1), (0, 2)], role="follower", leader="A")
    rb.final_read([1, 2])
    rb.event("A", "became-leader", topic="t", partition=0, leader_epoch=1)
    rb.event("B", "became-follower", topic="t", partition=0, leader_epoch=1)
    return rb.write()


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def error(call, *args) -> RunDirError:
    with pytest.raises(RunDirError) as e:
        call(*args)
    assert "\n" not in str(e.value) and e.value.exit_code == 2
    return e.value


# -- reading a good directory ---------------------------------------------------------


def test_reads_back_what_was_written(tmp_path: Path) -> None:
    run = small(tmp_path)
    assert read_meta(run) == json.loads((run / "run.json").read_text())
    assert read_history(run) == lines(run / "history.jsonl") and read_history(run)
    assert read_events(run) == lines(run / "events.jsonl") and read_events(run)
    assert read_log(run, "A") == lines(run / "replicas/A/log.jsonl")
    assert read_state(run, "B") == json.loads((run / "replicas/B/state.json").read_text())
    assert run_status(run) is None  # a synthetic run has none
    assert [torn_tail(run, rel) for rel in ("history.jsonl", "events.jsonl")] == [None, None]


def test_writer_keeps_run_json_and_replicas(tmp_path: Path) -> None:
    w = RunDirWriter(tmp_path, "r1")
    w.write_meta(status="running", protocol="0.11")
    w.write_replica("A", [{"topic": "t", "partition": 0, "offset": 0, "epoch": 0, "value": 1}],
                    {"node": "A", "partitions": []})
    with w.history.open("w") as f:
        f.write('{"index":0,"type":"invoke","f":"send"}\n')
    assert read_meta(w.path) == {"status": "running", "protocol": "0.11", "run_id": "r1",
                                 "format_version": 1}
    assert run_status(w.path) == "running" and count_ops(w.path) == 1
    assert read_log(w.path, "A")[0]["value"] == 1
    assert read_state(w.path, "A") == {"node": "A", "partitions": []}
    again = RunDirWriter.reopen(w.path)
    again.write_meta(status="crashed")
    assert read_meta(w.path)["status"] == "crashed" and read_meta(w.path)["protocol"] == "0.11"
    assert discover([tmp_path]) == [w.path.resolve()]


def test_missing_optional_files_read_as_empty(tmp_path: Path) -> None:
    run = small(tmp_path)
    (run / "events.jsonl").unlink()
    assert read_events(run) == []


# -- a torn last line is a prefix ---------------------------------------------------------


@pytest.mark.parametrize("rel", ["history.jsonl", "events.jsonl", "replicas/A/log.jsonl"])
def test_torn_last_line_is_the_prefix_before_it(tmp_path: Path, rel: str) -> None:
    run = small(tmp_path)
    path = run / rel
    whole = lines(path)
    with path.open("a") as f:
        f.write('{"index": 99, "ti')
    read = {"history.jsonl": read_history, "events.jsonl": read_events,
            "replicas/A/log.jsonl": lambda r: read_log(r, "A")}[rel]
    assert read(run) == whole
    assert torn_tail(run, rel) == TornTail(rel, len(whole) + 1, '{"index": 99, "ti')


def test_torn_inside_a_multibyte_character_is_torn_not_an_error(tmp_path: Path) -> None:
    run = small(tmp_path)
    whole = read_history(run)
    with (run / "history.jsonl").open("ab") as f:
        f.write('{"value": "é'.encode()[:-1])  # cut between the two bytes of é
    assert read_history(run) == whole
    t = torn_tail(run, "history.jsonl")
    assert t is not None and t.line == len(whole) + 1


def test_complete_last_line_without_newline_is_a_record(tmp_path: Path) -> None:
    run = small(tmp_path)
    path = run / "history.jsonl"
    path.write_text(path.read_text() + '{"index": 99}')
    assert read_history(run)[-1] == {"index": 99}
    assert torn_tail(run, "history.jsonl") is None


# -- the one error -------------------------------------------------------------------------


@pytest.mark.parametrize(("rel", "read"), [
    ("run.json", read_meta),
    ("history.jsonl", read_history),
    ("events.jsonl", read_events),
])
def test_a_byte_that_is_not_utf8_names_file_and_line(tmp_path: Path, rel: str, read) -> None:
    run = small(tmp_path)
    path = run / rel
    raw = path.read_bytes().split(b"\n")
    raw[1] = raw[1].replace(b'"', b'"\xff', 1)  # on line 2, after its first quote
    path.write_bytes(b"\n".join(raw))
    offset = b"\n".join(raw).index(b"\xff")
    e = error(read, run)
    assert (e.run, e.file, e.line) == (str(run), rel, 2)
    assert str(e) == f"run {run}: {rel} line 2: byte 0xff at offset {offset} is not UTF-8"


@pytest.mark.parametrize("rel", ["history.jsonl", "events.jsonl", "replicas/B/log.jsonl"])
def test_check_utf8_gives_the_same_error_as_reading(tmp_path: Path, rel: str) -> None:
    """The checker's look (Spark reads the lines) and read_jsonl agree, also past
    check_utf8's first block of lines."""
    run = small(tmp_path)
    path = run / rel
    check_utf8(run, rel)
    first = path.read_bytes()
    padding = b'{"pad": "' + b"x" * 1000 + b'"}\n'
    path.write_bytes(padding * 1100 + first.replace(b'"', b'"\xff', 1))
    e = error(check_utf8, run, rel)
    assert (e.file, e.line) == (rel, 1101)
    offset = len(padding) * 1100 + first.index(b'"') + 1
    assert f"byte 0xff at offset {offset} is not UTF-8" in str(e)
    assert str(e) == str(error(read_jsonl, run, rel))


def test_check_utf8_leaves_a_torn_last_line_to_torn_tail(tmp_path: Path) -> None:
    run = small(tmp_path)
    path = run / "history.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + '{"value": "café"}'.encode()[:-3])  # cut inside é
    check_utf8(run, "history.jsonl")
    assert torn_tail(run, "history.jsonl") is not None
    path.write_bytes(whole + b'{"value": "\xff"}')  # a complete line: no cut
    e = error(check_utf8, run, "history.jsonl")
    assert e.line == whole.count(b"\n") + 1 and str(e) == str(error(read_history, run))


def test_a_bad_line_before_the_last_is_an_error(tmp_path: Path) -> None:
    run = small(tmp_path)
    path = run / "history.jsonl"
    text = path.read_text().splitlines()
    text[0] = "not json"
    path.write_text("\n".join(text) + "\n")
    e = error(read_history, run)
    assert (e.file, e.line) == ("history.jsonl", 1) and "not JSON" in str(e)


def test_missing_run_json(tmp_path: Path) -> None:
    e = error(read_meta, tmp_path)
    assert str(e) == f"run {tmp_path}: not a run directory (no run.json)"
    assert run_status(tmp_path) is None and readable_meta(tmp_path) == {}
    e = error(RunDirWriter.reopen, tmp_path)
    assert "no run.json" in str(e)


def test_run_json_not_an_object_or_not_json(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("[1]\n")
    e = error(read_meta, tmp_path)
    assert (e.file, e.line, e.message) == ("run.json", 1, "expected a JSON object")
    (tmp_path / "run.json").write_text('{"status": "complete",\n "x": }')
    e = error(read_meta, tmp_path)
    assert (e.file, e.line) == ("run.json", 2) and "not valid JSON" in str(e)
    assert readable_meta(tmp_path) == {} and run_status(tmp_path) is None


def test_missing_state_json(tmp_path: Path) -> None:
    run = small(tmp_path)
    (run / "replicas/A/state.json").unlink()
    e = error(read_state, run, "A")
    assert (e.file, e.line) == ("replicas/A/state.json", None) and "missing file" in str(e)


@pytest.mark.parametrize("rel,read", [("history.jsonl", read_history),
                                      ("events.jsonl", read_events)])
def test_a_directory_in_place_of_a_jsonl_file(tmp_path: Path, rel: str, read) -> None:
    """An append-only file that cannot be read (here a directory) is a RunDirError
    naming it, not an IsADirectoryError (found by bench/fuzz.py's rundir target)."""
    run = small(tmp_path)
    (run / rel).unlink(missing_ok=True)
    (run / rel).mkdir()
    e = error(read, run)
    assert e.file == rel and "cannot be read: Is a directory" in str(e) and e.exit_code == 2


def test_discover_refuses_a_path_without_runs(tmp_path: Path) -> None:
    assert "no such run directory" in str(error(discover, [tmp_path / "nope"]))
    assert "no run directories" in str(error(discover, [tmp_path]))


def test_write_jsonl_is_compact_lines(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "x.jsonl", [{"a": 1}, {"b": [2, 3]}])
    assert (tmp_path / "x.jsonl").read_text() == '{"a":1}\n{"b":[2,3]}\n'
