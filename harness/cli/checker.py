"""`isrlab checker status|start|stop|setup`: the warm checker server
(checker.server), and the driver JVM's class-data archive (checker.archive).

`reproduce`, `check` and `chaos` start the server on demand (local masters); these
commands show it, warm it ahead of time and stop it. It stops by itself after ten
minutes without a check. `setup` is an installation step: it builds the archive
now, in the foreground, so that a machine's first check starts its JVM from it.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from checker import client
from checker.errors import CheckerError
from checker.spark import DEFAULT_MASTER, cds_archive, driver_log_path
from harness.cli import batchcheck, flags
from harness.errors import RunIncomplete, UsageError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    c = flags.command_parser(
        sub, "checker", "the warm checker server: status, start, stop",
        description="The warm checker server: a Spark session kept running between "
                    "checks, so that a check does not wait for Spark's start.",
        example="isrlab checker status",
        exit_codes="0  done\n2  bad input (a bad --master)",
        docs="checker.md")
    csub = c.add_subparsers(dest="checker_command", required=True,
                            parser_class=sub._parser_class)
    st = flags.command_parser(
        csub, "status", "is a checker server running, which version, how long until it stops",
        description="Whether a checker server runs, its version and master, how long "
                    "until it stops when idle.",
        example="isrlab checker status --json", exit_codes="0  said (running or not)",
        docs="checker.md")
    st.add_argument("--json", action="store_true", help="print its state as JSON")
    s = flags.command_parser(
        csub, "start", "start a server now (a check starts one on demand)",
        description="Start a checker server now; a check starts one on demand anyway.",
        example="isrlab checker start", exit_codes="0  started (or running)\n2  a bad master",
        docs="checker.md")
    s.add_argument("--master", help=f"a local master (default {DEFAULT_MASTER})")
    flags.command_parser(csub, "stop", "stop the running server",
                         description="Stop the running checker server.",
                         example="isrlab checker stop", exit_codes="0  stopped (or none ran)",
                         docs="checker.md")
    flags.command_parser(
        csub, "setup", "build the class-data archive Spark's JVM starts from "
                       "(once per installation; a first check is then faster)",
        description="Build the class-data archive Spark's JVM starts from: once per "
                    "installation, after which a first check starts faster.",
        example="isrlab checker setup", exit_codes="0  built\n2  no Java", docs="checker.md")
    return c


def _describe(info: dict[str, Any]) -> str:
    now = time.time()
    idle = now - info.get("last_used", now)
    left = max(0.0, info.get("idle_timeout", 0) - idle)
    version = info.get("version")
    state = "ready" if info.get("ready") else "starting"
    return (f"checker server: pid {info['pid']}, {state}, master {info.get('master')}, "
            f"version {version} ({'current' if info.get('current') else 'stale: replaced at the next check'}), "  # noqa: E501
            f"up {now - info.get('started', now):.0f} s, {info.get('checks', 0)} check(s), "
            f"idle {idle:.0f} s, stops in {left:.0f} s")


def _setup() -> int:
    """Build the archive unless it exists, waiting for a builder already at work
    (a server that exited starts one). The first check on a machine without it
    starts its JVM ~3 s slower (bench/README.md, time to verdict)."""
    # Only setup needs these: the other commands start without them.
    from checker import archive
    from checker.java import ensure_java

    try:
        runtime = ensure_java()
    except CheckerError as e:
        raise UsageError(f"checker setup: {e}") from None
    target = cds_archive(runtime)
    if target.is_file():
        print(f"checker setup: the class-data archive is in place: {target}")
        return 0
    print("checker setup: building the class-data archive of Spark's classes "
          "(a check of a made-up run in a JVM that records them; about a minute) ...",
          flush=True)
    start = time.monotonic()
    built = batchcheck.interruptible(archive.build, wait=True)
    if not target.is_file():
        raise RunIncomplete("checker setup: the JVM wrote no class-data archive "
                            f"(its log: {driver_log_path()})")
    how = "wrote" if built else "another builder wrote"
    print(f"checker setup: {how} {target} ({target.stat().st_size / 1e6:,.0f} MB) "
          f"in {time.monotonic() - start:.0f} s")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.checker_command == "setup":
        return _setup()
    if args.checker_command == "status":
        info = client.status()
        if args.json:
            print(json.dumps({"running": info is not None, **(info or {})}))
        else:
            print(_describe(info) if info else "checker server: not running")
        return 0
    if args.checker_command == "start":
        master = batchcheck.require_master(args.master)
        if not master.startswith("local"):
            raise UsageError(f"the checker server runs on a local master, not {master}")
        try:
            info = client.ensure_server(master)
        except client.ServerUnavailable as e:
            raise RunIncomplete(str(e)) from None
        print(f"checker server: pid {info['pid']} on {master} "
              f"(Spark starts in the background; `isrlab checker status` shows when ready)")
        return 0
    info = client.stop()
    print(f"checker server: stopped pid {info['pid']}" if info else
          "checker server: not running")
    return 0
