"""Memories and the ledger: opening a store, resolving ids, reading, changing, erasing and auditing memories.

Each function takes an open ``Store`` and plain values, does one job, and returns
records or plain dicts; the surfaces only parse and print. Ids are resolved here,
in one place: wherever a memory or patch id is taken, a unique prefix of it is
accepted (``resolve_memory_id``, ``resolve_patch_id``), and so is its short form, ``mem~`` and the
id's last characters, as the pack's possibly related lines show it (``cclg.core.ids.short_id``;
not for a purge). A caller that is not the user
(MCP: ``max_trust="untrusted"``) is held to what it may change here too.

The work itself lives in the modules named after it (``intake`` for new memories,
``ledger`` for patches, ``undo``, ``lineage``, ``promotion``, ``purge``, ``adoption``,
``doctor``, ``redaction``); this module gathers them and adds the operations that are
only a few lines over them. It imports up front only what adding and reading memories
need, the rest on first use (``_LAZY``, or inside the operation): ``cclg add`` starts fast.
It also serves the error classes every operation raises.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cclg import format as fmt
from cclg.api.lazy import served_on_first_use
from cclg.core import media, secrets
from cclg.core.files import read_jsonl
from cclg.core.ids import is_valid_id, parse_moment, sha256_hex
from cclg.core.labels import SENSITIVITY, check_labels, labels_of, least_trusted
from cclg.core.records import MemoryNode, MemoryPatch, Source
from cclg.core.repository import project_of
from cclg.core.secrets import SecretError
from cclg.core.store import Store, patch_order
from cclg.errors import (
    CclgError,
    ConcurrencyError,
    DiskError,
    IllegalPatchError,
    NotFoundError,
    StoreNotFoundError,
    UnknownPatchOperationError,
    UsageError,
    ValidationError,
)
from cclg.intake.new_memories import (
    AddResult,
    ImportResult,
    add_memory,
    build_node,
    import_jsonl,
    parse_scope,
    scope_for,
)
from cclg.ledger import writer
from cclg.ledger.index import LIST_SCOPES, Index, read_fresh, rebuild_index
from cclg.ledger.lattice import LIVE_STATUSES
from cclg.ledger.staging import finish
from cclg.ledger.view import effective_view
from cclg.ledger.writer import PatchResult

_LAZY = {  # module -> the public names it serves: modules only some operations need, imported on first use
    "cclg.ledger.adoption": "Adoption",
    "cclg.maintenance.demo": "build_demo_store",
    "cclg.maintenance.doctor": "Finding Report diagnose repair validate_paths",
    "cclg.ledger.redaction": "redact_store scan_secrets",
}

if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below
    from cclg.ledger.adoption import Adoption
    from cclg.ledger.purge import PurgeResult
    from cclg.ledger.redaction import redact_store, scan_secrets
    from cclg.maintenance.demo import build_demo_store
    from cclg.maintenance.doctor import Finding, Report, diagnose, repair, validate_paths
else:
    __getattr__ = served_on_first_use(globals(), _LAZY)


__all__ = [
    "LIST_FILTERS",
    "LIST_SCOPES",
    "AddResult",
    "Adoption",
    "CclgError",
    "ConcurrencyError",
    "DiskError",
    "Finding",
    "IllegalPatchError",
    "ImportResult",
    "NotFoundError",
    "PatchResult",
    "Report",
    "SecretError",
    "Store",
    "StoreNotFoundError",
    "UnknownPatchOperationError",
    "UsageError",
    "ValidationError",
    "add_memory",
    "adopt_project",
    "audit_log",
    "build_demo_store",
    "build_node",
    "cite",
    "conflicts",
    "diagnose",
    "forget",
    "history",
    "import_jsonl",
    "init_store",
    "keep_raw",
    "label",
    "list_memories",
    "memory_counts",
    "memory_lineage",
    "named_memory_id",
    "open_store",
    "parse_moment",
    "parse_scope",
    "patch",
    "patch_diff",
    "promote",
    "purge_memory",
    "purge_preview",
    "raw_citation",
    "raw_info",
    "redact_store",
    "reindex",
    "repair",
    "resolve",
    "resolve_memory_id",
    "resolve_patch_id",
    "rollback",
    "scan_secrets",
    "scope_for",
    "show",
    "status",
    "validate_paths",
]


def open_store(root: str | Path | None = None) -> Store:
    """The store at ``root`` (else ``$CCLG_HOME``, else ``~/.cclg``); ``StoreNotFoundError`` if there is none.

    An import that a killed process left half-moved is finished first (``cclg.ledger.staging.finish``:
    cheap when there is none, and it never waits for an import that is still running)."""
    store = Store.open(root)
    finish(store)
    return store


def init_store(root: str | Path | None = None) -> tuple[Store, bool]:
    """Create the store (idempotent); returns it and whether it was new."""
    return Store.init(root)


# ---------------------------------------------------------------- ids


def resolve_memory_id(store: Store, text: str, *, least: int = 0) -> str:
    """Accept a full memory id, a unique prefix of one (``mem_01jq`` style) holding at least ``least``
    characters after ``mem_`` (``PURGE_ID_CHARS`` for a purge, which cannot be undone), or, when ``least``
    is 0, its short form (``mem~md3k8x2q``, a unique end of the id: ``cclg.core.ids.short_id``)."""
    return _resolve_id(store, text, "mem", "nodes", "memory", "memories", least)


# The characters after ``mem_`` a prefix needs to name the memory a purge erases: ``mem_`` alone named the
# only memory of a store, and a few characters the only one made that day.
PURGE_ID_CHARS = 8


def named_memory_id(store: Store, text: str) -> str:
    """A memory id for a view of what the logs and the ledger name: a stored memory's id or unique
    prefix, else a full id the store no longer holds (moved to ``recovered/``, deleted by a sync),
    which its log lines and patches may still name."""
    try:
        return resolve_memory_id(store, text)
    except NotFoundError:
        if is_valid_id(text, "mem"):
            return text
        raise


def resolve_patch_id(store: Store, text: str) -> str:
    """Accept a full patch id, or a unique prefix of one (``patch_01jq`` style)."""
    return _resolve_id(store, text, "patch", "patches", "patch", "patches")


def _resolve_id(store: Store, text: str, prefix: str, folder: str, noun: str, plural: str, least: int = 0) -> str:
    if is_valid_id(text, prefix) and (store.folder(folder) / f"{text}.json").exists():
        return text
    if text.startswith(prefix + "~"):
        return _resolve_end(store, text, prefix, folder, noun, plural, least)
    if text.startswith(prefix + "_") and len(text) < len(prefix) + 1 + least:
        raise UsageError(f"{text!r} is too short: give the full id or at least {least} characters after {prefix}_")
    matches = []
    if text.startswith(prefix + "_"):
        matches = [p.stem for p in store.record_files(folder) if p.stem.startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise UsageError(f"{text} matches {len(matches)} {plural}; give more of the id")
    raise NotFoundError(f"no {noun} {text} in {store.root}")


# The characters of an id's end its short form needs (``mem~`` and at least this many).
SHORT_ID_LEAST = 4


def _resolve_end(store: Store, text: str, prefix: str, folder: str, noun: str, plural: str, least: int) -> str:
    """The id whose end is the short form ``text`` (``mem~md3k8x2q``: ``cclg.core.ids.short_id``)."""
    end = text[len(prefix) + 1 :]
    if least:
        raise UsageError(f"{text!r} is a short id: give the full id or at least {least} characters after {prefix}_")
    if len(end) < SHORT_ID_LEAST or not end.isalnum():
        raise UsageError(f"{text!r} is not a short id: {prefix}~ and at least {SHORT_ID_LEAST} letters or digits")
    if folder == "nodes":  # the index's id column: listing 100,000 record files took seconds
        from cclg.ledger.index import read_fresh

        matches = [i for i in read_fresh(store, lambda index: index.ids_ending(end)) if store.node_path(i).exists()]
    else:
        matches = [p.stem for p in store.record_files(folder) if p.stem.endswith(end)]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise UsageError(f"{text} matches {len(matches)} {plural}; give the full id")
    raise NotFoundError(f"no {noun} {text} in {store.root}")


# ---------------------------------------------------------------- reading


def show(store: Store, memory_id: str) -> MemoryNode:
    """One memory record (by id or unique prefix), whatever its status."""
    return store.read_node(resolve_memory_id(store, memory_id))


def status(store: Store, folder: Path | None = None) -> dict[str, Any]:
    """Counts of what the store holds; with ``folder`` inside a git repository, also its project:
    the folder's name and the scope value memories added there hold (``cclg.core.repository``)."""
    nodes = store.load_nodes()
    patches = store.load_patches()
    by_status = Counter(n.status for n in nodes.values())
    audit = read_jsonl(store.audit_path)
    report: dict[str, Any] = {
        "root": str(store.root),
        "format": fmt.FORMAT_ID,
        "nodes": len(nodes),
        "effective": len(effective_view(nodes.values(), patches)),
        "by_status": dict(sorted(by_status.items())),
        "patches": len(patches),
        "edges": len(store.record_files("edges")),
        "sessions": len(store.record_files("sessions")),
        "raw_files": len(store.raw_files()),
        "audit_records": len(audit.records),
        "last_change": patches[-1].created_at if patches else None,
    }
    found = project_of(folder) if folder is not None else None
    if found is not None:
        report["project"] = {"name": found.name, "id": found.value}
    return report


