"""Sources: what users already have (instruction files, other tools' memories, plugins), brought in
and kept in step as patches (``cclg.intake.source_sync``, the kinds in ``cclg.intake.source_kinds``).

``sync_changed_instructions`` is the hook's step at a session's start: it reads only the registry and
a stat of each registered file under the session's folder, and imports the sync only when one moved.
``find_instruction_files`` and ``import_instruction_files`` are what a first run in a repository
(``cclg quickstart``) calls.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cclg.api.lazy import served_on_first_use
from cclg.core.store import Store
from cclg.errors import UsageError

_LAZY = {  # module -> the public names it serves, imported on first use
    "cclg.intake.source_kinds": "SOURCE_KINDS PLUGIN_GROUP SourceKind",
    "cclg.intake.source_items": "SourceItem",
    "cclg.intake.source_sync": "SyncReport",
}

if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below
    from cclg.intake.source_items import SourceItem
    from cclg.intake.source_kinds import PLUGIN_GROUP, SOURCE_KINDS, SourceKind
    from cclg.intake.source_sync import SyncReport
else:
    __getattr__ = served_on_first_use(globals(), _LAZY)

__all__ = [
    "PLUGIN_GROUP",
    "SOURCE_KINDS",
    "TABLE_KINDS",
    "SourceItem",
    "SourceKind",
    "SyncReport",
    "add_source",
    "find_instruction_files",
    "import_instruction_files",
    "import_source",
    "list_sources",
    "remove_source",
    "source_conflicts",
    "sync_changed_instructions",
    "sync_sources",
]

INSTRUCTION_KINDS = ("claude-md", "cursor-rules")  # the user's own instruction files, kept in step by the hook


def add_source(store: Store, kind: str, path: str, *, sync: bool = True) -> dict[str, Any]:
    """``cclg sources add KIND PATH``: register a source and (unless ``sync`` is false) bring it in at
    once; returns the source and its first sync's report."""
    from cclg.intake import source_sync

    entry = source_sync.add_source(store, kind, path)
    reports = source_sync.sync_sources(store, [entry["id"]]) if sync else []
    return {"source": _shown(entry), "sync": [r.to_dict() for r in reports]}


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry[k] for k in ("id", "kind", "path", "added_at") if k in entry}


def list_sources(store: Store) -> list[dict[str, Any]]:
    """``cclg sources list``: each registered source, its trust, the items it tracks, its last sync."""
    from cclg.intake.source_sync import registry_summary

    return registry_summary(store)


def remove_source(store: Store, name: str) -> dict[str, Any]:
    """``cclg sources remove ID|PATH``: stop keeping a source in step (its memories stay)."""
    from cclg.intake.source_sync import remove_source as remove

    return remove(store, name)


def sync_sources(store: Store, names: list[str] | None = None) -> list[SyncReport]:
    """``cclg sources sync [ID...]``: bring every registered source (or those named) up to date."""
    from cclg.intake.source_sync import sync_sources as sync

    return sync(store, names or None)


def import_source(store: Store, kind: str, path: str, *, force: bool = False) -> dict[str, Any]:
    """``cclg import KIND PATH``: a one-off import (nothing kept in step). ``jsonl`` is ``import-jsonl``
    itself (``force`` as there), or, for whole records as ``cclg export --format jsonl`` writes them, the table
    import; ``arrow`` and ``parquet`` are ``cclg export``'s tables (``cclg.intake.tables.import_table``:
    a view as new memories, a ledger as a container); the other kinds write each item as a new memory,
    as a first sync would."""
    if kind in TABLE_KINDS or (kind == "jsonl" and _is_table_jsonl(path)):  # what `cclg export --format` wrote
        from cclg.intake.tables import import_table

        return import_table(store, path, kind, force=force)
    if kind == "jsonl":
        from cclg.intake.new_memories import import_jsonl

        file = Path(path)
        if not file.is_file():
            raise UsageError(f"{path} is not a regular file")
        return import_jsonl(store, file.read_bytes(), name=file.name, force=force).to_dict()
    from cclg.intake.source_sync import import_items

    return import_items(store, kind, path).to_dict()


