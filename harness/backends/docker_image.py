"""Docker images for the reference broker, built from nothing and cached.

Two images:

* the **base** (`isrlab-base:<sha12>`): a Debian rootfs made by `docker/build_base.sh`
  (debootstrap from the mirror in this machine's apt sources) and `docker import`ed,
  because the engines isrlab runs on may reach no registry. The tag hashes the recipe
  (suite, variant, packages, mirror, the script itself), so it is rebuilt only when
  the recipe changes. `base_image="python:3.11-slim"` (or any image) skips it.
* the **broker** (`isrlab-broker:<sha12>`): `docker/Dockerfile` on top of the base,
  with the `broker/` package copied in. The tag hashes the Dockerfile, every file of
  `broker/` and the base image id, so editing the broker rebuilds it and nothing
  else does.

Everything isrlab starts at run time carries the label `isrlab.run=<run-id>`, the
path of the run directory (`isrlab.run_dir`) and its owner (`harness.backends.owner`: host,
pid, start time); `sweep_leftovers()` removes what runs whose owner is gone left
behind and keeps the rest -- and the volumes of a crashed run whose directory still
waits for `isrlab collect` -- and `clean_leftovers()` removes one run's objects (its
own teardown).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.client
import docker.errors
import docker.models.containers
import requests.exceptions

import broker
from contract import RUNNING
from contract.rundir import run_status
from harness.backends.docker_engine import (
    LABEL_RUN,
    DockerImageError,
    DockerUnavailable,
    docker_client,
)
from harness.backends.owner import Liveness, Owner, liveness_of
from harness.errors import RunIncomplete, one_line

LABEL_RUN_DIR = "isrlab.run_dir"  # absolute path of the run directory
LABEL_NODE = "isrlab.node"  # the node a container or volume is of
# LABEL_NODE of the one-off containers a run makes besides its nodes: <node><suffix>
POWER_CYCLE_SUFFIX = "-power-cycle"
COLLECT_SUFFIX = "-collect"
LABEL_IMAGE = "isrlab.image"
LABEL_HASH = "isrlab.hash"
BASE_REPO = "isrlab-base"
BROKER_REPO = "isrlab-broker"

# bookworm ships Python 3.11, the version the project targets.
SUITE = "bookworm"
VARIANT = "minbase"
# openssh-server and sudo: the same base makes the SSH backend's test hosts
# (harness/backends/ssh_hosts.py; sudo for a user that runs iptables through `sudo -n`), so one
# debootstrap serves both; the broker containers never start sshd.
INCLUDE = ("python3", "iptables", "iproute2", "openssh-server", "sudo")
# Bump to force a rebuild of every base image when the recipe changes in a way the
# hash cannot see (e.g. a change in how the tarball is imported).
RECIPE_VERSION = 1

DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"
BUILD_SCRIPT = DOCKER_DIR / "build_base.sh"
DOCKERFILE = DOCKER_DIR / "Dockerfile"
BROKER_DIR = Path(broker.__file__).resolve().parent
APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
MIRROR_ENV = "ISRLAB_DEBIAN_MIRROR"

Progress = Callable[[str], None]


class ImageBuildError(DockerImageError, RunIncomplete):
    """An image is missing and could not be built (exit 3: the run cannot start)."""

    exit_code = 3


def eprint(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_labels(run_id: str, owner: Owner | None = None,
               run_dir: Path | None = None) -> dict[str, str]:
    """Labels every container, network and volume of run `run_id` must carry: the
    run, its directory (if given) and its owner (this process unless given)."""
    labels = {LABEL_RUN: run_id, **(owner or Owner.this_process()).labels()}
    if run_dir is not None:
        labels[LABEL_RUN_DIR] = str(Path(run_dir).resolve())
    return labels


# ---------------------------------------------------------------- apt mirror


def _deb822_paragraphs(text: str) -> Iterator[dict[str, str]]:
    para: dict[str, str] = {}
    key = None
    for raw in text.splitlines() + [""]:
        line = raw.rstrip()
        if line.startswith("#"):
            continue
        if not line:
            if para:
                yield para
            para, key = {}, None
        elif line[0] in " \t" and key:
            para[key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            para[key] = value.strip()


def _mirrors_from_sources(suite: str) -> Iterator[str]:
    files: list[Path] = []
    for p in APT_SOURCES:
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            files += sorted(p.glob("*.list")) + sorted(p.glob("*.sources"))
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        if f.suffix == ".sources":
            for para in _deb822_paragraphs(text):
                if para.get("enabled", "yes").lower() == "no":
                    continue
                if "deb" not in para.get("types", "").split():
                    continue
                if suite in para.get("suites", "").split():
                    yield from para.get("uris", "").split()
        else:
            for line in text.splitlines():
                words = line.split("#", 1)[0].split()
                if words[:1] != ["deb"]:
                    continue
                words = words[1:]
                if words and words[0].startswith("["):  # deb [arch=amd64 ...] URI ...
                    while words and not words[0].endswith("]"):
                        words = words[1:]
                    words = words[1:]
                if len(words) >= 2 and words[1] == suite:
                    yield words[0]


def debian_mirror(suite: str = SUITE) -> str:
    """The Debian mirror this machine's apt already uses for `suite`.

    Read from the apt sources rather than written into the code: the mirror that is
    reachable differs from machine to machine. $ISRLAB_DEBIAN_MIRROR overrides it.
    """
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV]
    for uri in _mirrors_from_sources(suite):
        if uri.startswith(("http://", "https://", "file:/")):
            return uri.rstrip("/")
    raise ImageBuildError(
        f"step 'mirror': no apt source for Debian {suite} in /etc/apt/sources.list(.d); "
        f"set {MIRROR_ENV}=<debian mirror URL> or pass --base-image python:3.11-slim"
    )


# ---------------------------------------------------------------- hashing


def base_recipe(mirror: str) -> dict[str, Any]:
    """Everything that decides the content of the base image."""
    return {
        "version": RECIPE_VERSION,
        "suite": SUITE,
        "variant": VARIANT,
        "include": ",".join(INCLUDE),
        "mirror": mirror,
        "script": hashlib.sha256(BUILD_SCRIPT.read_bytes()).hexdigest(),
    }


def base_tag(recipe: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
    return f"{BASE_REPO}:{digest[:12]}"


def _broker_files() -> list[tuple[str, bytes]]:
    """(path in the build context, content) for the Dockerfile and broker/, sorted."""
    files = [("Dockerfile", DOCKERFILE.read_bytes())]
    for path in sorted(BROKER_DIR.rglob("*")):
        rel = path.relative_to(BROKER_DIR)
        if not path.is_file() or "__pycache__" in rel.parts or path.suffix in (".pyc", ".pyo"):
            continue
        files.append((f"broker/{rel.as_posix()}", path.read_bytes()))
    return files


def broker_tag(files: list[tuple[str, bytes]], base_id: str) -> str:
    h = hashlib.sha256(base_id.encode())
    for name, data in files:
        h.update(f"\0{name}\0{len(data)}\0".encode())
        h.update(data)
    return f"{BROKER_REPO}:{h.hexdigest()[:12]}"


def _context_tar(files: list[tuple[str, bytes]]) -> io.BytesIO:
    """The build context as a tarball: exactly the hashed files, nothing from the
    working tree (no .git, runs/, caches) can slip in."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 1_600_000_000  # fixed: the context depends on content only
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    return buf


