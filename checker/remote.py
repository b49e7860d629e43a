"""What the warm checker server and its clients share: where the server lives, the
checker version it must match, and how a check's results and errors cross the
socket (one JSON object per line).

A server answers only clients of its own version (checker_version): the hash of
the checker's code, the contract it reads, the Spark and Python it runs on. A
client of another version (an upgrade, an edited checker) stops it and starts
its own, so a warm server never serves a stale checker.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from checker.errors import CheckerError, JavaNotFoundError, SparkMasterError
from checker.verdict import RunResult
from contract.rundir import RunDirError

ROOT = Path(__file__).resolve().parent.parent
# The code a check runs: the checker and the vocabulary it reads run directories with.
_SOURCES = ("checker", "contract", "broker/protocol.py", "broker/config.py")

IDLE_TIMEOUT_S = 600.0  # a server unused for ten minutes exits (and frees its JVM)


def idle_timeout() -> float:
    """IDLE_TIMEOUT_S, or ISRLAB_CHECKER_IDLE_S seconds."""
    try:
        return float(os.environ.get("ISRLAB_CHECKER_IDLE_S") or IDLE_TIMEOUT_S)
    except ValueError:
        return IDLE_TIMEOUT_S


def state_dir() -> Path:
    """The server's socket, state file and log: one server per user
    (ISRLAB_CHECKER_DIR overrides, e.g. for tests)."""
    env = os.environ.get("ISRLAB_CHECKER_DIR")
    return Path(env) if env else Path(tempfile.gettempdir()) / f"isrlab-checker-{os.getuid()}"


def socket_path() -> Path:
    return state_dir() / "server.sock"


def info_path() -> Path:
    return state_dir() / "server.json"


def log_path() -> Path:
    return state_dir() / "server.log"


@cache
def checker_version() -> str:
    """A short hash of everything a check's answer depends on."""
    import pyspark

    h = hashlib.sha256()
    for rel in _SOURCES:
        base = ROOT / rel
        files = sorted(base.rglob("*.py")) if base.is_dir() else [base]
        for f in files:
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    # The environment, not the interpreter's name: `isrlab` (python3) and
    # `python -m harness.cli` must share a server, where sys.executable differs.
    h.update(f"pyspark {pyspark.__version__} python {sys.version} {sys.prefix}".encode())
    # Anything else that must not share a server (tests use it to play an upgrade).
    h.update(os.environ.get("ISRLAB_CHECKER_VERSION_SALT", "").encode())
    return h.hexdigest()[:16]


def send(wfile: Any, obj: dict[str, Any]) -> None:
    wfile.write((json.dumps(obj, default=str) + "\n").encode())
    wfile.flush()


def receive(rfile: Any) -> dict[str, Any] | None:
    """The next message, None at end of stream."""
    line = rfile.readline()
    if not line:
        return None
    return json.loads(line)


def result_to_wire(r: Any) -> dict[str, Any]:
    """A checker.verdict.RunResult as JSON-able data."""
    d = {k: getattr(r, k) for k in r.__dataclass_fields__ if k != "error"}
    d["run_dir"] = str(r.run_dir)
    d["error"] = error_to_wire(r.error) if r.error is not None else None
    return d


def result_from_wire(d: dict[str, Any]) -> RunResult:
    d = dict(d)
    d["run_dir"] = Path(d["run_dir"])
    err = d.pop("error", None)
    return RunResult(**d, error=error_from_wire(err) if err else None)  # type: ignore[arg-type]


_ERRORS: dict[str, type[CheckerError]] = {
    c.__name__: c for c in (CheckerError, SparkMasterError, JavaNotFoundError)
}


def error_to_wire(e: BaseException) -> dict[str, Any]:
    if isinstance(e, RunDirError):
        return {"type": "RunDirError", "run": e.run, "file": e.file, "line": e.line,
                "message": e.message}
    name = type(e).__name__ if type(e).__name__ in _ERRORS else "CheckerError"
    return {"type": name, "message": str(e)}


def error_from_wire(d: dict[str, Any]) -> CheckerError | RunDirError:
    if d.get("type") == "RunDirError":
        return RunDirError(d["run"], d.get("file"), d["message"], d.get("line"))
    return _ERRORS.get(d.get("type", ""), CheckerError)(d["message"])
