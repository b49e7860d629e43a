"""End to end on real brokers: the shipped scenarios (and each variant) under every
protocol version give exactly the anomalies their files' `expect` lists
(docs/catalogue.md) and pass their figure assertions -- every release on the local
backend (processes), the oldest and the newest on the docker backend (containers)
-- and a leader cut off by a network partition loses nothing acknowledged, on both
backends. The sim backend (the same cores in one process, virtual time) runs every
row under every version too, with the same verdicts, and the scripted scenarios
leave the same replica logs on sim as on local.

All runs go first (a few seconds each), then ONE Spark job checks them together,
as a nightly batch would; then `isrlab reproduce` itself is run for the
documented pair of KIP-101 commands. A cell whose version a row's path does not
exist in (its file's `reachable`) is not run: it is asserted refused instead
(`isrlab reproduce` exits 2 naming the reason), so no cell is left out silently.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import (
    ROOT,
    TESTS,
    descendants,
    docker_leftovers,
    docker_or_skip,
    free_base_port,
    free_port,
    skip_unless_required,
)

from contract import PROTOCOLS as ALL_PROTOCOLS
from harness.errors import UsageError
from harness.progress import Progress
from harness.run.runner import RunOptions, RunRecord, run_scenario
from harness.scenario.loader import (
    SCENARIO_DIR,
    Scenario,
    all_variants,
    list_scenarios,
    load_scenario,
)
from workloads.kafka_clients import KCAT_MISSING

pytestmark = [pytest.mark.e2e]

PROTOCOLS = list(ALL_PROTOCOLS)  # every release, oldest first, then `latest`
BACKENDS = ["local", "docker"]
# CI time: local runs every release (`latest` is 4.1's row: its alias is run on
# Docker); Docker runs the oldest version and the alias of the newest only.
LOCAL_PROTOCOLS = [p for p in PROTOCOLS if p != "latest"]
DOCKER_PROTOCOLS = ["0.10", "latest"]
# Every shipped scenario, each variant a row of its own (NAME-VARIANT). What a row
# must show is its file's `expect` (docs/catalogue.md): the one statement of it.
ROWS: dict[str, Scenario] = {row.run_name: row for s in list_scenarios()
                             for row in all_variants(s)}


def expected(name: str, protocol: str) -> set[str]:
    """The anomaly kinds the row's file expects under `protocol` (NAME@CLIENT: the
    row's, whatever the client)."""
    return set(ROWS[name.split("@")[0]].expect_for(protocol))


def reachable(name: str, protocol: str) -> bool:
    """Whether the row's path exists under `protocol` (its file's `reachable`)."""
    return ROWS[name.split("@")[0]].reachable_at(protocol)


def _same_in_every_version(name: str) -> bool:
    return len({frozenset(expected(name, p)) for p in PROTOCOLS if reachable(name, p)}) == 1


# Rows whose file expects the same under every version (scenarios 4-9): on Docker
# under `latest` only (the container faults they use are the same code whatever the
# protocol; the sequential Docker runs are the fixture's critical path: CI time),
# and their figure assertions are judged.
CATALOGUE = [name for name in ROWS if _same_in_every_version(name)]
# Only the cells a row's path reaches are run; the others are NOT_REACHABLE's.
CASES = [(b, n, p) for b in BACKENDS for n in ROWS if n not in CATALOGUE
         for p in (LOCAL_PROTOCOLS if b == "local" else DOCKER_PROTOCOLS) if reachable(n, p)]
CATALOGUE_DOCKER_PROTOCOLS = ["latest"]
CATALOGUE_CASES = [(b, row, p) for b in BACKENDS for row in CATALOGUE
                   for p in (LOCAL_PROTOCOLS if b == "local" else CATALOGUE_DOCKER_PROTOCOLS)
                   if reachable(row, p)]
