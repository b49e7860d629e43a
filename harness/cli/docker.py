"""`isrlab docker build|clean`: the broker image, and what crashed runs left behind."""

from __future__ import annotations

import argparse
import sys

from harness.cli import flags
from harness.progress import Progress


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    d = flags.command_parser(
        sub, "docker", "build the broker image, clean up crashed runs",
        description="The docker backend's image and leftovers: `build` the broker image, "
                    "`clean` what crashed runs left.",
        example="isrlab docker build",
        exit_codes="""0  done
2  bad input, or no Docker engine
3  the Docker engine failed""",
        docs="run-directory.md, docs/exit-codes.md")
    dsub = d.add_subparsers(dest="docker_command", required=True,
                            parser_class=sub._parser_class)
    b = flags.command_parser(
        dsub, "build", "build the base and broker images where missing",
        description="Build the base image and the broker image, where missing.",
        example="isrlab docker build --base-image python:3.11-slim",
        exit_codes="0  built (or present)\n2  no Docker engine\n3  the build failed",
        docs="run-directory.md")
    b.add_argument("--base-image", metavar="IMAGE", help="e.g. python:3.11-slim")
    b.add_argument("--quiet", action="store_true", help="no progress lines")
    cl = flags.command_parser(
        dsub, "clean", "remove containers, networks and volumes of runs whose isrlab "
                       "process is gone",
        description="Remove the containers, networks and volumes of runs whose isrlab "
                    "process is gone.",
        example="isrlab docker clean --images",
        exit_codes="0  cleaned\n2  no Docker engine\n3  the Docker engine failed",
        docs="run-directory.md")
    cl.add_argument("--images", action="store_true", help="also remove stale broker images")
    cl.add_argument("--force", action="store_true",
                    help="remove every run's objects, also of runs still going or of "
                         "another host")
    return d


def run(args: argparse.Namespace) -> int:
    # Imported here: the docker SDK is only needed by those who use Docker.
    from harness.backends import docker_image

    if args.docker_command == "build":
        progress = Progress(sys.stderr, quiet=args.quiet)
        print(docker_image.ensure_images(args.base_image, quiet=args.quiet,
                                         progress=progress.line))
        return 0
    runs, errors = docker_image.sweep_leftovers(force=args.force)
    total = {"containers": 0, "networks": 0, "volumes": 0}
    for r in runs:
        if r.removed:
            print(f"removed run {r.run_id} ({_counts(r.counts, zeros=False)}): {r.why}")
            total = {k: n + r.counts[k] for k, n in total.items()}
        elif r.awaiting_collect:
            print(f"kept volumes of crashed run {r.run_id} until "
                  f"`isrlab collect {r.awaiting_collect}`")
        else:
            print(f"kept run {r.run_id}: {r.why}")
    kept = len({r.run_id for r in runs if not r.removed})
    line = f"removed {_counts(total)}"
    if kept:
        line += f"; kept {kept} run{'' if kept == 1 else 's'} still going or not checkable"
    print(line)
    if args.images:
        images = docker_image.prune_images()
        print(f"removed {len(images)} stale broker image{'' if len(images) == 1 else 's'}")
    if errors:
        raise docker_image.DockerImageError(
            f"could not remove {len(errors)} isrlab object(s): {errors[0]}")
    return 0


def _counts(counts: dict[str, int], zeros: bool = True) -> str:
    """{"containers": 1, "networks": 2, "volumes": 0} -> "1 container, 2 networks"
    (", 0 volumes" with `zeros`)."""
    return ", ".join(f"{n} {kind if n != 1 else kind[:-1]}" for kind, n in counts.items()
                     if n or zeros) or "nothing left"
