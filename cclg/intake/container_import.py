"""Bringing a loaded ``.cclg`` container into a store: foreign records never change local memories.

``import_container`` decides everything first (``_plan``, which reads the store
and writes nothing, so a dry run reports exactly what a real run does), then
writes it all or nothing through ``cclg.ledger.staging``.

What arrives (a record whose id is new here) is written; what is known is
skipped. Three rules keep a container from acting on the store's own memories:

- An imported memory vouches for nothing: at most untrusted, never pinned, its
  retention at most preferred (``cclg.intake.new_memories.cap_imported``).
- A foreign patch is written only when every memory it touches arrives with it,
  and what it rolls back arrived too (``screen_patches``). Any other is refused
  and becomes a conflict for the user: the memories it creates wait in
  ``conflict_pending`` beside the local ones it would have changed, or, when it
  creates none, a ``conflict_pending`` note says what it asked. ``cclg conflicts``
  lists them; no local status changes.
- A known memory whose content differs is never overwritten: the incoming
  version waits beside it, in ``conflict_pending``, contradicting it.
- A marker is never taken from a foreign record: a purge made elsewhere arrives as
  a plain forget (``ledger.foreign_patch``) and its tombstone without its mark
  (``cap_imported``), so only a purge this store performed refuses content. Content
  a purge of this store erased is refused (``ledger.refuse_purged``): an export made
  before the purge does not bring it back.

Everything the import writes is named by a patch: the foreign patches it accepts,
and one ``create`` patch of its own for arriving memories no patch names (the
reference implementation writes no create patches), kept versions and notes.
"""

from __future__ import annotations

from typing import Any

from cclg.core import secrets
from cclg.core.ids import new_id, now_iso
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Record, Source, default_resolution_policy, new_node
from cclg.core.store import Store, audit_record, patch_order
from cclg.intake.container import SECTIONS, SINGULAR, Container
from cclg.intake.new_memories import cap_imported
from cclg.ledger import view, writer
from cclg.ledger.lattice import INITIAL_STATUSES
from cclg.ledger.staging import Stage, finish


class ContainerImportReport(Record):
    """What ``import_container`` did (or, for a dry run, would do)."""

    def __init__(self, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.added: dict[str, list[str]] = {name: [] for name in SECTIONS}
        self.skipped: dict[str, list[str]] = {name: [] for name in SECTIONS}  # known, identical
        self.conflicts: list[dict[str, str | None]] = []  # {"local", "incoming", "kept_as"}
        self.refused: list[dict[str, Any]] = []  # {"patch", "operation", "would_change", "kept_as"}
        self.statuses: list[dict[str, str]] = []  # {"node", "from", "to"}: statuses the imported patches set
        self.notes: list[str] = []  # what was left alone or lowered, and why
        self.patch_id: str | None = None  # the import's own create patch, if it wrote one

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "added": {name: len(ids) for name, ids in self.added.items()},
            "skipped": {name: len(ids) for name, ids in self.skipped.items()},
            "conflicts": self.conflicts,
            "refused": self.refused,
            "statuses": self.statuses,
            "notes": self.notes,
            "patch_id": self.patch_id,
            "added_ids": self.added,
        }


def import_container(store: Store, container: Container, *, dry_run: bool = False) -> ContainerImportReport:
    """Bring a loaded container's records into the store, by the rules of the module docstring.

    Records new here are written, known ones skipped; foreign patches that would change a local
    memory are refused and wait as conflicts; a known memory with different content is kept as it
    is, the incoming version beside it. A container holding a secret anywhere is refused whole,
    first. Everything is written all or nothing and audited; a dry run writes nothing.
    """
    report = ContainerImportReport(dry_run)
    secrets.refuse_secrets(
        {f"@{name} {record.id}": record.to_dict() for name in SECTIONS for record in getattr(container, name)},
        "the import",
    )
    with store.lock():
        if not dry_run:
            finish(store)
        plan = _plan(store, container, report)
        if not dry_run:
            _write(store, plan, report)
    return report


