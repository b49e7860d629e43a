"""The tier marks are enforced (tests/tiers.py): an unmarked test that starts a
broker process, a Docker engine call or a JVM fails, naming what it started; the
same test with its mark passes; what a child Python process starts counts too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tiers import needs, violations

pytest_plugins = ["pytester"]
TESTS = Path(__file__).resolve().parent

_INNER = '''
import subprocess, sys
import pytest

def test_starts_a_broker_process():
    # argparse answers --help and exits: a broker process, started and gone.
    subprocess.run([sys.executable, "-m", "broker.server", "--help"], check=True,
                   capture_output=True)

@pytest.mark.e2e
def test_starts_a_broker_process_marked():
    subprocess.run([sys.executable, "-m", "broker.server", "--help"], check=True,
                   capture_output=True)

def test_a_child_python_starts_it():
    code = ("import subprocess, sys; subprocess.run([sys.executable, '-m', "
            "'broker.controller', '--help'], check=True, capture_output=True)")
    subprocess.run([sys.executable, "-c", code], check=True)

def test_starts_nothing_heavy():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
'''


@pytest.mark.parametrize("line, mark", [
    ("exec /usr/bin/python3 -I -S -c X 1 -m broker.server --id A", "e2e"),
    ("exec python3 -m broker.controller --listen 127.0.0.1:1", "e2e"),
    ("exec /opt/jdk/bin/java -cp x org.apache.spark.deploy.SparkSubmit", "spark"),
    ("exec /x/pyspark/bin/spark-submit pyspark-shell", "spark"),
    ("exec python3 -m checker.server --dir d", "spark"),
    ("connect /tmp/isrlab-test-checker-1/server.sock", "spark"),
    ("connect /nonexistent/docker.sock", None),  # no engine there: nothing to start
    ("exec docker ps", "docker"),
    ("exec git status", None),
    ("exec chromium --headless", None),
    ("connect /tmp/other.sock", None),
])
def test_what_each_spawn_needs(line: str, mark: str | None) -> None:
    assert needs(line) == mark


def test_a_marked_test_is_out_of_the_fast_tier_whichever_mark() -> None:
    lines = ["exec python3 -m broker.server", "exec docker run x"]
    assert violations(lines, {"spark"}) == {}
    assert violations(lines, {"parametrize"}) == {"e2e": lines[0], "docker": lines[1]}


def test_an_unmarked_test_that_starts_a_broker_fails(pytester: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The inner session logs its own tests' spawns, not into this test's log.
    monkeypatch.delenv("ISRLAB_TEST_SPAWN_LOG", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ["PYTHONPATH"]]))
    pytester.makeini("[pytest]\nmarkers =\n  e2e: x\n")
    pytester.makepyfile(test_inner=_INNER)
    result = pytester.runpytest_subprocess("-p", "tiers", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_starts_a_broker_process _*",
        "unmarked test started*needs @pytest.mark.e2e: exec * -m broker.server --help",
        "*_ test_a_child_python_starts_it _*",
        "unmarked test started*needs @pytest.mark.e2e: exec * -m broker.controller --help",
    ])


def test_an_engine_socket_that_is_there_needs_docker(tmp_path: Path) -> None:
    sock = tmp_path / "docker.sock"
    sock.write_text("")
    assert needs(f"connect {sock}") == "docker"
