"""New memories entering the store: ``cclg add`` and ``cclg import-jsonl``.

A new memory is built from user-level arguments and checked like a record read
from disk (``build_node``), then written by the ledger's ``create_nodes``. Before
anything is written:

- content already current in the same scope is not written again (the existing
  memory comes back);
- content that was forgotten, discarded or purged (``cclg.ledger.purge``) is refused unless forced;
- current memories with the same key or very similar text are named, since
  patching one of them is usually what was meant.

The checks read the index's content hashes, never a scan of the files.

Nothing from outside vouches for itself: an imported memory (a full record in
``import-jsonl``, a node of a ``.cclg`` container) is at most untrusted, never
pinned, its retention at most preferred (``cap_imported``); only the user raises
them (``cclg label``). An import is all or nothing: none of its memories is
current before its patch is durable (``cclg.ledger.writer.create_nodes`` stages them).
"""

from __future__ import annotations

import difflib
import itertools
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cclg import format as fmt
from cclg.core import labels, media
from cclg.core.fields import parse_json
from cclg.core.ids import content_hash, normalize_text
from cclg.core.records import MemoryNode, MemoryPatch, Record, Scope, Source, new_node, set_questions
from cclg.core.repository import git_project
from cclg.core.store import Store
from cclg.core.text import query_terms
from cclg.errors import IllegalPatchError, UsageError, ValidationError
from cclg.ledger import writer
from cclg.ledger.index import Index, healing, indexed_node
from cclg.ledger.lattice import INITIAL_STATUSES
from cclg.ledger.sessions import note_overlay
from cclg.ledger.staging import finish
from cclg.ledger.writer import PURGED, create_nodes, purged_contents, purged_hash
from cclg.retrieval.query import Where
from cclg.retrieval.search import bm25, rarest_terms

SHORT_LINE_FIELDS = (
    "content",
    "type",
    "source",
    "key",
    "scope",
    "tags",
    "questions",
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


def scope_for(
    pairs: list[str] | dict[str, Any] | None, *, folder: str | Path | None = None, global_scope: bool = False
) -> Scope:
    """The scope of a new memory written from ``folder``: ``pairs`` as given; with no project among
    them, the project of the git repository holding ``folder`` (the one the hook reads memories for
    there), unless ``global_scope`` asks for a memory of every project."""
    scope = parse_scope(pairs)
    if global_scope:
        if scope.project is not None:
            raise UsageError(f"a global memory has no project; drop project={scope.project} or the global option")
        return scope
    if scope.project is None and folder is not None:
        scope.project = git_project(folder)
    return scope


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
    trust: str = labels.DEFAULT_TRUST,
    sensitivity: str = labels.DEFAULT_SENSITIVITY,
    retention: str = labels.DEFAULT_RETENTION,
    valid_from: str | None = None,
    valid_until: str | None = None,
    flags: list[str] | None = None,
    questions: list[str] | None = None,
    raw_spans: list[dict[str, Any]] | None = None,
    attachments: list[dict[str, Any]] | None = None,
) -> MemoryNode:
    """A new node from user-level arguments, checked like a record read from disk.

    Trust, sensitivity and retention go to metadata (untrusted, internal and
    optional unless the caller says otherwise: only the user's own surface, the
    CLI, says trusted). ``create_nodes`` flags content that reads as instructions;
    ``flags`` adds what the caller knows of text the content only quotes in part
    (a rule's excerpt of tool output). ``questions``: the questions it answers, in the words a user
    would ask with (``cclg.core.records.set_questions``). ``raw_spans``: the raw evidence it cites;
    ``attachments``: the binary files among them, named in ``metadata.attachments``
    (``cclg.core.media.attachment``), which packs name and never inline.
    """
    if not content.strip():
        raise UsageError("content must not be empty")
    if not source.strip():
        raise UsageError("a memory needs a source label (where did this come from?)")
    if type not in fmt.NODE_TYPES:
        raise UsageError(f"unknown type {type!r}; use one of {', '.join(fmt.NODE_TYPES)}")
    labels.check_labels(trust, sensitivity, retention)
    no_end = valid_until == writer.NO_END  # the default on a new memory
    effective_from, effective_until = writer.validity(valid_from, None if no_end else valid_until)
    metadata: dict[str, Any] = {
        "created_by": created_by,
        "trust": trust,
        "sensitivity": sensitivity,
        "retention": retention,
    }
    if flags:
        metadata["flags"] = sorted(set(flags))
    if attachments:
        metadata[media.ATTACHMENTS] = attachments
    node = new_node(
        content,
        type=type,
        key=key or None,
        scope=scope,
        confidence=confidence,
        priority=priority,
        tags=tags,
        source=Source(label=source, quote=quote, raw_spans=list(raw_spans or [])),
        metadata=metadata,
        effective_from=effective_from,
        effective_until=effective_until,
    )
    set_questions(node, questions or [])
    return node


