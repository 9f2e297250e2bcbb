"""``cclg install`` / ``cclg uninstall``: merge the hook templates into a host's configuration.

The templates (``cclg/templates/``, also ``hooks/`` at the top of the repository)
say which host events run which ``cclg-hook`` command. Installing merges them into
the host's JSON configuration:

- what is already there is kept (other tools' hooks, other settings);
- installing twice changes nothing (a handler already present is not added again);
- the previous file is copied to ``<file>.cclg-backup`` before it is changed;
- the file is written atomically;
- ``uninstall`` removes exactly the handlers whose command is ``cclg-hook ...``,
  and the groups and events that this leaves empty.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cclg.errors import UsageError

HOSTS = ("claude", "codex")
TEMPLATES = {"claude": "claude-settings.json", "codex": "codex-hooks.json"}
FILES = {"claude": Path(".claude") / "settings.json", "codex": Path(".codex") / "hooks.json"}
HOOK_COMMAND = "cclg-hook"


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
    return (project if project is not None else Path.home()) / FILES[host]


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


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix or move it, nothing was changed") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise UsageError(f"{path} does not hold a JSON object with a 'hooks' object; nothing was changed")
    return data


def _is_ours(handler: object) -> bool:
    return isinstance(handler, dict) and str(handler.get("command", "")).split(" ")[0] == HOOK_COMMAND


def _write(path: Path, data: dict[str, Any]) -> Path | None:
    backup = None
    if path.exists():
        backup = path.with_name(path.name + ".cclg-backup")
        shutil.copy2(path, backup)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return backup


def install(host: str, *, project: Path | None = None, root: str | None = None, dry_run: bool = False) -> Change:
    """Merge the host's template into its configuration; returns what changed."""
    path = config_path(host, project)
    data = _read(path)
    hooks = data.setdefault("hooks", {})
    added = []
    for event, groups in template(host, root)["hooks"].items():
        existing = hooks.setdefault(event, [])
        if not isinstance(existing, list):
            raise UsageError(f"{path}: hooks.{event} is not a list; nothing was changed")
        for group in groups:
            if group in existing:
                continue
            existing.append(group)
            added += [f"{event}: {h['command']}" for h in group["hooks"]]
    written = bool(added) and not dry_run
    backup = _write(path, data) if written else None
    return Change(path=path, added=added, removed=[], backup=backup, written=written)


def uninstall(host: str, *, project: Path | None = None, dry_run: bool = False) -> Change:
    """Remove every ``cclg-hook`` handler (and what that leaves empty) from the host's configuration."""
    path = config_path(host, project)
    data = _read(path)
    hooks = data.get("hooks", {})
    removed = []
    for event in list(hooks):
        groups = hooks[event] if isinstance(hooks[event], list) else []
        kept_groups = []
        found = False
        for group in groups:
            handlers = group.get("hooks", []) if isinstance(group, dict) else []
            ours = [h for h in handlers if _is_ours(h)]
            if not ours:
                kept_groups.append(group)
                continue
            found = True
            removed += [f"{event}: {h['command']}" for h in ours]
            rest = [h for h in handlers if not _is_ours(h)]
            if rest:
                kept_groups.append({**group, "hooks": rest})
        if found:
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
    if "hooks" in data and not hooks:
        del data["hooks"]
    written = bool(removed) and not dry_run
    backup = _write(path, data) if written else None
    return Change(path=path, added=[], removed=removed, backup=backup, written=written)


def check_installation(project: Path | None = None) -> list[tuple[str, str]]:
    """Problems with installed cclg hooks, as (configuration file, message) pairs.

    Looks at each host's configuration in the home folder and in ``project``
    (default: the current folder). A host without cclg hooks is not a problem;
    hooks whose command cannot be found, or that name a store that is not one, are.
    """
    problems = []
    places = {config_path(host, place) for host in HOSTS for place in (None, project or Path.cwd())}
    for path in sorted(places):
        if not path.exists():
            continue
        try:
            data = _read(path)
        except UsageError as exc:
            problems.append((str(path), str(exc)))
            continue
        commands = sorted(
            {
                h["command"]
                for groups in data.get("hooks", {}).values()
                if isinstance(groups, list)
                for group in groups
                if isinstance(group, dict)
                for h in group.get("hooks", [])
                if _is_ours(h)
            }
        )
        for command in commands:
            try:
                words = shlex.split(command)
            except ValueError:
                problems.append((str(path), f"cannot read the hook command {command!r}"))
                continue
            if shutil.which(words[0]) is None:
                problems.append((str(path), f"{words[0]} is not on PATH, so the host cannot run {command!r}"))
            if "--root" in words[:-1]:
                root = Path(words[words.index("--root") + 1])
                if not (root / "config.json").is_file():
                    problems.append((str(path), f"{command!r} names {root}, which is not a cclg store"))
    return problems