class _Plan(Record):
    """What an import writes: records new here, then the import's own memories and patch."""

    def __init__(self) -> None:
        self.fresh: dict[str, list[Any]] = {name: [] for name in SECTIONS}
        self.created: list[MemoryNode] = []  # arriving memories no patch names, kept versions, notes
        self.patch: MemoryPatch | None = None
        self.edges: list[MemoryEdge] = []  # from each kept version or note to the local memory it contradicts


def _plan(store: Store, container: Container, report: ContainerImportReport) -> _Plan:
    """Decide everything an import does (reads the store, writes nothing)."""
    plan = _Plan()
    local_nodes = store.load_nodes()
    local_patches = {p.id: p for p in store.load_patches()}
    arriving, differing = _sort_nodes(container, report, local_nodes)
    new = _sort_known(store, container, report, local_patches)
    accepted, refused, tainted = screen_patches(new["patches"], set(arriving), local_patches)
    for node in arriving.values():
        lowered = cap_imported(node)
        if lowered:
            report.notes.append(f"{node.id} claimed more than an import may ({'; '.join(lowered)}); `cclg label` can")
    ledger_patches = [*local_patches.values(), *accepted]
    _settle_statuses(report, arriving, ledger_patches, tainted)
    named = set().union(*(view.touched_ids(p) for p in ledger_patches))
    plan.created = [n for n in arriving.values() if n.id not in named and n.status in INITIAL_STATUSES]
    review = bool(tainted or differing)
    for local, incoming in differing:
        copy = _kept_beside(local, incoming)
        report.conflicts.append({"local": local.id, "incoming": incoming.id, "kept_as": copy.id})
        plan.created.append(copy)
    answered = {n.metadata.get("imported_patch_id") for n in local_nodes.values()}
    for patch in sorted((p for p in new["patches"] if p.id in refused), key=patch_order):
        seen = patch.id in answered or any(n in local_nodes for n in patch.new_node_ids)
        entry = _refusal(patch, refused[patch.id], tainted, seen)
        report.refused.append(entry)
        review = review or "note" in entry
        plan.created.extend(entry.pop("note", []))
    plan.fresh = {"nodes": list(arriving.values()), "patches": accepted, "sessions": new["sessions"]}
    plan.fresh["edges"] = [e for e in new["edges"] if e.source_patch_id not in refused]
    report.notes += [
        f"edge {e.id} belongs to the refused patch {e.source_patch_id}; not written"
        for e in new["edges"]
        if e.source_patch_id in refused
    ]
    for name in SECTIONS:
        report.added[name] = [record.id for record in plan.fresh[name]]
    if plan.created:
        plan.patch = _own_patch(plan, set(local_nodes), review)
        report.patch_id = None if report.dry_run else plan.patch.id
    if report.dry_run:
        for entry in [*report.conflicts, *report.refused]:
            entry["kept_as"] = None
    return plan


def _own_patch(plan: _Plan, local_ids: set[str], review: bool) -> MemoryPatch:
    """The import's own ``create`` patch, naming ``plan.created``; sets ``plan.edges``, an edge from
    each of those memories to each local memory it contradicts."""
    patch = _creation_patch(
        plan.created,
        reason="import of a .cclg container",
        source=Source(label="import"),
        new_content=f"imported {len(plan.created)} memories that no imported patch names",
        review=review,
    )
    plan.edges = [
        MemoryEdge(new_id("edge"), n.id, local, "contradicts", patch.created_at, patch.id)
        for n in plan.created
        for local in n.relations["contradicts"]
        if local in local_ids
    ]
    return patch


def _sort_nodes(
    container: Container, report: ContainerImportReport, local_nodes: dict[str, MemoryNode]
) -> tuple[dict[str, MemoryNode], list[tuple[MemoryNode, MemoryNode]]]:
    """(copies of the memories new here by id, (local, incoming) pairs whose content differs);
    what is known already goes to the report as skipped."""
    arriving: dict[str, MemoryNode] = {}
    differing: list[tuple[MemoryNode, MemoryNode]] = []
    # Versions kept beside a local memory by an earlier import of a differing copy.
    kept_beside = {(n.metadata.get("imported_id"), n.content) for n in local_nodes.values()}
    for node in container.nodes:
        local = local_nodes.get(node.id)
        if local is None:
            arriving[node.id] = MemoryNode.from_dict(node.to_dict())
        elif local.content == node.content or (node.id, node.content) in kept_beside:
            report.skipped["nodes"].append(node.id)
        else:
            differing.append((local, node))
    return arriving, differing


