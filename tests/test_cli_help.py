"""`isrlab --help` for every command (issue 45, item 8): a description, an
example, the exit statuses and a docs pointer; help text for every option; one
--seed convention."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest
from conftest import ROOT

from harness.cli import build_parser
from harness.cli.flags import SEED_DEFAULT


def _commands(p: argparse.ArgumentParser, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command's parser, nested ones too (`docker build`, `ssh hosts up`)."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(build_parser()))


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"reproduce", "check", "chaos", "swarm", "matrix", "docker build",
            "ssh hosts up", "checker status"} <= names


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_command_has_description_example_exit_codes_and_docs(
        path: tuple[str, ...], parser: argparse.ArgumentParser) -> None:
    assert parser.description, path
    epilog = parser.epilog or ""
    assert f"example:\n  isrlab {' '.join(path)}" in epilog, (path, epilog)
    assert "\nexit status:\n  0  " in epilog, (path, epilog)
    assert "docs: docs/" in epilog and "docs/exit-codes.md" in epilog, (path, epilog)
    # Shown as written: the example and the exit-status lines keep their lines.
    assert parser.formatter_class is argparse.RawDescriptionHelpFormatter


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_every_option_and_argument_has_help(path: tuple[str, ...],
                                            parser: argparse.ArgumentParser) -> None:
    lacking = [a.option_strings or a.dest for a in parser._actions
               if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
               and not a.help]
    assert not lacking, (path, lacking)


def test_the_named_options_say_what_they_do() -> None:
    by_name = dict(COMMANDS)
    chaos = {s: a.help for a in by_name[("chaos",)]._actions for s in a.option_strings}
    for opt in ("--protocol", "--runs", "--runs-dir", "--junit", "--brokers", "--partitions",
                "--producers"):
        assert chaos[opt] and len(chaos[opt]) > 15, (opt, chaos[opt])
    assert "0.10" in chaos["--protocol"] and "default 3" in chaos["--brokers"]


SEEDED = [path for path, p in COMMANDS
          if any("--seed" in a.option_strings for a in p._actions)]


def test_one_seed_convention() -> None:
    """Every command with --seed: default 0, said in its help, and printed."""
    assert {("reproduce",), ("chaos",), ("swarm",), ("matrix",), ("trace",)} <= set(SEEDED)
    by_name = dict(COMMANDS)
    for path in SEEDED:
        (seed,) = [a for a in by_name[path]._actions if "--seed" in a.option_strings]
        assert seed.default == SEED_DEFAULT == 0, path
        assert f"(default {SEED_DEFAULT}; printed)" in seed.help, (path, seed.help)


def test_help_prints_the_epilog_as_written() -> None:
    r = subprocess.run([sys.executable, "-m", "harness.cli", "check", "--help"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "example:\n  isrlab check runs/" in r.stdout
    assert "exit status:\n  0  every run as documented\n  1  " in r.stdout
    assert "docs: docs/checker.md" in r.stdout
