"""Benchmark: the semantic helper's costs per embedding engine, on a store that exists.

Run by hand (not part of the test suite):

    python benchmarks/bench_semantic.py --store STORE --engine e5 [--runs 15] [--embed 2000]
    python benchmarks/bench_semantic.py --store STORE --engine e5 --cost-only [--runs 15]

``STORE`` is any cclg store (the retrieval evaluation's 10,000-memory one, for instance,
under its ``--cache``); it is copied to a temporary folder first, so its own vectors are
left alone. For the engine asked (``use``, cclg's, or ``e5``, ``e5_engine.py``; the only one in the
processes this starts):

- **embedding**: ``--embed N`` memories of the store embedded in this process, as the
  helper does (batches of ``cclg.retrieval.semantic.BATCH``); the rate, and what the whole
  store would take at it;
- **start-up**: the helper started (``python -m cclg.retrieval.semantic``, with a runtime
  folder of its own) on the copy with its vectors already embedded (the copy's
  ``semantic.sqlite`` as the store had it: run the evaluation with ``--semantic --engine``
  first), until its first answer: the model's load and the vectors' read;
- **warm queries**: ``--runs`` questions at each prompt length (English and Korean, cut
  from a longer text), each asked as the hook asks (``cclg.retrieval.semantic.consult``,
  the socket included, its budget raised so that a slow answer is timed rather than
  dropped): p50 and p95 of the whole exchange, and the share inside the hook's budget
  (``TIMEOUT``, 50 ms);
- the helper's resident memory (``VmRSS``) after them;
- **query cost**: the same prompts embedded in this process (``embed.embed_query``, the engine's query
  cut included), as CPU time of the thread (``time.thread_time``: what a query costs a core, whatever
  else the machine runs) and wall time; on a loaded machine the wall times of the helper's exchange
  say more about the load than about the engine.

The helper is ended when the run does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import e5_engine

from cclg.core.store import Store
from cclg.ledger.index import read_fresh
from cclg.retrieval import embed, semantic

ENGLISH = (
    "The deploy job fails on the staging cluster because the migration step times out after ten minutes "
    "when the database is busy, and the retry makes it worse; what should we change in the pipeline "
    "config, and who owns the job now that the platform team moved? "
)
KOREAN = (
    "스테이징 클러스터에서 배포 작업이 실패합니다. 데이터베이스가 바쁠 때 마이그레이션 단계가 10분 후에 "
    "시간 초과되고, 재시도하면 더 나빠집니다. 파이프라인 설정에서 무엇을 바꿔야 하고, 지금은 누가 담당하나요? "
)
LENGTHS = (30, 60, 120, 250, 500, 2000)


def helper_command(engine: str, root: Path) -> list[str]:
    """The helper as ``semantic`` starts it, with only ``engine`` in cclg's order of preference."""
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); import e5_engine; "
        "from cclg.retrieval import embed, semantic; "
        f"embed.ENGINES = (e5_engine.ENGINES[{engine!r}],); sys.exit(semantic.main(sys.argv[1:]))"
    )
    return [sys.executable, "-c", code, "--root", str(root), "--idle", "600"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def embedding_rate(store: Store, count: int) -> tuple[int, float]:
    """(memories embedded, seconds) for the first ``count`` current memories, in the helper's batches."""

    def texts(index: object) -> list[str]:
        ids = sorted(index.current_hashes())[:count]  # type: ignore[attr-defined]
        return [semantic._text(index, node_id) for node_id in ids]  # type: ignore[arg-type]

    chosen = read_fresh(store, texts)
    embed.available()
    start = time.perf_counter()
    for first in range(0, len(chosen), semantic.BATCH):
        if embed.embed_passages(chosen[first : first + semantic.BATCH]) is None:
            raise SystemExit(f"embedding failed: {embed.failure()}")
    return len(chosen), time.perf_counter() - start


def query_cost(runs: int) -> None:
    """CPU and wall time of ``embed.embed_query`` in this process, by prompt length."""
    embed.embed_query("warm up")
    print(f"{'prompt':>8} {'chars':>6} {'cpu p50':>8} {'cpu p95':>8} {'wall p50':>9} (ms, in this process)")
    for name, text in (("English", ENGLISH), ("Korean", KOREAN)):
        long = (text * (max(LENGTHS) // len(text) + 1))[: max(LENGTHS)]
        for length in LENGTHS:
            cpu, wall = [], []
            for run in range(runs):
                prompt = f"{run} {long[: length - len(str(run)) - 1]}"
                start, start_cpu = time.perf_counter(), time.thread_time()
                embed.embed_query(prompt)
                cpu.append((time.thread_time() - start_cpu) * 1000)
                wall.append((time.perf_counter() - start) * 1000)
            cpu.sort()
            p95 = cpu[min(len(cpu) - 1, round(0.95 * (len(cpu) - 1)))]
            print(f"{name:>8} {length:>6} {statistics.median(cpu):>8.1f} {p95:>8.1f} {statistics.median(wall):>9.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--engine", choices=sorted(e5_engine.ENGINES), required=True)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--embed", type=int, default=0, help="memories to embed in this process for the rate")
    parser.add_argument("--cost-only", action="store_true", help="only the query cost in this process: no store")
    args = parser.parse_args()
    embed.ENGINES = (e5_engine.ENGINES[args.engine],)
    if args.cost_only:
        print(f"{args.engine}: load average {os.getloadavg()[0]:.1f}")
        query_cost(args.runs)
        return
    with tempfile.TemporaryDirectory(prefix="cclg-bench-semantic-") as scratch:
        root = Path(scratch) / "store"
        shutil.copytree(args.store, root, symlinks=True)
        os.environ["CCLG_SEMANTIC_DIR"] = str(Path(scratch) / "run")
        store = Store.open(root)
        memories = read_fresh(store, lambda index: len(index.current_hashes()))
        print(f"{args.engine}: store of {memories:,} current memories; load average {os.getloadavg()[0]:.1f}")
        if args.embed:
            done, seconds = embedding_rate(store, args.embed)
            print(
                f"embedding: {done:,} memories in {seconds:.1f} s ({seconds / done * 1000:.1f} ms each): "
                f"{memories:,} would take {seconds / done * memories:.0f} s, 100,000 {seconds / done * 100_000:.0f} s"
            )
        began = time.perf_counter()
        helper = subprocess.Popen(helper_command(args.engine, root), stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            # Only once its socket is there: a client that finds none starts a helper of its own.
            while not semantic.socket_path(root).exists() or semantic.similar(store, "ok", limit=1, timeout=1) is None:
                if helper.poll() is not None:
                    raise SystemExit(f"the helper ended ({helper.returncode})")
                time.sleep(0.05)
            print(f"start-up to the first answer: {time.perf_counter() - began:.2f} s (vectors stored)")
            print(f"{'prompt':>8} {'chars':>6} {'p50 ms':>8} {'p95 ms':>8} {'in 50 ms':>9}")
            for name, text in (("English", ENGLISH), ("Korean", KOREAN)):
                long = (text * (max(LENGTHS) // len(text) + 1))[: max(LENGTHS)]
                for length in LENGTHS:
                    times = []
                    for run in range(args.runs):
                        prompt = f"{run} {long[: length - len(str(run)) - 1]}"
                        start = time.perf_counter()
                        hits, _ = semantic.consult(store, prompt, limit=12, timeout=5.0)
                        times.append((time.perf_counter() - start) * 1000)
                        if hits is None:
                            raise SystemExit("the helper did not answer")
                    times.sort()
                    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
                    inside = sum(t <= semantic.TIMEOUT * 1000 for t in times) / len(times)
                    print(f"{name:>8} {length:>6} {statistics.median(times):>8.1f} {p95:>8.1f} {inside:>9.0%}")
            print(f"helper RSS: {rss_mb(helper.pid):.0f} MB; load average {os.getloadavg()[0]:.1f}")
            query_cost(args.runs)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(helper.pid, signal.SIGTERM)
            helper.wait(timeout=10)


if __name__ == "__main__":
    main()
