"""`isrlab matrix`: every scenario x variant x protocol version (N runs each),
checked in one Spark batch, as a matrix of verdicts.

It prints rows of scenarios/variants against columns of versions, each cell `✓`
when every run gave exactly the documented anomalies and passed its figure
assertions (harness.run.assertions), else what differed (`+kind` found but not
expected, `-kind` expected but not found, `assert FIGURE`, `incomplete`,
`error`), writes index.html with the same matrix, each cell listing its runs (the anomaly
kinds each showed, with counts, and a link to its report), and
exits 0 only when every cell matches (1 otherwise, 2 on bad input, 3 when
interrupted). A cell whose version the scenario's path does not exist in (its
`reachable`) is not run: it shows "not reachable", with the reason below the
matrix, and is no mismatch; the tally counts those cells. The cells are run and
checked by harness.cli.cellrun.run_cells, which `reproduce --all-variants` shares.
"""

from __future__ import annotations

import argparse
import html
import os
from pathlib import Path

from broker.protocol import VERSIONS
from contract import CHECK, REPORT_HTML
from contract.rundir import readable_meta
from harness.backends import backend_class
from harness.cli import batchcheck, cellrun, flags
from harness.cli.cellrun import OK_MARK, RUNS_INDEX
from harness.errors import UsageError
from harness.scenario.loader import (
    NOT_REACHABLE,
    Scenario,
    all_variants,
    find_scenario,
    list_scenarios,
    load_scenario,
)

INDEX = "index.html"


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    m = flags.command_parser(
        sub, "matrix", "every scenario x variant x version, checked in one "
                       "Spark batch, as a matrix of verdicts",
        description="Run every scenario (and variant) under every Kafka version's "
                    "protocol, N runs per cell, check them in one Spark batch and print "
                    "the matrix: a cell is ✓ when every run is as documented, else what "
                    "differed (+kind unexpected, -kind not reproduced, assert FIGURE).",
        example="isrlab matrix --backend sim --scenario kip101-hw-truncation-loss",
        exit_codes="""0  every cell run is as documented
1  a cell is not
2  bad input, before anything starts
3  interrupted""",
        docs="catalogue.md, docs/scenarios.md")
    flags.add_backend_flag(m)
    flags.add_runs_flag(m, "runs per cell (default 1)")
    m.add_argument("--scenario", action="append", metavar="NAME|PATH",
                   help="only these scenarios (repeatable; default: every shipped one)")
    flags.add_protocol_flag(m, repeatable=True)
    flags.add_seed_flag(m, "run i of a cell uses seed S+i")
    flags.add_runs_dir_flag(m)
    flags.add_port_flag(m, "the first run's port; with --jobs, job slot k uses PORT + "
                     f"{cellrun.LOCAL_PORT_STRIDE}k (local) or PORT + "
                     f"{cellrun.DOCKER_PORT_STRIDE}k (docker)")
    m.add_argument("--jobs", type=flags.typed(flags.positive_int), default=1,
                   metavar="N", help="runs at a time (default 1): each run mostly waits on "
                                     "its brokers' timers, so a few fit on one machine")
    flags.add_hosts_flag(m)
    flags.add_no_server_flag(m)
    flags.add_client_flags(m)
    flags.add_output_flags(verbose=True, p=m)
    return m


