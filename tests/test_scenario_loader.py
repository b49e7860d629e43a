"""Scenario files: the shipped ones load; malformed ones fail as FILE:LINE: what."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.protocol import VERSIONS
from contract import PROTOCOLS
from harness.errors import UsageError
from harness.scenario.loader import (
    NOT_REACHABLE,
    SCENARIO_DIR,
    NotReachable,
    all_variants,
    find_scenario,
    list_scenarios,
    load_scenario,
)
from harness.yamlloc import ScenarioError

TESTS_DATA = Path(__file__).resolve().parent / "data"

GOOD = """\
name: x
description: a test scenario
cluster:
  brokers: [A, B]
  topics:
    - {name: t, partitions: 1, replicas: [[A, B]]}
broker:
  min.insync.replicas: 1
expect:
  "0.10": [lost-write]
  0.11: []
  2.0: []
  latest: []
steps:
  - produce: {label: m0}
  - wait: {node: B, hw: 1}
  - pause: A
  - wait: {node: controller, event: leader-elected, leader: B, leader_epoch: 1}
  - final-read
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def error_of(tmp_path: Path, text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text))
    return info.value


def test_shipped_scenarios_load() -> None:
    names = {s.name for s in list_scenarios()}
    assert names == {"kip101-hw-truncation-loss", "kip101-power-loss-divergence",
                     "kip279-unclean-divergence", "kafka-7415-epoch-gap-divergence",
                     "kip320-stale-metadata-divergence", "last-replica-standing-loss",
                     "alter-partition-stale-incarnation", "unclean-election-loss",
                     "min-isr-prevents-loss", "acks1-failover-loss", "follower-gc-pause",
                     "isr-flapping-lag-messages", "hw-lags-one-fetch",
                     "idempotent-producer-leader-change"}
    for s in list_scenarios():
        assert s.path.stem == s.name
        first = next(p for p in PROTOCOLS if s.reachable_at(p))  # the oldest it reaches
        assert {first, "latest"} <= set(s.expect)
        assert s.steps[-1].kind == "final-read"


def test_expectations_of_the_catalogue() -> None:
    """docs/catalogue.md#kip101-hw-truncation-loss and #kip279-unclean-divergence."""
    s1 = load_scenario(SCENARIO_DIR / "kip101-hw-truncation-loss.yaml")
    assert {v: s1.expect_for(v) for v in PROTOCOLS} == {
        "0.10": ["lost-write"], **{v: [] for v in PROTOCOLS[1:]}}
    s3 = load_scenario(SCENARIO_DIR / "kip279-unclean-divergence.yaml")
    assert s3.expect_for("0.11") == ["divergence", "lost-write"]
    assert s3.expect_for("2.0") == ["lost-write"]
    assert s3.workload["acks"] == 1
    assert s3.broker_config["unclean.leader.election.enable"] is True


def test_expectations_of_the_catalogue_10_to_13() -> None:
    """docs/catalogue.md's scenarios 10-13, with 0.10 as the model gives it
    (docs/protocol-versions.md); 13 is not reachable before 2.7."""
    want = {
        "kafka-7415-epoch-gap-divergence": {"2.0": ["divergence", "lost-write"],
                                            "2.1": ["lost-write"], "latest": ["lost-write"]},
        "kip320-stale-metadata-divergence": {"2.0": ["divergence"], "2.1": [], "latest": []},
        "last-replica-standing-loss": {"3.7": ["lost-write"], "4.0": ["lost-write"], "4.1": [],
                                       "latest": []},
        "alter-partition-stale-incarnation": {"2.7": ["lost-write"], "3.7": [],
                                              "latest": []},
    }
    for name, per_version in want.items():
        s = load_scenario(SCENARIO_DIR / f"{name}.yaml")
        for version, kinds in per_version.items():
            assert sorted(s.expect_for(version)) == kinds, (name, version)
    s = load_scenario(SCENARIO_DIR / "alter-partition-stale-incarnation.yaml")
    assert [p for p in PROTOCOLS if not s.reachable_at(p)] == ["0.10", "0.11", "2.0", "2.1"]
    assert s.reachable is not None and s.reachable.since == "2.7"
    assert "AlterIsr (KIP-497)" in s.reachable.why and "\n" not in s.reachable.why


