"""cclg install / uninstall: merged into the hosts' files, idempotent, backed up, exactly undone."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cclg.cli import cli

OTHER = {
    "model": "opus",
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "other-tool remember", "timeout": 5}]}],
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint-on-save"}]}],
    },
}


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_install_merges_keeps_other_hooks_and_is_idempotent(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(OTHER))
    first = run("install", "claude", "--project", str(tmp_path))
    assert first.exit_code == 0 and "added UserPromptSubmit" in first.output
    data = json.loads(settings.read_text())
    assert data["model"] == "opus"
    prompt_commands = [h["command"] for g in data["hooks"]["UserPromptSubmit"] for h in g["hooks"]]
    assert prompt_commands[0] == "other-tool remember"
    assert any(c.startswith("cclg-hook") and c.endswith("user-prompt") for c in prompt_commands)
    assert json.loads((tmp_path / ".claude" / "settings.json.cclg-backup").read_text()) == OTHER
    before = settings.read_bytes()
    again = run("install", "claude", "--project", str(tmp_path))
    assert again.exit_code == 0 and "nothing to change" in again.output
    assert settings.read_bytes() == before


def test_uninstall_removes_exactly_what_install_added(tmp_path: Path) -> None:
    settings = tmp_path / ".codex" / "hooks.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(OTHER))
    installed = run("install", "codex", "--project", str(tmp_path))
    assert "trust" in installed.output and "/hooks" in installed.output
    removed = run("uninstall", "codex", "--project", str(tmp_path))
    assert removed.exit_code == 0 and "removed" in removed.output
    assert json.loads(settings.read_text()) == OTHER


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    result = run("install", "claude", "--project", str(tmp_path), "--dry-run")
    assert result.exit_code == 0 and "would change" in result.output
    assert not (tmp_path / ".claude").exists()


def test_a_broken_configuration_is_refused_and_left_alone(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{broken")
    result = run("install", "claude", "--project", str(tmp_path))
    assert result.exit_code == 2 and "not valid JSON" in result.stderr
    assert settings.read_text() == "{broken"


def test_the_installed_command_runs_and_answers_json(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run("--root", str(store), "install", "claude", "--project", str(tmp_path)).exit_code == 0
    assert (store / "config.json").is_file(), "install creates the store"
    data = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    command = data["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    words = shlex.split(command)
    assert words[:3] == ["cclg-hook", "--root", str(store.resolve())]
    payload = {"session_id": "s1", "transcript_path": "/t.jsonl", "cwd": str(tmp_path), "prompt": "hello"}
    hook = [sys.executable, "-c", "from cclg.hook import main; main()", *words[1:]]
    result = subprocess.run(hook, input=json.dumps(payload).encode(), capture_output=True, timeout=60)
    assert result.returncode == 0 and json.loads(result.stdout) == {}
    assert (store / "sessions" / "s1.json").is_file(), "the hook wrote to the store install named"


def test_doctor_checks_installed_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cclg.doctor import INSTALL, diagnose
    from cclg.store import Store

    store_root = tmp_path / "store"
    assert run("--root", str(store_root), "install", "claude").exit_code == 0  # into $HOME (a temporary folder)
    store = Store.open(store_root)
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    assert [f for f in diagnose(store).findings if f.check == INSTALL] == []
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    problems = [f for f in diagnose(store).findings if f.check == INSTALL]
    assert problems and all("not on PATH" in f.message for f in problems)
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    (store_root / "config.json").rename(store_root / "config.moved")
    settings = Path.home() / ".claude" / "settings.json"
    from cclg.install import check_installation

    assert any("not a cclg store" in message for path, message in check_installation() if path == str(settings))
