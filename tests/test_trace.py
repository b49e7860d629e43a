"""`isrlab trace`: a scenario on the simulator, fetch round by fetch round
(docs/catalogue.md#hw-lags-one-fetch): the follower's HW reaches the leader's one
round after the data."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT
from test_cli import one_line_error


def _trace(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "trace", *args,
                           "--runs-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_trace_shows_the_hw_one_round_behind_the_data(tmp_path):
    r = _trace(tmp_path, "hw-lags-one-fetch", "--protocol", "0.10", "--seed", "2", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert rows and all(x["topic"] == "t" and x["partition"] == 0 for x in rows)
    # Each time a follower's fetch brings records, its HW is the leader's HW as it
    # was before that fetch: below its new LEO. Its next round brings the HW.
    lagging = 0
    for i, row in enumerate(rows):
        f = row["follower"]
        mine = row["replicas"][f]
        if row["request"] != "replica-fetch" or "record(s)" not in row["answer"] \
                or row["answer"].startswith("0 "):
            continue
        assert mine["hw"] < mine["leo"], row
        lagging += 1
        later = [x for x in rows[i + 1:] if x["follower"] == f]
        if later:
            assert later[0]["replicas"][f]["hw"] >= mine["leo"], (row, later[0])
    assert lagging >= 2
    lead = [x["leader"] for x in rows if x["leader"]]
    assert lead and set(lead[-1]["remote_leo"]) == {"B", "C"}


def test_trace_prints_a_table_and_keeps_trace_jsonl(tmp_path):
    r = _trace(tmp_path, "kip101-hw-truncation-loss", "--protocol", "0.10", "--quiet")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].split()[:4] == ["round", "time", "fetch", "answer"]
    assert "A LEO/HW" in lines[1] and "leader's view (LEO)" in lines[1]
    run = lines[-1].removeprefix("run: ")
    assert (tmp_path / run.split("/")[-1] / "trace.jsonl").is_file()


def test_trace_of_an_unknown_scenario_is_exit_2(tmp_path):
    r = _trace(tmp_path, "no-such-scenario", "--protocol", "0.10")
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["--topic", "nosuch"], "trace: no topic 'nosuch'; the scenario has topic 't', partition 0"),
    (["--partition", "7"], "trace: topic 't' has no partition 7; the scenario has topic 't', "
                           "partition 0"),
    (["--partition", "-1"], "trace: topic 't' has no partition -1; the scenario has topic 't', "
                            "partition 0"),
    (["--partition", "one"], "argument --partition: 'one' is not a partition number"),
])
def test_a_partition_the_scenario_lacks_is_one_line_before_the_run(tmp_path, args, said):
    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "trace", "hw-lags-one-fetch",
                        "--protocol", "0.10", *args, "--runs-dir", str(runs)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = one_line_error(r)
    assert said in line, line
    assert not runs.exists()  # nothing ran