def test_good_file_and_unquoted_versions(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, GOOD))
    assert s.expect["0.11"] == [] and s.expect["2.0"] == []
    assert [st.kind for st in s.steps] == ["produce", "wait", "pause", "wait", "final-read"]
    assert s.steps[0].args == {"n": 1, "label": "m0", "acks": "all", "expect": "ok",
                               "topic": "t", "partition": 0}
    assert s.steps[1].line == 16 and s.steps[1].args["conditions"] == {"hw": 1}
    assert s.steps[3].args["conditions"] == {"leader": "B", "leader_epoch": 1}


@pytest.mark.parametrize("old,new,line,what", [
    ("  - pause: A\n", "  - pause: Z\n", 17, "unknown node 'Z'"),
    ("  - pause: A\n", "  - explode: A\n", 17, "unknown step 'explode'"),
    ("  - pause: A\n", "  - partition: A\n", 17, "unknown partition 'A'"),
    ("  - pause: A\n", "  - partition: {isolate: Q}\n", 17, "unknown node 'Q'"),
    ("  - pause: A\n", "  - partition: {split: [[A], [A, B]]}\n", 17, "more than one group"),
    ("  - pause: A\n", "  - partition: {cut: [[A]]}\n", 17, "cut takes two lists"),
    ("  - pause: A\n", "  - heal: A\n", 17, "heal takes no arguments"),
    ("  - pause: A\n", "  - {pause: A, kill: B}\n", 17, "exactly one kind"),
    ("hw: 1}", "hw: 1, colour: red}", 16, "unknown status field 'colour'"),
    ("hw: 1}", "hw: {about: 1}}", 16, "a comparison is one of"),
    ("hw: 1}", "hw: {ge: lots}}", 16, "hw ge must be an integer"),
    ("{label: m0}", "{label: m0, acks: 2}", 15, "acks must be"),
    ("{label: m0}", "{label: m0, expect: maybe}", 15, "expect must be one of"),
    ("  latest: []\n", "", 9, "missing: latest"),
    ("  2.0: []\n", "  2.0: []\n  3.0: []\n", 13, "unknown protocol version '3.0'"),
    ("[lost-write]", "[lost-writes]", 10, "unknown anomaly 'lost-writes'"),
    ("  min.insync.replicas: 1\n", "  min.insync.replica: 1\n", 8,
     "unknown broker config key 'min.insync.replica'"),
    ("  min.insync.replicas: 1\n", "  min.insync.replicas: many\n", 8, "must be an integer"),
    ("replicas: [[A, B]]", "replicas: [[A, C]]", 6, "unknown node 'C'"),
    ("replicas: [[A, B]]", "replicas: [[A, B], [B, A]]", 6, "1 partition(s) but 2"),
    ("name: x\n", "name: x\nname: y\n", 2, "duplicate key 'name'"),
    ("name: x\n", "", 1, "missing 'name'"),
    ("description: a test scenario\n", "description: a test scenario\nextra: 1\n", 3,
     "unknown key 'extra'"),
    ("  - wait: {node: B, hw: 1}\n", "  - wait: {node: B, hw: 1\n", 17, "YAML syntax error"),
    ("  - wait: {node: B, hw: 1}\n", "  - wait: {hw: 1}\n", 16, "needs a node"),
    ("  - wait: {node: B, hw: 1}\n", "  - wait: {node: B, hw: 1, timeout: soon}\n", 16,
     "does not parse"),
    ("  - final-read\n", "  - final-read: {heal: maybe}\n", 19, "heal must be"),
    ("  - wait: {node: B, hw: 1}\n", "  - wait: {node: B, running: maybe}\n", 16,
     "running must be true or false"),
    ("  - wait: {node: B, hw: 1}\n", "  - wait: {node: B, running: false, hw: 1}\n", 16,
     "takes node, running and timeout only, not 'hw'"),
])
def test_errors_name_file_and_line(tmp_path: Path, old: str, new: str, line: int,
                                   what: str) -> None:
    assert old in GOOD
    err = error_of(tmp_path, GOOD.replace(old, new, 1))
    assert err.line == line, str(err)
    assert what in err.message, str(err)
    assert str(err).startswith(f"{tmp_path / 's.yaml'}:{line}: ")
    assert isinstance(err, UsageError) and err.exit_code == 2


