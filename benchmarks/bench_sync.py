"""Benchmark: `cclg sync` time by number of new records and by store size (issue 30).

Run by hand (not part of the test suite):

    python benchmarks/bench_sync.py [--new 100,1000,10000] [--sizes 10000,100000] [--runs 3]

Two stores share a bare git remote on local disk. Every figure is the wall time of the real
`cclg sync` command in a fresh process (Python start-up included), a median over the runs:

- by new records: N memories are imported into the sending store (import-jsonl, one patch), then
  the sender's sync (writes N nodes and the patch into its clone, commits, pushes) and the
  receiver's (fetches, merges, takes N memories in, settles, updates its index) are timed;
- by store size: both stores hold S synced memories; 100 new ones are then sent and received,
  and a sync with nothing new is timed too. The first sync of the S memories is given as well.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CCLG = [sys.executable, "-m", "cclg"]
PROJECT = "git:0123456789abcdef0123456789abcdef01234567"


def cclg(root: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run([*CCLG, "--root", str(root), *args], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def seed(root: Path, count: int, tag: str) -> None:
    topics = ["build", "tests", "deploy", "style", "database", "api", "cache", "auth", "docs", "release"]
    lines = [
        json.dumps(
            {
                "content": f"{topics[i % 10]} note {tag}-{i}: keep {i % 97} and {i % 89}",
                "source": "bench",
                "scope": {"project": PROJECT},
            }
        )
        for i in range(count)
    ]
    path = root.parent / f"{root.name}-{tag}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    cclg(root, "import-jsonl", str(path))
    path.unlink()


def pair(folder: Path) -> tuple[Path, Path]:
    remote = folder / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    roots = (folder / "a", folder / "b")
    for root in roots:
        cclg(root, "init")
        cclg(root, "remote", "add", "team", str(remote), "--trust", "trusted")
    return roots


def by_new(base: Path, counts: list[int], runs: int) -> None:
    print("| new records | sender's sync | receiver's sync |")
    print("| --- | --- | --- |")
    for count in counts:
        sent, received = [], []
        for run in range(runs):
            folder = base / f"new-{count}-{run}"
            folder.mkdir()
            a, b = pair(folder)
            seed(a, count, f"r{run}")
            sent.append(cclg(a, "sync"))
            received.append(cclg(b, "sync"))
            shutil.rmtree(folder)
        print(
            f"| {count:,} | {statistics.median(sent):.2f} s ({_runs(sent)}) | "
            f"{statistics.median(received):.2f} s ({_runs(received)}) |",
            flush=True,
        )


def by_size(base: Path, sizes: list[int], runs: int) -> None:
    print("| store size | first sync out | first sync in | 100 new: sender | 100 new: receiver | nothing new |")
    print("| --- | --- | --- | --- | --- | --- |")
    for size in sizes:
        folder = base / f"size-{size}"
        folder.mkdir()
        a, b = pair(folder)
        start = time.perf_counter()
        seed(a, size, "base")
        built = time.perf_counter() - start
        first_out, first_in = cclg(a, "sync"), cclg(b, "sync")
        sent, received, idle = [], [], []
        for run in range(runs):
            seed(a, 100, f"more{run}")
            sent.append(cclg(a, "sync"))
            received.append(cclg(b, "sync"))
            idle.append(cclg(b, "sync"))
        print(
            f"| {size:,} (built in {built:.0f} s) | {first_out:.1f} s | {first_in:.1f} s | "
            f"{statistics.median(sent):.2f} s ({_runs(sent)}) | {statistics.median(received):.2f} s ({_runs(received)}) | "
            f"{statistics.median(idle):.2f} s |",
            flush=True,
        )
        shutil.rmtree(folder)


def _runs(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", default="100,1000,10000")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("CCLG_SEMANTIC", "off")
    base = Path(tempfile.mkdtemp(prefix="cclg-bench-sync-"))
    try:
        print(f"load average {os.getloadavg()[0]:.1f}")
        if args.new:
            by_new(base, [int(n) for n in args.new.split(",")], args.runs)
        if args.sizes:
            by_size(base, [int(n) for n in args.sizes.split(",")], args.runs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
