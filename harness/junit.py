"""JUnit XML for CI servers: one test case per checked run.

Used by `isrlab check --junit` when the checker does not provide its own
`checker.api.write_junit`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def write_junit(results: list[Any], path: Path) -> Path:
    suite = ET.Element("testsuite", name="isrlab", tests=str(len(results)))
    failures = 0
    for r in results:
        name = f"{getattr(r, 'scenario', None) or 'run'}[{getattr(r, 'protocol', '')}]"
        case = ET.SubElement(suite, "testcase", classname="isrlab.run", name=name)
        ET.SubElement(case, "system-out").text = str(getattr(r, "run_dir", ""))
        if r.verdict != "valid":
            failures += 1
            kinds = sorted({a.get("kind", "?") if isinstance(a, dict) else str(a)
                            for a in r.anomalies})
            msg = f"{r.verdict}: {', '.join(kinds) or 'expected anomaly missing'}"
            ET.SubElement(case, "failure", message=msg, type=r.verdict).text = msg
    suite.set("failures", str(failures))
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path
