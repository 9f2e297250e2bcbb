"""Benchmark: cclg against the reference implementation at 1,000 to 100,000 memories (issue 17).

Run by hand (not part of the test suite):

    python benchmarks/bench_scale.py --ours PATH/cclg --reference PATH/cclg [--sizes 1000,10000,100000]

Both ``cclg`` executables run PAIRED in one run, on the same inputs, alternating which goes
first: ``import-jsonl`` of N memories into a fresh store (the seed of bench_ledger.py), single
``add``s, ``doctor``, ``search``, ``pack`` and the index rebuild (ours ``reindex``, the reference
``index``) on the store of N. Each figure is one fresh process: its wall time and its own peak
RSS (``os.wait4``), after an ``os.sync()`` so no command pays for the previous one's writes.
The floor is each interpreter's ``python -c "import json, sqlite3"``.
Children run without PYTHONDONTWRITEBYTECODE; an untimed warm-up on a tiny store writes the
bytecode first. Stores live in a temporary folder, removed at the end unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

QUERY = "deploy tool-3"
COMMANDS = ["import-jsonl", "add", "doctor", "search", "pack", "reindex"]
WORDS = (
    "amber basalt cobalt dune ember fjord glacier harbor indigo jasper kelp lagoon meadow nectar onyx prairie quartz "
    "reef saffron tundra umber violet willow xenon yarrow zephyr anvil beacon cipher dynamo easel ferret gazebo "
    "hammock igloo jigsaw kettle lantern marble nozzle orchid pylon quiver rudder sextant trellis"
).split()
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass
class Sample:
    seconds: float
    peak_kb: int  # the child's own ru_maxrss (KB on Linux)
    exit: int
    cpu: float  # the child's user + system CPU seconds: steadier than wall time on a noisy disk


Results = dict[str, dict[str, list[Sample]]]  # command -> implementation -> samples


def run(command: list[str], cwd: Path, check: bool = True) -> Sample:
    """One fresh process: wall time and its own peak RSS, reaped with os.wait4."""
    with tempfile.TemporaryFile() as err:
        os.sync()  # the writes of the previous command are flushed before, not charged to this one
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)  # so Popen never waits itself
        if check and code != 0:
            err.seek(0)
            raise SystemExit(f"failed ({code}): {' '.join(command)}\n{err.read().decode(errors='replace')[-2000:]}")
    return Sample(seconds, usage.ru_maxrss, code, usage.ru_utime + usage.ru_stime)


def write_seed(path: Path, size: int) -> None:
    """The seed file, written by a process of its own: a child's peak RSS (``ru_maxrss``) starts at its
    parent's peak, so this process must never hold 100,000 lines itself."""
    here = Path(__file__).resolve().parent
    code = (
        "import sys; from bench_ledger import seed_lines; open(sys.argv[1], 'wb').write(seed_lines(int(sys.argv[2])))"
    )
    subprocess.run([sys.executable, "-c", code, str(path), str(size)], cwd=here, check=True)


def add_contents(count: int) -> list[str]:
    """Sentences of random words: unlike each other and unlike the seed, so no dedup or near-duplicate note."""
    rng = random.Random(17)
    return [f"Scale note {i}: {' '.join(rng.sample(WORDS, 9))}." for i in range(count)]


def command_line(impl: str, cclg: str, root: Path, command: str, extra: str = "") -> list[str]:
    base = [cclg, "--root", str(root)]
    if command == "import-jsonl":
        return [*base, "import-jsonl", extra]
    if command == "add":
        return [*base, "add", "--content", extra, "--source", "bench"]
    if command == "search":
        return [*base, "search", QUERY]
    if command == "pack":
        return [*base, "pack", "--query", QUERY, "--format", "json"]
    if command == "reindex":
        return [*base, "reindex" if impl == "ours" else "index"]
    return [*base, command]


def suite(installs: dict[str, str], size: int, work: Path, runs: int, adds: int, quiet: bool = False) -> Results:
    """Every measurement at one size, ours and reference alternating which goes first."""
    work.mkdir(parents=True, exist_ok=True)
    seed = work / f"seed-{size}.jsonl"
    write_seed(seed, size)
    results: Results = {c: {impl: [] for impl in installs} for c in COMMANDS}
    stores = {impl: work / f"{impl}-{size}" for impl in installs}

    def order(i: int) -> list[str]:
        names = list(installs)
        return names if i % 2 == 0 else names[::-1]

    def note(message: str) -> None:
        if not quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {size:>7,}: {message}", file=sys.stderr, flush=True)

    for i in range(runs):
        for impl in order(i):
            root = stores[impl] if i == 0 else work / f"{impl}-{size}-run{i}"
            run([installs[impl], "--root", str(root), "init"], work)
            sample = run(command_line(impl, installs[impl], root, "import-jsonl", str(seed)), work)
            results["import-jsonl"][impl].append(sample)
            note(f"import-jsonl {impl} run {i + 1}/{runs}: {fmt_time(sample.seconds)}, {sample.peak_kb / 1024:.0f} MB")
            if i > 0:
                shutil.rmtree(root)  # only the first run's store is kept for the other commands
    for i, content in enumerate(add_contents(adds)):
        for impl in order(i):
            results["add"][impl].append(run(command_line(impl, installs[impl], stores[impl], "add", content), work))
    note(f"add x{adds} done")
    for command in ["doctor", "search", "pack", "reindex"]:
        for i in range(runs):
            for impl in order(i):
                line = command_line(impl, installs[impl], stores[impl], command)
                results[command][impl].append(run(line, work, check=command != "doctor"))
        codes = {impl: sorted({s.exit for s in results[command][impl]}) for impl in installs}
        note(f"{command} x{runs} done" + (f" (exit codes {codes})" if command == "doctor" else ""))
    return results


