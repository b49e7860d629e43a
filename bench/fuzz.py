"""Fuzz isrlab's inputs: the scenario, nightly and hosts loaders, the run-directory
reader and every command's command line, each its own target.

    python3 bench/fuzz.py --seed 0 --inputs 2000              # every target
    python3 bench/fuzz.py --seed 0 --inputs 500 --target cli --show 5

Each input is a valid seed from the repository (the scenario catalogue and
tests/data, nightly/sample.yaml, docs/ssh.md's hosts file, a run directory made
once by a sim run, one working command line per command) mutated: bytes flipped
or not UTF-8, lines cut or repeated, keys misspelt, values of the wrong type,
huge or deeply nested, YAML aliases. The only outcomes allowed are success and a
clean error: one line, exit 2, `FILE:LINE: ...` for a file (docs/exit-codes.md).
Anything else -- another exception, an error on several lines or with another
status, a hang, memory without bound -- is a failure.

Every input runs in a child forked from this process, so that a hang (killed
after --timeout) or a memory bomb (RLIMIT_AS, --mem-mb above this process's
size) costs one input, not the run. The child works in a temp directory of its
own and, through an audit hook, may not start a process, connect anywhere or
write outside it; a command that gets that far, or constructs a cluster backend
(the sim's too), has passed its checks: it counts as success and is stopped
there. So no cluster, Docker, Spark or SSH is ever started, and nothing is
written outside the temp directory.

tests/test_fuzz.py runs a seeded slice of the same targets in CI (this script,
`--seed 0`, as a process of its own).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from checker.rundir import read_rundir  # noqa: E402
from contract import RUNNING  # noqa: E402
from contract.rundir import (  # noqa: E402
    RunDirError,
    discover,
    read_events,
    read_history,
    read_log,
    read_meta,
    read_state,
    run_status,
)
from harness import cli  # noqa: E402
from harness.backends.base import Backend  # noqa: E402
from harness.backends.hostsfile import load_hosts  # noqa: E402
from harness.chaos.nightly import load_config  # noqa: E402
from harness.errors import HarnessError  # noqa: E402
from harness.run.collect import owner_gone  # noqa: E402
from harness.scenario.loader import SCENARIO_DIR, find_scenario, load_scenario  # noqa: E402
from harness.yamlloc import load as load_yaml  # noqa: E402

OK, ERROR, TRACEBACK, HANG, MEMORY = "ok", "error", "traceback", "hang", "memory"
OUTCOMES = (OK, ERROR, TRACEBACK, HANG, MEMORY)
ALLOWED = (OK, ERROR)
TIMEOUT_S = 10.0
MEM_MB = 512

# -- inputs and results ------------------------------------------------------------


@dataclass
class Input:
    """One fuzz input: files to write into the child's directory (None: remove it,
    the empty tuple: make it a directory) and, for the command line, argv."""

    kind: str  # how it was made, for the report: "scenario catalogue/x.yaml: flip-byte"
    files: dict[str, bytes | None | tuple] = field(default_factory=dict)
    argv: list[str] | None = None

    def describe(self, limit: int = 300) -> str:
        text = self.kind
        if self.argv is not None:
            text += f" argv={self.argv!r}"
        return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class Result:
    outcome: str
    detail: str = ""  # the error line, or the exception and where it was raised
    where: str = ""  # for a failure: the innermost frame of isrlab's code (groups failures)
    peak_kib: int = 0  # the child's peak RSS above this process's


# -- the sandboxed child -------------------------------------------------------------


class Stopped(BaseException):
    """Raised in the child where the input would start something (a process, a
    connection, a cluster) or write outside its directory: its checks passed.
    BaseException, so that no `except Exception` of the code under test takes it."""


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {"os.mkdir": 1, "os.remove": 1, "os.rmdir": 1, "os.rename": 2, "os.link": 2,
                "os.symlink": 2, "os.truncate": 1, "os.chmod": 1, "os.chown": 1,
                "os.utime": 1, "shutil.rmtree": 1, "shutil.copyfile": 2, "shutil.copytree": 2,
                "shutil.move": 2, "os.chflags": 1, "os.mkfifo": 1, "os.mknod": 1}
_START_EVENTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                 "os.fork", "os.forkpty", "pty.spawn", "socket.connect", "socket.getaddrinfo",
                 "socket.gethostbyname", "socket.sendto", "socket.sendmsg", "urllib.Request",
                 "os.killpg", "signal.pthread_kill", "ctypes.dlopen", "webbrowser.open")


def _sandbox(root: Path, note: Callable[[str], None]) -> None:
    """Confine this (child) process to `root`: the audit hook raises Stopped for
    anything beyond reading files and writing under root."""
    inside = os.path.realpath(root) + os.sep

    def allowed(path: Any) -> bool:
        if isinstance(path, int):
            return True  # an open descriptor: it was checked when opened
        p = os.fsdecode(path)
        return p == os.devnull or os.path.realpath(p).startswith(inside)

    def stop(what: str) -> None:
        note(what)
        raise Stopped(what)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writes = (mode is not None and any(c in mode for c in "wax+")) or \
                (mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
            if writes and path is not None and not allowed(path):
                stop(f"write {path}")
        elif event in _PATH_EVENTS:
            for p in args[:_PATH_EVENTS[event]]:
                if p is not None and not allowed(p):
                    stop(f"{event} {p}")
        elif event == "os.kill":
            if args[1] != 0:
                stop(f"kill {args[0]}")
        elif event.startswith(_START_EVENTS):
            stop(event)

    sys.addaudithook(hook)

    def no_cluster(cls: type, *_a: Any, **_k: Any) -> Any:
        stop(f"start a {getattr(cls, 'name', 'cluster')} cluster")

    Backend.__new__ = no_cluster  # type: ignore[assignment,method-assign]


def _vm_kib(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def _innermost(tb: Any) -> str:
    """file:line of the innermost frame in isrlab's own code."""
    where = ""
    for frame in traceback.extract_tb(tb):
        try:
            rel = Path(frame.filename).resolve().relative_to(ROOT)
        except ValueError:
            continue
        if rel.parts[0] not in ("bench", "tests"):
            where = f"{rel}:{frame.lineno}"
    return where


