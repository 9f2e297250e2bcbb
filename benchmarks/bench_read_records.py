"""Reading every record file: ``Store.load_nodes`` at 10,000 nodes, with ``json.loads`` (as before
issue 27, rule 15) and with the bounded ``parse_json``, paired in one process.

    python benchmarks/bench_read_records.py [--nodes 10000] [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_ledger import seed_lines

from cclg.core import fields
from cclg.core import store as store_module
from cclg.core.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / "store"
        cclg = [sys.executable, "-m", "cclg", "--root", str(root)]
        subprocess.run([*cclg, "init"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(
            [*cclg, "import-jsonl", "-"], input=seed_lines(args.nodes), check=True, stdout=subprocess.DEVNULL
        )
        store = Store.open(root)
        readers = {"json.loads": json.loads, "parse_json": fields.parse_json}
        times: dict[str, list[float]] = {name: [] for name in readers}
        for run in range(args.runs):
            order = list(readers.items())
            for name, reader in order if run % 2 else order[::-1]:  # paired, in turn first and second
                store_module.parse_json = reader  # type: ignore[attr-defined]
                start = time.perf_counter()
                assert len(store.load_nodes()) == args.nodes
                times[name].append(time.perf_counter() - start)
        store_module.parse_json = fields.parse_json  # type: ignore[attr-defined]
        for name, figures in times.items():
            print(f"{name:>10}: median {statistics.median(figures) * 1000:.1f} ms over {args.runs} runs")
        ratios = [after / before for before, after in zip(times["json.loads"], times["parse_json"], strict=True)]
        print(f"parse_json / json.loads, pair by pair: median {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