LIST_FILTERS = ("status", "type", "scope", "project", "trust", "tag")  # what ``list_memories`` filters by


def list_memories(
    store: Store, filters: dict[str, str] | None = None, *, before: int | None = None, limit: int = 50
) -> dict[str, Any]:
    """One page of memories, newest first: the current ones, or those of ``filters["status"]``, narrowed
    by any of ``LIST_FILTERS`` (``scope`` is one of ``LIST_SCOPES``). ``memories`` holds the nodes,
    ``next`` what to pass as ``before`` for the page after (None on the last page). Read from the index
    (``Index.listed_rows``), a page at a time: fast at any size of store."""
    chosen = {k: v for k, v in (filters or {}).items() if v}
    unknown = sorted(set(chosen) - set(LIST_FILTERS))
    if unknown:
        raise UsageError(f"unknown filter {', '.join(unknown)}; use {', '.join(LIST_FILTERS)}")
    if chosen.get("scope") and chosen["scope"] not in LIST_SCOPES:
        raise UsageError(f"unknown scope {chosen['scope']!r}; use one of {', '.join(LIST_SCOPES)}")
    if chosen.get("status") and chosen["status"] not in fmt.NODE_STATUSES:
        raise UsageError(f"unknown status {chosen['status']!r}; use one of {', '.join(fmt.NODE_STATUSES)}")

    def page(index: Index) -> dict[str, Any]:
        rows = index.listed_rows(chosen, before=before, limit=limit + 1)
        nodes = [MemoryNode.from_dict(json.loads(row["record"]), where=f"index:{row['id']}") for row in rows[:limit]]
        return {"memories": nodes, "next": rows[limit - 1]["rowid"] if len(rows) > limit else None}

    result: dict[str, Any] = read_fresh(store, page, lambda found: [n.id for n in found["memories"]])
    return result