# FILE:LINE: what -- or FILE: what, for the file as a whole (cannot be read, too big).
_FILE_LINE = re.compile(r"^(?P<file>.+?)(:(?P<line>\d+))?: \S")


def classify_error(e: BaseException, file: Path | None) -> Result:
    """A clean error (one line, exit 2; a loader's names FILE:LINE, or FILE for the
    file as a whole) or a failure."""
    text = str(e)
    if isinstance(e, MemoryError):
        return Result(MEMORY, "MemoryError", _innermost(e.__traceback__))
    if not isinstance(e, HarnessError | RunDirError):
        return Result(TRACEBACK, f"{type(e).__name__}: {' '.join(text.split())[:300]}",
                      _innermost(e.__traceback__))
    problem = ""
    if e.exit_code != 2:
        problem = f"exit {e.exit_code}"
    elif "\n" in text or not text.strip():
        problem = "not one line"
    elif file is not None:
        m = _FILE_LINE.match(text)
        if m is None or m["file"] != str(file):
            problem = f"not {file}:LINE: ..."
    if problem:
        return Result(TRACEBACK, f"unclean {type(e).__name__} ({problem}): "
                                 f"{' '.join(text.split())[:300]}", _innermost(e.__traceback__))
    return Result(ERROR, text[:300])


def _child(target: Target, inp: Input, work: Path, out: int) -> None:
    """The forked child: set up `inp` in `work`, confine itself, run the target,
    write the result to `out` as JSON lines and exit."""

    def send(kind: str, **kw: Any) -> None:
        os.write(out, (json.dumps({"kind": kind, **kw}) + "\n").encode())

    try:
        null = os.open(os.devnull, os.O_RDWR)
        err = os.open(work / ".stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        os.chdir(work)
        (work / "tmp").mkdir(exist_ok=True)
        os.environ.update(TMPDIR=str(work / "tmp"), HOME=str(work / "home"))
        for k in [k for k in os.environ if k.startswith("ISRLAB_")]:
            del os.environ[k]
        tempfile.tempdir = str(work / "tmp")
        sys.dont_write_bytecode = True
        target.setup(work)
        for rel, data in inp.files.items():
            p = work / rel
            if p.is_dir() and not isinstance(data, tuple):
                shutil.rmtree(p)
            if data is None:
                p.unlink(missing_ok=True)
            elif isinstance(data, tuple):
                p.unlink(missing_ok=True)
                p.mkdir(parents=True, exist_ok=True)
            else:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
        limit = (_vm_kib("VmSize") + target.mem_mb * 1024) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        fsize = 256 << 20
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        _sandbox(work, lambda what: send("stopped", what=what))
        r = target.call(work, inp)
        send("result", outcome=r.outcome, detail=r.detail, where=r.where)
    except Stopped:
        send("result", outcome=OK, detail="stopped before starting", where="")
    except BaseException as e:  # noqa: BLE001 - every other outcome is the finding
        r = classify_error(e, None)
        send("result", outcome=r.outcome, detail=r.detail, where=r.where)
    finally:
        os._exit(0)


def run_input(target: Target, inp: Input, timeout: float = TIMEOUT_S) -> Result:
    """Run one input in a forked, confined child; its outcome."""
    work = Path(tempfile.mkdtemp(prefix="isrlab-fuzz-"))
    rfd, wfd = os.pipe()
    base = _vm_kib("VmRSS")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        _child(target, inp, work, wfd)
    os.close(wfd)
    data, hung = b"", False
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                hung = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([rfd], [], [], left)
            if ready:
                chunk = os.read(rfd, 1 << 16)
                if not chunk:
                    break
                data += chunk
        _, status, usage = os.wait4(pid, 0)
    finally:
        os.close(rfd)
    peak = max(0, usage.ru_maxrss - base)
    try:
        stderr = (work / ".stderr").read_text(errors="replace")
    except OSError:
        stderr = ""
    shutil.rmtree(work, ignore_errors=True)
    lines = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
    stopped = next((x["what"] for x in lines if x["kind"] == "stopped"), None)
    result = next((x for x in lines if x["kind"] == "result"), None)
    if hung:
        return Result(HANG, f"no outcome after {timeout:g} s", "", peak)
    if peak > target.mem_mb * 1024 // 2:
        return Result(MEMORY, f"peak RSS {peak // 1024} MiB above the parent's", "", peak)
    if stopped is not None:
        return Result(OK, f"checks passed; stopped at: {stopped}", "", peak)
    if result is None:
        why = (f"killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exit {os.WEXITSTATUS(status)} without a result")
        return Result(TRACEBACK, f"{why}; stderr: {' '.join(stderr.split())[:200]}", "", peak)
    return Result(result["outcome"], result["detail"], result["where"], peak)


# -- mutations -------------------------------------------------------------------------

# Values of every kind a field might get instead of its own.
_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 2, 3, 7, 2 ** 31, 2 ** 63, 10 ** 40, -(10 ** 30), "", " ", "x",
    "2.5", "-0.5", "1e309", "nan", "inf", "0x10", "1_000", "0.10", "latest", "2.0", "9.9",
    "A", "B", "C", "D", "controller", "all", "leader", "one", "minority", "kill", "pause",
    "partition", "power-cycle", "lost-write", "divergence", "became-follower", "leader-elected",
    "60s", "1h2", "99999999999999s", "-5s", "0s", "t", "nosuch", "\x00", "\u202e", "💥",
    "a\nb", "~", "~nosuchuser/x", "/", "..", "/dev/null", "{", "[", "*a", "&a", "%", "@",
    [], {}, [1, 2], ["A"], ["A", "B", "C"], [["A"], ["B"]], {"a": 1}, {"node": "A"},
    [None], [[]], [{}],
]
_BAD_BYTES = [b"\xff", b"\xc3", b"\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\x00", b"\x1b",
              b"\xef\xbb\xbf", b"\xfe\xff", b"\r", b"\t", b"\x85"]
