"""Secrets already on disk: finding them in files (``cclg scan``) and removing them
from a store (``cclg scan --store --redact``).

Writes refuse secrets before they reach disk (``cclg.guard``); this module is for
what got there anyway: files a user wants checked, and stores written before a
rule existed or by another tool.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cclg import guard
from cclg.errors import UsageError
from cclg.ids import content_hash
from cclg.index import rebuild_index
from cclg.records import MemoryNode, dumps, retrieval_for
from cclg.store import CODEGRAPHS, INDEX_FILE, Store, audit_record


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
                raise UsageError(f"cannot read {file}: {exc.strerror or exc}") from exc
            for line, match in guard.scan_bytes(data):
                found.append({"path": str(file), "line": line, "rule": match.rule, "preview": match.preview})
    return found


# Store files that are projections (rebuilt from the records) or the code graph of a repository.
_NOT_REDACTED = (INDEX_FILE, CODEGRAPHS + "/")


def redact_store(store: Store) -> list[dict[str, Any]]:
    """``cclg scan --store --redact``: replace every secret already in the store's files with
    ``[REDACTED:rule]``, one audited repair per file; returns what was changed.

    Secrets are the one thing rewritten in place: a patch would leave the old bytes on
    disk. A memory keeps its id; its content hash and retrieval keys follow the new
    content. The search index is deleted and rebuilt, so no old page keeps the bytes.
    """
    changed = []
    with store.lock():
        for path in sorted(p for p in store.root.rglob("*") if p.is_file()):
            relative = store.relative(path)
            if path.name == ".lock" or relative.startswith(_NOT_REDACTED):
                continue
            data = path.read_bytes()
            hits = guard.scan_bytes(data)
            if not hits:
                continue
            if path.suffix == ".jsonl":
                lines = [_redacted_json(line) if line.strip() else line for line in data.split(b"\n")]
                new = b"\n".join(lines)
            elif path.suffix == ".json" and relative.split("/")[0] in ("nodes", "patches", "edges", "sessions"):
                new = _redacted_record(relative, data)
            else:  # raw evidence, kept byte for byte but for the secrets
                new = guard.redact(data.decode("latin-1"), escaped=True)[0].encode("latin-1")
            store.write_file(path, new)
            changed.append({"file": relative, "rules": sorted({m.rule for _, m in hits}), "secrets": len(hits)})
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


def _redacted_json(line: bytes) -> bytes:
    try:
        value = json.loads(line)
    except ValueError:  # not JSON (a torn line): redact it as text
        return guard.redact(line.decode("latin-1"), escaped=True)[0].encode("latin-1")
    return json.dumps(guard.redact_value(value)[0], ensure_ascii=False).encode("utf-8")


def _redacted_record(relative: str, data: bytes) -> bytes:
    value, _ = guard.redact_value(json.loads(data))
    if relative.startswith("nodes/") and isinstance(value, dict) and isinstance(value.get("content"), str):
        node = MemoryNode.from_dict(value, where=relative)
        node.retrieval = retrieval_for(node.content)
        if node.stored_hash is not None:
            node.metadata["content_hash"] = content_hash(node.content)
        value = node.to_dict()
    return dumps(value)
