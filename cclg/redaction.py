"""Secrets already on disk: finding them in files (``cclg scan``) and removing them
from a store (``cclg scan --store --redact``).

Writes refuse secrets before they reach disk (``cclg.guard``); this module is for
what got there anyway: files a user wants checked, and stores written before a
rule existed or by another tool. Both use the one detector of ``cclg.guard``, so
what ``scan`` reports is what ``--redact`` removes and what a write would refuse.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cclg import guard
from cclg.errors import UsageError, ValidationError
from cclg.ids import content_hash
from cclg.index import rebuild_index
from cclg.records import MemoryNode, dumps, retrieval_for
from cclg.store import CODEGRAPHS, INDEX_FILE, RECORD_PREFIXES, SEMANTIC_FILE, Store, audit_record


def scan_secrets(paths: list[Path]) -> list[dict[str, Any]]:
    """``cclg scan``: secrets in files (folders are walked), as {path, line, rule, preview}."""
    found = []
    for path in paths:
        if not path.exists():
            raise UsageError(f"no such file or folder: {path}")
        files = (
            [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and ".git" not in p.parts)
        )
        for file in files:
            try:
                data = file.read_bytes()
            except OSError as exc:
                raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from None
            for line, match in guard.scan_bytes(data):
                found.append({"path": str(file), "line": line, "rule": match.rule, "preview": match.preview})
    return found


# Projections of the records, deleted and rebuilt rather than edited (SQLite pages keep old text).
_PROJECTIONS = (INDEX_FILE, SEMANTIC_FILE)
# The files of one code graph: <name>.json, .cache.json, .search.sqlite (and its side files).
_GRAPH_SUFFIXES = (".cache.json", ".search.sqlite-wal", ".search.sqlite-shm", ".search.sqlite", ".json")


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
    changed = []
    with store.lock():
        for path in sorted(p for p in store.root.rglob("*") if p.is_file()):
            relative = store.relative(path)
            hits = guard.scan_bytes(path.read_bytes()) if path.name != ".lock" and path.exists() else []
            if not hits:
                continue
            entry = {"file": relative, "rules": sorted({m.rule for _, m in hits}), "secrets": len(hits)}
            if relative.startswith(_PROJECTIONS):
                entry["action"] = "rebuilt"
            elif relative.startswith(CODEGRAPHS + "/"):
                entry["action"] = "removed"
                _remove_graph(path)
            else:
                entry["action"] = "redacted"
                store.write_file(path, _redacted(relative, path.read_bytes()))
            changed.append(entry)
        if changed:
            store.audit_many(
                [
                    audit_record("repair_applied", action="redact_secrets", file=c["file"], rules=c["rules"])
                    for c in changed
                ]
            )
            store.drop_index()
            rebuild_index(store)
    return changed


def _remove_graph(path: Path) -> None:
    """Delete every file of the code graph ``path`` belongs to."""
    stem = next((path.name[: -len(s)] for s in _GRAPH_SUFFIXES if path.name.endswith(s)), path.name)
    for sibling in path.parent.iterdir():
        if sibling.name == path.name or sibling.name.startswith(stem + "."):
            sibling.unlink(missing_ok=True)


def _redacted(relative: str, data: bytes) -> bytes:
    """A file's bytes without its secrets: JSON records and logs redacted value by value (still
    valid JSON), anything else as text, every other byte kept."""
    if relative.endswith(".jsonl"):
        return b"\n".join(_redacted_json(line) if line.strip() else line for line in data.split(b"\n"))
    if not (relative.endswith(".json") and relative.split("/")[0] in RECORD_PREFIXES):
        return guard.redact_bytes(data)[0]
    try:
        new = _redacted_record(relative, data)
        if guard.scan_bytes(new):  # a secret the record reads apart but its file joins: redact the text too
            new = _redacted_record(relative, guard.redact_bytes(new)[0])
        return new
    except (ValueError, ValidationError):  # not a record that reads back: redact it as text
        return guard.redact_bytes(data)[0]


def _redacted_json(line: bytes) -> bytes:
    try:
        value = json.loads(line)
    except ValueError:  # not JSON (a torn line): redact it as text
        return guard.redact_bytes(line)[0]
    new = json.dumps(guard.redact_value(value)[0], ensure_ascii=False).encode("utf-8")
    return guard.redact_bytes(new)[0]  # (a no-op unless the line's text holds what its values do not)


def _redacted_record(relative: str, data: bytes) -> bytes:
    value, _ = guard.redact_value(json.loads(data))
    if relative.startswith("nodes/") and isinstance(value, dict) and isinstance(value.get("content"), str):
        node = MemoryNode.from_dict(value, where=relative)
        node.retrieval = retrieval_for(node.content)
        if node.stored_hash is not None:
            node.metadata["content_hash"] = content_hash(node.content)
        value = node.to_dict()
    return dumps(value)
