"""The `delay` nemesis: its sans-IO rules (broker/netdelay.py, nemesis/delays.py),
the process shell that holds messages in order (broker/process.NetBlock), the
scenario step, and one run on real local processes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS, free_port

from broker.netdelay import FOREVER, DelayRules, parse_rules
from broker.process import NetBlock
from nemesis import delays


def test_rules_hold_matching_messages_until_they_end() -> None:
    r = DelayRules()
    r.set(parse_rules([{"peer": "B", "direction": "in", "for_ms": 2000},
                       {"peer": "A", "direction": "out", "requests": ["alter-partition"]}],
                      now=1000.0))
    assert r.release_at("B", "in", "replica-fetch", 1500.0) == 3000.0
    assert r.release_at("B", "in", "replica-fetch", 3000.0) is None  # over
    assert r.release_at("B", "out", "replica-fetch", 1500.0) is None  # other direction
    assert r.release_at("C", "in", "replica-fetch", 1500.0) is None  # other peer
    assert r.release_at(None, "in", "status", 1500.0) is None  # admin: never held
    assert r.release_at("A", "out", "alter-partition", 1e9) == FOREVER
    assert r.release_at("A", "out", "heartbeat", 1500.0) is None  # not a held request
    v = r.version
    r.clear()
    assert r.release_at("A", "out", "alter-partition", 1500.0) is None and r.version > v


def test_longest_matching_rule_wins() -> None:
    r = DelayRules()
    r.set(parse_rules([{"peer": "B", "direction": "in", "for_ms": 100},
                       {"peer": "B", "direction": "in", "for_ms": 500}], now=0.0))
    assert r.release_at("B", "in", "heartbeat", 1.0) == 500.0


@pytest.mark.parametrize("bad", [{"peer": "B"}, {"peer": "B", "direction": "sideways"},
                                 {"direction": "in"},
                                 {"peer": "B", "direction": "in", "for_ms": -1}])
def test_malformed_rules_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        parse_rules([bad], now=0.0)


def test_plan_holds_both_ends_of_a_link() -> None:
    """X -> Y: Y holds X's requests, X holds its answers to Y (every message is a
    broker's request or its answer)."""
    p = delays.plan(["B"], ["controller"], 2.0, ["alter-partition"])
    assert p == {
        "controller": [{"peer": "B", "direction": "in", "for_ms": 2000,
                        "requests": ["alter-partition"]}],
        "B": [{"peer": "controller", "direction": "out", "for_ms": 2000,
               "requests": ["alter-partition"]}],
    }
    assert delays.plan(["A"], ["B"], None) == {
        "B": [{"peer": "A", "direction": "in"}], "A": [{"peer": "B", "direction": "out"}]}


def test_remaining_shortens_timed_rules_for_a_restarted_node() -> None:
    p = delays.merge(delays.plan(["A"], ["B"], 2.0), delays.plan(["C"], ["B"], None))
    left = delays.remaining(p, 0.5)
    assert left["B"] == [{"peer": "A", "direction": "in", "for_ms": 1500},
                         {"peer": "C", "direction": "in"}]
    assert delays.remaining(p, 3.0)["B"] == [{"peer": "C", "direction": "in"}]


def test_netblock_delivers_held_messages_in_order() -> None:
    """Held requests of one link reach the handler in the order they came, and only
    once the rules are cleared; an unheld peer passes meanwhile."""
    handled: list[tuple[str, int]] = []
    events: list[str] = []

    async def handler(msg: dict[str, Any]) -> dict[str, Any]:
        handled.append((msg["id"], msg["n"]))
        return {"error": None}

    async def main() -> None:
        net = NetBlock()
        net.on_event = lambda type_, **f: events.append(type_)
        assert (await net.set_delays([{"peer": "A", "direction": "in"}]))["error"] is None
        tasks = []
        for n in range(5):
            tasks.append(asyncio.create_task(net.deliver({"id": "A", "type": "x", "n": n},
                                                         handler)))
            await asyncio.sleep(0.005)
        await net.deliver({"id": "B", "type": "x", "n": 0}, handler)
        assert handled == [("B", 0)]
        assert events == ["delay-held"] * 5, "one event per held message, as it arrives"
        await net.set_delays([])
        # The answer waits until the released messages left: all five delivered.
        assert events.count("delay-delivered") == 5
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert handled == [("B", 0)] + [("A", n) for n in range(5)]
    assert events.count("delay-held") == 5 and events.count("delay-delivered") == 5


def test_netblock_refuses_a_malformed_rule() -> None:
    answer = asyncio.run(NetBlock().set_delays([{"peer": "A"}]))
    assert answer["error"] == "INVALID_REQUEST"


