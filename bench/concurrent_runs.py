"""Load held: several chaos runs at once on one machine, each on its own ports, for
a stretch of wall time; then whether any run mixed with another or left anything.

    python bench/concurrent_runs.py [--workers 4] [--minutes 10] [--backend local|docker|both]
                                    [--time-limit 60s] [--protocol latest] [--seed 1]
                                    [--runs-dir DIR]

Each worker runs `isrlab chaos --time-limit T --runs 1` again and again (seed S+k)
on ports of its own until the minutes are up (`both`: half the workers local, half
Docker). Afterwards, for every run:

- completed: it exited 0 or 1 (judged) -- not 2 (refused) or 3 (incomplete);
- mixed: its cluster.json names another cluster than its run id, or a log of it
  says a peer belonged to another cluster (INCONSISTENT_CLUSTER_ID);
- test power: its acknowledged sends, and how many of its fault windows had one
  (check/summary.json, `figures.availability`);

and for the machine, once every worker is done: a process naming a runs
directory, a Docker object labelled with one of the runs, an address reservation
still held (harness/backends/ports.py) -- each a leftover. Prints a table; exits 1
on any run mixed or anything left.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.backends.ports import RESERVATIONS  # noqa: E402

# Ports far apart per worker: a local run takes PORT and PORT+1, a Docker one up to
# PORT + 2 x brokers (3 brokers by default: 7).
PORT_BASE, PORT_STEP = 31000, 20


def worker(i: int, backend: str, args: argparse.Namespace, deadline: float) -> list[dict]:
    runs_dir = args.runs_dir / f"worker-{i}-{backend}"
    out = []
    k = 0
    while time.monotonic() < deadline:
        seed = args.seed + 1000 * i + k
        t0 = time.monotonic()
        p = subprocess.run(
            [sys.executable, "-m", "harness.cli", "chaos", "--protocol", args.protocol,
             "--backend", backend, "--time-limit", args.time_limit, "--runs", "1",
             "--seed", str(seed), "--faults", args.faults, "--port",
             str(PORT_BASE + PORT_STEP * i), "--runs-dir", str(runs_dir), "--quiet", "--json"],
            cwd=ROOT, capture_output=True, text=True)
        out.append({"worker": i, "backend": backend, "seed": seed, "code": p.returncode,
                    "seconds": round(time.monotonic() - t0, 1), "stderr": p.stderr[-300:]})
        k += 1
    return out


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/*/run.json"))


def mixed(run: Path) -> str | None:
    try:
        cid = json.loads((run / "cluster.json").read_text()).get("cluster_id")
    except (OSError, ValueError):
        return None
    if cid not in (None, run.name):
        return f"cluster.json names cluster {cid}"
    for log in (run / "logs").glob("*.log"):
        if "belongs to another cluster" in log.read_text(errors="replace"):
            return f"{log.name}: a peer of another cluster"
    return None


def power(run: Path) -> tuple[int, int, int]:
    """(acknowledged sends, fault windows, fault windows with an acknowledged send)."""
    try:
        figs = json.loads((run / "check" / "summary.json").read_text())["figures"]
    except (OSError, ValueError, KeyError):
        return 0, 0, 0
    windows = [w for w in figs.get("availability") or [] if w.get("phase") != "no fault"]
    return (int(figs.get("sends_ok") or 0), len(windows),
            sum(1 for w in windows if (w.get("ok") or 0) > 0))


def leftovers(root: Path, run_ids: list[str]) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(root) in cmd:
            found.append(f"process {entry}: {cmd[:80]}")
    for lock in RESERVATIONS.glob("*_*"):
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            found.append(f"address {lock.name} still reserved")
        finally:
            os.close(fd)
    try:
        import docker

        client = docker.from_env()
        for kind in ("containers", "networks", "volumes"):
            coll = getattr(client, kind)
            items = coll.list(all=True) if kind == "containers" else coll.list()
            for o in items:
                if (o.attrs.get("Labels") or o.attrs.get("Config", {}).get("Labels") or {}).get(
                        "isrlab.run") in run_ids:
                    found.append(f"docker {kind[:-1]} {o.name}")
    except Exception:  # noqa: BLE001 - no engine: nothing of Docker to leave
        pass
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--backend", choices=("local", "docker", "both"), default="both")
    ap.add_argument("--time-limit", default="60s")
    ap.add_argument("--faults", default="kill,pause,partition")
    ap.add_argument("--protocol", default="latest")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs-dir", type=Path,
                    default=Path(tempfile.mkdtemp(prefix="isrlab-concurrent-")))
    args = ap.parse_args()
    args.runs_dir = args.runs_dir.resolve()
    backends = ([args.backend] * args.workers if args.backend != "both" else
                ["local" if i % 2 == 0 else "docker" for i in range(args.workers)])
    deadline = time.monotonic() + args.minutes * 60
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        done = [r for f in [pool.submit(worker, i, b, args, deadline)
                            for i, b in enumerate(backends)] for r in f.result()]
    wall = time.monotonic() - t0
    runs = run_dirs(args.runs_dir)
    bad = [(r.name, m) for r in runs if (m := mixed(r))]
    left = leftovers(args.runs_dir, [r.name for r in runs])
    print(f"{len(done)} chaos runs by {args.workers} workers ({', '.join(backends)}) in "
          f"{wall:.0f} s; runs directory {args.runs_dir}")
    print(f"{'worker':>6} {'backend':>7} {'seed':>6} {'exit':>4} {'s':>6} {'acked':>7} "
          f"{'windows with an ack':>20}")
    by_seed = {}
    for r in runs:
        meta = json.loads((r / "run.json").read_text())
        by_seed[(meta.get("backend"), meta.get("seed"))] = r
    for d in done:
        r = by_seed.get((d["backend"], d["seed"]))
        ok, n, hit = power(r) if r else (0, 0, 0)
        print(f"{d['worker']:>6} {d['backend']:>7} {d['seed']:>6} {d['code']:>4} "
              f"{d['seconds']:>6} {ok:>7} {f'{hit}/{n}':>20}")
    completed = sum(1 for d in done if d["code"] in (0, 1))
    print(f"completed (judged, exit 0 or 1): {completed}/{len(done)}; mixed: {len(bad)}; "
          f"left behind: {len(left)}")
    for name, m in bad:
        print(f"  mixed: {name}: {m}")
    for x in left:
        print(f"  left: {x}")
    for d in done:
        if d["code"] not in (0, 1):
            print(f"  worker {d['worker']} seed {d['seed']} exit {d['code']}: "
                  f"{d['stderr'].strip().splitlines()[-1:] or ''}")
    return 1 if bad or left else 0


if __name__ == "__main__":
    sys.exit(main())
