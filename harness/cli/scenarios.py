"""`isrlab scenarios`: the shipped scenarios, each with its source, the versions
its path exists in when not all (`reachable`) and, per variant, the anomalies it
expects under each version."""

from __future__ import annotations

import argparse

from harness.cli import cellrun, flags
from harness.scenario.loader import Scenario, all_variants, list_scenarios


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return flags.command_parser(
        sub, "scenarios", "list the shipped scenarios",
        description="List the shipped scenarios: name, description, source, and what each "
                    "variant documents under each Kafka version.",
        example="isrlab scenarios",
        exit_codes="0  listed",
        docs="catalogue.md")


def run(args: argparse.Namespace) -> int:
    for line in scenario_lines():
        print(line)
    return 0


def scenario_lines() -> list[str]:
    out = []
    for s in list_scenarios():
        out.append(f"{s.name}: {s.description}")
        out.append(f"    source: {s.source or '-'}")
        rows = all_variants(s)
        out += reachable_lines(rows)
        for v in rows:
            label = f"[{v.variant}] " if v.variant else ""
            asserted = f" · asserts {len(v.assertions)}" if v.assertions else ""
            out.append(f"    {label}expect {cellrun.expect_line(v)}{asserted}")
    return out


def reachable_lines(rows: list[Scenario]) -> list[str]:
    """`reachable from 2.7: why`, once when every variant shares it (a variant may
    declare its own), else per variant; nothing for a path every version has."""
    if len({r.reachable for r in rows}) == 1:
        rows = rows[:1]
    return [f"    {f'[{r.variant}] ' if len(rows) > 1 else ''}reachable "
            f"{r.reachable.span()}: {r.reachable.why}" for r in rows if r.reachable]