# The most an imported memory may claim; only the user raises a memory past these (``cclg label``).
IMPORT_MAX_TRUST = "untrusted"
IMPORT_MAX_RETENTION = labels.UNPINNED_RETENTION


def cap_imported(node: MemoryNode) -> list[str]:
    """Lower what an imported node claims for itself, in place: trust at most untrusted, retention
    at most preferred, never pinned, no purge marker (``metadata.purged``: a foreign record never makes
    this store refuse content). Returns what was lowered (empty when nothing was)."""
    metadata = node.metadata
    lowered = []
    if metadata.get("trust") == "trusted":
        metadata["trust"] = IMPORT_MAX_TRUST
        lowered.append(f"trust trusted -> {IMPORT_MAX_TRUST}")
    if metadata.get("retention") == "required":
        metadata["retention"] = IMPORT_MAX_RETENTION
        lowered.append(f"retention required -> {IMPORT_MAX_RETENTION}")
    if "pinned" in metadata:
        lowered.append(f"pinned {json.dumps(metadata.pop('pinned'))} -> not pinned")
    if PURGED in metadata:  # only a purge this store performed refuses content
        metadata.pop(PURGED)
        lowered.append("a purge marker -> none (only a purge of this store counts)")
    return lowered


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
    store: Store,
    content: str,
    *,
    source: str,
    reason: str | None = None,
    force: bool = False,
    max_trust: str = "trusted",
    lock_wait: float | None = None,
    **fields: Any,
) -> AddResult:
    """``cclg add``: one new memory, written with its ``create`` patch.

    - Content whose canonical hash equals a current memory of the same scope is
      not written again: the existing memory comes back (``duplicate_of``).
    - Content that was forgotten or discarded is refused, naming the patch that
      threw it out, unless ``force``: a thrown-out claim does not quietly return.
      Both checks use the index's content hashes, not a scan.
    - Current memories of the same scope with the same key or very similar text
      are listed in ``similar``: patching one of them is usually what was meant.
    - A caller limited to ``max_trust`` (MCP: untrusted) cannot ask for more, nor pin the
      memory into every pack (retention required).
    - ``lock_wait``: how long to wait for the store lock (a ``ConcurrencyError`` after), for a
      caller that must not wait long, such as the hook.
    """
    trust = fields.get("trust", labels.DEFAULT_TRUST)
    labels.check_labels(trust)
    if labels.least_trusted(trust, max_trust) != trust:
        raise UsageError(f"this caller cannot mark a memory {trust}; the user can, with `cclg add --trust {trust}`")
    if max_trust != "trusted" and fields.get("retention") == "required":
        raise UsageError("this caller cannot pin a memory (retention required); the user can, with `cclg label`")
    node = build_node(content, source=source, **fields)
    writer.refuse_node_secrets([node])  # before the duplicate check: a secret is refused, not matched

    def write(index: Index) -> AddResult:  # one connection for the checks and the write: closing one costs a checkpoint
        existing, thrown_out = seen_content(store, index, node, purged_contents(store, index))
        if existing is not None:
            return AddResult(existing, duplicate_of=existing.id)
        if thrown_out is not None and not force:
            raise IllegalPatchError(f"refused: {thrown_out}; add it again with --force if it is true after all")
        similar = _similar(index, node)
        result = create_nodes(
            store, [node], reason=reason or f"added from {source}", source=node.source, index=index, allow_purged=force
        )
        return AddResult(node, result.patch, similar=similar)

    with store.lock() if lock_wait is None else store.lock(timeout=lock_wait):
        finish(store)  # an import a crash interrupted
        added = healing(store, write)
        if node.scope.session and added.patch is not None:
            with store.after_commit(f"patch {added.patch.id}", then="its session's record does not list it"):
                note_overlay(store, node.scope.session, node.id)
    return added


def seen_content(
    store: Store, index: Index, node: MemoryNode, purged: dict[str, MemoryNode]
) -> tuple[MemoryNode | None, str | None]:
    """What the index knows of ``node``'s content: the current memory of the same scope that holds
    it, and, if it was thrown out (forgotten, discarded, or purged: ``purged`` is ``purged_contents``),
    how and when."""
    digest = content_hash(node.content)
    thrown_out = [purged[digest]] if digest in purged else []
    for node_id, status, current, record in index.same_content(digest):
        other = indexed_node(node_id, record)
        if current and other.scope.to_dict() == node.scope.to_dict():
            return other, None
        if status in THROWN_OUT and purged_hash(other) is None:  # a tombstone stands for what it erased
            thrown_out.append(other)
    if not thrown_out:
        return None, None
    other = thrown_out[0]
    patches = [store.read_patch(p) for p in index.patches_targeting(other.id)]
    last = max(patches, key=lambda p: (p.created_at, p.id), default=None)
    how = "" if last is None else f" by {last.id} ({last.operation}, {last.created_at[:10]}: {last.reason})"
    status = "purged (erased for good)" if purged_hash(other) is not None else other.status
    return None, f"this content was {status}{how} as {other.id}"