_YAML_BITS = ["&a ", "*a", "!!binary aGk=", "!!python/object/apply:os.system ['true']",
              "!!set {a, b}", "!!omap [a: 1]", "? ", "---\n", "...\n", "%YAML 1.1\n", "\t",
              "<<: *a\n", "!!int x", "!!float 1", "!!timestamp 2001-12-14", "|\n", ">-\n",
              "{", "}", "[", "]", ",", ": ", "- ", "#", "'", '"', "\\", "@", "`"]


def _plain(x: Any) -> Any:
    """LocMap/LocSeq as plain dicts and lists (for yaml.safe_dump)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def _misspell(rng: random.Random, word: str) -> str:
    if not word:
        return "x"
    i = rng.randrange(len(word))
    op = rng.randrange(5)
    if op == 0:
        return word[:i] + word[i + 1:]
    if op == 1:
        return word[:i] + rng.choice("abcdefghijklmnopqrstuvwxyz_.-") + word[i:]
    if op == 2 and len(word) > 1:
        j = min(i + 1, len(word) - 1)
        return word[:i] + word[j] + word[i] + word[j + 1:]
    if op == 3:
        return word.upper()
    return word + rng.choice(["s", "_", " ", "2"])


def _paths(x: Any, at: tuple = ()) -> list[tuple]:
    """Every path to a node of a plain tree."""
    out = [at]
    if isinstance(x, dict):
        for k, v in x.items():
            out += _paths(v, (*at, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out += _paths(v, (*at, i))
    return out


def _get(x: Any, path: tuple) -> Any:
    for p in path:
        x = x[p]
    return x


def _nested(rng: random.Random, depth: int) -> Any:
    v: Any = rng.choice(["x", 1, None])
    for _ in range(depth):
        v = [v] if rng.random() < 0.5 else {"k": v}
    return v


def _value(rng: random.Random, tree: Any) -> Any:
    r = rng.random()
    if r < 0.6:
        return rng.choice(_VALUES)
    if r < 0.75:  # a value from elsewhere in the document: right shape, wrong place
        return copy.deepcopy(_get(tree, rng.choice(_paths(tree))))  # a copy: no cycles
    if r < 0.85:
        return _nested(rng, rng.choice([3, 30, 60]))  # deeper: the text op deep-nesting
    if r < 0.95:
        return rng.choice(["x", "A", "9"]) * rng.choice([100, 10_000, 1_000_000])
    return [rng.choice(_VALUES)] * rng.choice([100, 10_000])


def mutate_tree(rng: random.Random, tree: Any) -> tuple[Any, str]:
    """One structural change to a plain tree (in place where possible): the tree and
    what was done."""
    path = rng.choice(_paths(tree))
    if not path:
        return _value(rng, tree), "replace-document"
    parent, key = _get(tree, path[:-1]), path[-1]
    op = rng.choice(["delete", "misspell-key", "replace", "replace", "wrap", "repeat",
                     "add-key", "swap-type"])
    if op == "delete":
        del parent[key]
    elif op == "misspell-key" and isinstance(parent, dict):
        parent[_misspell(rng, str(key))] = parent.pop(key)
    elif op == "wrap":
        parent[key] = [parent[key]] if rng.random() < 0.5 else {str(key): parent[key]}
    elif op == "repeat" and isinstance(parent, list):
        parent[key:key + 1] = [parent[key]] * rng.choice([2, 3, 50, 1000])
    elif op == "add-key" and isinstance(parent, dict):
        parent[rng.choice([_misspell(rng, str(key)), "extra", "x", "1"])] = _value(rng, tree)
    elif op == "swap-type":
        v = parent[key]
        parent[key] = (str(v) if not isinstance(v, str) else
                       int(v) if v.isdigit() else [v] if rng.random() < 0.5 else None)
    else:
        parent[key] = _value(rng, tree)
        op = "replace"
    return tree, f"{op} {'/'.join(map(str, path))}"


def alias_bomb(rng: random.Random) -> bytes:
    """Nested YAML aliases (`&a [*b, *b, ...]`): width**depth nodes in a few lines."""
    width, depth = rng.randint(2, 9), rng.randint(2, 9)
    lines = ["b0: &b0 [x]"]
    for i in range(1, depth + 1):
        lines.append(f"b{i}: &b{i} [{', '.join([f'*b{i - 1}'] * width)}]")
    return ("\n".join(lines) + "\n").encode()


def mutate_bytes(rng: random.Random, raw: bytes) -> tuple[bytes, str]:
    """One textual change to a file's bytes: the bytes and what was done."""
    lines = raw.split(b"\n")
    op = rng.choice(["flip-byte", "bad-bytes", "cut-lines", "repeat-line", "swap-lines",
                     "truncate", "indent", "yaml-bit", "misspell-word", "deep-nesting",
                     "alias", "alias-bomb", "utf16", "crlf"])
    n = len(lines)
    if op == "flip-byte" and raw:
        i = rng.randrange(len(raw))
        return raw[:i] + bytes([rng.randrange(256)]) + raw[i + 1:], op
    if op == "bad-bytes":
        i = rng.randrange(len(raw) + 1)
        return raw[:i] + rng.choice(_BAD_BYTES) + raw[i:], op
    if op == "cut-lines":
        i = rng.randrange(n)
        j = min(n, i + rng.choice([1, 1, 2, 5, n]))
        return b"\n".join(lines[:i] + lines[j:]), op
    if op == "repeat-line":
        i = rng.randrange(n)
        return b"\n".join(lines[:i] + [lines[i]] * rng.choice([2, 3, 100]) + lines[i:]), op
    if op == "swap-lines" and n > 1:
        i, j = rng.randrange(n), rng.randrange(n)
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines), op
    if op == "truncate" and raw:
        return raw[:rng.randrange(len(raw))], op
    if op == "indent":
        i = rng.randrange(n)
        lines[i] = (b" " * rng.choice([1, 2, 4]) + lines[i] if rng.random() < 0.5
                    else lines[i].lstrip())
        return b"\n".join(lines), op
    if op == "yaml-bit":
        i = rng.randrange(len(raw) + 1)
        return raw[:i] + rng.choice(_YAML_BITS).encode() + raw[i:], op
    if op == "misspell-word":
        words = list(re.finditer(rb"[A-Za-z_.]{2,}", raw))
        if words:
            m = rng.choice(words)
            word = _misspell(rng, m.group().decode()).encode()
            return raw[:m.start()] + word + raw[m.end():], op
    if op == "deep-nesting":
        d = rng.choice([50, 500, 5000, 50_000])
        i = rng.randrange(n)
        lines.insert(i, b"deep: " + b"[" * d + b"]" * d)
        return b"\n".join(lines), f"{op} {d}"
    if op == "alias":
        # Anchor one value and use it elsewhere: legal YAML, a shared node.
        vals = [i for i, x in enumerate(lines) if re.match(rb"^\s*[\w.]+: \S", x)]
        if len(vals) >= 2:
            a, b = rng.sample(vals, 2)
            lines[a] = re.sub(rb": ", b": &a ", lines[a], count=1)
            lines[b] = re.sub(rb": .*$", b": *a", lines[b], count=1)
            return b"\n".join(lines), op
    if op == "alias-bomb":
        return alias_bomb(rng) + raw, op
    if op == "utf16":
        return raw.decode("utf-8", "replace").encode("utf-16"), op
    if op == "crlf":
        return raw.replace(b"\n", b"\r\n"), op
    return raw + b"\n" + rng.choice(_BAD_BYTES), "bad-bytes"