# ---------------------------------------------------------------- building


def tar_files(files: dict[str, bytes], mode: int = 0o644, owner: int = 0) -> bytes:
    """A tarball of `files` (name -> content) for `put_archive`: each file with `mode`,
    owned by uid and gid `owner`."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            info.uid = info.gid = owner
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def image_id(client: docker.client.DockerClient, ref: str) -> str | None:
    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as e:
        raise DockerUnavailable(f"Docker engine error looking up image {ref}: {e}") from e


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    # Two runs starting at once (parallel CI jobs) must not both debootstrap.
    path = Path(tempfile.gettempdir()) / "isrlab-docker-images.lock"
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _is_stage_line(line: str) -> bool:
    # debootstrap prints one I: line per package per phase (hundreds); keep the phase
    # lines and anything that is not plain per-package chatter.
    words = line.split()
    per_package = (
        len(words) in (3, 4)
        and words[0] == "I:"
        and words[1] in ("Retrieving", "Validating", "Extracting", "Unpacking", "Configuring")
        and words[2] not in ("InRelease", "Release", "Packages")
        and (len(words) == 3 or not line.endswith("..."))
    )
    return bool(line) and not per_package


def _run_build_script(mirror: str, out: Path, progress: Progress, quiet: bool) -> None:
    if shutil.which("debootstrap") is None:
        raise ImageBuildError(
            "step 'debootstrap': debootstrap is not installed "
            "(apt-get install -y debootstrap), or pass --base-image python:3.11-slim"
        )
    if os.geteuid() != 0:
        raise ImageBuildError(
            "step 'debootstrap': building the base image needs root (debootstrap), "
            "or pass --base-image python:3.11-slim"
        )
    cmd = ["sh", str(BUILD_SCRIPT), SUITE, mirror, ",".join(INCLUDE), str(out)]
    step = "start"
    tail: deque[str] = deque(maxlen=20)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip()
            tail.append(line)
            if line.startswith("==> step: "):
                step = line[len("==> step: ") :].split(" ", 1)[0]
            if not quiet and _is_stage_line(line):
                progress(f"[base] {line}")
        rc = proc.wait()
    except BaseException:
        proc.terminate()  # the script's trap unmounts and deletes its rootfs
        proc.wait()
        raise
    if rc != 0:
        errors = [t for t in tail if t.startswith("E:")]
        detail = errors[-1] if errors else next((t for t in reversed(tail) if t), "")
        raise ImageBuildError(
            f"base image build failed at step '{step}' (exit {rc}): {detail[:300]}"
        )


def ensure_base_image(
    client: docker.client.DockerClient, progress: Progress = eprint, quiet: bool = False
) -> str:
    """The debootstrap base image tag, building it if no image has that tag."""
    mirror = debian_mirror()
    recipe = base_recipe(mirror)
    tag = base_tag(recipe)
    if image_id(client, tag):
        return tag
    if not quiet:
        progress(f"[base] building {tag} from {mirror} (debootstrap {SUITE}, ~1-2 min)")
    with tempfile.TemporaryDirectory(prefix="isrlab-base-", dir="/var/tmp") as tmp:
        out = Path(tmp) / "rootfs.tar"
        _run_build_script(mirror, out, progress, quiet)
        if not quiet:
            progress(f"[base] ==> step: import ({tag})")
        repo, _, version = tag.partition(":")
        labels = {LABEL_IMAGE: "base", LABEL_HASH: version, "isrlab.recipe": json.dumps(recipe)}
        changes = [f"LABEL {k}={json.dumps(v)}" for k, v in labels.items()]
        changes += ["ENV LANG=C.UTF-8", 'CMD ["/bin/sh"]']
        try:
            client.api.import_image(src=str(out), repository=repo, tag=version, changes=changes)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
            raise ImageBuildError(f"base image build failed at step 'import': {e}") from e
    if not image_id(client, tag):
        raise ImageBuildError(f"base image build failed at step 'import': {tag} not found after")
    return tag


def _pull_base(
    client: docker.client.DockerClient, ref: str, progress: Progress, quiet: bool
) -> str:
    if image_id(client, ref):
        return ref
    if not quiet:
        progress(f"[base] pulling {ref}")
    try:
        client.images.pull(ref)
    except docker.errors.DockerException as e:
        raise ImageBuildError(
            f"base image {ref} is not present and could not be pulled ({e}); "
            "omit --base-image to build the offline debootstrap base"
        ) from e
    return ref


def ensure_broker_image(
    client: docker.client.DockerClient,
    base_ref: str,
    progress: Progress = eprint,
    quiet: bool = False,
) -> str:
    """The broker image tag for the current broker/ sources on `base_ref`, built if
    missing."""
    base_id = image_id(client, base_ref)
    if base_id is None:
        raise ImageBuildError(f"base image {base_ref} is missing")
    files = _broker_files()
    tag = broker_tag(files, base_id)
    if image_id(client, tag):
        return tag
    if not quiet:
        progress(f"[broker] building {tag} on {base_ref}")
    build_image(client, files, tag, base_ref, "broker", progress, quiet)
    return tag


def build_image(
    client: docker.client.DockerClient,
    files: list[tuple[str, bytes]],
    tag: str,
    base_ref: str,
    what: str,
    progress: Progress = eprint,
    quiet: bool = False,
) -> None:
    """Build `tag` from exactly `files` (a Dockerfile with ARG BASE_IMAGE, and what it
    copies), showing each step as "[what] Step ..."; ImageBuildError with the failed
    step's last output lines otherwise."""
    _repo, _, version = tag.partition(":")
    tail: deque[str] = deque(maxlen=20)
    step, error = "context", None
    try:
        for chunk in client.api.build(
            fileobj=_context_tar(files),
            custom_context=True,
            tag=tag,
            buildargs={"BASE_IMAGE": base_ref},
            # Only the label that changes with the sources: the Dockerfile sets the
            # others before its COPY, where they stay cached.
            labels={LABEL_HASH: version},
            rm=True,
            forcerm=True,  # no intermediate containers left behind, even on failure
            pull=False,
            decode=True,
            timeout=900,
        ):
            for line in str(chunk.get("stream", "")).splitlines():
                line = line.rstrip()
                if line:
                    tail.append(line)
                if line.startswith("Step "):
                    step = line
                    if not quiet:
                        progress(f"[{what}] {line[:120]}")
            if "error" in chunk:
                error = str(chunk["error"])
    except docker.errors.DockerException as e:
        error = str(e)
    if error is not None:
        # The daemon's error only says "returned a non-zero code"; the cause (say, the
        # compileall lines naming a broken file) is the end of the failed step's output.
        lines = list(tail)
        starts = [i for i, t in enumerate(lines) if t.startswith("Step ")]
        noise = (" ---> ", "---> ", "Removing intermediate")
        out = [t.strip() for t in lines[starts[-1] + 1 if starts else 0 :]
               if not t.startswith(noise) and t.strip() and t not in error]
        cause = " / ".join(out[-4:])
        detail = f"{error[:300]} ({cause[:300]})" if cause else error[:300]
        raise ImageBuildError(f"{what} image build failed at '{step[:80]}': {detail}")
    if not image_id(client, tag):
        raise ImageBuildError(f"{what} image build finished but {tag} is missing")


