"""Library operations behind the command line and the MCP server.

Each function takes an open ``Store`` and plain values, does one job through the
ledger, and returns records or plain dicts; the surfaces only parse and print.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cclg import format as fmt
from cclg import guard, ledger
from cclg.errors import IllegalPatchError, NotFoundError, UsageError, ValidationError
from cclg.index import Index, open_index
from cclg.index import connect as connect_index  # a rebuild after redaction needs no sync first
from cclg.lattice import INITIAL_STATUSES
from cclg.ledger import PatchResult, create_nodes, effective_view
from cclg.records import (
    MemoryNode,
    MemoryPatch,
    Record,
    Scope,
    Source,
    content_hash,
    dumps,
    is_valid_id,
    new_node,
    normalize_text,
    retrieval_for,
)
from cclg.search import Where, bm25, search
from cclg.sessions import note_overlay
from cclg.store import Store, audit_record, read_jsonl

SHORT_LINE_FIELDS = (
    "content",
    "type",
    "source",
    "key",
    "scope",
    "tags",
    "quote",
    "confidence",
    "priority",
    "provenance",
)


def parse_scope(pairs: list[str] | dict[str, Any] | None) -> Scope:
    """A scope from ``key=value`` strings or a (partial) dict; unknown keys are an error."""
    values: dict[str, Any] = {}
    if isinstance(pairs, dict):
        values = dict(pairs)
    else:
        for pair in pairs or []:
            key, sep, value = pair.partition("=")
            if not sep:
                raise UsageError(f"scope must be key=value, got {pair!r}")
            values[key.strip()] = value.strip() or None
    unknown = sorted(set(values) - set(fmt.SCOPE_KEYS))
    if unknown:
        raise UsageError(f"unknown scope key(s) {', '.join(unknown)}; use {', '.join(fmt.SCOPE_KEYS)}")
    for key, value in values.items():
        if value is not None and not isinstance(value, str):
            raise UsageError(f"scope {key} must be a string or null")
        values[key] = (value.strip() or None) if isinstance(value, str) else None  # "" is unset, as on the CLI
    return Scope(**values)


def build_node(
    content: str,
    *,
    source: str,
    type: str = "memory",
    key: str | None = None,
    quote: str | None = None,
    confidence: float = 1.0,
    priority: str = "normal",
    scope: Scope | None = None,
    tags: list[str] | None = None,
    created_by: str = "manual",
    trust: str = guard.DEFAULT_TRUST,
    sensitivity: str = guard.DEFAULT_SENSITIVITY,
    retention: str = guard.DEFAULT_RETENTION,
) -> MemoryNode:
    """A new node from user-level arguments, checked like a record read from disk.

    Trust, sensitivity and retention go to metadata (untrusted, internal and
    optional unless the caller says otherwise: only the user's own surface, the
    CLI, says trusted). ``create_nodes`` flags content that reads as instructions.
    """
    if not content.strip():
        raise UsageError("content must not be empty")
    if not source.strip():
        raise UsageError("a memory needs a source label (where did this come from?)")
    if type not in fmt.NODE_TYPES:
        raise UsageError(f"unknown type {type!r}; use one of {', '.join(fmt.NODE_TYPES)}")
    guard.check_labels(trust, sensitivity, retention)
    metadata: dict[str, Any] = {
        "created_by": created_by,
        "trust": trust,
        "sensitivity": sensitivity,
        "retention": retention,
    }
    return new_node(
        content,
        type=type,
        key=key or None,
        scope=scope,
        confidence=confidence,
        priority=priority,
        tags=tags,
        source=Source(label=source, quote=quote),
        metadata=metadata,
    )


# Statuses of content that was thrown out: adding it again needs ``force``.
THROWN_OUT = ("forgotten", "discarded")
SIMILAR_RATIO = 0.85  # how alike two texts must be (difflib ratio, normalised) to be reported as near-duplicates


class AddResult(Record):
    """What ``add_memory`` did: the memory (the new one, or the existing one the content
    duplicates), the patch that wrote it, and near-duplicates worth patching instead."""

    def __init__(
        self,
        node: MemoryNode,
        patch: MemoryPatch | None = None,
        duplicate_of: str | None = None,
        similar: list[dict[str, str]] | None = None,
    ) -> None:
        self.node = node
        self.patch = patch
        self.duplicate_of = duplicate_of
        self.similar = [] if similar is None else similar

    @property
    def new_nodes(self) -> list[MemoryNode]:
        """What was written: the memory, or nothing for a duplicate."""
        return [self.node] if self.patch is not None else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node.to_dict(),
            "patch_id": None if self.patch is None else self.patch.id,
            "duplicate_of": self.duplicate_of,
            "similar": self.similar,
        }


def add_memory(
    store: Store, content: str, *, source: str, reason: str | None = None, force: bool = False, **fields: Any
) -> AddResult:
    """``cclg add``: one new memory, written with its ``create`` patch.

    - Content whose canonical hash equals a current memory of the same scope is
      not written again: the existing memory comes back (``duplicate_of``).
    - Content that was forgotten or discarded is refused, naming the patch that
      threw it out, unless ``force``: a thrown-out claim does not quietly return.
      Both checks use the index's content hashes, not a scan.
    - Current memories of the same scope with the same key or very similar text
      are listed in ``similar``: patching one of them is usually what was meant.
    """
    node = build_node(content, source=source, **fields)
    ledger.refuse_node_secrets([node])  # before the duplicate check: a secret is refused, not matched
    with store.lock():
        index = open_index(store)
        try:
            existing, thrown_out = _content_seen(store, index, node)
            if existing is not None:
                return AddResult(existing, duplicate_of=existing.id)
            if thrown_out is not None and not force:
                raise IllegalPatchError(f"refused: {thrown_out}; add it again with --force if it is true after all")
            similar = _similar(index, node)
        finally:
            index.close()
        result = create_nodes(store, [node], reason=reason or f"added from {source}", source=node.source)
        if node.scope.session:
            note_overlay(store, node.scope.session, node.id)
    return AddResult(node, result.patch, similar=similar)


def _content_seen(store: Store, index: Index, node: MemoryNode) -> tuple[MemoryNode | None, str | None]:
    """What the index knows of ``node``'s content: the current memory of the same scope that holds
    it, and, if it was thrown out (forgotten, discarded), how and when."""
    thrown_out = []
    for node_id, status, current, record in index.same_content(content_hash(node.content)):
        other = MemoryNode.from_dict(json.loads(record), where=f"nodes/{node_id}.json")
        if current and other.scope.to_dict() == node.scope.to_dict():
            return other, None
        if status in THROWN_OUT:
            thrown_out.append(other)
    if not thrown_out:
        return None, None
    other = thrown_out[0]
    patches = [store.read_patch(p) for p in index.patches_targeting(other.id)]
    last = max(patches, key=lambda p: (p.created_at, p.id), default=None)
    how = "" if last is None else f" by {last.id} ({last.operation}, {last.created_at[:10]}: {last.reason})"
    return None, f"this content was {other.status}{how} as {other.id}"


SIMILAR_CHARS = 2_000  # the near-duplicate check looks at this much of each text


def _similar(index: Index, node: MemoryNode) -> list[dict[str, str]]:
    where = Where(session_id=node.scope.session, project=node.scope.project, workspace=node.scope.workspace)
    text = normalize_text(node.content[:SIMILAR_CHARS]).lower()
    found = []
    for hit in bm25(index, text, where, limit=5):
        other = hit.node
        if other.scope.to_dict() != node.scope.to_dict():
            continue
        other_text = normalize_text(other.content[:SIMILAR_CHARS]).lower()
        if node.key is not None and other.key == node.key:
            found.append({"id": other.id, "why": f"same key {node.key!r}"})
        elif difflib.SequenceMatcher(None, text, other_text).ratio() >= SIMILAR_RATIO:
            found.append({"id": other.id, "why": "very similar text"})
    if node.key is not None and not any(f["why"].startswith("same key") for f in found):
        for other in index.current_with_key(node.key):
            if other.scope.to_dict() == node.scope.to_dict():
                found.append({"id": other.id, "why": f"same key {node.key!r}"})
    return found


@dataclass
class ImportResult:
    patch: MemoryPatch | None
    nodes: list[MemoryNode]
    duplicates: list[dict[str, Any]] | None = None  # {"line", "duplicate_of"}: not written again

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": len(self.nodes),
            "patch_id": self.patch.id if self.patch else None,
            "node_ids": [n.id for n in self.nodes],
            "duplicates": self.duplicates or [],
        }


def parse_import_line(value: Any, number: int, where: str) -> MemoryNode:
    """One import line: a full MemoryNode record or a short ``{"content", "source", ...}`` line."""
    if isinstance(value, dict) and "schema_version" in value:
        node = MemoryNode.from_dict(value, where=f"{where} line {number}")
        if node.status not in INITIAL_STATUSES:
            raise ValidationError(
                f"{where} line {number}: status {node.status} cannot be imported as a new "
                "memory (only current ones; move history with a .cclg container)"
            )
        node.metadata.setdefault("content_hash", content_hash(node.content))
        # An imported file cannot vouch for itself: trust is at most untrusted.
        trust, _, _ = guard.labels(node.metadata)
        node.metadata["trust"] = guard.least_trusted(trust, "untrusted")
        return node
    if not isinstance(value, dict):
        raise ValidationError(f"{where} line {number}: must be a JSON object")
    unknown = sorted(set(value) - set(SHORT_LINE_FIELDS))
    if unknown:
        raise ValidationError(f"{where} line {number}: unknown field(s) {', '.join(unknown)}")
    provenance = value.get("provenance")
    provenance = provenance if isinstance(provenance, dict) else {}
    fields = {
        "content": value.get("content"),
        "source": value.get("source", provenance.get("source")),
        "type": value.get("type", "memory"),
        "key": value.get("key"),
        "quote": value.get("quote", provenance.get("quote")),
        "priority": value.get("priority", "normal"),
        "confidence": value.get("confidence", 1.0),
        "scope": value.get("scope", {}),
        "tags": value.get("tags", []),
    }
    shapes: dict[str, tuple[type, ...]] = {
        "content": (str,),
        "source": (str,),
        "type": (str,),
        "key": (str, type(None)),
        "quote": (str, type(None)),
        "priority": (str,),
        "confidence": (int, float),
        "scope": (dict,),
        "tags": (list,),
    }
    for name, allowed in shapes.items():
        if isinstance(fields[name], bool) or not isinstance(fields[name], allowed):
            raise ValidationError(f"{where} line {number}: field '{name}' is missing or has the wrong type")
    if not all(isinstance(t, str) for t in fields["tags"]):
        raise ValidationError(f"{where} line {number}: field 'tags' must be a list of strings")
    try:
        return build_node(
            fields["content"],
            source=fields["source"],
            type=fields["type"],
            key=fields["key"],
            quote=fields["quote"],
            confidence=float(fields["confidence"]),
            priority=fields["priority"],
            scope=parse_scope(fields["scope"]),
            tags=fields["tags"],
            created_by="import",
        )
    except (UsageError, ValidationError) as exc:
        raise ValidationError(f"{where} line {number}: {exc}") from None


def import_jsonl(store: Store, data: bytes, *, name: str = "<stdin>", force: bool = False) -> ImportResult:
    """Import memories from JSON lines, all or nothing.

    Every line is checked first; if any is bad, nothing is written and the
    ``ValidationError`` lists each bad line by number. A line whose content is
    already current in its scope (in the store or earlier in the file) is skipped
    and reported; content that was forgotten or discarded refuses the import
    (``IllegalPatchError`` naming the lines) unless ``force``. Otherwise all nodes
    are written under one ``create`` patch, so ``cclg rollback`` undoes the import.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{name}: not UTF-8 text ({exc})") from None
    nodes: list[MemoryNode] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            node = parse_import_line(json.loads(line), number, name)
        except json.JSONDecodeError as exc:
            problems.append(f"{name} line {number}: not JSON ({exc.msg})")
            continue
        except ValidationError as exc:
            problems.extend(exc.problems)
            continue
        if node.id in seen:
            problems.append(f"{name} line {number}: id {node.id} repeats line {seen[node.id]}")
            continue
        if store.node_path(node.id).exists():
            problems.append(f"{name} line {number}: id {node.id} is already in the store")
            continue
        seen[node.id] = number
        nodes.append(node)
    if problems:
        raise ValidationError(f"{len(problems)} bad line(s) in {name}; nothing was imported", problems)
    with store.lock():
        fresh, duplicates, refused = _new_content_only(store, nodes, {n.id: seen[n.id] for n in nodes})
        if refused and not force:
            first = refused[0]
            raise IllegalPatchError(
                f"refused: {name} line {first[0]}: {first[1]}"
                + (f" (and {len(refused) - 1} more line(s))" if len(refused) > 1 else "")
                + "; nothing was imported; --force imports them anyway"
            )
        if not fresh:
            return ImportResult(patch=None, nodes=[], duplicates=duplicates)
        result = create_nodes(
            store,
            fresh,
            reason=f"import-jsonl {name}",
            source=Source(label=f"import:{name}"),
            new_content=f"imported {len(fresh)} memories from {name}",
        )
    return ImportResult(patch=result.patch, nodes=fresh, duplicates=duplicates)


