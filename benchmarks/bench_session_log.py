"""Benchmark: `cclg-hook user-prompt` and `session-end` on a session whose event log is ~90 MB.

Run by hand (not part of the test suite):

    python benchmarks/bench_session_log.py [--megabytes 90] [--runs 5] [--compare OTHER_SOURCE_TREE]

A store gets 40 memories and one session, opened by the real hook (session start, a prompt); then
the session's log is grown to ``--megabytes`` with the events a long session records: turns of a
prompt (with the memories it was given), 40 tool calls (a 500-character input summary, the
sensors' step, now and then a failure and a rule given) and a stop, each with its raw evidence
file, as the hook writes them. Each figure is a fresh process fed the host's payload on stdin, its
wall time and its own peak memory (``ru_maxrss``, taken by a small launcher process), the median
over ``--runs`` after one warm-up run.

``--compare`` names another cclg source tree (a ``git worktree`` of an older commit, say): its hook
runs on the same store, right after this one's each time (A B A B ...), so both see the same log
and the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SESSION = "bench-long-session"
HOOK = "import sys; from cclg.hook import main; sys.argv[0] = 'cclg-hook'; main()"


def hook_command(tree: Path, root: Path, event: str) -> tuple[list[str], dict[str, str]]:
    """The hook of the source tree ``tree`` (its ``cclg`` package first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return [sys.executable, "-c", HOOK, "--root", str(root), "--agent", "claude", event], env


# Runs the hook and prints its wall time and peak memory. Started from this small process, the hook's
# peak is its own: a child forked from the benchmark would count the benchmark's memory as its own.
MEASURED = (
    "import json, resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "done = subprocess.run(sys.argv[1:])\n"
    "wall = time.perf_counter() - start\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(json.dumps([wall, peak, done.returncode]), file=sys.stderr)"
)


def run(tree: Path, root: Path, event: str, payload: dict[str, object]) -> tuple[float, float]:
    """(wall seconds, peak MB) of one hook process."""
    command, env = hook_command(tree, root, event)
    result = subprocess.run(
        [sys.executable, "-c", MEASURED, *command],
        input=json.dumps(payload).encode(),
        capture_output=True,
        env=env,
        cwd=tree,  # `python -c` puts the working folder first on the path
    )
    wall, peak_kb, returncode = json.loads(result.stderr.splitlines()[-1])
    assert returncode == 0
    json.loads(result.stdout)  # the hook always answers with JSON
    return wall, peak_kb / 1024


def build(root: Path, work: Path, megabytes: int) -> dict[str, object]:
    """The store, with the session's log grown to ``megabytes``; returns the session's base payload."""
    cclg = [sys.executable, "-m", "cclg", "--root", str(root)]
    subprocess.run([*cclg, "init"], check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(HERE)})
    lines = "".join(
        json.dumps(
            {"content": f"Service {n} listens on port {8000 + n} and logs to /var/log/svc{n}.log", "source": "user"}
        )
        + "\n"
        for n in range(40)
    )
    (work / "memories.jsonl").write_text(lines)
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    subprocess.run([*cclg, "import-jsonl", str(work / "memories.jsonl")], check=True, capture_output=True, env=env)
    base: dict[str, object] = {
        "session_id": SESSION,
        "transcript_path": None,
        "cwd": str(work),
        "permission_mode": "default",
    }
    run(HERE, root, "session-start", {**base, "hook_event_name": "SessionStart", "source": "startup"})
    run(
        HERE,
        root,
        "user-prompt",
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": "which port does service 3 use"},
    )
    ids = [json.loads(p.read_text())["id"] for p in sorted((root / "nodes").glob("*.json"))]
    grow(root, ids, megabytes * 1_000_000)
    return base