def base_ref_for(client: docker.client.DockerClient, base_image: str | None,
                 progress: Progress = eprint, quiet: bool = False) -> str:
    """The base to build on: the offline debootstrap one (built if missing) or
    `base_image` (pulled if missing). Call under the build lock."""
    if base_image is None:
        return ensure_base_image(client, progress, quiet)
    return _pull_base(client, base_image, progress, quiet)


def ensure_images(
    base_image: str | None = None,
    progress: Progress = eprint,
    quiet: bool = False,
) -> str:
    """Build whatever is missing and return the broker image tag.

    `base_image=None` uses the offline debootstrap base; any other value (e.g.
    "python:3.11-slim") is used as the base, pulled if not present. Progress lines go
    to `progress` (stderr by default) unless `quiet`.
    """
    client = docker_client()
    try:
        with build_lock():
            base_ref = base_ref_for(client, base_image, progress, quiet)
            return ensure_broker_image(client, base_ref, progress, quiet)
    finally:
        client.close()


# ---------------------------------------------------------------- cleanup


def _remove_container(c: Any) -> None:
    if c.status == "paused":
        c.unpause()  # a frozen container cannot be killed on older engines
    c.remove(force=True)


def clean_leftovers(
    run_id: str | None = None, client: docker.client.DockerClient | None = None
) -> dict[str, int]:
    """Remove containers, then networks, then volumes labelled `isrlab.run` (any run, or
    only `run_id`). Returns how many of each were removed. Images are kept: they are a
    cache, not a leftover."""
    own = client is None
    client = client or docker_client()
    filters = _run_filter(run_id)
    removed = {"containers": 0, "networks": 0, "volumes": 0}
    errors: list[str] = []
    try:
        for kind, item, remove in _run_objects(client, filters):
            try:
                remove(item)
                removed[kind] += 1
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as e:
                if not _still_there(client, kind, item, remove):
                    removed[kind] += 1
                    continue
                errors.append(f"{kind[:-1]} {item.name}: {e}")
    finally:
        if own:
            client.close()
    if errors:
        raise DockerImageError(f"could not remove {len(errors)} isrlab objects: {errors[0]}")
    return removed


