"""The patch ledger: the only way a memory is created, corrected or retired.

``apply_patch`` checks a patch against the lattice (``cclg.ledger.lattice``) before it
writes anything. Every patch is then written in the same order (``_write_new``):
its new nodes and edges are staged as temp files, the patch file is written and
made durable (the commit point), the staged files are given their names, the
targets are retired, and the audit records follow. Nothing a patch makes is
visible before the patch is durable, and a crash cannot lose a fact:

- killed before the patch file, a writer leaves only temp files, which the next
  process that takes the store lock deletes (the patch never happened);
- killed after it, it leaves staged records that the next process that takes the
  store lock names (``cclg.core.store``), and targets that the effective view
  (``cclg.ledger.view``) already treats as retired and that ``cclg doctor --repair``
  finishes by replaying the ledger.

``cclg doctor`` reports every such leftover until then. Undoing a patch is
``cclg.ledger.undo``, a patch like the others.

After each write the ledger tells the search index what changed through one
change-sink, ``cclg.ledger.index.IndexChanges`` (``changed``). It reads the index for one thing: the
tombstones of purges, whose content every write refuses (``refuse_purged``); a
store with no index yet has them read from its purge patches instead.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cclg.core import fencing, secrets
from cclg.core.fields import parse_json
from cclg.core.ids import content_hash, new_id, now_iso, parse_moment
from cclg.core.labels import capped_labels, check_labels, labels_of
from cclg.core.records import (
    MemoryEdge,
    MemoryNode,
    MemoryPatch,
    Record,
    Scope,
    Source,
    default_resolution_policy,
    dumps,
    new_node,
    node_questions,
    set_questions,
)
from cclg.core.store import Store, audit_record
from cclg.errors import CclgError, IllegalPatchError, NotFoundError, UsageError, ValidationError
from cclg.ledger import lattice
from cclg.ledger.index import COMPACT_AFTER, Index, IndexChanges, healing
from cclg.ledger.lattice import operation_spec


class PatchResult(Record):
    """What a patch wrote."""

    def __init__(
        self,
        patch: MemoryPatch,
        new_nodes: list[MemoryNode] | None = None,
        edges: list[MemoryEdge] | None = None,
        changed_nodes: list[MemoryNode] | None = None,
    ) -> None:
        self.patch = patch
        self.new_nodes = [] if new_nodes is None else new_nodes
        self.edges = [] if edges is None else edges
        self.changed_nodes = [] if changed_nodes is None else changed_nodes

    def to_dict(self) -> dict[str, object]:
        return {
            "patch": self.patch.to_dict(),
            "new_nodes": [n.to_dict() for n in self.new_nodes],
            "edges": [e.to_dict() for e in self.edges],
            "changed_memory_ids": [n.id for n in self.changed_nodes],
        }


# ---------------------------------------------------------------- writing


CHUNK = 512  # nodes checked, staged and indexed together: a stream of any length is never held whole
SHRINK_AFTER = 1000  # staged files after which tmp/ is made anew (``Store.shrink_temp_folder``)


def create_nodes(
    store: Store,
    nodes: Iterable[MemoryNode],
    *,
    reason: str,
    source: Source | None = None,
    new_content: str | Callable[[int], str] | None = None,
    index: Index | None = None,
    allow_purged: bool = False,
) -> PatchResult:
    """Write new nodes with one ``create`` patch that names them all.

    ``nodes`` is a list or a stream (an import's generator, which may raise to refuse
    the whole write). They are checked (secrets, size, purged content unless ``allow_purged``: the
    user's ``--force``, instruction-like text), staged
    and, given the caller's ``index``, indexed ``CHUNK`` at a time; the patch is written
    once the last is staged, then they get their names. Anything raised before the patch,
    by a check or by the stream, leaves nothing: the staged files are deleted and the
    index's transaction is dropped. The patch's ``new_content`` is the node's content
    for one node, else ``new_content`` (a text, or a function of the count). The result
    holds the nodes when they came as a list (a stream is not kept).
    """
    secrets.refuse_secrets(
        {"reason": reason, "new_content": new_content if isinstance(new_content, str) else ""}, "the create"
    )
    patch_id = new_id("patch")
    ids: list[str] = []
    staged: list[str] = []  # str, not Path: a stream of 100,000 memories holds 25 MB less
    first: MemoryNode | None = None
    one = isinstance(nodes, list) and len(nodes) == 1
    with store.lock(), _null_context() if one else store.batch():
        try:
            for chunk in _chunks(nodes):
                refuse_node_secrets(chunk)
                refuse_oversized(store, chunk)
                if not allow_purged:
                    refuse_purged(store, chunk, index)
                first = first or chunk[0]
                for node in chunk:
                    staged.append(str(_stage_node(store, node, patch_id, index)))
                    ids.append(node.id)
            if first is None:
                raise UsageError("nothing to create")
            described = first.content if new_content is None and len(ids) == 1 else new_content
            patch = _create_patch(patch_id, ids, reason, source, described)
            store.write_patch(patch)
        except BaseException:  # nothing of the patch stays behind
            for temp in staged:
                Path(temp).unlink(missing_ok=True)
            if index is not None:
                index.drop_staged()
            raise
        store.make_durable()  # in a batch: the staged files and the patch, before any of them is named
        with store.after_commit(f"patch {patch_id}"):
            step = 20 * CHUNK  # the audit records in parts: a big import's are not held at once
            for start in range(0, len(ids), step):
                part = ids[start : start + step]
                records = [audit_record("node_written", node_id=i, patch_id=patch_id) for i in part]
                store.audit_many(records if start + step < len(ids) else [*records, patch_audit(patch)])
            for temp, node_id in zip(staged, ids, strict=True):
                store.publish_file(Path(temp), store.node_path(node_id))
            if len(ids) >= SHRINK_AFTER:
                store.shrink_temp_folder()
            # Into the caller's index: the staged rows, with the patch that named them.
            IndexChanges(store, index).changed(
                [] if index is not None else ids, [patch_id], compact=len(ids) >= COMPACT_AFTER
            )
    return PatchResult(patch=patch, new_nodes=list(nodes) if isinstance(nodes, list) else [])


def _chunks(nodes: Iterable[MemoryNode]) -> Iterator[list[MemoryNode]]:
    chunk: list[MemoryNode] = []
    for node in nodes:
        chunk.append(node)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _stage_node(store: Store, node: MemoryNode, patch_id: str, index: Index | None) -> Path:
    flag_instructions(node)
    data = dumps(node.to_dict())
    temp = store.stage_file(store.node_path(node.id), data, patch_id)
    if index is not None:
        index.add_staged(node, data, temp)
    return temp


def _create_patch(
    patch_id: str, ids: list[str], reason: str, source: Source | None, new_content: str | Callable[[int], str] | None
) -> MemoryPatch:
    if new_content is None:
        raise UsageError("a multi-node create needs a new_content description")
    stamp = now_iso()
    return MemoryPatch(
        id=patch_id,
        operation="create",
        target_ids=[],
        new_node_ids=ids,
        reason=reason,
        new_content=new_content if isinstance(new_content, str) else new_content(len(ids)),
        source=source or Source(label="manual"),
        confidence=1.0,
        resolution_policy=default_resolution_policy(),
        created_at=stamp,
        applied_at=stamp,
    )


def apply_patch(
    store: Store,
    operation: str,
    target_ids: list[str],
    *,
    reason: str,
    contents: list[str] | None = None,
    source: Source | None = None,
    confidence: float | None = None,
    max_trust: str = "trusted",
    labels: dict[str, str] | None = None,
    valid_from: str | None = None,
    valid_until: str | None = None,
    scope: Scope | None = None,
    questions: list[str] | None = None,
) -> PatchResult:
    """Apply one patch (any operation but ``create`` and ``rollback``, which have their own functions).

    New nodes inherit the first target's trust, sensitivity and retention, changed by
    ``labels`` where given, within the writer's ceiling (``inherited_labels``: an MCP caller cannot
    raise trust nor keep a pin by rewording a memory). They keep the targets' validity window,
    confidence and priority (``kept_fields``) unless ``valid_from`` / ``valid_until`` (``validity``) or
    ``confidence`` set them. They inherit the first target's scope, or have ``scope`` (the same
    session: a patch never moves a memory in or out of one). A patch writing one new memory keeps the
    questions its first target answers (``cclg.core.records.node_questions``) unless ``questions``
    replaces them; a split's parts carry ``questions`` only.

    Refuses, before writing anything, an unknown target, a target whose status
    the lattice does not let the operation move, and content that is missing
    where the operation needs it or given where it has no use.
    """
    spec = operation_spec(operation)
    contents = [c for c in (contents or [])]
    _check_request(operation, reason, contents, source, scope, questions or [])
    _check_shape(operation, spec, target_ids, contents)
    valid_from, valid_until = validity(valid_from, valid_until)
    if (valid_from or valid_until) and not contents:
        raise UsageError(f"{operation} writes no new memory: a validity window applies to new memories only")

    with store.lock():
        targets = [read_target(store, node_id) for node_id in target_ids]
        _check_targets(operation, targets, scope)
        stamp = now_iso()
        patch_id = new_id("patch")
        inherited = inherited_labels(targets[0], labels, max_trust)
        kept = kept_fields(targets, confidence=confidence, valid_from=valid_from, valid_until=valid_until)
        asked = questions if questions is not None or len(contents) != 1 else node_questions(targets[0])
        replacing = _Replacing(targets, spec, patch_id, stamp, kept, reason, source, inherited, asked or [])
        new_nodes = [replacing.new_node(index, content) for index, content in enumerate(contents)]
        for node in new_nodes:  # the scope the caller gave, else the first target's
            node.scope = scope or node.scope
        patch = MemoryPatch(
            id=patch_id,
            operation=operation,
            target_ids=list(target_ids),
            new_node_ids=[n.id for n in new_nodes],
            reason=reason,
            new_content="\n\n".join(contents) if contents else None,
            source=source or Source(label="manual"),
            confidence=kept["confidence"] if contents else (1.0 if confidence is None else confidence),
            resolution_policy=default_resolution_policy(),
            prior_states={t.id: t.status for t in targets},
            created_at=stamp,
            applied_at=stamp,
        )
        edges = [
            MemoryEdge(
                id=new_id("edge"), from_id=n.id, to_id=t.id, type=spec.edge, created_at=stamp, source_patch_id=patch.id
            )
            for n in new_nodes
            for t in targets
            if spec.edge
        ]
        assert spec.target_status is not None
        write_retiring_patch(store, patch, new_nodes, edges, targets, spec.target_status)
    return PatchResult(patch=patch, new_nodes=new_nodes, edges=edges, changed_nodes=targets)


def _check_request(
    operation: str, reason: str, contents: list[str], source: Source | None, scope: Scope | None, questions: list[str]
) -> None:
    """``UsageError`` for what ``apply_patch`` does not do, or a patch without a reason; ``SecretError``
    for a secret in what the caller gave."""
    if operation == "create":
        raise UsageError("use create_nodes (cclg add) to create memories")
    if operation == "rollback":
        raise UsageError("use rollback (cclg rollback PATCH_ID) to undo a patch")
    if not reason.strip():
        raise UsageError("a patch needs a reason")
    if scope is not None and not contents:
        raise UsageError(f"{operation} writes no new memory: a scope applies to new memories only")
    if questions and not contents:
        raise UsageError(f"{operation} writes no new memory: questions apply to new memories only")
    given: dict[str, Any] = {"reason": reason, "content": contents, "questions": questions}
    given["source"] = source.to_dict() if source else {}
    secrets.refuse_secrets({**given, "scope": scope.to_dict() if scope else {}}, "the patch")


def _check_targets(operation: str, targets: list[MemoryNode], scope: Scope | None = None) -> None:
    """``IllegalPatchError`` for a target the operation may not move; ``UsageError`` for a ``scope``
    that would move a memory in or out of a session (promotion's job, ``cclg.ledger.promotion``)."""
    if scope is not None and scope.session != targets[0].scope.session:
        raise UsageError(f"{operation} keeps a memory's session: its scope.session stays {targets[0].scope.session}")
    accepted = lattice.accepting_statuses(operation)
    for target in targets:
        if target.status not in accepted:
            raise IllegalPatchError(
                f"cannot {operation} {target.id}: it is {target.status}, and {operation} moves only "
                f"memories that are {', '.join(sorted(accepted)) or 'nothing'}"
            )


def inherited_labels(first: MemoryNode, labels: dict[str, str] | None, max_trust: str) -> dict[str, str]:
    """The labels a patch's new nodes get: the first target's, changed by ``labels``, within the ceiling
    of a writer trusted at most ``max_trust`` (``cclg.core.labels.capped_labels``). The one place a new memory
    inherits labels, so an MCP caller's or a distilled text never inherits trust or a pin, whatever
    the operation."""
    trust, sensitivity, retention = labels_of(first.metadata)
    chosen = {"trust": trust, "sensitivity": sensitivity, "retention": retention, **(labels or {})}
    check_labels(**chosen)
    return capped_labels(chosen, max_trust)


NO_END = "never"  # a valid_until that says no end (a patch's new memory otherwise keeps its target's)


def validity(valid_from: str | None, valid_until: str | None) -> tuple[str | None, str | None]:
    """A validity window as ISO 8601 texts (a date means its midnight; no offset means UTC): from when,
    until when a memory is in effect; ``NO_END`` stays itself. A ``UsageError`` for a time that does not
    parse or an empty window."""
    if valid_until == NO_END:
        return validity(valid_from, None)[0], NO_END
    start, end = parse_moment(valid_from, "valid_from"), parse_moment(valid_until, "valid_until")
    if start is not None and end is not None and end <= start:
        raise UsageError(f"valid_until ({valid_until}) must come after valid_from ({valid_from})")
    return (start.isoformat() if start else None), (end.isoformat() if end else None)


def kept_fields(
    targets: list[MemoryNode],
    *,
    confidence: float | None = None,
    valid_from: str | None = None,
    valid_until: str | None = None,
) -> dict[str, Any]:
    """What a patch's new memory keeps of its ``targets`` (as ``new_node`` arguments), so that a
    relabel or a rewording changes only what it names: the validity window, the confidence and the
    priority. One target: its own. Several (merge, resolve_conflict): a window or a priority all of
    them share, else the default (from now, no end; normal); the lowest confidence (the new memory is
    no surer than its least sure part). ``confidence``, ``valid_from`` and ``valid_until`` set theirs
    instead (checked by ``validity`` before: a ``UsageError`` also for a start after the end kept; an end
    alone may be past, as on ``cclg add``: a replacement that has already expired; ``NO_END``: none)."""
    windows = {(t.effective_from, t.effective_until) for t in targets}
    start, end = windows.pop() if len(windows) == 1 else (None, None)
    if valid_until == NO_END:  # the end taken away
        end, valid_until = None, None
    priorities = {t.priority for t in targets}
    if valid_from is not None:  # a start given after the end kept is refused; an end alone may be past, as on add
        valid_from, end = validity(valid_from, valid_until or end)
    start, end = valid_from or start, valid_until or end
    return {
        "effective_from": start,
        "effective_until": end,
        "confidence": min(t.confidence for t in targets) if confidence is None else confidence,
        "priority": priorities.pop() if len(priorities) == 1 else "normal",
    }


@dataclass(frozen=True)
class _Replacing:
    """What every new node of one patch shares: the ``targets`` it replaces, the operation's ``spec``,
    the patch's id and time, the fields ``kept`` of the targets, the reason, source and labels, and the
    questions the new nodes answer."""

    targets: list[MemoryNode]
    spec: lattice.OperationSpec
    patch_id: str
    stamp: str
    kept: dict[str, Any]
    reason: str
    source: Source | None
    labels: dict[str, str]
    questions: list[str]

    def new_node(self, index: int, content: str) -> MemoryNode:
        """The ``index``-th new node the patch writes in place of the targets, holding ``content``."""
        first = self.targets[0]
        key = first.key
        if self.spec.new_nodes == "many" and key is not None:
            key = f"{key}.{index + 1}"
        node = new_node(
            content,
            type=first.type,
            scope=first.scope,
            key=key,
            tags=sorted({t for target in self.targets for t in target.tags}),
            source=new_node_source(self.patch_id, self.reason, self.source),
            created_at=self.stamp,
            status="active_session" if first.status == "active_session" else "active",
            metadata={"created_by": "patch", "patch_id": self.patch_id, **self.labels},
            **self.kept,
        )
        set_questions(node, self.questions)
        flag_instructions(node)
        target_ids = [t.id for t in self.targets]
        node.relations["supersedes"] = list(target_ids)
        if self.spec.relation:
            node.relations[self.spec.relation] = list(target_ids)
        return node


def write_retiring_patch(
    store: Store,
    patch: MemoryPatch,
    new_nodes: list[MemoryNode],
    edges: list[MemoryEdge],
    targets: list[MemoryNode],
    target_status: str,
) -> None:
    """Write a patch and what it makes, in crash-safe order (under the store lock): the new records
    (``_write_new``), then the retirement of the targets."""
    _write_new(store, patch, new_nodes, edges)
    records = [audit_record("node_written", node_id=n.id, patch_id=patch.id) for n in new_nodes]
    records.append(patch_audit(patch))
    records += [audit_record("edge_written", edge_id=e.id, patch_id=patch.id) for e in edges]
    with store.after_commit(f"patch {patch.id}"):
        for target in targets:
            set_status(target, target_status, patch.created_at)
            link_replacements(target, new_nodes)
            store.write_node(target)
        records += [
            audit_record("node_status_changed", node_id=t.id, status=t.status, patch_id=patch.id) for t in targets
        ]
        store.audit_many(records)
    IndexChanges(store).changed([*patch.new_node_ids, *patch.target_ids], [patch.id])


def _write_new(
    store: Store,
    patch: MemoryPatch,
    nodes: list[MemoryNode],
    edges: list[MemoryEdge],
    audit: list[dict[str, Any]] | None = None,
) -> None:
    """Write a patch and the nodes and edges it makes, none of them visible before the patch is
    durable (under the store lock): stage them, write the patch, append ``audit`` (so a writer
    killed while naming them leaves none unaudited), name them."""
    refuse_oversized(store, nodes)
    refuse_purged(store, nodes)
    staged = [(store.node_path(n.id), dumps(n.to_dict())) for n in nodes]
    staged += [(store.edge_path(e.id), dumps(e.to_dict())) for e in edges]
    temps: list[tuple[Path, Path]] = []
    try:
        for path, data in staged:
            temps.append((store.stage_file(path, data, patch.id), path))
        store.write_patch(patch)
    except BaseException:  # a full disk, say: nothing of the patch stays behind
        for temp, _ in temps:
            temp.unlink(missing_ok=True)
        raise
    store.make_durable()  # in a batch: the staged files and the patch, before any of them is named
    with store.after_commit(f"patch {patch.id}"):
        if audit:
            store.audit_many(audit)
        for temp, path in temps:
            store.publish_file(temp, path)


def record_conflict(
    store: Store, local_id: str, incoming: MemoryNode, *, reason: str, source: Source | None = None
) -> PatchResult:
    """Keep a differing version of a memory beside the local one, both waiting for a decision.

    Used when a container brings a memory whose id is known here but whose content
    differs: nothing is overwritten. The incoming version is written as a new node
    (a new id; ``metadata.imported_id`` keeps its own) in ``conflict_pending``,
    contradicting the local one, by one ``create`` patch. The local node moves to
    ``conflict_pending`` too when the lattice allows it (a live memory is no longer
    sure truth); the patch records its prior status, so rolling the patch back
    undoes the whole flag. ``cclg conflicts`` lists the pair, ``cclg resolve`` settles it.
    """
    with store.lock():
        local = read_target(store, local_id)
        stamp = now_iso()
        patch_id = new_id("patch")
        data = incoming.to_dict()
        data.update(id=new_id("mem"), status="conflict_pending", updated_at=stamp)
        data["relations"] = {**data["relations"], "contradicts": [*incoming.relations["contradicts"], local.id]}
        data["metadata"] = {
            **data["metadata"],
            "created_by": "import",
            "patch_id": patch_id,
            "imported_id": incoming.id,
        }
        node = MemoryNode.from_dict(data)
        flag_local = "conflict_pending" in lattice.TRANSITIONS[local.status]
        patch = MemoryPatch(
            id=patch_id,
            operation="create",
            target_ids=[],
            new_node_ids=[node.id],
            reason=reason,
            new_content=node.content,
            source=source or Source(label="import"),
            confidence=node.confidence,
            resolution_policy={"rule": "import_conflict", "auto_applied": False, "requires_review": True},
            prior_states={local.id: local.status} if flag_local else {},
            created_at=stamp,
            applied_at=stamp,
        )
        edge = MemoryEdge(
            id=new_id("edge"),
            from_id=node.id,
            to_id=local.id,
            type="contradicts",
            created_at=stamp,
            source_patch_id=patch_id,
        )
        _write_new(store, patch, [node], [edge])
        records = [audit_record("node_written", node_id=node.id, patch_id=patch_id), patch_audit(patch)]
        records.append(audit_record("edge_written", edge_id=edge.id, patch_id=patch_id))
        with store.after_commit(f"patch {patch_id}"):
            if flag_local:
                set_status(local, "conflict_pending", stamp)
                if node.id not in local.relations["contradicts"]:
                    local.relations["contradicts"].append(node.id)
                store.write_node(local)
                records.append(
                    audit_record("node_status_changed", node_id=local.id, status=local.status, patch_id=patch_id)
                )
            store.audit_many(records)
        IndexChanges(store).changed([node.id, local.id], [patch_id])
    return PatchResult(patch=patch, new_nodes=[node], edges=[edge], changed_nodes=[local] if flag_local else [])


def flag_instructions(node: MemoryNode) -> None:
    """Mark (``metadata.flags``) a new node whose content, or a question it answers, reads as
    instructions to the model."""
    flags = [f for text in (node.content, *node_questions(node)) for f in fencing.instruction_flags(text)]
    if flags:
        node.metadata["flags"] = sorted({*node.metadata.get("flags", []), *flags})


def limit(store: Store, name: str) -> int:
    """The store's size limit ``name`` (one of ``cclg.core.config.LIMITS``): config.json's ``"limits"``, else the
    default."""
    value: int = store.settings.get("limits", name)
    return value


def refuse_oversized(store: Store, nodes: list[MemoryNode]) -> None:
    """``ValidationError`` when a memory's content is longer than the store's ``memory_chars`` limit."""
    most = limit(store, "memory_chars")
    problems = [
        f"{node.id}: content of {len(node.content):,} characters is over the limit of {most:,}"
        for node in nodes
        if len(node.content) > most
    ]
    if problems:
        raise ValidationError(
            f'{problems[0]} (set config.json "limits": {{"memory_chars": N}} to change it); nothing was written',
            problems,
        )


# ---------------------------------------------------------------- purged content

# A purge (``cclg.ledger.purge``) writes a ``forget`` patch marked with this resolution_policy rule, then the
# memory's node file as a tombstone: this content, and in ``metadata.purged`` the hash of the content
# it erased ({"content_hash", "patch_id", "purged_at"}). That content is refused on every write.
PURGE_RULE = "purge"
PURGED_CONTENT = "[purged]"
PURGED = "purged"


def is_purge(patch: MemoryPatch) -> bool:
    """Whether ``patch`` is the ``forget`` patch of a purge, which erased its targets' content for good."""
    return patch.operation == "forget" and patch.resolution_policy.get("rule") == PURGE_RULE


IMPORTED_PURGE_RULE = "imported_purge"  # the resolution_policy rule an import writes a foreign purge patch with


def foreign_patch(patch: MemoryPatch) -> MemoryPatch:
    """``patch`` as this store takes it: a purge made elsewhere (``is_purge``) is a plain forget
    here, its rule ``IMPORTED_PURGE_RULE``, so nothing of this store treats it as its own purge (no
    refusal of content, no doctor finishing it, no rollback refused for it)."""
    if not is_purge(patch):
        return patch
    copy = MemoryPatch.from_dict(patch.to_dict())
    copy.resolution_policy = {**copy.resolution_policy, "rule": IMPORTED_PURGE_RULE}
    return copy


def purged_hash(node: MemoryNode) -> str | None:
    """The hash of the content a purged memory's tombstone erased (``metadata.purged``); None for any other node."""
    mark = node.metadata.get(PURGED)
    digest = mark.get("content_hash") if isinstance(mark, dict) else None
    return digest if isinstance(digest, str) else None


def purged_contents(store: Store, index: Index | None = None) -> dict[str, MemoryNode]:
    """The tombstones of this store's purges, by the hash of the content each erased. They all hold
    ``PURGED_CONTENT``, so the index (``index``, else the store's own) finds them by that one hash (as
    many as purges, a handful); a store with no index yet (no read since it was made) has them read
    from its purge patches, and no index is built for a write. A tombstone counts only when its mark
    names a purge patch of this ledger that targets it: only a purge this store performed refuses
    content (and no import brings a mark in: ``cclg.intake.new_memories.cap_imported`` drops a node's,
    ``cclg.intake.container_import`` a foreign patch's purge rule)."""
    if index is None and not store.index_path.exists():
        candidates = [node for patch in purge_patches(store) for node in readable_nodes(store, patch.target_ids)]
    else:

        def tombstones(index: Index) -> list[MemoryNode]:
            return index.nodes_with_content(content_hash(PURGED_CONTENT))

        candidates = tombstones(index) if index is not None else healing(store, tombstones)  # damage: rebuilt
    found: dict[str, MemoryNode] = {}
    for tombstone in candidates:
        digest = purged_hash(tombstone)
        if digest is not None and digest not in found and _purged_here(store, tombstone):
            found[digest] = tombstone
    return found


def purge_patches(store: Store) -> list[MemoryPatch]:
    """Every purge patch of the store, from the patch files (only those that name the rule are parsed)."""
    found = []
    for path in store.record_files("patches"):
        data = path.read_bytes()
        if f'"{PURGE_RULE}"'.encode() not in data:
            continue
        with contextlib.suppress(ValueError, ValidationError):
            patch = MemoryPatch.from_dict(parse_json(data), where=store.relative(path))
            if is_purge(patch):
                found.append(patch)
    return found


def readable_nodes(store: Store, node_ids: list[str]) -> list[MemoryNode]:
    """The nodes of ``node_ids`` that are there and read (the others skipped)."""
    found = []
    for node_id in node_ids:
        with contextlib.suppress(CclgError):
            found.append(store.read_node(node_id))
    return found


def _purged_here(store: Store, tombstone: MemoryNode) -> bool:
    """Whether ``tombstone``'s mark names a purge patch of the ledger that purged it."""
    patch_id = tombstone.metadata[PURGED].get("patch_id")
    try:
        patch = store.read_patch(patch_id) if isinstance(patch_id, str) else None
    except CclgError:  # no such patch here: a mark that came from elsewhere
        return False
    return patch is not None and is_purge(patch) and tombstone.id in patch.target_ids


def refuse_purged(store: Store, nodes: list[MemoryNode], index: Index | None = None) -> None:
    """``IllegalPatchError`` (exit 6) when a node about to be written holds content a purge of this store
    erased: every write of the ledger (add, import, a patch of any operation, a promotion, a container's
    memories) checks it, so nothing brings purged content back but ``cclg add --force``."""
    purged = purged_contents(store, index) if nodes else {}
    for node in nodes if purged else ():
        tombstone = purged.get(content_hash(node.content))
        if tombstone is not None:
            raise IllegalPatchError(
                f"refused: {node.id} would hold content that was purged (erased for good) as {tombstone.id} by "
                f"{tombstone.metadata[PURGED].get('patch_id')}; nothing was written"
            )


# The secret check reads the fields that carry text from outside; the others are made here or checked to
# be ids, times, numbers or vocabulary (retrieval keys come from the content). tests/test_guard.py: all.
TEXT_FIELDS = ("scope", "key", "content", "priority", "source", "metadata", "tags")
CHECKED_FIELDS = (
    "schema_version", "id", "type", "status", "confidence", "created_at", "updated_at", "effective_from",
    "effective_until", "relations", "retrieval",
)  # fmt: skip


def refuse_node_secrets(nodes: list[MemoryNode]) -> None:
    """``SecretError`` when a field of these nodes that carries text from outside holds a secret."""
    fields = {}
    for node in nodes:
        records = {"scope": node.scope.to_dict(), "source": node.source.to_dict()}
        data = {name: records[name] if name in records else getattr(node, name) for name in TEXT_FIELDS}
        fields[node.id if len(nodes) > 1 else "memory"] = data
    secrets.refuse_secrets(fields, "the memory" if len(nodes) == 1 else "the memories")


def _check_shape(operation: str, spec: lattice.OperationSpec, target_ids: list[str], contents: list[str]) -> None:
    if len(set(target_ids)) != len(target_ids):
        raise IllegalPatchError(f"{operation}: a target is named twice")
    if len(target_ids) < spec.min_targets:
        raise IllegalPatchError(f"{operation} needs at least {spec.min_targets} target(s), got {len(target_ids)}")
    if spec.max_targets is not None and len(target_ids) > spec.max_targets:
        raise IllegalPatchError(f"{operation} takes at most {spec.max_targets} target(s), got {len(target_ids)}")
    if any(not c.strip() for c in contents):
        raise IllegalPatchError(f"{operation}: new content must not be empty")
    wanted = {"none": "no new content", "one": "exactly one new content", "many": "two or more new contents"}
    ok = {"none": not contents, "one": len(contents) == 1, "many": len(contents) >= 2}[spec.new_nodes]
    if not ok:
        raise IllegalPatchError(f"{operation} needs {wanted[spec.new_nodes]}, got {len(contents)}")


def read_target(store: Store, node_id: str) -> MemoryNode:
    try:
        return store.read_node(node_id)
    except NotFoundError:
        raise IllegalPatchError(f"unknown target {node_id}: no such memory in {store.root}") from None


def new_node_source(patch_id: str, reason: str, source: Source | None) -> Source:
    base = source or Source()
    return Source(
        label=f"patch:{patch_id}",
        session_ids=list(base.session_ids),
        turn_ids=list(base.turn_ids),
        raw_spans=list(base.raw_spans),
        tool_result_ids=list(base.tool_result_ids),
        artifact_ids=list(base.artifact_ids),
        quote=base.quote or reason,
    )


def set_status(node: MemoryNode, status: str, stamp: str) -> None:
    node.status = status
    node.updated_at = stamp


def link_replacements(target: MemoryNode, new_nodes: list[MemoryNode]) -> None:
    """Name ``new_nodes`` in the target's ``superseded_by`` (once each)."""
    for node in new_nodes:
        if node.id not in target.relations["superseded_by"]:
            target.relations["superseded_by"].append(node.id)


def patch_audit(patch: MemoryPatch, **extra: Any) -> dict[str, Any]:
    """The audit record of a written patch."""
    return audit_record(
        "patch_written",
        patch_id=patch.id,
        operation=patch.operation,
        target_ids=patch.target_ids,
        new_node_ids=patch.new_node_ids,
        **extra,
    )


class _null_context:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
