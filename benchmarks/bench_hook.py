"""Benchmark: wall time of `cclg-hook user-prompt` and `post-tool`, as a ratio to the interpreter's floor.

Run by hand (not part of the test suite):

    python benchmarks/bench_hook.py [--sizes 1000,10000] [--runs 15] [--compare OTHER_CCLG_HOOK]
    python benchmarks/bench_hook.py --semantic off|helper [--sizes 10000] [--runs 15] [--stores DIR]
    python benchmarks/bench_hook.py --session [--sizes 10000] [--runs 8] [--gap 2]

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

``--semantic`` times user-prompt alone, p50 and p95: ``off`` without a helper
(``CCLG_SEMANTIC=off``: the hook does the event in its own process), ``helper`` with one that
is up and has embedded the store (started by a ``session-start`` and waited for), which takes
the hook's whole event (``cclg.hook.hand_off``); it reports how many of the prompts the
helper answered in time (``cclg doctor``'s counts). ``--stores DIR`` keeps the stores, and the
vectors their helpers embed, for the next run. ``--session`` plays a session as a user
starts one: ``session-start``, then ``--runs`` prompts ``--gap`` seconds apart, first on a
store whose vectors are not embedded yet, then again (a later session: the helper gone, its
vectors kept); it reports the share of prompts the helper answered. Both use a runtime folder
of their own and end the helpers they started.

The baseline is ``python -c "import json, sqlite3"`` of the same interpreter (the floor of
issue 17's targets: user-prompt within 1.5x of it at 10,000 memories and 2.0x at 100,000,
post-tool with a 20 KB tool response within 1.5x at every size).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
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


def timed_answer(
    command: list[str], stdin: bytes, env: dict[str, str] | None = None
) -> tuple[float, dict[str, object]]:
    """Wall time of one run and its JSON answer (the hook must answer with JSON)."""
    start = time.perf_counter()
    result = subprocess.run(command, input=stdin, capture_output=True, check=True, env=env)
    elapsed = time.perf_counter() - start
    return elapsed, json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--compare", help="another cclg-hook executable to time beside this one")
    parser.add_argument("--semantic", choices=("off", "helper"), help="time user-prompt without or with a helper")
    parser.add_argument("--session", action="store_true", help="the share of a session's prompts the helper answered")
    parser.add_argument("--gap", type=float, default=2.0, help="--session: seconds between prompts")
    parser.add_argument("--stores", help="--semantic/--session: keep the stores (and their vectors) in this folder")
    args = parser.parse_args()
    if args.compare:
        compare(args)
        return
    if args.semantic or args.session:
        semantic_runs(args)
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


def _store(args: argparse.Namespace, work: Path, size: int) -> Path:
    """The store of ``size`` memories: built in ``work``, or kept in ``--stores`` (built there once: the
    100,000-memory store takes minutes to build, and its helper minutes more to embed it)."""
    root = (Path(args.stores) if args.stores else work) / f"store-{size}"
    if not root.exists():
        build_store(root, size, root.parent)
        open_index(Store.open(root)).close()
    return root


def _payload(size: int, event: str, **fields: object) -> bytes:
    names = {"user-prompt": "UserPromptSubmit", "session-start": "SessionStart"}
    base = {"session_id": f"bench-{size}", "transcript_path": "/tmp/t.jsonl", "permission_mode": "default"}
    return json.dumps({**base, "hook_event_name": names[event], **fields}).encode()


def _hook_env(runtime: Path, semantic: str | None) -> dict[str, str]:
    env = {**os.environ, "CCLG_SEMANTIC_DIR": str(runtime), "CCLG_SEMANTIC_IDLE": "120"}
    env.pop("CCLG_SEMANTIC", None)
    return {**env, "CCLG_SEMANTIC": "off"} if semantic == "off" else env


def _stop_helpers(runtime: Path) -> None:
    """End the helpers started in ``runtime`` (their pid is in their lock) and wait until they are gone."""
    for lock in runtime.glob("*.lock"):
        pid = lock.read_text().strip()
        if pid.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
    deadline = time.monotonic() + 30
    while list(runtime.glob("*.lock")) and time.monotonic() < deadline:
        time.sleep(0.1)


def _answered(store: Store, before: dict[str, int], settle: float = 0.0) -> tuple[int, int]:
    """Prompts answered and missed since ``before``. The helper counts an answer after the host has it, so
    a count read right after the last prompt may lack that prompt: ``settle`` seconds at most are given
    for the counts to stop moving."""
    from cclg.retrieval import semantic

    now = semantic.answer_counts(store)
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        time.sleep(0.1)
        later = semantic.answer_counts(store)
        if later == now:
            break
        now = later
    return now["answered"] - before["answered"], now["missed"] - before["missed"]


def _warm_up(root: Path, size: int, env: dict[str, str]) -> float:
    """A session-start, then prompts until the helper answers one in time; the seconds it took."""
    from cclg.retrieval import semantic

    start = time.monotonic()
    subprocess.run(
        [HOOK, "--root", str(root), "session-start"],
        input=_payload(size, "session-start"),
        env=env,
        capture_output=True,
    )
    store = Store.open(root)
    while time.monotonic() - start < 600:
        before = semantic.answer_counts(store)
        prompt = _payload(size, "user-prompt", prompt="warm up", cwd=str(root))
        subprocess.run([HOOK, "--root", str(root), "user-prompt"], input=prompt, env=env, capture_output=True)
        if _answered(store, before)[0]:
            break
        time.sleep(1.0)
    return time.monotonic() - start


def semantic_runs(args: argparse.Namespace) -> None:
    """``--semantic`` and ``--session``: user-prompt's p50/p95 without or with a helper, and the share of
    a scripted session's prompts the helper answered."""
    from cclg.retrieval import semantic

    work = Path(tempfile.mkdtemp(prefix="cclg-bench-hook-"))
    runtime = Path(tempfile.mkdtemp(prefix="cb", dir="/tmp"))
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            root = _store(args, work, size)
            queries = synth.bench_queries(args.runs, size=size)
            projects = synth.Vocabulary(size, random.Random(7)).projects
            env = _hook_env(runtime, args.semantic)
            store = Store.open(root)
            rounds = ("not embedded yet", "embedded, helper gone") if args.session else (args.semantic,)
            for label in rounds:
                if args.semantic == "helper":
                    print(f"{size} memories: the helper answered after {_warm_up(root, size, env):.1f} s")
                before, times = semantic.answer_counts(store), []
                if args.session:
                    start = [HOOK, "--root", str(root), "session-start"]
                    subprocess.run(start, input=_payload(size, "session-start"), env=env, capture_output=True)
                for query in queries:
                    if args.session:
                        time.sleep(args.gap)
                    prompt = _payload(size, "user-prompt", prompt=query, cwd=project_folder(work, query, projects))
                    times.append(timed_answer([HOOK, "--root", str(root), "user-prompt"], prompt, env)[0])
                answered, missed = _answered(store, before, settle=2.0)
                p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[18]
                print(
                    f"{size} memories, {label}: user-prompt p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms;"
                    f" the helper answered {answered} of {len(times)} prompts in time, missed {missed}"
                )
                if args.session and label == rounds[0]:  # the next session finds every vector embedded
                    print(f"{size} memories: all embedded and answering after {_warm_up(root, size, env):.1f} s more")
                _stop_helpers(runtime)
    finally:
        _stop_helpers(runtime)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(runtime, ignore_errors=True)


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
