"""cclg install / uninstall: merged into the hosts' files, idempotent, backed up, exactly undone."""

from __future__ import annotations

import json
import os
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


@pytest.fixture(autouse=True)
def fake_codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``codex`` on PATH that answers ``hooks/list`` like Codex's app server (tests/fake_codex.py), so
    no test asks a real Codex the developer may have installed; the host tests ask the real one."""
    folder = tmp_path / "fake-codex-bin"
    folder.mkdir()
    script = folder / "codex"
    fake = Path(__file__).parent / "fake_codex.py"
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(fake))} "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return script


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
    assert not Path(os.environ["CCLG_HOME"]).exists(), "not even the store is made"


def test_a_broken_codex_config_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('model = "x\n[broken')
    result = run("install", "codex")
    assert result.exit_code == 2 and "not valid TOML" in result.stderr
    assert config.read_text() == 'model = "x\n[broken'
    assert sorted(p.name for p in config.parent.iterdir()) == ["config.toml"]
    assert not Path(os.environ["CCLG_HOME"]).exists()


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

    problems = check_installation()
    assert any("not a cclg store" in message for path, message in problems if path == str(settings))
    claude_json = str(Path.home() / ".claude.json")
    assert any("not a cclg store" in message for path, message in problems if path == claude_json), "the MCP entry too"


# ---------------------------------------------------------------- registering cclg-mcp

OTHER_SERVERS = {"numStartups": 7, "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": []}}}
CODEX_CONFIG = """# my settings
model = "gpt-5-codex"

[mcp_servers.github]
command = "gh-mcp"  # keep this comment

