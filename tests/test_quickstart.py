"""`cclg quickstart`: from a machine with no store to a working hook, in a repository with a CLAUDE.md.

Real processes: the installed `cclg`, then the hook command exactly as it was written into Claude
Code's settings, fed a prompt the way Claude Code feeds it. The home folder is the test's own
(conftest), with a `~/.claude` folder: the sign that Claude Code is on the machine.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

CLAUDE_MD = """# Working on the shop

## Tests

- Run the tests with `make check`, never plain pytest: it starts the database first.
- The payments service listens on port 7443 in development.
"""


def _repository(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "CLAUDE.md").write_text(CLAUDE_MD, encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "AGENTS.md").write_text("- Format Python with ruff format before committing.\n", encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.email=dev@example.com", "-c", "user.name=Dev"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    return root


def _cclg(*args: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "cclg", *args],
        cwd=cwd,
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done


def test_quickstart_goes_from_no_store_to_a_hook_that_gives_the_claude_md_facts(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "shop")
    (Path.home() / ".claude").mkdir(parents=True)
    store = Path(os.environ["CCLG_HOME"])
    assert not store.exists()
    done = _cclg("quickstart", "--yes", "--prompt", "how do I run the tests?", cwd=repo / "src")
    assert done.returncode == 0, done.stderr
    assert f"created the store: {store}" in done.stdout
    assert "CLAUDE.md" in done.stdout and "src/AGENTS.md" in done.stdout and "from 2 files" in done.stdout
    assert "connected Claude Code" in done.stdout
    assert "make check" in done.stdout.split("the agent now gets:", 1)[1]  # the sample prompt's pack

    settings = json.loads((Path.home() / ".claude" / "settings.json").read_text(encoding="utf-8"))
    command = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    words = shlex.split(command)
    assert words[0] == "cclg-hook"
    payload = {
        "session_id": "first-session",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(repo),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "which port does the payments service listen on?",
    }
    hook = subprocess.run(words, input=json.dumps(payload), capture_output=True, text=True, timeout=60, check=False)
    assert hook.returncode == 0
    context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "7443" in context and "claude-md:CLAUDE.md" in context

    again = _cclg("quickstart", "--yes", cwd=repo)  # safe to repeat: nothing new is written
    assert again.returncode == 0, again.stderr
    assert "Claude Code: already connected" in again.stdout and "imported 0 memories" in again.stdout


def test_quickstart_outside_a_terminal_needs_yes(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "shop")
    done = _cclg("quickstart", cwd=repo)
    assert done.returncode == 2 and "give --yes" in done.stderr
    assert not Path(os.environ["CCLG_HOME"]).exists()


def test_quickstart_asks_before_each_step_at_a_terminal(tmp_path: Path) -> None:
    """At a terminal it asks; "n" to the import and "y" to Claude Code: no memory, the hook connected."""
    repo = _repository(tmp_path / "shop")
    (Path.home() / ".claude").mkdir(parents=True)
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "cclg", "quickstart"], cwd=repo, stdin=follower, stdout=follower, stderr=follower
    )
    os.close(follower)
    seen = b""
    try:
        for prompt, answer in ((b"Import them", b"n\n"), (b"Connect Claude Code", b"y\n")):
            seen = _read_until(leader, seen, prompt)
            os.write(leader, answer)
        seen = _read_until(leader, seen, b"the agent now gets:")
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        seen += _drain(leader)
        os.close(leader)
    text = seen.decode(errors="replace")
    assert "imported" not in text and "connected Claude Code" in text
    assert "nothing: no memory is about it yet" in text
    assert (Path.home() / ".claude" / "settings.json").exists()


def _read_until(fd: int, seen: bytes, wanted: bytes, seconds: float = 60.0) -> bytes:
    end = time.monotonic() + seconds
    while wanted not in seen:
        if time.monotonic() > end:
            pytest.fail(f"never saw {wanted!r} in {seen!r}")
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:  # the other end closed
                pytest.fail(f"ended before {wanted!r}: {seen!r}")
    return seen


def _drain(fd: int) -> bytes:
    out = b""
    while select.select([fd], [], [], 0.2)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    return out