def _new_content_only(
    store: Store, nodes: list[MemoryNode], lines: dict[str, int]
) -> tuple[list[MemoryNode], list[dict[str, Any]], list[tuple[int, str]]]:
    """(nodes to write, duplicates skipped, (line, why) of thrown-out content) for an import."""
    fresh: list[MemoryNode] = []
    duplicates: list[dict[str, Any]] = []
    refused: list[tuple[int, str]] = []
    in_file: dict[tuple[str, str], str] = {}
    index = open_index(store)
    try:
        for node in nodes:
            line = lines[node.id]
            mark = (content_hash(node.content), json.dumps(node.scope.to_dict(), sort_keys=True))
            existing, thrown_out = _content_seen(store, index, node)
            if existing is not None or mark in in_file:
                duplicates.append({"line": line, "duplicate_of": existing.id if existing else in_file[mark]})
                continue
            if thrown_out is not None:
                refused.append((line, thrown_out))
            in_file[mark] = node.id
            fresh.append(node)
    finally:
        index.close()
    return fresh, duplicates, refused


def status(store: Store) -> dict[str, Any]:
    """Counts of what the store holds."""
    nodes = store.load_nodes()
    patches = store.load_patches()
    by_status = Counter(n.status for n in nodes.values())
    audit = read_jsonl(store.audit_path)
    return {
        "root": str(store.root),
        "format": fmt.FORMAT_ID,
        "nodes": len(nodes),
        "effective": len(effective_view(nodes.values(), patches)),
        "by_status": dict(sorted(by_status.items())),
        "patches": len(patches),
        "edges": len(store.record_files("edges")),
        "sessions": len(store.record_files("sessions")),
        "raw_files": sum(1 for p in (store.root / "raw").iterdir() if not p.name.startswith(".")),
        "audit_records": len(audit.records),
        "last_change": patches[-1].created_at if patches else None,
    }


