"""Durations (harness.duration): one grammar for every command and file that takes
one -- `--time-limit` of chaos and swarm, a nightly file's `time_limit`, a
scenario's `for` and `every` -- with an upper bound; bad ones are one line and
exit 2 before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT
from test_cli import isrlab, one_line_error

from harness.duration import MAX_SECONDS, DurationError, parse_duration
from harness.scenario.loader import load_scenario
from harness.yamlloc import ScenarioError


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90.0), ("90s", 90.0), ("20m", 1200.0), ("1h", 3600.0), ("1h30m", 5400.0),
    ("1.5h", 5400.0), ("2m0.5s", 120.5), ("100ms", 0.1), (" 60s ", 60.0), ("1h2m3s4ms", 3723.004),
    (2, 2.0), (0.25, 0.25), ("168h", MAX_SECONDS),
])
def test_the_grammar_accepts(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "said"), [
    ("1h2", "'1h2' is ambiguous: '2' after '1h' has no unit"),
    ("99999999999999s", "is more than 7 days (604800s), the longest allowed"),
    ("168h1s", "is more than 7 days"),
    ("0s", "'0s' must be more than 0"),
    ("30m1h", "give the units largest first, each once"),
    ("1m1m", "give the units largest first, each once"),
    ("sixty", "'sixty' does not parse; give e.g. 90 (seconds), 90s, 20m, 1h30m or 100ms"),
    ("-1", "'-1' does not parse"),
    ("1e3", "'1e3' does not parse"),
    ("8d", "'8d' does not parse"),
    ("", "'' does not parse"),
    (True, "True is not a duration"),
    (float("inf"), "is more than 7 days"),
    (float("nan"), "must be more than 0"),
])
def test_the_grammar_refuses(text: str | float, said: str) -> None:
    with pytest.raises(DurationError, match="^time limit ") as e:
        parse_duration(text, "time limit")
    assert said in str(e.value) and "\n" not in str(e.value)


def test_a_long_bad_value_is_cut_short_in_the_message() -> None:
    with pytest.raises(DurationError) as e:
        parse_duration("9" * 10_000 + "x")
    assert len(str(e.value)) < 200


@pytest.mark.parametrize("command", [
    ["chaos", "--protocol", "0.10", "--backend", "sim"],
    ["swarm", "--protocol", "0.10", "--runs", "1"],
])
@pytest.mark.parametrize(("limit", "said"), [
    ("1h2", "argument --time-limit: time limit '1h2' is ambiguous"),
    ("99999999999999s", "argument --time-limit: time limit '99999999999999s' is more than 7 days"),
])
def test_time_limit_of_every_command_is_one_line_before_anything(
        tmp_path: Path, command: list[str], limit: str, said: str) -> None:
    runs = tmp_path / "runs"
    line = one_line_error(isrlab(*command, "--time-limit", limit, "--runs-dir", str(runs)))
    assert said in line, line
    assert not runs.exists()


def test_nightly_time_limit_uses_the_same_grammar(tmp_path: Path) -> None:
    src = (ROOT / "nightly" / "sample.yaml").read_text(encoding="utf-8")
    assert "time_limit:" in src
    lines = src.splitlines()
    n = next(i for i, x in enumerate(lines) if "time_limit:" in x)
    indent = lines[n][:len(lines[n]) - len(lines[n].lstrip())]
    lines[n] = f"{indent}time_limit: 1h2"
    bad = tmp_path / "bad.yaml"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    line = one_line_error(isrlab("nightly", str(bad), "--results", str(tmp_path / "res")))
    assert line.startswith(f"isrlab: {bad}:{n + 1}: time limit '1h2' is ambiguous"), line


@pytest.mark.parametrize(("value", "said"), [
    ("1h2", "pause for '1h2' is ambiguous"),
    ("8d", "pause for '8d' does not parse"),
    ("200h", "pause for '200h' is more than 7 days"),
])
def test_scenario_durations_use_the_same_grammar(tmp_path: Path, value: str, said: str) -> None:
    src = (ROOT / "harness" / "scenario" / "catalogue" / "follower-gc-pause.yaml").read_text()
    assert "for: 100ms" in src
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.replace("for: 100ms", f"for: {value}", 1), encoding="utf-8")
    n = 1 + next(i for i, x in enumerate(src.splitlines()) if "for: 100ms" in x)
    with pytest.raises(ScenarioError) as e:
        load_scenario(bad)
    assert e.value.line == n and said in str(e.value), str(e.value)


@pytest.mark.parametrize(("flag", "what"), [
    ("--interval", "interval"), ("--duration", "duration"), ("--gap", "gap"),
    ("--quiet-period", "quiet period"), ("--linger", "linger")])
@pytest.mark.parametrize(("value", "said"), [("1h2", "is ambiguous"), ("inf", "does not parse"),
                                             ("8d", "does not parse")])
def test_chaos_duration_options_use_the_same_grammar(tmp_path: Path, flag: str, what: str,
                                                     value: str, said: str) -> None:
    runs = tmp_path / "runs"
    line = one_line_error(isrlab("chaos", "--protocol", "0.10", "--time-limit", "10s", flag,
                                 value, "--runs-dir", str(runs)))
    assert f"argument {flag}: {what} '{value}' {said}" in line, line
    assert not runs.exists()


def test_nightly_interval_uses_the_same_grammar(tmp_path: Path) -> None:
    src = (ROOT / "nightly" / "sample.yaml").read_text(encoding="utf-8")
    lines = src.splitlines()
    n = next(i for i, x in enumerate(lines) if "time_limit:" in x)
    indent = lines[n][:len(lines[n]) - len(lines[n].lstrip())]
    lines.insert(n + 1, f"{indent}interval: 2m3")
    bad = tmp_path / "bad.yaml"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    line = one_line_error(isrlab("nightly", str(bad), "--results", str(tmp_path / "res")))
    assert line.startswith(f"isrlab: {bad}:{n + 2}: interval '2m3' is ambiguous"), line
