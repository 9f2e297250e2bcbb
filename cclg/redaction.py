"""Secrets already on disk: finding them in files (``cclg scan``) and removing them
from a store (``cclg scan --store --redact``); and the rewrite of a whole store that
removal runs on, which ``cclg purge`` (``cclg.purge``) shares.

Writes refuse secrets before they reach disk (``cclg.guard``); this module is for
what got there anyway: files a user wants checked, and stores written before a
rule existed or by another tool. Both use the one detector of ``cclg.guard``, so
what ``scan`` reports is what ``--redact`` removes and what a write would refuse.

``rewrite_store`` takes something out of every file of a store that holds it, through
a ``Rewrite`` (what to look for, and how to clean text, JSON values and records): each
file rewritten on its own, atomically (a log under its lock, so no append is lost);
records and logs stay valid JSON; a code graph holding it is deleted (a cache). Then
``rebuild_projections`` deletes the search index and the vectors and builds the index
again, compacted, so no SQLite page or WAL frame keeps the old bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Container
from pathlib import Path
from typing import Any, Protocol

from cclg import format as fmt
from cclg import guard
from cclg.errors import UsageError, ValidationError
from cclg.files import read_regular
from cclg.ids import content_hash
from cclg.index import rebuild_index
from cclg.records import MemoryNode, dumps, retrieval_for
from cclg.store import CODEGRAPHS, INDEX_FILE, RECORD_PREFIXES, SEMANTIC_FILE, TEMP, Store, audit_record


def scan_secrets(paths: list[Path]) -> list[dict[str, Any]]:
    """``cclg scan``: secrets in files (folders are walked), as {path, line, rule, preview}."""
    found = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"no such file or folder: {path}")
        files = sorted(p for p in path.rglob("*") if p.is_file() and ".git" not in p.parts) if path.is_dir() else [path]
        for file in files:  # regular files only: a FIFO or a device named here is refused, never read
            try:
                data = read_regular(file)
            except OSError as exc:
                raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
            for line, match in guard.scan_bytes(data):
                found.append({"path": str(file), "line": line, "rule": match.rule, "preview": match.preview})
    return found


# ---------------------------------------------------------------- rewriting a whole store


class Rewrite(Protocol):
    """What one pass of ``rewrite_store`` takes out of a store's files."""

    verb: str  # the action a rewritten file is reported with ("redacted", "erased")

    def found(self, data: bytes) -> dict[str, Any] | None:
        """What a file's bytes hold of it, for the report (an empty dict says little); None for nothing."""

    def text(self, data: bytes) -> bytes:
        """The bytes of a file without it, read as text (raw evidence, a torn line)."""

    def value(self, value: Any) -> Any:
        """A JSON value (a log line) without it."""

    def record(self, relative: str, data: bytes) -> bytes:
        """A record file (``nodes/``, ``patches/``, ``edges/``, ``sessions/``) without it; a ``ValueError`` or
        ``ValidationError`` has it cleaned as text instead."""


# Projections of the records, deleted and rebuilt rather than edited (SQLite pages keep old text).
_PROJECTIONS = (INDEX_FILE, SEMANTIC_FILE)
# The files of one code graph: <name>.json, .cache.json, .search.sqlite (and its side files).
_GRAPH_SUFFIXES = (".cache.json", ".search.sqlite-wal", ".search.sqlite-shm", ".search.sqlite", ".json")


def rewrite_store(store: Store, rewrite: Rewrite, *, skip: Container[str] = ()) -> list[dict[str, Any]]:
    """Under the store lock, take what ``rewrite`` finds out of every file of the store but those in
    ``skip`` (paths relative to the root), each file on its own; returns {file, ...found, action} for
    each file that held it: ``rewrite.verb`` (rewritten), ``removed`` (a code graph, with its
    indexes) or ``rebuilt`` (a projection: call ``rebuild_projections``). A file that holds it
    only where the rewrite leaves it is not listed. Temp files of writes in progress are left alone."""
    changed = []
    with store.lock():
        for path in sorted(p for p in store.root.rglob("*") if p.is_file()):
            relative = store.relative(path)
            if relative in skip or relative == fmt.PATHS["lock"] or relative.startswith(TEMP + "/"):
                continue
            entry = _rewrite_file(store, rewrite, path, relative)
            if entry is not None:
                changed.append(entry)
    return changed


def _rewrite_file(store: Store, rewrite: Rewrite, path: Path, relative: str) -> dict[str, Any] | None:
    if _is_log(relative):  # appended to without the store lock: rewritten under its own
        with store.locked_log(path) as fd:
            return _rewrite_bytes(store, rewrite, path, relative, os.pread(fd, os.fstat(fd).st_size, 0))
    try:
        data = path.read_bytes()
    except FileNotFoundError:  # a code graph's file, removed with its graph
        return None
    return _rewrite_bytes(store, rewrite, path, relative, data)


