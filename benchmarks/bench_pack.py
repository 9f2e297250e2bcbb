"""Benchmark: index build, `compile_pack` and `cclg pack` on stores of 1,000 to 100,000 memories.

Run by hand (not part of the test suite):

    python benchmarks/bench_pack.py [--sizes 1000,10000,100000] [--queries 30] [--cli-runs 10]

For each size a store is made in a temporary folder (removed afterwards):

- ``size + retired`` synthetic memories (``benchmarks/synth.py``: varied facts
  about many made-up projects, 5% in Korean or Japanese) are imported in-process
  with ``api.import_jsonl`` (one ``create`` patch);
- then about 10% of ``size`` is retired through the ledger: up to 300 single
  ``supersede`` patches (each writes a corrected memory and retires the old one,
  so the active count stays ``size``), and the rest with ``forget`` patches of
  500 targets each. These patches run inside ``Store.batch()`` (one ``os.sync``
  at the end instead of an fsync per file) to keep set-up time down; that
  changes nothing the index or the pack see.

Figures, per size:

- reindex: wall time of ``cclg reindex`` in a fresh process (median of
  ``--build-runs``), and the size of ``index.sqlite`` afterwards;
- compile_pack: in-process time of ``compile_pack(store, query)`` with the index
  built and warm (each query run once to warm up, then ``--reps`` times; the
  per-query median is taken, then the median and p90 over the queries), in a
  fresh Python process that only opens the store;
- cclg pack: wall time of ``cclg pack --query ...`` in a fresh process (median of
  ``--cli-runs``, cycling through the queries), next to ``python -c pass`` and
  ``cclg --version`` (interpreter and import cost); peak RSS of those pack
  processes (``ru_maxrss``, taken by a small intermediate process so that the
  benchmark's own memory is not counted), the largest seen.

Targets: in-process compile_pack under 20 ms at 10,000 memories and under 100 ms
at 100,000.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth

from cclg import api
from cclg.core.store import Store
from cclg.ledger.writer import apply_patch
from cclg.retrieval.selection import PackRequest, compile_pack

CCLG = [sys.executable, "-m", "cclg"]
TARGETS_MS = {10_000: 20.0, 100_000: 100.0}
MAX_SUPERSEDES = 300
FORGET_BATCH = 500


# Runs one command and reports its wall time and peak RSS. The measuring is done by
# this small intermediate process because a child's ru_maxrss also counts the
# memory of the process it was forked from (the benchmark itself holds a whole
# store in memory), which would swamp the figure of a small command.
_MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
error = done.stderr.decode(errors="replace")
print(json.dumps({"wall": wall, "rss_kib": rss, "code": done.returncode, "error": error}))
"""