# Every number an input takes is bounded before anything starts: past its limit a
# value is a typo, and a run of it would not end (or a broker would refuse it).
@pytest.mark.parametrize(("old", "new", "line", "what"), [
    ("  - pause: A\n", "  - sleep: 1e300\n", 17, "sleep '1e300' does not parse"),
    ("  - pause: A\n", "  - sleep: 1000000000000\n", 17, "more than 7 days"),
    ("  - pause: A\n", "  - sleep: 700000\n", 17, "more than 7 days"),
    ("  - pause: A\n", "  - sleep: .nan\n", 17, "does not parse"),
    ("  - pause: A\n", "  - sleep: {until: 1000000000000}\n", 17, "more than 7 days"),
    ("{label: m0}", "{label: m0, n: 100000000000}", 15, "n must be an integer in 1..10,000,000"),
    ("  - pause: A\n", "  - consume: {n: 100000000000}\n", 17, "in 1..10,000,000"),
    ("hw: 1}", "hw: 100000000000000000000}", 16, "hw must be an integer >= 0"),
    ("hw: 1}", "hw: {ge: 100000000000000000000}}", 16, "hw ge must be an integer in"),
    ("leader_epoch: 1}", "leader_epoch: 100000000000000000000}", 18,
     "event field leader_epoch must be an integer"),
    ("  min.insync.replicas: 1\n", "  min.insync.replicas: 100000000000000000000\n", 8,
     "must be in 1..2147483647 (Kafka's range)"),
    ("  min.insync.replicas: 1\n", "  min.insync.replicas: 0\n", 8,
     "must be in 1..2147483647"),
    ("  min.insync.replicas: 1\n", "  min.insync.replicas: 1\ncontroller:\n"
     "  broker.session.timeout.ms: 1000000000000000000000000000000\n", 10,
     "'broker.session.timeout.ms' must be in 0..2147483647"),
    ("partitions: 1,", "partitions: 100000,", 6, "partitions must be an integer in 1..10,000"),
    ("  - pause: A\n", "  - load: {rate: 0}\n", 17,
     "rate must be a number of sends per second in (0, 1,000,000]"),
    ("  - pause: A\n", "  - load: {rate: 1e9}\n", 17, "sends per second"),
    ("  - pause: A\n", "  - load: {rate: 10, producers: 100000}\n", 17,
     "producers must be an integer in 1..1,000"),
])
def test_numbers_are_bounded(tmp_path: Path, old: str, new: str, line: int, what: str) -> None:
    assert old in GOOD
    err = error_of(tmp_path, GOOD.replace(old, new, 1))
    assert (err.line, what in err.message) == (line, True), str(err)
    assert len(str(err)) < 300 and "\n" not in str(err)


def test_a_running_wait(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, GOOD.replace("  - wait: {node: B, hw: 1}\n",
                                                   "  - wait: {node: B, running: false}\n", 1)))
    assert s.steps[1].args["running"] is False and s.steps[1].args["node"] == "B"
    assert s.steps[1].describe() == "wait for B to exit"


def test_not_a_mapping_and_empty(tmp_path: Path) -> None:
    assert "must be a mapping" in str(error_of(tmp_path, "- a\n- b\n"))
    assert "empty" in str(error_of(tmp_path, ""))