def _still_there(client: docker.client.DockerClient, kind: str, item: Any,
                 remove: Callable[[Any], None]) -> bool:
    """After a refused removal: whether the object is still there. A volume "in use"
    by a container the engine was removing that moment (another `docker clean`, a
    forced removal still going) is gone, or free, once no container names it: then
    it is removed again instead of reported."""
    try:
        item.reload()
        if kind == "volumes" and not client.containers.list(
                all=True, filters={"volume": item.name}):
            remove(item)
            return False
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError:
        return True
    return True


def _run_filter(run_id: str | None) -> dict[str, str]:
    return {"label": LABEL_RUN if run_id is None else f"{LABEL_RUN}={run_id}"}


def _run_objects(client: docker.client.DockerClient, filters: dict[str, str]) -> Iterator[
        tuple[str, Any, Callable[[Any], None]]]:
    """(kind, object, how to remove it) for every labelled object: containers first,
    since a network or volume in use cannot be removed."""
    for kind, items, remove in (
        ("containers", client.containers.list(all=True, filters=filters), _remove_container),
        ("networks", client.networks.list(filters=filters), lambda n: n.remove()),
        ("volumes", client.volumes.list(filters=filters), lambda v: v.remove(force=True)),
    ):
        for item in items:
            yield kind, item, remove


