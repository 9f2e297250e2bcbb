"""Benchmark: what the secret scanner (`cclg.guard.scan`) finds, what it lets through, and how fast it reads.

Run by hand (not part of the test suite):

    python benchmarks/bench_guard.py [--per-kind 50] [--lookalikes 50] [--mb 10] [--runs 5] [--seed N]

The corpora are the ones ``tests/test_guard.py`` generates (same generators, a
seeded ``random.Random``; no real key anywhere), ``--per-kind`` of each:

- detection: every fake secret is scanned in its prose (``Planted.text``). It
  counts as found when one match covers its bytes, and as named right when that
  match's rule is the expected one. Reported per rule and overall (found /
  planted). The "more shapes" rows are the test file's extra probes (a random
  value that starts like a placeholder, a hex ``SECRET_KEY``, JSON escaped in a
  shell command, a bearer header, a password in an https URL), as many each.
- false positives: every look-alike (``--lookalikes`` per kind) is scanned and
  counts as flagged when any match is found; then the fixed code-and-notes
  probes of the test file, once each.
- throughput: the ``.py`` files of the installed standard library
  (``sysconfig.get_paths()["stdlib"]``, sorted by path) concatenated up to
  ``--mb`` MB of ordinary source code and prose, scanned (a) as it is and (b)
  with one planted secret every 10 KB (inserted between lines). Each text is
  scanned whole, in one call, and file by file (as ``cclg raw`` would see each
  file); MB/s is the median of ``--runs`` runs. Then each rule's pattern alone on
  (a), once, to show where the time goes. What the scanner finds in (a) is
  listed by rule: the standard library holds no live secret, so these are false
  positives or test fixtures, shown with where they are and four characters.

The environment (cores, load average, Python) is printed first.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for tests.test_guard

from cclg import __version__, guard
from tests.test_guard import (  # the corpora live with the tests
    LOOKALIKE_KINDS,
    MORE_LOOKALIKES,
    SECRET_KINDS,
    SEED,
    Planted,
    corpus,
    lookalikes,
    more_secrets,
)

SPRINKLE_EVERY = 10_000


def covers(matches: list[guard.Match], start: int, end: int) -> guard.Match | None:
    return next((m for m in matches if m.start <= start and m.end >= end), None)


def detection(planted: list[Planted]) -> tuple[Counter[str], Counter[str], Counter[str], list[str]]:
    """Per expected rule: planted, found, named right; and a few misses to look at."""
    total: Counter[str] = Counter()
    found: Counter[str] = Counter()
    right: Counter[str] = Counter()
    misses = []
    for p in planted:
        start = p.text.index(p.secret)
        hit = covers(guard.scan(p.text), start, start + len(p.secret))
        total[p.rule] += 1
        if hit is not None:
            found[p.rule] += 1
            right[p.rule] += hit.rule == p.rule
        elif len(misses) < 8:
            misses.append(f"{p.kind}: {p.line[:70]!r}")
    return total, found, right, misses


def stdlib_text(limit_bytes: int) -> list[tuple[str, str]]:
    """(relative path, text) of standard-library .py files, sorted by path, up to ``limit_bytes`` in all."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files, size = [], 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        files.append((path.relative_to(root).as_posix(), text))
        size += len(text.encode("utf-8"))
        if size >= limit_bytes:
            break
    return files


def sprinkle(files: list[tuple[str, str]], planted: list[Planted]) -> tuple[list[tuple[str, str]], list[Planted]]:
    """The same files with one planted text inserted between lines every ``SPRINKLE_EVERY`` characters."""
    out, used, since, pool = [], [], 0, iter(planted)
    for name, text in files:
        lines = text.splitlines(keepends=True)
        parts = []
        for line in lines:
            parts.append(line)
            since += len(line)
            if since >= SPRINKLE_EVERY:
                p = next(pool)
                parts.append(p.text + "\n")
                used.append(p)
                since = 0
        out.append((name, "".join(parts)))
    return out, used


