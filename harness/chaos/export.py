"""From a finding to a scenario: a run directory's faults and workload as scenario YAML.

A scenario run (run.json without a `chaos` block) is exported as it ran: its
steps as run.json `nemesis` recorded them for the run's version and variant --
produces, waits, every fault on its nodes, each partition as the shape its
grudge is -- with its figure assertions, so that the file, run again with the
run's seed, makes the same run (on the simulator, the same run exactly).

A chaos run's steps are what the history says happened, not what was planned: every
nemesis op with the node it hit (a chaos `leader` target resolved), at the
time it started (`sleep: {until: S}`, seconds after the run's first client
op, about when the original's steps began), then the final read at its time.
The workload, cluster and configuration are run.json's, the workload's `seed`
the run's (so the background sends draw the same partitions), and `expect`
lists, for the run's protocol, the kinds its check found: `isrlab reproduce`
then calls a run that shows them all `valid`, and `reproduce --runs N` counts
how often that happened. Real processes make timing vary between runs, so an
export need not reproduce every time (docs/chaos.md).

A chaos run of the sim backend is exported as it was planned instead: its
schedule's times and `recover` steps, each fault on the nodes the history says
it hit. On the simulator with the run's seed (`reproduce FILE --backend sim
--seed S`), those steps replay the run exactly.

The history is read as `check` reads it (contract.rundir.read_checked_history):
a line check would set the run aside for is refused, naming the run, the file
and the line (exit 2), never skipped; a cut-off last line is left out and said,
and a run that did not finish is exported with a note saying so (`check` calls
it `incomplete`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from broker.protocol import canonical
from contract import (
    CHECK,
    FINAL_PROCESS,
    HISTORY,
    NEMESIS_PROCESS,
    NETWORK_FAULTS,
    PROCESS_FAULTS,
    PROTOCOLS,
    RECOVERY_FS,
    RUN_JSON,
    SUMMARY_JSON,
    UNFINISHED,
)
from contract.rundir import read_checked_history, read_meta, torn_tail
from harness.backends.base import CONTROLLER
from harness.errors import UsageError
from nemesis import grudges


@dataclass
class Export:
    """An exported scenario: its name, its YAML text, and what the run lacked
    (a cut-off last line, a run that did not finish), one line each."""

    name: str
    text: str
    notes: list[str] = field(default_factory=list)
    again: str = ""  # the command that runs it again, FILE standing for its path


def export_scenario(run_dir: Path) -> Export:
    """The scenario of the run in `run_dir`; UsageError or RunDirError (exit 2) for a
    directory that is not a run, a history line `check` refuses, or a history that
    cannot be expressed."""
    meta = read_meta(run_dir)
    history_path = run_dir / HISTORY
    if not history_path.is_file():
        raise UsageError(f"{run_dir}: no {HISTORY}; nothing to export")
    ops = read_checked_history(run_dir)
    notes = _notes(run_dir, meta)
    cluster = meta.get("cluster") or {}
    brokers = list(cluster.get("brokers") or [])
    protocol = meta.get("protocol")
    if not brokers or protocol not in PROTOCOLS:
        raise UsageError(f"{run_dir}/run.json: no cluster.brokers or protocol to export")
    chaos = meta.get("chaos") or {}
    try:
        steps = _steps(meta, chaos, ops, brokers, run_dir)
    except (KeyError, TypeError, AttributeError) as e:
        # run.json written by hand or cut short: its steps or schedule lack a field.
        raise UsageError(f"{run_dir}/{RUN_JSON}: its steps cannot be exported: a step or "
                         f"schedule entry is malformed ({type(e).__name__}: {e})") from None
    found = found_kinds(run_dir)
    workload = dict(meta.get("workload") or {})
    if isinstance(meta.get("seed"), int):
        workload.setdefault("seed", meta["seed"])
    run_id = str(meta.get("run_id", run_dir.name))
    name = f"{meta.get('scenario') or 'chaos'}-{protocol}-{run_id[-6:]}"
    doc: dict[str, Any] = {
        "name": name,
        "description": f"Exported from run {meta.get('run_id', run_dir.name)}: its "
                       + ("steps as they ran." if not chaos else
                          "faults and workload, at the times they happened."),
        "source": f"isrlab export {run_dir}" + (f" (seed {meta['seed']})"
                                                 if meta.get("seed") is not None else ""),
        "cluster": {"brokers": brokers, "topics": cluster.get("topics") or []},
        "broker": dict(meta.get("broker_config") or {}),
        "controller": dict(meta.get("controller_config") or {}),
        "workload": workload,
        # An alias (latest) and its release get the same list, as the loader wants.
        "expect": {p: (found if canonical(p) == canonical(protocol) else [])
                   for p in PROTOCOLS},
        "steps": steps,
    }
    assertions = _assertions(meta.get("assertions"))
    if assertions:
        doc["assert"] = assertions
    seed = f" --seed {meta['seed']}" if isinstance(meta.get("seed"), int) else ""
    net = "".join(f" --net-{k} {v:g}" for k, v in (meta.get("network") or {}).items() if v)
    again = (f"isrlab reproduce FILE --protocol {protocol} --backend sim{seed}{net}"
             if meta.get("backend") == "sim" else
             f"isrlab reproduce FILE --protocol {protocol} --runs 20")
    header = (f"# Exported by `isrlab export` from {run_dir}.\n"
              + "".join(f"# Note: {n}\n" for n in notes)
              + f"# Run it again: {again}\n")
    return Export(name, header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True,
                                                default_flow_style=None, width=100), notes,
                  again)


def _steps(meta: dict[str, Any], chaos: dict[str, Any], ops: list[dict[str, Any]],
           brokers: list[str], run_dir: Path) -> list[Any]:
    """A scenario run's recorded steps, a sim chaos run's schedule, or another chaos
    run's history (the module's docstring)."""
    recorded = meta.get("nemesis")
    if not chaos and isinstance(recorded, list) and recorded:
        return [_scenario_step(s, brokers, run_dir) for s in recorded]
    if meta.get("backend") == "sim" and chaos.get("schedule"):
        steps = _planned_steps(chaos["schedule"], ops, brokers, run_dir)
        if not steps or steps[-1] != "final-read":
            steps.append("final-read")
        return steps
    return _happened_steps(ops, brokers, run_dir)


def _notes(run_dir: Path, meta: dict[str, Any]) -> list[str]:
    """What the run lacks, as `check` says it: a cut-off last line of the history,
    a run that did not finish."""
    notes = []
    t = torn_tail(run_dir, HISTORY)
    if t is not None:
        notes.append(f"{HISTORY} line {t.line} is cut off (an interrupted write); exported "
                     "the lines before it")
    status = meta.get("status")
    if status in UNFINISHED:
        notes.append(f"the run did not finish (status {status}; `isrlab check` calls it "
                     "incomplete): exported what it recorded")
    return notes


def _happened_steps(ops: list[dict[str, Any]], brokers: list[str], run_dir: Path) -> list[Any]:
    """A chaos run's nemesis ops as the history has them, each after a sleep until
    its time, then the final read at its time."""
    origin = ops[0].get("time", 0) if ops else 0
    steps: list[Any] = []
    for op in ops:
        if op.get("type") != "invoke" or op.get("process") not in (NEMESIS_PROCESS,
                                                                   FINAL_PROCESS):
            continue
        if not isinstance(op.get("time"), int):
            raise UsageError(f"{run_dir}/{HISTORY}: op {op.get('index')} ({op.get('f')}) "
                             "has no time; an export places each fault at its time")
        steps.append({"sleep": {"until": _seconds(op["time"] - origin)}})
        if op.get("process") == FINAL_PROCESS:
            steps.append("final-read")
            return steps
        steps.append(_fault_step(op, brokers, run_dir))
    steps.append("final-read")  # an interrupted run: read what there is
    return steps


def _planned_steps(schedule: list[dict[str, Any]], ops: list[dict[str, Any]],
                   brokers: list[str], run_dir: Path) -> list[Any]:
    """A sim chaos run's schedule as steps (harness.chaos.runs.schedule_steps' shape): its
    times, its `recover`s, each fault on the nodes the history's k-th fault hit."""
    hit = [op for op in ops if op.get("process") == NEMESIS_PROCESS
           and op.get("type") == "invoke" and op.get("f") not in RECOVERY_FS]
    steps: list[Any] = []
    last, k = 0.0, 0
    for planned in schedule:
        if planned["at"] > last:
            steps.append({"sleep": {"until": planned["at"]}})
            last = planned["at"]
        if planned["f"] in ("recover", "final-read"):
            steps.append(planned["f"])
        elif k < len(hit):
            steps.append(_fault_step(hit[k], brokers, run_dir))
            k += 1
        else:
            break  # the run ended before this fault
    return steps


