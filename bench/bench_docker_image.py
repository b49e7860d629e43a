"""Benchmark the broker image build: cold and cached base, broker image, container start.

    python bench/bench_docker_image.py            # full: removes and rebuilds the base
    python bench/bench_docker_image.py --keep-base  # only the broker image and start

A cold base build runs debootstrap against the Debian mirror, so its time depends
mostly on the mirror's bandwidth. Needs root (debootstrap) and a Docker engine.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import docker.errors

from harness.backends import docker_image
from harness.backends.docker_image import DockerImageError, run_labels


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.monotonic()
    result = fn()
    return time.monotonic() - t0, result


def _remove_images(client: Any, refs: list[str]) -> None:
    for ref in refs:
        try:
            client.images.remove(ref)
        except docker.errors.ImageNotFound:
            pass
        except docker.errors.APIError as e:  # in use by a container, say
            print(f"bench: could not remove {ref}: {e}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-base", action="store_true", help="do not rebuild the base")
    parser.add_argument("-q", "--quiet", action="store_true", help="no build progress")
    args = parser.parse_args(argv)
    try:
        client = docker_image.docker_client()
    except DockerImageError as e:
        print(f"bench: {e}", file=sys.stderr)
        return e.exit_code
    q = args.quiet
    results: list[tuple[str, float]] = []
    base = docker_image.base_tag(docker_image.base_recipe(docker_image.debian_mirror()))
    broker_images = [
        t for img in client.images.list(filters={"label": f"isrlab.base={base}"}) for t in img.tags
    ]
    # The broker images on top go first, so removing the base tag frees its layers
    # instead of leaving a dangling parent behind.
    _remove_images(client, broker_images + ([] if args.keep_base else [base]))

    if not args.keep_base:
        t, _ = _timed(lambda: docker_image.ensure_base_image(client, quiet=q))
        results.append(("base image, cold (debootstrap + import)", t))
    t, base = _timed(lambda: docker_image.ensure_base_image(client, quiet=q))
    results.append(("base image, cached", t))
    t, tag = _timed(lambda: docker_image.ensure_broker_image(client, base, quiet=q))
    results.append(("broker image, cold (docker build)", t))
    t, _ = _timed(lambda: docker_image.ensure_broker_image(client, base, quiet=q))
    results.append(("broker image, cached", t))
    t, _ = _timed(lambda: docker_image.ensure_images(quiet=True))
    results.append(("ensure_images, everything cached", t))

    # What every broker edit costs: the same build with one more file in broker/.
    real_files = docker_image._broker_files
    docker_image._broker_files = lambda: [*real_files(), ("broker/_bench.py", b"# bench\n")]
    try:
        t, edited = _timed(lambda: docker_image.ensure_broker_image(client, base, quiet=True))
    finally:
        docker_image._broker_files = real_files
    results.append(("broker image after a source edit (cached layers)", t))
    _remove_images(client, [edited])

    def run_once() -> None:
        c = client.containers.run(
            tag, ["-c", "import broker.wire"], labels=run_labels("bench"), detach=True
        )
        try:
            c.wait(timeout=60)
        finally:
            c.remove(force=True)

    t, _ = _timed(run_once)
    results.append(("container run + exit (python3 -c 'import broker.wire')", t))
    client.close()

    print(f"broker image {tag} on {base}")
    for name, seconds in results:
        print(f"{name:<58} {seconds:8.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