SIMILAR_CHARS = 2_000  # the near-duplicate check looks at this much of each text
SIMILAR_TERMS = 8  # and searches with its rarest terms


def _similar(index: Index, node: MemoryNode) -> list[dict[str, str]]:
    where = Where(session_id=node.scope.session, project=node.scope.project, workspace=node.scope.workspace)
    text = normalize_text(node.content[:SIMILAR_CHARS]).lower()
    found = []
    # A near-duplicate shares most words, so it holds some of the rarest: searching with those
    # alone keeps the check's cost flat as the store grows ("note 7" matched every tenth memory).
    for hit in bm25(index, text, where, limit=5, terms=rarest_terms(index, query_terms(text), SIMILAR_TERMS)):
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
    memory_ids: list[str]
    duplicates: list[dict[str, Any]] | None = None  # {"line", "duplicate_of"}: not written again

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": len(self.memory_ids),
            "patch_id": self.patch.id if self.patch else None,
            "memory_ids": self.memory_ids,
            "duplicates": self.duplicates or [],
        }


def parse_import_line(value: Any, number: int, where: str) -> MemoryNode:
    """One import line: a full MemoryNode record or a short ``{"content", "source", ...}`` line."""
    if isinstance(value, dict) and "schema_version" in value:
        return _full_record_line(value, number, where)
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
        "questions": value.get("questions", []),
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
        "questions": (list,),
    }
    for name, allowed in shapes.items():
        if isinstance(fields[name], bool) or not isinstance(fields[name], allowed):
            raise ValidationError(f"{where} line {number}: field '{name}' is missing or has the wrong type")
    for name in ("tags", "questions"):
        if not all(isinstance(t, str) for t in fields[name]):
            raise ValidationError(f"{where} line {number}: field '{name}' must be a list of strings")
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
            questions=fields["questions"],
            created_by="import",
        )
    except (UsageError, ValidationError) as exc:
        raise ValidationError(f"{where} line {number}: {exc}") from None


# Relations that say a patch retired the other memory: a new memory has none.
RETIRING_RELATIONS = ("supersedes", "superseded_by")


def _full_record_line(value: dict[str, Any], number: int, where: str) -> MemoryNode:
    node = MemoryNode.from_dict(value, where=f"{where} line {number}")
    if node.status not in INITIAL_STATUSES:
        raise ValidationError(
            f"{where} line {number}: status {node.status} cannot be imported as a new "
            "memory (only current ones; move history with a .cclg container)"
        )
    for kind in RETIRING_RELATIONS:
        if node.relations[kind]:
            raise ValidationError(
                f"{where} line {number}: relations.{kind} names {', '.join(node.relations[kind])}: an imported "
                f"memory is new and {kind.replace('_', ' ')} nothing (move history with a .cclg container)"
            )
    node.metadata.setdefault("content_hash", content_hash(node.content))
    # An imported file cannot vouch for itself, nor name a patch of this store as its maker.
    cap_imported(node)
    node.metadata["created_by"] = "import"
    node.metadata.pop("patch_id", None)
    return node


def import_jsonl(store: Store, data: bytes, *, name: str = "<stdin>", force: bool = False) -> ImportResult:
    """Import memories from JSON lines, all or nothing.

    Every line is checked; if any is bad, nothing is written and the ``ValidationError``
    lists each bad line by number. A line whose content is already current in its scope
    (in the store or earlier in the file) is skipped and reported; content that was
    forgotten or discarded refuses the import (``IllegalPatchError`` naming the lines)
    unless ``force``. Otherwise all nodes are written under one ``create`` patch, so
    ``cclg rollback`` undoes the import. The lines are read as a stream (``_Lines``) that
    the ledger checks, stages and indexes a chunk at a time and names only once that
    patch is durable: a crash leaves all of them (named by the next writer) or none, and
    no import is ever held whole in memory.
    """

    def write(index: Index) -> ImportResult:
        lines = _Lines(store, index, name, force, max_line=4 * writer.limit(store, "memory_chars") + 65_536)
        stream = lines.fresh(data)
        first = next(stream, None)  # None only once every line is read and none is new
        if first is None:
            return ImportResult(patch=None, memory_ids=[], duplicates=lines.duplicates)
        result = create_nodes(
            store,
            itertools.chain([first], stream),
            reason=f"import-jsonl {name}",
            source=Source(label=f"import:{name}"),
            new_content=lambda count: f"imported {count} memories from {name}",
            index=index,
            allow_purged=force,
        )
        return ImportResult(patch=result.patch, memory_ids=result.patch.new_node_ids, duplicates=lines.duplicates)

    with store.lock():
        finish(store)
        return healing(store, write)  # damage found by the duplicate checks: rebuilt, and the import runs again


