"""docs/kafka-test-cases.md states what the Kafka case tables hold: its generated
summary (counts per class and tag, failures, not-applicable methods) must match
the tables in tests/test_kafka_cases_*.py."""

from __future__ import annotations

import kafka_cases
from kafka_cases import DOC, MODULES, Ref, generated_section, render, xfail_reason


def test_doc_summary_matches_the_case_tables() -> None:
    expected = render()
    actual = generated_section(DOC.read_text(encoding="utf-8"))
    assert actual == expected, (
        "docs/kafka-test-cases.md is out of date; regenerate it with "
        "`PYTHONPATH=. python3 tests/kafka_cases.py`")


def test_every_row_names_a_kafka_test_and_every_failure_says_why() -> None:
    seen: set[str] = set()
    for name, cases, nas in kafka_cases._tables():
        assert name in MODULES
        for param in cases:
            ref = param.values[0]
            assert isinstance(ref, Ref) and ref.method and ref.kafka_class, param.id
            assert param.id not in seen, f"duplicate case id {param.id}"
            seen.add(param.id)
            reason = xfail_reason(param)
            assert reason is None or len(reason) > 40, param.id
        for na in nas:
            assert na.reason.startswith(("not applicable", "lastKnownElr")), na