def memory_counts(store: Store) -> dict[str, dict[str, int]]:
    """The memories by status (every node), and the current ones by type and by project (``""``: no
    project): the overview's counts, from the index."""
    return read_fresh(store, lambda index: {c: index.counts_by(c) for c in ("status", "type", "project")})


def history(store: Store, *, memory_id: str | None = None, limit: int | None = None) -> list[MemoryPatch]:
    """Patches newest first, optionally only those touching the memory ``memory_id`` (id or prefix, or
    the full id of a memory the store no longer holds: ``named_memory_id``). One memory's patches are
    found through the index (``Index.patches_naming``), and only their files are read."""
    if memory_id is None:
        patches = store.load_patches()
    else:
        node_id = named_memory_id(store, memory_id)
        named = read_fresh(store, lambda index: index.patches_naming([node_id]))
        patches = sorted((store.read_patch(p) for p in named), key=patch_order)
        patches = [
            p for p in patches if node_id in p.target_ids or node_id in p.new_node_ids or node_id in p.prior_states
        ]
        if not patches and not store.node_path(node_id).exists():
            raise NotFoundError(f"no memory {node_id} in {store.root}, and no patch names it")
    patches.reverse()
    return patches[:limit] if limit else patches


def patch_diff(store: Store, patch_id: str) -> dict[str, Any]:
    """What a patch (id or prefix) changed: each target's status move and a content diff (``cclg.ledger.lineage``)."""
    from cclg.ledger.lineage import patch_diff as diff

    return diff(store, resolve_patch_id(store, patch_id))


