"""Benchmark: the time to first byte of each page of ``cclg ui`` on stores of 10,000 and 100,000 memories.

Run by hand (not part of the test suite):

    python benchmarks/bench_ui.py [--sizes 10000,100000] [--runs 15]

For each size a store is made in a temporary folder (removed afterwards): ``size`` synthetic
memories (``benchmarks/synth.py``) imported with ``api.import_jsonl``, 50 of them superseded (so a
memory has a lineage), and one session with a prompt. Then the real command, ``cclg ui --store``, is
started as its own process; the client opens the printed URL (the token becomes a cookie), waits
for the doctor's first check (a thread the server starts; it would share the one interpreter with
the first requests), and asks each page ``--runs`` times in turn over one keep-alive connection,
after one warm-up request each.

Figures per page: the median and p90 time to first byte (the request sent to the status line
read) and the median time to the last byte. ``/doctor`` (a whole-store check, run in the request)
is timed too, fewer times, apart from the pages.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synth  # noqa: E402

from cclg import api  # noqa: E402
from cclg.api import learning  # noqa: E402


def build_store(root: Path, size: int) -> dict[str, str]:
    """The store, and what the pages are asked about: a memory with a lineage, a tag, a type, the session."""
    store, _ = api.init_store(root)
    lines = list(synth.facts(size, seed=7))
    data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
    start = time.perf_counter()
    result = api.import_jsonl(store, data, name="bench-ui.jsonl")
    print(f"  imported {size:,} memories in {time.perf_counter() - start:.1f}s", flush=True)
    newest = ""
    with store.batch():
        for node_id in result.memory_ids[:: max(1, size // 50)][:50]:
            content = store.read_node(node_id).content
            patched = api.patch(store, "supersede", [node_id], contents=[content + " (revised)"], reason="bench")
            newest = patched.new_nodes[0].id
    learning.start_session(store, "bench-ui-session", agent="claude", project=None)
    query = synth.bench_queries(1, size=size)[0]
    learning.record_event(store, "bench-ui-session", "user_prompt", {}, summary={"prompt": query})
    tags = [line["tags"][0] for line in lines[:200] if line.get("tags")]
    return {"memory": newest, "tag": tags[0] if tags else "", "type": lines[0]["type"], "query": query}


class Client:
    """One keep-alive connection to the server, holding its cookie."""

    def __init__(self, url: str) -> None:
        found = re.match(r"http://127\.0\.0\.1:(\d+)(/\?token=[\w-]+)", url)
        assert found, url
        self.connection = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=600)
        self.connection.request("GET", found.group(2))
        answer = self.connection.getresponse()
        answer.read()
        self.cookie = answer.headers["set-cookie"].split(";", 1)[0]

    def get(self, path: str) -> tuple[float, float, bytes]:
        """(seconds to the first byte, seconds to the last, the body) of one GET."""
        start = time.perf_counter()
        self.connection.request("GET", path, headers={"Cookie": self.cookie})
        answer = self.connection.getresponse()
        first = time.perf_counter() - start
        body = answer.read()
        assert answer.status == 200, (path, answer.status, body[:300])
        return first, time.perf_counter() - start, body


def pages(about: dict[str, str], client: Client) -> dict[str, str]:
    """The pages timed, by name."""
    second = re.search(rb'href="(/memories\?before=\d+)" id="next-page"', client.get("/memories")[2])
    from urllib.parse import quote_plus

    return {
        "overview": "/",
        "memories (page 1)": "/memories",
        "memories (page 2)": second.group(1).decode() if second else "/memories",
        "memories by type": f"/memories?type={quote_plus(about['type'])}",
        "memories by tag": f"/memories?tag={quote_plus(about['tag'])}",
        "memories, retired (superseded)": "/memories?status=superseded",
        "search (the pack, explained)": f"/memories?q={quote_plus(about['query'])}",
        "one memory (lineage, provenance, usage)": f"/memory/{about['memory']}",
        "sessions": "/sessions",
        "one session": "/session/bench-ui-session",
        "rules": "/rules",
    }


def bench_size(size: int, runs: int, work: Path) -> dict[str, dict[str, float]]:
    root = work / f"store-{size}"
    about = build_store(root, size)
    process = subprocess.Popen([sys.executable, "-m", "cclg", "ui", "--store", str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        client = Client(process.stdout.readline().split()[-1])
        start = time.perf_counter()
        while b"Checked at" not in client.get("/")[2]:
            time.sleep(0.5)
        print(f"  the doctor's first check done within {time.perf_counter() - start:.1f}s of the first page", flush=True)
        results = {}
        timed = pages(about, client)
        for path in timed.values():
            client.get(path)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in timed}
        for _ in range(runs):
            for name, path in timed.items():
                samples[name].append(client.get(path)[:2])
        doctor = [client.get("/doctor")[:2] for _ in range(3)]
        for name, values in [*samples.items(), ("doctor (whole-store check, 3 runs)", doctor)]:
            firsts = sorted(v[0] for v in values)
            results[name] = {
                "ttfb_median_ms": statistics.median(firsts) * 1000,
                "ttfb_p90_ms": firsts[min(len(firsts) - 1, int(len(firsts) * 0.9))] * 1000,
                "last_byte_median_ms": statistics.median(v[1] for v in values) * 1000,
            }
        return results
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-ui-", ignore_cleanup_errors=True) as folder:
        for size in sizes:
            print(f"{size:,} memories", flush=True)
            results = bench_size(size, args.runs, Path(folder))
            print("| page | TTFB median | TTFB p90 | last byte median |\n|---|---|---|---|")
            for name, figures in results.items():
                print(
                    f"| {name} | {figures['ttfb_median_ms']:.1f} ms | {figures['ttfb_p90_ms']:.1f} ms "
                    f"| {figures['last_byte_median_ms']:.1f} ms |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
