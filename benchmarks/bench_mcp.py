"""Benchmark: `cclg-mcp` start-up time and the latency of `cclg_search` and `cclg_pack` calls.

Run by hand (not part of the test suite):

    python benchmarks/bench_mcp.py [--size 10000] [--calls 50] [--starts 7]

A store of ``--size`` memories is built as ``bench_pack.py`` builds it (in a
temporary folder, removed afterwards) and indexed; then the installed
``cclg-mcp --root STORE`` is launched the way a host launches it: a stdio
subprocess driven by the official MCP SDK client (``mcp.Client``).

Figures:

- start-up: wall time from launching the server to the answer of the first
  ``tools/list`` (so it includes the client's protocol negotiation), median over
  ``--starts`` fresh servers; shutting the server down is not timed. A bare
  ``python -c pass`` (same environment) is timed between the starts, so machine
  noise hits both alike, and reported for scale;
- calls: over one connection, ``--calls`` calls each of ``cclg_search`` (limit
  10) and ``cclg_pack`` (default budget), alternating, with task-like queries
  from ``synth.bench_queries``, after 3 warm-up calls of each; every call is
  timed on the client side (request sent to result parsed) and must not come
  back as a tool error. Median and p90.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synth
from bench_pack import build_store, percentile
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment

from cclg.core.store import Store
from cclg.ledger.index import open_index

MCP = str(Path(sys.executable).parent / "cclg-mcp")
ENV = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
WARMUP = 3


def server(root: Path) -> StdioServerParameters:
    return StdioServerParameters(command=MCP, args=["--root", str(root)], env=ENV)


def time_pass() -> float:
    """Wall time of a bare ``python -c pass``, in the environment the SDK gives the server."""
    env = get_default_environment() | ENV
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


async def time_start(root: Path) -> float:
    """Launch to the first ``tools/list`` answer of a fresh server."""
    start = time.perf_counter()
    async with Client(server(root)) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - start
    names = {tool.name for tool in tools.tools}
    if not {"cclg_search", "cclg_pack"} <= names:
        raise RuntimeError(f"cclg-mcp does not list cclg_search and cclg_pack: {sorted(names)}")
    return elapsed


async def call(client: Client, tool: str, arguments: dict[str, object]) -> float:
    start = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    elapsed = time.perf_counter() - start
    if result.is_error is not False:
        raise RuntimeError(f"{tool}({arguments}) failed: {result.content}")
    return elapsed


async def time_calls(root: Path, queries: list[str]) -> dict[str, list[float]]:
    """Per-call times of cclg_search and cclg_pack over one connection (warm-ups not counted)."""
    times: dict[str, list[float]] = {"cclg_search": [], "cclg_pack": []}
    async with Client(server(root)) as client:
        await client.list_tools()
        for i, query in enumerate(queries):
            search = await call(client, "cclg_search", {"query": query, "limit": 10})
            pack = await call(client, "cclg_pack", {"query": query})
            if i >= WARMUP:
                times["cclg_search"].append(search)
                times["cclg_pack"].append(pack)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="active memories in the store")
    parser.add_argument("--calls", type=int, default=50, help="timed calls per tool, over one connection")
    parser.add_argument("--starts", type=int, default=7, help="fresh servers started for the start-up time")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cclg-bench-mcp-"))
    try:
        root = work / f"store-{args.size}"
        build_store(root, args.size, work)
        open_index(Store.open(root)).close()

        baselines, starts = [], []
        for _ in range(args.starts):
            baselines.append(time_pass())
            starts.append(asyncio.run(time_start(root)))

        # The first WARMUP queries warm the server up; the next --calls are timed.
        queries = synth.bench_queries(WARMUP + args.calls, size=args.size)
        calls = asyncio.run(time_calls(root, queries))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"command: {shlex.join(sys.orig_argv)}")
    print(
        f"{args.size} memories, {args.starts} starts, {args.calls} calls per tool; "
        f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs"
    )
    rows = [
        ("python -c pass", [t * 1000 for t in baselines]),
        ("start-up to tools/list", [t * 1000 for t in starts]),
        ("cclg_search call", [t * 1000 for t in calls["cclg_search"]]),
        ("cclg_pack call", [t * 1000 for t in calls["cclg_pack"]]),
    ]
    header = f"{'':<24} {'median ms':>10} {'p90 ms':>8}"
    print(header)
    print("-" * len(header))
    for label, values in rows:
        print(f"{label:<24} {statistics.median(values):>10.1f} {percentile(values, 0.9):>8.1f}")
    ratio = statistics.median(starts) / statistics.median(baselines)
    print(f"start-up / python -c pass: {ratio:.1f}x")


if __name__ == "__main__":
    main()