def test_delay_step_parses(tmp_path: Path) -> None:
    from harness.scenario.loader import load_scenario
    from harness.yamlloc import ScenarioError

    src = (TESTS / "data" / "delay-fetches.yaml").read_text()
    s = load_scenario(_write(tmp_path, src))
    step = next(st for st in s.steps if st.kind == "delay")
    assert step.args["for"] == 1.5 and step.args["requests"] == ["replica-fetch"]
    assert step.args["plan"]["A"][0] == {"peer": "B", "direction": "in", "for_ms": 1500,
                                        "requests": ["replica-fetch"]}
    for bad, msg in [("{from: B, to: B}", "both"), ("{from: B, to: Z}", "unknown node"),
                     ("{from: B, to: A, requests: gossip}", "unknown request"),
                     ("{from: B, to: A, for: -1}", "more than 0")]:
        with pytest.raises(ScenarioError, match=msg):
            load_scenario(_write(tmp_path, src.replace(
                "{from: B, to: A, for: 1.5s, requests: replica-fetch}", bad)))


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "delay-fetches.yaml"
    p.write_text(text)
    return p


@pytest.mark.e2e
def test_delay_on_local_processes(tmp_path: Path) -> None:
    """On real processes: A holds B's fetches for 1.5 s, so the acks=all write m1
    completes only after them; both writes survive; held fetches are delivered."""
    from harness.progress import Progress
    from harness.run.runner import RunOptions, run_scenario
    from harness.scenario.loader import load_scenario

    rec = run_scenario(load_scenario(TESTS / "data" / "delay-fetches.yaml"),
                       RunOptions(protocol="latest", backend="local", runs_dir=tmp_path,
                                  seed=1, backend_options={"port": free_port()}),
                       Progress(quiet=True))
    assert rec.error is None, rec.error
    ops = [json.loads(x) for x in (rec.run_dir / "history.jsonl").read_text().splitlines()]
    nem = [o for o in ops if o["process"] == "nemesis"]
    assert [o["f"] for o in nem][:2] == ["delay", "delay"]
    assert nem[0]["value"] == {"from": ["B"], "to": ["A"], "for": 1.5,
                               "requests": ["replica-fetch"]}
    sends = {o["label"]: o for o in ops if o["f"] == "send" and o["type"] == "ok"}
    assert set(sends) == {"m0", "m1", "m2"}
    evs = [json.loads(x) for x in (rec.run_dir / "events.jsonl").read_text().splitlines()]
    held = [e for e in evs if e["node"] == "A" and e["type"] == "delay-held"]
    delivered = [e for e in evs if e["node"] == "A" and e["type"] == "delay-delivered"]
    assert held and len(delivered) == len(held)
    assert all(e["peer"] == "B" and e["request"] == "replica-fetch" for e in held)
    # The first held fetch waited out the delay; m1 was acknowledged after it.
    assert delivered[0]["time"] - held[0]["time"] >= 1.3e9
    m1_invoke = next(o for o in ops if o.get("label") == "m1" and o["type"] == "invoke")
    assert sends["m1"]["time"] - m1_invoke["time"] >= 1.0e9
    final = [o for o in ops if o["process"] == "final" and o["type"] == "ok"][-1]
    assert len(final["records"]) == 3


@pytest.mark.e2e
@pytest.mark.parametrize("backend", ["local", "sim"])
def test_every_held_message_is_an_event(tmp_path: Path, backend: str) -> None:
    """docs/scenarios.md: one `delay-held` per held message, on every backend. B's
    fetches from A are held until delivered; B's fetcher times out and fetches
    again, and that second fetch, queued behind the first on the same link, is
    an event of its own while the first is still held (the scenario's second
    wait, which would time out otherwise)."""
    from harness.progress import Progress
    from harness.run.runner import RunOptions, run_scenario
    from harness.scenario.loader import load_scenario

    options = {"port": free_port()} if backend == "local" else {}
    rec = run_scenario(load_scenario(TESTS / "data" / "delay-held-twice.yaml"),
                       RunOptions(protocol="latest", backend=backend, runs_dir=tmp_path,
                                  seed=1, backend_options=options),
                       Progress(quiet=True))
    assert rec.error is None, rec.error
    evs = [json.loads(x) for x in (rec.run_dir / "events.jsonl").read_text().splitlines()]
    at_a = [e for e in evs if e["node"] == "A" and e["type"] in ("delay-held", "delay-delivered")]
    kinds = [e["type"] for e in at_a]
    assert kinds[:2] == ["delay-held", "delay-held"], kinds
    assert kinds.count("delay-held") == kinds.count("delay-delivered")
