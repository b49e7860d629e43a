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
    e = flags.command_parser(
        sub, "export", "a run's faults and workload as a scenario YAML",
        description="Write a run's faults and workload (a chaos run's, say) as a scenario "
                    "YAML that `isrlab reproduce` runs again.",
        example="isrlab export runs/BATCH/RUN --out found.yaml",
        exit_codes="0  written\n2  bad input: no run there, a file that cannot be written",
        docs="scenarios.md")
    e.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    e.add_argument("--out", type=flags.typed(flags.output_file), metavar="FILE",
                   help="the YAML file to write (default: stdout)")
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
