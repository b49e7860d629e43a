"""The CLI as a user meets it (subprocesses): bad input is one line and exit 2,
an interrupted run leaves no process behind."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, TESTS, alive, child_env, free_port
from tiers import needs, spawned


def isrlab(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, env=child_env(), cwd=ROOT, timeout=300, **kw)


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains text (a run's own tmp dir)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state != "Z":
            found.append(int(entry))
    return found


def one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_scenarios_lists_the_three() -> None:
    r = isrlab("scenarios")
    assert r.returncode == 0, r.stderr
    # One line per scenario (NAME: description), then its source and one line of
    # expectations per variant, indented.
    names = [line.split(":")[0] for line in r.stdout.splitlines() if not line.startswith(" ")]
    assert names == ["acks1-failover-loss", "alter-partition-stale-incarnation",
                     "follower-gc-pause", "hw-lags-one-fetch",
                     "idempotent-producer-leader-change", "isr-flapping-lag-messages",
                     "kafka-7415-epoch-gap-divergence",
                     "kip101-hw-truncation-loss", "kip101-power-loss-divergence",
                     "kip279-unclean-divergence", "kip320-stale-metadata-divergence",
                     "last-replica-standing-loss", "min-isr-prevents-loss",
                     "unclean-election-loss"]
    assert "    expect 0.10 lost-write · 0.11+ none" in r.stdout.splitlines()
    assert "    [unclean-on] expect all lost-write" in r.stdout.splitlines()
    assert "    source: docs/catalogue.md#unclean-election-loss" in r.stdout.splitlines()
    # A scenario whose path exists only from 2.7: its range and why, and its
    # earlier versions shown as not reachable, never as an expectation.
    at = r.stdout.splitlines().index("    source: docs/catalogue.md#"
                                     "alter-partition-stale-incarnation")
    reach, expect = r.stdout.splitlines()[at + 1:at + 3]
    assert reach.startswith("    reachable from 2.7: AlterIsr (KIP-497) first sends")
    assert expect == "    expect 0.10+ not reachable · 2.7+ lost-write · 3.7+ none"
    # ... and the one whose path exists only from 0.11 (KIP-98's idempotent producer).
    assert sum("reachable from" in line for line in r.stdout.splitlines()) == 2
    assert "    reachable from 0.11: no idempotent producer before KIP-98 (Kafka 0.11.0), " \
           "so no sequence numbers to resend with" in r.stdout.splitlines()


def test_a_reader_that_leaves_stdout_is_no_traceback() -> None:
    """`isrlab scenarios | head -0`: its stdout's reader is gone before it writes. It
    says so in one line on stderr and exits 141 (a shell's status for SIGPIPE),
    without a traceback, also not from Python's flush at exit."""
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "scenarios"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=child_env(), cwd=ROOT)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # no reader left: the first write to the pipe fails
    err = p.stderr.read()
    assert p.wait(timeout=120) == 141, err
    assert err == "isrlab: stdout closed by its reader; the rest of the output dropped\n"


def test_unknown_scenario() -> None:
    assert "unknown scenario 'no-such'" in one_line_error(
        isrlab("reproduce", "no-such", "--protocol", "0.10"))


def test_a_newline_in_a_given_path_stays_on_one_line(tmp_path: Path) -> None:
    """The message quotes the path; its newline does not split the error line
    (found by bench/fuzz.py's command-line target)."""
    err = one_line_error(isrlab("nightly", str(tmp_path / "a\nb.yaml"), "--results",
                                str(tmp_path / "results")))
    assert err == f"isrlab: {tmp_path}/a b.yaml: cannot read: No such file or directory"
    err = one_line_error(isrlab("scenarios", "a\nb"))
    assert err == "isrlab: error: unrecognized arguments: a b"
    (tmp_path / "a\nb").mkdir()
    err = one_line_error(isrlab("shrink", str(tmp_path / "a\nb")))  # a RunDirError
    assert err == f"isrlab: run {tmp_path}/a b: not a run directory (no run.json)"


@pytest.mark.parametrize("command", [["check"], ["collect"], ["shrink"], ["export"],
                                     ["reproduce", "--protocol", "latest"]])
def test_a_path_too_long_for_a_file_is_no_such_run(command: list[str]) -> None:
    """pathlib's tests raise ENAMETOOLONG where os.path's say no; a name over 255
    bytes is one line, exit 2 (found by bench/fuzz.py's command-line target)."""
    err = one_line_error(isrlab(*command[:1], "x" * 300, *command[1:]))
    assert "no such run directory" in err or "not a run directory" in err \
        or "unknown scenario" in err, err


def test_matrix_jobs_beyond_the_last_port(tmp_path: Path) -> None:
    """--jobs so many that slot k's port (PORT + k) passes 65535 is one line, exit 2,
    before any run (--jobs 10^20 took all memory: bench/fuzz.py's command lines)."""
    err = one_line_error(isrlab("matrix", "--backend", "sim", "--jobs", "99999999999999999999",
                                "--runs-dir", str(tmp_path / "runs"), "--no-server"))
    assert "needs ports up to" in err and "the last port is 65535" in err
    assert not (tmp_path / "runs").exists()


