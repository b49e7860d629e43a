"""JUnit XML for CI servers: one test case per run (name = scenario + protocol).

A run whose verdict is not ``valid`` is a failure; the failure text carries the
explanation of every unexpected anomaly (or says which expected one is missing).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from checker.api import RunResult


def case_name(r: RunResult) -> str:
    return f"{r.scenario or 'randomized'} [{r.protocol}]"


def _failure_text(r: RunResult) -> tuple[str, str]:
    if r.unexpected:
        msg = f"{r.verdict}: unexpected {', '.join(r.unexpected)}"
        body = [
            f"{a['kind']} ({a['topic']}/{a['partition']}): {a['explanation']}"
            for a in r.anomalies
            if not a["expected"]
        ]
    else:
        msg = f"{r.verdict}: expected {', '.join(r.missing)} did not occur"
        body = [f"The scenario expects {k} under protocol {r.protocol}." for k in r.missing]
    return msg, "\n\n".join(body + [f"run directory: {r.run_dir}"])


def write_junit(results: Sequence[RunResult], path: Path) -> Path:
    """Write one <testsuite> with a <testcase> per run to ``path``."""
    failures = [r for r in results if r.verdict != "valid"]
    suite = ET.Element(
        "testsuite",
        name="isrlab",
        tests=str(len(results)),
        failures=str(len(failures)),
        errors="0",
    )
    for r in results:
        case = ET.SubElement(
            suite, "testcase", classname=f"isrlab.{r.scenario or 'randomized'}", name=case_name(r)
        )
        ET.SubElement(case, "system-out").text = (
            f"run {r.run_id}: {r.verdict}; anomalies: "
            + (", ".join(sorted({a['kind'] for a in r.anomalies})) or "none")
            + f"; expected: {', '.join(r.expected) or 'none'}; dir {r.run_dir}"
        )
        if r.verdict != "valid":
            msg, text = _failure_text(r)
            ET.SubElement(case, "failure", message=msg, type=r.verdict).text = text
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(suite)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path