def grow(root: Path, ids: list[str], size: int) -> None:
    """Append turns of events, as the hook records them, until the log holds ``size`` bytes."""
    log = root / "sessions" / f"{SESSION}.events.jsonl"
    raw = root / "raw"
    turn = 0
    with open(log, "a", encoding="utf-8") as handle:
        while handle.tell() < size:
            turn += 1
            given = [ids[(turn * 3 + k) % len(ids)] for k in range(3)]
            summary = {"prompt": f"turn {turn}: look at service {turn % 40}", "cwd": "/w", "at": 1.0,
                       "loaded_memory_ids": given, "listed_retired_ids": [], "tokens": 300}  # fmt: skip
            handle.write(record(raw, turn, 0, "user_prompt", summary, {"prompt": summary["prompt"]}))
            for call in range(1, 41):
                command = f"grep -rn port{turn}_{call} services/ && pytest -q tests/test_svc{call}.py"
                failure = "AssertionError: expected N got N" if call % 13 == 0 else None
                step = {"tool": "Bash", "input": f"{turn:08x}{call:08x}", "output": f"{call:016x}", "tokens": 120,
                        "at": 2.0, "command": "pytest", "read_only": False}  # fmt: skip
                if failure:
                    step["failure"] = failure
                summary = {"tool_name": "Bash", "tool_use_id": f"toolu_{turn}_{call}", "duration_ms": 40,
                           "tool_input": json.dumps({"command": command + " " + "x" * 400}), "step": step,
                           "rules_given": ["rule.0123456789ab"] if call == 7 and turn % 50 == 0 else []}  # fmt: skip
                response = {"stdout": f"services/svc{call}.py:12: port {8000 + call}\n" * 4, "exit_code": 0}
                payload = {"tool_name": "Bash", "tool_input": {"command": command}, "tool_response": response}
                handle.write(record(raw, turn, call, "post_tool", summary, payload))
            handle.write(record(raw, turn, 99, "stop", {"reason": None}, {"last_assistant_message": "Done."}))


def record(raw: Path, turn: int, call: int, event: str, summary: dict[str, object], payload: dict[str, object]) -> str:
    name = f"{SESSION}-{event}-{turn:06d}{call:02d}.json"
    data = json.dumps({"event": event, "payload": payload, "created_at": "2026-12-01T00:00:00+00:00"}, indent=2) + "\n"
    (raw / name).write_text(data)
    line = {"event": event, "summary": summary, "raw": f"raw/{name}", "raw_bytes": len(data),
            "created_at": "2026-12-01T00:00:00+00:00"}  # fmt: skip
    return json.dumps(line) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=90)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compare", type=Path, help="another cclg source tree, timed beside this one")
    args = parser.parse_args()
    trees = {"this": HERE, **({"other": args.compare.resolve()} if args.compare else {})}
    work = Path(tempfile.mkdtemp(prefix="cclg-bench-session-"))
    try:
        root = work / "store"
        base = build(root, work, args.megabytes)
        log = root / "sessions" / f"{SESSION}.events.jsonl"
        with open(log, "rb") as handle:
            print(f"session log: {log.stat().st_size / 1e6:.1f} MB, {sum(1 for _ in handle):,} events")
        payloads = {
            "user-prompt": {**base, "hook_event_name": "UserPromptSubmit", "prompt": "and service 7's port?"},
            "session-end": {**base, "hook_event_name": "SessionEnd", "reason": "exit"},
        }
        for event, payload in payloads.items():
            figures: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
            for attempt in range(args.runs + 1):  # the first is a warm-up
                for name, tree in trees.items():
                    measured = run(tree, root, event, payload)
                    if attempt:
                        figures[name].append(measured)
            for name, runs in figures.items():
                wall = statistics.median(w for w, _ in runs)
                peak = statistics.median(p for _, p in runs)
                spread = f"{min(w for w, _ in runs):.3f}-{max(w for w, _ in runs):.3f}"
                print(f"{event:<12} {name:<6} wall {wall:.3f} s (min-max {spread})  peak {peak:.0f} MB")
        failures = root / "audit" / "hook_failures.jsonl"
        if failures.exists():  # a hook that failed answered {} fast: its figures are not the work's
            sys.exit(f"hook failures, the figures do not count:\n{failures.read_text()[-4000:]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
