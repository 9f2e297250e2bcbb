"""Secrets already on disk: finding them in files (``cclg scan``) and removing them
from a store (``cclg scan --store --redact``); and the rewrite of a whole store that
removal runs on, which ``cclg purge`` (``cclg.ledger.purge``) shares.

Writes refuse secrets before they reach disk (``cclg.core.secrets``); this module is for
what got there anyway: files a user wants checked, and stores written before a
rule existed or by another tool. Both use the one detector of ``cclg.core.secrets``, so
what ``scan`` reports is what ``--redact`` removes and what a write would refuse.

``rewrite_store`` takes something out of every file of a store that holds it, through
a ``Rewrite`` (what to look for, and how to clean bytes, strings and records): each
file rewritten on its own, atomically (a log under its lock, so no append is lost).
It rewrites content only, the string values under the fields ``CONTENT_FIELDS`` declares
(and raw evidence, which is all content): never an id, a status, an operation, a schema
id, a key or ``config.json``, so every record and log line still reads as it did. A code
graph holding it is deleted (a cache). Then
``rebuild_projections`` deletes the search index and the vectors and builds the index
again, compacted, so no SQLite page or WAL frame keeps the old bytes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Container
from pathlib import Path
from typing import Any, Protocol

from cclg import format as fmt
from cclg.core import secrets
from cclg.core.fields import parse_json
from cclg.core.files import read_regular
from cclg.core.ids import content_hash, sha256_hex
from cclg.core.records import MemoryNode, dumps, retrieval_for
from cclg.core.store import CODEGRAPHS, INDEX_FILE, SEMANTIC_FILE, TEMP, Store, audit_record
from cclg.errors import UsageError, ValidationError
from cclg.ledger.index import compact_index, rebuild_index


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
            for line, match in secrets.scan_bytes(data):
                found.append({"path": str(file), "line": line, "rule": match.rule, "preview": match.preview})
    return found


# ---------------------------------------------------------------- rewriting a whole store

# The JSON fields of a store's files that hold content: what a memory or a patch says, and what a user,
# a tool or the agent said (a prompt, a tool's input and output, an answer, a turn's entry, what the
# sensors and the rules keep of a command). A rewrite changes string values under these fields, at any
# depth, and nowhere else: ids, statuses, operations, schema ids, times, counts, object keys and
# ``config.json`` are the structure the records are read by, and they keep their bytes. Raw evidence is
# content through and through (``cleaned``).
CONTENT_FIELDS = frozenset(
    {
        # memories (a node's metadata is a free map, which an import fills) and patches
        "content", "quote", "tags", "metadata", "new_content", "reason",
        # the hook's session logs (a host's payload is all outside text) and its failures
        "payload", "prompt", "recent_prompts", "compact_summary", "tool_input", "error", "last_assistant_message",
        # a tool call as the sensors keep it (a signal's line quotes it), and a rule's trigger (``cclg.learning.rules``)
        "command", "failure", "files", "read", "line", "trigger",
        # a turn's entry (``cclg.learning.turns``) and a session's task
        "layers", "current_focus", "theory_of_mind", "self_narrative", "annotation", "active_task",
    }
)  # fmt: skip


def content_only(old: Any, new: Any, inside: bool = False) -> Any:
    """``old`` with what ``new`` (the same value with its strings rewritten) changed under a content field
    (``CONTENT_FIELDS``) and nothing else: keys, and every value outside content, stay ``old``'s."""
    if isinstance(old, dict) and isinstance(new, dict):
        if len(old) != len(new):  # keys merged by the rewrite: inside content, its word; outside, nothing
            return new if inside else old
        return {
            key: content_only(item, other, inside or key in CONTENT_FIELDS)
            for (key, item), other in zip(old.items(), new.values(), strict=True)
        }
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [content_only(item, other, inside) for item, other in zip(old, new, strict=True)]
    return new if inside else old