def test_matrix_ssh_with_jobs_leaves_no_batch(tmp_path: Path) -> None:
    """--jobs > 1 on ssh (the hosts file fixes the ports) is one line, exit 2, before
    the batch's directory is made."""
    (tmp_path / "id_test").write_text("not read\n")
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("defaults: {user: kafka, key: id_test}\ncontroller: {address: 10.0.0.10}\n"
                     "brokers:\n  - {address: 10.0.0.11}\n  - {address: 10.0.0.12}\n"
                     "  - {address: 10.0.0.13}\n")
    r = isrlab("matrix", "--backend", "ssh", "--hosts", str(hosts), "--jobs", "2",
               "--scenario", "kip101-hw-truncation-loss", "--runs-dir", str(tmp_path / "runs"),
               "--no-server")
    assert r.returncode == 2 and "--jobs > 1 needs ports of its own" in one_line_error(r)
    assert not (tmp_path / "runs").exists()


def test_unknown_protocol() -> None:
    assert "invalid choice: '0.9'" in one_line_error(
        isrlab("reproduce", "kip101-hw-truncation-loss", "--protocol", "0.9"))


def test_unknown_backend() -> None:
    assert "--backend" in one_line_error(
        isrlab("reproduce", "kip101-hw-truncation-loss", "--protocol", "0.10",
               "--backend", "nope"))


def test_malformed_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    text = (TESTS / "data" / "single-broker.yaml").read_text().replace("pause: A", "pause: Q")
    bad.write_text(text)
    line = one_line_error(isrlab("reproduce", str(bad), "--protocol", "0.11",
                                 "--runs-dir", str(tmp_path)))
    where = text.splitlines().index("  - pause: Q") + 1
    assert line.startswith(f"isrlab: {bad}:{where}: ") and "unknown node 'Q'" in line
    assert not any(tmp_path.glob("*/run.json"))  # nothing was started