def memory_lineage(store: Store, memory_id: str) -> dict[str, Any]:
    """``cclg log --lineage``: a memory's chain of versions, the patches that made them and its members
    (``cclg.ledger.lineage``); ``memory_id`` may also be the full id of a memory the store no longer holds."""
    from cclg.ledger.lineage import lineage as chain

    return chain(store, named_memory_id(store, memory_id))


def _read_optional(store: Store, node_id: str) -> MemoryNode | None:
    try:
        return store.read_node(node_id)
    except NotFoundError:
        return None


def cite(store: Store, memory_id: str) -> dict[str, Any]:
    """Provenance of one memory: source, quote, raw spans with their text, and its patch history. A span
    of a binary raw file has no text: it is named instead (``binary``: its MIME type, size, SHA-256)."""
    node = show(store, memory_id)
    node_id = node.id
    touching = history(store, memory_id=node_id)
    spans = []
    for span in node.source.raw_spans:
        entry: dict[str, Any] = {**span, "text": None}
        name = str(span.get("source_id", ""))
        info = raw_info(store, name) if store.raw_file(name) is not None else None
        if info is not None and not info["text"]:
            entry["binary"] = media.attachment(name, info["bytes"], info["sha256"], info["mime"])
        elif info is not None:
            content = media.readable_text(store.path_of(info["path"]).read_bytes(), name, info["mime"]) or ""
            entry["text"] = content[span["char_start"] : span["char_end"]]
        spans.append(entry)
    return {
        "id": node.id,
        "status": node.status,
        "content": node.content,
        "source": node.source.to_dict(),
        "raw_spans": spans,
        "created_by_patch": next((p.id for p in touching if node_id in p.new_node_ids), None),
        "patches": [p.id for p in touching],
        "relations": {k: v for k, v in node.relations.items() if v},
        **({"synced": node.metadata["sync"]} if isinstance(node.metadata.get("sync"), dict) else {}),
    }


def patch(
    store: Store,
    operation: str,
    targets: list[str],
    *,
    contents: list[str],
    reason: str,
    source: str = "manual",
    confidence: float | None = None,
    max_trust: str = "trusted",
    valid_from: str | None = None,
    valid_until: str | None = None,
    questions: list[str] | None = None,
) -> PatchResult:
    """``cclg patch``: one patch operation. For ``rollback`` the one target is a patch id;
    ``create`` takes one content and no target; the others take memory ids (or prefixes).
    New memories are trusted at most ``max_trust`` (MCP callers pass ``untrusted``; such a caller cannot
    retire a pinned memory: ``_check_caller_pins``), and keep their
    targets' confidence and validity window unless ``confidence``, ``valid_from``, ``valid_until`` say
    (``ledger.kept_fields``). ``questions``: the questions the new memories answer (by default, for
    one new memory, its target's; ``cclg.core.records.checked_questions`` says what is allowed)."""
    if operation not in fmt.PATCH_OPERATIONS:
        raise UsageError(f"unknown patch operation {operation!r}; use one of {', '.join(fmt.PATCH_OPERATIONS)}")
    if operation == "rollback":
        if len(targets) != 1 or contents or questions:
            raise UsageError("rollback takes exactly one target, the id of the patch to undo, and no content")
        return rollback(store, targets[0], reason=reason, source=source, max_trust=max_trust)
    if operation == "create":
        if len(contents) != 1 or targets:
            raise UsageError("create takes one content and no target")
        sure = 1.0 if confidence is None else confidence
        added = add_memory(store, contents[0], source=source, reason=reason, confidence=sure, trust=max_trust,
                           valid_from=valid_from, valid_until=valid_until, questions=questions)  # fmt: skip
        if added.patch is None:
            raise UsageError(f"{added.duplicate_of} already holds this content; nothing was written")
        return PatchResult(patch=added.patch, new_nodes=added.new_nodes)
    ids = [resolve_memory_id(store, t) for t in targets]
    with store.lock():
        if max_trust != "trusted":
            command = f"cclg patch {operation} " + " ".join(f"--target {i}" for i in ids)
            _check_caller_pins([store.read_node(i) for i in ids], command)
        return writer.apply_patch(
            store,
            operation,
            ids,
            reason=reason,
            contents=contents,
            source=Source(label=source),
            confidence=confidence,
            max_trust=max_trust,
            valid_from=valid_from,
            valid_until=valid_until,
            questions=questions,
        )


