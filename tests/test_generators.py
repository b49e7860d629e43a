"""The sans-IO generators: combinators, fault schedules, the workload's send stream.
Seeded determinism: the same seed gives the same schedule, to the op."""

from __future__ import annotations

import pytest

from generator import (
    cycle,
    limit,
    mix,
    once,
    ops,
    phases,
    sleep,
    sleep_around,
    take,
    time_limit,
)
from harness.chaos.runs import ChaosConfig, chaos_run, schedule_steps
from nemesis.schedule import (
    DEFAULT_TARGETS,
    FaultSpec,
    FaultSpecError,
    ScheduleSpec,
    parse_faults,
    schedule,
)
from workloads.continuous import sends

BROKERS = ["A", "B", "C"]
PARTS = [("t", 0), ("t", 1), ("t", 2)]


def spec(faults: str, seconds: float = 60.0) -> ScheduleSpec:
    return ScheduleSpec(parse_faults(faults), BROKERS, PARTS, seconds)


def test_phases_sleep_and_time_limit() -> None:
    g = phases(once({"f": "a"}), sleep(2), once({"f": "b"}))
    assert [(t.at, t.op) for t in ops(g, 1)] == [(0.0, {"f": "a"}), (2.0, {"f": "b"})]
    endless = cycle(lambda rng: phases(sleep(1), once({"f": "x"})))
    got = ops(time_limit(3.5, endless), 1)
    assert [t.at for t in got] == [1.0, 2.0, 3.0]
    # Cut off, a time limit ends at its limit: what follows starts there.
    after = ops(phases(time_limit(3.5, endless), once({"f": "end"})), 1)
    assert after[-1].at == 3.5 and after[-1].op == {"f": "end"}
    assert len(ops(limit(2, endless), 1)) == 2


def test_mix_and_sleep_around_are_seeded() -> None:
    g = mix([phases(sleep_around(1.0), once({"f": "a"})),
             phases(sleep_around(1.0), once({"f": "b"}))])
    first = take(g, 5, 50)
    assert first == take(g, 5, 50)
    assert first != take(g, 6, 50)
    assert {t.op["f"] for t in first} == {"a", "b"}
    gaps = [b.at - a.at for a, b in zip(first, first[1:], strict=False)]
    assert all(0.5 <= x <= 1.5 for x in gaps)


def test_a_generator_that_lets_no_time_pass_is_refused() -> None:
    with pytest.raises(ValueError, match="no time pass"):
        take(cycle(lambda rng: once({"f": "x"})), 1, 5)


def test_parse_faults() -> None:
    assert parse_faults("kill") == [FaultSpec("kill", DEFAULT_TARGETS)]
    assert parse_faults("power-cycle:leader, halves") == [
        FaultSpec("power-cycle", ("leader",)), FaultSpec("halves", ())]
    assert parse_faults("partition") == [FaultSpec("partition", ())]
    for bad, msg in [("explode", "unknown fault 'explode'"),
                     ("kill:everyone", "unknown target 'everyone' for kill"),
                     ("isolate:all", "unknown target 'all' for isolate"),
                     ("bridge:one", "bridge takes no target"),
                     ("kill,,stop", "empty fault"), ("", "no fault given")]:
        with pytest.raises(FaultSpecError, match=msg):
            parse_faults(bad)


def test_same_seed_same_schedule() -> None:
    s = spec("kill,stop,pause,power-cycle,partition")
    assert schedule(s, 11) == schedule(s, 11)
    assert schedule(s, 11) != schedule(s, 12)


def test_schedule_shape() -> None:
    s = spec("kill,stop,pause,power-cycle,partition", 120)
    out = schedule(s, 3)
    assert out[-2:] == [{"at": 120.0, "f": "recover"}, {"at": 120.0, "f": "final-read"}]
    body = out[:-2]
    assert [o["f"] == "recover" for o in body] == [i % 2 == 1 for i in range(len(body))]
    ats = [o["at"] for o in out]
    assert ats == sorted(ats) and all(a < 120 for a in ats[:-2])
    for fault, rec in zip(body[::2], body[1::2], strict=False):
        # Around `duration` (4 s ± 50%) unless the time limit cut it short.
        assert 1.5 - 1e-6 <= rec["at"] - fault["at"] <= 4.5 + 1e-6 or rec is body[-1]
    for nxt, rec in zip(body[2::2], body[1::2], strict=False):
        # Quiet (2 s) plus a wait around `interval` (3 s ± 50%) between packages.
        assert nxt["at"] - rec["at"] >= 2 + 1.5 - 1e-6
    kinds = {o["f"] for o in body}
    assert {"kill", "stop", "pause", "power-cycle", "partition"} <= kinds
    shapes = {o["shape"] for o in body if o["f"] == "partition"}
    assert len(shapes) >= 2 and shapes <= {"isolate", "halves", "bridge", "cut-controller"}
    for o in body:
        if o["f"] == "recover":
            continue
        if o.get("target") == "leader":
            assert (o["topic"], o["partition"]) in PARTS and "nodes" not in o
        elif o["f"] != "partition":
            assert len(o["nodes"]) == 1 and o["nodes"][0] in BROKERS
        else:
            assert "grudge" in o or o["target"] == "leader"


