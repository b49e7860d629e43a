"""`isrlab scenarios`: the shipped scenarios, each with its source and, per
variant, the anomalies it expects under each version."""

from __future__ import annotations

import argparse

from harness.cli import cellrun
from harness.scenario.loader import all_variants, list_scenarios


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    return sub.add_parser("scenarios", help="list the shipped scenarios")


def run(args: argparse.Namespace) -> int:
    for line in scenario_lines():
        print(line)
    return 0


def scenario_lines() -> list[str]:
    out = []
    for s in list_scenarios():
        out.append(f"{s.name}: {s.description}")
        out.append(f"    source: {s.source or '-'}")
        for v in all_variants(s):
            label = f"[{v.variant}] " if v.variant else ""
            asserted = f" · asserts {len(v.assertions)}" if v.assertions else ""
            out.append(f"    {label}expect {cellrun.expect_line(v)}{asserted}")
    return out