@dataclass
class RunSweep:
    """What `sweep_leftovers` did with one run's objects (of one owner), and why."""

    run_id: str
    removed: bool
    why: str  # "owner pid 1234 on host H is alive", ...
    counts: dict[str, int] = field(
        default_factory=lambda: {"containers": 0, "networks": 0, "volumes": 0}
    )
    # Kept because the run crashed and its directory (this path) still waits for
    # `isrlab collect`, which reads the volumes.
    awaiting_collect: str | None = None


def _labels(item: Any) -> dict[str, str]:
    if isinstance(item, docker.models.containers.Container):
        return item.labels or {}
    return item.attrs.get("Labels") or {}


def sweep_leftovers(
    force: bool = False,
    run_id: str | None = None,
    client: docker.client.DockerClient | None = None,
) -> tuple[list[RunSweep], list[str]]:
    """Remove the containers, networks and volumes of runs whose owner is gone (every
    run's with `force`); keep those of a live owner, or of one on another host or in
    another PID namespace that cannot be checked from here. Objects without owner
    labels (older isrlab) count as orphaned. `run_id` limits the sweep to one run.

    The volumes of a crashed run whose directory (label `isrlab.run_dir`, on this
    host) is still marked "running" are kept, unless `force`: `isrlab collect` reads
    its replicas from them; the logs of its containers are saved into that
    directory before they go.

    Returns one RunSweep per run (and owner) in run order, and the errors of
    removals that failed (each "container NAME: message")."""
    own = client is None
    client = client or docker_client()
    filters = _run_filter(run_id)
    runs: dict[tuple[str, bool, str], RunSweep] = {}
    errors: list[str] = []
    try:
        for kind, item, remove in _run_objects(client, filters):
            labels = _labels(item)
            liveness, why = liveness_of(labels)
            gone = force or liveness is Liveness.GONE
            if force and liveness is not Liveness.GONE:
                why = f"--force, although {why}"
            elif liveness is Liveness.UNKNOWN:
                why = f"{why}; --force removes it"
            run = labels.get(LABEL_RUN, "?")
            awaiting = None if force or not gone else _awaiting_collect(labels)
            if awaiting is not None and kind == "volumes":
                gone, why = False, f"its run directory {awaiting} has no replicas yet"
            entry = runs.setdefault((run, gone, why), RunSweep(run, gone, why))
            if not gone:
                entry.counts[kind] += 1
                entry.awaiting_collect = awaiting
                continue
            if awaiting is not None and kind == "containers":
                _save_log(item, Path(awaiting))
            try:
                remove(item)
                entry.counts[kind] += 1
            except docker.errors.NotFound:
                pass  # gone meanwhile (its own teardown)
            except docker.errors.APIError as e:
                errors.append(f"{kind[:-1]} {item.name}: {one_line(e)}")
    finally:
        if own:
            client.close()
    return sorted(runs.values(), key=lambda r: (r.run_id, not r.removed)), errors