def mutate_yaml(rng: random.Random, raw: bytes) -> tuple[bytes, str]:
    """A YAML file mutated: structural changes (parsed, changed, dumped again) or
    textual ones, or both."""
    steps = []
    if rng.random() < 0.6:
        tree = _plain(load_yaml_bytes(raw))
        for _ in range(rng.randint(1, 3)):
            tree, what = mutate_tree(rng, tree)
            steps.append(what)
        try:
            raw = yaml.safe_dump(tree, sort_keys=False, allow_unicode=True,
                                 width=1 << 20).encode()
        except RecursionError:  # nested values nested again: too deep for the dumper
            return mutate_bytes(rng, raw)
        if rng.random() < 0.7:
            return raw, ", ".join(steps)
    for _ in range(rng.randint(1, 2)):
        raw, what = mutate_bytes(rng, raw)
        steps.append(what)
    return raw, ", ".join(steps)


def load_yaml_bytes(raw: bytes) -> Any:
    """A seed file's tree, read with isrlab's own loader (no floats: `0.10` stays a string)."""
    with tempfile.NamedTemporaryFile(suffix=".yaml") as f:
        f.write(raw)
        f.flush()
        return load_yaml(Path(f.name))


def mutate_json(rng: random.Random, raw: bytes) -> tuple[bytes, str]:
    """A JSON file (run.json, state.json) mutated structurally or textually."""
    if rng.random() < 0.6:
        try:
            tree = json.loads(raw)
        except ValueError:
            return mutate_bytes(rng, raw)
        tree, what = mutate_tree(rng, tree)
        return json.dumps(tree, indent=1).encode(), what
    return mutate_bytes(rng, raw)