def test_targets() -> None:
    out = schedule(spec("kill:all,pause:minority,cut-controller:all"), 7)
    for o in out:
        if o["f"] == "kill":
            assert o["nodes"] == BROKERS
        elif o["f"] == "pause":
            assert len(o["nodes"]) == 1
        elif o["f"] == "partition":
            assert o["shape"] == "cut-controller"
            assert o["grudge"]["controller"] == BROKERS


def test_sends_rate_and_partitions() -> None:
    got = take(sends(PARTS, 100.0), 1, 2000)
    assert got == take(sends(PARTS, 100.0), 1, 2000)
    assert 15 <= got[-1].at <= 25  # 2000 ops at 100/s: about 20 s
    assert {(t.op["topic"], t.op["partition"]) for t in got} == set(PARTS)


def test_chaos_run_steps_and_run_json_fields() -> None:
    cfg = ChaosConfig(protocol="0.10", time_limit=30, faults=parse_faults("kill,partition"))
    scenario, meta = chaos_run(cfg, 11)
    again, _ = chaos_run(cfg, 11)
    assert [s.as_dict() for s in scenario.steps] == [s.as_dict() for s in again.steps]
    assert meta["scenario"] is None and meta["chaos"]["seed"] == 11
    assert meta["chaos"]["schedule"] == schedule(cfg.schedule_spec(), 11)
    kinds = [s.kind for s in scenario.steps]
    assert kinds[-1] == "final-read" and kinds[-2] == "recover"
    assert kinds[0] == "sleep" and kinds[1] in ("kill", "partition")
    assert scenario.workload["partitions"] == "all" and scenario.workload["producers"] == 4
    assert [t["replicas"] for t in scenario.topics] == [[["A", "B", "C"], ["B", "C", "A"],
                                                         ["C", "A", "B"]]]
    with pytest.raises(ValueError, match="no step"):
        schedule_steps([{"at": 1.0, "f": "explode"}])


def test_compound_packages_overlap_two_brokers() -> None:
    s = ScheduleSpec(parse_faults("kill,power-cycle"), BROKERS, PARTS, 600.0, overlap=0.5,
                     gap=1.5)
    out = schedule(s, 5)
    assert out == schedule(s, 5)
    seconds = [i for i, o in enumerate(out) if o.get("overlap")]
    assert len(seconds) > 10  # about half of ~60 packages
    for i in seconds:
        first, second, rec = out[i - 1], out[i], out[i + 1]
        assert rec["f"] == "recover" and first["f"] in ("kill", "power-cycle")
        assert first["nodes"] != second["nodes"] and len(second["nodes"]) == 1
        # Within the session timeout (3 s): the second lands before the first is noticed.
        assert 0.2 * 1.5 - 1e-6 <= second["at"] - first["at"] <= 1.8 * 1.5 + 1e-6
        # Never two power losses at once.
        assert not (first["f"] == second["f"] == "power-cycle")
    # overlap 0 is the plain schedule, op for op.
    plain = ScheduleSpec(parse_faults("kill,power-cycle"), BROKERS, PARTS, 600.0)
    assert not any(o.get("overlap") for o in schedule(plain, 5))


def test_chaos_gap_follows_the_session_timeout() -> None:
    cfg = ChaosConfig(protocol="0.10", time_limit=30, faults=parse_faults("kill"),
                      controller_config={"broker.session.timeout.ms": 6000})
    assert cfg.schedule_spec().gap == 3.0
    _, meta = chaos_run(cfg, 1)
    assert meta["chaos"]["overlap"] == 0.5 and meta["chaos"]["gap"] == 3.0


def test_flip_hands_leadership_back_and_forth() -> None:
    """flip: stop X, then each round stop the broker that leads and start the other,
    then recover -- KAFKA-6361's alternating unclean elections."""
    from harness.errors import UsageError
    from nemesis.schedule import ScheduleSpec, parse_faults, schedule

    spec = ScheduleSpec(faults=parse_faults("flip"), brokers=["A", "B"],
                        partitions=[("t", 0)], time_limit=10)
    ops = schedule(spec, 3)
    first = ops[:ops.index(next(o for o in ops if o["f"] == "recover"))]
    x = first[0]["nodes"][0]
    assert first[0]["f"] == "stop" and all(o["target"] == "flip" for o in first)
    pairs = [(first[i]["f"], first[i]["nodes"][0], first[i + 1]["f"], first[i + 1]["nodes"][0])
             for i in range(1, len(first), 2)]
    assert 2 <= len(pairs) <= 4
    down = x
    for stop, stopped, start, started in pairs:
        assert (stop, start) == ("stop", "start") and started == down != stopped
        down = stopped
    steps = schedule_steps(ops)
    assert {"stop", "start", "recover", "final-read"} <= {s.kind for s in steps}
    with pytest.raises(UsageError, match="flip"):
        ChaosConfig(protocol="0.11", time_limit=10, faults=parse_faults("flip"),
                    brokers=1).broker_names()