@pytest.mark.parametrize(("bad", "line", "named"), [
    (b"\xff", 1, "byte 0xff"),               # the very first byte
    (b"\xe9", 2, "byte 0xe9"),               # latin-1 e-acute inside "description: Caf?"
    (b"\xe2\x82", 2, "bytes 0xe2 0x82"),     # a UTF-8 character cut short
])
def test_not_utf8_names_the_line_and_offset_of_the_first_bad_byte(
        tmp_path: Path, bad: bytes, line: int, named: str) -> None:
    raw = GOOD.encode()
    if line == 1:
        raw = bad + raw
    else:
        raw = raw.replace(b"description: a test", b"description: Caf" + bad + b" a test", 1)
    offset = raw.index(bad)
    raw += b"# and more: \xff\n"  # a later bad byte is not the one named
    p = tmp_path / "s.yaml"
    p.write_bytes(raw)
    with pytest.raises(ScenarioError) as info:
        load_scenario(p)
    err = info.value
    assert err.line == line and err.exit_code == 2
    verb = "are" if len(bad) > 1 else "is"
    assert str(err) == (f"{p}:{line}: {named} at offset {offset} {verb} not UTF-8; "
                        "save the file as UTF-8")


def test_character_yaml_refuses_names_the_line(tmp_path: Path) -> None:
    err = error_of(tmp_path, GOOD.replace("a test scenario", "a \x00 scenario"))
    assert err.line == 2 and err.message == "character U+0000 is not allowed in YAML"
    assert "\n" not in str(err)


def test_find_scenario(tmp_path: Path) -> None:
    assert find_scenario("kip101-hw-truncation-loss").name == "kip101-hw-truncation-loss.yaml"
    with pytest.raises(UsageError,
                       match="unknown scenario 'nope'; known: acks1-failover-loss, alter-"):
        find_scenario("nope")
    with pytest.raises(UsageError, match="no scenario file"):
        find_scenario(str(tmp_path / "missing.yaml"))
    with pytest.raises(UsageError, match="is a directory, not a scenario file"):
        find_scenario(str(tmp_path))
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(UsageError, match="dir.yaml is a directory, not a scenario file"):
        find_scenario(str(tmp_path / "dir.yaml"))
    assert find_scenario(str(write(tmp_path, GOOD))) == tmp_path / "s.yaml"


def test_find_scenario_name_too_long(tmp_path: Path) -> None:
    """A name or path no file can have (a component over 255 bytes) is unknown, not
    an OSError (found by bench/fuzz.py's command-line target)."""
    with pytest.raises(UsageError, match="unknown scenario 'xxx"):
        find_scenario("x" * 300)
    with pytest.raises(UsageError, match="no scenario file"):
        find_scenario(str(tmp_path / ("x" * 300 + ".yaml")))


def test_per_version_steps(tmp_path: Path) -> None:
    """`since: X` runs a step from X on, `before: X` under the versions older than X:
    expect's from-version form, aliases resolved."""
    text = GOOD.replace("  - pause: A\n", "  - pause: A\n    since: \"2.1\"\n"
                        "  - kill: A\n    before: \"2.1\"\n")
    s = load_scenario(write(tmp_path, text))
    for version in PROTOCOLS:
        kinds = [st.kind for st in s.steps_for(version)]
        old = version in ("0.10", "0.11", "2.0")
        assert ("kill" in kinds, "pause" in kinds) == (old, not old), version
    assert s.steps[2].as_dict()["since"] == "2.1" and "before" not in s.steps[2].as_dict()
    assert s.steps[3].as_dict()["before"] == "2.1" and "since" not in s.steps[3].as_dict()
    both = GOOD.replace("  - pause: A\n", "  - pause: A\n    since: \"2.0\"\n"
                        "    before: latest\n")
    s = load_scenario(write(tmp_path, both))
    assert [p for p in PROTOCOLS if s.steps[2].applies_to(p)] == [
        "2.0", "2.1", "2.7", "2.8", "3.7", "4.0"]
    bad = GOOD.replace("  - pause: A\n", "  - pause: A\n    since: \"0.9\"\n")
    err = error_of(tmp_path, bad)
    assert err.line == 18 and "unknown protocol version '0.9' in since" in err.message
    backwards = GOOD.replace("  - pause: A\n", "  - pause: A\n    since: \"2.1\"\n"
                             "    before: \"2.0\"\n")
    err = error_of(tmp_path, backwards)
    assert err.line == 19 and "before 2.0 must be a later version than since 2.1" in err.message
    listed = GOOD.replace("  - pause: A\n", "  - pause: A\n    protocols: [\"0.10\"]\n")
    assert "unknown step 'protocols'" in error_of(tmp_path, listed).message