class Rewrite(Protocol):
    """What one pass of ``rewrite_store`` takes out of a store's files."""

    verb: str  # the action a rewritten file is reported with ("redacted", "erased")

    def found(self, data: bytes) -> dict[str, Any] | None:
        """What a file's bytes hold of it, for the report (an empty dict says little); None for nothing."""

    def text(self, data: bytes) -> bytes:
        """Bytes of evidence (a raw file, a torn line) without it, every other byte kept."""

    def strings(self, value: Any) -> Any:
        """A JSON value with every string (keys too, where it may) rewritten without it; ``content_only``
        keeps what of that lies outside content."""

    def record(self, relative: str, value: Any) -> Any:
        """A JSON file's value or a log line's (``relative`` names the file) without it, its structure
        kept (``content_only``)."""


# Projections of the records, deleted and rebuilt rather than edited (SQLite pages keep old text).
_PROJECTIONS = (INDEX_FILE, SEMANTIC_FILE)
# The files of one code graph: <name>.json, .cache.json, .search.sqlite (and its side files).
_GRAPH_SUFFIXES = (".cache.json", ".search.sqlite-wal", ".search.sqlite-shm", ".search.sqlite", ".json")


def rewrite_store(store: Store, rewrite: Rewrite, *, skip: Container[str] = ()) -> list[dict[str, Any]]:
    """Under the store lock, take what ``rewrite`` finds out of every file of the store but those in
    ``skip`` (paths relative to the root), each file on its own; returns {file, ...found, action} for
    each file that held it: ``rewrite.verb`` (rewritten), ``removed`` (a code graph, with its
    indexes) or ``rebuilt`` (a projection: call ``rebuild_projections``). A file that holds it
    only where the rewrite leaves it is not listed. Temp files of writes in progress and the store's
    config are left alone."""
    changed = []
    untouched = (fmt.PATHS["lock"], fmt.PATHS["config"])
    with store.lock():
        for path in sorted(p for p in store.root.rglob("*") if p.is_file()):
            relative = store.relative(path)
            if relative in skip or relative in untouched or relative.startswith(TEMP + "/"):
                continue
            entry = _rewrite_file(store, rewrite, path, relative)
            if entry is not None:
                changed.append(entry)
    return changed


RAW_REWRITTEN = "raw_rewritten"  # the audit record of raw evidence rewritten in place: its new SHA-256


