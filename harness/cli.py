"""The `isrlab` command: scenarios, reproduce, check.

Every user error is one line on stderr and exit status 2; a run that cannot
complete is exit 3; otherwise the checker's verdict decides (0 valid, 1 invalid
or not reproduced). See DESIGN.md, "Exit status".
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from broker.config import PROTOCOLS
from harness import reaper
from harness.backends import BACKENDS
from harness.errors import ConfigError, HarnessError, RunIncomplete
from harness.junit import write_junit
from harness.progress import Progress
from harness.runner import RunOptions, run_scenario
from harness.scenario import find_scenario, list_scenarios, load_scenario


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage block: the CLI contract for bad input.
        self.exit(2, f"isrlab: error: {message} (see isrlab {self.prog.split()[-1]} --help)\n"
                  if " " in self.prog else f"isrlab: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="isrlab", description="Fault-injection harness for Kafka's "
                                           "replication protocol.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("scenarios", help="list the shipped scenarios")

    r = sub.add_parser("reproduce", help="run one scenario and check it")
    r.add_argument("scenario", metavar="NAME|PATH")
    r.add_argument("--protocol", required=True, choices=PROTOCOLS)
    r.add_argument("--backend", default="local", choices=sorted(BACKENDS))
    r.add_argument("--seed", type=int)
    r.add_argument("--runs-dir", type=Path, default=Path("runs"))
    r.add_argument("--port", type=int, default=19092,
                   help="local: the port of every node (one 127.0.0.x address each); "
                        "docker: the first host port mapped")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--json", action="store_true", help="print one JSON summary on stdout")

    c = sub.add_parser("check", help="check run directories with the Spark checker")
    c.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    c.add_argument("--master", help="Spark master (default: embedded local[*])")
    c.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    reaper.install_signal_handlers()
    try:
        if args.command == "scenarios":
            return cmd_scenarios()
        if args.command == "reproduce":
            return cmd_reproduce(args)
        return cmd_check(args)
    except HarnessError as e:
        print(f"isrlab: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("isrlab: interrupted", file=sys.stderr)
        return RunIncomplete.exit_code


def cmd_scenarios() -> int:
    for s in list_scenarios():
        print(f"{s.name:32} {s.description}")
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    scenario = load_scenario(find_scenario(args.scenario))
    progress = Progress(sys.stderr if args.json else sys.stdout, quiet=args.quiet)
    # local: every node's port; docker: the first of the host ports it maps.
    options: dict[str, Any] = {"port": args.port}
    record = run_scenario(
        scenario,
        RunOptions(protocol=args.protocol, backend=args.backend, seed=args.seed,
                   runs_dir=args.runs_dir, backend_options=options),
        progress,
    )
    summary: dict[str, Any] = {
        "run_id": record.run_id, "run_dir": str(record.run_dir), "scenario": scenario.name,
        "protocol": args.protocol, "backend": args.backend,
        "expect": scenario.expect_for(args.protocol), "elapsed_s": round(record.elapsed, 3),
    }
    if record.error is not None:
        return _finish(args, summary, record.error.exit_code, error=str(record.error),
                       incomplete=True)
    try:
        check_runs = importlib.import_module("checker.api").check_runs
    except (ImportError, AttributeError) as e:
        return _finish(args, summary, RunIncomplete.exit_code, error=f"checker unavailable: {e}")
    progress.line("checking ...")
    try:
        result = check_runs([record.run_dir], progress=lambda m: progress.line(f"  {m}"))[0]
    except Exception as e:
        return _finish(args, summary, _checker_exit(e), error=f"checker: {_one_line(e)}")
    report = _render(record.run_dir)
    summary.update(verdict=result.verdict, anomalies=_plain(result.anomalies),
                   report=str(report) if report else None)
    if not args.json:
        print(f"verdict: {result.verdict}")
        for a in summary["anomalies"]:
            print(f"  {_anomaly_line(a)}")
        print(f"run: {record.run_dir}")
        if report:
            print(f"report: {report}")
    return _finish(args, summary, result.exit_code)


def _finish(args: argparse.Namespace, summary: dict[str, Any], code: int,
            error: str | None = None, incomplete: bool = False) -> int:
    summary["exit_code"] = code
    if error is not None:
        summary["error"] = error
        print(f"isrlab: {error}", file=sys.stderr)
        if not args.json:
            print(f"run: {summary['run_dir']}{' (incomplete)' if incomplete else ''}")
    if args.json:
        print(json.dumps(summary, default=str))
    return code


def _render(run_dir: Path) -> Path | None:
    """The HTML report; a missing or failing renderer costs the report, not the verdict."""
    try:
        render_run = importlib.import_module("reports.render").render_run
        return Path(render_run(run_dir))
    except Exception as e:
        print(f"isrlab: no report: {_one_line(e)}", file=sys.stderr)
        return None


def _checker_exit(e: Exception) -> int:
    # The checker's own errors carry an exit status (2: a run it cannot read).
    code = getattr(e, "exit_code", None)
    return code if isinstance(code, int) else RunIncomplete.exit_code


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text or type(e).__name__


def _plain(x: Any) -> Any:
    """Checker objects (dataclasses or dicts) as JSON-able data."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return dataclasses.asdict(x)
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _anomaly_line(a: Any) -> str:
    if isinstance(a, dict):
        kind = a.get("kind") or a.get("type") or "anomaly"
        text = a.get("explanation") or a.get("summary") or ""
        return f"{kind}: {text}".rstrip(": ")
    return str(a)


def cmd_check(args: argparse.Namespace) -> int:
    # Paths may be run directories or trees of them; the checker finds the runs.
    for p in args.paths:
        if not p.exists():
            raise ConfigError(f"no such run directory: {p}")
    try:
        api = importlib.import_module("checker.api")
    except ImportError as e:
        raise RunIncomplete(f"checker unavailable: {e}") from e
    kwargs = {"master": args.master} if args.master else {}
    try:
        results = api.check_runs(list(args.paths), **kwargs)
    except Exception as e:
        print(f"isrlab: {_one_line(e)}", file=sys.stderr)
        return _checker_exit(e)
    for r in results:
        print(f"{r.verdict:15} {r.run_dir}")
        for a in _plain(r.anomalies):
            print(f"  {_anomaly_line(a)}")
    if args.junit is not None:
        write = getattr(api, "write_junit", None) or write_junit
        write(results, args.junit)
    return max((r.exit_code for r in results), default=0)


if __name__ == "__main__":
    sys.exit(main())
