"""`isrlab collect RUN_DIR`: finish a run whose isrlab process was killed, its
replicas rebuilt from the brokers' data (harness.run.collect); `isrlab check`
does the same first when it meets one."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from contract import CRASHED
from contract.rundir import read_meta
from harness.cli import flags
from harness.errors import UsageError
from harness.run.collect import collect_crashed


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    co = flags.command_parser(
        sub, "collect", "finish a run whose isrlab process was killed: "
                        "rebuild its replicas from the brokers' data",
        description="Finish a run still marked running whose isrlab process is gone: "
                    "rebuild its replica logs from the brokers' data and mark it crashed, "
                    "so that `isrlab check` judges what it recorded.",
        example="isrlab collect runs/20250101T120000Z-kip101-hw-truncation-loss-0.10",
        exit_codes="""0  collected, or nothing to collect
2  a run still going or of another host, no run.json, not writable, no Docker engine
3  the Docker engine failed or the disk filled up""",
        docs="run-directory.md#a-crashed-run")
    co.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    return co


def run(args: argparse.Namespace) -> int:
    run_dir: Path = args.run_dir
    if not os.path.isdir(run_dir):  # os.path's: a name too long for a file is none
        raise UsageError(f"no such run directory: {run_dir}")
    status = read_meta(run_dir).get("status")
    done = collect_crashed(run_dir, say=print)
    if done is None:
        if status == CRASHED:
            print(f"run {run_dir} was collected already (status crashed): nothing to do")
        else:
            print(f"run {run_dir} ended (status {status}): nothing to collect")
        return 0
    print(f"run {run_dir}: status crashed; `isrlab check {run_dir}` checks what it recorded")
    return 0