def test_partition_steps_become_grudges(tmp_path: Path) -> None:
    text = GOOD.replace("  - pause: A\n", "  - partition: {isolate: A}\n  - heal\n"
                        "  - partition: {cut: [[A], [controller]]}\n  - partition: halves\n")
    steps = load_scenario(write(tmp_path, text)).steps
    kinds = [s.kind for s in steps]
    assert kinds[2:6] == ["partition", "heal", "partition", "partition"]
    assert steps[2].args["grudge"] == {"A": ["B", "controller"], "B": ["A"], "controller": ["A"]}
    assert steps[4].args["grudge"] == {"A": ["controller"], "controller": ["A"]}
    # halves of [A, B, controller]: [A] against [B, controller].
    assert steps[5].args["grudge"] == {"A": ["B", "controller"], "B": ["A"], "controller": ["A"]}


# -- issue 20: variants, timed faults, load, assertions --------------------------------------

VARIANTS = GOOD.replace("steps:\n", """\
assert:
  - {figure: isr_shrinks, ge: 1}
variants:
  one:
    description: acks 1
    workload: {acks: 1}
    broker: {unclean.leader.election.enable: true}
    expect: {"0.10": [], latest: [lost-write]}
    assert:
      - {figure: hw_stall_ms, lt: 500, before: "0.11"}
  two: {}
steps:
""").replace("  - final-read\n", """\
  - pause: {node: B, for: 100ms}
    variants: [one]
  - load: {burst: 6, every: 100ms}
  - load: stop
  - final-read
""")


def test_variants_lay_their_config_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, VARIANTS)
    first = load_scenario(path)
    assert first.variant == "one" and list(first.variants) == ["one", "two"]
    assert first.run_name == "x-one"
    assert first.workload["acks"] == 1 and first.steps[0].args["acks"] == 1
    assert first.broker_config == {"min.insync.replicas": 1,
                                   "unclean.leader.election.enable": True}
    assert first.expect_for("2.0") == [] and first.expect_for("latest") == ["lost-write"]
    assert [a["figure"] for a in first.assertions] == ["isr_shrinks", "hw_stall_ms"]
    assert [a["figure"] for a in first.assertions_for("2.0")] == ["isr_shrinks"]
    pause = next(s for s in first.steps if s.kind == "pause" and s.args.get("for"))
    assert pause.args == {"nodes": ["B"], "for": 0.1}
    two = load_scenario(path, "two")
    assert two.workload["acks"] == "all" and two.expect_for("0.10") == ["lost-write"]
    assert not any(s.args.get("for") for s in two.steps), "the timed pause is one's only"
    load = [s.args for s in two.steps if s.kind == "load"]
    assert load[0]["burst"] == 6 and load[0]["every"] == 0.1 and load[1] == {"stop": True}


def test_unknown_variant_is_file_line(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, VARIANTS), "three")
    assert info.value.line == VARIANTS.splitlines().index("variants:") + 1
    assert "no variant 'three'" in str(info.value) and "one, two" in str(info.value)


@pytest.mark.parametrize(("old", "new", "what"), [
    ("variants: [one]", "variants: [uno]", "unknown variant 'uno'"),
    ("figure: isr_shrinks", "figure: isr_shrunk", "unknown figure 'isr_shrunk'"),
    ("{figure: isr_shrinks, ge: 1}", "{figure: isr_shrinks, at_least: 1}",
     "unknown key 'at_least' in an assertion"),
    ("{figure: isr_shrinks, ge: 1}", "{figure: isr_shrinks}", "needs a comparison"),
    ("{figure: isr_shrinks, ge: 1}", "{figure: isr_shrinks, ge: many}", "needs a number"),
    ("for: 100ms", "for: soon", "pause for 'soon' does not parse"),
    ("pause: {node: B, for: 100ms}", "kill: {node: B, for: 100ms}", "for applies to pause"),
    ("pause: {node: B, for: 100ms}", "pause: {node: Z, for: 100ms}", "unknown node 'Z'"),
    ("every: 100ms", "every: fast", "every 'fast' does not parse"),
    ("{burst: 6, every: 100ms}", "{burst: 6}", "needs both burst"),
    ("    workload: {acks: 1}", "    workload: {acks: 2}", "acks must be"),
    ("  two: {}", "  two: {expect: {\"0.10\": [lost-writes], latest: []}}",
     "unknown anomaly 'lost-writes'"),
    ("  two: {}", "  two: {colour: red}", "unknown key 'colour' in variant two"),
])
def test_bad_variant_assertion_and_timed_steps(tmp_path: Path, old: str, new: str,
                                               what: str) -> None:
    assert old in VARIANTS
    text = VARIANTS.replace(old, new)
    e = error_of(tmp_path, text)
    assert what in str(e), str(e)
    line = next(i for i, x in enumerate(text.splitlines(), 1) if new.splitlines()[0] in x)
    assert e.line == line, (str(e), line)


