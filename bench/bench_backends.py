"""Benchmark cluster start/teardown and single faults: local, docker and ssh side by side.

    python bench/bench_backends.py [--brokers 3] [--repeat 3] [--hosts HOSTS.yaml]

Start = controller + every broker started and answering `status` (what the runner
waits for before its own cluster-ready check); for ssh, `connect` is connecting to
and checking every host (`check_addresses`) and start includes copying the broker
over SFTP. Needs the broker image (built first, not timed) and a Docker engine;
the ssh column needs a hosts file (`isrlab ssh hosts up 3 --out hosts.yaml`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness.backends.base import Backend, ClusterSpec
from harness.backends.docker import DockerBackend
from harness.backends.docker_image import DockerImageError, ensure_images
from harness.backends.hostsfile import load_hosts
from harness.backends.local import LocalBackend
from harness.backends.ssh import SshBackend


def _spec(n: int) -> ClusterSpec:
    brokers = [chr(ord("A") + i) for i in range(n)]
    return ClusterSpec(protocol="latest", brokers=brokers,
                       topics=[{"name": "t", "partitions": 1, "replicas": [brokers]}])


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def _one(make: Callable[[Path], Backend], root: Path, i: int) -> dict[str, float]:
    b = make(root / f"run-{i}")
    out: dict[str, float] = {}
    try:
        out["connect"] = _timed(b.check_addresses)
        b.run_dir.mkdir(parents=True)
        out["start"] = _timed(lambda: (b.start_controller(), [b.start(n) for n in b.brokers]))
        victim = b.brokers[-1]
        out["kill"] = _timed(lambda: b.kill(victim))
        out["restart"] = _timed(lambda: b.start(victim))
        out["pause"] = _timed(lambda: b.pause(victim))
        out["resume"] = _timed(lambda: b.resume(victim))
        out["power-cycle"] = _timed(lambda: b.power_cycle(victim))
        b.start(victim)
        out["partition"] = _timed(lambda: b.partition({victim: ["controller"],
                                                        "controller": [victim]}))
        out["heal"] = _timed(b.heal)
    finally:
        out["teardown"] = _timed(b.teardown)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hosts", type=Path, help="also the ssh backend, on these hosts")
    args = ap.parse_args(argv)
    try:
        image = ensure_images()
    except DockerImageError as e:
        print(f"bench: {e}", file=sys.stderr)
        return e.exit_code
    spec = _spec(args.brokers)
    makers: dict[str, Callable[[Path], Backend]] = {
        "local": lambda d: LocalBackend(spec, d, port=19700),
        "docker": lambda d: DockerBackend(spec, d, port=29700, image=image, quiet=True),
    }
    if args.hosts:
        hosts = load_hosts(args.hosts)
        makers["ssh"] = lambda d: SshBackend(spec, d, hosts=hosts)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="isrlab-bench-") as tmp:
        for name, make in makers.items():
            results[name] = [_one(make, Path(tmp) / name, i) for i in range(args.repeat)]
    ops = list(results[list(makers)[-1]][0])
    print(f"{args.brokers} brokers + controller, median of {args.repeat} (seconds)")
    print(f"{'operation':<14}" + "".join(f"{name:>10}" for name in makers))
    for op in ops:
        cells = []
        for name in makers:
            vals = [r[op] for r in results[name] if op in r]
            cells.append(f"{statistics.median(vals):10.2f}" if vals else f"{'-':>10}")
        print(f"{op:<14}{''.join(cells)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
