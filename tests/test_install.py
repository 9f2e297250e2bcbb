"""cclg install / uninstall: merged into the hosts' files, idempotent, backed up, exactly undone."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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


@pytest.mark.parametrize(
    ("host", "place"), [("claude", "user"), ("claude", "project"), ("codex", "user"), ("codex", "project")]
)
@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_dry_run_writes_nothing(tmp_path: Path, host: str, place: str, command: str) -> None:
    """No file of any host, no backup, no store: the dry run of each command only says what would change
    (checked on every file a real run writes, the MCP registration and Codex's config.toml included)."""
    files = _host_files(tmp_path, host, place)
    if command == "uninstall":
        assert run("install", host, *_where(tmp_path, place)).exit_code == 0
    else:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = run(command, host, *_where(tmp_path, place), "--dry-run")
    assert result.exit_code == 0 and all(f"would change {path}:" in result.output for path in files), result.output
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


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


def test_rule15_a_codex_config_nested_too_deep_is_invalid_toml_not_a_traceback(tmp_path: Path) -> None:
    """Python's TOML reader recurses: a config nested 100,000 deep gave a RecursionError traceback."""
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    deep = 'model = "x"\nkeep = ' + "[" * 100_000 + "]" * 100_000 + "\n"
    config.write_text(deep)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cclg"), "install", "codex"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "not valid TOML" in result.stderr, result.stderr[-2000:]
    assert "nested too deep" in result.stderr and "Traceback" not in result.stderr
    assert config.read_text() == deep
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
    hook = [str(Path(sys.executable).parent / words[0]), *words[1:]]  # the installed script, as the host runs it
    result = subprocess.run(hook, input=json.dumps(payload).encode(), capture_output=True, timeout=60)
    assert result.returncode == 0 and json.loads(result.stdout) == {}
    assert (store / "sessions" / "s1.json").is_file(), "the hook wrote to the store install named"


def test_doctor_checks_installed_hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cclg.core.store import Store
    from cclg.maintenance.doctor import INSTALL, diagnose

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
    from cclg.hosts.install import check_installation

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
    assert grace.startswith("mcp_optional_startup_grace_ms = 3000  # cclg install")  # see cclg/hosts/install.py
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
    from cclg.hosts import codex_trust

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
    trusted = _trust_tables(config.read_text())
    assert len(trusted) == 7 and all(key.startswith(f"{project / '.codex' / 'hooks.json'}:") for key in trusted)
    assert run("uninstall", "codex", "--project", str(project)).exit_code == 0
    assert config.read_text() == f'[projects."{project}"]\ntrust_level = "trusted"\n'


# ---------------------------------------------------------------- symlinks, modes and the user's own bytes

USER_JSON = (
    '{\n\t"zeta": 1,\n\t"hooks": {\n\t\t"Stop": [{"hooks": [{"type": "command", "command": "other stop"}]}]\n\t}\n}\n'
)
USER_SERVERS = '{\n  "numStartups": 7,\n  "mcpServers": {\n    "github": {"command": "gh-mcp"}\n  }\n}'


def _host_files(tmp_path: Path, host: str, place: str) -> dict[Path, str]:
    """Every file ``cclg install <host>`` writes for ``place``, with what a user might keep in it."""
    project = tmp_path / "proj"
    if host == "claude" and place == "user":
        return {Path.home() / ".claude" / "settings.json": USER_JSON, Path.home() / ".claude.json": USER_SERVERS}
    if host == "claude":
        return {project / ".claude" / "settings.json": USER_JSON, project / ".mcp.json": USER_SERVERS}
    folder = Path.home() / ".codex" if place == "user" else project / ".codex"
    return {folder / "hooks.json": USER_JSON, folder / "config.toml": CODEX_CONFIG}


def _where(tmp_path: Path, place: str) -> list[str]:
    return ["--user"] if place == "user" else ["--project", str(tmp_path / "proj")]


@pytest.mark.parametrize(
    ("host", "place"), [("claude", "user"), ("claude", "project"), ("codex", "user"), ("codex", "project")]
)
def test_install_and_uninstall_write_through_symlinks_and_keep_the_links(tmp_path: Path, host: str, place: str) -> None:
    """Dotfiles kept in a repository and linked into place: install and uninstall change the file the
    link points to (its mode kept), the link stays a link, and nothing is left in the dotfiles folder."""
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    files = _host_files(tmp_path, host, place)
    targets = {}
    for n, (path, text) in enumerate(files.items()):
        target = dotfiles / f"{n}-{path.name}"
        target.write_bytes(text.encode())
        target.chmod(0o640)
        path.parent.mkdir(parents=True, exist_ok=True)
        if n == 0:  # a chain of two links, the first relative
            middle = dotfiles / f"link-to-{target.name}"
            middle.symlink_to(target.name)
            path.symlink_to(os.path.relpath(middle, path.parent))
        else:
            path.symlink_to(target)
        targets[path] = (os.readlink(path), target)
    result = run("install", host, *_where(tmp_path, place))
    assert result.exit_code == 0, result.output
    for path, (link, target) in targets.items():
        assert path.is_symlink() and os.readlink(path) == link, f"{path} is no longer the user's link"
        assert "cclg" in target.read_text(), f"{target} did not get cclg's entries"
        assert target.stat().st_mode & 0o777 == 0o640, target
        backup = path.with_name(path.name + ".cclg-backup")
        assert not backup.is_symlink() and backup.read_bytes() == files[path].encode()
    assert run("uninstall", host, *_where(tmp_path, place)).exit_code == 0
    for path, (link, target) in targets.items():
        assert path.is_symlink() and os.readlink(path) == link
        assert target.read_bytes() == files[path].encode(), f"{target} is not the user's file again"
        assert target.stat().st_mode & 0o777 == 0o640, target
    assert sorted(p.name for p in dotfiles.iterdir()) == sorted(
        [t.name for _, t in targets.values()] + [f"link-to-0-{next(iter(files)).name}"]
    ), "no temp file or backup is left beside the targets"


JSON_LAYOUTS = {
    "tabs, CRLF, no final newline, own key order": (
        '{\r\n\t"zeta": 1,\r\n\t"hooks": {\r\n\t\t"Stop": [\r\n\t\t\t{"hooks": [{"type": "command",'
        ' "command": "other stop"}]}\r\n\t\t]\r\n\t},\r\n\t"alpha": [1,2]\r\n}'
    ),
    "one line": '{"model":"opus","env":{"A":"1"}}',
    "empty object": "{}\n",
    "spaced empty object": "{ }",
    "four spaces, escapes, blank lines after": (
        '{\n    "title": "caf\\u00e9 \\/ \u00e9",\n    "permissions": {"allow": []},\n'
        '    "mcpServers": {"github": {"command": "gh-mcp"}}\n}\n\n'
    ),
}
TOML_LAYOUTS = {
    "comments": CODEX_CONFIG,
    "no final newline": 'model = "o3"  # mine\n[tools]\nweb = true',
    "CRLF": 'model = "o3"\r\n\r\n# servers\r\n[mcp_servers.github]\r\ncommand = "gh-mcp"\r\n',
    "blank lines at the end": 'model = "o3"\n\n\n',
    "empty": "",
    "comment last, no final newline": '# top\nmodel = "o3"\n# bottom',
}


def _only_inserts(before: str, after: str) -> bool:
    """Whether ``after`` is ``before`` with characters added and none changed or taken away."""
    rest = iter(after)
    return all(char in rest for char in before)


@pytest.mark.parametrize("layout", JSON_LAYOUTS)
@pytest.mark.parametrize("host", ["claude", "codex"])
def test_uninstall_after_install_gives_back_the_users_json_byte_for_byte(
    tmp_path: Path, host: str, layout: str
) -> None:
    original = JSON_LAYOUTS[layout]
    files = [p for p in _host_files(tmp_path, host, "project") if p.suffix == ".json"]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(original.encode())
    assert run("install", host, *_where(tmp_path, "project")).exit_code == 0
    for path in files:
        installed = path.read_bytes().decode()
        assert "cclg" in installed and _only_inserts(original, installed), f"install rewrote {path}:\n{installed}"
        if "\r\n" in original:
            assert installed.count("\n") == installed.count("\r\n"), "the file's CRLF line ends are kept"
        if "\t" in original:
            assert "\n " not in installed, "what install adds is indented with the file's tabs"
    assert run("uninstall", host, *_where(tmp_path, "project")).exit_code == 0
    for path in files:
        assert path.read_bytes() == original.encode(), path


@pytest.mark.parametrize("layout", TOML_LAYOUTS)
def test_uninstall_after_install_gives_back_the_users_config_toml_byte_for_byte(tmp_path: Path, layout: str) -> None:
    """The server's table, the startup grace and Codex's trust tables all come out again, and the file
    is what it was to the byte: comments, CRLF, blank lines and a missing final newline included."""
    original = TOML_LAYOUTS[layout]
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_bytes(original.encode())
    result = run("install", "codex")
    assert result.exit_code == 0 and "added Codex trust" in result.output, result.output
    installed = config.read_bytes().decode()
    assert _only_inserts(original, installed), installed
    if "\r\n" in original:
        assert installed.count("\n") == installed.count("\r\n"), "the file's CRLF line ends are kept"
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_bytes() == original.encode()


def test_uninstall_keeps_what_the_user_edited_after_install_and_their_layout(tmp_path: Path) -> None:
    """Between install and uninstall the user changed a setting and added another (in their tabs);
    uninstall takes out cclg's entries and nothing else."""
    settings = tmp_path / "proj" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(USER_JSON)
    assert run("install", "claude", *_where(tmp_path, "project")).exit_code == 0
    edit = ('\t"zeta": 1,\n', '\t"zeta": 2,\n\t"theme": "dark",\n')
    settings.write_text(settings.read_text().replace(*edit))
    assert run("uninstall", "claude", *_where(tmp_path, "project")).exit_code == 0
    assert settings.read_text() == USER_JSON.replace(*edit)


def test_uninstall_keeps_a_table_and_a_comment_the_user_added_after_cclgs(tmp_path: Path) -> None:
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(CODEX_CONFIG)
    assert run("install", "codex").exit_code == 0
    added = '\n# slower, for long tasks\n[profiles.slow]\nmodel = "o3"\n'
    config.write_text(config.read_text().replace('model = "gpt-5-codex"', 'model = "gpt-5"') + added)
    assert run("uninstall", "codex").exit_code == 0
    assert config.read_text() == CODEX_CONFIG.replace('model = "gpt-5-codex"', 'model = "gpt-5"') + added


def test_install_through_a_link_to_a_file_not_made_yet_creates_the_target(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    settings = Path.home() / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.symlink_to(dotfiles / "settings.json")
    assert run("install", "claude").exit_code == 0
    assert settings.is_symlink() and "cclg-hook" in (dotfiles / "settings.json").read_text()


def test_a_symlink_loop_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    settings = Path.home() / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.symlink_to(settings.parent / "loop.json")
    (settings.parent / "loop.json").symlink_to(settings)
    result = run("install", "claude")
    assert result.exit_code == 2 and "cannot be followed to a file" in result.stderr
    assert sorted(p.name for p in settings.parent.iterdir()) == ["loop.json", "settings.json"]
    assert not Path(os.environ["CCLG_HOME"]).exists(), "not even the store is made"


def _layouts() -> st.SearchStrategy[str]:
    """JSON objects a user might keep as settings, laid out every way ``json.dumps`` can, with CRLF
    or LF, and with or without blank lines or spaces around."""
    leaf = st.one_of(st.integers(-9, 999), st.text(max_size=4), st.booleans(), st.none())
    value = st.recursive(
        leaf,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=8,
    )
    other = st.fixed_dictionaries(
        {}, optional={"hooks": st.just(OTHER["hooks"]), "mcpServers": st.just(OTHER_SERVERS["mcpServers"])}
    )
    document = st.tuples(st.dictionaries(st.sampled_from(["model", "env", "zeta", "é"]), value, max_size=3), other)
    return st.builds(
        lambda doc, indent, compact, ascii, crlf, before, after: (
            before
            + json.dumps(
                {**doc[0], **doc[1]}, indent=indent, separators=(",", ":") if compact else None, ensure_ascii=ascii
            )
            + after
        ).replace("\n", "\r\n" if crlf else "\n"),
        document,
        st.sampled_from([None, 1, 2, 4, "\t"]),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.sampled_from(["", " ", "\n"]),
        st.sampled_from(["", "\n", "\n\n", " "]),
    )


@settings(max_examples=60, deadline=None)
@given(original=_layouts(), host=st.sampled_from(["claude", "codex"]))
def test_uninstall_after_install_gives_back_any_json_layout_byte_for_byte(original: str, host: str) -> None:
    from cclg.hosts import install

    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        hooks_file, servers = install.config_path(host, project), install.mcp_config_path(host, project)
        files = [hooks_file, servers] if host == "claude" else [hooks_file]
        for path in files:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(original.encode())
        install.install(host, project=project, root="/store")
        if host == "claude":
            install.register_mcp(host, project=project, root="/store")
            assert _only_inserts(original, servers.read_bytes().decode())
        assert _only_inserts(original, hooks_file.read_bytes().decode())
        install.uninstall(host, project=project)
        if host == "claude":
            install.unregister_mcp(host, project=project)
        for path in files:
            assert path.read_bytes() == original.encode(), path


TOML_PIECES = [
    'model = "o3"',
    "# a comment",
    "",
    "   ",
    "[tools]",
    "web = true",
    "[mcp_servers.github]",
    'command = "gh-mcp"  # mine',
    'args = [\n  "x",\n]',
    "[[profiles.list]]",
    "n = 1",
    "\t# an indented comment",
]


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.sampled_from(TOML_PIECES), max_size=8),
    newline=st.sampled_from(["\n", "\r\n"]),
    end=st.sampled_from(["", "\n", "\n\n"]),
    trusted=st.integers(0, 3),
)
def test_uninstall_after_install_gives_back_any_config_toml_byte_for_byte(
    lines: list[str], newline: str, end: str, trusted: int
) -> None:
    import tomllib

    from cclg.hosts import codex_trust, install

    original = ("\n".join(lines) + end).replace("\n", newline)
    try:
        tomllib.loads(original)
    except tomllib.TOMLDecodeError:
        assume(False)  # a repeated key or table: no config.toml a user has
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        config = install.mcp_config_path("codex", project)
        config.parent.mkdir()
        config.write_bytes(original.encode())
        install.register_mcp("codex", project=project, root="/store")
        entries = [(f"/hooks.json:stop:0:{n}", f"sha256:{n}") for n in range(trusted)]
        with_trust = codex_trust.with_trust(config.read_bytes().decode(), entries)
        assert _only_inserts(original, with_trust)
        config.write_bytes(codex_trust.without_trust(with_trust).encode())
        install.unregister_mcp("codex", project=project)
        assert config.read_bytes() == original.encode()


