"""`isrlab nightly`: a bad config is `FILE:LINE: what` and exit 2 with nothing started;
two nights of a small matrix end to end (real brokers, one Spark batch a night),
each with its index and JUnit, and the trend page over both from the Parquet
results table."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import free_port
from test_cli import isrlab, one_line_error

from harness.chaos.nightly import load_config

SMALL = """\
seed: 21
defaults:
  time_limit: 2s
  runs: 1
  rate: 300
matrix:
  - name: gate
    versions: latest
    faults: kill
    sets:
      misr2: {min.insync.replicas: 2}
    allow: []
"""


@pytest.mark.parametrize("text, line, message", [
    (SMALL.replace("    faults: kill", "    fualts: kill"), 9,
     "unknown key 'fualts' in matrix row 1; allowed: name, versions, faults"),
    (SMALL.replace("faults: kill", "faults: kill,explode"), 9, "unknown fault 'explode'"),
    (SMALL.replace("versions: latest", "versions: [latest, '9.9']"), 8,
     "unknown version '9.9'"),
    (SMALL.replace("time_limit: 2s", "time_limit: soon"), 3, "time limit 'soon' does not parse"),
    (SMALL.replace("allow: []", "allow: [lost-writes]"), 12,
     "unknown anomaly kind 'lost-writes'"),
    (SMALL.replace("{min.insync.replicas: 2}", "{min.insync.replica: 2}"), 11,
     "unknown broker or controller config key"),
    (SMALL.replace("  runs: 1", "  rusn: 1"), 4, "unknown key 'rusn' in defaults"),
    (SMALL.replace("versions: latest", "versions: [latest, '2.0', latest]"), 8,
     "versions lists 'latest' twice"),
    (SMALL.replace("faults: kill", "faults: [kill, pause, kill]"), 9, "faults lists 'kill' twice"),
    (SMALL.replace("    allow: []", "    allow: []\n    acks: [1, all, '1']"), 13,
     "acks lists 1 twice"),
    # Found by bench/fuzz.py: 300 x 300 x 2 x 2 cells took 100 s and 300 MB to list.
    (SMALL.replace("versions: latest", "versions: [latest, '4.0', '3.7', '2.8']")
     .replace("sets:\n      misr2: {min.insync.replicas: 2}",
              "sets: {" + ", ".join(f"s{i}: {{}}" for i in range(2600)) + "}"), 7,
     "row 'gate' has 10400 cells (versions x faults x acks x sets x backends); a night has "
     "at most 10000"),
    (SMALL.replace("    allow: []", "    allow: []\n    client: kafka-pyhton"), 13,
     "unknown client 'kafka-pyhton'; choose one of confluent-kafka, kafka-python, kcat"),
    (SMALL.replace("    allow: []", "    allow: []\n    client: kcat\n    backends: sim"), 13,
     "client kcat: a real Kafka client needs real brokers; not on the sim backend"),
    (SMALL.replace("    allow: []", "    allow: []\n    client_config: {acks: 1}"), 13,
     "client_config needs a client"),
    (SMALL.replace("    allow: []", "    allow: []\n    client: confluent-kafka\n"
                                    "    client_config: {no.such.setting: 1}"), 14,
     'confluent-kafka refused the producer settings: KafkaError{code=_INVALID_ARG,val=-186,'
     'str="No such configuration property: "no.such.setting""}'),
])
def test_bad_config_is_file_line_and_starts_nothing(tmp_path: Path, text: str, line: int,
                                                   message: str) -> None:
    cfg = tmp_path / "night.yaml"
    cfg.write_text(text)
    results = tmp_path / "results"
    err = one_line_error(isrlab("nightly", str(cfg), "--results", str(results)))
    assert err.startswith(f"isrlab: {cfg}:{line}: ") and message in err, err
    assert not results.exists()


def test_a_row_runs_on_a_real_client(tmp_path: Path) -> None:
    """`client` and `client_config` (a row's or the defaults'): every cell's chaos
    runs drive that client with those settings, as `isrlab chaos --client
    --client-config` does."""
    from harness.chaos.runs import chaos_run

    cfg = tmp_path / "night.yaml"
    cfg.write_text(SMALL.replace("  rate: 300", "  rate: 300\n  client: confluent-kafka\n"
                                 "  client_config: {enable.idempotence: true}"))
    (cell,) = load_config(cfg).cells
    scenario, _ = chaos_run(cell.config, 21)
    assert scenario.workload["client"] == "confluent-kafka"
    assert scenario.workload["config"] == {"enable.idempotence": True}


def test_config_matrix_expands() -> None:
    cfg = load_config(Path(__file__).resolve().parent.parent / "nightly" / "sample.yaml")
    names = [c.name for c in cfg.cells]
    assert len(names) == len(set(names)) == 2 + 3 * 2
    gate = [c for c in cfg.cells if c.row == "soundness"]
    assert all(c.allow == [] and c.config.broker_config == {"min.insync.replicas": 2}
               for c in gate)
    old = [c for c in cfg.cells if c.protocol == "0.10"]
    assert {c.set_name for c in old} == {"default", "unclean"}
    assert all(c.allow == ["lost-write", "divergence"] for c in old)


@pytest.mark.spark
@pytest.mark.e2e
def test_two_nights_end_to_end_with_a_trend(tmp_path: Path) -> None:
    cfg = tmp_path / "night.yaml"
    cfg.write_text(SMALL)
    results = tmp_path / "results"
    outs = []
    for _ in range(2):
        r = isrlab("nightly", str(cfg), "--results", str(results), "--port", str(free_port()),
                   "--json")
        assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
        outs.append(json.loads(r.stdout))
        time.sleep(1.1)  # night ids are UTC seconds
    assert outs[0]["night"] != outs[1]["night"]
    for out in outs:
        assert Path(out["index"]).is_file() and Path(out["junit"]).is_file()
        assert "<testsuite" in Path(out["junit"]).read_text()
        (run,) = out["runs"]
        assert run["verdict"] == "valid" and run["not_allowed"] == []
        assert run["throughput"] and run["throughput"] > 0
        assert Path(run["report"]).is_file()
        night = json.loads((Path(out["index"]).parent / "night.json").read_text())
        assert night["seed"] == 21 and night["runs"][0]["cell"] == run["cell"]
    trend = (results / "trend.html").read_text()
    assert all(out["night"] in trend for out in outs)
    assert trend.count('href="nights/') >= 2 and "report" in trend
    assert "2 night(s), 2 run(s)" in trend
    # The chart: inline SVG over both nights, a bar per night with its figures.
    (svg,) = re.findall(r'<svg class="trend".*?</svg>', trend, flags=re.S)
    for out in outs:
        assert f"<title>{out['night']}: 1 run(s), 0 with anomalies, 0 not allowed</title>" in svg
    assert "no loss" in svg and "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
