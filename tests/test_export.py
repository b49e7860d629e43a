"""`isrlab export`: a run as a scenario file that makes the same run.

On the simulator a run is a function of its scenario and seed, so an export is
right when the file it writes, run again with the run's seed, makes the same
history, events and replica logs byte for byte -- checked for every catalogue
scenario, variant and reachable version, and for a scenario with every step
kind and fault shape -- and the same verdict (real Spark). The history is read
as `check` reads it: a line check sets the run aside for is refused the same
way, a cut-off tail and an unfinished run are said. Output paths are checked
before any work.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT
from test_cli import isrlab, one_line_error
from tiers import needs, spawned

from broker.protocol import VERSIONS
from contract.rundir import RunDirError, read_history
from harness.backends.base import CONTROLLER
from harness.chaos.export import export_scenario, partition_shape
from harness.progress import Progress
from harness.run.runner import RunOptions, run_scenario
from harness.scenario.loader import Scenario, all_variants, list_scenarios, load_scenario

# Every step kind, every partition shape, both delays, every process fault.
EVERY_STEP = """\
name: every-step
description: Every step kind and fault shape of the scenario language.
cluster:
  brokers: [A, B, C]
  topics:
    - {name: t, partitions: 1, replicas: [[A, B, C]]}
expect:
  "0.10": []
  latest: []
assert:
  - {figure: sends_ok, ge: 3}
steps:
  - produce: {label: m0}
  - wait: {node: A, hw: 1}
  - consume: {n: 1}
  - admin: {op: flush, node: [A, B]}
  - load: {rate: 50, producers: 1}
  - sleep: 0.3
  - load: {burst: 3, every: 100ms}
  - sleep: 0.3
  - load: stop
  - pause: {node: C, for: 100ms}
  - sleep: {until: 1.5}
  - partition: {isolate: A}
  - partition: {isolate: controller}
  - partition: {split: [[A], [B, C]]}
  - partition: halves
  - partition: bridge
  - partition: {cut: [[A], [controller]]}
  - partition: {cut: [[A, B], [C]]}
  - heal
  - delay: {from: B, to: controller, for: 200ms}
  - deliver
  - delay: {from: A, to: [B, C], requests: [replica-fetch]}
  - deliver
  - kill: B
  - start: B
  - stop: C
  - start: C
  - pause: [A, B]
  - resume: [A, B]
  - power-cycle: A
  - start: A
  - wait: {node: A, running: true}
  - wait: {node: controller, event: broker-registered, broker: A}
  - wait: {node: B, leo: {ge: 1}}
  - recover
  - produce: 2
  - final-read: {timeout: 30}
"""

RUN_FILES = ("history.jsonl", "events.jsonl")


def _run(scenario: Scenario, protocol: str, seed: int, root: Path) -> Path:
    rec = run_scenario(scenario, RunOptions(protocol=protocol, backend="sim", seed=seed,
                                            runs_dir=root), Progress(quiet=True))
    assert rec.error is None, rec.error
    return rec.run_dir


def _files(run: Path) -> dict[str, bytes]:
    """The run's recorded files: history, events and every replica log."""
    names = [*RUN_FILES, *sorted(str(p.relative_to(run)) for p in run.glob("replicas/*/log.jsonl"))]
    return {n: (run / n).read_bytes() for n in names}


def _export_and_rerun(run: Path, root: Path) -> Path:
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    exported = export_scenario(run)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{exported.name}.yaml"
    path.write_text(exported.text, encoding="utf-8")
    return _run(load_scenario(path), meta["protocol"], meta["seed"], root / "again")


def _catalogue() -> list[Scenario]:
    """Every shipped row the simulator runs (a real Kafka client needs real brokers)."""
    return [v for s in list_scenarios() for v in all_variants(s)
            if not v.workload.get("client")]


@pytest.mark.parametrize("scenario", _catalogue(), ids=lambda s: s.run_name)
def test_every_catalogue_run_exports_as_a_scenario_that_makes_the_same_run(
        tmp_path: Path, scenario: Scenario) -> None:
    """Under every version the variant's path exists in."""
    versions = [p for p in VERSIONS if scenario.reachable_at(p)]
    assert versions
    for i, protocol in enumerate(versions):
        run = _run(scenario, protocol, i, tmp_path / protocol)
        again = _export_and_rerun(run, tmp_path / protocol)
        assert _files(again) == _files(run), (scenario.run_name, protocol)


def test_every_step_kind_and_fault_shape_exports_and_makes_the_same_run(tmp_path: Path) -> None:
    src = tmp_path / "every-step.yaml"
    src.write_text(EVERY_STEP, encoding="utf-8")
    run = _run(load_scenario(src), "latest", 4, tmp_path / "runs")
    again = _export_and_rerun(run, tmp_path)
    assert _files(again) == _files(run)
    exported = load_scenario(next(tmp_path.glob("every-step-latest-*.yaml")))
    assert [s.kind for s in exported.steps] == [s.kind for s in load_scenario(src).steps]
    assert [a["figure"] for a in exported.assertions] == ["sends_ok"]


