"""`isrlab export RUN_DIR`: a chaos run's faults and workload as a scenario YAML
(harness.chaos.export), to reproduce a finding (docs/chaos.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from contract.rundir import read_meta
from harness.chaos.export import export_scenario
from harness.errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    e = sub.add_parser("export", help="a run's faults and workload as a scenario YAML")
    e.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    e.add_argument("--out", type=Path, metavar="FILE", help="default: stdout")
    return e


def run(args: argparse.Namespace) -> int:
    if not args.run_dir.is_dir():
        raise UsageError(f"no such run directory: {args.run_dir}")
    name, text = export_scenario(args.run_dir)
    if args.out is None:
        sys.stdout.write(text)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    protocol = read_meta(args.run_dir).get("protocol")
    print(f"wrote scenario {name} to {args.out}: "
          f"isrlab reproduce {args.out} --protocol {protocol} --runs 20")
    return 0
