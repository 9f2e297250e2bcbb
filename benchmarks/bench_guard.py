"""Benchmark: what the secret detector (`cclg.core.secrets`) finds, what it lets through, whether every
path agrees, and how fast it reads, adversarial input included.

Run by hand (not part of the test suite):

    python benchmarks/bench_guard.py [--per-kind 50] [--lookalikes 50] [--mb 10] [--runs 5]
                                     [--adversarial-mb 1] [--timeout 60] [--seed N]

The corpora are the ones ``tests/test_guard.py`` generates (same generators, a seeded
``random.Random``; no real key anywhere), ``--per-kind`` of each:

- detection: every fake secret is scanned in its prose (``Planted.text``). It counts as
  found when one match covers its bytes, and as named right when that match's rule is the
  expected one; per kind and overall. Then the test file's extra shapes (``more_secrets``).
- false positives: every look-alike (``--lookalikes`` per kind) counts as flagged when any
  match is found; then the fixed code-and-notes probes, once each.
- one detector: each planted text and look-alike in four forms (as is, in a JSON string, that
  JSON in a shell command, the JSON string encoded again) goes through the write check
  (``refuse_secrets`` of a record holding it), ``scan`` of the text and ``scan`` of the JSON
  file a write would make: how often they disagree. Then the hook's redaction
  (``redact_value``) of payloads carrying each secret: as ``{"password": secret}`` in
  ``tool_input``, as the command, and inside JSON tool output (escaped): how many survive.
- linear time: crafted inputs of ``--adversarial-mb`` MB and twice that (a private key
  header with no END, keywords repeated, long runs after a keyword, backslashes, ...), each
  scanned in a child process stopped after ``--timeout`` seconds; then a user regex
  (``(a|aa)+$``, what froze MCP ``cclg_grep``) on 10,000 lines, under ``re`` and under
  ``search.UserPattern``.
- throughput: the ``.py`` files of the installed standard library (sorted by path) up to
  ``--mb`` MB, scanned (a) as they are and (b) with one planted secret every 10 KB, in one
  call and file by file; MB/s is the median of ``--runs`` runs. The hook's secret pass:
  ``redact_value`` of a Read tool's payload holding (b) whole. Then what each rule adds to
  reading (a). What the scanner finds in (a) is listed by rule (the standard library holds
  no live secret: these are false positives or test fixtures, shown with four characters).

The environment (cores, load average, Python) is printed first. The figures of an older version of the
detector come from running this file in a checkout of that version with this
``tests/test_guard.py`` copied in (what the old code lacks is shown as n/a).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for tests.test_guard

from cclg import __version__
from cclg.core import secrets
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


def covers(matches: list[secrets.Match], start: int, end: int) -> secrets.Match | None:
    return next((m for m in matches if m.start <= start and m.end >= end), None)


def detection(planted: list[Planted]) -> tuple[Counter[str], Counter[str], Counter[str], list[str]]:
    """Per kind: planted, found, named right; and a few misses to look at."""
    total: Counter[str] = Counter()
    found: Counter[str] = Counter()
    right: Counter[str] = Counter()
    misses = []
    for p in planted:
        start = p.text.index(p.secret)
        hit = covers(secrets.scan(p.text), start, start + len(p.secret))
        total[p.kind] += 1
        if hit is not None:
            found[p.kind] += 1
            right[p.kind] += hit.rule == p.rule
        elif len(misses) < 8:
            misses.append(f"{p.kind}: {p.line[:70]!r}")
    return total, found, right, misses


def print_detection(args: argparse.Namespace) -> None:
    planted = corpus(args.seed, per_kind=args.per_kind)
    total, found, right, misses = detection(planted)
    print(f"detection: {args.per_kind} fake secrets per kind, {len(SECRET_KINDS)} kinds, {len(planted)} in all")
    print(f"  {'kind':<24} {'expected rule':<22} {'found':>13} {'rate':>7} {'rule named':>11}")
    rules = {p.kind: p.rule for p in planted}
    for kind in SECRET_KINDS:
        print(
            f"  {kind:<24} {rules[kind]:<22} {found[kind]:>6} / {total[kind]:<4} "
            f"{found[kind] / total[kind]:>7.1%} {right[kind]:>6} / {found[kind]:<3}"
        )
    n_found, n_total, n_right = sum(found.values()), sum(total.values()), sum(right.values())
    print(f"  {'overall':<47} {n_found:>6} / {n_total:<4} {n_found / n_total:>7.1%} {n_right:>6} / {n_found}")
    for miss in misses:
        print(f"  missed {miss}")
    extra: Counter[str] = Counter()
    for i in range(args.per_kind):
        for shape, (secret, text) in more_secrets(random.Random(args.seed + 10_000 + i)).items():
            start = text.index(secret)
            extra[shape] += covers(secrets.scan(text), start, start + len(secret)) is not None
    print(f"  more shapes ({args.per_kind} each):")
    for shape, n in extra.items():
        print(f"    {shape:<42} {n:>4} / {args.per_kind:<4} {n / args.per_kind:>7.1%}")
    print()


def print_false_positives(args: argparse.Namespace) -> None:
    flagged: Counter[str] = Counter()
    examples: dict[str, str] = {}
    cases = lookalikes(args.seed, per_kind=args.lookalikes)
    for kind, text in cases:
        matches = secrets.scan(text)
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
        matches = secrets.scan(text)
        verdict = f"FLAGGED ({matches[0].rule}: {text[matches[0].start : matches[0].end]!r})" if matches else "passed"
        print(f"    {name:<24} {verdict}")
    print()


# ---------------------------------------------------------------- one detector


def forms(text: str) -> list[str]:
    """``text`` as agents paste it: as is, in a JSON string, that JSON in a shell command, encoded twice."""
    as_json = json.dumps({"note": text})
    return [text, as_json, f"curl -d '{as_json}' https://api.internal", json.dumps(as_json)]


def refused(text: str) -> bool:
    try:
        secrets.refuse_secrets({"memory": {"content": text}})
    except secrets.SecretError:
        return True
    return False


def print_one_detector(args: argparse.Namespace) -> None:
    texts = [p.text for p in corpus(args.seed + 50, per_kind=max(1, args.per_kind // 5))]
    texts += [text for _, text in lookalikes(args.seed + 50, per_kind=max(1, args.lookalikes // 5))]
    disagree: Counter[str] = Counter()
    examples: list[str] = []
    cases = [form for text in texts for form in forms(text)]
    for text in cases:
        verdicts = (
            refused(text),
            bool(secrets.scan(text)),
            bool(secrets.scan_bytes(json.dumps({"content": text}).encode())),
        )
        if len(set(verdicts)) > 1:
            disagree["write check / scan of the text / scan of the file: " + " / ".join(map(str, verdicts))] += 1
            if len(examples) < 3:
                examples.append(repr(text[:80]))
    print(f"one detector: {len(cases)} texts (planted and look-alikes, each in 4 encodings)")
    print(
        f"  the write check, `scan` of the text and `scan` of the file it writes disagree on {sum(disagree.values())}"
    )
    for verdicts, n in disagree.most_common():
        print(f"    {n:>5}  {verdicts}")
    for example in examples:
        print(f"    e.g. {example}")
    planted = corpus(args.seed + 60, per_kind=max(1, args.per_kind // 5))
    shapes: dict[str, Callable[[Planted], dict[str, object]]] = {
        'tool_input {"password": secret}': lambda p: {"tool_input": {"host": "db", "password": p.secret}},
        "tool_input command": lambda p: {"tool_input": {"command": p.line}},
        "tool output, JSON-escaped": lambda p: {"tool_response": {"stdout": json.dumps({"log": p.text})}},
    }
    print(f"  the hook's redaction (`redact_value`), {len(planted)} secrets per shape: secrets left in the payload")
    for shape, make in shapes.items():
        left = 0
        for p in planted:
            clean = json.dumps(secrets.redact_value({"session_id": "s", **make(p)})[0])
            left += p.secret in clean or json.dumps(p.secret)[1:-1] in clean
        print(f"    {shape:<36} {left:>4} / {len(planted)}")
    print()


# ---------------------------------------------------------------- linear time

ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "private key header, no END, base64 lines": lambda n: (
        "-----BEGIN PRIVATE KEY-----\n" + ("QUJD" * 16 + "\n") * (n // 65)
    ),
    "private key headers repeated": lambda n: "-----BEGIN RSA PRIVATE KEY-----\n" * (n // 32),
    "BEGIN then dashes": lambda n: "-----BEGIN " + "-" * n,
    "password= repeated": lambda n: "password=" * (n // 9),
    "password=/x/ repeated (rejected values)": lambda n: "password=/x/" * (n // 12),
    "api_key: and spaces": lambda n: ("api_key:" + " " * 60) * (n // 68),
    "db_password = your + letters (a placeholder?)": lambda n: ('db_password = "your' + "a" * 40 + '!"\n') * (n // 60),
    "postgres:// then one long word": lambda n: "postgres://" + "a" * n,
    "https://user: and no @": lambda n: "https://u:" + "a" * n,
    "Bearer then one long word": lambda n: "Authorization: Bearer " + "a" * n,
    "curl on one long line": lambda n: "curl " + "-x " * (n // 3),
    "mysql on one long line": lambda n: "mysql " + "-u " * (n // 3),
    "sk- then one long word": lambda n: "sk-" + "a" * n,
    "ghp_ repeated": lambda n: "ghp_" * (n // 4),
    "eyJ. repeated": lambda n: "eyJaaaaaaaaaa." * (n // 14),
    "backslashes": lambda n: "\\" * n,
    "escaped newlines": lambda n: "\\n" * (n // 2),
    "keyword soup": lambda n: "".join(
        random.Random(7).choice(["key", "=", ":", "password", " ", '"', "token", "\\n", "://", "@", "sk-", "a1"])
        for _ in range(n // 3)
    ),
}
USER_REGEX, USER_LINE, USER_LINES = r"(a|aa)+$", "a" * 30 + "!", 10_000


def run_case(name: str, megabytes: float) -> None:
    """In the child process: scan one adversarial input, print the seconds."""
    if name == "user regex under re":
        pattern = re.compile(USER_REGEX)
        start = time.perf_counter()
        for _ in range(USER_LINES):
            pattern.search(USER_LINE)
        print(time.perf_counter() - start)
        return
    text = ADVERSARIAL[name](int(megabytes * 1_000_000))
    start = time.perf_counter()
    secrets.scan(text)
    print(time.perf_counter() - start)


def timed_case(name: str, megabytes: float, timeout: float) -> str:
    command = [sys.executable, __file__, "--case", name, "--case-mb", str(megabytes)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return f"> {timeout:g} s (stopped)"
    return f"{float(done.stdout):.3f} s"


def print_linear_time(args: argparse.Namespace) -> None:
    mb = args.adversarial_mb
    print(f"linear time: each input scanned once in a child process, stopped after {args.timeout:g} s")
    print(f"  {'input':<46} {f'{mb:g} MB':>20} {f'{2 * mb:g} MB':>20}")
    for name in ADVERSARIAL:
        print(f"  {name:<46} {timed_case(name, mb, args.timeout):>20} {timed_case(name, 2 * mb, args.timeout):>20}")
    print(f"  a user regex, {USER_REGEX} on {USER_LINES:,} lines of {len(USER_LINE)} characters (MCP cclg_grep):")
    print(
        f"    {'the re module (grep before UserPattern)':<44} {timed_case('user regex under re', 0, args.timeout):>20}"
    )
    from cclg.retrieval import search
    if not hasattr(search, "UserPattern"):
        print(f"    {'search.UserPattern':<44} {'n/a':>20}")
    else:
        pattern = search.UserPattern(USER_REGEX, regex=True)
        start = time.perf_counter()
        try:
            for _ in range(USER_LINES):
                pattern.search(USER_LINE)
            outcome = "no error"
        except Exception as exc:  # the UsageError that ends the search
            outcome = type(exc).__name__
        print(
            f"    {'search.UserPattern (limit ' + str(pattern.seconds) + ' s)':<44} "
            f"{time.perf_counter() - start:>11.3f} s, {outcome}"
        )
    print()


# ---------------------------------------------------------------- throughput


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
        parts = []
        for line in text.splitlines(keepends=True):
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


def throughput(files: list[tuple[str, str]], runs: int) -> tuple[float, float]:
    """MB/s scanning the whole text in one call, and file by file."""
    whole = "".join(text for _, text in files)
    megabytes = len(whole.encode("utf-8")) / 1e6
    one_call = median_seconds(lambda: secrets.scan(whole), runs)
    per_file = median_seconds(lambda: [secrets.scan(text) for _, text in files], runs)
    return megabytes / one_call, megabytes / per_file


def print_throughput(args: argparse.Namespace) -> None:
    files = stdlib_text(int(args.mb * 1e6))
    size = sum(len(text.encode("utf-8")) for _, text in files)
    print(f"throughput: {len(files)} standard-library files, {size / 1e6:.2f} MB, median of {args.runs} runs")
    one_call, per_file = throughput(files, args.runs)
    print(f"  (a) no planted secret:    {one_call:7.1f} MB/s in one call, {per_file:7.1f} MB/s file by file")
    pool = corpus(args.seed + 20_000, per_kind=(size // SPRINKLE_EVERY) // len(SECRET_KINDS) + 2)
    random.Random(args.seed).shuffle(pool)
    sprinkled, used = sprinkle(files, pool)
    one_call_b, per_file_b = throughput(sprinkled, args.runs)
    print(f"  (b) 1 secret per 10 KB:   {one_call_b:7.1f} MB/s in one call, {per_file_b:7.1f} MB/s file by file")
    whole_b = "".join(text for _, text in sprinkled)
    matches_b = secrets.scan(whole_b)
    position, found_b = 0, 0
    for p in used:
        start = whole_b.index(p.text, position) + p.text.index(p.secret)
        position = start
        found_b += covers(matches_b, start, start + len(p.secret)) is not None
    print(f"      found {found_b} / {len(used)} planted secrets ({found_b / len(used):.1%}) in the sprinkled text")
    payload = {"session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Read"}
    payload["tool_response"] = {"file": {"filePath": "/repo/all.py", "content": whole_b}}
    hook = median_seconds(lambda: secrets.redact_value(payload), args.runs)
    print(
        f"  the hook's secret pass (redact_value of a Read payload holding (b), {len(whole_b) / 1e6:.2f} MB): "
        f"{hook:.3f} s"
    )
    whole = "".join(text for _, text in files)
    print("  time per rule on (a) in one call, median of 3 runs: `scan` with no rule (reading the text:")
    print("  decoding escapes, lower-casing), then what each rule alone adds to it")
    every_rule = secrets.SECRET_PATTERNS
    try:
        secrets.SECRET_PATTERNS = ()
        base = median_seconds(lambda: secrets.scan(whole), 3)
        print(f"    {'(no rule)':<24} {base * 1000:8.1f} ms")
        for rule in every_rule:
            secrets.SECRET_PATTERNS = (rule,)
            seconds = max(median_seconds(lambda: secrets.scan(whole), 3) - base, 1e-6)
            print(f"    {rule.name:<24} {seconds * 1000:8.1f} ms {size / 1e6 / seconds:9.1f} MB/s")
    finally:
        secrets.SECRET_PATTERNS = every_rule
    print()
    by_rule: Counter[str] = Counter()
    shown: dict[str, list[str]] = {}
    for name, text in files:
        for m in secrets.scan(text):
            by_rule[m.rule] += 1
            line = text.count("\n", 0, m.start) + 1
            if len(shown.setdefault(m.rule, [])) < 12:
                context = text[max(0, m.start - 30) : m.start].split("\n")[-1]
                shown[m.rule].append(f"{name}:{line}: …{context}{m.preview}")
    print(f"matches in (a), the unplanted standard library, file by file: {sum(by_rule.values())}")
    for rule, n in by_rule.most_common():
        print(f"  {rule:<24} {n:>5}")
        for example in shown[rule]:
            print(f"      {example}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-kind", type=int, default=50, help="fake secrets per kind")
    parser.add_argument("--lookalikes", type=int, default=50, help="look-alikes per kind")
    parser.add_argument("--mb", type=float, default=10.0, help="megabytes of standard-library source to scan")
    parser.add_argument("--runs", type=int, default=5, help="runs per throughput figure (the median is reported)")
    parser.add_argument("--adversarial-mb", type=float, default=1.0, help="size of each crafted input")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a crafted input is stopped")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # the child process of the linear-time figures
    parser.add_argument("--case-mb", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        run_case(args.case, args.case_mb)
        return

    cores = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    print(f"machine: {cores} cores ({usable} usable), load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"python: {platform.python_implementation()} {platform.python_version()} ({sys.executable})")
    print(
        f"cclg {__version__} ({Path(secrets.__file__).parent}), {len(secrets.SECRET_PATTERNS)} rules, seed {args.seed}"
    )
    print()
    print_detection(args)
    print_false_positives(args)
    print_one_detector(args)
    print_linear_time(args)
    print_throughput(args)


if __name__ == "__main__":
    main()
