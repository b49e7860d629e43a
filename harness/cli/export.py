"""`isrlab export RUN_DIR`: a run's steps, or a chaos run's faults and workload, as
a scenario YAML (harness.chaos.export), to reproduce a finding (docs/chaos.md).

Exit status: 0 when written; 2 for bad input -- not a run directory, a history
line `check` would refuse (naming the run, file and line), a `--out` that is a
directory or cannot be written (checked before anything is read).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.chaos.export import export_scenario
from harness.cli import flags
from harness.errors import UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    e = sub.add_parser("export", help="a run's faults and workload as a scenario YAML")
    e.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    e.add_argument("--out", type=flags.typed(flags.output_file), metavar="FILE",
                   help="default: stdout")
    return e


def run(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.run_dir):  # os.path's: a name too long for a file is none
        raise UsageError(f"no such run directory: {args.run_dir}")
    exported = export_scenario(args.run_dir)
    for note in exported.notes:  # what `check` would say of the run, said here too
        print(f"isrlab: run {args.run_dir}: {note}", file=sys.stderr)
    if args.out is None:
        sys.stdout.write(exported.text)
        return 0
    flags.write_output(args.out, exported.text)
    print(f"wrote scenario {exported.name} to {args.out}: "
          f"{exported.again.replace('FILE', str(args.out), 1)}")
    return 0