def _seconds(ns: int) -> float:
    return max(0.001, round(ns / 1e9, 3))  # `until` must be positive


def found_kinds(run_dir: Path) -> list[str]:
    """The anomaly kinds the run's check found (none if it was not checked)."""
    try:
        summary = json.loads((run_dir / CHECK / SUMMARY_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    found = summary.get("found") if isinstance(summary, dict) else None
    return sorted(found) if isinstance(found, dict) else []


def _fault_step(op: dict[str, Any], brokers: list[str], run_dir: Path) -> Any:
    """A nemesis op of the history as the scenario step that makes it."""
    f, value = op.get("f"), op.get("value")
    if f in PROCESS_FAULTS and isinstance(value, list) and value:
        return {f: value if len(value) != 1 else value[0]}
    if f in ("heal", "deliver"):
        return f
    if f == "partition" and isinstance(value, dict):
        return {"partition": partition_shape(value, brokers, run_dir)}
    if f == "delay" and isinstance(value, dict) and {"from", "to"} <= set(value):
        return {"delay": {k: value[k] for k in ("from", "to", "for", "requests")
                          if value.get(k) is not None}}
    known = ", ".join((*PROCESS_FAULTS, *NETWORK_FAULTS))
    raise UsageError(f"{run_dir}/{HISTORY}: nemesis op {op.get('index')} {f!r} with value "
                     f"{value!r} has no scenario step ({known})")


def _scenario_step(recorded: dict[str, Any], brokers: list[str], run_dir: Path) -> Any:
    """A step as run.json `nemesis` records it (Step.as_dict: its kind and parsed
    args) written back in the scenario language, which parses it to the same args."""
    kind, a = recorded.get("kind"), recorded.get("args") or {}
    if kind in ("heal", "recover", "deliver"):
        return kind
    if kind in PROCESS_FAULTS:
        nodes = a.get("nodes")
        if not nodes:  # a chaos `leader` target: only a chaos run has one
            raise UsageError(f"{run_dir}/{RUN_JSON}: step {recorded.get('step')} ({kind}) "
                             "names no nodes")
        node = nodes if len(nodes) != 1 else nodes[0]
        if a.get("for") is not None:
            return {kind: {"node": node, "for": a["for"]}}
        return {kind: node}
    if kind == "partition":
        grudge = a.get("grudge")
        if not isinstance(grudge, dict):
            raise UsageError(f"{run_dir}/{RUN_JSON}: step {recorded.get('step')} (partition) "
                             "has no grudge")
        return {"partition": partition_shape(grudge, brokers, run_dir)}
    if kind == "delay":
        return {"delay": {k: a[k] for k in ("from", "to", "for", "requests")
                          if a.get(k) is not None}}
    if kind == "sleep":
        return {"sleep": {"until": a["until"]}} if "until" in a else {"sleep": a["seconds"]}
    if kind == "final-read":
        return {"final-read": {"timeout": a["timeout"], "heal": a["heal"]}}
    if kind == "produce":
        out = {k: a[k] for k in ("n", "label", "acks", "expect", "topic", "partition")
               if a.get(k) is not None}
        return {"produce": out}
    if kind == "consume":
        return {"consume": {"n": a["n"]}}
    if kind == "admin":
        return {"admin": {"op": a["op"], "node": a["nodes"]}}
    if kind == "load":
        if a.get("stop"):
            return {"load": "stop"}
        out = {k: a[k] for k in ("producers", "acks", "topic", "partition") if k in a}
        if a.get("burst"):
            out.update(burst=a["burst"], every=a["every"])
        else:
            out["rate"] = a["rate"]
        return {"load": out}
    if kind == "wait":
        return {"wait": _wait(a)}
    raise UsageError(f"{run_dir}/{RUN_JSON}: step {recorded.get('step')}: unknown kind "
                     f"{kind!r}; it cannot be exported")


def _wait(a: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"node": a["node"]}
    if a.get("running") is not None:
        return {**out, "running": a["running"], "timeout": a["timeout"]}
    if a.get("event") is not None:
        out["event"] = a["event"]
        if a.get("since", "action") != "action":
            out["since"] = a["since"]
    out.update(a.get("conditions") or {})
    if a.get("event") is None:
        out.update(topic=a["topic"], partition=a["partition"])
    out["timeout"] = a["timeout"]
    return out


def _assertions(recorded: Any) -> list[dict[str, Any]]:
    """run.json `assertions` (those of the run's version) as the file's `assert`."""
    out = []
    for a in recorded if isinstance(recorded, list) else []:
        out.append({k: v for k, v in a.items() if k not in ("line", "since", "before")
                    and v is not None})
    return out


def partition_shape(grudge: dict[str, list[str]], brokers: list[str],
                    run_dir: Path | None = None) -> Any:
    """A recorded grudge as the scenario partition shape that makes it
    (docs/scenarios.md): halves, bridge or isolate where it is one of those, else
    a split into groups or a cut between two sets of nodes -- every shape the
    scenario language and the chaos schedules make is one of these."""
    nodes = [*brokers, CONTROLLER]
    want = {n: sorted(p) for n, p in grudge.items() if p}
    named: list[tuple[Any, dict[str, list[str]]]] = [
        ("halves", grudges.halves(nodes)), ("bridge", grudges.bridge(nodes))]
    named += [({"isolate": n}, grudges.isolate(n, nodes)) for n in nodes]
    for shape, g in named:
        if g == want:
            return shape
    comps = _components(want, nodes)
    if len(comps) > 1 and grudges.split(comps, nodes) == want:
        return {"split": comps}
    sides = _bipartite(want, nodes)
    if sides is not None:
        return {"cut": sides}
    where = f"{run_dir}/{HISTORY}: " if run_dir is not None else ""
    raise UsageError(f"{where}partition {want} is no scenario shape (isolate, split, halves, "
                     "bridge, cut); it cannot be exported")


def _components(grudge: dict[str, list[str]], nodes: list[str]) -> list[list[str]]:
    """Groups of nodes that all hear each other (if the grudge is a clean split)."""
    comps: list[list[str]] = []
    for n in nodes:
        for c in comps:
            if all(m not in grudge.get(n, []) for m in c):
                c.append(n)
                break
        else:
            comps.append([n])
    return comps


def _bipartite(grudge: dict[str, list[str]], nodes: list[str]) -> list[list[str]] | None:
    """[X, Y] if the grudge cuts exactly every link between X and Y (a `cut`)."""
    cut_off = [n for n in nodes if grudge.get(n)]
    if not cut_off:
        return None
    ys = grudge[cut_off[0]]
    xs = [n for n in nodes if grudge.get(n) == ys]
    if grudges.cut(xs, ys, nodes) != grudge:
        return None
    return [xs, list(ys)]
