"""Long sessions stay cheap (issue 27, rule 20): the hook never reads a session's whole event log on
a prompt or at the session's end. Its digest (``cclg.ledger.sessions.digest``) is brought up to date with
what the log gained since, and session-end reads the log line by line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cclg.api import add_memory
from cclg.core.store import Store
from cclg.ledger import sessions
from tests.test_hook import HOOK, run_hook

SESSION = "long-session"
# Runs a command and prints its peak memory: started from this small process, the hook's peak is its
# own (a child forked from the test process would count the test's memory as its own).
MEASURED = (
    "import json, resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:])\n"
    "print(json.dumps([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode]), file=sys.stderr)"
)
FACT = "The billing service retries webhooks 5 times with exponential backoff"
PROMPT = "how often does billing retry webhooks"


def _prompt(store: Store, prompt: str = PROMPT) -> str:
    payload = {"session_id": SESSION, "cwd": str(store.root.parent), "prompt": prompt}
    result = run_hook(store.root, "user-prompt", {**payload, "hook_event_name": "UserPromptSubmit"})
    answer: dict[str, Any] = json.loads(result.stdout)
    return str(answer.get("hookSpecificOutput", {}).get("additionalContext", ""))


def _grow(store: Store, megabytes: float) -> None:
    """Tool calls, as the hook logs them, until the session's log holds ``megabytes`` more."""
    step = {"tool": "Bash", "input": "0" * 16, "output": "1" * 16, "tokens": 90, "command": "pytest"}
    line = {"event": "post_tool", "summary": {"tool_name": "Bash", "tool_input": "x" * 700, "step": step}}
    text = json.dumps(line) + "\n"
    with open(store.session_events_path(SESSION), "a", encoding="utf-8") as handle:
        handle.write(text * int(megabytes * 1_000_000 / len(text)))


def test_rule20_a_prompt_reads_only_what_the_log_gained_since(store: Store) -> None:
    node = add_memory(store, FACT, source="user").new_nodes[0]
    assert node.id in _prompt(store), "given at the first prompt"
    _grow(store, 2)
    assert node.id not in _prompt(store), "the context holds it"
    log = store.session_events_path(SESSION)
    covered = sessions.digest(store, SESSION).offset
    data = log.read_bytes()
    # What the digest covers, but its last bytes, becomes lines that say nothing: read again, the log
    # would say the memory was never given.
    blank = b"".join(b" " * len(line) + b"\n" for line in data[: covered - sessions.TAIL_BYTES].split(b"\n")[:-1])
    log.write_bytes(blank + data[len(blank) :])
    assert node.id not in _prompt(store, "and billing's webhook retries?"), "the log was not read again"


def test_rule20_a_log_rewritten_under_the_digest_is_read_again(store: Store) -> None:
    node = add_memory(store, FACT, source="user").new_nodes[0]
    assert node.id in _prompt(store)
    log = store.session_events_path(SESSION)
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join(line for line in lines if b'"user_prompt"' not in line))  # the prompt is gone
    assert sessions.digest(store, SESSION).ever == {}
    assert node.id in _prompt(store), "nothing in the log says it was given: it is given again"


def test_rule20_session_end_on_a_long_log_stays_small(store: Store) -> None:
    node = add_memory(store, FACT, source="user").new_nodes[0]
    assert node.id in _prompt(store)
    _grow(store, 40)
    sessions.digest(store, SESSION)  # the prompts of the session kept it up to date
    payload = {"session_id": SESSION, "cwd": str(store.root.parent), "hook_event_name": "SessionEnd"}
    result = subprocess.run(
        [sys.executable, "-c", MEASURED, *HOOK, "--root", str(store.root), "session-end"],
        input=json.dumps(payload).encode(),
        capture_output=True,
        check=True,
    )
    peak_kb, returncode = json.loads(result.stderr.splitlines()[-1])
    assert json.loads(result.stdout) == {} and returncode == 0
    assert peak_kb < 80 * 1024, f"peak {peak_kb // 1024} MB on a 40 MB log"
    assert store.read_session(SESSION).loaded_memory_ids == [node.id]
    verdict = json.loads(Path(store.root / "audit" / "usage.jsonl").read_text().splitlines()[-1])
    assert verdict["ignored"] == [node.id], "the verdicts still come"
