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

from reports import trace as trace_table


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
    assert lines[1].split()[:4] == ["time", "round", "node", "what"]
    assert "A LEO/HW" in lines[1] and "leader's view (LEO)" in lines[1]
    # The legend under the table says what the notation means.
    for legend in trace_table.LEGEND:
        assert legend in lines
    assert any(ln.startswith("LEO/HW: a replica's log end offset") and "* marks the "
               "partition's leader" in ln for ln in lines)
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


def _row(table: list[dict], node: str, starts: str) -> int:
    (i,) = [i for i, r in enumerate(table) if r["node"] == node and r["what"].startswith(starts)]
    return i


def test_trace_table_has_the_truncation_and_the_hw_moves(tmp_path):
    """kip101-hw-truncation-loss under 0.10: the rows say why B drops from 2/1 to 1/1
    (its truncation to its HW, rule hw) and that A's HW reaches 2, besides the
    fetch rounds; each row has every replica's LEO/HW after it."""
    r = _trace(tmp_path, "kip101-hw-truncation-loss", "--protocol", "0.10", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    table = out["table"]
    assert out["legend"] == list(trace_table.LEGEND)
    assert all(set(x["replicas"]) == {"A", "B", "C"} for x in table)
    a_hw = _row(table, "A", "A's HW moves 1 → 2")
    assert table[a_hw]["replicas"]["A"] == "2/2*" and table[a_hw]["round"] is None
    for node in ("B", "C"):
        assert any(x["what"] == f"{node}'s HW moves 0 → 1" for x in table)
    b_trunc = _row(table, "B", "B truncates to offset 1 by rule hw")
    assert "removing offset 1" in table[b_trunc]["what"]
    assert table[b_trunc - 1]["replicas"]["B"] == "2/1"
    assert table[b_trunc]["replicas"]["B"] == "1/1"
    became = _row(table, "B", "B becomes follower of C (epoch 1)")
    assert became < b_trunc
    elected = _row(table, "controller", "elects B leader of epoch 2")
    assert b_trunc < elected
    a_trunc = _row(table, "A", "A truncates to offset 1 by rule offset_out_of_range")
    assert table[a_trunc]["replicas"]["A"] == "1/1"
    assert any(x["what"].startswith("A acknowledges value 1 (m1) at offset 1") for x in table)
    # The fetch rounds are rows too, their answers in words.
    fetch = [x for x in table if x["round"] is not None]
    assert [x["round"] for x in fetch] == [x["round"] for x in out["rows"]]
    assert any(x["what"] == "B fetches from offset 1: 1 record, leader's HW 1" for x in fetch)


def test_trace_says_an_epoch_answer_in_words(tmp_path):
    """0.11's OffsetsForLeaderEpoch answer names no epoch (-1): the table says so."""
    r = _trace(tmp_path, "kip101-hw-truncation-loss", "--protocol", "0.11", "--json")
    assert r.returncode == 0, r.stderr
    table = json.loads(r.stdout)["table"]
    asks = _row(table, "A", "A asks B where its epoch 0 ends (OffsetsForLeaderEpoch)")
    answer = table[asks + 1]
    assert answer["what"] == ("A gets the answer to OffsetsForLeaderEpoch: end offset 2 "
                              "(0.11–1.1 answers name no epoch, KIP-101)")
    assert "epoch -1" not in " ".join(x["what"] for x in table)
    assert not any("truncates" in x["what"] for x in table if x["node"] in ("A", "B"))


def test_the_table_words_a_delay_nemesis_op():
    """A delay's value is no grudge (its "for" is seconds, not a node list): the
    table words it, where it failed the check that computes the table (a sim
    matrix's batch has such runs)."""
    from checker import tracetable
    op = {"index": 3, "time": 5, "process": "nemesis", "type": "info", "f": "delay",
          "value": {"from": ["B", "C"], "to": ["A"], "for": 1.3, "requests": ["replica-fetch"]}}
    grudge = {"index": 4, "time": 6, "process": "nemesis", "type": "info", "f": "partition",
              "value": {"A": ["B", "C"]}}
    rows = tracetable.rows([], [], [op, grudge], "t", 0, ["A", "B", "C"])
    assert [r["what"] for r in rows] == [
        "delay from B, C; to A; for 1.3; requests replica-fetch", "partition A from B, C"]


@pytest.mark.parametrize("fault", ["kill", "stop", "power-cycle"])
def test_a_node_is_down_in_the_table_from_its_fault_until_it_starts(fault: str) -> None:
    """A power cycle leaves its node down until `start`, as a kill does (the table
    once showed a power-cycled node up at once)."""
    from checker import tracetable
    fetch = {"time": 1, "round": 1, "topic": "t", "partition": 0, "follower": "B",
             "request": "replica-fetch", "offset": 0, "answer": "",
             "leader": None, "replicas": {"A": {"role": "leader", "leo": 1, "hw": 1},
                                          "B": {"role": "follower", "leo": 1, "hw": 0}}}
    hit = {"index": 0, "time": 2, "process": "nemesis", "type": "info", "f": fault,
           "value": ["B"]}
    send = {"index": 1, "time": 3, "process": 0, "type": "ok", "f": "send", "value": 7,
            "topic": "t", "partition": 0, "node": "A", "offset": 1}
    start = {"index": 2, "time": 4, "process": "nemesis", "type": "info", "f": "start",
             "value": ["B"]}
    rows = tracetable.rows([fetch], [], [hit, send, start], "t", 0, ["A", "B"])
    assert [r["replicas"]["B"] for r in rows] == ["1/0", "down", "down", "down"]