def test_port_in_use(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.2", port))
        s.listen()
        line = one_line_error(isrlab("reproduce", str(TESTS / "data" / "single-broker.yaml"),
                                     "--protocol", "0.11", "--port", str(port),
                                     "--runs-dir", str(tmp_path)))
    assert f"address in use: 127.0.0.2:{port}" in line
    assert processes_mentioning(str(tmp_path)) == []
    # Nothing started for a run refused before it started: no node, no checker JVM.
    assert [x for x in spawned() if needs(x)] == []


def quick_usage_error(*args: str) -> str:
    """Run `isrlab reproduce ...`: one line, exit 2, and no node started (no 20 s
    readiness wait for a node that can never answer): by the processes isrlab
    started (tests/tiers.py's log), not by the clock."""
    r = isrlab("reproduce", *args)
    line = one_line_error(r)
    started = [x for x in spawned() if needs(x)]
    assert started == [], f"{line}: started {started}"
    return line


@pytest.mark.parametrize(("port", "what"), [
    ("70000", "port 70000 is out of range; give 1..65535"),
    ("0", "port 0 is out of range; give 1..65535"),
    ("-5", "port -5 is out of range"),
    ("http", "'http' is not a port number"),
])
def test_port_out_of_range_is_rejected_at_parse_time(tmp_path: Path, port: str,
                                                     what: str) -> None:
    line = quick_usage_error("kip101-hw-truncation-loss", "--protocol", "0.10",
                             "--port", port, "--runs-dir", str(tmp_path))
    assert line.startswith("isrlab: error: argument --port: ") and what in line, line
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


@pytest.mark.parametrize("backend", ["docker", "local"])
def test_port_range_past_65535(tmp_path: Path, backend: str) -> None:
    """Docker maps one host port per node from --port (3 nodes here: controller, A,
    B) and one per broker's Kafka listener; the local backend needs --port and
    the next one on each node's address. Checked before any engine is
    asked, so no Docker is needed for the docker case."""
    args = ("kip279-unclean-divergence", "--protocol", "0.10", "--backend", backend,
            "--runs-dir", str(tmp_path))
    if backend == "docker":
        line = quick_usage_error(*args, "--port", "65534")
        assert line == ("isrlab: the docker backend needs ports 65534..65538, outside "
                        "1..65535; give --port 1..65531")
    else:
        # 65534 (and its Kafka port 65535) is valid for the local backend: refused
        # only if taken.
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", 65534))
                s.listen()
            except OSError:
                pass  # held by someone else: "address in use" all the same
            line = quick_usage_error(*args, "--port", "65534")
        assert line.startswith("isrlab: address in use: 127.0.0.1:65534 (needed by controller)")
    assert not any(tmp_path.glob("*/run.json"))


@pytest.mark.parametrize("seed", ["-1", "x"])
def test_bad_seed(tmp_path: Path, seed: str) -> None:
    line = quick_usage_error("kip101-hw-truncation-loss", "--protocol", "0.10", "--seed", seed,
                             "--runs-dir", str(tmp_path))
    assert line.startswith("isrlab: error: argument --seed: "), line
    assert ("is negative" if seed == "-1" else "is not an integer") in line


def test_scenario_not_utf8_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    text = (TESTS / "data" / "single-broker.yaml").read_text()
    bad.write_bytes(text.replace("One broker;", "Caf\u00e9 broker;").encode("latin-1"))
    line = quick_usage_error(str(bad), "--protocol", "0.11", "--runs-dir", str(tmp_path))
    offset = text.index("One broker;") + len("Caf")
    assert line == (f"isrlab: {bad}:2: byte 0xe9 at offset {offset} is not UTF-8; save the file "
                    "as UTF-8")


def test_directory_is_not_a_scenario_file(tmp_path: Path) -> None:
    line = quick_usage_error(str(tmp_path), "--protocol", "0.11", "--runs-dir", str(tmp_path))
    assert line == (f"isrlab: {tmp_path} is a directory, not a scenario file; give the path "
                    "of a .yaml file")
    # A bare name that is no shipped scenario but a directory here says so too.
    (tmp_path / "mydir").mkdir()
    r = subprocess.run([sys.executable, "-m", "harness.cli", "reproduce", "mydir",
                        "--protocol", "0.11"], capture_output=True, text=True, env=child_env(),
                       cwd=tmp_path, timeout=60)
    assert one_line_error(r).startswith("isrlab: mydir is a directory, not a scenario file, "
                                        "and no shipped scenario has that name; known: ")


def test_check_rejects_missing_run_dir(tmp_path: Path) -> None:
    assert "no such run directory" in one_line_error(isrlab("check", str(tmp_path / "x")))


@pytest.mark.spark  # with the checker present, this runs a real Spark job
def test_reproduce_json_summary(tmp_path: Path) -> None:
    r = isrlab("reproduce", str(TESTS / "data" / "single-broker.yaml"), "--protocol", "latest",
               "--port", str(free_port()), "--runs-dir", str(tmp_path), "--json", "--seed", "3")
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["exit_code"] == r.returncode and summary["seed"] == 3
    assert summary["protocol"] == "latest" and summary["scenario"] == "single-broker"
    (run,) = summary["runs"]
    run_dir = Path(run["run_dir"])
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"
    # A clean run of a scenario that expects nothing: valid, exit 0.
    assert r.returncode == 0 and run["verdict"] == "valid" and run["anomalies"] == []
    assert (run["data"], run["documentation"]) == ("no anomaly", "as documented")
    assert Path(run["report"]).is_file()
    assert processes_mentioning(str(tmp_path)) == []


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_leaves_no_process(tmp_path: Path, sig: signal.Signals) -> None:
    scenario = tmp_path / "hang.yaml"
    scenario.write_text((TESTS / "data" / "hang.yaml").read_text()
                        .replace("timeout: 2", "timeout: 120"))
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "reproduce", str(scenario), "--protocol", "0.10",
         "--port", str(free_port()), "--runs-dir", str(runs)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        for line in proc.stdout:
            if "step 2" in line or time.monotonic() > deadline:
                break
        cluster = [p for p in processes_mentioning(str(runs)) if p != proc.pid]
        assert len(cluster) == 3  # controller, A, B (paused)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    assert processes_mentioning(str(runs)) == []
    (run_json,) = runs.glob("*/run.json")
    meta = json.loads(run_json.read_text())
    assert meta["status"] == "incomplete" and meta["ended_at"]


@pytest.mark.spark
def test_check_batch_writes_index_junit_and_results(tmp_path: Path) -> None:
    from conftest_spark import clean, kip101_loss

    tree = tmp_path / "nightly"
    kip101_loss(tree, "loss-unexpected", [], None).write()
    clean(tree / "sub", "clean", [], None).write()
    r = isrlab("check", str(tree), "--junit", str(tmp_path / "junit.xml"),
               "--results", str(tmp_path / "results"), "--json")
    assert r.returncode == 1, r.stderr  # one run is invalid
    assert "Traceback" not in r.stderr
    runs = json.loads(r.stdout.strip().splitlines()[-1])["runs"]
    assert sorted(x["verdict"] for x in runs) == ["invalid", "valid"]
    index = (tree / "index.html").read_text()
    for x in runs:
        report = Path(x["report"])
        assert report.is_file() and os.path.relpath(report, tree) in index
    assert "1 of 2 runs lost data" in index
    assert (tmp_path / "junit.xml").read_text().count("<testcase") == 2
    assert (tmp_path / "results" / "runs").is_dir()


@pytest.mark.spark
def test_results_table_holds_the_verdict_after_the_figure_assertions(tmp_path: Path) -> None:
    from conftest_spark import kip101_loss

    from checker.spark import get_session

    run = kip101_loss(tmp_path, "asserted", ["lost-write"], "kip101-hw-truncation-loss").write()
    meta = json.loads((run / "run.json").read_text())
    meta["assertions"] = [{"figure": "ops", "lt": 1, "line": 9}]  # it has ops: fails
    (run / "run.json").write_text(json.dumps(meta))
    table = tmp_path / "results"
    r = isrlab("check", str(run), "--results", str(table), "--json", "--no-report")
    assert r.returncode == 1, r.stderr
    (out,) = json.loads(r.stdout.strip().splitlines()[-1])["runs"]
    assert out["verdict"] == "invalid" and out["assertions_failed"]
    rows = get_session().read.parquet(str(table / "runs")).collect()
    assert [(x.run_id, x.verdict, x.exit_code) for x in rows] == [(out["run_id"], "invalid", 1)]


def children(pid: int) -> list[int]:
    """The live processes whose parent is pid (the Spark driver JVM of an isrlab)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def read_until(proc: subprocess.Popen, text: str, timeout: float, seen_so_far: str = "") -> str:
    """What proc writes on stdout up to and including `text` (read from the file
    descriptor itself: nothing stays in a Python buffer select cannot see), after
    ``seen_so_far`` (what an earlier read_until returned, which may hold it)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    seen = seen_so_far.encode()
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 65536) if ready else b""
        assert chunk, (f"no {text!r} on stdout within {timeout:.0f}s", seen.decode(),
                       proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
        seen += chunk
    return seen.decode()


def since_boot(pid: int | None = None) -> float:
    """Seconds since boot: now, or when process ``pid`` started."""
    if pid is None:
        return float(Path("/proc/uptime").read_text().split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")  # stat's 22nd: starttime


def interrupt_once_spark_runs(proc: subprocess.Popen, sig: signal.Signals, seen: str = ""
                              ) -> tuple[str, str, float]:
    """Wait until proc's check has Spark up (its first progress line after Spark
    started), send sig; returns stdout (after ``seen``, what was read of it
    before), stderr, and when (since boot) the JVM started. Asserts the Spark JVM goes too."""
    try:
        before = read_until(proc, "reading 1 run(s)", 240, seen)
        jvm = children(proc.pid)
        assert jvm, "no Spark driver JVM under isrlab"
        jvm_started = min(since_boot(p) for p in jvm)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        out = before + out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 60
    while any(alive(p) for p in jvm):  # it exits once its stdin, isrlab's pipe, closes
        assert time.monotonic() < deadline, "the Spark JVM outlived isrlab"
        time.sleep(0.2)
    return out, err, jvm_started


@pytest.mark.spark
def test_interrupt_during_check_is_one_line(tmp_path: Path) -> None:
    """Ctrl-C while Spark checks: `isrlab: interrupted`, exit 3, no Py4J
    traceback."""
    from harness.progress import Progress
    from harness.run.runner import RunOptions, run_scenario
    from harness.scenario.loader import load_scenario

    record = run_scenario(load_scenario(TESTS / "data" / "single-broker.yaml"),
                          RunOptions(protocol="latest", seed=1, runs_dir=tmp_path,
                                     backend_options={"port": free_port()}),
                          Progress(quiet=True))
    assert record.error is None, record.error
    # --no-server: this is about the JVM in isrlab's own process (the server's side
    # of an interrupted check is tests/test_checker_server.py's).
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "check", str(record.run_dir),
                             "--no-server"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(), cwd=ROOT)
    _, err, _ = interrupt_once_spark_runs(proc, signal.SIGINT)
    assert proc.returncode == 3, err
    assert err == "isrlab: interrupted\n", err
    assert "Traceback" not in err and "py4j" not in err.lower()
    assert not (record.run_dir / "check" / "summary.json").exists()


@pytest.mark.spark
def test_sigterm_during_reproduces_check_is_one_line(tmp_path: Path) -> None:
    """SIGTERM once the run is complete and being checked: one line, exit 3, the run
    directory complete (`isrlab check` can check it), nothing left running. The
    check's JVM (--no-server: isrlab's own) started while the cluster ran."""
    runs = tmp_path / "runs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "reproduce",
         str(TESTS / "data" / "single-broker.yaml"), "--protocol", "latest",
         "--port", str(free_port()), "--runs-dir", str(runs), "--no-server"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    head = read_until(proc, "replicas collected", 240)
    collected = since_boot()
    out, err, jvm_started = interrupt_once_spark_runs(proc, signal.SIGTERM, head)
    assert jvm_started < collected, "the JVM started only after the run"
    assert proc.returncode == 3, (out, err)
    assert err == "isrlab: interrupted\n", err
    assert "Traceback" not in err and "py4j" not in err.lower()
    (run_dir,) = runs.iterdir()
    assert f"run: {run_dir}\n" in out
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete" and meta["ended_at"]
    assert processes_mentioning(str(runs)) == []


# -- the Spark master, batches with malformed and interrupted runs ---------------


def tagged_processes(tag: str) -> list[int]:
    """Live processes whose environment holds `tag` (an isrlab given it, and what it
    started: a Spark driver JVM inherits the environment)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tag.encode() in env and state != "Z":
            found.append(int(entry))
    return found


def synthetic_run(path: Path, **kw) -> Path:
    from checker.synth import RunBuilder

    rb = RunBuilder(path, **kw)
    rb.send(0, 1, 0).send(0, 2, 1)
    rb.replica("A", [(0, 1), (0, 2)], role="leader")
    rb.replica("B", [(0, 1), (0, 2)], role="follower", leader="A")
    rb.final_read([1, 2])
    return rb.write()


@pytest.mark.parametrize(("master", "line", "jvm"), [
    ("spark://127.0.0.1:1", "isrlab: cannot reach Spark master spark://127.0.0.1:1: "
                            "connection refused", False),
    ("sc://127.0.0.1:1", "isrlab: cannot reach Spark master sc://127.0.0.1:1: "
                         "connection refused", False),
    ("spark://127.0.0.1", "isrlab: malformed Spark master 'spark://127.0.0.1': a standalone "
                          "master is spark://HOST:PORT (port 1..65535)", False),
    ("spark://h:99999", "isrlab: malformed Spark master 'spark://h:99999': a standalone "
                        "master is spark://HOST:PORT (port 1..65535)", False),
    ("lokal[2]", "isrlab: malformed Spark master 'lokal[2]': give local[N], spark://HOST:PORT, "
                 "sc://HOST[:PORT], yarn or k8s://URL", False),
    # A well-formed master Spark itself refuses, once its JVM is up: the reason it
    # gave, on one line naming the master.
    pytest.param("yarn", "isrlab: cannot start Spark on master yarn: org.apache.spark."
                 "SparkException: When running with master 'yarn' either HADOOP_CONF_DIR or "
                 "YARN_CONF_DIR must be set in the environment.", True, marks=pytest.mark.spark),
    # One that fails once the driver JVM is up and has started creating the context:
    # that JVM is stopped too (the reason is the Kubernetes client's: only its start).
    pytest.param("k8s://https://127.0.0.1:1", "isrlab: cannot start Spark on master "
                 "k8s://https://127.0.0.1:1: ", True, marks=pytest.mark.spark),
])
def test_check_refuses_a_bad_master_at_once(tmp_path: Path, master: str, line: str,
                                            jvm: bool) -> None:
    """No Spark master there (or no master URL): one line naming it, exit 2 -- not
    a minute of retries and a Py4J traceback -- and no JVM left."""
    run = synthetic_run(tmp_path / "run")
    tag = f"master-{os.getpid()}-{time.monotonic_ns()}"
    env = {k: v for k, v in child_env().items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR")}
    r = subprocess.run([sys.executable, "-m", "harness.cli", "check", str(run), "--master", master],
                       capture_output=True, text=True, cwd=ROOT, timeout=120,
                       env={**env, "ISRLAB_TEST_TAG": tag})
    got = one_line_error(r)
    assert got == line or (line.endswith(": ") and got.startswith(line)), got
    # At once: no JVM at all where the master is refused before Spark (by what
    # was started, tests/tiers.py, not by the clock).
    assert any(needs(x) == "spark" for x in spawned()) == jvm
    assert tagged_processes(f"ISRLAB_TEST_TAG={tag}") == []
    assert not (run / "check").exists()  # nothing was checked


@pytest.mark.spark
def test_check_batch_with_a_malformed_run(tmp_path: Path) -> None:
    """One malformed run in a nightly batch: the others are checked (verdicts, reports,
    JUnit cases), the malformed one is an `error` naming its file and line (one line
    on stderr, a JUnit error), and the exit status is 2 at the end."""
    from conftest_spark import clean, kip101_loss

    tree = tmp_path / "nightly"
    good = clean(tree, "clean", [], None).write().resolve()
    loss = kip101_loss(tree, "loss-unexpected", [], None).write().resolve()
    bad = synthetic_run(tree / "malformed").resolve()
    lines = (bad / "history.jsonl").read_text().splitlines(keepends=True)
    lines[2] = "this is not json\n"
    (bad / "history.jsonl").write_text("".join(lines))
    junit = tmp_path / "junit.xml"
    r = isrlab("check", str(tree), "--junit", str(junit))
    assert r.returncode == 2, (r.stdout, r.stderr)
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"isrlab: run {bad}: history.jsonl line 3: not JSON"), line
    out = r.stdout.splitlines()
    # Runs without a scenario document nothing: what happened to the data alone.
    for said, run in (("no anomaly", good), ("data lost (lost-write)", loss),
                      ("not checked — run unreadable", bad)):
        assert f"{said}  {run}" in out, r.stdout
    assert out[-1] == "3 runs: 1 data lost, 1 no anomaly, 1 not checked; 1 run unreadable"
    for run in (good, loss):
        assert (run / "check" / "report.html").is_file()
    assert not (bad / "check" / "report.html").exists()
    assert json.loads((bad / "check" / "summary.json").read_text())["verdict"] == "error"
    index = (tree / "index.html").read_text()
    assert "3 runs" in index and "malformed" in index
    xml = junit.read_text()
    assert 'tests="3" failures="1" errors="1"' in xml
    assert xml.count("<error ") == 1 and 'type="error"' in xml


@pytest.mark.spark
def test_check_batch_with_a_run_json_not_utf8(tmp_path: Path) -> None:
    """A byte that is not UTF-8 in one run's run.json, and a run.json `assertions`
    that is not as the harness writes it in another (the judge compared a number
    with a str: a traceback, no index, no JUnit): each of those runs is set aside
    as `error`, one line naming its run, file and line; the good one is still
    checked and judged (verdict, report, index, JUnit case) and the batch exits
    2, never a traceback."""
    from conftest_spark import clean

    asserted = [{"figure": "sends", "ge": 1, "line": 9}]
    tree = tmp_path / "nightly"
    rb = clean(tree, "clean", [], None)
    rb.meta["assertions"] = asserted
    good = rb.write().resolve()
    bad = synthetic_run(tree / "not-utf8").resolve()
    raw = (bad / "run.json").read_bytes()
    at = raw.index(b'"protocol"')
    (bad / "run.json").write_bytes(raw[:at] + b'"description": "caf\xe9",\n  ' + raw[at:])
    line = raw.count(b"\n", 0, at) + 1
    offset = at + len('"description": "caf')
    odd = synthetic_run(tree / "odd-assertion").resolve()
    meta = json.loads((odd / "run.json").read_text())
    meta["assertions"] = [*asserted, {"figure": "sends", "ge": "many", "line": 10}]
    (odd / "run.json").write_text(json.dumps(meta, indent=2))
    odd_line = (odd / "run.json").read_text().split("\n").index('  "assertions": [') + 1
    junit = tmp_path / "junit.xml"
    r = isrlab("check", str(tree), "--junit", str(junit))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        f"isrlab: run {bad}: run.json line {line}: byte 0xe9 at offset {offset} is not UTF-8",
        f"isrlab: run {odd}: run.json line {odd_line}: assertions[1]: expected a figure's name "
        "and a number for one or more of eq, ne, lt, le, gt, ge"], r.stderr
    out = r.stdout.splitlines()
    for said, run in (("no anomaly", good), ("not checked — run unreadable", bad),
                      ("not checked — run unreadable", odd)):
        assert f"{said}  {run}" in out, r.stdout
    assert (good / "check" / "report.html").is_file()
    judged = json.loads((good / "check" / "assertions.json").read_text())
    assert judged["verdict"] == "valid" and judged["assertions"][0]["ok"] is True
    for run, at_line in ((bad, line), (odd, odd_line)):
        assert not (run / "check" / "report.html").exists()
        summary = json.loads((run / "check" / "summary.json").read_text())
        assert (summary["verdict"], summary["error_file"], summary["error_line"]) == (
            "error", "run.json", at_line)
    index = (tree / "index.html").read_text()
    assert "3 runs" in index and "not-utf8" in index and "odd-assertion" in index
    xml = junit.read_text()
    assert 'tests="3" failures="0" errors="2"' in xml
    assert xml.count("<error ") == 2 and 'type="error"' in xml


@pytest.mark.spark
def test_check_an_interrupted_run(tmp_path: Path) -> None:
    """An interrupted run (run.json `incomplete`) with a cut-off last history line:
    verdict incomplete, exit 3, the cut-off line said on the terminal, summary.json,
    JUnit and the report agree."""
    run = synthetic_run(tmp_path / "run", scenario="kip101-hw-truncation-loss",
                        expect=["lost-write"]).resolve()
    meta = json.loads((run / "run.json").read_text())
    meta.update(status="incomplete", error="interrupted by SIGTERM; run incomplete")
    (run / "run.json").write_text(json.dumps(meta))
    n = (run / "history.jsonl").read_text().count("\n") + 1
    with (run / "history.jsonl").open("a") as fh:
        fh.write('{"index": 99, "time": 99000000, "pro')
    junit = tmp_path / "junit.xml"
    r = isrlab("check", str(run), "--junit", str(junit))
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        f"isrlab: run {run}: history.jsonl line {n} is cut off (an interrupted write); "
        "checked the lines before it"]
    assert r.stdout.splitlines()[-4:] == [
        f"no anomaly — run incomplete  {run}",
        "  the run did not finish (status incomplete): only what it recorded was checked",
        "  not judged: lost-write (expected; not in what the run recorded)",
        "1 run: 1 no anomaly; 1 run incomplete"]
    s = json.loads((run / "check" / "summary.json").read_text())
    assert (s["verdict"], s["exit_code"], s["status"]) == ("incomplete", 3, "incomplete")
    assert (s["missing"], s["unjudged"]) == ([], ["lost-write"])
    assert 'errors="1"' in junit.read_text() and 'type="incomplete"' in junit.read_text()
    report = (run / "check" / "report.html").read_text()
    assert ('<span class="verdict incomplete" title="verdict: incomplete">run incomplete</span>'
            ' Incomplete: the run did not '
            "finish, and only what it recorded was checked; lost-write, expected, not judged."
            ) in report


# -- variants, assertions, matrix: bad input (issue 20) ----------------------------------


def test_unknown_variant_names_the_file_and_line() -> None:
    r = isrlab("reproduce", "unclean-election-loss", "--protocol", "0.10", "--variant", "nope")
    line = one_line_error(r)
    assert "unclean-election-loss.yaml:" in line
    assert "no variant 'nope'" in line and "unclean-off, unclean-on" in line


def test_bad_assertion_and_duration_name_the_line(tmp_path: Path) -> None:
    src = (ROOT / "harness" / "scenario" / "catalogue" / "follower-gc-pause.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.replace("figure: hw_stall_ms", "figure: hw_stalls"))
    line = one_line_error(isrlab("reproduce", str(bad), "--protocol", "0.10"))
    n = 1 + src.splitlines().index(next(x for x in src.splitlines() if "hw_stall_ms" in x))
    assert line.startswith(f"isrlab: {bad}:{n}: unknown figure 'hw_stalls'"), line
    bad.write_text(src.replace("for: 100ms", "for: 100 msec"))
    line = one_line_error(isrlab("matrix", "--scenario", str(bad)))
    assert f"{bad}:" in line and "pause for '100 msec' does not parse" in line


def test_matrix_bad_input() -> None:
    assert "unknown scenario 'nope'" in one_line_error(isrlab("matrix", "--scenario", "nope"))
    assert "invalid choice" in one_line_error(isrlab("matrix", "--protocol", "9.9"))
    assert "not >= 1" in one_line_error(isrlab("matrix", "--runs", "0"))


# -- not reachable: a version the scenario's path does not exist in ----------------------

UNREACHED = "alter-partition-stale-incarnation"  # reachable from 2.7 (AlterIsr, KIP-497)
WHY = "AlterIsr (KIP-497) first sends ISR changes to the controller in 2.7.0"


@pytest.mark.parametrize("extra", [(), ("--runs", "3"), ("--all-variants",), ("--json",)])
def test_reproduce_refuses_a_version_the_path_does_not_reach(tmp_path: Path,
                                                             extra: tuple[str, ...]) -> None:
    """Exit 2 at once, one line naming the scenario, the version and the file's why;
    nothing started, no run directory (not even the runs directory)."""
    runs = tmp_path / "runs"
    line = quick_usage_error(UNREACHED, "--protocol", "2.1", "--port", str(free_port()),
                             "--runs-dir", str(runs), *extra)
    assert line.startswith(f"isrlab: {UNREACHED} is not reachable under 2.1 "
                           "(reachable from 2.7): "), line
    assert WHY in line
    assert not runs.exists()
    assert processes_mentioning(str(tmp_path)) == []


def test_matrix_shows_cells_not_reachable_and_counts_them(tmp_path: Path) -> None:
    """Only cells the path does not reach: none is run or checked, each shows "not
    reachable" (terminal, JSON, index page), the reason is said once per row, the
    tally counts them, and they are no mismatch (exit 0)."""
    args = ("matrix", "--scenario", UNREACHED, "--protocol", "0.10", "--protocol", "2.1",
            "--runs-dir", str(tmp_path))
    r = isrlab(*args)
    assert r.returncode == 0, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert "(2 cell(s) not reachable: not run)" in lines[0]  # the progress line
    lines = lines[1:]
    assert lines[0].split() == ["0.10", "2.1"]
    assert lines[1].split() == [UNREACHED, "not", "reachable", "not", "reachable"]
    assert lines[2].startswith(f"  {UNREACHED}: not reachable under 0.10, 2.1 "
                               "(reachable from 2.7): ") and WHY in lines[2]
    assert lines[3] == "matches the catalogue in 0/0 cell(s); 2 cell(s) not reachable (not run)"
    page = Path(lines[4].removeprefix("index: ")).read_text()
    assert page.count('<td class="na"') == 2 and "2 cell(s) not reachable" in page
    assert "runs.html" not in page  # no run, no runs page to link
    assert not list(tmp_path.glob("*/*/run.json"))
    r = isrlab(*args, "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 == out["exit_code"]
    assert out["matrix"] == {"cells": 2, "run": 0, "matches": 0, "not_reachable": 2}
    assert out["runs"] == [] and out["tally"]["runs"] == 0
    assert [(c["protocol"], c["cell"], c["reachable"], c["runs"]) for c in out["cells"]] == [
        ("0.10", "not reachable", False, []), ("2.1", "not reachable", False, [])]
    assert all(WHY in c["why"] for c in out["cells"])


VARIANT_REACH = """\
variants:
  old:
    description: a path that ends with 2.0
    reachable: {before: "2.1", why: the old path is gone from 2.1}
    expect: {"0.10": [], "2.0": []}
  new: {}
steps:
"""


def _variant_file(tmp_path: Path) -> Path:
    """single-broker with two variants: `old` reaches 0.10-2.0 only, `new` every version."""
    f = tmp_path / "two-ages.yaml"
    f.write_text((TESTS / "data" / "single-broker.yaml").read_text()
                 .replace("name: single-broker", "name: two-ages")
                 .replace("steps:\n", VARIANT_REACH, 1))
    return f


def test_listing_of_a_variant_with_its_own_reachable(tmp_path: Path) -> None:
    """What `isrlab scenarios` prints for a file whose variants reach different
    versions: each variant's range, and its versions outside it as not reachable."""
    from harness.cli import cellrun, scenarios
    from harness.scenario.loader import all_variants, load_scenario

    rows = all_variants(load_scenario(_variant_file(tmp_path)))
    assert scenarios.reachable_lines(rows) == [
        "    [old] reachable before 2.1: the old path is gone from 2.1"]
    assert [cellrun.expect_line(r) for r in rows] == ["0.10+ none · 2.1+ not reachable",
                                                     "all none"]


@pytest.mark.spark  # the reachable cells are run (sim) and checked in one Spark job
def test_matrix_runs_the_reachable_cells_only(tmp_path: Path) -> None:
    """Rows mixing reachable and not reachable cells (a variant with its own
    `reachable`): the reachable ones run and match, the others are not run and
    counted apart."""
    r = isrlab("matrix", "--backend", "sim", "--scenario", UNREACHED, "--scenario",
               str(_variant_file(tmp_path)), "--protocol", "2.0", "--protocol", "2.7",
               "--runs-dir", str(tmp_path / "runs"))
    assert r.returncode == 0, (r.stdout, r.stderr)
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()
            if line.split() and line.split()[0] in (UNREACHED, "two-ages-old", "two-ages-new")}
    assert rows == {UNREACHED: ["not", "reachable", "✓"],
                    "two-ages-old": ["✓", "not", "reachable"],
                    "two-ages-new": ["✓", "✓"]}
    assert "  two-ages-old: not reachable under 2.7 (reachable before 2.1): the old path " \
           "is gone from 2.1" in r.stdout.splitlines()
    assert "matches the catalogue in 4/4 cell(s); 2 cell(s) not reachable (not run)" in r.stdout
    assert len(list((tmp_path / "runs").glob("*/*/run.json"))) == 4
    assert "Traceback" not in r.stderr


