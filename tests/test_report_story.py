"""The report's first screen tells the story of the loss: for each shipped
scenario under 0.10 (run for real on the local backend, checked in one batch),
the headline says what happened to the data, and the story names the truncation
or power cycle and the election behind every anomaly, each linking to its row in
the timeline. Plus the story's rules on hand-made runs (no Spark)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from conftest_spark import checked_scenario_runs

from broker.partition import TRUNCATION_RULES
from checker.api import RunResult
from reports import story
from reports.render import render_run
from reports.rundata import RunData


def real(test):
    """A test on the real scenario runs: brokers (e2e) and the Spark checker."""
    return pytest.mark.e2e(pytest.mark.spark(test))


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def story_lines(report: str) -> dict[int, dict[str, str]]:
    """Story line number → its kind, node, link target and text."""
    out = {}
    for m in re.finditer(r'<li id="story-(\d+)" class="[^"]*" data-kind="([\w-]+)"'
                         r'(?: data-node="(\w+)")?(?: title="[^"]*")?>(.*?)</li>', report,
                         flags=re.S):
        ref = re.search(r'<a class="t" href="#([\w-]+)"', m.group(4))
        body = re.search(r'<span class="text">(.*?)</span>', m.group(4), flags=re.S)
        out[int(m.group(1))] = {"kind": m.group(2), "node": m.group(3) or "",
                                "ref": ref.group(1) if ref else "",
                                "text": text(body.group(1)) if body else ""}
    return out


def causes(report: str) -> list[dict]:
    """The "why" list: each cause's kind, partition, offsets and the story lines it links."""
    out = []
    for m in re.finditer(r'<li class="cause" data-kind="([\w-]+)" data-part="([^"]+)" '
                         r'data-offsets="([\d,-]*)">(.*?)</li>', report, flags=re.S):
        steps = re.findall(r'<a class="step k-[\w-]+" data-kind="([\w-]+)" '
                           r'href="#story-(\d+)">', m.group(4))
        out.append({"kind": m.group(1), "part": m.group(2),
                    "offsets": {o for run in m.group(3).split(",") if run
                                for a, _, b in [run.partition("-")]
                                for o in range(int(a), int(b or a) + 1)},
                    "steps": [(k, int(n)) for k, n in steps]})
    return out


def headline(report: str) -> tuple[str, str, str]:
    banner = re.search(r'<header class="banner ([\w-]+)" id="headline">(.*?)</header>', report,
                       flags=re.S)
    assert banner is not None
    head = re.search(r'<div class="headline">(.*?)</div>', banner.group(2), flags=re.S)
    exp = re.search(r'<div class="expectation">(.*?)</div>', banner.group(2), flags=re.S)
    return banner.group(1), text(head.group(1)), text(exp.group(1))


@pytest.fixture(scope="module")
def scenario_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunResult]:
    return checked_scenario_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def reports(scenario_runs: dict[str, RunResult]) -> dict[str, str]:
    return {name: render_run(r.run_dir).read_text() for name, r in scenario_runs.items()}


SCENARIOS = ["kip101-hw-truncation-loss", "kip101-power-loss-divergence",
             "kip279-unclean-divergence"]


@real
@pytest.mark.parametrize("name", SCENARIOS)
def test_headline_says_what_happened_to_the_data(scenario_runs: dict[str, RunResult],
                                                 reports: dict[str, str], name: str) -> None:
    run, report = scenario_runs[name], reports[name]
    lost = sorted(a["witness"]["acked_offset"] for a in run.anomalies
                  if a["kind"] == "lost-write")
    assert lost, "every shipped scenario loses an acknowledged write under 0.10"
    cls, head, expectation = headline(report)
    assert cls == "data-loss"  # coloured by what happened to the data, not the verdict
    n = len(lost)
    where = str(lost[0]) if n == 1 else f"{lost[0]}–{lost[-1]}"
    assert head.startswith(f"{n} acknowledged write{'s' if n > 1 else ''} lost (t/0 "
                           f"offset{'s' if n > 1 else ''} {where})"), head
    if any(a["kind"] == "divergence" for a in run.anomalies):
        assert "replicas A and B diverge" in head
    kip = re.search(r"\((KIP-\d+)\)", json.loads((run.run_dir / "run.json").read_text())
                    ["description"]).group(1)
    assert head.endswith(f"this scenario documents for 0.10 ({kip})"), head
    assert expectation.startswith(f"reproduced as documented As expected: scenario {name} "
                                  "documents")
    # What happened comes before anything else on the page.
    assert report.index('id="story"') < report.index("<h2>Replica logs</h2>") \
        < report.index("<h2>Anomalies</h2>")