def mutate_jsonl(rng: random.Random, raw: bytes) -> tuple[bytes, str]:
    """A JSON-lines file (history, events, a replica's log): one line changed
    structurally, or the file textually (a torn last line among them)."""
    lines = raw.split(b"\n")
    full = [i for i, x in enumerate(lines) if x.strip()]
    r = rng.random()
    if r < 0.5 and full:
        i = rng.choice(full)
        try:
            tree, what = mutate_tree(rng, json.loads(lines[i]))
            lines[i] = json.dumps(tree, separators=(",", ":")).encode()
            return b"\n".join(lines), f"line {i + 1}: {what}"
        except ValueError:
            pass
    if r < 0.6 and full:
        i = rng.choice(full)
        lines[i] = rng.choice([b"null", b"[]", b"1", b'"x"', b"{", b"{}", b"\xff",
                               b'{"type":"invoke"}', b"{" * 100_000])
        return b"\n".join(lines), f"line {i + 1} replaced"
    if r < 0.7 and raw.endswith(b"\n"):
        return raw[:-rng.randint(1, min(40, len(raw)))], "torn last line"
    return mutate_bytes(rng, raw)


# -- targets ---------------------------------------------------------------------------


@dataclass
class Target:
    """A fuzz target: its seeds, how an input is made from one, and what runs on it
    in the child (which returns OK or a classified error; exceptions are classified
    by the child)."""

    name: str
    make: Callable[[random.Random], Input]
    call: Callable[[Path, Input], Result]
    setup: Callable[[Path], None] = lambda _work: None  # files every input starts from
    mem_mb: int = MEM_MB


def _seed_files(paths: list[Path]) -> list[tuple[str, bytes]]:
    return [(str(p.relative_to(ROOT)), p.read_bytes()) for p in paths]


def _file_target(name: str, file: str, seeds: list[tuple[str, bytes]],
                 load: Callable[[Path], Any], setup: Callable[[Path], None] = lambda _w: None
                 ) -> Target:
    """A target that loads one YAML file: seeds mutated by mutate_yaml."""

    def make(rng: random.Random) -> Input:
        origin, raw = rng.choice(seeds)
        data, what = mutate_yaml(rng, raw)
        return Input(f"{origin}: {what}", {file: data})

    def call(work: Path, _inp: Input) -> Result:
        path = Path(file)
        try:
            load(path)
        except Exception as e:  # noqa: BLE001 - classified
            return classify_error(e, path)
        return Result(OK)

    return Target(name, make, call, setup)


def _load_scenario_as_reproduce(path: Path) -> None:
    """What `reproduce` does with a scenario before it starts anything, and what
    the runner then asks of it under every version its path exists in."""
    from contract import PROTOCOLS

    scenario = load_scenario(find_scenario(str(path)))
    for variant in scenario.variants or [None]:
        s = load_scenario(path, variant)
        for protocol in PROTOCOLS:
            if s.unreachable(protocol) is None:
                s.expect_for(protocol)
                s.cluster_spec(protocol)
                for step in s.steps_for(protocol):
                    step.as_dict()
                s.assertions_for(protocol)


HOSTS_SEED = b"""\
defaults:
  user: kafka
  key: id_test
  known_hosts: known_hosts
  sudo: true
  connect_timeout: 5
controller: {address: 10.0.0.10, ssh_port: 2222}
brokers:
  - {address: 10.0.0.11}
  - {address: 10.0.0.12, port: 9093, name: b2}
  - {address: 10.0.0.13, workdir: /srv/isrlab, host_key_check: accept-new}
"""


def _hosts_setup(work: Path) -> None:
    (work / "id_test").write_text("a key file (not read by the loader)\n")
    (work / "known_hosts").write_text("")


NIGHTLY_SEED = b"""\
seed: 7
defaults:
  time_limit: 30s
  runs: 2
  rate: 500
matrix:
  - name: soundness
    versions: [latest, "4.0"]
    faults: ["kill,power-cycle", "pause:leader,partition:minority"]
    acks: [all, 1]
    backends: [local, sim]
    sets:
      misr2: {min.insync.replicas: 2, unclean.leader.election.enable: false}
    interval: 2.5
    duration: 1
    overlap: 0.5
    producers: 2
    partitions: 2
    allow: {latest: [], "4.0": [duplicate]}
"""


