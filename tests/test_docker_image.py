"""The broker image: built from nothing, cached by content hash, runnable, no leftovers.

Tests marked `docker` need a Docker engine. Without one they skip, unless
ISRLAB_REQUIRE_DOCKER=1 (CI), where a missing engine is a failure: a CI run that
silently skipped every Docker test would prove nothing.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import docker.api.client
import docker.client
import docker.errors
import pytest
from conftest import docker_or_skip

from harness.backends import docker_image
from harness.backends.docker_image import (
    DockerUnavailable,
    ImageBuildError,
    clean_leftovers,
    ensure_images,
    run_labels,
)

RUN_ID = f"test-{uuid.uuid4().hex[:8]}"



@pytest.fixture(scope="module")
def client():
    c = docker_or_skip()
    yield c
    # Nothing this module started may survive it.
    label = {"label": f"isrlab.run={RUN_ID}"}
    left = (
        [x.name for x in c.containers.list(all=True, filters=label)]
        + [x.name for x in c.networks.list(filters=label)]
        + [x.name for x in c.volumes.list(filters=label)]
    )
    c.close()
    assert left == [], f"left behind: {left}"


@pytest.fixture(scope="module")
def broker_image(client) -> str:
    lines: list[str] = []
    tag = ensure_images(progress=lines.append)
    assert client.images.get(tag)
    return tag


# ------------------------------------------------------------ with an engine


@pytest.mark.docker
def test_image_builds_and_is_labelled(client, broker_image):
    image = client.images.get(broker_image)
    assert broker_image.startswith("isrlab-broker:")
    assert image.labels["isrlab.image"] == "broker"
    base = image.labels["isrlab.base"]
    assert client.images.get(base).labels["isrlab.image"] == "base"
    # The build's intermediate containers are gone too.
    assert client.containers.list(all=True, filters={"ancestor": broker_image}) == []


@pytest.mark.docker
def test_second_call_is_a_cache_hit(client, broker_image, monkeypatch):
    base = client.images.get(broker_image).labels["isrlab.base"]
    ids = {t: client.images.get(t).id for t in (broker_image, base)}

    def must_not_build(*args, **kwargs):
        raise AssertionError("an image was rebuilt although nothing changed")

    monkeypatch.setattr(docker_image, "_run_build_script", must_not_build)
    monkeypatch.setattr(docker.api.client.APIClient, "build", must_not_build)
    monkeypatch.setattr(docker.api.client.APIClient, "import_image", must_not_build)
    lines: list[str] = []
    assert ensure_images(progress=lines.append) == broker_image
    assert lines == []  # nothing to report when nothing is built
    assert {t: client.images.get(t).id for t in ids} == ids


@pytest.mark.docker
def test_container_runs_python3_and_imports_broker(client, broker_image):
    script = (
        "import shutil, sys, broker.wire\n"
        "print(sys.version_info[:2], shutil.which('iptables') is not None)\n"
    )
    container = client.containers.run(
        broker_image, ["-c", script], labels=run_labels(RUN_ID), detach=True
    )
    try:
        assert container.wait(timeout=60)["StatusCode"] == 0, container.logs().decode()
        assert container.logs().decode().split() == ["(3,", "11)", "True"]
    finally:
        container.remove(force=True)


@pytest.mark.docker
def test_explicit_base_image_is_used_as_build_arg(client, broker_image):
    # Stands in for `--base-image python:3.11-slim` where no registry is reachable:
    # any local image works, and the broker image is keyed by that base's id.
    base = client.images.get(broker_image).labels["isrlab.base"]
    tag = ensure_images(base_image=base, quiet=True)
    assert tag == broker_image


@pytest.mark.docker
def test_unpullable_base_image_is_a_one_line_error(client):
    with pytest.raises(ImageBuildError) as err:
        ensure_images(base_image=f"isrlab-no-such-image:{RUN_ID}", quiet=True)
    assert "could not be pulled" in str(err.value) and "\n" not in str(err.value)
    assert err.value.exit_code == 3


@pytest.mark.docker
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("debootstrap"), reason="needs root")
def test_debootstrap_failure_names_the_step(client, monkeypatch):
    # A mirror nobody listens on: a new recipe hash, so no cached base hides the failure.
    monkeypatch.setenv(docker_image.MIRROR_ENV, "http://127.0.0.1:9/debian")
    with pytest.raises(ImageBuildError) as err:
        docker_image.ensure_base_image(client, quiet=True)
    assert "step 'debootstrap'" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.docker
def test_broken_broker_source_fails_the_build_naming_the_step(client, broker_image, tmp_path,
                                                              monkeypatch):
    broken = tmp_path / "broker"
    broken.mkdir()
    (broken / "__init__.py").write_text("")
    (broken / "oops.py").write_text("def f(:\n")
    monkeypatch.setattr(docker_image, "BROKER_DIR", broken)
    containers = {c.id for c in client.containers.list(all=True)}
    with pytest.raises(ImageBuildError) as err:
        ensure_images(quiet=True)
    msg = str(err.value)
    assert "compileall" in msg and "oops.py" in msg and "\n" not in msg
    # forcerm: the failed step's container is gone too.
    assert {c.id for c in client.containers.list(all=True)} <= containers


@pytest.mark.docker
def test_prune_keeps_the_current_broker_image(client, broker_image):
    client.images.get(broker_image).tag("isrlab-broker", "stale0000000")
    removed = docker_image.prune_images(client=client)
    assert "isrlab-broker:stale0000000" in removed
    assert broker_image not in removed
    assert client.images.get(broker_image)


@pytest.mark.docker
def test_clean_leftovers_removes_labelled_objects(client, broker_image):
    run_id = f"{RUN_ID}-clean"
    labels = run_labels(run_id)
    net = client.networks.create(f"isrlab-{run_id}", labels=labels)
    vol = client.volumes.create(f"isrlab-{run_id}-A", labels=labels)
    box = client.containers.create(
        broker_image, ["-c", "import time; time.sleep(60)"], labels=labels,
        network=net.name, volumes={vol.name: {"bind": "/data", "mode": "rw"}},
    )
    box.start()
    box.pause()  # paused containers must be removable too
    assert clean_leftovers(run_id=run_id) == {"containers": 1, "networks": 1, "volumes": 1}
    for getter, name in (
        (client.containers.get, box.id),
        (client.networks.get, net.id),
        (client.volumes.get, vol.name),
    ):
        with pytest.raises(docker.errors.NotFound):
            getter(name)


# ------------------------------------------------------------ no engine needed


def test_no_engine_is_docker_unavailable(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DockerUnavailable) as err:
        ensure_images(quiet=True)
    assert err.value.exit_code == 2
    assert "\n" not in str(err.value)


def test_broker_tag_follows_sources_and_base():
    files = [("Dockerfile", b"FROM x\n"), ("broker/a.py", b"x = 1\n")]
    tag = docker_image.broker_tag(files, "sha256:base1")
    assert tag == docker_image.broker_tag(list(files), "sha256:base1")
    assert tag != docker_image.broker_tag(files, "sha256:base2")
    assert tag != docker_image.broker_tag([files[0], ("broker/a.py", b"x = 2\n")], "sha256:base1")
    assert tag != docker_image.broker_tag([*files, ("broker/b.py", b"")], "sha256:base1")


def test_context_holds_only_dockerfile_and_broker_sources():
    names = [name for name, _ in docker_image._broker_files()]
    assert names[0] == "Dockerfile"
    assert all(n.startswith("broker/") for n in names[1:])
    assert "broker/wire.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def test_base_tag_follows_recipe():
    recipe = docker_image.base_recipe("http://mirror.example/debian")
    tag = docker_image.base_tag(recipe)
    assert tag.startswith("isrlab-base:") and len(tag.split(":")[1]) == 12
    assert tag == docker_image.base_tag(dict(recipe))
    for key, value in (("suite", "trixie"), ("include", "python3"), ("script", "0" * 64)):
        assert docker_image.base_tag({**recipe, key: value}) != tag


def test_mirror_from_deb822_and_one_line_sources(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(docker_image.MIRROR_ENV, raising=False)
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "security.sources").write_text(
        "Types: deb\nURIs: http://sec.example/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n"
    )
    (d / "debian.sources").write_text(
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
        "Types: deb\n# a comment\nURIs: http://main.example/debian/\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    monkeypatch.setattr(docker_image, "APT_SOURCES", (tmp_path / "sources.list", d))
    assert docker_image.debian_mirror("bookworm") == "http://main.example/debian"

    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://list.example/debian bookworm main\n"
    )
    assert docker_image.debian_mirror("bookworm") == "http://list.example/debian"
    with pytest.raises(ImageBuildError, match="step 'mirror'"):
        docker_image.debian_mirror("trixie")
    monkeypatch.setenv(docker_image.MIRROR_ENV, "http://override.example/debian")
    assert docker_image.debian_mirror("trixie") == "http://override.example/debian"


def test_debootstrap_output_filter_keeps_stages_only():
    keep = docker_image._is_stage_line
    assert keep("I: Resolving dependencies of required packages...")
    assert keep("I: Unpacking the base system...")
    assert keep("I: Retrieving InRelease")
    assert keep("E: Failed getting release file")
    assert not keep("I: Retrieving adduser 3.134")
    assert not keep("I: Extracting libc6...")
    assert not keep("I: Configuring gcc-12-base:amd64...")


@pytest.mark.docker
def test_cli_docker_build_and_clean(client) -> None:
    """`isrlab docker build` (images cached by the tests above) prints the broker tag;
    `isrlab docker clean` removes a crashed run's leftovers and nothing else
    (tests/test_docker_clean.py: what it keeps)."""
    import subprocess
    import sys

    from conftest import ROOT, dead_owner, docker_leftovers

    def isrlab(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "harness.cli", "docker", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)

    r = isrlab("build", "--quiet")
    assert r.returncode == 0, r.stderr
    tag = r.stdout.strip()
    assert tag.startswith("isrlab-broker:") and client.images.get(tag)
    crashed = f"crashed-{uuid.uuid4().hex[:8]}"
    owner = dead_owner()  # the crashed run's harness process, gone
    client.volumes.create(labels=run_labels(crashed, owner))
    client.networks.create(f"isrlab-{crashed}", labels=run_labels(crashed, owner))
    unrelated = client.volumes.create(labels={"isrlab.test": "not-a-run"})
    try:
        r = isrlab("clean")
        assert r.returncode == 0, r.stderr
        gone = f"owner pid {owner.pid} on host {owner.host} is gone"
        assert f"removed run {crashed} (1 network, 1 volume): {gone}" in r.stdout.splitlines()
        assert docker_leftovers(client, crashed) == []
        assert client.volumes.get(unrelated.name)
    finally:
        unrelated.remove()
        clean_leftovers(run_id=crashed)