def fmt_time(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def summary(samples: list[Sample]) -> tuple[float, float, float, float]:
    """Median, min and max seconds, and the highest peak RSS in MB."""
    times = [s.seconds for s in samples]
    return statistics.median(times), min(times), max(times), max(s.peak_kb for s in samples) / 1024


def print_size(size: int, results: Results, installs: dict[str, str]) -> None:
    print(f"\n== {size:,} memories: median (min-max), peak RSS; ratios of wall time, peak and CPU time ==")
    ratios = len(installs) == 2
    titles = "".join(f"   {'-- ' + impl + ' ':-<39}" for impl in installs)
    print(f"{'':<13}{titles}" + ("   ours/reference" if ratios else ""))
    head = f"{'command':<13}" + "".join(f"   {'median':>10} {'(min-max)':>19} {'peak':>8}" for _ in installs)
    print(head + (f"{'time':>10}{'peak':>8}{'cpu':>8}" if ratios else ""))
    for command in COMMANDS:
        line, stats = f"{command:<13}", []
        for impl in installs:
            med, low, high, peak = summary(results[command][impl])
            stats.append((med, peak))
            line += f"   {fmt_time(med):>10} {'(' + fmt_time(low) + '-' + fmt_time(high) + ')':>19} {peak:>5.0f} MB"
        if ratios:
            cpu = [statistics.median(s.cpu for s in results[command][impl]) for impl in installs]
            line += f"{stats[0][0] / stats[1][0]:>9.2f}x{stats[0][1] / stats[1][1]:>7.2f}x{cpu[0] / cpu[1]:>7.2f}x"
        print(line)


def print_growth(all_results: dict[int, Results], installs: dict[str, str]) -> None:
    sizes = sorted(all_results)
    print("\n== growth: median time / peak RSS at each size ==")
    print(f"{'command':<13}{'impl':<11}" + "".join(f"{n:>20,}" for n in sizes))
    for command in COMMANDS:
        for impl in installs:
            cells = []
            for n in sizes:
                med, _, _, peak = summary(all_results[n][command][impl])
                cells.append(f"{fmt_time(med) + ' / ' + f'{peak:.0f} MB':>20}")
            print(f"{command:<13}{impl:<11}" + "".join(cells))


def python_of(cclg: str) -> str:
    """The interpreter a console script runs with: its shebang line."""
    first = Path(cclg).read_bytes().split(b"\n", 1)[0].decode()
    return first[2:].strip() if first.startswith("#!") else sys.executable


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(
            "Time two cclg installs (ours and the reference), paired on the same inputs: import-jsonl, add, doctor, "
            "search, pack and the index rebuild at each size, with each child's wall time and peak RSS."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--ours", default=str(Path(sys.executable).with_name("cclg")), help="our cclg executable")
    parser.add_argument("--reference", help="the reference cclg executable; without it only ours is measured")
    parser.add_argument("--sizes", default="1000,10000", help="store sizes, comma separated (100000 takes minutes)")
    parser.add_argument("--runs", type=int, default=3, help="runs of import-jsonl, doctor, search, pack, reindex")
    parser.add_argument("--adds", type=int, default=11, help="single adds into each store")
    parser.add_argument("--json", type=Path, help="save every raw figure to this file")
    parser.add_argument("--keep", action="store_true", help="keep the stores (their folder is printed)")
    args = parser.parse_args()
    installs = {"ours": str(Path(args.ours).resolve())}
    if args.reference:
        installs["reference"] = str(Path(args.reference).resolve())
    sizes = [int(s) for s in args.sizes.split(",")]

    work = Path(tempfile.mkdtemp(prefix="cclg-scale-"))
    try:
        print(f"stores in {work}", file=sys.stderr)
        suite(installs, 10, work / "warm-up", runs=1, adds=1, quiet=True)  # writes bytecode, warms the disk cache
        floor: dict[str, list[Sample]] = {}
        print('floor: python -c "import json, sqlite3", median of 11')
        for impl, cclg in installs.items():
            floor[impl] = [run([python_of(cclg), "-c", "import json, sqlite3"], work) for _ in range(11)]
            med, low, high, peak = summary(floor[impl])
            print(f"  {impl:<10} {fmt_time(med)} ({fmt_time(low)}-{fmt_time(high)}), {peak:.0f} MB  [{cclg}]")
        all_results: dict[int, Results] = {}
        for size in sizes:
            all_results[size] = suite(installs, size, work / str(size), args.runs, args.adds)
            print_size(size, all_results[size], installs)
            sys.stdout.flush()
        print_growth(all_results, installs)
        if args.json:
            raw = {
                "installs": installs,
                "query": QUERY,
                "floor": {impl: [asdict(s) for s in samples] for impl, samples in floor.items()},
                "sizes": {
                    str(n): {c: {i: [asdict(s) for s in ss] for i, ss in per.items()} for c, per in res.items()}
                    for n, res in all_results.items()
                },
            }
            args.json.write_text(json.dumps(raw, indent=2) + "\n")
            print(f"\nraw figures saved to {args.json}")
    finally:
        if args.keep:
            print(f"stores kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
