"""The vocabulary (`contract`) is the one definition the rest of isrlab agrees with."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from conftest import ROOT, TESTS

from checker.anomalies import REGISTRY
from contract import ANOMALY_KINDS, EVENT_TYPES, NEMESIS_FS, PROTOCOLS
from harness.scenario.loader import SCENARIO_DIR

DOCS = ROOT / "docs"


def scenario_files() -> list[Path]:
    return sorted(SCENARIO_DIR.glob("*.yaml")) + sorted((TESTS / "data").glob("*.yaml"))


def test_checker_registry_is_the_vocabulary_in_order() -> None:
    assert [k.name for k in REGISTRY] == list(ANOMALY_KINDS)


def test_every_scenario_expects_only_known_kinds_and_versions() -> None:
    files = scenario_files()
    assert len(files) >= 3
    for path in files:
        # BaseLoader keeps every scalar a string, as written ("0.10" stays "0.10").
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.BaseLoader)
        expect = doc["expect"]
        assert set(expect) <= set(PROTOCOLS), path
        for version, kinds in expect.items():
            unknown = set(kinds) - set(ANOMALY_KINDS)
            assert not unknown, f"{path.name}: {version} expects unknown kinds {unknown}"


def table_rows(doc: Path) -> set[str]:
    """The first cell of every table row of a Markdown file, without backticks."""
    rows = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and not line.startswith("|-"):
            rows.add(line.split("|")[1].strip().strip("`"))
    return rows


def test_docs_define_every_anomaly_kind() -> None:
    assert set(ANOMALY_KINDS) <= table_rows(DOCS / "anomalies.md")


def test_docs_list_every_protocol_version() -> None:
    assert set(PROTOCOLS) <= table_rows(DOCS / "protocol-versions.md")


def test_docs_name_every_nemesis_op() -> None:
    assert set(NEMESIS_FS) <= table_rows(DOCS / "run-directory.md")


def emitted_event_types() -> set[str]:
    """Every event type the broker package's source emits: the literal first argument
    of its event calls, and the two an ISR change picks between."""
    found: set[str] = set()
    for path in (ROOT / "broker").glob("*.py"):
        src = path.read_text(encoding="utf-8")
        found |= set(re.findall(r'(?:_emit|_event|events\.add)\((?:\w+, )?"([a-z-]+)"', src))
        for pair in re.findall(r'kind = "([a-z-]+)" if .* else "([a-z-]+)"', src):
            found |= set(pair)
    return found


def test_event_types_are_what_the_processes_emit() -> None:
    """contract.EVENT_TYPES, what event waits may name, is exactly what is emitted
    (a new event type, like `halt`, cannot be left out of it)."""
    assert "halt" in EVENT_TYPES
    assert emitted_event_types() == set(EVENT_TYPES)


def test_docs_name_every_event_type() -> None:
    text = (DOCS / "run-directory.md").read_text(encoding="utf-8")
    assert [t for t in EVENT_TYPES if f"`{t}`" not in text] == []