def _rewrite_bytes(store: Store, rewrite: Rewrite, path: Path, relative: str, data: bytes) -> dict[str, Any] | None:
    found = rewrite.found(data)
    if found is None:
        return None
    entry: dict[str, Any] = {"file": relative, **found}
    if relative.startswith(_PROJECTIONS):
        entry["action"] = "rebuilt"
    elif relative.startswith(CODEGRAPHS + "/"):
        entry["action"] = "removed"
        _remove_graph(path)
    else:
        new = cleaned(rewrite, relative, data)
        if new == data:
            return None
        store.write_file(path, new)
        entry["action"] = rewrite.verb
    return entry


def rebuild_projections(store: Store) -> None:
    """Delete the search index and the vectors with their side files (a deleted row's text stays in
    SQLite's free pages and WAL), build the index again from the files and compact it (``VACUUM``):
    no page of either keeps a byte the files no longer hold. The semantic helper embeds the memories
    again. Under the store lock."""
    with store.lock():
        store.drop_index()
        rebuild_index(store)
        with contextlib.closing(sqlite3.connect(store.index_path)) as db:
            db.execute("VACUUM")


def cleaned(rewrite: Rewrite, relative: str, data: bytes) -> bytes:
    """A file's bytes without what ``rewrite`` takes out: logs line by line and records value by value
    (both still valid JSON), anything else as text."""
    if _is_log(relative):
        return b"\n".join(_cleaned_line(rewrite, line) if line.strip() else line for line in data.split(b"\n"))
    if not (relative.endswith(".json") and relative.split("/")[0] in RECORD_PREFIXES):
        return rewrite.text(data)
    try:
        return rewrite.record(relative, data)
    except (ValueError, ValidationError):  # not a record that reads back: cleaned as text
        return rewrite.text(data)


def _is_log(relative: str) -> bool:
    """Whether ``relative`` names a JSON-lines log of the store (``Store.logs``; not raw evidence named .jsonl)."""
    return relative.endswith(".jsonl") and relative.split("/")[0] in ("audit", "sessions")


def _cleaned_line(rewrite: Rewrite, line: bytes) -> bytes:
    if rewrite.found(line) is None:  # the lines that hold nothing of it keep their bytes
        return line
    try:
        value = json.loads(line)
    except ValueError:  # not JSON (a torn line): cleaned as text
        return rewrite.text(line)
    new = json.dumps(rewrite.value(value), ensure_ascii=False).encode("utf-8")
    return rewrite.text(new)  # (a no-op unless the line's text holds what its values do not)


def _remove_graph(path: Path) -> None:
    """Delete every file of the code graph ``path`` belongs to."""
    stem = next((path.name[: -len(s)] for s in _GRAPH_SUFFIXES if path.name.endswith(s)), path.name)
    for sibling in path.parent.iterdir():
        if sibling.name == path.name or sibling.name.startswith(stem + "."):
            sibling.unlink(missing_ok=True)


# ---------------------------------------------------------------- secrets


def redact_store(store: Store) -> list[dict[str, Any]]:
    """``cclg scan --store --redact``: take every secret out of the store's files, one audited
    repair per file; returns {file, rules, secrets, action} for each file changed.

    Secrets are the one thing rewritten in place (a patch would leave the old bytes on disk):
    records and logs are redacted and stay valid JSON (a memory keeps its id; its content hash
    and retrieval keys follow the new content), raw evidence keeps every other byte. The
    search index and the vectors are deleted and rebuilt, so no old page keeps the bytes. A
    code graph holding a secret (built before graphs were redacted) is deleted with its
    indexes: ``cclg code-index`` builds it again, without the secret.
    """
    with store.lock():
        changed = rewrite_store(store, _Redaction())
        if changed:
            store.audit_many(
                [
                    audit_record("repair_applied", action="redact_secrets", file=c["file"], rules=c["rules"])
                    for c in changed
                ]
            )
            rebuild_projections(store)
    return changed


class _Redaction:
    """The secrets of ``cclg.guard``, replaced by ``[REDACTED:rule]``."""

    verb = "redacted"

    def found(self, data: bytes) -> dict[str, Any] | None:
        hits = guard.scan_bytes(data)
        return {"rules": sorted({m.rule for _, m in hits}), "secrets": len(hits)} if hits else None

    def text(self, data: bytes) -> bytes:
        return guard.redact_bytes(data)[0]

    def value(self, value: Any) -> Any:
        return guard.redact_value(value)[0]

    def record(self, relative: str, data: bytes) -> bytes:
        new = _redacted_record(relative, data)
        if guard.scan_bytes(new):  # a secret the record reads apart but its file joins: redact the text too
            new = _redacted_record(relative, guard.redact_bytes(new)[0])
        return new


def _redacted_record(relative: str, data: bytes) -> bytes:
    value, _ = guard.redact_value(json.loads(data))
    if relative.startswith("nodes/") and isinstance(value, dict) and isinstance(value.get("content"), str):
        node = MemoryNode.from_dict(value, where=relative)
        node.retrieval = retrieval_for(node.content)
        if node.stored_hash is not None:
            node.metadata["content_hash"] = content_hash(node.content)
        value = node.to_dict()
    return dumps(value)
