"""``cclg install`` / ``cclg uninstall``: merge the hook templates into a host's configuration,
and register ``cclg-mcp`` with the host.

The templates (``cclg/hosts/templates/``, also ``hooks/`` at the top of the repository)
say which host events run which ``cclg-hook`` command. Installing merges them into
the host's JSON configuration:

- what is already there is kept (other tools' hooks, other settings);
- installing twice changes nothing (a handler already present is not added again);
- the previous file is copied to ``<file>.cclg-backup`` before it is changed;
- the file is edited as text (``config_text``), so every byte cclg did not add stays, and
  written atomically, through a symlink to the file it points to (the link stays a link), with
  its mode kept;
- ``uninstall`` removes exactly the handlers whose command is ``cclg-hook ...``,
  and the groups and events that this leaves empty: right after an install, it gives the
  file back byte for byte.

The MCP server is registered where each host reads its servers: for Claude Code
``mcpServers.cclg`` in ``.mcp.json`` (a project) or ``~/.claude.json`` (the
user, as ``claude mcp add --scope user`` does); for Codex the ``[mcp_servers.cclg]``
table of ``config.toml`` (``~/.codex/``, or the project's ``.codex/``, which Codex reads for a
project the user trusts), added and removed as text so that the rest of the file, comments
included, stays as it was. For Codex, install also records the user's trust in the hooks it
wrote (``codex_trust``), which Codex requires before it runs a hook.

``install_host`` and ``uninstall_host`` are the whole of ``cclg install`` / ``cclg uninstall``:
the hooks, the MCP registration, the store and its code-graph setting, and Codex's trust.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from cclg.core.fields import parse_json
from cclg.core.files import atomic_write
from cclg.core.store import Store, resolve_root
from cclg.errors import UsageError
from cclg.hosts import codex_trust, config_text

HOSTS = ("claude", "codex")
TEMPLATES = {"claude": "claude-settings.json", "codex": "codex-hooks.json"}
FILES = {"claude": Path(".claude") / "settings.json", "codex": Path(".codex") / "hooks.json"}
HOOK_COMMAND = "cclg-hook"
MCP_COMMAND = "cclg-mcp"
MCP_NAME = "cclg"
CODEX_MCP_TABLE = f"[mcp_servers.{MCP_NAME}]"
# Codex waits at most this long (about 1 s by default) for MCP servers that are not `required` before its
# first request; cclg-mcp answers in 0.5 s on a quiet machine, up to 1.2 s on a busy one (RESULTS.md).
# A bounded wait, unlike `required`: a broken server costs at most this and never stops Codex. Added at
# the top of config.toml (a top-level key), only where the user set none, and removed by uninstall.
CODEX_GRACE_KEY = "mcp_optional_startup_grace_ms"
CODEX_GRACE_LINE = f"{CODEX_GRACE_KEY} = 3000  # cclg install: wait up to 3 s for MCP servers to start"


@dataclass
class Change:
    path: Path
    added: list[str]
    removed: list[str]
    backup: Path | None
    written: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "added": self.added,
            "removed": self.removed,
            "backup": str(self.backup) if self.backup else None,
            "written": self.written,
        }


def config_path(host: str, project: Path | None) -> Path:
    """The host's hook configuration: in the project folder, else in the home folder."""
    if host not in HOSTS:
        raise UsageError(f"unknown host {host!r}; use {' or '.join(HOSTS)}")
    if project is None and host == "codex":
        return codex_home() / FILES[host].name
    return (project if project is not None else Path.home()) / FILES[host]