CASES += CATALOGUE_CASES
# Every row under every version it reaches (alias included) in the simulator:
# milliseconds each.
# A row whose workload is a real Kafka client needs real brokers: not on sim
# (refused there, test_a_real_client_is_refused_on_sim).
ON_SIM = [row for row in ROWS if not ROWS[row].workload.get("client")]
SIM_CASES = [("sim", row, p) for row in ON_SIM for p in PROTOCOLS if reachable(row, p)]
CASES += SIM_CASES
# Every row under every version its path does not exist in: refused, never run.
NOT_REACHABLE = [(row, p) for row in ROWS for p in PROTOCOLS if not reachable(row, p)]
# Rows whose steps alone decide what is written (no rate-driven load): the replica
# logs must be the same on sim as on local, record for record.
SCRIPTED = ["kip101-hw-truncation-loss", "kip101-power-loss-divergence",
            "kip279-unclean-divergence", "kafka-7415-epoch-gap-divergence",
            "kip320-stale-metadata-divergence", "last-replica-standing-loss",
            "alter-partition-stale-incarnation", "unclean-election-loss-unclean-off",
            "unclean-election-loss-unclean-on", "min-isr-prevents-loss",
            "acks1-failover-loss-acks-1", "acks1-failover-loss-acks-all"]
SCRIPTED_CASES = [(n, p) for n in SCRIPTED for p in LOCAL_PROTOCOLS if reachable(n, p)]
# The KIP scenarios driven by real Kafka clients over the brokers' Kafka listeners
# (workload `client`): the same verdicts as isrlab's own workload, on both backends.
# Rows are NAME@CLIENT. kcat's cells skip without kcat (fail under ISRLAB_REQUIRE_KCAT=1).
CLIENTS = ["confluent-kafka", "kafka-python", "kcat"]
CLIENT_ROWS = ["kip101-hw-truncation-loss", "kip101-power-loss-divergence",
               "kip279-unclean-divergence"]
CLIENT_PROTOCOLS = ["0.10", "latest"]
# kafka-python is idempotent by default (enable_idempotence true in 3.0): from 0.11
# the power cycle of kip101-power-loss-divergence takes m1 and its sequence number
# with it, so the new leader answers m2 OUT_OF_ORDER_SEQUENCE_NUMBER (as Kafka does)
# and the step expecting ok does not hold. That path is a non-idempotent
# producer's: its cells run kafka-python with idempotence off (librdkafka's and
# kcat's default already is).
CLIENT_CONFIG = {("kip101-power-loss-divergence", "kafka-python"): {"enable_idempotence": False}}
# Every row x client x version on both backends (Docker's ~10 s each).
CLIENT_CASES = [(b, f"{n}@{c}", p) for b in BACKENDS for n in CLIENT_ROWS for c in CLIENTS
                for p in CLIENT_PROTOCOLS]
CASES += CLIENT_CASES
ISOLATED = TESTS / "data" / "leader-isolated.yaml"
ISOLATED_PROTOCOLS = ["0.10", "latest"]


def _load_row(name: str) -> Scenario:
    """A fresh copy of a shipped row (each run gets its own; NAME@CLIENT: its
    workload on that real client), or of the scenario file at the path `name`
    (ISOLATED)."""
    name, _, client = name.partition("@")
    if name not in ROWS:
        return load_scenario(Path(name))
    row = load_scenario(ROWS[name].path, ROWS[name].variant)
    if client:
        config = {**row.workload.get("config", {}), **CLIENT_CONFIG.get((name, client), {})}
        row = dataclasses.replace(row, workload={**row.workload, "client": client,
                                                 **({"config": config} if config else {})})
    return row


_ports_taken: set[int] = set()
_ports_lock = threading.Lock()


def _options(backend: str) -> dict:
    with _ports_lock:  # runs go in parallel: never hand out one port twice
        while True:
            # Docker: a host port per node and per broker's Kafka listener (3 brokers:
            # 7); local: each node's port and the Kafka listener's next to it.
            port = free_base_port(8) if backend == "docker" else free_port()
            ports = set(range(port, port + (8 if backend == "docker" else 2)))
            if not ports & _ports_taken:  # a run's ports, all of them
                _ports_taken.update(ports)
                break
    if backend == "docker":
        return {"port": port, "quiet": True}
    return {"port": port}


def _sim_options() -> dict:
    return {}


# Local runs go PARALLEL at a time (each mostly waits on its brokers' timers, so
# they do not slow each other down: 176 runs, ~930-990 s of run time at three or
# four at a time; CI time), Docker runs DOCKER_PARALLEL at a time beside them
# (their 44 runs, ~470-570 s). Four and two: both span ~240 s (the fixture 272 s,
# 354-381 s with three local runs at a time).
PARALLEL = 4
DOCKER_PARALLEL = 2


