"""Benchmark: ``cclg sources sync`` on a repository with 50 instruction files, nothing changed and one changed.

Run by hand (not part of the test suite):

    python benchmarks/bench_sources.py [--files 50] [--items 12] [--runs 15]

A git repository is made in a temporary folder (removed afterwards) with ``--files`` instruction files
(``CLAUDE.md`` and ``AGENTS.md`` in nested folders), each ``--items`` list items under two headings;
a store registers it (``cclg sources add claude-md``, the first sync). Then, as real commands in fresh
processes (``python -m cclg``, each its own interpreter start):

- ``nothing``: ``cclg sources sync`` with no file changed (read every file, match, write nothing);
- ``one changed``: one line of one file changed before each run (a refine patch, its raw copy, the
  registry written);
- ``hook, nothing moved``: ``cclg-hook session-start`` in the repository, where the sync step is a
  stat per registered file; and with one file changed (the step syncs it);
- the floor: ``python -c "import cclg.cli"``, to read the others against;
- in process: ``cclg.api.sources.sync_sources`` itself (no interpreter start, no imports), nothing changed
  and one changed.

Figures: median and p90 wall time per case, and each median as a ratio of the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


def make_repo(root: Path, files: int, items: int) -> list[Path]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@e", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@e"}  # fmt: skip
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "--allow-empty", "-m", "root"], check=True, env=env)
    made = []
    for number in range(files):
        folder = root / f"pkg{number // 2:02d}" / ("sub" if number % 4 == 3 else "")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / ("CLAUDE.md" if number % 2 == 0 else "AGENTS.md")
        lines = [f"# Package {number}", "", "## Commands"]
        for item in range(items):
            words = " ".join(WORDS[(number + item + k) % len(WORDS)] for k in range(6))
            lines.append(f"- Rule {number}.{item}: {words}")
            if item == items // 2:
                lines += ["", "## Conventions"]
        path.write_text("\n".join(lines) + "\n")
        made.append(path)
    return made


def timed(command: list[str], *, cwd: Path | None = None, stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, cwd=cwd, input=stdin)
    return time.perf_counter() - start


def in_process(store_root: Path, files: list[Path], runs: int) -> dict[str, list[float]]:
    sys.path.insert(0, str(REPO))
    from cclg.api import memories, sources

    store = memories.open_store(store_root)
    sources.sync_sources(store)  # warm: imports, the OS's file cache
    found: dict[str, list[float]] = {"lib nothing": [], "lib one": []}
    for run in range(runs):
        start = time.perf_counter()
        sources.sync_sources(store)
        found["lib nothing"].append(time.perf_counter() - start)
        target = files[(run * 7) % len(files)]
        target.write_text(target.read_text().replace(": ", f": x{run} ", 1))
        start = time.perf_counter()
        sources.sync_sources(store)
        found["lib one"].append(time.perf_counter() - start)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--items", type=int, default=12)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    env_python = [sys.executable]
    with tempfile.TemporaryDirectory(prefix="bench-sources-") as tmp:
        root = Path(tmp)
        files = make_repo(root / "repo", args.files, args.items)
        store = root / "store"
        cclg = [*env_python, "-m", "cclg", "--root", str(store)]
        subprocess.run([*cclg, "init"], check=True, capture_output=True)
        start = time.perf_counter()
        subprocess.run([*cclg, "sources", "add", "claude-md", str(root / "repo")], check=True, capture_output=True)
        print(f"first sync ({args.files} files, {args.files * args.items} items): {time.perf_counter() - start:.2f}s")
        hook = [*env_python, "-c", "from cclg.hook import main; main()", "--root", str(store), "session-start"]
        payload = json.dumps({"session_id": "bench-s", "source": "startup", "cwd": str(root / "repo")}).encode()
        cases: dict[str, list[float]] = {k: [] for k in ("floor", "nothing", "one changed", "hook nothing", "hook one")}
        for run in range(args.runs):
            cases["floor"].append(timed([*env_python, "-c", "import cclg.cli"]))
            cases["nothing"].append(timed([*cclg, "sources", "sync"]))
            target = files[run % len(files)]
            target.write_text(target.read_text().replace(": ", f": v{run} ", 1))
            cases["one changed"].append(timed([*cclg, "sources", "sync"]))
            cases["hook nothing"].append(timed(hook, stdin=payload))
            target.write_text(target.read_text().replace(": ", f": w{run} ", 1))
            cases["hook one"].append(timed(hook, stdin=payload))
        changed = subprocess.run([*cclg, "sources", "sync", "--json"], check=True, capture_output=True, text=True)
        assert json.loads(changed.stdout)[0]["refined"] == [], "the hook synced the last change itself"
        cases.update(in_process(store, files, args.runs))
        floor = statistics.median(cases["floor"])
        print(f"{'case':<22}{'median ms':>10}{'p90 ms':>9}{'x floor':>9}")
        for name, values in cases.items():
            values.sort()
            median, p90 = statistics.median(values), values[int(0.9 * (len(values) - 1))]
            print(f"{name:<22}{median * 1000:>10.1f}{p90 * 1000:>9.1f}{median / floor:>9.2f}")


if __name__ == "__main__":
    main()