def test_a_chaos_run_off_the_simulator_exports_each_fault_the_history_has(tmp_path: Path) -> None:
    """A chaos run of a real backend is exported from its history: every nemesis op
    -- each partition shape, delay and deliver, power-cycle, the timed resume,
    recover's ops -- as the step that makes it, in order, at its time."""
    src = tmp_path / "every-step.yaml"
    src.write_text(EVERY_STEP, encoding="utf-8")
    run = _run(load_scenario(src), "latest", 4, tmp_path / "runs")
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta.update(backend="local", scenario=None, chaos={"seed": 4})  # as a local chaos run
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    out = tmp_path / "chaos.yaml"
    out.write_text(export_scenario(run).text, encoding="utf-8")
    scenario = load_scenario(out)
    faults = [s for s in scenario.steps if s.kind not in ("sleep", "final-read")]
    ops = [o for o in read_history(run) if o["process"] == "nemesis" and o["type"] == "invoke"]
    assert len(faults) == len(ops) > 20
    for step, op in zip(faults, ops, strict=True):
        assert step.kind == op["f"], (step, op)
        if op["f"] == "partition":
            assert step.args["grudge"] == op["value"]
        elif op["f"] == "delay":
            assert {k: v for k, v in step.args.items() if k != "plan" and v is not None} \
                == op["value"]
        elif isinstance(op["value"], list):
            assert step.args["nodes"] == op["value"]
    untils = [s.args["until"] for s in scenario.steps if s.kind == "sleep"]
    assert untils == sorted(untils) and scenario.steps[-1].kind == "final-read"


SHAPES = ["halves", "bridge", {"isolate": "A"}, {"isolate": "controller"},
          {"split": [["A"], ["B", "C"]]}, {"split": [["A", "controller"], ["B"], ["C"]]},
          {"cut": [["A"], ["controller"]]}, {"cut": [["A"], ["B"]]},
          {"cut": [["B", "C"], ["A", "controller"]]}, {"cut": [["A", "B", "C"], ["controller"]]}]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_partition_shape_is_exported_as_one_that_makes_its_grudge(tmp_path: Path,
                                                                        shape) -> None:
    """The loader's grudge of each shape, exported and loaded again, is the same
    grudge (the KIP-101 scenario's `cut: [[B], [A]]` could not be exported)."""
    def grudge_of(raw) -> dict:
        path = tmp_path / "p.yaml"
        path.write_text(PARTITION.format(json.dumps(raw)), encoding="utf-8")
        return load_scenario(path).steps[0].args["grudge"]

    grudge = grudge_of(shape)
    assert grudge
    assert grudge_of(partition_shape(grudge, ["A", "B", "C"])) == grudge


PARTITION = """\
name: p
description: one partition
cluster: {{brokers: [A, B, C], topics: [{{name: t, replicas: [[A, B, C]]}}]}}
expect: {{"0.10": [], latest: []}}
steps:
  - partition: {}
"""


def test_a_grudge_no_shape_makes_is_one_line(tmp_path: Path) -> None:
    from harness.errors import UsageError

    lopsided = {"A": ["B"], "B": ["A", "C"], "C": ["B", CONTROLLER], CONTROLLER: ["C"]}
    with pytest.raises(UsageError, match="is no scenario shape"):
        partition_shape(lopsided, ["A", "B", "C"], tmp_path)


# -- the history as check reads it -------------------------------------------------


@pytest.fixture(scope="module")
def kip101_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kip101")
    scenario = load_scenario(ROOT / "harness" / "scenario" / "catalogue"
                             / "kip101-hw-truncation-loss.yaml")
    return _run(scenario, "0.10", 1, root)


def _copy_with_line(run: Path, dest: Path, n: int, line: bytes) -> Path:
    """The run with its history's line n (1-based) replaced by `line`."""
    shutil.copytree(run, dest)
    lines = (dest / "history.jsonl").read_bytes().split(b"\n")
    lines[n - 1] = line
    (dest / "history.jsonl").write_bytes(b"\n".join(lines))
    return dest


# (line to corrupt, its replacement, what check and export say of it)
CORRUPT = [
    (3, b'{"index":2,"time":garbage', "not JSON"),
    (3, b'{"index":2,"time":1,"process":0,"type":"invoke","f":"send",\xff}', "not UTF-8"),
    (5, b'{"index":4,"time":155064237,"process":"nemesis","type":"invoke","f":"partitoin",'
        b'"value":{"A":["B"],"B":["A"]}}', 'unknown nemesis op f="partitoin"'),
    (5, b'{"index":4,"time":155064237,"process":"nemesis","f":"partition","value":{}}',
     "missing field 'type'"),
    (1, b'{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":"x",'
        b'"topic":"t","partition":0}', 'send value must be an integer, got "x"'),
    (2, b'{"index":1,"time":"soon","process":0,"type":"ok","f":"send","value":0,'
        b'"topic":"t","partition":0,"offset":0}', "field 'time' must be int, got 'soon'"),
]