def forget(store: Store, memory_id: str, *, reason: str = "forgotten at the user's request") -> PatchResult:
    """``cclg forget``: retire a memory for good (a ``forget`` patch; a rollback undoes it)."""
    return writer.apply_patch(store, "forget", [resolve_memory_id(store, memory_id)], reason=reason)


def rollback(
    store: Store, patch_id: str, *, reason: str = "", source: str = "manual", max_trust: str = "trusted"
) -> PatchResult:
    """``cclg rollback``: undo a patch (by id or unique prefix).

    A caller limited to ``max_trust`` (MCP: untrusted) may not bring back a memory more trusted
    than that, nor bring back or retire a pinned memory, nor undo (or redo) a change of labels: only
    the user raises trust, decides what stands in every pack or takes back their own label."""
    from cclg.ledger.undo import rollback as rollback_patch

    patch_id = resolve_patch_id(store, patch_id)
    with store.lock():
        if max_trust != "trusted":
            _check_caller_rollback(store, store.read_patch(patch_id), max_trust)
        return rollback_patch(store, patch_id, reason=reason, source=Source(label=source))


def _check_caller_rollback(store: Store, undone: MemoryPatch, max_trust: str) -> None:
    """``UsageError`` when rolling ``undone`` back would make current a memory trusted above
    ``max_trust``, bring back or retire a pinned memory (``_check_caller_pins``), or when the patch at
    the root of its rollback chain changed labels."""
    restore = {node_id: undone.prior_states.get(node_id, "active") for node_id in undone.target_ids}
    restore.update(undone.prior_states)
    after = {**{i: "discarded" for i in undone.new_node_ids}, **restore}
    command = f"cclg rollback {undone.id}"
    for node_id, status in sorted(after.items()):
        node = _read_optional(store, node_id)
        if node is None or (status in LIVE_STATUSES) == (node.status in LIVE_STATUSES):
            continue
        _check_caller_pins([node], command)
        trust = labels_of(node.metadata)[0]
        if status in LIVE_STATUSES and least_trusted(trust, max_trust) != trust:
            raise UsageError(
                f"rolling back {undone.id} would bring back {node_id}, a {trust} memory; this caller cannot, "
                f"the user can: `{command}`"
            )
    _check_caller_relabel_undo(store, undone)


def _check_caller_relabel_undo(store: Store, undone: MemoryPatch) -> None:
    """``UsageError`` when the patch at the root of ``undone``'s rollback chain changed labels."""
    root, seen = undone, set()
    while root.rollback_of is not None and root.id not in seen:
        seen.add(root.id)
        root = store.read_patch(root.rollback_of)
    first = _read_optional(store, root.target_ids[0]) if root.target_ids else None
    for new in (_read_optional(store, i) for i in root.new_node_ids):
        if first is not None and new is not None and labels_of(new.metadata) != labels_of(first.metadata):
            raise UsageError(
                f"{root.id} changed the labels of {first.id}; this caller cannot undo or redo that, "
                f"the user can: `cclg rollback {undone.id}`"
            )


def _check_caller_pins(nodes: list[MemoryNode], command: str) -> None:
    """``UsageError`` for a pinned memory (retention required) among ``nodes``, which a limited caller's
    change would retire or bring back: what stands in every pack is the user's call, as pinning is."""
    for node in nodes:
        if labels_of(node.metadata)[2] == "required":
            raise UsageError(
                f"{node.id} is pinned (retention required): only the user decides whether it is in effect, "
                f"this caller cannot retire it or bring it back; the user can: `{command}`"
            )


def adopt_project(
    store: Store,
    folder: str | Path = ".",
    name: str | None = None,
    *,
    memory_ids: list[str] | None = None,
    dry_run: bool = False,
    reason: str | None = None,
) -> Adoption:
    """``cclg project adopt``: give the current memories scoped by the folder name ``name`` (by default
    the name of the repository holding ``folder``) to that repository alone, one ``update`` patch each
    (``cclg.ledger.adoption``). ``memory_ids`` (ids or unique prefixes): only these. The user's call, not an
    MCP tool's: nothing records which repository of that name a memory came from."""
    from cclg.ledger.adoption import adopt_project as adopt

    ids = [resolve_memory_id(store, text) for text in memory_ids or []]
    return adopt(store, folder, name, memory_ids=ids, dry_run=dry_run, reason=reason)