def _sort_known(
    store: Store, container: Container, report: ContainerImportReport, local_patches: dict[str, MemoryPatch]
) -> dict[str, list[Any]]:
    """The patches, edges and sessions new here; known ones go to the report as skipped, with a
    note where they differ."""
    fresh: dict[str, list[Any]] = {}
    patches = [writer.foreign_patch(patch) for patch in container.patches]
    report.notes += [
        f"patch {p.id} was a purge where it was made; here it forgets what it brought, as any reader sees it "
        "(only a purge of this store erases or refuses content)"
        for p, brought in zip(patches, container.patches, strict=True)
        if p is not brought and p.id not in local_patches
    ]
    known_here: list[tuple[str, list[Any], dict[str, Any]]] = [
        ("patches", patches, local_patches),
        ("edges", container.edges, {e.id: e for e in store.load_edges()}),
        ("sessions", container.sessions, {s.id: s for s in store.load_sessions()}),
    ]
    for name, brought, known in known_here:
        fresh[name] = []
        for record in brought:
            if record.id not in known:
                fresh[name].append(record)
                continue
            report.skipped[name].append(record.id)
            if known[record.id].to_dict() != record.to_dict():
                report.notes.append(f"{SINGULAR[name]} {record.id} differs from the local one; the local one is kept")
    return fresh


def screen_patches(
    patches: list[MemoryPatch], arriving: set[str], local_patches: dict[str, MemoryPatch]
) -> tuple[list[MemoryPatch], dict[str, set[str]], dict[str, set[str]]]:
    """Split foreign patches new here: (accepted, refused, tainted).

    A patch is accepted when every memory it touches is in ``arriving`` and what it
    rolls back is an accepted patch. ``refused`` maps each other patch to the local
    memories it would have changed (none when it only builds on a refused patch);
    ``tainted`` maps each arriving memory a refused patch creates to the same.
    """
    refused: dict[str, set[str]] = {}
    tainted: dict[str, set[str]] = {}
    wanted = {p.id for p in patches}
    changed = True
    while changed:  # refusing one patch may refuse those that build on it
        changed = False
        for patch in sorted(patches, key=patch_order):
            if patch.id in refused:
                continue
            touched = view.touched_ids(patch)
            harmed = touched - arriving
            undone = patch.rollback_of
            if undone is not None and undone in local_patches:
                harmed |= view.touched_ids(local_patches[undone])
            via = touched & set(tainted)
            harmed = harmed.union(*(tainted[t] for t in via))
            if harmed or via or (undone is not None and (undone not in wanted or undone in refused)):
                refused[patch.id] = harmed
                for node_id in set(patch.new_node_ids) & arriving:
                    tainted[node_id] = harmed
                changed = True
    return [p for p in patches if p.id not in refused], refused, tainted


def _settle_statuses(
    report: ContainerImportReport,
    arriving: dict[str, MemoryNode],
    patches: list[MemoryPatch],
    tainted: dict[str, set[str]],
) -> None:
    """Give each arriving memory the status the ledger settles (an arriving memory takes the ledger's
    word as it is); one that a refused patch created waits in conflict_pending, contradicting
    the local memories that patch would have changed."""
    expected = view.expected_statuses(arriving, patches)
    for node_id, node in arriving.items():
        if node_id in tainted:
            status = "conflict_pending"
            node.relations["contradicts"] = sorted({*node.relations["contradicts"], *tainted[node_id]})
        elif node.status in expected[node_id] or len(expected[node_id]) != 1:
            continue
        else:
            (status,) = expected[node_id]
        if node.status != status:
            report.statuses.append({"node": node_id, "from": node.status, "to": status})
            node.status = status


