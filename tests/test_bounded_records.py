"""Issue 27, rule 15 for the store's own files: a record another program wrote (a sync tool, a container
unpacked by hand) nested too deep is bad JSON like any other, never a RecursionError traceback, and
the semantic helper's socket reads its requests with the same bounded reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cclg.core.fields import MAX_JSON_DEPTH
from cclg.core.store import Store
from tests.test_hook import claude_prompt, run_hook

DEEP = "[" * 100_000 + "]" * 100_000
CCLG = str(Path(sys.executable).parent / "cclg")


def _cclg(store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CCLG, "--root", str(store.root), *args], capture_output=True, text=True, timeout=60)


def _added(store: Store) -> tuple[Path, Path]:
    """(the node file, the patch file) of one memory added by the real command."""
    added = _cclg(store, "add", "--content", "the build runs with make", "--source", "seed")
    assert added.returncode == 0, added.stderr
    (node,) = (store.root / "nodes").iterdir()
    (patch,) = (store.root / "patches").iterdir()
    return node, patch


def _nested(record: Path, nesting: str) -> str:
    """The record's text with its metadata replaced by ``nesting``."""
    data = json.loads(record.read_bytes())
    data["metadata"] = {"x": "NESTED"}
    return json.dumps(data).replace('"NESTED"', nesting)


@pytest.mark.parametrize("folder", ["nodes", "patches"])
@pytest.mark.parametrize("nesting", [DEEP, "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH])
def test_rule15_a_record_file_nested_too_deep_is_bad_json_for_every_command(
    store: Store, folder: str, nesting: str
) -> None:
    """Each command answers a deep record file exactly as it answers a record that is not JSON at all
    (its exit code, a validation error or a doctor finding naming the file), never with a traceback;
    the hook still answers."""
    node, patch = _added(store)
    record = node if folder == "nodes" else patch
    deep = _nested(record, nesting)
    commands = [["status"], ["log"], ["doctor"], ["search", "make"], ["show", node.stem], ["stats"], ["reindex"]]
    commands.append(["conflicts"])
    record.write_text('{"broken')
    broken = {tuple(command): _cclg(store, *command) for command in commands}
    record.write_text(deep)
    for command in commands:
        result, expected = _cclg(store, *command), broken[tuple(command)]
        said = result.stdout + result.stderr
        assert "Traceback" not in result.stderr, (command, result.stderr[-2000:])
        assert result.returncode == expected.returncode, (command, said[-2000:], expected.stderr)
        if "not valid JSON" in expected.stdout + expected.stderr:
            assert "nested more than 64 levels deep" in said and record.name in said, (command, said[-2000:])
    hooked = run_hook(store.root, "user-prompt", claude_prompt("how do I run the build?"))
    assert hooked.returncode == 0 and isinstance(json.loads(hooked.stdout), dict)


@pytest.mark.parametrize(
    ("name", "broken", "deep"),
    [
        ("audit/memory_audit.jsonl", b'{"event": "torn\n', b'{"event": "x", "d": ' + DEEP.encode() + b"}\n"),
        ("active/usage.json", b'{"torn', DEEP.encode()),
        ("active/projects.json", b'{"torn', DEEP.encode()),
    ],
)
def test_rule15_a_log_line_or_cache_nested_too_deep_is_damage_not_a_crash(
    store: Store, tmp_path: Path, name: str, broken: bytes, deep: bytes
) -> None:
    """A log line or a derived file (a projection, a cache) nested too deep is read as a torn line or a
    damaged file is: each command answers as it does for those (a cache is rebuilt), never a traceback."""
    _added(store)
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "-C", str(repo), *identity, "commit", "-q", "--allow-empty", "-m", "root"], check=True)
    commands = [["status"], ["audit"], ["doctor"], ["pack", "--query", "make"], ["search", "make"], ["scan", "--store"]]
    commands.append(["add", "--content", "the tests run with pytest", "--source", "seed"])  # in the repository
    path = store.root / name
    kept = path.read_bytes() if path.exists() else b""
    answers = []
    for text in (broken, deep):
        path.write_bytes(kept + text if name.endswith(".jsonl") else text)
        answers.append(
            [
                subprocess.run([CCLG, "--root", str(store.root), *c], capture_output=True, text=True, cwd=repo)
                for c in commands
            ]
        )
    hooked = []
    for session, text in (("window-a", broken), ("window-b", deep)):  # a window is told a memory once
        path.write_bytes(kept + text if name.endswith(".jsonl") else text)
        prompt = claude_prompt("how is the build run?", session=session, cwd=str(repo))
        hooked.append(run_hook(store.root, "user-prompt", prompt))
    told = [answer.stdout.replace(b"window-a", b"window-b") for answer in hooked]
    assert told[1] == told[0] and b"build runs with make" in told[1], hooked[1]
    assert "nested" not in (store.hook_failures_path.read_text() if store.hook_failures_path.exists() else "")
    for command, expected, result in zip(commands, *answers, strict=True):
        assert "Traceback" not in result.stderr, (command, result.stderr[-2000:])
        assert result.returncode == expected.returncode, (command, result.stdout[-2000:], result.stderr[-2000:])