def codex_home() -> Path:
    """Where Codex keeps the user's configuration: ``$CODEX_HOME``, else ``~/.codex``."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


HOST_COMMANDS = {"claude": "claude", "codex": "codex"}  # each host's command, as its installer puts it on PATH


def present_hosts() -> dict[str, bool]:
    """The hosts this machine has, each with whether its command is on ``PATH``: a host is present when
    its command is, or its configuration folder (``~/.claude``, Codex's home) exists."""
    import shutil

    folders = {"claude": Path.home() / ".claude", "codex": codex_home()}
    found = {}
    for host in HOSTS:
        command = shutil.which(HOST_COMMANDS[host]) is not None
        if command or folders[host].is_dir():
            found[host] = command
    return found


def template(host: str, root: str | None = None) -> dict[str, Any]:
    """The host's hook template; with ``root``, every command names that store."""
    data: dict[str, Any] = json.loads((Path(__file__).parent / "templates" / TEMPLATES[host]).read_text("utf-8"))
    if root is not None:
        for groups in data["hooks"].values():
            for group in groups:
                for handler in group["hooks"]:
                    words = handler["command"].split(" ")
                    handler["command"] = " ".join([words[0], "--root", json.dumps(root), *words[1:]])
    return data


def _read(path: Path, key: str = "hooks") -> tuple[str | None, dict[str, Any]]:
    """The file's text exactly as it is (None when there is none) and its JSON object."""
    text = _read_text(path)
    if text is None:
        return None, {}
    try:
        data = parse_json(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix or move it, nothing was changed") from None
    if not isinstance(data, dict) or not isinstance(data.get(key, {}), dict):
        raise UsageError(f"{path} does not hold a JSON object with a {key!r} object; nothing was changed")
    return text, data


def _read_text(path: Path) -> str | None:
    """The file's text, through any symlink, with its line ends as they are; None when there is none."""
    _real_file(path)  # a symlink loop is refused before anything is written
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 ({exc}); fix or move it, nothing was changed") from None


def _real_file(path: Path) -> Path:
    """The file a write of ``path`` replaces: the end of its chain of symlinks (the links stay links),
    or ``path`` itself."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        return Path(os.path.realpath(path))  # a new file, or a link to a file not made yet
    except OSError as exc:
        raise UsageError(f"{path} cannot be followed to a file ({exc.strerror}); nothing was changed") from None


def _edited_json(path: Path, text: str, edits: list[Callable[[str], str]], expected: dict[str, Any]) -> str:
    """``text`` after ``edits`` (``config_text``'s), checked to parse to ``expected``."""
    try:
        for edit in edits:
            text = edit(text)
        if parse_json(text) == expected:
            return text
    except (ValueError, IndexError):
        pass
    raise UsageError(f"{path} is laid out in a way cclg cannot edit safely; nothing was changed")


def _is_ours(handler: object) -> bool:
    return isinstance(handler, dict) and str(handler.get("command", "")).split(" ")[0] == HOOK_COMMAND


def _write_text(path: Path, text: str, keep_backup: bool = False) -> Path | None:
    """Replace the file at ``path`` atomically, keeping the previous version as ``<file>.cclg-backup``
    beside ``path`` (unless ``keep_backup``: the backup already there, made earlier in the same install,
    stays). A symlink stays one: the file it leads to is replaced, in its own folder, keeping its mode."""
    backup = None
    if keep_backup:
        backup = path.with_name(path.name + ".cclg-backup")
    elif path.exists():
        backup = path.with_name(path.name + ".cclg-backup")
        shutil.copy2(path, backup)
    target = _real_file(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, text.encode("utf-8"), mode=0o644)  # keeps the mode of a file it replaces
    return backup


def install(host: str, *, project: Path | None = None, root: str | None = None, dry_run: bool = False) -> Change:
    """Merge the host's template into its configuration (edited as text: the rest of the file stays as
    it was, to the byte); returns what changed."""
    path = config_path(host, project)
    text, data = _read(path)
    edits: list[Callable[[str], str]] = []
    if "hooks" not in data:
        edits.append(partial(config_text.json_insert, path=(), key="hooks", value={}))
    hooks = data.setdefault("hooks", {})
    added = []
    for event, groups in template(host, root)["hooks"].items():
        if event not in hooks:
            edits.append(partial(config_text.json_insert, path=("hooks",), key=event, value=[]))
        existing = hooks.setdefault(event, [])
        if not isinstance(existing, list):
            raise UsageError(f"{path}: hooks.{event} is not a list; nothing was changed")
        for group in groups:
            if group in existing:
                continue
            existing.append(group)
            edits.append(partial(config_text.json_insert, path=("hooks", event), key=None, value=group))
            added += [f"{event}: {h['command']}" for h in group["hooks"]]
    new_text = _edited_json(path, text or "{}\n", edits, data) if added else ""
    written = bool(added) and not dry_run
    backup = _write_text(path, new_text) if written else None
    return Change(path=path, added=added, removed=[], backup=backup, written=written)


def uninstall(host: str, *, project: Path | None = None, dry_run: bool = False) -> Change:
    """Remove every ``cclg-hook`` handler (and what that leaves empty) from the host's configuration,
    as text: what ``install`` added comes out with the separators it came with, the rest stays."""
    path = config_path(host, project)
    text, data = _read(path)
    hooks = data.get("hooks", {})
    removed: list[str] = []
    edits: list[Callable[[str], str]] = []  # in the order of the text, done from its end
    for event in list(hooks):
        groups = hooks[event] if isinstance(hooks[event], list) else []
        kept_groups, event_edits = [], []
        for g, group in enumerate(groups):
            handlers = group.get("hooks", []) if isinstance(group, dict) else []
            ours = [n for n, handler in enumerate(handlers) if _is_ours(handler)]
            if not ours:
                kept_groups.append(group)
                continue
            removed += [f"{event}: {handlers[n]['command']}" for n in ours]
            if len(ours) == len(handlers):
                event_edits.append(partial(config_text.json_remove, path=("hooks", event, g)))
                continue
            kept_groups.append({**group, "hooks": [h for h in handlers if not _is_ours(h)]})
            event_edits += [partial(config_text.json_remove, path=("hooks", event, g, "hooks", n)) for n in ours]
        if event_edits and kept_groups:
            hooks[event] = kept_groups
            edits += event_edits
        elif event_edits:
            del hooks[event]
            edits.append(partial(config_text.json_remove, path=("hooks", event)))
    if "hooks" in data and not hooks:
        del data["hooks"]
        edits = [partial(config_text.json_remove, path=("hooks",))]
    written = bool(removed) and not dry_run
    new_text = _edited_json(path, text or "", edits[::-1], data) if removed else ""
    backup = _write_text(path, new_text) if written else None
    return Change(path=path, added=[], removed=removed, backup=backup, written=written)


def check_installation(project: Path | None = None) -> list[tuple[str, str]]:
    """Problems with installed cclg hooks and MCP registrations, as (configuration file, message) pairs.

    Looks at each host's configuration in the home folder and in ``project``
    (default: the current folder). A host without cclg is not a problem; a
    command that cannot be found, or that names a store that is not one, is.
    """
    problems: list[tuple[str, str]] = []
    for path, command in sorted(_installed_commands(project or Path.cwd(), problems)):
        try:
            words = shlex.split(command)
        except ValueError:
            problems.append((str(path), f"cannot read the command {command!r}"))
            continue
        if shutil.which(words[0]) is None:
            problems.append((str(path), f"{words[0]} is not on PATH, so the host cannot run {command!r}"))
        if "--root" in words[:-1]:
            root = Path(words[words.index("--root") + 1])
            if not Store.holds_a_store(root):
                problems.append((str(path), f"{command!r} names {root}, which is not a cclg store"))
    return problems


def _installed_commands(project: Path, problems: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """(configuration file, command line) of every cclg-hook handler and cclg-mcp registration found."""
    found: set[tuple[str, str]] = set()
    for host in HOSTS:
        for place in (None, project):
            hooks_file, server_file = config_path(host, place), mcp_config_path(host, place)
            for path in (hooks_file, server_file):
                if path is None or not path.exists():
                    continue
                try:
                    found.update((str(path), command) for command in _commands_in(host, path, path == hooks_file))
                except UsageError as exc:
                    problems.append((str(path), str(exc)))
    return found


def _commands_in(host: str, path: Path, hooks: bool) -> list[str]:
    if hooks:
        return [
            handler["command"]
            for groups in _read(path)[1].get("hooks", {}).values()
            for group in (groups if isinstance(groups, list) else [])
            for handler in (group.get("hooks", []) if isinstance(group, dict) else [])
            if _is_ours(handler)
        ]
    if host == "claude":
        entry = _read(path, "mcpServers")[1].get("mcpServers", {}).get(MCP_NAME)
    else:
        entry = _read_toml(path)[1].get("mcp_servers", {}).get(MCP_NAME)
    return [shlex.join([MCP_COMMAND, *entry.get("args", [])])] if _is_our_server(entry) else []


# ---------------------------------------------------------------- the MCP server


def mcp_config_path(host: str, project: Path | None) -> Path:
    """Where the host reads its MCP servers: Claude Code's ``.mcp.json`` or ``~/.claude.json``; Codex's
    ``config.toml``, in the project's ``.codex/`` (read for a project Codex trusts) or in ``~/.codex/``."""
    if host not in HOSTS:
        raise UsageError(f"unknown host {host!r}; use {' or '.join(HOSTS)}")
    if host == "claude":
        return project / ".mcp.json" if project is not None else Path.home() / ".claude.json"
    return (project / ".codex" if project is not None else codex_home()) / "config.toml"


def mcp_arguments(root: str | None) -> list[str]:
    return ["--root", root] if root is not None else []


def _mcp_line(arguments: list[str]) -> str:
    return f"mcp server {MCP_NAME}: {shlex.join([MCP_COMMAND, *arguments])}"


def register_mcp(host: str, *, project: Path | None = None, root: str | None = None, dry_run: bool = False) -> Change:
    """Register ``cclg-mcp`` with the host."""
    path = mcp_config_path(host, project)
    if host == "codex":
        return _register_codex(path, root, dry_run)
    text, data = _read(path, "mcpServers")
    servers = data.get("mcpServers")
    entry = {"type": "stdio", "command": MCP_COMMAND, "args": mcp_arguments(root), "env": {}}
    existing = (servers or {}).get(MCP_NAME)
    if existing == entry:
        return Change(path=path, added=[], removed=[], backup=None, written=False)
    if existing is not None and not _is_our_server(existing):
        raise UsageError(
            f"{path} already has an MCP server named {MCP_NAME!r} that is not cclg-mcp; nothing was changed"
        )
    if servers is None:
        edit = partial(config_text.json_insert, path=(), key="mcpServers", value={MCP_NAME: entry})
    elif existing is None:
        edit = partial(config_text.json_insert, path=("mcpServers",), key=MCP_NAME, value=entry)
    else:
        edit = partial(config_text.json_replace, path=("mcpServers", MCP_NAME), value=entry)
    data.setdefault("mcpServers", {})[MCP_NAME] = entry
    new_text = _edited_json(path, text or "{}\n", [edit], data)
    written = not dry_run
    backup = _write_text(path, new_text) if written else None
    return Change(path=path, added=[_mcp_line(mcp_arguments(root))], removed=[], backup=backup, written=written)


def unregister_mcp(host: str, *, project: Path | None = None, dry_run: bool = False) -> Change:
    """Remove the ``cclg-mcp`` registration (only if it is ours)."""
    path = mcp_config_path(host, project)
    if host == "codex":
        return _unregister_codex(path, dry_run)
    text, data = _read(path, "mcpServers")
    servers = data.get("mcpServers", {})
    existing = servers.get(MCP_NAME)
    if text is None or existing is None or not _is_our_server(existing):
        return Change(path=path, added=[], removed=[], backup=None, written=False)
    del servers[MCP_NAME]
    at: config_text.JsonPath = ("mcpServers", MCP_NAME) if servers else ("mcpServers",)
    if not servers:
        del data["mcpServers"]
    new_text = _edited_json(path, text, [partial(config_text.json_remove, path=at)], data)
    written = not dry_run
    backup = _write_text(path, new_text) if written else None
    return Change(path=path, added=[], removed=[_mcp_line(existing.get("args", []))], backup=backup, written=written)


def _is_our_server(entry: object) -> bool:
    return isinstance(entry, dict) and entry.get("command") == MCP_COMMAND


def _read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    import tomllib

    text = _read_text(path)
    if text is None:
        return "", {}
    try:
        return text, tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:  # the reader recurses: a RecursionError unwinds cleanly
        reason = "nested too deep" if isinstance(exc, RecursionError) else exc
        raise UsageError(f"{path} is not valid TOML ({reason}); fix or move it, nothing was changed") from None


def _register_codex(path: Path, root: str | None, dry_run: bool) -> Change:
    text, data = _read_toml(path)
    existing = data.get("mcp_servers", {}).get(MCP_NAME)
    if existing is not None:
        if not _is_our_server(existing):
            raise UsageError(
                f"{path} already has an MCP server named {MCP_NAME!r} that is not cclg-mcp; nothing was changed"
            )
        if existing.get("args", []) == mcp_arguments(root):
            return Change(path=path, added=[], removed=[], backup=None, written=False)
        text = _without_codex_table(path, text)
    block = [
        CODEX_MCP_TABLE,
        f"command = {json.dumps(MCP_COMMAND)}",
        f"args = {json.dumps(mcp_arguments(root), ensure_ascii=False)}",
        "startup_timeout_sec = 20",
        "tool_timeout_sec = 60",
    ]
    new_text = config_text.toml_append_table(text, block)
    added = [_mcp_line(mcp_arguments(root))]
    # Codex 0.171 honours the key in a trusted project's config too (RESULTS.md), where it overrides the
    # user's: a project install adds it only when neither file sets it.
    grace = CODEX_GRACE_KEY not in data and (
        path == codex_home() / "config.toml" or CODEX_GRACE_KEY not in read_codex_config()
    )
    if grace:
        new_text = config_text.toml_prepend_line(new_text, CODEX_GRACE_LINE)
        added.append(f"{CODEX_GRACE_KEY} = 3000 (Codex waits up to 3 s for every MCP server before its first request)")
    _check_codex_edit(path, data, new_text, expect_ours=True, grace_changes=grace)
    written = not dry_run
    backup = _write_text(path, new_text) if written else None
    return Change(path=path, added=added, removed=[], backup=backup, written=written)


def _unregister_codex(path: Path, dry_run: bool) -> Change:
    text, data = _read_toml(path)
    existing = data.get("mcp_servers", {}).get(MCP_NAME)
    if existing is None or not _is_our_server(existing):
        return Change(path=path, added=[], removed=[], backup=None, written=False)
    new_text = _without_codex_table(path, text)
    without_grace = config_text.toml_remove_line(new_text, CODEX_GRACE_LINE)
    grace = without_grace != new_text  # ours, exactly as install wrote it: a user's own setting stays
    new_text = without_grace
    _check_codex_edit(path, data, new_text, expect_ours=False, grace_changes=grace)
    written = not dry_run
    backup = _write_text(path, new_text) if written else None
    return Change(path=path, added=[], removed=[_mcp_line(existing.get("args", []))], backup=backup, written=written)


def read_codex_config() -> dict[str, Any]:
    """The user's Codex ``config.toml`` (empty when there is none); a UsageError when it is no TOML."""
    return _read_toml(codex_home() / "config.toml")[1]


def trust_codex_hooks(*, project: Path | None = None, keep_backup: bool = False) -> Change | None:
    """Record in the user's Codex ``config.toml`` that the user trusts the cclg-hook handlers of the
    installed ``hooks.json`` (``codex_trust``); None when Codex could not be asked. A key the user
    already holds a state of their own for is left to them."""
    hooks_file = config_path("codex", project).absolute()
    entries = codex_trust.untrusted_hooks(hooks_file, project.absolute() if project else Path.cwd())
    if entries is None:
        return None
    path = codex_home() / "config.toml"
    text, data = _read_toml(path)
    own = set(_trust_states(data)) - set(codex_trust.marked_keys(text))
    entries = [(key, digest) for key, digest in entries if key not in own]
    if not entries:
        return Change(path=path, added=[], removed=[], backup=None, written=False)
    new_text = codex_trust.with_trust(text, entries)
    _check_trust_edit(path, data, new_text, added=dict(entries), removed=set())
    backup = _write_text(path, new_text, keep_backup=keep_backup)
    added = [f"Codex trust for {key}" for key, _ in entries]
    return Change(path=path, added=added, removed=[], backup=backup, written=True)


def untrust_codex_hooks(*, project: Path | None = None, dry_run: bool = False, keep_backup: bool = False) -> Change:
    """Remove the trust tables ``trust_codex_hooks`` added for this place's ``hooks.json``."""
    prefix = f"{config_path('codex', project).absolute()}:"
    path = codex_home() / "config.toml"
    text, data = _read_toml(path)
    keys = {key for key in codex_trust.marked_keys(text) if key.startswith(prefix)}
    if not keys:
        return Change(path=path, added=[], removed=[], backup=None, written=False)
    new_text = codex_trust.without_trust(text, keys)
    _check_trust_edit(path, data, new_text, added={}, removed=keys)
    written = not dry_run
    backup = _write_text(path, new_text, keep_backup=keep_backup) if written else None
    removed = [f"Codex trust for {key}" for key in sorted(keys)]
    return Change(path=path, added=[], removed=removed, backup=backup, written=written)


def _trust_states(data: dict[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks", {})
    states = hooks.get("state", {}) if isinstance(hooks, dict) else {}
    return dict(states) if isinstance(states, dict) else {}


def _check_trust_edit(
    path: Path, old: dict[str, Any], new_text: str, *, added: dict[str, str], removed: set[str]
) -> None:
    """The edited text must parse, and differ from the old only in the trust states of cclg's hooks:
    ``added`` (key: hash) and ``removed``."""
    import tomllib

    try:
        new = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"recording Codex's trust would break {path} ({exc}); nothing was changed") from None

    def rest(data: dict[str, Any]) -> dict[str, Any]:
        hooks = data.get("hooks", {})
        hooks = {k: v for k, v in hooks.items() if k != "state"} if isinstance(hooks, dict) else hooks
        return {**{k: v for k, v in data.items() if k != "hooks"}, "hooks": hooks or None}

    kept = {key: value for key, value in _trust_states(old).items() if key not in removed}
    expected = {**kept, **{key: {"trusted_hash": digest} for key, digest in added.items()}}
    if rest(old) != rest(new) or _trust_states(new) != expected:
        raise UsageError(f"{path} is laid out in a way cclg cannot edit safely; nothing was changed")


def _without_codex_table(path: Path, text: str) -> str:
    """``text`` without the ``[mcp_servers.cclg]`` table (and its sub-tables)."""
    lines = text.split("\n")
    headers = [i for i, line in enumerate(lines) if line.strip() == CODEX_MCP_TABLE]
    if len(headers) != 1:
        raise UsageError(
            f"{path} defines mcp_servers.{MCP_NAME} in a way cclg does not edit; remove it by hand, nothing was changed"
        )
    return config_text.toml_remove_tables(
        text, lambda header: header.strip() == CODEX_MCP_TABLE or _is_our_subtable(header)
    )


def _is_our_subtable(line: str) -> bool:
    return line.strip().startswith(f"[mcp_servers.{MCP_NAME}.")


def _check_codex_edit(
    path: Path, old: dict[str, Any], new_text: str, *, expect_ours: bool, grace_changes: bool = False
) -> None:
    """The edited text must parse, and differ from the old only in our table (and in the startup grace,
    where ``grace_changes``: the line install adds or uninstall removes)."""
    import tomllib

    try:
        new = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"editing {path} would break it ({exc}); nothing was changed") from None

    def others(data: dict[str, Any]) -> dict[str, Any]:
        servers = {k: v for k, v in data.get("mcp_servers", {}).items() if k != MCP_NAME}
        rest = {k: v for k, v in data.items() if k not in ("mcp_servers", CODEX_GRACE_KEY)}
        return {**rest, "mcp_servers": servers}

    grace_kept = old.get(CODEX_GRACE_KEY) == new.get(CODEX_GRACE_KEY) or grace_changes
    ours = _is_our_server(new.get("mcp_servers", {}).get(MCP_NAME))
    if others(old) != others(new) or not grace_kept or ours != expect_ours:
        raise UsageError(f"{path} is laid out in a way cclg cannot edit safely; nothing was changed")


# ---------------------------------------------------------------- a host, whole


def install_host(
    host: str, *, project: Path | None = None, root: str | None = None, dry_run: bool = False, trust: bool = True
) -> list[Change]:
    """``cclg install``: create the store if needed, register cclg-hook and cclg-mcp with ``host``, turn the
    code graph in the hook's answers on (unless the store's config says otherwise: ``Settings.written``)
    and, for Codex with ``trust``, record the user's trust in the hooks it wrote where Codex can be asked
    for them. What is refused is found before anything is written, the store included."""
    named = str(resolve_root(root).resolve()) if root else None  # the store the hooks and the server name
    install(host, project=project, root=named, dry_run=True)  # what is refused leaves all as it was,
    register_mcp(host, project=project, root=named, dry_run=True)  # the store included
    if host == "codex":
        read_codex_config()
    if not dry_run:
        _include_codegraph(Store.init(root)[0])
    changes = [install(host, project=project, root=named, dry_run=dry_run)]
    changes.append(register_mcp(host, project=project, root=named, dry_run=dry_run))
    if host == "codex" and trust and not dry_run:
        codex_config = codex_home() / "config.toml"
        backed_up = any(change.path == codex_config and change.backup for change in changes)
        try:
            trusted = trust_codex_hooks(project=project, keep_backup=backed_up)
        except UsageError:  # a layout cclg does not edit: the user trusts the hooks in Codex's /hooks
            trusted = None
        if trusted is not None and trusted.added:
            changes.append(trusted)
    return changes


def _include_codegraph(store: Store) -> None:
    """Turn the code graph in the hook's answers on in ``store``'s config.json, unless the file already
    says something about it (the user's choice stays theirs, even one cclg cannot use)."""
    if store.settings.written("hook", "include_codegraph"):
        return
    hook = store.config.get("hook") or {}
    config = {**store.config, "hook": {**hook, "include_codegraph": True}}
    store.write_file(store.config_path, json.dumps(config, indent=2).encode() + b"\n")


def uninstall_host(host: str, *, project: Path | None = None, dry_run: bool = False) -> list[Change]:
    """``cclg uninstall``: remove exactly what ``install_host`` added."""
    changes = [uninstall(host, project=project, dry_run=dry_run)]
    changes.append(unregister_mcp(host, project=project, dry_run=dry_run))
    if host == "codex":
        codex_config = codex_home() / "config.toml"
        backed_up = any(change.path == codex_config and change.backup for change in changes)
        untrusted = untrust_codex_hooks(project=project, dry_run=dry_run, keep_backup=backed_up)
        if untrusted.removed:
            changes.append(untrusted)
    return changes