# The run directory: one made by a sim run, copied into the child's directory.
_RUN_SEED: dict[str, Path] = {}
RUN = "run"


def seed_run() -> Path:
    """A small real run directory, made once per process by a sim run."""
    if "path" not in _RUN_SEED:
        from harness.progress import Progress
        from harness.run.runner import RunOptions, run_scenario

        root = Path(tempfile.mkdtemp(prefix="isrlab-fuzz-seed-"))
        scenario = load_scenario(find_scenario("kip279-unclean-divergence"))
        record = run_scenario(scenario, RunOptions(protocol="0.11", backend="sim", seed=1,
                                                   runs_dir=root),
                              Progress(io.StringIO(), quiet=True))
        if record.error is not None:
            raise RuntimeError(f"the seed run failed: {record.error}")
        _RUN_SEED["path"] = record.run_dir
    return _RUN_SEED["path"]


def cleanup() -> None:
    """Remove the seed run's directory."""
    path = _RUN_SEED.pop("path", None)
    if path is not None:
        shutil.rmtree(path.parent, ignore_errors=True)


def _copy_run(work: Path) -> None:
    shutil.copytree(seed_run(), work / RUN)


def _make_rundir(rng: random.Random) -> Input:
    seed = seed_run()
    files = sorted(str(p.relative_to(seed)) for p in seed.rglob("*") if p.is_file())
    changes: dict[str, bytes | None | tuple] = {}
    steps = []
    for _ in range(rng.randint(1, 2)):
        rel = rng.choice(["run.json", "run.json", "history.jsonl", "history.jsonl",
                          "events.jsonl", *files])
        raw = changes.get(rel)
        raw = raw if isinstance(raw, bytes) else (seed / rel).read_bytes()
        r = rng.random()
        if r < 0.05:
            changes[f"{RUN}/{rel}"] = None
            steps.append(f"{rel}: removed")
            continue
        if r < 0.08:
            changes[f"{RUN}/{rel}"] = ()
            steps.append(f"{rel}: a directory")
            continue
        if r < 0.12 and rel == "run.json":  # a run left running: whose owner?
            meta = json.loads(raw)
            meta["status"] = RUNNING
            meta["owner"] = rng.choice([meta.get("owner"), None, {"host": "x", "pid": 1},
                                        {**(meta.get("owner") or {}), "pid": 2 ** 70},
                                        {**(meta.get("owner") or {}), "pid": 1},
                                        {**(meta.get("owner") or {}), "pid": -3}])
            data, what = json.dumps(meta).encode(), "status running"
        elif rel.endswith(".jsonl"):
            data, what = mutate_jsonl(rng, raw)
        else:
            data, what = mutate_json(rng, raw)
        changes[f"{RUN}/{rel}"] = data
        steps.append(f"{rel}: {what}")
    return Input("; ".join(steps), changes)


def _read_rundir(work: Path, _inp: Input) -> Result:
    """What `check` reads of a run before Spark (discover, the status and owner of
    a run left running, checker.rundir.read_rundir), and the readers export, the
    figure assertions and the report use. Each reader may refuse the run with a
    clean error; the next is still tried."""
    run = work / RUN
    readers: list[Callable[[], Any]] = [
        lambda: discover([run]),
        lambda: run_status(run),
        lambda: owner_gone(run, read_meta(run)) if run_status(run) == RUNNING else None,
        lambda: read_rundir(run),
        lambda: read_history(run),
        lambda: read_events(run),
    ]
    replicas = run / "replicas"
    for b in sorted(p.name for p in replicas.iterdir()) if replicas.is_dir() else []:
        readers += [lambda b=b: read_log(run, b), lambda b=b: read_state(run, b)]
    worst = Result(OK)
    for read in readers:
        try:
            read()
        except Exception as e:  # noqa: BLE001 - classified
            r = classify_error(e, None)
            if r.outcome != ERROR:
                return r
            worst = r
    return worst


