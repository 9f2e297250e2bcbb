"""Benchmark: wall time of `cclg-hook user-prompt` and `post-tool`, as a ratio to the interpreter's floor.

Run by hand (not part of the test suite):

    python benchmarks/bench_hook.py [--sizes 1000,10000] [--runs 15] [--compare OTHER_CCLG_HOOK]

For each size a store is built as ``bench_pack.py`` builds it (in a temporary
folder, removed afterwards) and indexed; then the installed ``cclg-hook`` is run
the way a host runs it: a fresh process, a Claude Code payload on stdin, its
``cwd`` a folder named after the project the prompt is about (memories are scoped
to projects, and the hook serves the project it works in). Each figure is a median
over ``--runs``, taken in the same run as the floor, and reported as a ratio to it;
``packs`` says how many prompts got a memory pack (the rest were answered with
nothing). The session log and raw evidence grow as the runs go on, as they do in
real use.

``--compare`` times a second ``cclg-hook`` executable (another install, say the
previous release in its own virtualenv) on the same store and queries, each run
right after the first one's, and reports both medians and their ratio.

The baseline is ``python -c "import json, sqlite3"`` of the same interpreter (the floor of
issue 17's targets: user-prompt within 1.5x of it at 10,000 memories and 2.0x at 100,000,
post-tool with a 20 KB tool response within 1.5x at every size).
"""

from __future__ import annotations

import argparse
import json
import random
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
from bench_pack import build_store

from cclg.core.store import Store
from cclg.ledger.index import open_index

HOOK = str(Path(sys.executable).parent / "cclg-hook")
FLOOR = "import json, sqlite3; print('{}')"  # the floor of issue 17's targets (and the hook's empty answer)


def tool_output(run: int) -> str:
    """About 20 KB of test-runner output, different on every run (as real tool responses are)."""
    lines = [f"tests/test_module_{n % 40}.py::test_case_{run}_{n} PASSED" for n in range(420)]
    return "\n".join(lines) + f"\n====== 420 passed in {run}.{run % 97:02d}s ======\n"


def project_folder(work: Path, query: str, projects: list[str]) -> str:
    """The folder the agent works in for ``query``: named after the project the query is about, as a
    developer's checkout is, so the hook serves that project's memories (the other projects' are
    out of scope). Off-topic queries run in the first project's folder."""
    named = [p for p in projects if re.search(rf"\b{re.escape(p)}\b", query)]
    folder = work / "checkouts" / (named[0] if named else projects[0])
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def timed(command: list[str], stdin: bytes) -> float:
    return timed_answer(command, stdin)[0]


def timed_answer(command: list[str], stdin: bytes) -> tuple[float, dict[str, object]]:
    """Wall time of one run and its JSON answer (the hook must answer with JSON)."""
    start = time.perf_counter()
    result = subprocess.run(command, input=stdin, capture_output=True, check=True)
    elapsed = time.perf_counter() - start
    return elapsed, json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--compare", help="another cclg-hook executable to time beside this one")
    args = parser.parse_args()
    if args.compare:
        compare(args)
        return
    work = Path(tempfile.mkdtemp(prefix="cclg-bench-hook-"))
    try:
        print(
            f"{'memories':>9} {'floor ms':>8} {'user-prompt ms':>15} {'ratio':>6} {'packs':>6} "
            f"{'post-tool ms':>13} {'ratio':>6}"
        )
        for size in (int(s) for s in args.sizes.split(",")):
            root = work / f"store-{size}"
            build_store(root, size, work)
            open_index(Store.open(root)).close()
            queries = synth.bench_queries(args.runs, size=size)
            projects = synth.Vocabulary(size, random.Random(7)).projects
            # The baseline is timed between the hook runs, so machine noise hits all alike.
            baselines, prompts, tools, spoke = [], [], [], 0
            for i, query in enumerate(queries):
                base = {
                    "session_id": f"bench-{size}",
                    "transcript_path": "/tmp/t.jsonl",
                    "cwd": project_folder(work, query, projects),
                    "permission_mode": "default",
                }
                baselines.append(timed([sys.executable, "-c", FLOOR], b""))
                prompt = {**base, "hook_event_name": "UserPromptSubmit", "prompt": query}
                elapsed, answer = timed_answer([HOOK, "--root", str(root), "user-prompt"], json.dumps(prompt).encode())
                prompts.append(elapsed)
                spoke += bool(answer)
                tool = {
                    **base,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": f"make test {i}"},
                    "tool_response": {"stdout": tool_output(i)},
                    "tool_use_id": f"toolu_{i}",
                    "duration_ms": 40,
                }
                tools.append(timed([HOOK, "--root", str(root), "post-tool"], json.dumps(tool).encode()))
            baseline = statistics.median(baselines)
            p, t = statistics.median(prompts), statistics.median(tools)
            print(
                f"{size:>9} {baseline * 1000:>8.1f} {p * 1000:>15.1f} {p / baseline:>6.2f} "
                f"{spoke:>3}/{len(queries):<2} {t * 1000:>13.1f} {t / baseline:>6.2f}"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compare(args: argparse.Namespace) -> None:
    """This install's hook against ``args.compare``, interleaved on the same queries, each on its own
    copy of the store: two releases may keep different index schemas, and on one shared store each
    would rebuild the other's index on every call."""
    work = Path(tempfile.mkdtemp(prefix="cclg-bench-hook-"))
    hooks = {"this": HOOK, "other": args.compare}
    try:
        print(f"{'memories':>9} {'event':>12} {'this ms':>8} {'other ms':>9} {'this/other':>11}")
        for size in (int(s) for s in args.sizes.split(",")):
            root = work / f"store-{size}"
            build_store(root, size, work)
            open_index(Store.open(root)).close()
            roots = {"this": root, "other": work / f"store-{size}-other"}
            shutil.copytree(root, roots["other"])
            for leftover in roots["other"].glob("index.sqlite*"):  # the other release builds its own
                leftover.unlink()
            subprocess.run(
                [args.compare, "--root", str(roots["other"]), "user-prompt"],
                input=json.dumps({"session_id": "warm", "prompt": "warm up", "cwd": str(work)}).encode(),
                capture_output=True,
                check=False,
            )
            events = ("user-prompt", "post-tool")
            times: dict[tuple[str, str], list[float]] = {(h, e): [] for h in hooks for e in events}
            projects = synth.Vocabulary(size, random.Random(7)).projects
            for i, query in enumerate(synth.bench_queries(args.runs, size=size)):
                cwd = project_folder(work, query, projects)
                base = {"session_id": f"bench-{size}", "transcript_path": "/tmp/t.jsonl", "cwd": cwd}
                payloads = {
                    "user-prompt": {**base, "hook_event_name": "UserPromptSubmit", "prompt": query},
                    "post-tool": {
                        **base,
                        "hook_event_name": "PostToolUse",
                        "tool_name": "Bash",
                        "tool_input": {"command": f"make test {i}"},
                        "tool_response": {"stdout": tool_output(i)},
                    },
                }
                order = list(hooks.items()) if i % 2 == 0 else list(hooks.items())[::-1]  # no one always goes first
                for event, payload in payloads.items():
                    for name, hook in order:
                        data = json.dumps(payload).encode()
                        times[(name, event)].append(timed([hook, "--root", str(roots[name]), event], data))
            for event in events:
                this, other = (statistics.median(times[(h, event)]) for h in hooks)
                print(f"{size:>9} {event:>12} {this * 1000:>8.1f} {other * 1000:>9.1f} {this / other:>11.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
