"""Benchmark: `cclg import-jsonl` of 10,000 memories and `cclg add` of single memories.

Run by hand (not part of the test suite):

    python benchmarks/bench_ledger.py [--nodes 10000] [--runs 3] [--adds 20]

Every figure is the wall time of the real command in a fresh process (so Python
start-up is included), as a median over the runs; `python -c pass` is timed the
same way for scale. Stores live in a temporary folder that is removed after.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CCLG = [sys.executable, "-m", "cclg"]


def timed(command: list[str], stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, input=stdin, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def seed_lines(count: int) -> bytes:
    topics = ["build", "tests", "deploy", "style", "database", "api", "cache", "auth", "docs", "release"]
    lines = []
    for i in range(count):
        topic = topics[i % len(topics)]
        lines.append(
            json.dumps(
                {
                    "content": f"Fact {i} about {topic}: step {i % 97} uses tool-{i % 13} v{i % 7}.{i % 11}",
                    "type": "project_fact",
                    "source": "bench",
                    "key": f"bench.{topic}.{i}",
                    "scope": {"project": "bench"},
                    "tags": [topic],
                }
            )
        )
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--adds", type=int, default=20)
    args = parser.parse_args()
    data = seed_lines(args.nodes)
    work = Path(tempfile.mkdtemp(prefix="cclg-bench-"))
    try:
        seed = work / "seed.jsonl"
        seed.write_bytes(data)
        baseline = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(5))
        imports = []
        for run in range(args.runs):
            root = work / f"store-{run}"
            subprocess.run([*CCLG, "--root", str(root), "init"], check=True, stdout=subprocess.DEVNULL)
            imports.append(timed([*CCLG, "--root", str(root), "import-jsonl", str(seed)]))
        adds = [
            timed([*CCLG, "--root", str(work / "store-0"), "add", "--content", f"Single fact {i}", "--source", "bench"])
            for i in range(args.adds)
        ]
        doctor = timed([*CCLG, "--root", str(work / "store-0"), "doctor"])
        print(f"python -c pass            median {baseline * 1000:8.1f} ms")
        print(
            f"import-jsonl {args.nodes:>6} nodes  median {statistics.median(imports):8.2f} s   "
            f"runs: {', '.join(f'{t:.2f}' for t in imports)}"
        )
        print(
            f"add (store of {args.nodes} nodes) median {statistics.median(adds) * 1000:8.1f} ms  "
            f"({statistics.median(adds) / baseline:.1f}x python -c pass, {args.adds} runs)"
        )
        print(f"doctor ({args.nodes + args.adds} nodes)       {doctor:8.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