# The command line: a working argv per command, in a directory holding a
# scenario, a hosts file, a nightly config and a run directory to name.
CLI_SEEDS: list[list[str]] = [
    ["scenarios"],
    ["reproduce", "kip101-hw-truncation-loss", "--protocol", "0.10", "--backend", "sim",
     "--seed", "1", "--runs-dir", "runs", "--quiet"],
    ["reproduce", "scenario.yaml", "--protocol", "latest", "--runs", "2", "--port", "29000"],
    ["reproduce", "scenario.yaml", "--protocol", "2.0", "--backend", "ssh", "--hosts",
     "hosts.yaml", "--all-variants", "--json"],
    ["reproduce", "acks1-failover-loss", "--protocol", "0.11", "--variant", "acks-1",
     "--backend", "docker", "--base-image", "python:3.11-slim"],
    ["reproduce", "hw-lags-one-fetch", "--protocol", "4.1", "--backend", "sim",
     "--net-loss", "0.1", "--net-duplicate", "0.05"],
    ["check", RUN, "--no-report", "--junit", "out/junit.xml", "--master", "local[2]"],
    ["check", ".", "--results", "results", "--index", "index.html", "--json", "--no-server"],
    ["collect", RUN],
    ["docker", "build"], ["docker", "clean"],
    ["chaos", "--protocol", "latest", "--time-limit", "10s", "--backend", "sim",
     "--faults", "kill,partition:minority", "--acks", "1", "--set", "min.insync.replicas=2",
     "--runs", "2", "--seed", "3", "--runs-dir", "runs"],
    ["chaos", "--protocol", "0.10", "--time-limit", "1m30s", "--faults", "pause:leader",
     "--master", "spark://127.0.0.1:1"],
    ["export", RUN, "--out", "exported.yaml"],
    ["nightly", "night.yaml", "--results", "results", "--quiet"],
    ["matrix", "--backend", "sim", "--runs", "2", "--scenario", "hw-lags-one-fetch",
     "--protocol", "2.0", "--jobs", "2", "--seed", "5"],
    ["checker", "status"], ["checker", "stop"], ["checker", "start"], ["checker", "setup"],
    ["ssh", "check", "--hosts", "hosts.yaml"], ["ssh", "clean", "--hosts", "hosts.yaml"],
    ["ssh", "hosts", "up", "3", "--out", "h.yaml"], ["ssh", "hosts", "down"],
    ["swarm", "--protocol", "latest", "--runs", "3", "--seed", "1", "--time-limit", "20s",
     "--rate", "100", "--runs-dir", "runs", "--master", "local[1]"],
    ["trace", "hw-lags-one-fetch", "--protocol", "latest", "--topic", "t", "--partition", "0"],
    ["shrink", RUN, "--kind", "lost-write", "--out", "shrunk.yaml", "--quiet"],
]
# No NUL: a command line cannot hold one (exec's strings end there).
_ARG_VALUES = ["", "-", "--", "-1", "0", "1", "2", "65536", "2.5", "nan", "inf", "1e309",
               "99999999999999999999", "x", "x" * 10_000, "💥", "a\nb", "\udcff",
               "1h2", "99999999999999s", "0s", "-5s", "1m30s", "10", "local[abc]", "local[*]",
               "spark://127.0.0.1:1", "spark://", "kill", "kill:leader", "kill,partition:all",
               "nosuch:one", "min.insync.replicas=2", "=", "a=b=c", "min.insync.replicas=x",
               "latest", "0.10", "9.9", "sim", "local", "docker", "ssh", "lost-write",
               "scenario.yaml", "hosts.yaml", "night.yaml", RUN, f"{RUN}/run.json", "runs",
               ".", "/", "..", "/dev/null", "/dev/zero", "/nonexistent", "out/x", "nosuch.yaml",
               "kip101-hw-truncation-loss", "hw-lags-one-fetch", "t", "A", "3"]


def _subparsers(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


def _generated_argv(rng: random.Random) -> list[str]:
    """An argv drawn from the parser itself: a command (and subcommand), some of its
    options with values right or wrong, its positionals."""
    p, argv = cli.build_parser(), []
    while subs := _subparsers(p):
        name = rng.choice(sorted(subs))
        argv.append(name)
        p = subs[name]
    actions = [a for a in p._actions if not isinstance(a, argparse._HelpAction)]
    for a in actions:
        if a.option_strings and rng.random() > (0.9 if a.required else 0.3):
            continue
        if a.option_strings:
            argv.append(rng.choice(a.option_strings))
        count = 0 if a.nargs == 0 else 2 if a.nargs in ("+", "*") and rng.random() < 0.3 else 1
        for _ in range(count):
            if a.choices and rng.random() < 0.8:
                argv.append(str(rng.choice(list(a.choices))))
            else:
                argv.append(rng.choice(_ARG_VALUES))
    return argv


def _mutated_argv(rng: random.Random) -> list[str]:
    argv = list(rng.choice(CLI_SEEDS))
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(argv) + 1)
        op = rng.randrange(6)
        if op == 0 and i < len(argv):
            del argv[i]
        elif op == 1 and i < len(argv):
            argv[i] = rng.choice(_ARG_VALUES)
        elif op == 2 and i < len(argv):
            argv[i] = _misspell(rng, argv[i])
        elif op == 3 and i < len(argv):
            argv.insert(i, argv[i])
        elif op == 4:
            argv[i:i] = _generated_argv(rng)[1:3]
        else:
            argv.insert(i, rng.choice(_ARG_VALUES))
    return argv


def _make_cli(rng: random.Random) -> Input:
    seed_run()  # made here, in the parent, not in every child
    if rng.random() < 0.5:
        return Input("generated", argv=_generated_argv(rng))
    return Input("mutated", argv=_mutated_argv(rng))


def _cli_setup(work: Path) -> None:
    shutil.copy(SCENARIO_DIR / "kip101-hw-truncation-loss.yaml", work / "scenario.yaml")
    (work / "hosts.yaml").write_bytes(HOSTS_SEED)
    _hosts_setup(work)
    (work / "night.yaml").write_bytes(NIGHTLY_SEED)
    _copy_run(work)