# The runs each test of this module reads, from its parameters: the fixture runs
# those of the selected tests only, so `-k` picks cells (a test missing here fails).
CASES_OF: dict[str, Callable[..., list[tuple[str, str, str]]]] = {
    "test_scenario_verdict": lambda backend, name, protocol: [(backend, name, protocol)],
    "test_catalogue_assertions_hold": lambda backend, row, protocol: [(backend, row, protocol)],
    "test_lost_write_names_m1": lambda backend: [(backend, "kip101-hw-truncation-loss", "0.10")],
    "test_isolated_leader_acks_nothing_and_loses_nothing":
        lambda backend, protocol: [(backend, str(ISOLATED), protocol)],
    "test_report_shows_the_producers_resend": lambda variant, kind, said, protocol: [
        ("local", f"idempotent-producer-leader-change-{variant}", protocol)],
    "test_sim_agrees_with_local": lambda name, protocol: [("local", name, protocol),
                                                          ("sim", name, protocol)],
    "test_timed_pause_resumes_on_schedule": lambda: [("local", "follower-gc-pause", "0.10")],
}


def _selected_cases(items: list[pytest.Item]) -> list[tuple[str, str, str]]:
    cases: dict[tuple[str, str, str], None] = {}
    for item in items:
        if "checked" not in getattr(item, "fixturenames", ()):
            continue
        name = item.originalname  # type: ignore[attr-defined]
        assert name in CASES_OF, f"{name} reads `checked`: say which runs in CASES_OF"
        params = item.callspec.params if hasattr(item, "callspec") else {}
        cases.update(dict.fromkeys(CASES_OF[name](**params)))
    return list(cases)