def run(args: argparse.Namespace) -> int:
    names = args.scenario or [s.name for s in list_scenarios()]
    # bad input: exit 2 first
    scenarios = [flags.with_client(args, load_scenario(find_scenario(n))) for n in names]
    rows = [v for s in scenarios for v in all_variants(s)]
    protocols = list(dict.fromkeys(args.protocol or VERSIONS))
    progress = flags.progress_of(args)
    # A real Kafka client needs real brokers: on the simulator a row that names one
    # is refused when asked for by name, else left out (with a line saying so).
    on_client = sorted({r.name for r in rows if r.workload.get("client")})
    if on_client and backend_class(args.backend).deterministic:
        if args.scenario:
            raise UsageError(f"{', '.join(on_client)}: a real Kafka client needs real "
                             f"brokers; run it on the local, docker or ssh backend")
        rows = [r for r in rows if not r.workload.get("client")]
        progress.line(f"left out on {args.backend} (a real Kafka client needs real brokers): "
                      f"{', '.join(on_client)}")
    batchcheck.require_master()  # ISRLAB_SPARK_MASTER: before any cell runs
    options_at = cellrun.slot_options(args)  # a bad --jobs or --hosts: before the batch
    batch = batchcheck.new_batch(args.runs_dir, "matrix")
    unreached = sum(not r.reachable_at(p) for r in rows for p in protocols)
    progress.line(f"matrix: {len(rows)} row(s) x {len(protocols)} version(s) x {args.runs} "
                  f"run(s) on {args.backend}"
                  + (f" ({unreached} cell(s) not reachable: not run)" if unreached else "")
                  + f"; runs in {batch}")
    cells = cellrun.run_cells(rows, protocols, args.runs, batch, args, progress, options_at)
    if isinstance(cells, int):
        return cells
    index = write_index(cells, rows, protocols, batch / INDEX)
    code = 1 if any(c.mismatch for c in cells) else 0
    if args.json:
        batchcheck.print_result_json(
            "matrix", code, [cellrun.outcome_json(c, o) for c in cells for o in c.outcomes],
            args.seed, batch=str(batch), index=str(index), matrix=tally(cells),
            cells=[_json_cell(c) for c in cells])
        return code
    for line in matrix_lines(cells, rows, protocols):
        print(line)
    for line in unreachable_lines(rows, protocols):
        print(line)
    for c in cells:
        for o in c.outcomes:
            for m in o["messages"]:
                print(f"  {c.row} {c.protocol}: {m}")
    print(tally_line(cells))
    checked = [o["result"] for c in cells for o in c.outcomes if o["result"] is not None]
    if checked:
        batchcheck.print_tally(checked)
    print(f"index: {index}")
    return code


def _json_cell(c: cellrun.Cell) -> dict:
    out = {"row": c.row, "protocol": c.protocol, "cell": c.text(),
           "reachable": c.not_reachable is None,
           "runs": [str(o["run_dir"]) for o in c.outcomes]}
    if c.not_reachable is not None:
        out["why"] = c.not_reachable
    return out


def tally(cells: list[cellrun.Cell]) -> dict[str, int]:
    """Cells that were run, matched, and were not reachable (not run, no verdict)."""
    run = [c for c in cells if c.not_reachable is None]
    return {"cells": len(cells), "run": len(run), "matches": sum(c.matches for c in run),
            "not_reachable": len(cells) - len(run)}


def tally_line(cells: list[cellrun.Cell]) -> str:
    t = tally(cells)
    line = f"matches the catalogue in {t['matches']}/{t['run']} cell(s)"
    if t["not_reachable"]:
        line += f"; {t['not_reachable']} cell(s) not reachable (not run)"
    return line


def unreachable_lines(rows: list[Scenario], protocols: list[str]) -> list[str]:
    """One line per row with cells it does not reach: the versions and why."""
    out = []
    for r in rows:
        versions = [p for p in protocols if not r.reachable_at(p)]
        if versions and r.reachable is not None:
            out.append(f"  {r.run_name}: {NOT_REACHABLE} under {', '.join(versions)} "
                       f"(reachable {r.reachable.span()}): {r.reachable.why}")
    return out


def matrix_lines(cells: list[cellrun.Cell], rows: list[Scenario],
                 protocols: list[str]) -> list[str]:
    at = {(c.row, c.protocol): c for c in cells}
    names = [r.run_name for r in rows]
    width = max(len(n) for n in names)
    cols = [max(len(p), *(len(at[n, p].text()) for n in names)) for p in protocols]
    out = [" ".join([" " * width, *(p.ljust(w) for p, w in zip(protocols, cols, strict=True))])]
    for n in names:
        out.append(" ".join([n.ljust(width), *(at[n, p].text().ljust(w)
                                               for p, w in zip(protocols, cols, strict=True))]))
    return [line.rstrip() for line in out]