@pytest.mark.parametrize(("n", "line", "said"), CORRUPT, ids=[c[2] for c in CORRUPT])
def test_a_history_line_check_refuses_is_refused_by_export(
        tmp_path: Path, kip101_run: Path, n: int, line: bytes, said: str) -> None:
    """One line naming the run, the file and the line; exit 2; nothing written (it
    once exported `steps: [final-read]`, exit 0, every fault after the line gone)."""
    run = _copy_with_line(kip101_run, tmp_path / "run", n, line)
    out = tmp_path / "out.yaml"
    msg = one_line_error(isrlab("export", str(run), "--out", str(out)))
    assert msg.startswith(f"isrlab: run {run}: history.jsonl line {n}: "), msg
    assert said in msg, msg
    assert not out.exists()


def test_a_cut_off_last_line_and_an_unfinished_run_are_said(tmp_path: Path,
                                                            kip101_run: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(kip101_run, run)
    with (run / "history.jsonl").open("ab") as f:
        f.write(b'{"index":99,"time":1')  # an interrupted write
    n = (run / "history.jsonl").read_bytes().count(b"\n") + 1
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta["status"] = "incomplete"
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    r = isrlab("export", str(run))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [
        f"isrlab: run {run}: history.jsonl line {n} is cut off (an interrupted write); "
        "exported the lines before it",
        f"isrlab: run {run}: the run did not finish (status incomplete; `isrlab check` calls "
        "it incomplete): exported what it recorded"], r.stderr
    assert f"# Note: history.jsonl line {n} is cut off" in r.stdout
    assert "# Note: the run did not finish (status incomplete" in r.stdout


@pytest.mark.spark
def test_export_and_check_refuse_the_same_lines_with_the_same_words(
        tmp_path: Path, kip101_run: Path) -> None:
    """The check of each corrupt copy sets it aside (verdict error) with exactly the
    error export refuses it with."""
    from checker.api import check_runs

    runs = [_copy_with_line(kip101_run, tmp_path / f"run{i}", n, line)
            for i, (n, line, _) in enumerate(CORRUPT)]
    results = check_runs(runs)
    for run, r in zip(runs, results, strict=True):
        assert r.verdict == "error", (run, r.verdict)
        with pytest.raises(RunDirError) as e:
            export_scenario(run)
        assert str(e.value) == str(r.error), (str(e.value), str(r.error))


@pytest.mark.spark
def test_every_catalogue_export_replays_with_the_same_verdict(tmp_path: Path) -> None:
    """Each catalogue scenario and variant at the oldest version it reaches, checked;
    its export (expecting what the check found) run again and checked: the same
    verdict and the same kinds."""
    from checker.api import check_runs
    from harness.cli.batchcheck import judged

    runs = [_run(s, next(p for p in VERSIONS if s.reachable_at(p)), 0, tmp_path / "first")
            for s in _catalogue()]
    first = [judged(r) for r in check_runs(runs)]  # in the order given
    again = [_export_and_rerun(run, tmp_path / "export") for run in runs]
    second = [judged(r) for r in check_runs(again)]
    assert len(first) == len(second) == len(runs) >= 16
    for a, b in zip(first, second, strict=True):
        assert a.verdict == "valid", (a.run_dir, a.verdict)  # the catalogue holds on sim
        assert (b.verdict, sorted(b.summary.get("found") or {})) == \
            (a.verdict, sorted(a.summary.get("found") or {})), (a.run_dir, b.run_dir)


# -- output paths, before any work ---------------------------------------------------


@pytest.mark.parametrize(("out", "said"), [
    ("DIR", "is a directory; give a file path"),
    ("DIR/missing/x.yaml", "missing does not exist"),
    ("/sys/isrlab-export.yaml", "cannot write /sys/isrlab-export.yaml: /sys: "),
    ("FILE/x.yaml", "is not a directory"),
])
@pytest.mark.parametrize("command", ["export", "shrink"])
def test_an_output_path_that_cannot_be_written_is_one_line_before_any_work(
        tmp_path: Path, kip101_run: Path, command: str, out: str, said: str) -> None:
    (tmp_path / "FILE").write_text("x")
    out = out.replace("DIR", str(tmp_path)).replace("FILE", str(tmp_path / "FILE"))
    msg = one_line_error(isrlab(command, str(kip101_run), "--out", out))
    # Before any work: shrink used to simulate and check (a JVM) first.
    assert [x for x in spawned() if needs(x)] == []
    assert msg.startswith("isrlab: error: argument --out: ") and said in msg, msg
    assert not (kip101_run.parent / f"{kip101_run.name}-shrink").exists()


@pytest.mark.parametrize("nemesis", [["a step"], [{"kind": "wait", "args": {}}],
                                     [{"kind": "explode", "args": {}}]], ids=str)
def test_run_json_steps_that_are_malformed_are_one_line(tmp_path: Path, kip101_run: Path,
                                                        nemesis: list) -> None:
    run = tmp_path / "run"
    shutil.copytree(kip101_run, run)
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta["nemesis"] = nemesis
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    msg = one_line_error(isrlab("export", str(run)))
    assert msg.startswith(f"isrlab: {run}/run.json: "), msg