@pytest.fixture(scope="module")
def checked(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    runs_dir = tmp_path_factory.mktemp("runs")
    cases = _selected_cases([i for i in request.session.items if i.module is request.module])
    docker = None
    try:
        docker = docker_or_skip()
    except pytest.skip.Exception as e:
        docker_skip = str(e)

    def run(case: tuple[str, str, str]) -> RunRecord | str:
        backend, name, protocol = case
        if name.endswith("@kcat") and shutil.which("kcat") is None:
            return KCAT_MISSING  # skipped (failed under ISRLAB_REQUIRE_KCAT=1) by _case
        for attempt in range(3):
            try:
                rec = run_scenario(
                    _load_row(name),
                    RunOptions(protocol=protocol, backend=backend, runs_dir=runs_dir / backend,
                               seed=1, backend_options=(_sim_options() if backend == "sim"
                                                        else _options(backend))),
                    Progress(quiet=True))
                # The port was free when checked, then taken by another process
                # before a node bound it: nothing ran, so a fresh port is a fair retry.
                if (isinstance(rec.error, UsageError) and str(rec.error).startswith(
                        "address in use") and attempt < 2):
                    continue
                return rec
            except UsageError as e:
                # A port found free, then taken by another process before the run
                # bound it (nothing was started: check_addresses comes first).
                if not str(e).startswith("address in use") or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    records: dict = {}
    with ThreadPoolExecutor(PARALLEL) as pool, ThreadPoolExecutor(DOCKER_PARALLEL) as boxes:
        local = {c: pool.submit(run, c) for c in cases if c[0] == "local"}
        on_docker = {c: boxes.submit(run, c) for c in cases
                     if c[0] == "docker" and docker is not None}
        for case in cases:
            if case[0] == "docker" and docker is None:
                records[case] = docker_skip
            elif case[0] == "sim":
                records[case] = run(case)
        records.update({c: f.result() for c, f in on_docker.items()})
        records.update({c: f.result() for c, f in local.items()})
    assert descendants(os.getpid()) == []
    if docker is not None:
        # This batch's own runs only: another job may share the engine.
        ours = [rec.run_id for (backend, _, _), rec in records.items()
                if backend == "docker" and isinstance(rec, RunRecord)]
        assert [x for run_id in ours for x in docker_leftovers(docker, run_id)] == []
    from checker.api import check_runs

    done = [r for r in records.values() if isinstance(r, RunRecord) and r.error is None]
    results = {r.run_dir.resolve(): r for r in check_runs([r.run_dir for r in done])}
    return {k: (rec, results.get(rec.run_dir.resolve()) if isinstance(rec, RunRecord) else None)
            for k, rec in records.items()}


def _case(checked: dict, backend: str, name: str, protocol: str):
    rec, result = checked[backend, name, protocol]
    if rec == KCAT_MISSING:
        skip_unless_required("ISRLAB_REQUIRE_KCAT", rec)
    if isinstance(rec, str):
        pytest.skip(rec)  # no Docker engine (a failure under ISRLAB_REQUIRE_DOCKER=1)
    assert rec.error is None, f"run incomplete: {rec.error}"
    assert result is not None, "the checker returned no result for this run"
    return rec, result


@pytest.mark.parametrize(("backend", "name", "protocol"), CASES)
def test_scenario_verdict(checked: dict, backend: str, name: str, protocol: str) -> None:
    rec, result = _case(checked, backend, name, protocol)
    kinds = {a["kind"] for a in result.anomalies}
    assert kinds == expected(name, protocol), (rec.run_dir, result.anomalies)
    assert result.verdict == "valid", (result.verdict, result.unexpected, result.missing)
    meta = json.loads((rec.run_dir / "run.json").read_text())
    assert sorted(meta["expect"]) == sorted(expected(name, protocol))
    assert meta["backend"] == backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_lost_write_names_m1(checked: dict, backend: str) -> None:
    """Under 0.10, scenario 1 loses m1, acknowledged with acks=all."""
    rec, result = _case(checked, backend, "kip101-hw-truncation-loss", "0.10")
    m1 = json.loads((rec.run_dir / "run.json").read_text())["labels"]["m1"]
    lost = [a["witness"]["value"] for a in result.anomalies if a["kind"] == "lost-write"]
    assert lost == m1


@pytest.mark.parametrize("protocol", ISOLATED_PROTOCOLS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_isolated_leader_acks_nothing_and_loses_nothing(checked: dict, backend: str,
                                                        protocol: str) -> None:
    rec, result = _case(checked, backend, str(ISOLATED), protocol)
    ops = [json.loads(line) for line in (rec.run_dir / "history.jsonl").read_text().splitlines()]
    isolated = [o for o in ops if o.get("label") == "isolated" and o["type"] != "invoke"]
    # The write reached the old leader A and was not acknowledged.
    assert [(o["node"], o["type"]) for o in isolated] in ([("A", "info")], [("A", "fail")])
    events = [json.loads(line) for line in (rec.run_dir / "events.jsonl").read_text().splitlines()]
    assert any(e["type"] == "leader-elected" and e["leader"] == "B" and e["leader_epoch"] == 1
               for e in events)
    # Every acknowledged write is in the final read, and the checker agrees.
    final = [o for o in ops if o["process"] == "final" and o["type"] == "ok"][-1]
    acked = {o["value"] for o in ops if o["f"] == "send" and o["type"] == "ok"}
    assert len(acked) == 5 and acked <= {v for _, v in final["records"]}
    assert isolated[0]["value"] not in {v for _, v in final["records"]}
    assert result.anomalies == [] and result.verdict == "valid"


@pytest.mark.parametrize("protocol", ["0.11", "4.1"])
@pytest.mark.parametrize(("variant", "kind", "said"), [
    ("idempotence-on", "recognised", "B recognises a resend: producer "),
    ("idempotence-off", "resend", "B appends value 1 a second time, at offset 2 (epoch 1): "
                                  "the producer (confluent-kafka) sent it again")])
def test_report_shows_the_producers_resend(checked: dict, variant: str, kind: str, said: str,
                                           protocol: str) -> None:
    """librdkafka resends m1 to B after A dies: the report's story tells the resend,
    recognised by its sequence numbers (KIP-98) or appended a second time, after B's
    election holding the first copy."""
    from test_report_story import causes, story_lines

    from reports.render import render_run

    rec, _ = _case(checked, "local", f"idempotent-producer-leader-change-{variant}", protocol)
    report = render_run(rec.run_dir).read_text()
    lines = story_lines(report)
    (n,) = [n for n, ln in lines.items() if ln["kind"] == kind]
    assert lines[n]["text"].startswith(said), lines[n]["text"]
    (cause,) = [c for c in causes(report) if c["kind"] in ("recognised", "duplicate")]
    assert [k for k, _ in cause["steps"]][:2] == ["election", kind]
    assert lines[cause["steps"][0][1]]["node"] == "B"


def _replica_logs(run_dir: Path) -> dict[str, list[tuple]]:
    return {d.name: [(r["topic"], r["partition"], r["offset"], r["epoch"], r["value"])
                     for r in map(json.loads, (d / "log.jsonl").read_text().splitlines())]
            for d in sorted((run_dir / "replicas").iterdir())}


@pytest.mark.parametrize(("name", "protocol"), SCRIPTED_CASES)
def test_sim_agrees_with_local(checked: dict, name: str, protocol: str) -> None:
    """One protocol, two shells: the same scenario leaves the same replica logs and
    the same anomalies on processes and in the simulator."""
    local, local_result = _case(checked, "local", name, protocol)
    sim, sim_result = _case(checked, "sim", name, protocol)
    assert _replica_logs(sim.run_dir) == _replica_logs(local.run_dir)
    kinds = [sorted((a["kind"], a["witness"].get("value")) for a in r.anomalies)
             for r in (local_result, sim_result)]
    assert kinds[0] == kinds[1]


def test_every_cell_is_run_or_refused() -> None:
    """Each row x version is a sim case or a NOT_REACHABLE one, never both, never
    neither (a row on a real client: local instead of sim); a shipped row's local
    cases are exactly the versions it reaches."""
    every = {(row, p) for row in ROWS for p in PROTOCOLS}
    simulated = {(row, p) for _, row, p in SIM_CASES} | {
        (row, p) for row in ROWS if row not in ON_SIM for p in LOCAL_PROTOCOLS + ["latest"]
        if reachable(row, p)}
    assert simulated | set(NOT_REACHABLE) == every
    assert not simulated & set(NOT_REACHABLE)
    for row in ROWS:
        local = {p for b, n, p in CASES if b == "local" and n == row}
        assert local == {p for p in LOCAL_PROTOCOLS if reachable(row, p)}, row


@pytest.mark.parametrize(("name", "protocol"), NOT_REACHABLE)
def test_unreachable_cell_is_refused(tmp_path: Path, name: str, protocol: str) -> None:
    """`isrlab reproduce` under a version the row's path does not exist in: exit 2,
    one line naming the row, the version and its file's `why`; nothing started, no
    run directory."""
    row = ROWS[name]
    variant = ["--variant", row.variant] if row.variant else []
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", str(row.path), *variant,
         "--protocol", protocol, "--runs-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{name} is not reachable under {protocol}" in r.stderr
    assert row.reachable is not None and row.reachable.why in r.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("protocol", "code"), [("0.10", 1), ("0.11", 0)])
def test_reproduce_cli(tmp_path: Path, protocol: str, code: int) -> None:
    """The README's command: 0.10 loses an acked write (exit 1), 0.11 does not (exit 0)."""
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reproduce", "kip101-hw-truncation-loss",
         "--protocol", protocol, "--json", "--port", str(free_port()),
         "--runs-dir", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == code == out["exit_code"], r.stderr
    (summary,) = out["runs"]
    assert summary["verdict"] == "valid", (summary, r.stderr)
    kinds = {a["kind"] for a in summary["anomalies"]}
    assert kinds == expected("kip101-hw-truncation-loss", protocol)
    report = Path(summary["report"]).read_text()
    if protocol == "0.10":
        m1 = json.loads((Path(summary["run_dir"]) / "run.json").read_text())["labels"]["m1"][0]
        assert f"Value {m1} was acknowledged" in report
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(("backend", "row", "protocol"), CATALOGUE_CASES)
def test_catalogue_assertions_hold(checked: dict, backend: str, row: str, protocol: str) -> None:
    """The figure assertions of scenarios 4-8 hold (judged after the check)."""
    from harness.run.assertions import judge

    rec, result = _case(checked, backend, row, protocol)
    verdict, failed = judge(rec.run_dir, result.verdict)
    assert (verdict, failed) == ("valid", []), rec.run_dir


def test_timed_pause_resumes_on_schedule(checked: dict) -> None:
    """follower-gc-pause: each resume of C comes its `for` after the pause, by timer."""
    rec, _ = _case(checked, "local", "follower-gc-pause", "0.10")
    ops = [json.loads(line) for line in (rec.run_dir / "history.jsonl").read_text().splitlines()]
    done = [(o["f"], o["time"]) for o in ops if o["process"] == "nemesis" and o["type"] != "invoke"
            and o["f"] in ("pause", "resume")]
    assert [f for f, _ in done] == ["pause", "resume", "pause", "resume"]
    gaps = [(done[i + 1][1] - done[i][1]) / 1e9 for i in (0, 2)]
    assert 0.1 <= gaps[0] < 0.3 and 2.0 <= gaps[1] < 2.3, gaps


def test_matrix_cli_on_a_subset(tmp_path: Path) -> None:
    """`isrlab matrix` on two rows x one version, run side by side (--jobs 2), one of
    them with a failing assertion: the matrix, the index page linking each report,
    exit 1."""
    failing = tmp_path / "hw-lags-asserted.yaml"
    failing.write_text((SCENARIO_DIR / "hw-lags-one-fetch.yaml").read_text()
                       .replace("name: hw-lags-one-fetch", "name: hw-lags-asserted")
                       .replace("steps:\n", "assert:\n  - {figure: isr_shrinks, ge: 1}\n"
                                "steps:\n", 1))
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "matrix", "--scenario", "hw-lags-one-fetch",
         "--scenario", str(failing), "--protocol", "0.10", "--port", str(free_base_port(4)),
         "--jobs", "2", "--runs-dir", str(tmp_path / "runs")],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert any(x.split() == ["hw-lags-one-fetch", "✓"] for x in lines), r.stdout
    assert any(x.split() == ["hw-lags-asserted", "assert", "isr_shrinks"] for x in lines)
    assert "assertion failed" in r.stdout and "isr_shrinks >= 1, was 0" in r.stdout
    assert "matches the catalogue in 1/2 cell(s)" in r.stdout
    index = Path(lines[-1].removeprefix("index: "))
    page = index.read_text()
    assert page.count("report.html") == 2 and "assert isr_shrinks" in page
    assert "Traceback" not in r.stderr
    # `isrlab check` of that run judges its assertion the same way.
    run = next(p for p in index.parent.iterdir() if "hw-lags-asserted" in p.name)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "check", str(run), "--json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    out = json.loads(r.stdout)["runs"][0]
    assert r.returncode == 1 and out["verdict"] == "invalid", (r.stdout, r.stderr)
    assert any("isr_shrinks >= 1, was 0" in m for m in out["assertions_failed"])
    assert "isr_shrinks &gt;= 1 failed, was 0" in (run / "check" / "report.html").read_text()