[profiles.fast]
model = "o4-mini"
"""


@pytest.mark.parametrize("place", ["project", "user"])
def test_install_claude_registers_the_mcp_server_and_uninstall_removes_it(tmp_path: Path, place: str) -> None:
    where = ["--project", str(tmp_path)] if place == "project" else ["--user"]
    servers = tmp_path / ".mcp.json" if place == "project" else Path.home() / ".claude.json"
    servers.parent.mkdir(parents=True, exist_ok=True)
    servers.write_text(json.dumps(OTHER_SERVERS, indent=2) + "\n")
    original = servers.read_bytes()
    result = run("--root", str(tmp_path / "store"), "install", "claude", *where)
    assert result.exit_code == 0 and "added mcp server cclg: cclg-mcp --root" in result.output
    data = json.loads(servers.read_text())
    assert data["numStartups"] == 7 and data["mcpServers"]["github"] == OTHER_SERVERS["mcpServers"]["github"]
    entry = data["mcpServers"]["cclg"]
    assert entry["command"] == "cclg-mcp" and entry["args"] == ["--root", str((tmp_path / "store").resolve())]
    before = servers.read_bytes()
    assert "nothing to change" in run("--root", str(tmp_path / "store"), "install", "claude", *where).output
    assert servers.read_bytes() == before, "installing twice changes nothing"
    removed = run("uninstall", "claude", *where)
    assert removed.exit_code == 0 and "removed mcp server cclg" in removed.output
    assert servers.read_bytes() == original


def test_install_codex_adds_its_table_to_config_toml_and_keeps_the_rest_byte_for_byte(tmp_path: Path) -> None:
    import tomllib

    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(CODEX_CONFIG)
    result = run("install", "codex")
    assert result.exit_code == 0 and "added mcp server cclg: cclg-mcp" in result.output
    text = config.read_text()
    grace, rest = text.split("\n", 1)
    assert grace.startswith("mcp_optional_startup_grace_ms = 3000  # cclg install")  # see cclg/install.py
    assert rest.startswith(CODEX_CONFIG.rstrip("\n")) and "# keep this comment" in text
    data = tomllib.loads(text)
    assert data["mcp_optional_startup_grace_ms"] == 3000
    # The tests' store is $CCLG_HOME, not ~/.cclg, so the registration names it.
    assert data["mcp_servers"]["cclg"]["command"] == "cclg-mcp"
    assert data["mcp_servers"]["cclg"]["args"] == ["--root", str(Path(os.environ["CCLG_HOME"]).resolve())]
    assert data["mcp_servers"]["github"] == {"command": "gh-mcp"} and data["profiles"]["fast"]["model"] == "o4-mini"
    assert "nothing to change" in run("install", "codex").output
    assert config.read_text() == text
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_text() == CODEX_CONFIG


def test_codex_project_install_registers_the_server_in_the_projects_codex_folder(tmp_path: Path) -> None:
    """Codex 0.171 reads a trusted project's .codex/config.toml and .codex/hooks.json: a project install
    writes both there (it only told the user to run `codex mcp add` before) and touches nothing at home."""
    import tomllib

    result = run("--root", str(tmp_path / "store"), "install", "codex", "--project", str(tmp_path))
    assert result.exit_code == 0 and "once you trust the project" in result.output
    config = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert config["mcp_servers"]["cclg"]["command"] == "cclg-mcp"
    assert config["mcp_servers"]["cclg"]["args"] == ["--root", str((tmp_path / "store").resolve())]
    assert (tmp_path / ".codex" / "hooks.json").exists()
    # Codex honours the startup grace in a trusted project's config (benchmarks/RESULTS.md, issue 16).
    assert config["mcp_optional_startup_grace_ms"] == 3000
    assert not (Path.home() / ".codex").exists()
    assert run("uninstall", "codex", "--project", str(tmp_path)).exit_code == 0
    assert "cclg" not in tomllib.loads((tmp_path / ".codex" / "config.toml").read_text()).get("mcp_servers", {})


def test_a_foreign_server_named_cclg_is_left_alone(tmp_path: Path) -> None:
    servers = tmp_path / ".mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"cclg": {"command": "someone-else"}}}))
    result = run("install", "claude", "--project", str(tmp_path))
    assert result.exit_code == 2 and "not cclg-mcp" in result.stderr
    assert json.loads(servers.read_text()) == {"mcpServers": {"cclg": {"command": "someone-else"}}}
    assert not (tmp_path / ".claude").exists(), "nothing is written when part of the install is refused"
    assert not Path(os.environ["CCLG_HOME"]).exists()


def test_project_and_user_together_are_refused(tmp_path: Path) -> None:
    result = run("install", "claude", "--project", str(tmp_path), "--user")
    assert result.exit_code == 2 and "not both" in result.stderr


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_install_and_uninstall_keep_each_rewritten_files_mode(tmp_path: Path, host: str) -> None:
    """~/.claude.json and ~/.codex/config.toml hold tokens: a 0600 file stays 0600 (and its backup
    too) whatever the umask, through install and uninstall alike."""
    if host == "claude":
        files = {
            Path.home() / ".claude.json": json.dumps(OTHER_SERVERS),
            Path.home() / ".claude" / "settings.json": "{}",
        }
        where = ["--user"]
    else:
        files = {Path.home() / ".codex" / "config.toml": CODEX_CONFIG}
        where = []
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o600)
    old_umask = os.umask(0o022)
    try:
        assert run("install", host, *where).exit_code == 0
        assert run("uninstall", host, *where).exit_code == 0
    finally:
        os.umask(old_umask)
    for path in files:
        if path.exists():
            assert path.stat().st_mode & 0o777 == 0o600, path
        backup = path.with_name(path.name + ".cclg-backup")
        if backup.exists():
            assert backup.stat().st_mode & 0o777 == 0o600, backup
    assert any(p.with_name(p.name + ".cclg-backup").exists() for p in files), "something was rewritten"


def test_install_turns_the_code_graph_on_and_keeps_the_store_config(tmp_path: Path) -> None:
    """A new user never saw the CodeGraphPack: it was opt-in. Install turns it on in the store's config,
    keeps every other setting, and leaves a choice the user made alone."""
    root = tmp_path / "store"
    assert run("--root", str(root), "install", "claude", "--project", str(tmp_path)).exit_code == 0
    config = json.loads((root / "config.json").read_text())
    assert config["hook"] == {"include_codegraph": True} and config["schema_version"]
    config["hook"] = {"include_codegraph": False, "max_chars": 6000}
    (root / "config.json").write_text(json.dumps(config))
    assert run("--root", str(root), "install", "claude", "--project", str(tmp_path)).exit_code == 0
    assert json.loads((root / "config.json").read_text()) == config


def test_install_codex_keeps_a_users_own_mcp_startup_grace(tmp_path: Path) -> None:
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("mcp_optional_startup_grace_ms = 500\n" + CODEX_CONFIG)
    result = run("install", "codex")
    assert result.exit_code == 0 and "mcp_optional_startup_grace_ms" not in result.output
    assert config.read_text().startswith("mcp_optional_startup_grace_ms = 500\n")
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_text() == "mcp_optional_startup_grace_ms = 500\n" + CODEX_CONFIG


def test_codex_project_install_leaves_the_grace_to_a_user_who_set_it(tmp_path: Path) -> None:
    """A project's setting overrides the user's: a grace the user chose in ~/.codex/config.toml stays theirs."""
    import tomllib

    user_config = Path.home() / ".codex" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text("mcp_optional_startup_grace_ms = 500\n")
    assert run("install", "codex", "--project", str(tmp_path)).exit_code == 0
    assert "mcp_optional_startup_grace_ms" not in tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert user_config.read_text() == "mcp_optional_startup_grace_ms = 500\n"


def test_install_codex_follows_codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex reads its configuration from $CODEX_HOME when it is set; install wrote to ~/.codex anyway."""
    import tomllib

    codex_home = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    assert run("install", "codex").exit_code == 0
    assert (codex_home / "hooks.json").exists()
    assert tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["cclg"]["command"] == "cclg-mcp"
    assert not (Path.home() / ".codex").exists()
    assert run("uninstall", "codex").exit_code == 0
    assert "cclg" not in (codex_home / "config.toml").read_text()