@pytest.mark.spark
def test_reproduce_all_variants_says_which_are_not_reachable(tmp_path: Path) -> None:
    r = isrlab("reproduce", str(_variant_file(tmp_path)), "--all-variants", "--protocol", "2.7",
               "--backend", "sim", "--runs-dir", str(tmp_path / "runs"))
    assert r.returncode == 0, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert ("two-ages-old is not reachable under 2.7 (reachable before 2.1): the old path is "
            "gone from 2.1") in lines
    assert any(x.startswith("two-ages-new: no anomaly — as documented") for x in lines), r.stdout
    assert not any(x.startswith("two-ages-old: ") for x in lines)


# SIGINT sent to the process itself as the `isrlab` script's entry point starts
# importing the CLI (a real signal, at a point the test names, not a timed one).
_SIGINT_DURING_IMPORTS = """
import importlib.abc, os, signal, sys

class Interrupt(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "harness.cli":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["isrlab", "scenarios"]
from harness.entry import main
sys.exit(main())
"""


def test_interrupt_while_the_cli_imports_is_the_documented_line() -> None:
    # SIGINT as a terminal gives it: a suite started in the background of a shell
    # without job control inherits SIGINT ignored, and so would the child.
    proc = subprocess.run([sys.executable, "-c", _SIGINT_DURING_IMPORTS], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (proc.returncode, proc.stderr) == (3, "isrlab: interrupted\n"), proc.stderr


def test_the_isrlab_script_starts_at_the_guarded_entry_point() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert 'isrlab = "harness.entry:main"' in text


@pytest.mark.parametrize("argv", [
    ["swarm", "--protocol", "0.10", "--runs", "2", "--runs-dir", "{file}"],
    ["chaos", "--protocol", "0.10", "--time-limit", "5s", "--backend", "sim",
     "--runs-dir", "{file}/under"],
    ["reproduce", "kip101-hw-truncation-loss", "--protocol", "0.10", "--backend", "sim",
     "--runs-dir", "{file}"],
    ["check", "{run}", "--results", "{file}"],
    ["check", "{run}", "--results", "{file}/table"],
    ["nightly", "nightly/sample.yaml", "--results", "{file}"],
])
def test_an_output_directory_that_is_a_file_is_one_line_before_anything(tmp_path: Path,
                                                                       argv: list[str]) -> None:
    """Every command's output directory is tried before the command starts: a file
    where a directory must be is exit 2, one line, and nothing was written."""
    file = tmp_path / "a-file"
    file.write_text("")
    run = tmp_path / "run"  # never read: the output is refused first
    run.mkdir()
    argv = [a.format(file=file, run=run) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "harness.cli", *argv, "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"isrlab: cannot write {file}") and "nothing was started" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "run"]
    assert file.read_text() == "" and list(run.iterdir()) == []



def test_client_settings_from_a_properties_file(tmp_path: Path) -> None:
    """--client-config @FILE: `key=value` or `key: value` lines, `#` and `!` comments
    skipped, values typed as KEY=VALUE's are; in order with the others, a later one
    winning."""
    from harness.cli import build_parser

    props = tmp_path / "producer.properties"
    props.write_text("# tuned\n! also a comment\n\nenable.idempotence=false\n"
                     "linger.ms: 20\n  client.id = svc-a  \n")
    args = build_parser().parse_args(
        ["reproduce", "kip101-hw-truncation-loss", "--protocol", "latest", "--client",
         "confluent-kafka", "--client-config", "acks=1", "--client-config", f"@{props}",
         "--client-config", "linger.ms=5"])
    assert args.client_config == [("acks", 1), ("enable.idempotence", False),
                                  ("linger.ms", 20), ("client.id", "svc-a"), ("linger.ms", 5)]
    assert dict(args.client_config)["linger.ms"] == 5


@pytest.mark.parametrize(("text", "said"), [
    ("acks=all\nlinger.ms\n", "producer.properties:2: 'linger.ms' is not key=value"),
    ("sasl.jaas.config=a \\\n  b\n", "producer.properties:1: a line continued with \\ is "
                                       "not supported"),
    (b"acks=all\nsasl.username=\xff\n",
     "producer.properties:2: byte 0xff at offset 23 is not UTF-8"),
    (None, "producer.properties: No such file or directory")])
def test_a_bad_properties_file_is_one_line_and_starts_nothing(
        tmp_path: Path, text: str | bytes | None, said: str) -> None:
    props = tmp_path / "producer.properties"
    if isinstance(text, bytes):
        props.write_bytes(text)
    elif text is not None:
        props.write_text(text)
    r = isrlab("reproduce", "kip101-hw-truncation-loss", "--protocol", "latest", "--client",
               "confluent-kafka", "--client-config", f"@{props}", "--runs-dir",
               str(tmp_path / "runs"))
    assert said in one_line_error(r)
    assert not (tmp_path / "runs").exists() and [x for x in spawned() if needs(x)] == []


def test_a_client_setting_the_scenarios_acks_forbids_starts_nothing(tmp_path: Path) -> None:
    """transactional.id makes librdkafka idempotent, which it refuses with acks 1:
    with acks1-failover-loss's acks 1 that is refused in the client's words before
    anything starts (checked with the scenario's acks, not acks all)."""
    r = isrlab("reproduce", "acks1-failover-loss", "--variant", "acks-1", "--protocol",
               "latest", "--client", "confluent-kafka", "--client-config",
               "transactional.id=tx-1", "--runs-dir", str(tmp_path / "runs"))
    assert "`acks` must be set to `all` when `enable.idempotence` is true" in one_line_error(r)
    assert not (tmp_path / "runs").exists() and [x for x in spawned() if needs(x)] == []