def test_a_real_client_is_refused_on_sim(tmp_path: Path) -> None:
    """A scenario whose workload is a real Kafka client exits 2 on the sim backend,
    naming the backends it needs, before anything is written."""
    r = subprocess.run([sys.executable, "-m", "harness.cli", "reproduce",
                        "idempotent-producer-leader-change", "--protocol", "latest",
                        "--backend", "sim", "--runs-dir", str(tmp_path / "runs")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "needs real brokers; run it on the local, docker or ssh backend" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())



def test_a_setting_the_client_refuses_is_one_line_exit_2(tmp_path: Path) -> None:
    """--client-config with a key librdkafka does not know: the client's own words,
    one line, exit 2, no traceback, before anything starts (no run directory)."""
    r = subprocess.run([sys.executable, "-m", "harness.cli", "reproduce",
                        "kip101-hw-truncation-loss", "--protocol", "0.11",
                        "--client", "confluent-kafka", "--client-config", "no.such.setting=1",
                        "--port", str(free_base_port(2)), "--no-server",
                        "--runs-dir", str(tmp_path / "runs")],
                       capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert r.returncode == 2, r.stderr
    assert "confluent-kafka refused the" in r.stderr and "no.such.setting" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_matrix_on_sim_refuses_a_real_client_row_by_name(tmp_path: Path) -> None:
    """Named, a row on a real Kafka client is refused on the simulator (exit 2,
    nothing run); unnamed it is left out of a sim matrix with a line saying so
    (matrix.run)."""
    r = subprocess.run([sys.executable, "-m", "harness.cli", "matrix", "--backend", "sim",
                        "--scenario", "idempotent-producer-leader-change",
                        "--runs-dir", str(tmp_path / "runs")],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("isrlab: idempotent-producer-leader-change: a real Kafka "
                                "client needs real brokers; run it on the local, docker or "
                                "ssh backend")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