def test_load_steps_refused_with_a_whole_run_workload(tmp_path: Path) -> None:
    text = VARIANTS.replace("steps:\n", "workload: {producers: 1}\nsteps:\n", 1)
    e = error_of(tmp_path, text)
    assert "load step cannot be used with workload producers" in str(e)


def test_expectations_of_scenarios_md_4_to_9() -> None:
    def rows(name: str) -> dict:
        s = load_scenario(SCENARIO_DIR / f"{name}.yaml")
        from harness.scenario.loader import all_variants
        return {v.variant: ({p: v.expect_for(p) for p in ("0.10", "2.0", "4.0")},
                            sorted(a["figure"] for a in v.assertions))
                for v in all_variants(s)}

    none = {"0.10": [], "2.0": [], "4.0": []}
    lost = {p: ["lost-write"] for p in none}
    assert rows("unclean-election-loss") == {
        "unclean-off": (none, ["offline_ms", "unavailable_ms"]), "unclean-on": (lost, [])}
    assert rows("min-isr-prevents-loss") == {None: (none, ["sends_fail"])}
    assert rows("acks1-failover-loss") == {"acks-1": (lost, []), "acks-all": (none, [])}
    assert rows("follower-gc-pause") == {
        None: (none, ["hw_stall_ms", "isr_rejoins", "isr_shrinks"])}
    assert rows("isr-flapping-lag-messages") == {
        "lag-messages": (none, ["isr_rejoins", "isr_shrinks"]),
        "lag-time": (none, ["isr_shrinks"])}
    assert rows("hw-lags-one-fetch") == {None: (none, [])}


# -- docs/catalogue.md: the specification of the shipped scenarios -----------------------

CATALOGUE_MD = SCENARIO_DIR.parents[2] / "docs" / "catalogue.md"


def test_catalogue_index_states_what_the_files_expect() -> None:
    """Every row of docs/catalogue.md's index (scenario, variant, one cell per release
    line) says exactly what the file's `expect` gives, or "not reachable" where its
    `reachable` leaves the version out, and every file has its rows."""
    lines = CATALOGUE_MD.read_text().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| # | scenario |"))
    versions = [c.strip(" `") for c in lines[head].strip("|").split("|")[3:]]
    assert versions == [p for p in PROTOCOLS if p != "latest"]
    table = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        _, name, variant, *cells = (c.strip() for c in line.strip("|").split("|"))
        key = (name.split("]")[0].strip("[`"), variant.strip("`") or None)
        table[key] = [_index_cell(c) for c in cells]
    # None: not reachable (the file's `reachable`), a cell with no verdict.
    files = {(row.name, row.variant): [sorted(row.expect_for(v)) if row.reachable_at(v)
                                       else None for v in versions]
             for s in list_scenarios() for row in all_variants(s)}
    assert table == files