def raw_rewritten(store: Store, changed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``raw_rewritten`` audit records of the raw files in ``changed`` (``rewrite_store``'s answer):
    each one's path and the SHA-256 and size of its bytes now. An erasure's audit records come first
    and these right after them, so ``cclg doctor`` knows the digest each raw file should have."""
    records = []
    for entry in changed:
        if entry["file"].startswith("raw/") and entry.get("action") not in ("removed", "rebuilt"):
            data = store.path_of(entry["file"]).read_bytes()
            records.append(audit_record(RAW_REWRITTEN, path=entry["file"], sha256=sha256_hex(data), bytes=len(data)))
    return records


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
        compact_index(store)


def cleaned(rewrite: Rewrite, relative: str, data: bytes) -> bytes:
    """A file's bytes without what ``rewrite`` takes out. Raw evidence is content through and through: a
    JSON file (or JSON lines) of it has its string values rewritten where they stand, any other has its
    bytes rewritten. Every other JSON file of the store (records, logs line by line, turn entries) has
    only its content rewritten (``content_only``) and stays valid JSON; a file that does not parse (a
    torn line, a broken copy) is cleaned as text."""
    if relative.startswith("raw/"):
        return _cleaned_evidence(rewrite, data)
    if relative.endswith(".jsonl"):
        return b"\n".join(
            _cleaned_line(rewrite, relative, line) if line.strip() else line for line in data.split(b"\n")
        )
    if not relative.endswith(".json"):
        return rewrite.text(data)
    try:
        value = parse_json(data)
    except ValueError:
        return rewrite.text(data)
    new = rewrite.record(relative, value)
    return data if new == value else dumps(new)


def _is_log(relative: str) -> bool:
    """Whether ``relative`` names a JSON-lines log of the store (``Store.logs``; not raw evidence named .jsonl)."""
    return relative.endswith(".jsonl") and relative.split("/")[0] in ("audit", "sessions")


def _cleaned_line(rewrite: Rewrite, relative: str, line: bytes) -> bytes:
    if rewrite.found(line) is None:  # the lines that hold nothing of it keep their bytes
        return line
    try:
        value = parse_json(line)
    except ValueError:  # not JSON (a torn line): cleaned as text
        return rewrite.text(line)
    new = rewrite.record(relative, value)
    return line if new == value else json.dumps(new, ensure_ascii=False).encode("utf-8")


# A JSON string token, and whether it is an object's key (a colon follows).
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"(\s*:)?', re.DOTALL)


def _cleaned_evidence(rewrite: Rewrite, data: bytes) -> bytes:
    """Raw evidence without it. Its bytes are rewritten, unless that would change the structure of a JSON
    file (a hook event's payload, a turn's entry, JSON lines): then each string value is rewritten where
    it stands, and every key and every other byte is kept."""
    new = rewrite.text(data)
    text = data.decode("utf-8", "surrogateescape")
    before = _json_shape(text)
    if before is None or new == data or _json_shape(new.decode("utf-8", "surrogateescape")) == before:
        return new

    def value(match: re.Match[str]) -> str:
        token = match.group()
        if match.group(1) is not None:  # a key
            return token
        old = json.loads(token)
        clean = rewrite.text(old.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
        return token if clean == old else json.dumps(clean, ensure_ascii=token.isascii() and not old.isascii())

    return _JSON_STRING.sub(value, text).encode("utf-8", "surrogateescape")


def _json_shape(text: str) -> list[Any] | None:
    """The structure of JSON text (one document, or JSON lines): its keys, nesting and every value but
    strings; None for text that is no JSON."""

    def shape(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: shape(item) for key, item in value.items()}
        if isinstance(value, list):
            return [shape(item) for item in value]
        return None if isinstance(value, str) else value

    try:
        return [shape(parse_json(text))]
    except ValueError:
        pass
    try:
        return [shape(parse_json(line)) for line in text.split("\n") if line.strip()] or None
    except ValueError:
        return None


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
    records and logs are redacted in their content (``CONTENT_FIELDS``) and stay valid JSON (a
    memory keeps its id; its content hash and retrieval keys follow the new content), raw evidence
    keeps every other byte. A secret outside content is left and reported by the scan after. The
    search index and the vectors are deleted and rebuilt, so no old page keeps the bytes. A
    code graph holding a secret (built before graphs were redacted) is deleted with its
    indexes: ``cclg code-index`` builds it again, without the secret.
    """
    with store.lock():
        changed = rewrite_store(store, _Redaction())
        if changed:
            store.audit_many(
                [
                    *(
                        audit_record("repair_applied", action="redact_secrets", file=c["file"], rules=c["rules"])
                        for c in changed
                    ),
                    *raw_rewritten(store, changed),
                ]
            )
            rebuild_projections(store)
    return changed


class _Redaction:
    """The secrets of ``cclg.core.secrets``, replaced by ``[REDACTED:rule]``, in content only."""

    verb = "redacted"

    def found(self, data: bytes) -> dict[str, Any] | None:
        hits = secrets.scan_bytes(data)
        return {"rules": sorted({m.rule for _, m in hits}), "secrets": len(hits)} if hits else None

    def text(self, data: bytes) -> bytes:
        return secrets.redact_bytes(data)[0]

    def strings(self, value: Any) -> Any:
        return secrets.redact_value(value)[0]  # a key read with its value, as every write reads it

    def record(self, relative: str, value: Any) -> Any:
        new = content_only(value, self.strings(value))
        if relative.startswith("nodes/") and isinstance(new, dict) and new.get("content") != value.get("content"):
            try:  # a memory keeps its id; its retrieval keys and content hash follow the new content
                node = MemoryNode.from_dict(new, where=relative)
            except ValidationError:  # no record that reads back (a sync tool's copy): its content is cleaned
                return new
            node.retrieval = retrieval_for(node.content)
            if node.stored_hash is not None:
                node.metadata["content_hash"] = content_hash(node.content)
            return node.to_dict()
        return new