def median_seconds(run: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def throughput(files: list[tuple[str, str]], runs: int) -> tuple[float, float, int]:
    """MB/s scanning the whole text in one call, MB/s file by file, and the number of matches."""
    whole = "".join(text for _, text in files)
    megabytes = len(whole.encode("utf-8")) / 1e6
    one_call = median_seconds(lambda: guard.scan(whole), runs)
    per_file = median_seconds(lambda: [guard.scan(text) for _, text in files], runs)
    return megabytes / one_call, megabytes / per_file, len(guard.scan(whole))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-kind", type=int, default=50, help="fake secrets per kind")
    parser.add_argument("--lookalikes", type=int, default=50, help="look-alikes per kind")
    parser.add_argument("--mb", type=float, default=10.0, help="megabytes of standard-library source to scan")
    parser.add_argument("--runs", type=int, default=5, help="runs per throughput figure (the median is reported)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()

    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    print(f"machine: {cores} cores ({usable} usable), load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"python: {platform.python_implementation()} {platform.python_version()} ({sys.executable})")
    print(f"cclg {__version__}, {len(guard.RULES)} rules, seed {args.seed}")
    print()

    # ------------------------------------------------------------ detection
    planted = corpus(args.seed, per_kind=args.per_kind)
    total, found, right, misses = detection(planted)
    print(f"detection: {args.per_kind} fake secrets per kind, {len(SECRET_KINDS)} kinds, {len(planted)} in all")
    print(f"  {'rule':<24} {'found':>13} {'rate':>7} {'rule named':>11}")
    for rule in sorted(total):
        print(
            f"  {rule:<24} {found[rule]:>6} / {total[rule]:<4} {found[rule] / total[rule]:>7.1%} "
            f"{right[rule]:>6} / {found[rule]:<3}"
        )
    n_found, n_total, n_right = sum(found.values()), sum(total.values()), sum(right.values())
    print(f"  {'overall':<24} {n_found:>6} / {n_total:<4} {n_found / n_total:>7.1%} {n_right:>6} / {n_found}")
    for miss in misses:
        print(f"  missed {miss}")

    extra: Counter[str] = Counter()
    for i in range(args.per_kind):
        for shape, (secret, text) in more_secrets(random.Random(args.seed + 10_000 + i)).items():
            start = text.index(secret)
            extra[shape] += covers(guard.scan(text), start, start + len(secret)) is not None
    print(f"  more shapes ({args.per_kind} each):")
    for shape, n in extra.items():
        print(f"    {shape:<42} {n:>4} / {args.per_kind:<4} {n / args.per_kind:>7.1%}")
    print()

    # ------------------------------------------------------------ false positives
    flagged: Counter[str] = Counter()
    examples: dict[str, str] = {}
    cases = lookalikes(args.seed, per_kind=args.lookalikes)
    for kind, text in cases:
        matches = guard.scan(text)
        if matches:
            flagged[kind] += 1
            examples.setdefault(kind, f"{matches[0].rule} on {text[:60]!r}")
    print(f"false positives: {args.lookalikes} look-alikes per kind, {len(LOOKALIKE_KINDS)} kinds, {len(cases)} in all")
    for kind in LOOKALIKE_KINDS:
        note = f"   e.g. {examples[kind]}" if kind in examples else ""
        print(f"  {kind:<24} {flagged[kind]:>4} / {args.lookalikes:<4} {flagged[kind] / args.lookalikes:>7.1%}{note}")
    print(f"  {'overall':<24} {sum(flagged.values()):>4} / {len(cases):<4} {sum(flagged.values()) / len(cases):>7.1%}")
    print("  code and notes probes (fixed texts, once each):")
    for name, text in MORE_LOOKALIKES.items():
        matches = guard.scan(text)
        verdict = f"FLAGGED ({matches[0].rule}: {text[matches[0].start : matches[0].end]!r})" if matches else "passed"
        print(f"    {name:<24} {verdict}")
    print()

    # ------------------------------------------------------------ throughput
    files = stdlib_text(int(args.mb * 1e6))
    size = sum(len(text.encode("utf-8")) for _, text in files)
    print(f"throughput: {len(files)} standard-library files, {size / 1e6:.2f} MB, median of {args.runs} runs")
    one_call, per_file, n_matches = throughput(files, args.runs)
    print(f"  (a) no planted secret:    {one_call:7.1f} MB/s in one call, {per_file:7.1f} MB/s file by file")
    needed = size // SPRINKLE_EVERY + len(SECRET_KINDS)
    pool = corpus(args.seed + 20_000, per_kind=needed // len(SECRET_KINDS) + 1)
    random.Random(args.seed).shuffle(pool)
    sprinkled, used = sprinkle(files, pool)
    one_call_b, per_file_b, _ = throughput(sprinkled, args.runs)
    print(f"  (b) 1 secret per 10 KB:   {one_call_b:7.1f} MB/s in one call, {per_file_b:7.1f} MB/s file by file")
    whole_b = "".join(text for _, text in sprinkled)
    matches_b = guard.scan(whole_b)
    position, found_b = 0, 0
    for p in used:
        start = whole_b.index(p.text, position) + p.text.index(p.secret)
        position = start
        found_b += covers(matches_b, start, start + len(p.secret)) is not None
    print(f"      found {found_b} / {len(used)} planted secrets ({found_b / len(used):.1%}) in the sprinkled text")
    whole = "".join(text for _, text in files)
    print("  time per rule on (a) in one call, one run each (`scan` with only that rule: keyword search, then")
    print("  the pattern in the windows around the keywords):")
    every_rule = guard.RULES
    try:
        for rule in every_rule:
            guard.RULES = (rule,)
            start = time.perf_counter()
            guard.scan(whole)
            seconds = time.perf_counter() - start
            print(f"    {rule.name:<24} {seconds * 1000:8.1f} ms {size / 1e6 / seconds:9.1f} MB/s")
    finally:
        guard.RULES = every_rule
    print()

    by_rule: Counter[str] = Counter()
    shown: dict[str, list[str]] = {}
    for name, text in files:
        for m in guard.scan(text):
            by_rule[m.rule] += 1
            line = text.count("\n", 0, m.start) + 1
            shown.setdefault(m.rule, [])
            if len(shown[m.rule]) < 12:
                context = text[max(0, m.start - 30) : m.start].split("\n")[-1]
                shown[m.rule].append(f"{name}:{line}: …{context}{m.preview}")
    print(f"matches in (a), the unplanted standard library: {n_matches} in one call, by rule file by file:")
    for rule, n in by_rule.most_common():
        print(f"  {rule:<24} {n:>5}")
        for example in shown[rule]:
            print(f"      {example}")


if __name__ == "__main__":
    main()