@real
@pytest.mark.parametrize("name", SCENARIOS)
def test_story_names_the_truncation_or_power_cycle_and_the_election(
        scenario_runs: dict[str, RunResult], reports: dict[str, str], name: str) -> None:
    run, report = scenario_runs[name], reports[name]
    lines, why = story_lines(report), causes(report)
    assert lines and why
    rows = set(re.findall(r'<tr id="([\w-]+)"', report))
    for n, ln in lines.items():
        assert ln["ref"] in rows, f"story line {n} links to no timeline row: {ln}"
    for a in run.anomalies:
        w = a["witness"]
        offsets = ({w["acked_offset"]} if a["kind"] == "lost-write"
                   else {o["offset"] for o in w["offsets"]})
        mine = [c for c in why if c["kind"] == a["kind"] and offsets <= c["offsets"]]
        assert len(mine) == 1, (a["kind"], offsets, why)
        steps = {k for k, _ in mine[0]["steps"]}
        assert steps & {"truncate", "power-cycle"}, (name, a["kind"], mine[0])
        assert "election" in steps, (name, a["kind"], mine[0])
        for kind, n in mine[0]["steps"]:
            assert lines[n]["kind"] == kind
        told = " ".join(lines[n]["text"] for _, n in mine[0]["steps"])
        assert "The controller elects" in told
        assert "truncates to" in told or "Power-cycle of" in told


def line_of(lines: dict[int, dict[str, str]], kind: str, node: str) -> list[str]:
    return [ln["text"] for ln in lines.values() if ln["kind"] == kind and ln["node"] == node]


