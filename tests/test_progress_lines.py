"""Progress through every silent stretch (issue 45, item 8): each phase of a check
says `still ...` while it lasts, and a check queued behind another on the warm
checker server says that it waits."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT

from checker.heartbeat import Phases


def _until(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_long_phase_says_still_until_the_next_line() -> None:
    lines: list[str] = []
    lock = threading.Lock()

    def say(m: str) -> None:
        with lock:
            lines.append(m)

    with Phases(say, first=0.05, every=0.05) as phases:
        phases("  checking 9 anomaly kinds")
        _until(lambda: sum("still" in m for m in lines) >= 2)
        phases("  writing results")
        n = len(lines)
    # The first phase's ticks stopped at the next line; the last ended with the block.
    assert lines[0] == "  checking 9 anomaly kinds"
    assert all(m.startswith("still checking 9 anomaly kinds (") and m.endswith("s)")
               for m in lines[1:n - 1]), lines
    assert lines[n - 1] == "  writing results"
    time.sleep(0.2)
    assert len(lines) <= n + 1 and not any("still checking" in m for m in lines[n:]), lines


def test_a_short_phase_says_nothing_more() -> None:
    lines: list[str] = []
    with Phases(lines.append, first=5.0) as phases:
        phases("reading 1 run(s)")
        phases("writing results")
    assert lines == ["reading 1 run(s)", "writing results"]


@pytest.mark.spark
def test_a_check_queued_behind_another_says_it_waits(tmp_path: Path) -> None:
    """Three `isrlab check`s at once on the suite's warm server: it serves one at
    a time, and the last queued (behind two checks, each of several seconds)
    says why it is silent."""
    from conftest_spark import kip101_loss

    runs = [kip101_loss(tmp_path, f"r{i}", ["lost-write"], "kip101-hw-truncation-loss").write()
            for i in range(3)]
    procs = [subprocess.Popen([sys.executable, "-m", "harness.cli", "check", str(r),
                               "--no-report"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in runs]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    said = "".join(o for o, _ in outs)
    assert "waiting for the checker server (" in said, said
    for out, _ in outs:  # and each ends with its tally
        assert out.splitlines()[-1] == "1 run: 1 data lost; 1 as documented"
