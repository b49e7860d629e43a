"""Bad input: each a RunDirError naming run, file and line -- the run is set aside
with the verdict error (the rest of a batch is checked: test_checker_verdicts.py);
truncated last lines are checked as the prefix they are and reported, never
dropped silently."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from checker.api import check_runs
from checker.synth import RunBuilder
from contract.rundir import RunDirError


def small(rb: RunBuilder) -> Path:
    rb.send(0, 1, 0).send(0, 2, 1)
    rb.replica("A", [(0, 1), (0, 2)], role="leader")
    rb.replica("B", [(0, 1), (0, 2)], role="follower", leader="A")
    rb.final_read([1, 2])
    return rb.write()


def refused(path: Path) -> RunDirError:
    """A path that holds no run: the whole check is refused."""
    with pytest.raises(RunDirError) as e:
        check_runs([path])
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"run {path.resolve()}")
    assert e.value.exit_code == 2
    return e.value


def error_of(path: Path) -> RunDirError:
    """The run is set aside: verdict error, exit status 2, and its check/summary.json
    says why (no earlier result stands for it)."""
    (r,) = check_runs([path])
    assert (r.verdict, r.exit_code) == ("error", 2) and r.error is not None
    msg = str(r.error)
    assert "\n" not in msg and msg.startswith(f"run {path.resolve()}")
    assert r.error.exit_code == 2 and r.anomalies == []
    summary = json.loads((path / "check" / "summary.json").read_text())
    assert (summary["verdict"], summary["exit_code"], summary["error"]) == ("error", 2, msg)
    assert (summary["error_file"], summary["error_line"]) == (r.error.file, r.error.line)
    assert json.loads((path / "check" / "anomalies.json").read_text()) == []
    return r.error


def replace_line(path: Path, n: int, text: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[n - 1] = text + "\n"
    path.write_text("".join(lines))


# -- found before Spark starts ------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    assert "no such run directory" in str(refused(tmp_path / "nope"))


def test_tree_without_runs(tmp_path: Path) -> None:
    assert "no run directories" in str(refused(tmp_path))


@pytest.mark.parametrize("rel", ["history.jsonl", "replicas/B/log.jsonl", "replicas/A/state.json"])
def test_missing_file(tmp_path: Path, rel: str) -> None:
    run = small(RunBuilder(tmp_path / "run"))
    (run / rel).unlink()
    e = error_of(run)
    assert e.file == rel and "missing file" in str(e)


def test_run_json_not_json(tmp_path: Path) -> None:
    run = small(RunBuilder(tmp_path / "run"))
    (run / "run.json").write_text('{\n  "protocol": "0.10",\n  "expect": [,]\n}\n')
    e = error_of(run)
    assert (e.file, e.line) == ("run.json", 3) and "not valid JSON" in str(e)


def test_unknown_protocol(tmp_path: Path) -> None:
    run = small(RunBuilder(tmp_path / "run", protocol="0.9"))
    e = error_of(run)
    assert e.file == "run.json" and "unknown protocol '0.9'" in str(e)
    assert (
        e.line
        == json.dumps(json.loads((run / "run.json").read_text()), indent=2)
        .split("\n")
        .index('  "protocol": "0.9",')
        + 1
    )


def test_unknown_run_status(tmp_path: Path) -> None:
    rb = RunBuilder(tmp_path / "run")
    rb.meta["status"] = "aborted"
    e = error_of(small(rb))
    assert e.file == "run.json" and e.line is not None
    assert "unknown run status 'aborted' (known: running, complete, incomplete, crashed)" \
        in str(e)


def test_unknown_expected_kind(tmp_path: Path) -> None:
    run = small(RunBuilder(tmp_path / "run", expect=["lost-writes"]))
    assert "unknown anomaly kind 'lost-writes'" in str(error_of(run))


def test_unknown_role(tmp_path: Path) -> None:
    run = small(RunBuilder(tmp_path / "run"))
    p = run / "replicas/B/state.json"
    p.write_text(p.read_text().replace('"follower"', '"candidate"'))
    e = error_of(run)
    assert e.file == "replicas/B/state.json" and "unknown role 'candidate'" in str(e)
    assert e.line is not None


@pytest.mark.parametrize(("field", "value", "message"), [
    ("epoch_cache", [[0]], "partitions[0].epoch_cache: expected [[epoch, start offset], ...]"),
    ("epoch_cache", [["0", 0]], "partitions[0].epoch_cache: expected [[epoch, start offset]"),
    ("isr", True, "partitions[0].isr: expected a list of brokers"),
    ("leader_epoch", "1", "partitions[0].leader_epoch: expected an integer or null"),
    ("hw", 1 << 63, "partitions[0].hw: expected an integer"),
    ("partition", 1 << 31, "partitions[0].partition: expected an integer"),
])
def test_a_state_field_not_as_written(tmp_path: Path, field: str, value, message: str) -> None:
    """Fields the checker hands to Spark as typed columns: a ValueError or
    TypeError out of the batch before (found by fuzzing the run-directory reader)."""
    run = small(RunBuilder(tmp_path / "run"))
    p = run / "replicas/A/state.json"
    state = json.loads(p.read_text())
    state["partitions"][0][field] = value
    p.write_text(json.dumps(state))
    e = error_of(run)
    assert e.file == "replicas/A/state.json" and message in str(e)


@pytest.mark.parametrize("rel", ["history.jsonl", "events.jsonl", "replicas/A/log.jsonl"])
def test_not_utf8(tmp_path: Path, rel: str) -> None:
    """Spark would read the byte as U+FFFD; the run is set aside before it starts."""
    rb = RunBuilder(tmp_path / "run")
    rb.event("A", "became-leader", topic="t", partition=0, leader_epoch=1)
    rb.event("B", "became-follower", topic="t", partition=0, leader_epoch=1)
    run = small(rb)
    raw = (run / rel).read_bytes().split(b"\n")
    raw[1] = raw[1].replace(b'"t"', b'"t\xff"', 1)
    (run / rel).write_bytes(b"\n".join(raw))
    e = error_of(run)
    offset = b"\n".join(raw).index(b"\xff")
    assert (e.file, e.line) == (rel, 2)
    assert str(e).endswith(f": {rel} line 2: byte 0xff at offset {offset} is not UTF-8")


# -- found by the Spark scan ---------------------------------------------------


@pytest.mark.spark
def test_a_history_byte_not_utf8_is_that_error_while_spark_checks_the_rest(tmp_path: Path
                                                                          ) -> None:
    """Spark's readers take a byte that is not UTF-8 for U+FFFD: in a nemesis op's
    process it read as `unknown op f="partition"` (a wrong reason), inside a send's
    label it passed unseen (a field the checker does not parse). Each such run is
    set aside naming the line and byte offset (contract.rundir.check_utf8, before
    Spark reads the lines), while the run beside them is checked by Spark -- its
    last line cut inside a character, which Spark and Python both decode to
    U+FFFD: a cut-off line, not a bad byte."""
    good = small(RunBuilder(tmp_path / "good"))
    with (good / "history.jsonl").open("ab") as fh:
        fh.write('{"index": 99, "time": 99000000, "process": 0, "label": "café'.encode()[:-1])
    rb = RunBuilder(tmp_path / "nemesis")
    rb._op("nemesis", "invoke", "partition", value={"A": ["B"]})
    rb._op("nemesis", "info", "partition", value={"A": ["B"]})
    nemesis = small(rb)
    rb = RunBuilder(tmp_path / "label")
    sent = {"topic": "t", "partition": 0, "value": 7, "acks": "all", "label": "m0"}
    rb._op(0, "invoke", "send", **sent)
    rb._op(0, "info", "send", **sent, error="timeout")  # else a valid run
    label = small(rb)
    spoilt = {nemesis: (b'"process": "nemesis", "type": "invoke", "f": "partition"',
                        b'"process": "nemes\xffis", "type": "invoke", "f": "partition"'),
              label: (b'"label": "m0"', b'"label": "m\xff0"')}
    for run, (old, new) in spoilt.items():
        raw = (run / "history.jsonl").read_bytes()
        assert old in raw
        (run / "history.jsonl").write_bytes(raw.replace(old, new, 1))
    results = {r.run_dir: r for r in check_runs([tmp_path])}
    ok = results[good.resolve()]
    assert (ok.verdict, ok.error) == ("valid", None)
    assert [(t["file"], t["line"]) for t in ok.summary["truncated"]] == [("history.jsonl", 7)]
    for run in spoilt:
        r = results[run.resolve()]
        raw = (run / "history.jsonl").read_bytes()
        at = raw.index(b"\xff")
        line = raw.count(b"\n", 0, at) + 1
        assert (r.verdict, r.error.file, r.error.line) == ("error", "history.jsonl", line)
        assert str(r.error) == (f"run {run.resolve()}: history.jsonl line {line}: byte 0xff "
                                f"at offset {at} is not UTF-8")


@pytest.mark.spark
@pytest.mark.parametrize(
    ("rel", "line", "text", "expected"),
    [
        ("history.jsonl", 2, "this is not json", "not JSON"),
        (
            "history.jsonl",
            3,
            '{"index": 2, "time": 3, "process": 0, "type": "done", '
            '"f": "send", "topic": "t", "partition": 0, "value": 2}',
            'unknown op type "done"',
        ),
        (
            "history.jsonl",
            2,
            '{"index": 1, "time": 2, "process": 0, "type": "ok", '
            '"f": "send", "topic": "t", "partition": "zero", "value": 1, "offset": 0}',
            "field 'partition' must be int, got 'zero'",
        ),
        (
            "history.jsonl",
            2,
            '{"index": 1, "time": 2, "process": 0, "type": "ok", '
            '"f": "send", "topic": "t", "partition": 0, "value": 1}',
            "ok send without 'offset'",
        ),
        (
            "history.jsonl",
            2,
            '{"index": 1, "time": 2, "process": 1, "type": "ok", "f": "poll", '
            '"topic": "t", "partition": 0, "offset": 0, "hw": 1, "records": [[0, 1], [1]]}',
            "poll record is not [offset, value]",
        ),
        (
            "replicas/A/log.jsonl",
            2,
            '{"topic": "t", "partition": 0, "offset": 1}',
            "missing field 'value'",
        ),
    ],
)
def test_bad_line(tmp_path: Path, rel: str, line: int, text: str, expected: str) -> None:
    run = small(RunBuilder(tmp_path / "run"))
    replace_line(run / rel, line, text)
    e = error_of(run)
    assert (e.file, e.line) == (rel, line)
    assert expected in str(e)


@pytest.mark.spark
def test_truncated_last_line_checks_prefix(tmp_path: Path) -> None:
    rb = RunBuilder(tmp_path / "run", expect=[])
    rb.send(0, 1, 0).send(0, 2, 1)
    rb.replica("A", [(0, 1)], role="leader")
    rb.replica("B", [(0, 1)], role="follower", leader="A")
    rb.final_read([1])
    rb.send(0, 3, 1)  # its ok line will be cut short
    run = rb.write()
    hist = run / "history.jsonl"
    text = hist.read_text()
    hist.write_text(text[: text.rstrip("\n").rfind("\n") + 1 + 25])  # cut the last line
    n_lines = text.count("\n")
    (r,) = check_runs([run])
    # The complete prefix is checked: value 2 (acked at offset 1) is a lost write.
    assert [a["witness"]["value"] for a in r.anomalies] == [2]
    assert r.verdict == "invalid"
    (t,) = r.summary["truncated"]
    assert (t["file"], t["line"]) == ("history.jsonl", n_lines)
    assert any("truncated" in n for n in r.summary["notes"])
    assert r.summary["figures"]["ops"] == n_lines - 1


def test_a_missing_replica_directory_is_an_error_not_a_verdict_without_it(tmp_path: Path) -> None:
    """A broker run.json names whose replicas/<broker>/ is gone: the run is an error
    (exit 2, one line), never judged without that broker's log -- here a real sim run
    of the divergence 0.10 shows, whose divergence lived in A's log."""
    import subprocess
    import sys

    from conftest import ROOT

    from harness.progress import Progress
    from harness.run.runner import RunOptions, run_scenario
    from harness.scenario.loader import find_scenario, load_scenario

    rec = run_scenario(load_scenario(find_scenario("kip101-power-loss-divergence")),
                       RunOptions(protocol="0.10", backend="sim", seed=1, runs_dir=tmp_path),
                       Progress(quiet=True))
    assert rec.error is None and (rec.run_dir / "replicas" / "A" / "log.jsonl").is_file()
    shutil.rmtree(rec.run_dir / "replicas" / "A")
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "check", str(rec.run_dir),
                           "--quiet", "--no-server"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "replicas/A/: missing: broker A is named in run.json" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "diverged" not in proc.stdout
    assert "1 not checked; 1 run unreadable" in proc.stdout