def test_protocol_versions_md_says_where_each_verdict_changes() -> None:
    """docs/protocol-versions.md's "Where each scenario's verdict changes": per row,
    the oldest line's verdict and each line where the file's `expect` (or its
    `reachable`) gives another, and nothing else."""
    text = (CATALOGUE_MD.parent / "protocol-versions.md").read_text()
    section = text.split("## Where each scenario's verdict changes", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            name, variant, changes = (c.strip() for c in line.strip("|").split("|"))
            table[(name.strip("`"), variant.strip("`") or None)] = changes
    versions = [p for p in PROTOCOLS if p != "latest"]
    want = {}
    for s in list_scenarios():
        for row in all_variants(s):
            parts, last = [], None
            for v in versions:
                kinds = sorted(row.expect_for(v)) if row.reachable_at(v) else None
                if kinds != last or not parts:
                    cell = (NOT_REACHABLE if kinds is None else
                            ", ".join(f"`{k}`" for k in kinds) or "none")
                    parts.append(f"`{v}` {cell}")
                last = kinds
            want[(row.name, row.variant)] = " → ".join(parts)
    assert table == want


def _index_cell(c: str) -> list[str] | None:
    if c == NOT_REACHABLE:
        return None
    return [] if c == "none" else sorted(k.strip(" `") for k in c.split(","))


def test_every_source_points_at_its_catalogue_section() -> None:
    text = CATALOGUE_MD.read_text()
    for s in list_scenarios():
        assert s.source == f"docs/catalogue.md#{s.name}", s.path
        assert f"\n## {s.name}\n" in text, s.name


# -- reachable: the versions a scenario's path exists in ----------------------------------

REACH = GOOD.replace('expect:\n  "0.10": [lost-write]\n  0.11: []\n',
                     'reachable:\n  since: "0.11"\n  why: no such path\n    before 0.11\n'
                     'expect:\n  0.11: [lost-write]\n')


def test_reachable_limits_the_versions(tmp_path: Path) -> None:
    """`reachable: {since, before, why}`: the versions outside it have no expectation
    and no run; the why is kept on one line."""
    s = load_scenario(write(tmp_path, REACH))
    assert s.reachable is not None and (s.reachable.since, s.reachable.before) == ("0.11", None)
    assert s.reachable.why == "no such path before 0.11"
    assert [p for p in PROTOCOLS if s.reachable_at(p)] == list(PROTOCOLS[1:])
    assert s.expect_for("0.11") == ["lost-write"] and s.expect_for("latest") == []
    with pytest.raises(NotReachable) as info:
        s.expect_for("0.10")
    assert str(info.value) == ("x is not reachable under 0.10 (reachable from 0.11): "
                               "no such path before 0.11")
    assert info.value.exit_code == 2
    # A closed range: its newest version must be given instead of latest.
    both = REACH.replace('  since: "0.11"\n', '  since: "0.11"\n  before: "2.1"\n')
    both = both.replace("  latest: []\n", "")
    s = load_scenario(write(tmp_path, both))
    assert [p for p in PROTOCOLS if s.reachable_at(p)] == ["0.11", "2.0"]
    assert s.reachable is not None and s.reachable.span() == "from 0.11, before 2.1"
    err = error_of(tmp_path, both.replace("  2.0: []\n", ""))
    assert err.line == 14 and "the newest reachable protocol version" in err.message
    assert err.message.endswith("missing: 2.0 (use [] for none)")
    # One version only, named by its alias.
    last = GOOD.replace('expect:\n  "0.10": [lost-write]\n  0.11: []\n  2.0: []\n',
                        'reachable: {since: latest, why: w}\nexpect:\n')
    s = load_scenario(write(tmp_path, last))
    assert [p for p in PROTOCOLS if s.reachable_at(p)] == [VERSIONS[-1], "latest"]


@pytest.mark.parametrize(("old", "new", "line", "what"), [
    ('since: "0.11"', 'since: "0.9"', 10, "unknown protocol version '0.9' in since"),
    ('  why: no such path\n    before 0.11\n', '', 9, "reachable is missing 'why'"),
    ('  why: no such path\n    before 0.11\n', '  why: ""\n', 11,
     "reachable why must be a non-empty string"),
    ('  since: "0.11"\n', '  since: "2.0"\n  before: "0.11"\n', 11,
     "before 0.11 must be a later version than since 2.0"),
    ('  since: "0.11"\n', '  since: "0.11"\n  before: "0.11"\n', 11,
     "before 0.11 must be a later version than since 0.11"),
    ('  since: "0.11"\n', '', 9, "reachable needs since and/or before"),
    ('  since: "0.11"\n', '  before: "0.10"\n', 10, "reachable before 0.10 leaves no version"),
    ('  since: "0.11"\n', '  since: "0.11"\n  until: "2.0"\n', 11,
     "unknown key 'until' in reachable"),
    ('reachable:\n  since: "0.11"\n  why: no such path\n    before 0.11\n',
     'reachable: "0.11"\n', 9, "reachable must be a mapping"),
    ('  0.11: [lost-write]\n', '  "0.10": []\n  0.11: [lost-write]\n', 14,
     "expect 0.10: the path is not reachable under 0.10 (reachable from 0.11), so an entry "
     "there would be a verdict on a path that does not exist"),
    ('  since: "0.11"\n', '  since: "0.11"\n  before: "4.0"\n', 17,
     "expect latest: the path is not reachable under latest (reachable from 0.11, before 4.0)"),
    ('  0.11: [lost-write]\n', '', 13, "missing: 0.11"),
])
def test_reachable_errors_name_file_and_line(tmp_path: Path, old: str, new: str, line: int,
                                             what: str) -> None:
    assert old in REACH
    err = error_of(tmp_path, REACH.replace(old, new, 1))
    assert (err.line, what in err.message) == (line, True), str(err)
    assert str(err).startswith(f"{tmp_path / 's.yaml'}:{line}: ")
    assert isinstance(err, UsageError) and err.exit_code == 2


def test_variants_inherit_reachable_or_replace_it(tmp_path: Path) -> None:
    """A variant has the file's `reachable` unless it declares its own (which replaces
    it, as `expect` does); its expect is checked against the one it has."""
    inherit = VARIANTS.replace("expect:\n", 'reachable: {since: "0.11", why: w}\nexpect:\n', 1)
    inherit = inherit.replace('  "0.10": [lost-write]\n  0.11: []\n', "  0.11: [lost-write]\n")
    err = error_of(tmp_path, inherit)
    line = next(i for i, x in enumerate(inherit.splitlines(), 1) if '{"0.10": []' in x)
    assert err.line == line and "expect 0.10: the path of variant one is not reachable" in str(err)
    inherit = inherit.replace('{"0.10": [], latest: [lost-write]}',
                              '{"0.11": [], latest: [lost-write]}')
    path = write(tmp_path, inherit)
    assert [load_scenario(path, v).reachable.since for v in ("one", "two")] == ["0.11", "0.11"]
    own = VARIANTS.replace("  two: {}", '  two:\n    reachable: {before: "2.1", why: old only}\n'
                           '    expect: {"0.10": [], "2.0": []}')
    path = write(tmp_path, own)
    one, two = load_scenario(path, "one"), load_scenario(path, "two")
    assert one.reachable is None and one.reachable_at("latest")
    assert two.reachable is not None and two.reachable.why == "old only"
    assert [p for p in PROTOCOLS if two.reachable_at(p)] == ["0.10", "0.11", "2.0"]
    with pytest.raises(NotReachable, match="x-two is not reachable under 2.1"):
        two.expect_for("2.1")
    # The file's expect, inherited, must fit the variant's own reachable too.
    err = error_of(tmp_path, VARIANTS.replace(
        "  two: {}", '  two:\n    reachable: {before: "2.1", why: old only}'))
    assert "expect latest: the path of variant two is not reachable" in str(err)


def test_partition_steps_name_nodes_as_written(tmp_path: Path) -> None:
    """The step log says `cut A from C`, not Python lists (issue 45, item 9)."""
    text = (TESTS_DATA / "stall-partitioned.yaml").read_text()
    text = text.replace("partition: {cut: [[A], [C]]}",
                        "partition: {cut: [[A], [B, C]]}\n  - heal\n"
                        "  - partition: {split: [[A, B], [C]]}")
    f = tmp_path / "cuts.yaml"
    f.write_text(text)
    steps = [s.describe() for s in load_scenario(f).steps if s.kind == "partition"]
    assert steps[0].startswith("partition (cut A from B, C): "), steps
    assert steps[1].startswith("partition (split A, B | C): "), steps
    assert not any("[" in s or "'" in s for s in steps), steps