def _awaiting_collect(labels: dict[str, str]) -> str | None:
    """The run directory named in `labels` if it is here and still marked "running"
    (its harness died before collecting the replicas), else None."""
    run_dir = labels.get(LABEL_RUN_DIR)
    if run_dir and run_status(Path(run_dir)) == RUNNING:
        return run_dir
    return None


def _save_log(container: Any, run_dir: Path) -> None:
    """A crashed run's container log into run_dir/logs/<node>.log, before the
    container goes (best effort: the log is worth having, not worth failing for)."""
    node = (container.labels or {}).get(LABEL_NODE)
    if not node or "/" in node or node.endswith((POWER_CYCLE_SUFFIX, COLLECT_SUFFIX)):
        return
    try:
        raw = container.logs(stdout=True, stderr=True)
        (run_dir / "logs").mkdir(exist_ok=True)
        (run_dir / "logs" / f"{node}.log").write_bytes(raw)
    except (OSError, docker.errors.APIError):
        pass


def prune_images(
    base_image: str | None = None, client: docker.client.DockerClient | None = None
) -> list[str]:
    """Remove broker images other than the one for the current sources (every broker
    edit leaves one behind; each is only a small layer on the base, but they add up).
    Base images are kept: they take a debootstrap to rebuild. Images a container
    still uses are skipped. Returns the removed tags."""
    own = client is None
    client = client or docker_client()
    removed: list[str] = []
    try:
        current = None
        base_ref = base_image or base_tag(base_recipe(debian_mirror()))
        base_id = image_id(client, base_ref)
        if base_id is not None:
            current = broker_tag(_broker_files(), base_id)
        for image in client.images.list(filters={"label": f"{LABEL_IMAGE}=broker"}):
            for tag in image.tags:
                if tag == current or not tag.startswith(f"{BROKER_REPO}:"):
                    continue
                try:
                    client.images.remove(tag)
                    removed.append(tag)
                except docker.errors.APIError:
                    pass  # in use by a container (a running or crashed run)
    finally:
        if own:
            client.close()
    return removed