TABLE_KINDS = ("arrow", "parquet")  # ``cclg import`` reads ``cclg export --format``'s tables back too


def _is_table_jsonl(path: str) -> bool:
    """Whether a JSON-lines file holds whole records, as ``cclg export --format jsonl`` writes them (each
    line a record with its ``schema_version``; a ledger's name their ``record`` kind), read back as a
    table; else it is ``import-jsonl``'s lines."""
    try:
        with open(path, "rb") as file:
            first = next((line for line in file if line.strip()), b"")
        value = json.loads(first)
    except (OSError, ValueError):
        return False  # import-jsonl says what is wrong with it
    return isinstance(value, dict) and ("record" in value or "schema_version" in value)


def source_conflicts(store: Store) -> list[dict[str, Any]]:
    """Items of registered sources whose memory the user changed in cclg while the file says otherwise."""
    from cclg.intake.source_sync import source_conflicts as conflicts

    return conflicts(store)


def find_instruction_files(folder: str | Path) -> dict[str, list[Path]]:
    """The instruction files of a repository (or any folder): ``claude-md`` (CLAUDE.md, AGENTS.md,
    GEMINI.md, copilot instructions, in any folder) and ``cursor-rules`` (``.cursor/rules/*.mdc``)."""
    from cclg.intake.source_kinds import instruction_files

    root = Path(folder).expanduser().resolve()
    if not root.is_dir():
        raise UsageError(f"{folder} is not a folder")
    rules = root / ".cursor" / "rules"
    mdc = sorted(p for p in rules.rglob("*.mdc") if p.is_file()) if rules.is_dir() else []
    return {"claude-md": instruction_files(root), "cursor-rules": mdc}


def import_instruction_files(store: Store, folder: str | Path) -> dict[str, Any]:
    """Register the instruction files found in ``folder`` as sources (``claude-md`` for the folder, and
    ``cursor-rules`` when it has rules) and sync them: they are kept in step from now on, by
    ``cclg sources sync`` and at each session's start."""
    found = find_instruction_files(folder)
    root = str(Path(folder).expanduser().resolve())
    added = [add_source(store, kind, root) for kind in INSTRUCTION_KINDS if found[kind]]
    return {"files": {k: [str(p) for p in v] for k, v in found.items()}, "sources": added}


def sync_changed_instructions(store: Store, cwd: object, *, lock_wait: float = 0.5) -> list[dict[str, Any]]:
    """The hook's step at a session's start: sync the registered sources under ``cwd`` whose files' size
    or time moved since their last sync. Without a registry, or when nothing moved, it costs a read of
    the registry and a stat per file; a store locked longer than ``lock_wait`` seconds skips it."""
    if not isinstance(cwd, str) or not cwd or not store.sources_path.exists():
        return []
    try:
        registry = json.loads(store.sources_path.read_bytes())
        entries = [e for e in registry.get("sources", []) if e.get("kind") in INSTRUCTION_KINDS]
    except (OSError, ValueError, AttributeError):
        return []
    from cclg.core.repository import git_root

    root = os.path.realpath(git_root(cwd) or cwd)
    if not _any_moved(entries, root):
        return []
    from cclg.intake.source_sync import sync_sources as sync

    names = [e["id"] for e in entries]
    return [r.to_dict() for r in sync(store, names, only_changed_under=root, lock_wait=lock_wait)]


def _any_moved(entries: list[dict[str, Any]], root: str) -> bool:
    for entry in entries:
        for name, seen in (entry.get("files") or {}).items():
            if name != root and not name.startswith(root + os.sep):
                continue
            try:
                stat = os.stat(name)
            except OSError:
                return True
            if [stat.st_mtime_ns, stat.st_size] != seen:
                return True
    return False