def test_a_synthetic_run_without_a_named_brokers_directory(tmp_path: Path) -> None:
    run = small(RunBuilder(tmp_path / "run", brokers=("A", "B", "C")))
    assert (run / "replicas" / "C" / "log.jsonl").read_text() == ""  # never started: empty
    shutil.rmtree(run / "replicas" / "B")
    e = error_of(run)
    assert e.file == "replicas/B/" and "cluster.brokers" in str(e)


@pytest.mark.parametrize(("field", "value", "shape"), [
    ("cluster", "x", "an object"), ("workload", 5, "an object"),
    ("broker_config", [], "an object"), ("chaos", 5, "an object"),
    ("labels", 5, "an object"), ("fault_windows", 5, "a list"), ("nemesis", {}, "a list"),
    ("seed", "x", "an integer"), ("cluster", {"brokers": "AB"}, "list of broker names"),
])
def test_a_run_json_field_of_another_shape_is_the_runs_error(tmp_path: Path, field: str,
                                                              value, shape: str) -> None:
    """Each run.json field the checker or the reports read is checked for its shape
    before Spark starts: one line naming the field, never a traceback mid-check."""
    run = small(RunBuilder(tmp_path / "run"))
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, field: value}, indent=2))
    e = error_of(run)
    assert e.file == "run.json" and f"{field}: " in str(e) and shape in str(e)