# ---------------------------------------------------------------- Codex's trust in the hooks


def _trust_tables(text: str) -> dict[str, str]:
    import tomllib

    return {key: state["trusted_hash"] for key, state in tomllib.loads(text).get("hooks", {}).get("state", {}).items()}


def test_install_codex_records_trust_for_exactly_its_hooks_and_uninstall_removes_it(tmp_path: Path) -> None:
    """Codex runs no hook the user has not trusted; `cclg install codex` is that approval for the
    handlers it writes, and only for those: another tool's hook in the same hooks.json stays untrusted."""
    import hashlib

    codex_dir = Path.home() / ".codex"
    codex_dir.mkdir(parents=True)
    config = codex_dir / "config.toml"
    config.write_text(CODEX_CONFIG)
    (codex_dir / "hooks.json").write_text(json.dumps(OTHER))
    result = run("install", "codex")
    assert result.exit_code == 0, result.output
    assert "open /hooks" not in result.output and result.output.count("added Codex trust for") == 7
    trusted = _trust_tables(config.read_text())
    hooks = json.loads((codex_dir / "hooks.json").read_text())["hooks"]
    ours = [
        h["command"]
        for groups in hooks.values()
        for g in groups
        for h in g["hooks"]
        if h["command"].startswith("cclg-hook")
    ]
    assert sorted(trusted.values()) == sorted("sha256:" + hashlib.sha256(c.encode()).hexdigest() for c in ours)
    assert all(key.startswith(f"{codex_dir / 'hooks.json'}:") for key in trusted)
    assert ":user_prompt_submit:0:" not in " ".join(trusted), "the other tool's handler (group 0) is not trusted"
    assert (codex_dir / "config.toml.cclg-backup").read_text() == CODEX_CONFIG, "the backup is the file before install"
    again = run("install", "codex")
    assert "added Codex trust" not in again.output and _trust_tables(config.read_text()) == trusted
    removed = run("uninstall", "codex")
    assert removed.exit_code == 0 and removed.output.count("removed Codex trust for") == 7
    assert config.read_text() == CODEX_CONFIG


