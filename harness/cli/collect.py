"""`isrlab collect RUN_DIR`: finish a run whose isrlab process was killed, its
replicas rebuilt from the brokers' data (harness.run.collect); `isrlab check`
does the same first when it meets one."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from contract import CRASHED
from contract.rundir import read_meta
from harness.errors import UsageError
from harness.run.collect import collect_crashed


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    co = sub.add_parser("collect", help="finish a run whose isrlab process was killed: "
                                        "rebuild its replicas from the brokers' data")
    co.add_argument("run_dir", type=Path, metavar="RUN_DIR")
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
