"""Benchmark: `cclg import-jsonl` of 10,000 memories and `cclg add` of single memories.

Run by hand (not part of the test suite):

    python benchmarks/bench_ledger.py [--nodes 10000] [--runs 3] [--adds 20] [--compare PATH]

``--compare PATH`` times another CCLG implementation's ``cclg`` executable (for
example the reference implementation installed in its own virtualenv) on the same
input, in the same run, so the two are compared on one machine.

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


def measure(cclg: list[str], work: Path, seed: Path, runs: int, adds: int) -> dict[str, list[float]]:
    """Wall times of import-jsonl (fresh store per run), single adds and doctor, for one cclg executable."""
    work.mkdir(parents=True)
    imports = []
    for run in range(runs):
        root = work / f"store-{run}"
        subprocess.run([*cclg, "--root", str(root), "init"], check=True, stdout=subprocess.DEVNULL)
        imports.append(timed([*cclg, "--root", str(root), "import-jsonl", str(seed)]))
    single = [
        timed([*cclg, "--root", str(work / "store-0"), "add", "--content", f"Single fact {i}", "--source", "bench"])
        for i in range(adds)
    ]
    doctor = [timed_any([*cclg, "--root", str(work / "store-0"), "doctor"])]
    return {"import": imports, "add": single, "doctor": doctor}


def timed_any(command: list[str]) -> float:
    """Like ``timed``, but a non-zero exit (doctor with findings) is still a measurement."""
    start = time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def report(name: str, figures: dict[str, list[float]], nodes: int, baseline: float) -> None:
    imports, adds = figures["import"], figures["add"]
    print(
        f"{name:<10} import-jsonl {nodes} nodes: median {statistics.median(imports):6.2f} s "
        f"(runs {', '.join(f'{t:.2f}' for t in imports)}); add: median {statistics.median(adds) * 1000:6.1f} ms "
        f"({statistics.median(adds) / baseline:.1f}x python -c pass); doctor: {figures['doctor'][0]:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--adds", type=int, default=20)
    parser.add_argument("--compare", help="Path of another implementation's cclg executable to time alike.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cclg-bench-"))
    try:
        seed = work / "seed.jsonl"
        seed.write_bytes(seed_lines(args.nodes))
        baseline = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(5))
        print(f"python -c pass: median {baseline * 1000:.1f} ms")
        ours = measure(CCLG, work / "ours", seed, args.runs, args.adds)
        report("cclg", ours, args.nodes, baseline)
        if args.compare:
            other = measure([args.compare], work / "other", seed, args.runs, args.adds)
            report("compared", other, args.nodes, baseline)
            ratio = statistics.median(other["import"]) / statistics.median(ours["import"])
            print(f"import-jsonl: the compared implementation takes {ratio:.2f}x as long as cclg")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
