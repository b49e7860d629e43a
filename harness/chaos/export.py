"""From a finding to a scenario: a run directory's faults and workload as scenario YAML.

The steps are what the history says happened, not what was planned: every
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
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

import yaml

from contract import (
    CHECK,
    FINAL_PROCESS,
    HISTORY,
    NEMESIS_PROCESS,
    NETWORK_FAULTS,
    PROCESS_FAULTS,
    PROTOCOLS,
    SUMMARY_JSON,
)
from contract.rundir import read_history, read_meta
from harness.backends.base import CONTROLLER
from harness.errors import UsageError
from nemesis import grudges


def export_scenario(run_dir: Path) -> tuple[str, str]:
    """(scenario name, YAML text) of the run in `run_dir`; UsageError (exit 2) for
    a directory that is not a run or whose history cannot be expressed."""
    meta = read_meta(run_dir)
    history_path = run_dir / HISTORY
    if not history_path.is_file():
        raise UsageError(f"{run_dir}: no {HISTORY}; nothing to export")
    ops = read_history(run_dir)
    cluster = meta.get("cluster") or {}
    brokers = list(cluster.get("brokers") or [])
    protocol = meta.get("protocol")
    if not brokers or protocol not in PROTOCOLS:
        raise UsageError(f"{run_dir}/run.json: no cluster.brokers or protocol to export")
    origin = ops[0]["time"] if ops else 0
    steps: list[Any] = []
    chaos = meta.get("chaos") or {}
    if meta.get("backend") == "sim" and chaos.get("schedule"):
        steps = _planned_steps(chaos["schedule"], ops, brokers, run_dir)
    for op in ops if not steps else []:
        if op.get("process") == NEMESIS_PROCESS and op.get("type") == "invoke":
            steps.append({"sleep": {"until": _seconds(op["time"] - origin)}})
            steps.append(_fault_step(op, brokers, run_dir))
        elif op.get("process") == FINAL_PROCESS and op.get("type") == "invoke":
            steps.append({"sleep": {"until": _seconds(op["time"] - origin)}})
            steps.append("final-read")
            break
    else:
        if not steps or steps[-1] != "final-read":
            steps.append("final-read")  # an interrupted run: read what there is
    found = found_kinds(run_dir)
    workload = dict(meta.get("workload") or {})
    if isinstance(meta.get("seed"), int):
        workload.setdefault("seed", meta["seed"])
    run_id = str(meta.get("run_id", run_dir.name))
    name = f"{meta.get('scenario') or 'chaos'}-{protocol}-{run_id[-6:]}"
    doc: dict[str, Any] = {
        "name": name,
        "description": f"Exported from run {meta.get('run_id', run_dir.name)}: its faults "
                       "and workload, at the times they happened.",
        "source": f"isrlab export {run_dir}" + (f" (seed {meta['seed']})"
                                                 if meta.get("seed") is not None else ""),
        "cluster": {"brokers": brokers, "topics": cluster.get("topics") or []},
        "broker": dict(meta.get("broker_config") or {}),
        "controller": dict(meta.get("controller_config") or {}),
        "workload": workload,
        "expect": {p: (found if p == protocol else []) for p in PROTOCOLS},
        "steps": steps,
    }
    header = (f"# Exported by `isrlab export` from {run_dir}.\n"
              f"# Run it again: isrlab reproduce FILE --protocol {protocol} --runs 20\n")
    return name, header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True,
                                         default_flow_style=None, width=100)


# Nemesis ops a `recover` step makes (the others are a schedule's faults).
_RECOVERY_FS = ("heal", "resume", "start")


def _planned_steps(schedule: list[dict[str, Any]], ops: list[dict[str, Any]],
                   brokers: list[str], run_dir: Path) -> list[Any]:
    """A sim chaos run's schedule as steps (harness.chaos.runs.schedule_steps' shape): its
    times, its `recover`s, each fault on the nodes the history's k-th fault hit."""
    hit = [op for op in ops if op.get("process") == NEMESIS_PROCESS
           and op.get("type") == "invoke" and op.get("f") not in _RECOVERY_FS]
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
    f, value = op.get("f"), op.get("value")
    if f in PROCESS_FAULTS and isinstance(value, list):
        return {f: value if len(value) != 1 else value[0]}
    if f == "heal":
        return "heal"
    if f == "partition" and isinstance(value, dict):
        return {"partition": partition_shape(value, brokers)}
    known = ", ".join((*PROCESS_FAULTS, *NETWORK_FAULTS))
    raise UsageError(f"{run_dir}/{HISTORY} line {op.get('index', 0) + 1}: nemesis op "
                     f"{f!r} with value {value!r} has no scenario step ({known})")


def partition_shape(grudge: dict[str, list[str]], brokers: list[str]) -> Any:
    """A recorded grudge as a scenario partition shape (docs/scenarios.md); every
    shape a chaos schedule makes is one of these."""
    nodes = [*brokers, CONTROLLER]
    want = {n: sorted(p) for n, p in grudge.items() if p}
    candidates: list[tuple[Any, dict[str, list[str]]]] = [
        ("halves", grudges.halves(nodes)), ("bridge", grudges.bridge(nodes))]
    candidates += [({"isolate": n}, grudges.isolate(n, nodes)) for n in nodes]
    for k in range(1, len(brokers) + 1):
        for sub in combinations(brokers, k):
            candidates.append(({"cut": [list(sub), [CONTROLLER]]},
                               grudges.cut(list(sub), [CONTROLLER], nodes)))
    for shape, g in candidates:
        if g == want:
            return shape
    comps = _components(want, nodes)
    if grudges.split(comps, nodes) == want:
        return {"split": comps}
    raise UsageError(f"partition {want} is no scenario shape (isolate, split, halves, "
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