def _run_link(i: int, o: dict, out: Path) -> str:
    """One run of a cell: a link to its report, the anomaly kinds it showed with
    their counts (or "no anomaly"), and what differed from the catalogue."""
    report = Path(o["run_dir"]) / CHECK / REPORT_HTML
    target = report if report.is_file() else Path(o["run_dir"])
    counts: dict[str, int] = {}
    for a in o.get("anomalies") or []:
        counts[a["kind"]] = counts.get(a["kind"], 0) + 1
    kinds = ", ".join(f"{k} ×{n}" for k, n in sorted(counts.items())) or "no anomaly"
    if o["verdict"] in ("error", "incomplete"):
        kinds = f"{o['verdict']}; {kinds}"
    diff = "".join(f"<br><small>{html.escape(m)}</small>" for m in o["messages"])
    seed = readable_meta(Path(o["run_dir"])).get("seed")
    label = f"run {i}" + (f" · seed {seed}" if seed is not None else "")
    return (f'<li><a href="{html.escape(os.path.relpath(target, out.parent))}">{label}</a>: '
            f'<span class="{"ok" if o["verdict"] == "valid" else "bad"}">'
            f'{html.escape(kinds)}</span>{diff}</li>')


def write_index(cells: list[cellrun.Cell], rows: list[Scenario], protocols: list[str],
                out: Path) -> Path:
    """The matrix as a page: each cell links every run's report (relative links)."""
    at = {(c.row, c.protocol): c for c in cells}
    out = out.resolve()
    head = "".join(f"<th>{html.escape(p)}</th>" for p in protocols)
    body = []
    for r in rows:
        tds = []
        for p in protocols:
            c = at[r.run_name, p]
            links = [_run_link(i, o, out) for i, o in enumerate(c.outcomes, 1)]
            if c.not_reachable is not None:  # no run, no verdict: the reason on hover
                tds.append(f'<td class="na" title="{html.escape(c.not_reachable, quote=True)}">'
                           f'{html.escape(c.text())}</td>')
                continue
            cls = "ok" if c.matches else "bad"
            tds.append(f'<td class="{cls}"><b>{html.escape(c.text())}</b>'
                       f'<ul class="runs">{"".join(links)}</ul></td>')
        expect = html.escape(cellrun.expect_line(r))
        body.append(f"<tr><th>{html.escape(r.run_name)}<br><small>{expect}</small></th>"
                    f"{''.join(tds)}</tr>")
    t = tally(cells)
    unreached = "".join(f"<li>{html.escape(line.strip())}</li>"
                        for line in unreachable_lines(rows, protocols))
    if unreached:
        unreached = (f"<p>{t['not_reachable']} cell(s) {NOT_REACHABLE}: the scenario's path "
                     "does not exist in that release (its <code>reachable</code>), so the "
                     f"cell is not run and has no verdict.</p><ul>{unreached}</ul>")
    # No run at all (every cell not reachable): the checker wrote no runs page.
    all_runs = f'; <a href="{RUNS_INDEX}">all runs</a>' if t["run"] else ""
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>isrlab matrix</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; }}
td, th {{ border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }}
td.ok {{ background: #e6f4ea; }} td.bad {{ background: #fce8e6; }}
td.na {{ background: #f1f3f4; color: #666; font-style: italic; }}
small {{ color: #555; }}
ul.runs {{ list-style: none; margin: .3em 0 0; padding: 0; font-size: 90%; }}
span.bad {{ color: #b3261e; font-weight: 600; }}
</style></head><body>
<h1>Scenario matrix</h1>
<p>Matches the catalogue in {t['matches']}/{t['run']} cell(s) run. A cell is {OK_MARK} when
every run showed exactly the documented anomalies and passed its assertions; otherwise
what differed: +kind found but not expected, -kind expected but not found, assert
FIGURE failed. Below it, each run: a link to its report and the anomaly kinds it
showed, with their counts{all_runs}.</p>
{unreached}
<table><tr><th></th>{head}</tr>
{chr(10).join(body)}
</table></body></html>
"""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