def test_an_empty_hooks_object_left_before_install_goes_with_cclgs_entries_and_nothing_else_does(
    tmp_path: Path,
) -> None:
    """JSON has no place to note what install created: uninstall removes the containers its removal
    leaves empty, as install creates them when missing, so one the user had left empty goes too."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{\n\t"model": "x",\n\t"hooks": {}\n}')
    assert run("install", "claude", "--project", str(tmp_path)).exit_code == 0
    assert run("uninstall", "claude", "--project", str(tmp_path)).exit_code == 0
    assert settings.read_text() == '{\n\t"model": "x"\n}'


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
    from cclg.hosts.codex_trust import untrusted_hooks

    hooks_file = tmp_path / "hooks.json"
    answer = {"id": 2, "result": {"data": [{"hooks": [{"command": "cclg-hook stop", "sourcePath": str(hooks_file),
              "trustStatus": "untrusted", "key": "k", "currentHash": "h"}]}]}}  # fmt: skip
    script = tmp_path / "codex"
    lines = ["[" * 100_000 + "]" * 100_000, json.dumps(answer)]
    script.write_text("#!/bin/sh\ncat > /dev/null &\n" + "".join(f"echo '{line}'\n" for line in lines))
    script.chmod(0o755)
    assert untrusted_hooks(hooks_file, tmp_path, codex=str(script)) == [("k", "h")]