def label(
    store: Store,
    memory_id: str,
    *,
    reason: str,
    trust: str | None = None,
    sensitivity: str | None = None,
    retention: str | None = None,
    max_trust: str = "trusted",
) -> PatchResult:
    """``cclg label``: change a memory's trust, sensitivity or retention through an ``update`` patch
    (same content, new labels). A caller limited to ``max_trust`` (MCP: untrusted) only makes labels
    stricter: it cannot raise trust, lower sensitivity, nor pin or unpin (retention required)."""
    chosen = {k: v for k, v in (("trust", trust), ("sensitivity", sensitivity), ("retention", retention)) if v}
    if not chosen:
        raise UsageError("give at least one of trust, sensitivity, retention")
    check_labels(trust, sensitivity, retention)
    if trust is not None and least_trusted(trust, max_trust) != trust:
        raise UsageError(f"this caller cannot mark a memory {trust}; the user can, with `cclg label --trust {trust}`")
    node = show(store, memory_id)
    if max_trust != "trusted":
        _check_caller_label(node, chosen, max_trust)
    return writer.apply_patch(
        store, "update", [node.id], reason=reason, contents=[node.content], labels=chosen, max_trust=max_trust
    )


def _check_caller_label(node: MemoryNode, chosen: dict[str, str], max_trust: str) -> None:
    """``UsageError`` when a limited caller's labels would loosen ``node``'s, or pin or unpin it: the
    labels it asks for, and those its new version would carry (within its ceiling: never pinned)."""
    current = dict(zip(("trust", "sensitivity", "retention"), labels_of(node.metadata), strict=True))
    written = writer.inherited_labels(node, chosen, max_trust)
    looser = list(dict.fromkeys(c for labels in ({**current, **chosen}, written) for c in _loosened(current, labels)))
    if looser:
        raise UsageError(
            f"this caller only makes labels stricter, not {', '.join(looser)} for {node.id}; "
            "the user can, with `cclg label`"
        )


def _loosened(current: dict[str, str], labels: dict[str, str]) -> list[str]:
    """The changes from ``current`` to ``labels`` that raise trust, lower sensitivity, pin or unpin."""
    trust, sensitivity, retention = current["trust"], current["sensitivity"], current["retention"]
    new_trust, new_sensitivity, new_retention = labels["trust"], labels["sensitivity"], labels["retention"]
    looser = []
    if least_trusted(new_trust, trust) != new_trust:
        looser.append(f"trust {trust} -> {new_trust}")
    if SENSITIVITY.index(new_sensitivity) < SENSITIVITY.index(sensitivity):
        looser.append(f"sensitivity {sensitivity} -> {new_sensitivity}")
    if new_retention != retention and "required" in (retention, new_retention):
        looser.append(f"retention {retention} -> {new_retention}")
    return looser


def keep_raw(store: Store, data: bytes, name: str, *, mime: str | None = None) -> dict[str, Any]:
    """``cclg raw``: keep any bytes verbatim as evidence (content-addressed, never overwritten), up to the
    store's ``raw_bytes`` limit, with a record of their MIME type (``mime``, else read from the bytes and
    the name: ``cclg.core.media.sniff``) and SHA-256. Returns where they are and that record."""
    most = writer.limit(store, "raw_bytes")
    if len(data) > most:
        raise UsageError(
            f"{len(data):,} bytes is over the limit of {most:,} for one raw file "
            '(set config.json "limits": {"raw_bytes": N} to change it); nothing was written'
        )
    chosen = media.checked_mime(mime) if mime is not None else media.sniff(data, name)
    # Read as `cclg scan` reads a file (UTF-8, other bytes one character each): one detector, one reading.
    text = data.decode("utf-8", "surrogateescape")
    secrets.refuse_secrets({"raw": text, "name": name}, f"keeping {secrets.redact(name)[0]}")
    stored, written = store.write_raw(data, name)
    raw_name = stored.split("/", 1)[1]
    with store.after_commit(f"raw file {stored}", then="its MIME type is read from its bytes"):
        store.write_raw_record(raw_name, data, chosen)
    info = raw_info(store, raw_name)
    return {"path": stored, "bytes": len(data), "sha256": info["sha256"], "mime": info["mime"], "written": written}


