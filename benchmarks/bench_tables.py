"""Benchmark: `cclg export --format cclg|jsonl|arrow|parquet` and reading the files back into a store,
at 10,000 memories.

Run by hand (not part of the test suite):

    python benchmarks/bench_tables.py [--nodes 10000] [--runs 3]

A store of ``--nodes`` memories is made once with `cclg import-jsonl`. Then, for each format:

- export: the real `cclg export` command of the effective view and of the ledger (`--ledger`;
  the container is always the ledger), in a fresh process (start-up included);
- import: reading the file back into an empty store (a fresh one per run), in a fresh process:
  `cclg import-container` for the container, `cclg.api.import_table` for the tables (the
  `import` command's readers), for the view and for the ledger.

Figures are wall-time medians over ``--runs``, with the file's size; `python -c pass` for scale.
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
FORMATS = ("cclg", "jsonl", "arrow", "parquet")
IMPORT_TABLE = "import sys; from cclg import api; api.import_table(api.open_store(sys.argv[1]), sys.argv[2])"


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def seed(path: Path, count: int) -> None:
    topics = ["build", "tests", "deploy", "style", "database", "api", "cache", "auth", "docs", "release"]
    with path.open("w") as out:
        for i in range(count):
            topic = topics[i % len(topics)]
            line = {
                "content": f"Fact {i} about {topic}: step {i % 97} uses tool-{i % 13} v{i % 7}.{i % 11}",
                "type": "project_fact",
                "source": "bench",
                "key": f"bench.{topic}.{i}",
                "scope": {"project": "bench"},
                "tags": [topic],
            }
            out.write(json.dumps(line) + "\n")


def import_command(fmt: str, store: Path, file: Path) -> list[str]:
    if fmt == "cclg":
        return [*CCLG, "--root", str(store), "import-container", str(file)]
    return [sys.executable, "-c", IMPORT_TABLE, str(store), str(file)]


def measure(work: Path, source: Path, fmt: str, ledger: bool, runs: int) -> dict[str, object]:
    suffix = {"cclg": "cclg", "jsonl": "jsonl", "arrow": "arrow", "parquet": "parquet"}[fmt]
    out = work / f"{fmt}-{'ledger' if ledger else 'view'}.{suffix}"
    exports, imports = [], []
    for run in range(runs):
        flags = ["--ledger"] if ledger and fmt != "cclg" else []
        exports.append(timed([*CCLG, "--root", str(source), "export", "--format", fmt, *flags, "--force", str(out)]))
        target = work / f"target-{fmt}-{ledger}-{run}"
        subprocess.run([*CCLG, "--root", str(target), "init"], check=True, stdout=subprocess.DEVNULL)
        imports.append(timed(import_command(fmt, target, out)))
        shutil.rmtree(target)
    return {
        "format": fmt,
        "what": "ledger" if ledger or fmt == "cclg" else "view",
        "bytes": out.stat().st_size,
        "export_s": statistics.median(exports),
        "import_s": statistics.median(imports),
        "export_runs": exports,
        "import_runs": imports,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cclg-bench-tables-"))
    try:
        lines = work / "seed.jsonl"
        seed(lines, args.nodes)
        source = work / "source"
        subprocess.run([*CCLG, "--root", str(source), "init"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(
            [*CCLG, "--root", str(source), "import-jsonl", str(lines)], check=True, stdout=subprocess.DEVNULL
        )
        python = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(args.runs))
        results = [measure(work, source, "cclg", True, args.runs)]
        for fmt in FORMATS[1:]:
            for ledger in (False, True):
                results.append(measure(work, source, fmt, ledger, args.runs))
        print(f"{args.nodes:,} memories; python -c pass: {python * 1000:.0f} ms")
        print("| format | rows | file | export | import into an empty store |")
        print("| --- | --- | --- | --- | --- |")
        for r in results:
            size = f"{int(str(r['bytes'])) / 1e6:.1f} MB"
            print(f"| {r['format']} | {r['what']} | {size} | {r['export_s']:.2f} s | {r['import_s']:.2f} s |")
        print(json.dumps(results, indent=1), file=sys.stderr)
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