def test_a_users_own_hook_state_is_kept(tmp_path: Path) -> None:
    """Trust the user recorded in Codex (for any key, one of cclg's included) is theirs: install adds
    nothing for it and uninstall leaves it."""
    codex_dir = Path.home() / ".codex"
    codex_dir.mkdir(parents=True)
    config = codex_dir / "config.toml"
    key = f"{codex_dir / 'hooks.json'}:stop:0:0"
    own = f'{CODEX_CONFIG}\n[hooks.state."{key}"]\ntrusted_hash = "sha256:an-older-version"\n'
    config.write_text(own)
    result = run("install", "codex")
    assert result.exit_code == 0 and result.output.count("added Codex trust for") == 6
    assert _trust_tables(config.read_text())[key] == "sha256:an-older-version"
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_text() == own


@pytest.mark.parametrize("why", ["no-trust", "no codex", "codex exits", "codex silent"])
def test_without_trust_recorded_install_says_how_to_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_codex: Path, why: str
) -> None:
    from cclg import codex_trust

    args = ["install", "codex"]
    if why == "no-trust":
        args.append("--no-trust")
    elif why == "no codex":
        fake_codex.unlink()
    else:
        monkeypatch.setenv("FAKE_CODEX", why.split()[1].replace("exits", "exit"))
        monkeypatch.setattr(codex_trust, "ASK_TIMEOUT_S", 1.0)
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert "open /hooks in Codex" in result.output and "Codex trust" not in result.output
    assert "hooks" not in __import__("tomllib").loads((Path.home() / ".codex" / "config.toml").read_text())


def test_codex_project_install_trusts_its_hooks_once_the_project_is_trusted(tmp_path: Path) -> None:
    """Codex reads no hook of a project the user has not trusted, so there is nothing to trust yet: install
    says to run it again after trusting the project, and then records the trust (in the user's config)."""
    project = tmp_path / "proj"
    project.mkdir()
    first = run("install", "codex", "--project", str(project))
    assert first.exit_code == 0 and "Codex trust" not in first.output and "run this install again" in first.output
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[projects."{project}"]\ntrust_level = "trusted"\n')
    second = run("install", "codex", "--project", str(project))
    assert second.output.count("added Codex trust for") == 7
    assert all(key.startswith(f"{project / '.codex' / 'hooks.json'}:") for key in _trust_tables(config.read_text()))
    assert run("uninstall", "codex", "--project", str(project)).exit_code == 0
    assert config.read_text() == f'[projects."{project}"]\ntrust_level = "trusted"\n'


def test_rule15_a_settings_file_nested_too_deep_is_refused_like_broken_json(tmp_path: Path) -> None:
    """Issue 27, rule 15: the host's file is read with the bounded reader (a RecursionError before)."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    deep = '{"model": ' + "[" * 100_000 + "]" * 100_000 + "}"
    settings.write_text(deep)
    result = CliRunner().invoke(cli, ["install", "claude", "--project", str(tmp_path)])
    assert result.exit_code == 2 and "nested more than 64 levels deep" in result.stderr, result.output
    assert settings.read_text() == deep


def test_rule15_codex_answers_are_read_with_the_bounded_reader(tmp_path: Path) -> None:
    """A line nested too deep in what Codex's app server prints is skipped like any line that is not JSON
    (a RecursionError ended the install before)."""
    from cclg.codex_trust import untrusted_hooks

    hooks_file = tmp_path / "hooks.json"
    answer = {"id": 2, "result": {"data": [{"hooks": [{"command": "cclg-hook stop", "sourcePath": str(hooks_file),
              "trustStatus": "untrusted", "key": "k", "currentHash": "h"}]}]}}  # fmt: skip
    script = tmp_path / "codex"
    lines = ["[" * 100_000 + "]" * 100_000, json.dumps(answer)]
    script.write_text("#!/bin/sh\ncat > /dev/null &\n" + "".join(f"echo '{line}'\n" for line in lines))
    script.chmod(0o755)
    assert untrusted_hooks(hooks_file, tmp_path, codex=str(script)) == [("k", "h")]