def raw_info(store: Store, name: str) -> dict[str, Any]:
    """What a raw file is (``name`` as a span's ``source_id`` or ``cclg raw`` names it, ``raw/`` or not):
    its path, size and SHA-256 (as it is now), MIME type (as kept, else sniffed) and whether a reader
    may show it as ``text``. ``NotFoundError`` when the store has no such raw file."""
    raw_name = name.removeprefix("raw/")
    path = store.raw_file(raw_name)
    if path is None:
        raise NotFoundError(f"no raw file {name!r} in {store.root} (`cclg raw FILE` keeps one)")
    data = path.read_bytes()
    kept = (store.raw_record(raw_name) or {}).get("mime")
    mime = media.mime_of(data, raw_name, kept)
    text = media.readable_text(data, raw_name, kept) is not None
    return {"path": f"raw/{path.name}", "bytes": len(data), "sha256": sha256_hex(data), "mime": mime, "text": text}


def raw_citation(store: Store, names: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``cclg add --raw NAME``: (the raw spans citing each raw file whole, the attachments naming the
    binary ones). A text file's span counts characters, a binary file's bytes."""
    spans, attachments = [], []
    for name in names:
        info = raw_info(store, name)
        raw_name = info["path"].split("/", 1)[1]
        if info["text"]:
            end = len(media.readable_text(store.path_of(info["path"]).read_bytes(), raw_name, info["mime"]) or "")
        else:
            end = info["bytes"]
            attachments.append(media.attachment(raw_name, info["bytes"], info["sha256"], info["mime"]))
        spans.append({"source_id": raw_name, "turn_id": None, "char_start": 0, "char_end": end})
    return spans, attachments


def reindex(store: Store) -> dict[str, Any]:
    """``cclg reindex``: rebuild the search index from the files (safe at any time)."""
    start = time.perf_counter()
    count = rebuild_index(store)
    return {"memories": count, "seconds": round(time.perf_counter() - start, 3)}


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
    confidence: float | None = None,
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
    """The audit log, newest first, optionally one event kind or the records naming one memory (also
    one the store no longer holds: ``named_memory_id``)."""
    if event is not None and event not in fmt.AUDIT_EVENTS:
        raise UsageError(f"unknown audit event {event!r}; use one of {', '.join(fmt.AUDIT_EVENTS)}")
    node_id = named_memory_id(store, memory_id) if memory_id else None
    records = []
    for record in reversed(read_jsonl(store.audit_path).records):
        if event is not None and record.get("event") != event:
            continue
        if node_id is not None and node_id not in json.dumps(record):
            continue
        records.append(record)
        if len(records) >= limit:
            break
    if node_id is not None and not records and not store.node_path(node_id).exists():
        raise NotFoundError(f"no memory {node_id} in {store.root}, and no audit record names it")
    return records


# ---------------------------------------------------------------- promoting and erasing


def promote(
    store: Store, memory_id: str, *, reason: str = "kept beyond its session at the user's request"
) -> PatchResult:
    """``cclg promote``: make a session memory durable (``cclg.ledger.promotion``): a copy without the session
    becomes active and the session memory is marked promoted (a rollback undoes it)."""
    from cclg.ledger.promotion import promote as promote_memory

    return promote_memory(store, resolve_memory_id(store, memory_id), reason=reason)


def purge_preview(store: Store, memory_id: str) -> tuple[MemoryNode, str]:
    """The memory a purge of ``memory_id`` (its full id, or at least ``PURGE_ID_CHARS`` characters after
    ``mem_``) would erase, with the start of its content on one line: what a confirmation shows."""
    from cclg.ledger.purge import preview

    node = store.read_node(resolve_memory_id(store, memory_id, least=PURGE_ID_CHARS))
    return node, preview(node)


def purge_memory(
    store: Store,
    memory_id: str,
    *,
    reason: str = "purged at the user's request",
    source: str = "manual",
    confirm_id: str | None = None,
) -> PurgeResult:
    """``cclg purge``: erase a memory's content for good, from every file of the store and its indexes
    (``cclg.ledger.purge``). ``memory_id`` needs at least ``PURGE_ID_CHARS`` characters after ``mem_``; a caller
    that must repeat the full id (MCP) passes it as ``confirm_id``, and nothing is erased unless it matches."""
    from cclg.ledger import purge

    node_id = resolve_memory_id(store, memory_id, least=PURGE_ID_CHARS)
    if confirm_id is not None and confirm_id != node_id:
        raise UsageError(f"confirm_id must be the memory's full id, {node_id}: nothing was erased")
    return purge.purge_memory(store, node_id, reason=reason, source=source)