def history(store: Store, *, node_id: str | None = None, limit: int | None = None) -> list[MemoryPatch]:
    """Patches newest first, optionally only those touching ``node_id``."""
    if node_id is not None:
        store.node_path(node_id)  # validates the id
    patches = store.load_patches()
    if node_id is not None:
        patches = [
            p for p in patches if node_id in p.target_ids or node_id in p.new_node_ids or node_id in p.prior_states
        ]
    patches.reverse()
    return patches[:limit] if limit else patches


def patch_diff(store: Store, patch_id: str) -> dict[str, Any]:
    """What a patch changed: each target's status move and a content diff old -> new."""
    patch = store.read_patch(patch_id)
    nodes = {node_id: _read_optional(store, node_id) for node_id in [*patch.target_ids, *patch.new_node_ids]}
    changes = []
    for node_id in patch.target_ids:
        node = nodes[node_id]
        changes.append({"id": node_id, "before": patch.prior_states.get(node_id), "now": node.status if node else None})
    diffs = []
    for new_id_ in patch.new_node_ids:
        new = nodes[new_id_]
        for old_id in patch.target_ids:
            old = nodes[old_id]
            if old is None or new is None:
                continue
            lines = difflib.unified_diff(
                old.content.splitlines(), new.content.splitlines(), fromfile=old_id, tofile=new_id_, lineterm=""
            )
            diffs.append("\n".join(lines))
    return {
        "patch": patch.to_dict(),
        "status_changes": changes,
        "new_nodes": [node.to_dict() for n in patch.new_node_ids if (node := nodes[n]) is not None],
        "content_diff": diffs,
    }