def run_measured(command: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one command run to completion in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], capture_output=True, check=True, text=True)
    result = json.loads(out.stdout)
    if result["code"] != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result['code']}): {result['error']}")
    return result["wall"], result["rss_kib"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def corrected(content: str) -> str:
    """A plausible correction of a synthetic fact: its numbers change."""
    return "Correction: " + re.sub(r"\d+", lambda m: str(int(m.group()) + 1), content)


def build_store(root: Path, size: int, work: Path) -> dict[str, float | int]:
    """A store of ``size`` active memories and about ``size // 10`` retired ones."""
    retired = max(1, size // 10)
    supersedes = min(MAX_SUPERSEDES, retired)
    forgets = retired - supersedes
    store, _ = Store.init(root)
    lines = list(synth.facts(size + forgets, seed=7))
    seed = work / f"seed-{size}.jsonl"
    seed.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    start = time.perf_counter()
    result = api.import_jsonl(store, seed.read_bytes(), name=seed.name)
    imported = time.perf_counter() - start
    seed.unlink()
    ids = result.memory_ids
    step = max(1, len(ids) // retired)
    victims = ids[::step][:retired]
    start = time.perf_counter()
    with store.batch():
        for node_id in ids[::step][:supersedes]:
            content = store.read_node(node_id).content
            apply_patch(store, "supersede", [node_id], reason="benchmark correction", contents=[corrected(content)])
        rest = victims[supersedes:]
        for first in range(0, len(rest), FORGET_BATCH):
            apply_patch(store, "forget", rest[first : first + FORGET_BATCH], reason="benchmark retirement")
    patched = time.perf_counter() - start
    return {"import_s": imported, "patch_s": patched, "retired": len(victims), "supersedes": supersedes}


def bench_size(size: int, args: argparse.Namespace, work: Path) -> dict[str, object]:
    root = work / f"store-{size}"
    built = build_store(root, size, work)
    queries = synth.bench_queries(args.queries, size=size + size // 10)

    builds = []
    for _ in range(args.build_runs if size < 100_000 else 1):
        Store.open(root).drop_index()
        builds.append(run_measured([*CCLG, "--root", str(root), "reindex"])[0])
    index_bytes = sum(p.stat().st_size for p in root.glob("index.sqlite*"))

    timing = subprocess.run(
        [sys.executable, __file__, "--time-store", str(root), "--reps", str(args.reps), "--", *queries],
        capture_output=True,
        check=True,
        text=True,
    )
    timed_queries = json.loads(timing.stdout)
    per_query, sizes = timed_queries["ms"], timed_queries["nodes"]

    cli_times, rss = [], []
    for i in range(args.cli_runs):
        elapsed, peak = run_measured([*CCLG, "--root", str(root), "pack", "--query", queries[i % len(queries)]])
        cli_times.append(elapsed * 1000)
        rss.append(peak)
    shutil.rmtree(root, ignore_errors=True)
    return {
        "size": size,
        **built,
        "reindex_s": statistics.median(builds),
        "index_mb": index_bytes / 1e6,
        "pack_median_ms": statistics.median(per_query),
        "pack_p90_ms": percentile(per_query, 0.9),
        "pack_max_ms": max(per_query),
        "avg_nodes": statistics.mean(sizes),
        "cli_median_ms": statistics.median(cli_times),
        "cli_rss_mb": max(rss) / 1024,
        "slowest_query": queries[per_query.index(max(per_query))],
    }


def time_store(root: str, reps: int, queries: list[str]) -> None:
    """Child mode: time ``compile_pack`` in this fresh process, print JSON.

    A fresh process, because the same queries ran markedly slower (about 30% at
    100,000) inside the process that had just built the store in memory.
    """
    store = Store.open(root)
    nodes = [len(compile_pack(store, PackRequest(query))["memory_nodes"]) for query in queries]  # warm-up
    per_query = []
    for query in queries:
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            compile_pack(store, PackRequest(query))
            times.append(time.perf_counter() - start)
        per_query.append(statistics.median(times) * 1000)
    print(json.dumps({"ms": per_query, "nodes": nodes}))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--time-store":
        split = sys.argv.index("--")
        time_store(sys.argv[2], int(sys.argv[4]), sys.argv[split + 1 :])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated store sizes (active memories)")
    parser.add_argument("--queries", type=int, default=30, help="number of varied queries for compile_pack")
    parser.add_argument("--reps", type=int, default=3, help="timed runs of each query in-process")
    parser.add_argument("--cli-runs", type=int, default=10, help="fresh `cclg pack` processes per size")
    parser.add_argument("--build-runs", type=int, default=3, help="`cclg reindex` runs per size (1 at 100,000+)")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]

    work = Path(tempfile.mkdtemp(prefix="cclg-bench-pack-"))
    try:
        baselines = {
            "python": statistics.median(run_measured([sys.executable, "-c", "pass"])[0] for _ in range(7)) * 1000,
            "version": statistics.median(run_measured([*CCLG, "--version"])[0] for _ in range(7)) * 1000,
        }
        rows = []
        for size in sizes:
            row = bench_size(size, args, work)
            rows.append(row)
            print(f"  done {size}: {json.dumps(row, default=str)}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"python -c pass: {baselines['python']:.1f} ms   cclg --version: {baselines['version']:.1f} ms   "
        f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs"
    )
    header = (
        f"{'active':>8} {'retired':>7} {'import s':>8} {'reindex s':>9} {'index MB':>8} "
        f"{'pack med ms':>11} {'p90 ms':>7} {'max ms':>7} {'nodes/pack':>10} "
        f"{'cli pack ms':>11} {'cli RSS MB':>10} {'target':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        target = TARGETS_MS.get(int(r["size"]))  # type: ignore[call-overload]
        verdict = "-" if target is None else f"{'ok' if r['pack_median_ms'] < target else 'MISS'} <{target:g}"  # type: ignore[operator]
        print(
            f"{r['size']:>8} {r['retired']:>7} {r['import_s']:>8.1f} {r['reindex_s']:>9.2f} {r['index_mb']:>8.1f} "
            f"{r['pack_median_ms']:>11.1f} {r['pack_p90_ms']:>7.1f} {r['pack_max_ms']:>7.1f} {r['avg_nodes']:>10.1f} "
            f"{r['cli_median_ms']:>11.0f} {r['cli_rss_mb']:>10.1f} {verdict:>8}"
        )
    for r in rows:
        print(f"slowest query at {r['size']}: {r['slowest_query']!r} ({r['pack_max_ms']:.1f} ms)")


if __name__ == "__main__":
    main()
