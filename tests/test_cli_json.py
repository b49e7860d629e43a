"""One --json schema for reproduce, check, chaos, swarm and matrix (issue 45,
item 9; docs/json.md, docs/json-schema.json), errors as JSON objects, and the
terminal's words and tally (items 2 and 8). Sim backend, small runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT

SCHEMA = json.loads((ROOT / "docs" / "json-schema.json").read_text())


def isrlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=900)


def valid_json(r: subprocess.CompletedProcess) -> dict:
    """stdout as one JSON object that the schema accepts, its exit_code the status."""
    out = json.loads(r.stdout)
    jsonschema.validate(out, SCHEMA)
    assert out["exit_code"] == r.returncode, (out, r.stderr[-2000:])
    return out


@pytest.mark.parametrize(("args", "says"), [
    (["reproduce", "kip101-hw-truncation-loss", "--protocol", "9"],  # argparse's
     "argument --protocol: invalid choice: '9'"),
    (["reproduce", "no-such-scenario", "--protocol", "0.10"],  # the command's own
     "unknown scenario 'no-such-scenario'"),
    (["swarm", "--protocol", "0.10"], "the following arguments are required: --runs"),
])
def test_an_error_under_json_is_a_json_object(args: list[str], says: str) -> None:
    r = isrlab(*args, "--json")
    assert r.returncode == 2
    out = valid_json(r)
    assert out["command"] == args[0] and says in out["error"]
    (line,) = r.stderr.strip().splitlines()  # the stderr line stays
    assert says in line and line.startswith("isrlab: ")


def test_the_schema_refuses_what_it_replaced() -> None:
    """The shapes of before: a swarm's seeds as a [first, last] list, runs as a count."""
    old = {"command": "swarm", "exit_code": 0, "seed": 0, "runs": 5, "seeds": [0, 5],
           "tally": {"runs": 5, "data": {}, "documentation": {}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(old, SCHEMA)


@pytest.mark.spark
def test_reproduce_and_check_say_what_happened_to_the_data(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    r = isrlab("reproduce", "kip101-hw-truncation-loss", "--protocol", "0.10", "--backend",
               "sim", "--runs-dir", str(runs))
    assert r.returncode == 1, r.stderr[-3000:]  # an anomaly: 1, as docs/exit-codes.md says
    lines = r.stdout.splitlines()
    # The progress lines, then the outcome in data terms; the word valid nowhere.
    said = [line for line in lines if not line.startswith("[")]
    assert said[0] == "data lost (lost-write) — reproduced as documented"
    assert not any("verdict" in line or "valid" in line for line in said), said
    assert "(seed 0)" in r.stdout  # the seed, printed
    (run,) = [d for d in runs.iterdir() if d.is_dir()]
    summary = json.loads((run / "check" / "summary.json").read_text())
    assert summary["verdict"] == "valid"  # kept, for compatibility
    assert (summary["data"], summary["documentation"]) == ("data lost",
                                                           "reproduced as documented")

    r = isrlab("check", str(run), "--json")
    out = valid_json(r)
    assert out["command"] == "check" and out["exit_code"] == 0  # check: as documented
    (entry,) = out["runs"]
    assert entry["found"] == {"lost-write": 1} and entry["expected"] == ["lost-write"]
    assert entry["seed"] == 0 and entry["scenario"] == "kip101-hw-truncation-loss"
    assert out["tally"] == {"runs": 1, "data": {"data lost": 1},
                            "documentation": {"as documented": 1}}

    r = isrlab("check", str(run))
    text = [line for line in r.stdout.splitlines() if not line.startswith("[")]
    assert text == [f"data lost (lost-write) — reproduced as documented  {run}",
                    "1 run: 1 data lost; 1 as documented"]
    # The explanations behind --verbose (the report has them always).
    verbose = isrlab("check", str(run), "--verbose").stdout
    assert "  lost-write: " in verbose and "acknowledged" in verbose


@pytest.mark.spark
@pytest.mark.parametrize("command", [
    ["reproduce", "kip101-hw-truncation-loss", "--protocol", "0.11", "--backend", "sim",
     "--runs", "2"],
    ["chaos", "--protocol", "0.10", "--backend", "sim", "--time-limit", "5s", "--runs", "1",
     "--seed", "3"],
    ["matrix", "--backend", "sim", "--scenario", "kip101-hw-truncation-loss",
     "--protocol", "0.10"],
    ["swarm", "--protocol", "0.10", "--runs", "2", "--seed", "4", "--time-limit", "5s",
     "--master", "local[2]"],
], ids=lambda c: c[0])
def test_every_command_prints_the_one_schema(tmp_path: Path, command: list[str]) -> None:
    r = isrlab(*command, "--runs-dir", str(tmp_path), "--json")
    out = valid_json(r)
    assert out["command"] == command[0]
    assert out["runs"] and all(Path(x["run_dir"]).is_dir() for x in out["runs"])
    assert out["tally"]["runs"] == len(out["runs"])
    assert all(x["data"] for x in out["runs"])
    seed = int(command[command.index("--seed") + 1]) if "--seed" in command else 0
    assert out["seed"] == seed
    # Run i of a batch uses seed S+i, in every command.
    assert sorted(x["seed"] for x in out["runs"]) == list(range(seed, seed + len(out["runs"])))
    if command[0] == "swarm":
        assert out["seeds"] == {"first": 4, "count": 2}