def _read_optional(store: Store, node_id: str) -> MemoryNode | None:
    try:
        return store.read_node(node_id)
    except NotFoundError:
        return None


def cite(store: Store, node_id: str) -> dict[str, Any]:
    """Provenance of one memory: source, quote, raw spans with their text, and its patch history."""
    node = store.read_node(node_id)
    spans = []
    for span in node.source.raw_spans:
        text = None
        raw_path = (store.root / "raw" / str(span.get("source_id", ""))).resolve()
        if raw_path.parent == (store.root / "raw").resolve() and raw_path.is_file():
            content = raw_path.read_bytes().decode("utf-8", errors="replace")
            text = content[span["char_start"] : span["char_end"]]
        spans.append({**span, "text": text})
    return {
        "id": node.id,
        "status": node.status,
        "content": node.content,
        "source": node.source.to_dict(),
        "raw_spans": spans,
        "created_by_patch": next((p.id for p in history(store, node_id=node_id) if node_id in p.new_node_ids), None),
        "patches": [p.id for p in history(store, node_id=node_id)],
        "relations": {k: v for k, v in node.relations.items() if v},
    }


def resolve_node_id(store: Store, text: str) -> str:
    """Accept a full id, or a unique prefix of one (``mem_01jq`` style)."""
    if is_valid_id(text, "mem") and store.node_path(text).exists():
        return text
    matches = []
    if text.startswith("mem_"):
        matches = [p.stem for p in store.record_files("nodes") if p.stem.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise UsageError(f"{text} matches {len(matches)} memories; give more of the id")
    raise NotFoundError(f"no memory {text} in {store.root}")


def patch(
    store: Store,
    operation: str,
    targets: list[str],
    *,
    contents: list[str],
    reason: str,
    source: str = "manual",
    confidence: float = 1.0,
    max_trust: str = "trusted",
) -> PatchResult:
    """``cclg patch``: one patch operation. For ``rollback`` the one target is a patch id;
    ``create`` takes one content and no target; the others take memory ids (or prefixes).
    New memories are trusted at most ``max_trust`` (MCP callers pass ``untrusted``)."""
    if operation not in fmt.PATCH_OPERATIONS:
        raise UsageError(f"unknown patch operation {operation!r}; use one of {', '.join(fmt.PATCH_OPERATIONS)}")
    if operation == "rollback":
        if len(targets) != 1 or contents:
            raise UsageError("rollback takes exactly one target, the id of the patch to undo, and no content")
        return ledger.rollback(store, targets[0], reason=reason, source=Source(label=source))
    if operation == "create":
        if len(contents) != 1 or targets:
            raise UsageError("create takes one content and no target")
        added = add_memory(store, contents[0], source=source, reason=reason, confidence=confidence, trust=max_trust)
        if added.patch is None:
            raise UsageError(f"{added.duplicate_of} already holds this content; nothing was written")
        return PatchResult(patch=added.patch, new_nodes=added.new_nodes)
    ids = [resolve_node_id(store, t) for t in targets]
    return ledger.apply_patch(
        store,
        operation,
        ids,
        reason=reason,
        contents=contents,
        source=Source(label=source),
        confidence=confidence,
        max_trust=max_trust,
    )


def keep_raw(store: Store, data: bytes, name: str) -> dict[str, Any]:
    """``cclg raw``: keep bytes verbatim as evidence (content-addressed, never overwritten)."""
    # latin-1 maps every byte to one character: binary files scan without errors, offsets stay byte offsets.
    guard.refuse_secrets({"raw": data.decode("latin-1"), "name": name}, f"keeping {guard.redact(name)[0]}")
    stored, written = store.write_raw(data, name)
    return {"path": stored, "bytes": len(data), "written": written}


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
_NOT_REDACTED = ("index.sqlite", "active/codegraphs/")


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
            for leftover in store.root.glob("index.sqlite*"):
                leftover.unlink()
            index = connect_index(store)
            try:
                index.rebuild()
            finally:
                index.close()
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


def recall(store: Store, query: str, *, where: Where | None = None, limit: int = 5) -> list[dict[str, Any]]:
    """Current memories for ``query``, each with its provenance (source, quote, raw spans)."""
    hits = search(store, query, mode="bm25", limit=limit, where=where)
    return [
        {"id": h.id, "score": round(h.score, 4), "node": h.node.to_dict(), "provenance": cite(store, h.id)}
        for h in hits
    ]


def conflicts(store: Store) -> list[dict[str, Any]]:
    """Memories waiting for a decision: those in ``conflict_pending``, with what contradicts them."""
    nodes = store.load_nodes()
    found = []
    for node in sorted(nodes.values(), key=lambda n: n.id):
        if node.status != "conflict_pending":
            continue
        others = sorted(
            {*node.relations.get("contradicts", [])}
            | {n.id for n in nodes.values() if node.id in n.relations.get("contradicts", [])}
        )
        found.append({"node": node.to_dict(), "contradicted_by": others})
    return found


def resolve(
    store: Store,
    targets: list[str],
    *,
    content: str,
    reason: str,
    source: str = "manual",
    confidence: float = 1.0,
    max_trust: str = "trusted",
) -> PatchResult:
    """``cclg resolve``: settle a conflict with one memory that says what is true now
    (a ``resolve_conflict`` patch: the targets are retired, the new memory resolves them)."""
    if not targets:
        raise UsageError("resolve needs the ids of the memories in conflict")
    return patch(
        store,
        "resolve_conflict",
        targets,
        contents=[content],
        reason=reason,
        source=source,
        confidence=confidence,
        max_trust=max_trust,
    )


def audit_log(
    store: Store, *, limit: int = 50, event: str | None = None, memory_id: str | None = None
) -> list[dict[str, Any]]:
    """The audit log, newest first, optionally one event kind or the records naming one memory."""
    if event is not None and event not in fmt.AUDIT_EVENTS:
        raise UsageError(f"unknown audit event {event!r}; use one of {', '.join(fmt.AUDIT_EVENTS)}")
    node_id = resolve_node_id(store, memory_id) if memory_id else None
    records = []
    for record in reversed(read_jsonl(store.audit_path).records):
        if event is not None and record.get("event") != event:
            continue
        if node_id is not None and node_id not in json.dumps(record):
            continue
        records.append(record)
        if len(records) >= limit:
            break
    return records