def _run_cli(work: Path, inp: Input) -> Result:
    """`isrlab ARGV` in the child: exit 0, or 2 with one `isrlab: ...` line on stderr
    (any status the command documents, with at most one line, is fine too)."""
    assert inp.argv is not None
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(list(inp.argv))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    except Stopped:
        raise
    except Exception as e:  # noqa: BLE001 - classified
        return classify_error(e, None)
    # Progress lines (`[   1.23s] ...`, on stderr under --json) are not errors.
    lines = [x for x in err.getvalue().splitlines() if x.strip() and not x.startswith("[")]
    if code == 0 and not lines:
        return Result(OK)
    if code == 2 and len(lines) == 1 and lines[0].startswith("isrlab: "):
        return Result(ERROR, lines[0][:300])
    if code != 2 and len(lines) <= 1:
        return Result(OK, f"exit {code}: {lines[0][:200] if lines else ''}")
    return Result(TRACEBACK, f"exit {code} with {len(lines)} stderr line(s): "
                             f"{' | '.join(lines)[:300]}")


# Every command's output paths: each given a path that cannot be written -- a
# file where a directory must be, a path under a file, a name too long, a directory
# where a file must be, /dev/null's inside -- must be one `isrlab:` line, exit 2.
OUTPUT_OPTIONS = ("--runs-dir", "--results", "--junit", "--index", "--out")
_BAD_OUTPUTS = ["afile", "afile/under", "afile/under/more", "x" * 300, "runs/" + "y" * 300,
                "/dev/null/x", ".", "adir", "/proc/1/x", "afile/"]


def _make_outputs(rng: random.Random) -> Input:
    seed_run()
    seeds = [a for a in CLI_SEEDS if any(o in a for o in OUTPUT_OPTIONS)]
    argv = list(rng.choice(seeds))
    at = [i for i, x in enumerate(argv) if x in OUTPUT_OPTIONS]
    i = rng.choice(at)
    argv[i + 1] = rng.choice(_BAD_OUTPUTS)
    return Input(f"{argv[0]} {argv[i]}", argv=argv)


def _outputs_setup(work: Path) -> None:
    _cli_setup(work)
    (work / "afile").write_text("")
    (work / "adir").mkdir()


def targets() -> dict[str, Target]:
    scenario_seeds = _seed_files(sorted(SCENARIO_DIR.glob("*.yaml"))
                                 + sorted((ROOT / "tests" / "data").glob("*.yaml")))
    return {
        "scenario": _file_target("scenario", "scenario.yaml", scenario_seeds,
                                 _load_scenario_as_reproduce),
        "nightly": _file_target("nightly", "night.yaml",
                                [*_seed_files([ROOT / "nightly" / "sample.yaml"]),
                                 ("bench/fuzz.py NIGHTLY_SEED", NIGHTLY_SEED)], load_config),
        "hosts": _file_target("hosts", "hosts.yaml", [("docs/ssh.md", HOSTS_SEED)],
                              load_hosts, _hosts_setup),
        "rundir": Target("rundir", _make_rundir, _read_rundir, _copy_run),
        "cli": Target("cli", _make_cli, _run_cli, _cli_setup),
        "outputs": Target("outputs", _make_outputs, _run_cli, _outputs_setup),
    }


# -- the bench ---------------------------------------------------------------------------


@dataclass
class Tally:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    peak_kib: int = 0
    failures: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # key -> n, ex, input

    def add(self, inp: Input, r: Result) -> None:
        self.counts[r.outcome] += 1
        self.peak_kib = max(self.peak_kib, r.peak_kib)
        if r.outcome not in ALLOWED:
            what = "" if r.outcome in (HANG, MEMORY) else f": {r.detail.split(':')[0]}"
            key = f"{r.outcome}{what} at {r.where or '?'}"
            n, detail, example = self.failures.get(key, (0, r.detail, inp.describe()))
            self.failures[key] = (n + 1, detail, example)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--inputs", type=int, default=1000, help="inputs per target")
    p.add_argument("--target", action="append", choices=sorted(targets()),
                   help="only these targets (repeatable; default: all)")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per input")
    p.add_argument("--show", type=int, default=3,
                   help="print this many distinct failures per target, with an input")
    args = p.parse_args(argv)
    all_targets = targets()
    chosen = args.target or list(all_targets)
    print(f"{'target':9} {'inputs':>6} {'ok':>6} {'errors':>6} {'tracebacks':>10} "
          f"{'hangs':>5} {'memory':>6} {'peak MiB':>8} {'s':>6}")
    bad = 0
    try:
        for name in chosen:
            target, tally = all_targets[name], Tally()
            t0 = time.monotonic()
            for i in range(args.inputs):
                inp = target.make(random.Random(f"{args.seed}:{name}:{i}"))
                tally.add(inp, run_input(target, inp, args.timeout))
            c = tally.counts
            print(f"{name:9} {args.inputs:6} {c[OK]:6} {c[ERROR]:6} {c[TRACEBACK]:10} "
                  f"{c[HANG]:5} {c[MEMORY]:6} {tally.peak_kib / 1024:8.1f} "
                  f"{time.monotonic() - t0:6.1f}", flush=True)
            for key, (n, detail, example) in sorted(tally.failures.items(),
                                                    key=lambda kv: -kv[1][0])[:args.show]:
                print(f"  {n} x {key}\n    {detail[:200]}\n    input: {example[:300]}")
            bad += len(tally.failures)
    finally:
        cleanup()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
