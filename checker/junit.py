"""JUnit XML for CI servers: one test case per run, named so that the runs of one
version are told apart: a scenario run by its scenario (and variant), protocol
and seed, in class ``isrlab.<scenario>``; a chaos, swarm or nightly run by its
configuration (checker.runconfig: faults, acks, min ISR, unclean election),
protocol and seed, in class ``isrlab.chaos`` (a nightly cell's: ``isrlab.chaos.<cell>``).

A run whose verdict is ``invalid`` or ``not-reproduced`` is a failure; the failure
text carries the explanation of every unexpected anomaly (or says which expected
one is missing). A run that could not be judged in full is an error, which CI
servers show apart from failures: ``incomplete`` (the run did not finish; the
anomalies its prefix showed are listed) and ``error`` (a malformed run directory,
not checked; the message names the run, file and line).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checker import outcome, runconfig
from checker.verdict import ERROR, INCOMPLETE, NOT_CHECKED, VALID
from contract.rundir import readable_meta

if TYPE_CHECKING:
    from checker.verdict import RunResult


def case_name(r: RunResult, meta: dict[str, Any] | None = None) -> str:
    """'kip101-power-loss [0.10] seed 3', 'chaos kill,pause · acks all · min ISR 2 ·
    unclean off [0.10] seed 12'; `meta`: run.json (read from the run if None)."""
    if r.protocol is None:  # a run.json that could not be read: the run is all we know
        return f"{r.run_id} [?]"
    meta = readable_meta(r.run_dir) if meta is None else meta
    seed = meta.get("seed", r.summary.get("seed"))
    what = (f"chaos {runconfig.summary(meta)}" if runconfig.is_chaos(meta)
            else r.scenario or "randomized")
    return f"{what} [{r.protocol}]" + (f" seed {seed}" if seed is not None else "")


def class_name(r: RunResult, meta: dict[str, Any]) -> str:
    if runconfig.is_chaos(meta):
        cell = runconfig.settings(meta)["cell"]
        return "isrlab.chaos" + (f".{cell}" if cell else "")
    return f"isrlab.{r.scenario or 'randomized'}"


def _failure_text(r: RunResult) -> tuple[str, str]:
    if r.unexpected:
        msg = (f"{outcome.data_words(a['kind'] for a in r.anomalies)}: unexpected "
               f"{', '.join(r.unexpected)} (verdict {r.verdict})")
        body = [
            f"{a['kind']} ({a['topic']}/{a['partition']}): {a['explanation']}"
            for a in r.anomalies
            if not a["expected"]
        ]
    else:
        msg = (f"not reproduced: expected {', '.join(r.missing)} did not occur "
               f"(verdict {r.verdict})")
        body = [f"The scenario expects {k} under protocol {r.protocol}." for k in r.missing]
    return msg, "\n\n".join(body + [f"run directory: {r.run_dir}"])


def _error_text(r: RunResult) -> tuple[str, str]:
    if r.verdict == ERROR:
        msg = f"error: not checked: {r.error or r.summary.get('error')}"
        return msg, f"{msg}\n\nrun directory: {r.run_dir}"
    reason = r.summary.get("notes") or []
    msg = (f"incomplete: the run did not finish (status {r.status}); only the recorded "
           "prefix was checked")
    body = [str(n) for n in reason if str(n).startswith("run.json:")]
    body += [f"{a['kind']} ({a['topic']}/{a['partition']}, expected): {a['explanation']}"
             for a in r.anomalies]
    if r.unjudged:
        body.append(f"Not judged: {', '.join(r.unjudged)}, expected under protocol "
                    f"{r.protocol}, did not occur in the recorded prefix.")
    return msg, "\n\n".join(body + [f"run directory: {r.run_dir}"])


def write_junit(results: Sequence[RunResult], path: Path) -> Path:
    """Write one <testsuite> with a <testcase> per run to ``path``."""
    errors = [r for r in results if r.verdict in (INCOMPLETE, ERROR)]
    failures = [r for r in results if r.verdict not in (VALID, INCOMPLETE, ERROR)]
    suite = ET.Element(
        "testsuite",
        name="isrlab",
        tests=str(len(results)),
        failures=str(len(failures)),
        errors=str(len(errors)),
    )
    for r in results:
        meta = readable_meta(r.run_dir)
        case = ET.SubElement(suite, "testcase", classname=class_name(r, meta),
                             name=case_name(r, meta))
        kinds = sorted({a["kind"] for a in r.anomalies})
        if runconfig.is_chaos(meta):
            kinds = [f"{k} ({runconfig.attribution(k, meta)})" for k in kinds]
        ET.SubElement(case, "system-out").text = (
            f"run {r.run_id}: "
            + (NOT_CHECKED if r.verdict == ERROR
               else outcome.data_words(a['kind'] for a in r.anomalies))
            + (f", {doc}" if (doc := outcome.doc_words(r.verdict, r.scenario,
                                                     [a["kind"] for a in r.anomalies]))
               else "")
            + f" (verdict {r.verdict}); anomalies: " + (", ".join(kinds) or "none")
            + f"; expected: {', '.join(r.expected) or 'none'}; dir {r.run_dir}"
        )
        if r.verdict in (INCOMPLETE, ERROR):
            msg, text = _error_text(r)
            ET.SubElement(case, "error", message=msg, type=r.verdict).text = text
        elif r.verdict != VALID:
            msg, text = _failure_text(r)
            ET.SubElement(case, "failure", message=msg, type=r.verdict).text = text
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(suite)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path