def _split_lines(data: bytes) -> Iterator[bytes]:
    """``data.split(b"\\n")``, one line at a time (an import is not copied into a list, nor decoded whole)."""
    start = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end == -1 else end
        yield data[start:end]
        start = end + 1


class _Lines:
    """The lines of one import, read one at a time: ``fresh`` yields each new memory as soon as it is
    known to be one, and raises at the end of the input (inside the ledger's write, which then
    leaves nothing) if any line was bad (``ValidationError``, every bad line listed) or brings back
    thrown-out content (``IllegalPatchError``, unless ``force``). What it keeps per line is small: the
    id and line number, the content's mark (for duplicates within the file), relations left open."""

    def __init__(self, store: Store, index: Index, name: str, force: bool, *, max_line: int) -> None:
        self.store, self.index, self.name, self.force, self.max_line = store, index, name, force, max_line
        self.problems: list[str] = []
        self.refused: list[tuple[int, str]] = []
        self.duplicates: list[dict[str, Any]] = []
        self.seen: dict[str, int] = {}  # id -> line
        self.marks: dict[tuple[str, str], str] = {}  # (content hash, scope) -> id, within the file
        self.open_relations: list[tuple[int, str, str]] = []  # (line, kind, id) not found yet
        self.purged = purged_contents(store, index)  # looked up once for the whole import

    def fresh(self, data: bytes) -> Iterator[MemoryNode]:
        for number, raw in enumerate(_split_lines(data), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.problems.append(f"{self.name} line {number}: not UTF-8 text ({exc.reason} at byte {exc.start})")
                continue
            node = self._read(number, line)
            if node is not None and not self.problems and (self.force or not self.refused):
                yield node
        self._close_relations()
        if self.problems:
            raise ValidationError(
                f"{len(self.problems)} bad line(s) in {self.name}; nothing was imported", self.problems
            )
        if self.refused and not self.force:
            first = self.refused[0]
            raise IllegalPatchError(
                f"refused: {self.name} line {first[0]}: {first[1]}"
                + (f" (and {len(self.refused) - 1} more line(s))" if len(self.refused) > 1 else "")
                + "; nothing was imported; --force imports them anyway"
            )

    def _read(self, number: int, line: str) -> MemoryNode | None:
        """The new memory of one line; None for a blank line, a duplicate or a bad line (noted)."""
        if not line.strip():
            return None
        where = f"{self.name} line {number}"
        if len(line) > self.max_line:
            self.problems.append(f"{where}: {len(line):,} characters, over the size limit of a memory")
            return None
        try:
            value = parse_json(line)
            node = parse_import_line(value, number, self.name)
        except ValidationError as exc:
            self.problems.extend(exc.problems)
            return None
        except ValueError as exc:  # not JSON, or nested too deep
            self.problems.append(f"{where}: not JSON ({getattr(exc, 'msg', exc)})")
            return None
        if node.id in self.seen:
            self.problems.append(f"{where}: id {node.id} repeats line {self.seen[node.id]}")
            return None
        self.seen[node.id] = number
        if "schema_version" in value and _known(self.store, node):  # a short line's id is made here, new
            self.problems.append(f"{where}: id {node.id} is already in the store")
        self.open_relations += [(number, kind, other) for kind, ids in node.relations.items() for other in ids]
        return self._if_new(node, number)

    def _if_new(self, node: MemoryNode, number: int) -> MemoryNode | None:
        # Scopes repeat from line to line: one string each, not one per line.
        mark = (content_hash(node.content), sys.intern(json.dumps(node.scope.to_dict(), sort_keys=True)))
        existing, thrown_out = seen_content(self.store, self.index, node, self.purged)
        if existing is not None or mark in self.marks:
            self.duplicates.append({"line": number, "duplicate_of": existing.id if existing else self.marks[mark]})
            return None
        if thrown_out is not None:
            self.refused.append((number, thrown_out))
        self.marks[mark] = node.id
        return node

    def _close_relations(self) -> None:
        """Relations naming a memory neither in the file nor in the store, one problem per line and kind."""
        missing: dict[tuple[int, str], list[str]] = {}
        for number, kind, other in self.open_relations:
            if other not in self.seen and not self.store.node_path(other).exists():
                missing.setdefault((number, kind), []).append(other)
        for (number, kind), others in missing.items():
            self.problems.append(
                f"{self.name} line {number}: relations.{kind} names {', '.join(others)}, "
                "which is neither in the file nor in the store"
            )


def _known(store: Store, node: MemoryNode) -> bool:
    return store.node_path(node.id).exists()
