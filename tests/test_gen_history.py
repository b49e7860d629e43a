"""bench/gen_history.py, the synthetic runs the checker's tests and benchmarks
read: its templated lines are the JSON json.dumps would write (the run-directory
format, docs/run-directory.md), and a batch (--runs) is one run directory per
run, each with its own seed and injected.json, resumed when interrupted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

import gen_history  # noqa: E402  (bench/ is scripts, not a package)

from contract import HISTORY, LOG, REPLICAS, RUN_JSON  # noqa: E402


def _lines_are_canonical_json(path: Path) -> list[dict]:
    recs = []
    with path.open() as fh:
        for line in fh:
            rec = json.loads(line)
            assert json.dumps(rec, separators=(",", ":")) + "\n" == line, line
            recs.append(rec)
    return recs


def test_a_run_is_canonical_json_with_every_kind_injected(tmp_path: Path) -> None:
    run = tmp_path / "gen"
    injected = gen_history.generate(run, 30_000, set(gen_history.KINDS), seed=3)
    assert sorted(i["kind"] for i in injected) == sorted(gen_history.KINDS)
    history = _lines_are_canonical_json(run / HISTORY)
    assert [r["index"] for r in history] == list(range(len(history)))
    times = [r["time"] for r in history]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert abs(len(history) - 30_000) < 300
    lost = next(i for i in injected if i["kind"] == "lost-write")
    sent = {r["value"] for r in history if r["f"] == "send" and r["type"] == "ok"}
    for broker in ("A", "B"):
        log = _lines_are_canonical_json(run / REPLICAS / broker / LOG)
        assert [r["offset"] for r in log] == list(range(len(log)))
        assert lost["value"] in sent and log[lost["offset"]]["value"] != lost["value"]
    meta = json.loads((run / RUN_JSON).read_text())
    assert meta["workload"]["ops"] == len(history) and meta["seed"] == 3


def test_a_batch_is_one_run_per_seed_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "batch"
    cmd = [sys.executable, "bench/gen_history.py", str(out), "--ops", "40000", "--runs", "4",
           "--jobs", "2", "--seed", "5", "--inject", "lost-write,duplicate"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    runs = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert runs == ["run-000", "run-001", "run-002", "run-003"]
    params = json.loads((out / gen_history.PARAMS).read_text())
    assert params["complete"] and params["runs_ops"] == 10_000
    assert gen_history.batch_complete(out, gen_history.batch_params(
        40_000, 4, {"lost-write", "duplicate"}, 5))
    for k, name in enumerate(runs):
        meta = json.loads((out / name / RUN_JSON).read_text())
        assert (meta["run_id"], meta["seed"]) == (name, 5 + k)
        kinds = {i["kind"] for i in json.loads((out / name / "injected.json").read_text())}
        assert kinds == {"lost-write", "duplicate"}
    assert "4/4 runs" in done.stderr

    # Interrupted: one run lost its last file. Run again, only that one is written.
    (out / "run-002" / "injected.json").unlink()
    kept = {n: (out / n / HISTORY).stat().st_mtime_ns for n in runs}
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "3 complete runs kept" in again.stderr
    assert (out / "run-002" / "injected.json").is_file()
    for n in runs:
        same = (out / n / HISTORY).stat().st_mtime_ns == kept[n]
        assert same == (n != "run-002"), n


def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["--inject", "no-such-kind"], ["--ops", "10", "--runs", "11"]):
        done = subprocess.run([sys.executable, "bench/gen_history.py", str(tmp_path), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("gen_history.py: error: ")