def _kept_beside(local: MemoryNode, incoming: MemoryNode) -> MemoryNode:
    """A differing incoming version of ``local``, kept under a new id in conflict_pending, contradicting it."""
    data = incoming.to_dict()
    data.update(id=new_id("mem"), status="conflict_pending", updated_at=now_iso())
    data["relations"] = {**data["relations"], "contradicts": [*incoming.relations["contradicts"], local.id]}
    data["metadata"] = {**data["metadata"], "created_by": "import", "imported_id": incoming.id}
    copy = MemoryNode.from_dict(data)
    cap_imported(copy)
    return copy


def _refusal(patch: MemoryPatch, harmed: set[str], tainted: dict[str, set[str]], answered: bool) -> dict[str, Any]:
    """The report entry of a refused patch; under ``note``, a conflict_pending memory saying what it
    asked (unless memories it created wait instead, or an earlier import ``answered`` it)."""
    entry: dict[str, Any] = {"patch": patch.id, "operation": patch.operation, "would_change": sorted(harmed)}
    waiting = [n for n in patch.new_node_ids if n in tainted]
    entry["kept_as"] = waiting[0] if waiting else None
    if waiting or not harmed or answered:
        return entry
    ids = ", ".join(sorted(harmed))
    note = new_node(
        f"An imported .cclg container asked to {patch.operation} {ids} (its patch {patch.id}: "
        f"{patch.reason[:300]}). It was not applied: a container changes only the memories it brings. "
        f"To apply it, change {ids} yourself; to dismiss it, forget this memory.",
        type="warning",
        source=Source(label="import"),
        status="conflict_pending",
        metadata={"created_by": "import", "trust": "untrusted", "imported_patch_id": patch.id},
    )
    note.relations["contradicts"] = sorted(harmed)
    entry["kept_as"], entry["note"] = note.id, [note]
    return entry


def _write(store: Store, plan: _Plan, report: ContainerImportReport) -> None:
    """Write the plan through one stage, audited (under the store lock)."""
    writer.refuse_oversized(store, [*plan.fresh["nodes"], *plan.created])
    writer.refuse_purged(store, [*plan.fresh["nodes"], *plan.created])  # an export made before a purge
    stage = Stage(store)
    audit = []
    for patch in plan.fresh["patches"]:
        stage.add_patch(patch)
        audit.append(writer.patch_audit(patch, via="import"))
    for edge in plan.fresh["edges"]:
        stage.add_edge(edge)
        audit.append(audit_record("edge_written", edge_id=edge.id, via="import"))
    for session in plan.fresh["sessions"]:
        stage.add_session(session)
        audit.append(audit_record("session_started", session_id=session.id, via="import"))
    if plan.patch is not None:
        stage.add_patch(plan.patch)
        audit.append(writer.patch_audit(plan.patch))
    for edge in plan.edges:
        stage.add_edge(edge)
        audit.append(audit_record("edge_written", edge_id=edge.id, patch_id=edge.source_patch_id))
    for node in [*plan.fresh["nodes"], *(n for n in plan.created if n.id not in report.added["nodes"])]:
        writer.flag_instructions(node)
        stage.add_node(node)
        audit.append(audit_record("node_written", node_id=node.id, via="import"))
    stage.commit(audit)


def _creation_patch(
    nodes: list[MemoryNode], *, reason: str, source: Source, new_content: str, review: bool = False
) -> MemoryPatch:
    """The ``create`` patch naming ``nodes`` (the ledger's ``create_nodes`` writes the same shape);
    ``review`` marks one whose memories wait for the user (imported conflicts)."""
    secrets.refuse_secrets({"reason": reason, "new_content": new_content}, "the create")
    stamp = now_iso()
    policy = {"rule": "import_conflict", "auto_applied": False, "requires_review": True}
    return MemoryPatch(
        id=new_id("patch"),
        operation="create",
        target_ids=[],
        new_node_ids=[n.id for n in nodes],
        reason=reason,
        new_content=new_content,
        source=source,
        confidence=1.0,
        resolution_policy=policy if review else default_resolution_policy(),
        created_at=stamp,
        applied_at=stamp,
    )
