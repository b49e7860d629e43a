"""Safe YAML loading (harness.yamlloc): every YAML file isrlab reads -- scenario,
nightly, hosts -- is bounded in bytes, values (an alias counting as the values
it stands for) and nesting, so an alias bomb is one `FILE:LINE` error, exit 2,
in well under a second and a few MB, never a traceback or the machine's memory."""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, child_env

from harness.backends.hostsfile import load_hosts
from harness.chaos.nightly import load_config
from harness.scenario.loader import load_scenario
from harness.yamlloc import MAX_BYTES, MAX_DEPTH, MAX_VALUES, ScenarioError, load


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """`a: &a [x, ...]`, `b: &b [*a, *a, ...]`, ...: width**levels values from
    ~300 bytes (9 levels of 9: 387,420,489 strings, tens of GB once expanded)."""
    names = [chr(ord("a") + i) for i in range(levels)]
    lines = [f"a: &a [{', '.join(['x'] * width)}]"]
    for prev, name in zip(names, names[1:], strict=False):
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * width)}]")
    return "\n".join(lines) + "\n"


def refused(tmp_path: Path, text: str | bytes, loader: Callable[[Path], Any] = load
            ) -> ScenarioError:
    path = tmp_path / "f.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ScenarioError) as info:
        loader(path)
    err = info.value
    assert err.exit_code == 2 and "\n" not in str(err) and str(err).startswith(str(path))
    return err


@pytest.mark.parametrize("loader", [load_scenario, load_config, load_hosts],
                         ids=["scenario", "nightly", "hosts"])
def test_an_alias_bomb_is_refused_at_the_alias_that_crosses_the_bound(
        tmp_path: Path, loader: Callable[[Path], Any]) -> None:
    bomb = alias_bomb()
    assert len(bomb) < 1024
    err = refused(tmp_path, bomb, loader)
    # a: 10 values, b: 1 + 9*10 = 91, c: 820, d: 7381; with the rest of the
    # document it is *d's nine uses, on line 5, that pass 20,000.
    assert err.line == 5
    assert err.message == (f"alias *d (7381 values) takes the file past {MAX_VALUES} values, "
                           "aliases expanded")


def test_aliases_within_the_bound_still_work(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("nodes: &all [A, B, C]\nkill: *all\nagain: {who: *all}\n")
    doc = load(path)
    assert doc["kill"] == doc["again"]["who"] == ["A", "B", "C"]
    assert doc.line_of("kill") == 2


def test_an_alias_inside_the_value_it_names(tmp_path: Path) -> None:
    err = refused(tmp_path, "ok: 1\nloop: &a [x, [y, *a]]\n")
    assert (err.line, err.message) == (2, "alias *a is used inside the value it names")


def test_nesting_is_bounded_written_out_or_through_aliases(tmp_path: Path) -> None:
    deep = "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    err = refused(tmp_path, deep)
    assert (err.line, err.message) == (1, f"values nested more than {MAX_DEPTH} levels deep")
    # Each anchor is shallow enough; used inside the next, it nests past the bound.
    half = MAX_DEPTH // 2
    text = (f"a: &a {'[' * half}x{']' * half}\n"
            f"b: &b {'[' * half}*a{']' * half}\n")
    err = refused(tmp_path, text)
    assert (err.line, err.message) == (2, f"alias *a nests values more than {MAX_DEPTH} "
                                          "levels deep")


def test_values_are_bounded_without_aliases(tmp_path: Path) -> None:
    err = refused(tmp_path, "a: [" + "x, " * MAX_VALUES + "x]\n")
    assert (err.line, err.message) == (1, f"more than {MAX_VALUES} values in one file")


def test_bytes_are_bounded_before_anything_is_parsed(tmp_path: Path) -> None:
    err = refused(tmp_path, "# " + "x" * MAX_BYTES + "\na: 1\n")
    assert err.line is None
    assert err.message == f"more than {MAX_BYTES // 1024} KiB; an isrlab YAML file is at most that"
    # An endless file is read no further than the bound.
    with pytest.raises(ScenarioError, match="more than 256 KiB"):
        load(Path("/dev/zero"))


@pytest.mark.parametrize("tagged", ["!!int x", "!!float b", "!!timestamp 2001-13-45",
                                    "!!bool maybe"])
def test_an_explicit_tag_its_value_does_not_fit(tmp_path: Path, tagged: str) -> None:
    """PyYAML's constructors raise ValueError and worse for these: a FILE:LINE."""
    err = refused(tmp_path, f"ok: 1\nbad: {tagged}\n")
    tag, value = tagged.split(" ", 1)
    assert err.line == 2 and err.message.startswith(f"{value!r} is no tag:yaml.org,2002:")


# Runs `isrlab` and writes its own peak RSS (VmHWM, kB) where ISRLAB_TEST_HWM says
# at exit. (wait4's ru_maxrss would not do: Linux carries the forking pytest's own
# peak into the child across exec.)
_PEAK_RSS = ("import atexit, os, runpy, sys\n"
             "def hwm():\n"
             "    kb = next(ln.split()[1] for ln in open('/proc/self/status')\n"
             "              if ln.startswith('VmHWM:'))\n"
             "    open(os.environ['ISRLAB_TEST_HWM'], 'w').write(kb)\n"
             "atexit.register(hwm)\n"
             "sys.argv[0] = 'isrlab'\n"
             "runpy.run_module('harness.cli', run_name='__main__')\n")


def _run_bounded(args: list[str], limit: int,
                 tmp_path: Path) -> tuple[subprocess.CompletedProcess, int]:
    """`isrlab ARGS` under an address-space limit: (the result, its own peak RSS
    in MB)."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    hwm = tmp_path / "peak-rss-kb"
    r = subprocess.run([sys.executable, "-c", _PEAK_RSS, *args], cwd=ROOT,
                       env=child_env(ISRLAB_TEST_HWM=str(hwm)),
                       preexec_fn=cap, capture_output=True, text=True, timeout=120)
    return r, int(hwm.read_text()) // 1024


@pytest.mark.parametrize("command", ["reproduce", "nightly", "hosts"])
def test_the_cli_refuses_an_alias_bomb_fast_in_bounded_memory(tmp_path: Path,
                                                              command: str) -> None:
    """The real bomb through each command that reads YAML: one line, exit 2,
    nothing started, under a 1 GiB address-space limit (the expanded bomb
    would need tens of GB)."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    runs = tmp_path / "runs"
    args = {
        "reproduce": ["reproduce", str(bomb), "--protocol", "0.10", "--runs-dir", str(runs)],
        "nightly": ["nightly", str(bomb), "--results", str(runs)],
        "hosts": ["reproduce", "kip101-hw-truncation-loss", "--protocol", "0.10",
                  "--backend", "ssh", "--hosts", str(bomb), "--runs-dir", str(runs)],
    }[command]
    r, rss_mb = _run_bounded(args, 1 << 30, tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [
        f"isrlab: {bomb}:5: alias *d (7381 values) takes the file past {MAX_VALUES} values, "
        "aliases expanded"], r.stderr
    # A generous bound; measured: 45 MB, as much as `isrlab --help`.
    assert rss_mb < 300, rss_mb
    assert not runs.exists()