@real
def test_hw_truncation_loss_story(scenario_runs: dict[str, RunResult],
                                  reports: dict[str, str]) -> None:
    """B truncates m1 away by the 0.10 HW rule when it follows the new leader C, then is
    elected without it; A drops the last copy when it follows B. A ghost row shows
    offset 1 as each replica held it."""
    run, report = scenario_runs["kip101-hw-truncation-loss"], reports[
        "kip101-hw-truncation-loss"]
    m1 = json.loads((run.run_dir / "run.json").read_text())["labels"]["m1"][0]
    lines = story_lines(report)
    b_trunc = line_of(lines, "truncate", "B")[0]
    assert "B follows C (epoch 1); it truncates to its HW 1 " \
           f"(rule: hw), removing offset 1 = value {m1} (m1, epoch 0)" in b_trunc
    (elected,) = line_of(lines, "election", "B")
    assert elected.startswith("The controller elects B leader of epoch 2 (clean, ISR B)")
    assert f"it lacks value {m1} (m1) at offset 1" in elected
    (a_trunc,) = line_of(lines, "truncate", "A")
    assert f"the last copy of value {m1} (m1)" in a_trunc
    ghost = re.search(r'<tr class="ghost" data-offset="1">(.*?)</tr>', report, flags=re.S)
    assert ghost is not None
    cells = [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", ghost.group(1), flags=re.S)]
    assert cells[0] == "1" and cells[1] == str(m1)  # offset, acknowledged value
    held = cells[2:-1]  # A, C and B held m1 in epoch 0 until they truncated it
    assert len(held) == 3
    assert all(c.startswith(f"e0 · {m1}") and "truncated" in c for c in held), held
    assert sum("rule hw" in c for c in held) == 2, held  # B and C, by 0.10's HW rule
    assert cells[-1] == "— (no replica holds it)"


@real
def test_power_loss_story(scenario_runs: dict[str, RunResult],
                          reports: dict[str, str]) -> None:
    run, report = scenario_runs["kip101-power-loss-divergence"], reports[
        "kip101-power-loss-divergence"]
    labels = json.loads((run.run_dir / "run.json").read_text())["labels"]
    lines = story_lines(report)
    (pc,) = line_of(lines, "power-cycle", "B")
    assert "Power-cycle of B" in pc and f"without offset 1 = value {labels['m1'][0]} (m1)" in pc
    (elected,) = line_of(lines, "election", "B")
    assert "elects B leader of epoch 3" in elected
    assert any(f"acknowledges value {labels['m2'][0]} (m2) at offset 1" in ln["text"]
               and "where A" in ln["text"] for ln in lines.values() if ln["kind"] == "ack")
    (kept,) = line_of(lines, "truncate", "A")
    assert "its HW checkpoint 2 (rule: hw), removing nothing" in kept
    assert f"It keeps value {labels['m1'][0]} (m1, epoch 0) at offset 1, where B holds " \
           f"value {labels['m2'][0]} (m2, epoch 3)" in kept


@real
def test_unclean_divergence_story(reports: dict[str, str]) -> None:
    lines = story_lines(reports["kip279-unclean-divergence"])
    elections = [ln["text"] for ln in lines.values() if ln["kind"] == "election"]
    assert elections and all("unclean" in e for e in elections)
    faults = [ln["text"] for ln in lines.values() if ln["kind"] == "fault"]
    assert any("stopped (controlled shutdown)" in f and "never gets it" in f for f in faults)
    (kept,) = line_of(lines, "truncate", "B")
    assert "removing nothing. It keeps" in kept


# -- the story's rules on hand-made runs (no Spark) ------------------------------------


def test_every_truncation_rule_has_words() -> None:
    assert set(story.RULES) == set(TRUNCATION_RULES)


def _run(events: list[dict], history: list[dict], anomalies: list[dict],
         logs: dict | None = None, protocol: str = "0.10") -> RunData:
    return RunData(Path("."), {"protocol": protocol, "labels": {}}, {"found": {}}, anomalies,
                   logs or {}, {}, history, events, {})


def _seven_lost_at_2() -> tuple[list[dict], dict]:
    """Value 7, acknowledged by A at t/0 offset 2 (acks all), and its lost-write."""
    hist = [{"index": 0, "time": 20, "process": 0, "type": "invoke", "f": "send"},
            {"index": 1, "time": 21, "process": 0, "type": "ok", "f": "send", "topic": "t",
             "partition": 0, "value": 7, "offset": 2, "acks": "all", "node": "A"}]
    lost = {"kind": "lost-write", "topic": "t", "partition": 0, "witness": {
        "topic": "t", "partition": 0, "value": 7, "acked_offset": 2, "op": {"index": 1},
        "held_by": []}}
    return hist, lost


def test_lost_write_without_new_truncate_fields() -> None:
    """Events written before truncate events listed their records: the story still
    names the truncation (by its reason) and the election."""
    ev = [
        {"time": 10, "node": "controller", "type": "leader-elected", "topic": "t",
         "partition": 0, "leader": "A", "leader_epoch": 0, "isr": ["A", "B"]},
        {"time": 30, "node": "B", "type": "became-follower", "topic": "t", "partition": 0,
         "leader_epoch": 0, "leader": "A", "leo": 3, "hw": 1},
        {"time": 31, "node": "B", "type": "truncate", "topic": "t", "partition": 0,
         "leader_epoch": 0, "from": 3, "to": 1, "reason": "high-watermark"},
        {"time": 50, "node": "controller", "type": "leader-elected", "topic": "t",
         "partition": 0, "leader": "B", "leader_epoch": 1, "isr": ["B"]},
        {"time": 51, "node": "B", "type": "became-leader", "topic": "t", "partition": 0,
         "leader_epoch": 1, "leo": 1, "hw": 1, "isr": ["B"]},
    ]
    hist, lost = _seven_lost_at_2()
    st, _ = story.build(_run(ev, hist, [lost]))
    (c,) = st.causes
    assert [s.line.kind for s in c.steps] == ["ack", "truncate", "election"]
    assert st.lines[1].text == ("B follows A (epoch 0); it truncates to its HW 1 (rule: hw), "
                                "removing offsets 1–2.")
    assert "B's log ends at offset 1: it lacks value 7 at offset 2" in st.lines[2].text


@pytest.mark.parametrize(("via", "unclean", "how"), [
    ("last-known-leader", True, "(unclean: ISR and ELR were empty and B was the partition's "
     "last known leader, elected on its return even after an unclean restart: KIP-966's "
     "balanced recovery)"),
    ("elr", False, "(from the ELR (KIP-966): ISR empty, B stayed eligible)"),
    ("isr", False, "(clean, ISR B)")])
def test_an_election_says_which_kip_966_rule_chose_its_leader(via: str, unclean: bool,
                                                               how: str) -> None:
    """The controller's leader-elected `via`: the ISR, the ELR, or the last known leader
    once ISR and ELR are empty (PartitionChangeBuilder, 4.1's default)."""
    ev = [
        {"time": 10, "node": "controller", "type": "leader-elected", "topic": "t",
         "partition": 0, "leader": "A", "leader_epoch": 0, "isr": ["A", "B"]},
        {"time": 50, "node": "controller", "type": "leader-elected", "topic": "t",
         "partition": 0, "leader": "B", "leader_epoch": 1, "isr": ["B"], "unclean": unclean,
         "via": via},
        {"time": 51, "node": "B", "type": "became-leader", "topic": "t", "partition": 0,
         "leader_epoch": 1, "leo": 1, "hw": 1, "isr": ["B"]},
    ]
    hist, lost = _seven_lost_at_2()
    st, _ = story.build(_run(ev, hist, [lost], protocol="4.1"))
    (el,) = [ln for ln in st.lines if ln.kind == "election"]
    assert el.text.startswith(f"The controller elects B leader of epoch 1 {how}"), el.text


def test_story_says_why_a_broker_halted() -> None:
    """0.10-2.0: a follower ahead of its leader, unclean election off, halts its broker
    (ReplicaFetcherThread.handleOffsetOutOfRange); restarted, it truncates to its HW
    checkpoint and removes the last copy. The story names the halt, with Kafka's rule,
    before the truncation it led to."""
    part = {"topic": "t", "partition": 0}
    ev = [
        {"time": 1, "node": "B", "type": "started", "incarnation": "b1", "partitions": []},
        {"time": 10, "node": "controller", "type": "leader-elected", **part, "leader": "A",
         "leader_epoch": 0, "isr": ["A", "B"]},
        {"time": 11, "node": "B", "type": "became-follower", **part, "leader_epoch": 0,
         "leader": "A", "leo": 0, "hw": 0},
        {"time": 40, "node": "controller", "type": "leader-elected", **part, "leader": "A",
         "leader_epoch": 1, "isr": ["A"]},
        {"time": 41, "node": "A", "type": "became-leader", **part, "leader_epoch": 1,
         "leo": 1, "hw": 1, "isr": ["A"]},
        {"time": 50, "node": "B", "type": "halt", **part, "leader_epoch": 1,
         "reason": "offset-out-of-range", "leader_leo": 1, "leo": 2},
        {"time": 51, "node": "B", "type": "flush", **part, "leo": 2},
        {"time": 52, "node": "B", "type": "hw-checkpoint", **part, "hw": 1},
        {"time": 60, "node": "B", "type": "started", "incarnation": "b2",
         "partitions": [{**part, "leo": 2, "hw": 1}]},
        {"time": 61, "node": "B", "type": "became-follower", **part, "leader_epoch": 1,
         "leader": "A", "leo": 2, "hw": 1},
        {"time": 62, "node": "B", "type": "truncate", **part, "leader_epoch": 1, "from": 2,
         "to": 1, "rule": "hw", "reason": "high-watermark", "removed": [[1, 0, 7]]},
    ]
    hist = [{"index": 0, "time": 20, "process": 0, "type": "invoke", "f": "send"},
            {"index": 1, "time": 21, "process": 0, "type": "ok", "f": "send", **part,
             "value": 7, "offset": 1, "acks": "all", "node": "A"}]
    lost = {"kind": "lost-write", **part, "witness": {
        **part, "value": 7, "acked_offset": 1, "op": {"index": 1}, "held_by": []}}
    st, _ = story.build(_run(ev, hist, [lost]))
    (c,) = st.causes
    kinds = [s.line.kind for s in c.steps]
    assert kinds.index("halt") == kinds.index("truncate") - 1
    halt = next(ln for ln in st.lines if ln.kind == "halt")
    assert halt.node == "B" and halt.ref == "ev-5"
    assert halt.text.startswith("B halts: its leader A answers a fetch with "
                                "OFFSET_OUT_OF_RANGE, its LEO 1 below B's own LEO 2, and with "
                                "unclean leader election off")
    assert "ReplicaFetcherThread.handleOffsetOutOfRange" in halt.text
    # A truncation after a restart that no halt caused names no halt.
    no_halt = [e for e in ev if e["type"] not in ("halt", "flush", "hw-checkpoint")]
    st2, _ = story.build(_run(no_halt, hist, [lost]))
    assert "halt" not in [ln.kind for ln in st2.lines]


# -- the story of valid runs, from real sim runs' directories (no Spark) ---------------


def _sim_run(tmp_path: Path, name: str, protocol: str) -> RunData:
    """A scenario's run on the sim backend (`isrlab trace`), as the story reads it:
    its events and history, with no anomaly (what the checker finds in these
    versions, which the scenario documents as valid)."""
    import subprocess
    import sys

    from conftest import ROOT

    from contract import EVENTS, HISTORY
    from contract.rundir import read_jsonl, read_meta
    r = subprocess.run([sys.executable, "-m", "harness.cli", "trace", name, "--protocol",
                        protocol, "--runs-dir", str(tmp_path), "--quiet"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    run = Path(r.stdout.splitlines()[-1].removeprefix("run: "))
    return RunData(run, read_meta(run), {"found": {}}, [], {}, {}, read_jsonl(run, HISTORY),
                   read_jsonl(run, EVENTS), {})


@pytest.mark.parametrize(("protocol", "rule"), [
    ("0.11", "from Kafka 0.11.0 a follower truncates only to the end offset the leader "
             "answers to OffsetsForLeaderEpoch (KIP-101)"),
    ("latest", "from Kafka 2.8.0 a follower truncates only where the leader's Fetch answer "
               "names a diverging epoch (KAFKA-10554)"),
])
def test_valid_hw_truncation_story_names_the_rule_that_kept_m1(tmp_path: Path, protocol: str,
                                                               rule: str) -> None:
    data = _sim_run(tmp_path, "kip101-hw-truncation-loss", protocol)
    m1 = data.meta["labels"]["m1"][0]
    st, _ = story.build(data)
    (c,) = st.causes
    assert c.kind == "kept" and c.title == f"value {m1} (m1), acknowledged at t/0 offset 1, kept"
    kept = [ln for ln in st.lines if ln.kind == "kept" and ln.node == "B"]
    assert len(kept) == 1
    assert kept[0].text.startswith(f"B follows C (epoch 1) holding value {m1} (m1) at offset "
                                   "1, above its HW 1. It does not truncate to its HW, as "
                                   "0.10's rule hw would")
    assert rule in kept[0].text and kept[0].text.endswith(f"It keeps value {m1} (m1).")
    (elected,) = [ln for ln in st.lines if ln.kind == "election"]
    assert elected.node == "B" and f"It still holds value {m1} (m1) at offset 1." in elected.text
    kinds = [s.line.kind for s in c.steps]
    assert kinds[:3] == ["ack", "kept", "election"], kinds
    epochs = [ln for ln in st.lines if ln.kind == "epoch"]
    if protocol == "0.11":
        # A, back, asks B where its epoch 0 ends: the request that keeps its m1. C,
        # resumed, asks the same before the final read (it has never written in
        # its own epoch 1), and keeps both records too.
        assert {ln.node: ln.text for ln in epochs} == {n: (
            f"{n} asks B where its epoch 0 ends (OffsetsForLeaderEpoch); the answer: end offset "
            "2 (the answer names no epoch: OffsetsForLeaderEpoch, KIP-101, Kafka 0.11.0). Its "
            "log ends at 2: it truncates nothing.") for n in "AC"}
        assert "epoch" in kinds
    else:
        assert epochs == []


def test_valid_stale_incarnation_story(tmp_path: Path) -> None:
    """A second scenario's valid version: B follows A in a new epoch holding m0 above
    its HW, and keeps it by the protocol's rule."""
    data = _sim_run(tmp_path, "alter-partition-stale-incarnation", "3.7")
    m0 = data.meta["labels"]["m0"][0]
    st, _ = story.build(data)
    (c,) = st.causes
    assert c.kind == "kept" and c.offsets == [0]
    (kept,) = [ln for ln in st.lines if ln.kind == "kept"]
    assert kept.node == "B" and f"holding value {m0} (m0) at offset 0, above its HW 0" \
        in kept.text
    assert "(KAFKA-10554)" in kept.text and "so it truncates nothing" in kept.text


def test_lost_writes_with_one_chain_are_told_once() -> None:
    """Three writes lost by the same truncation and election: one cause, "3 writes lost
    the same way", with one step for their acknowledgements."""
    part = {"topic": "t", "partition": 0}
    ev = [
        {"time": 10, "node": "controller", "type": "leader-elected", **part, "leader": "A",
         "leader_epoch": 0, "isr": ["A", "B"]},
        {"time": 30, "node": "B", "type": "became-follower", **part, "leader_epoch": 1,
         "leader": "C", "leo": 4, "hw": 1},
        {"time": 31, "node": "B", "type": "truncate", **part, "leader_epoch": 1, "from": 4,
         "to": 1, "rule": "hw", "reason": "high-watermark",
         "removed": [[1, 0, 7], [2, 0, 8], [3, 0, 9]]},
        {"time": 50, "node": "controller", "type": "leader-elected", **part, "leader": "B",
         "leader_epoch": 2, "isr": ["B"]},
        {"time": 51, "node": "B", "type": "became-leader", **part, "leader_epoch": 2,
         "leo": 1, "hw": 1, "isr": ["B"]},
    ]
    hist, lost = [], []
    for i, v in enumerate((7, 8, 9)):
        hist += [{"index": 2 * i, "time": 20 + i, "process": i, "type": "invoke", "f": "send"},
                 {"index": 2 * i + 1, "time": 21 + i, "process": i, "type": "ok", "f": "send",
                  **part, "value": v, "offset": 1 + i, "acks": "all", "node": "A"}]
        lost.append({"kind": "lost-write", **part, "witness": {
            **part, "value": v, "acked_offset": 1 + i, "op": {"index": 2 * i + 1},
            "held_by": []}})
    st, _ = story.build(_run(ev, hist, lost))
    (c,) = st.causes
    assert c.title == "3 writes lost the same way: acknowledged at t/0 offsets 1–3"
    assert c.offsets == [1, 2, 3]
    assert [s.line.kind for s in c.steps] == ["ack", "truncate", "election"]
    assert c.steps[0].label == "3 writes acknowledged"


_PART = {"topic": "t", "partition": 0}
_TWO_LEADERS = [
    {"time": 10, "node": "controller", "type": "leader-elected", **_PART, "leader": "A",
     "leader_epoch": 0, "isr": ["A", "B"]},
    {"time": 50, "node": "controller", "type": "leader-elected", **_PART, "leader": "B",
     "leader_epoch": 1, "isr": ["B"]},
]


@pytest.mark.parametrize(("protocol", "why"), [
    ("0.10", "Kafka 0.10 has no idempotent producer (KIP-98 came in 0.11.0)"),
    ("latest", "The producer is not idempotent (enable.idempotence off)")])
def test_a_duplicate_without_a_network_duplicate_is_the_producers_resend(
        protocol: str, why: str) -> None:
    """A value at offset 1 (epoch 0, A) and 2 (epoch 1, B), one send acknowledged at
    2 by a real client, and no net-duplicated event: B, elected holding the first
    copy, appended the producer's resend; why nothing told it apart depends on the
    release (KIP-98)."""
    hist = [{"index": 0, "time": 20, "process": 0, "type": "invoke", "f": "send"},
            {"index": 1, "time": 60, "process": 0, "type": "ok", "f": "send", **_PART,
             "value": 7, "offset": 2, "acks": "all", "client": "confluent-kafka"},
            {"index": 2, "time": 70, "process": "final", "type": "ok", "f": "read", **_PART,
             "records": [[0, 6], [1, 7], [2, 7]]}]
    dup = {"kind": "duplicate", **_PART, "witness": {
        **_PART, "value": 7, "at": [{"offset": 1, "epoch": 0}, {"offset": 2, "epoch": 1}],
        "sends": [{"index": 1, "type": "ok", "offset": 2}]}}
    st, _ = story.build(_run(_TWO_LEADERS, hist, [dup], protocol=protocol))
    (c,) = st.causes
    assert (c.kind, c.offsets) == ("duplicate", [1, 2]) and c.explained
    assert [s.line.kind for s in c.steps] == ["election", "resend", "ack", "final"]
    election, resend = c.steps[0].line, c.steps[1].line
    assert "It still holds value 7 at offset 1." in election.text
    assert resend.text.startswith(
        "B appends value 7 a second time, at offset 2 (epoch 1): the producer "
        "(confluent-kafka) sent it again, never having had an answer to the send written "
        "at offset 1 in epoch 0 by A."), resend.text
    assert why in resend.text
    # the resend comes before the acknowledgement it got (same time)
    assert resend.n < c.steps[2].line.n


def _recognised(i: int, t: int) -> dict:
    return {"time": t, "node": "B", "type": "producer-duplicate", **_PART, "leader_epoch": 1,
            "offset": i, "last_offset": i, "held": [0, 100 + i], "producer_id": 5,
            "producer_epoch": 0, "base_sequence": i, "count": 1}


def test_a_recognised_resend_is_told_in_a_run_without_anomalies() -> None:
    """An idempotent producer's resend that B found in its log (producer-duplicate):
    B's election holding it, the recognition with the batch's sequence and where it
    came from, and the acknowledgement with the first copy's offset."""
    hist = [{"index": 0, "time": 55, "process": 0, "type": "invoke", "f": "send"},
            {"index": 1, "time": 61, "process": 0, "type": "ok", "f": "send", **_PART,
             "value": 101, "offset": 1, "acks": "all", "client": "confluent-kafka"}]
    st, _ = story.build(_run(_TWO_LEADERS + [_recognised(1, 60)], hist, [],
                             protocol="latest"))
    (c,) = [c for c in st.causes if c.kind == "recognised"]
    assert c.title == "value 101, resent to B, stored once" and c.offsets == [1]
    assert [s.line.kind for s in c.steps] == ["election", "recognised", "ack"]
    assert c.steps[1].line.text.startswith(
        "B recognises a resend: producer 5 (epoch 0) sends sequence 1 again, a batch it "
        "holds at offset 1 (value 101 (epoch 0), written by A). It answers with that offset "
        "and appends nothing"), c.steps[1].line.text
    assert "KIP-98" in c.steps[1].line.text


def test_recognised_resends_past_the_first_few_are_counted() -> None:
    evs = _TWO_LEADERS + [_recognised(i, 60 + i) for i in range(7)]
    st, _ = story.build(_run(evs, [], [], protocol="latest"))
    told = [c for c in st.causes if c.kind == "recognised"]
    assert len(told) == 5
    assert told[-1].steps[-1].line.text.endswith(
        "2 more resends were recognised in this run (the timeline lists each "
        "producer-duplicate event).")


@pytest.mark.spark
def test_chaos_story_groups_writes_lost_the_same_way(tmp_path: Path) -> None:
    """A simulated 0.10 chaos run that power-cycles every broker at once loses every
    write acknowledged before (shrink's seed): the story tells the writes lost by one
    chain once ("N writes lost the same way"), each lost offset in one cause, and
    its lines name a few offsets and count the rest."""
    import subprocess
    import sys

    from conftest import ROOT
    r = subprocess.run([sys.executable, "-m", "harness.cli", "chaos", "--backend", "sim",
                        "--protocol", "0.10", "--faults", "power-cycle:all,pause",
                        "--time-limit", "12s", "--rate", "20", "--batch", "1", "--producers",
                        "2", "--partitions", "1", "--interval", "2", "--runs", "1", "--seed",
                        "11", "--runs-dir", str(tmp_path / "runs"), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1200)
    (run,) = json.loads(r.stdout)["runs"]
    assert run["found"].get("lost-write", 0) >= 8, run
    report = (Path(run["run_dir"]) / "check" / "report.html").read_text()
    why = [c for c in causes(report) if c["kind"] == "lost-write"]
    titles = re.findall(r'<li class="cause" data-kind="lost-write"[^>]*>.*?<b>(.*?)</b>', report,
                        flags=re.S)
    grouped = [(t, c) for t, c in zip(titles, why, strict=True)
               if re.match(r"\d+ writes lost the same way: acknowledged at t/0 offsets ", t)]
    assert grouped, titles
    title, group = max(grouped, key=lambda x: len(x[1]["offsets"]))
    n = len(group["offsets"])
    assert n >= 8 and title.startswith(f"{n} writes lost the same way")
    # one step for all their acknowledgements, then the chain they share
    steps = re.search(rf"<b>{re.escape(title)}</b>(.*?)</li>", report, flags=re.S)
    labels = re.findall(r'<span class="n">\d+</span> ([^<]*)</a>', steps.group(1))
    assert labels[0] == f"{n} writes acknowledged", labels
    assert any("power-cycle of" in x for x in labels) and any("elected without it" in x
                                                               for x in labels)
    lost = [o for c in why for o in c["offsets"]]
    assert len(lost) == len(set(lost))  # each lost offset told once
    assert len(why) < len(lost) / 4
    lines = story_lines(report)
    (pc,) = [ln["text"] for ln in lines.values() if ln["kind"] == "power-cycle"]
    assert re.search(r"… \d+ more", pc) and len(pc) < 1000, pc


@pytest.mark.parametrize(("meta", "not_checked", "head"), [
    ({"workload": {"client": "confluent-kafka"}}, ["hw-regression"],
     "No acknowledged write lost; the replicas agree"),
    ({"target": "kafka", "workload": {"client": "confluent-kafka"}},
     ["divergence", "hw-regression"],
     "No anomaly in the history; not checked: divergence, hw-regression"),
    ({"workload": {}}, [], "No acknowledged write lost; the replicas agree")])
def test_what_a_clean_run_claims_follows_what_was_checked(meta: dict, not_checked: list,
                                                          head: str) -> None:
    """A real client's polls carry no HW: on the reference brokers hw-regression is
    not checked (and said so), but the replicas were compared; on an existing
    cluster they were not, and the headline claims no agreement."""
    from checker.historyonly import unchecked
    from reports.story.headline import headline

    assert sorted(unchecked(meta)) == not_checked
    data = RunData(Path("."), {"protocol": "latest", **meta},
                   {"found": {}, "kinds_not_checked": unchecked(meta)}, [], {}, {}, [], [], {})
    assert headline(data).text == head


def _acked_sends(n: int, part: dict, leader: str) -> list[dict]:
    """Values 100, 101, ... acknowledged by `leader` at offsets 0..n-1, one a tick."""
    hist: list[dict] = []
    for i in range(n):
        hist += [{"index": 2 * i, "time": 20 + i, "process": 0, "type": "invoke", "f": "send"},
                 {"index": 2 * i + 1, "time": 21 + i, "process": 0, "type": "ok", "f": "send",
                  **part, "value": 100 + i, "offset": i, "acks": "all", "node": leader}]
    return hist


def test_records_kept_by_two_followers_are_grouped_by_who_kept_them() -> None:
    """Two followers whose at-risk ranges overlap ([0, 50) and [30, 80)): the
    records only B held, those both held, and those only A held are three causes,
    each with the followers that kept it -- worked out over runs of offsets."""
    part = {"topic": "t", "partition": 0}
    ev = [
        {"time": 10, "node": "controller", "type": "leader-elected", **part, "leader": "C",
         "leader_epoch": 0, "isr": ["A", "B", "C"]},
        {"time": 500, "node": "B", "type": "became-follower", **part, "leader_epoch": 1,
         "leader": "C", "leo": 50, "hw": 0},
        {"time": 600, "node": "A", "type": "became-follower", **part, "leader_epoch": 1,
         "leader": "C", "leo": 80, "hw": 30},
    ]
    st, _ = story.build(_run(ev, _acked_sends(80, part, "C"), [], protocol="latest"))
    got = {(c.offsets[0], c.offsets[-1]): [s.label for s in c.steps[1:]] for c in st.causes}
    assert got == {(0, 29): ["B keeps it (no truncation to its HW)"],
                   (30, 49): ["B keeps it (no truncation to its HW)",
                              "A keeps it (no truncation to its HW)"],
                   (50, 79): ["A keeps it (no truncation to its HW)"]}, got
    assert all(c.steps[0].label == f"{len(c.offsets)} records acknowledged" for c in st.causes)
    kept_a = next(ln for ln in st.lines if ln.kind == "kept" and ln.node == "A")
    assert "(50 records) at offsets 30–79, above its HW 30" in kept_a.text
    # Two kept lines: each names the rule the gist states by its JIRA only.
    assert "It does not truncate to its HW (KAFKA-10554, as above). No Fetch answer" \
        in kept_a.text and "0.10's rule hw" not in kept_a.text
    assert kept_a.text.endswith("so it truncates nothing. It keeps them.")
    kept_b = next(ln for ln in st.lines if ln.kind == "kept" and ln.node == "B")
    assert "as 0.10's rule hw would" in kept_b.text  # the first tells the rule in full
    assert st.gist == ("80 acknowledged records were at risk: a follower held them above its "
                       "HW as it followed a new leader (2 times), and every one was kept -- from "
                       "Kafka 2.8.0 a follower truncates only where the leader's Fetch answer "
                       "names a diverging epoch (KAFKA-10554).")


def test_many_records_kept_the_same_way_are_one_cause() -> None:
    """A follower holding 50 acknowledged records above its HW as it follows a new
    leader, keeping them all: one cause for the 50 (as lost writes are grouped), and
    the kept line names six values and counts the rest -- a long valid run's story
    stays readable, and is built in linear time."""
    part = {"topic": "t", "partition": 0}
    ev = [
        {"time": 10, "node": "controller", "type": "leader-elected", **part, "leader": "A",
         "leader_epoch": 0, "isr": ["A", "B"]},
        {"time": 500, "node": "B", "type": "became-follower", **part, "leader_epoch": 1,
         "leader": "C", "leo": 50, "hw": 0},
    ]
    st, _ = story.build(_run(ev, _acked_sends(50, part, "A"), [], protocol="latest"))
    (c,) = st.causes
    assert c.kind == "kept" and c.offsets == list(range(50))
    assert c.title == "50 acknowledged records kept the same way: acknowledged at t/0 offsets 0–49"
    assert c.steps[0].label == "50 records acknowledged"
    (kept,) = [ln for ln in st.lines if ln.kind == "kept"]
    assert kept.text.startswith("B follows C (epoch 1) holding value 100, value 101, value 102, "
                                "value 103, value 104, value 105, … (50 records) at offsets "
                                "0–49, above its HW 0."), kept.text
