"""Undoing a patch: ``rollback`` restores what a patch changed and discards what it made.

The rollback is itself a patch of the ledger (``operation = rollback``, ``rollback_of`` = the
undone patch), written in the ledger's order, so a rollback can be rolled back too.

A purge (``cclg.ledger.purge``) is the one patch that is never undone: its ``forget`` patch is marked
``resolution_policy.rule = "purge"`` (``is_purge``), and the memory's content is erased for good.
Neither it nor any patch that touched the purged memory can be rolled back: restoring that memory
would bring back nothing but the purge marker.
"""

from __future__ import annotations

from cclg.core import secrets
from cclg.core.ids import new_id, now_iso
from cclg.core.records import MemoryNode, MemoryPatch, Source, default_resolution_policy
from cclg.core.store import Store, audit_record, patch_order
from cclg.errors import IllegalPatchError
from cclg.ledger.index import IndexChanges
from cclg.ledger.lattice import operation_spec
from cclg.ledger.view import touched_ids, undone_patch_ids
from cclg.ledger.writer import PatchResult, is_purge, link_replacements, patch_audit, read_target, set_status


def rollback(store: Store, patch_id: str, *, reason: str = "", source: Source | None = None) -> PatchResult:
    """Undo a patch: restore the ``prior_states`` it recorded and discard the nodes it wrote.

    The rollback is itself a patch (``operation = rollback``, ``rollback_of`` =
    the undone patch) and retires nothing, so a rollback can be rolled back. It is
    refused when a later patch has touched the same memories (undo that one first)
    or when the patch is already undone.
    """
    secrets.refuse_secrets({"reason": reason, "source": source.to_dict() if source else {}}, "the rollback")
    with store.lock():
        undone = store.read_patch(patch_id)
        operation_spec(undone.operation)
        patches = store.load_patches()
        _check_not_purged(undone, patches)
        _check_undoable(undone, patches)
        # Patches written without prior_states (by other implementations) restore to active.
        restore = {node_id: undone.prior_states.get(node_id, "active") for node_id in undone.target_ids}
        restore.update(undone.prior_states)
        discard = [n for n in undone.new_node_ids if n not in restore]
        nodes = {node_id: read_target(store, node_id) for node_id in [*restore, *discard]}
        stamp = now_iso()
        prior = {node_id: node.status for node_id, node in nodes.items()}
        for node_id, status in restore.items():
            set_status(nodes[node_id], status, stamp)
        for node_id in discard:
            set_status(nodes[node_id], "discarded", stamp)
        _relink_after_rollback(store, undone, nodes)
        patch = MemoryPatch(
            id=new_id("patch"),
            operation="rollback",
            target_ids=list(nodes),
            new_node_ids=[],
            reason=reason.strip() or f"rollback of {patch_id}",
            new_content=None,
            source=source or Source(label="manual"),
            confidence=1.0,
            resolution_policy=default_resolution_policy(),
            prior_states=prior,
            rollback_of=undone.id,
            created_at=stamp,
            applied_at=stamp,
        )
        store.write_patch(patch)
        with store.after_commit(f"patch {patch.id}"):
            for node in nodes.values():
                store.write_node(node)
            records = [patch_audit(patch)]
            records += [
                audit_record("node_status_changed", node_id=n.id, status=n.status, patch_id=patch.id)
                for n in nodes.values()
            ]
            store.audit_many(records)
        IndexChanges(store).changed(list(nodes), [patch.id])
    return PatchResult(patch=patch, changed_nodes=list(nodes.values()))


def _check_not_purged(undone: MemoryPatch, patches: list[MemoryPatch]) -> None:
    """``IllegalPatchError`` when ``undone`` is a purge, or touched a memory a purge erased."""
    if is_purge(undone):
        raise IllegalPatchError(
            f"cannot roll back {undone.id}: it purged {', '.join(undone.target_ids)}, whose content is erased "
            "for good; a purge cannot be undone (add the memory again, with --force, if it is true after all)"
        )
    touched = touched_ids(undone)
    for purge in patches:
        erased = sorted(touched & set(purge.target_ids)) if is_purge(purge) else []
        if erased:
            raise IllegalPatchError(
                f"cannot roll back {undone.id}: it touched {', '.join(erased)}, whose content {purge.id} purged "
                "(erased for good); undoing it would restore a memory that holds nothing but the purge marker"
            )


def _check_undoable(undone: MemoryPatch, patches: list[MemoryPatch]) -> None:
    """``IllegalPatchError`` when ``undone`` is already undone, or a later patch still standing
    touched the same memories."""
    undone_ids = undone_patch_ids(patches)
    by_id = {p.id: p for p in patches}
    if undone.id in undone_ids:
        raise IllegalPatchError(f"{undone.id} is already rolled back")
    touched = touched_ids(undone)
    for later in patches:
        if later.id == undone.id or later.id in undone_ids or patch_order(later) <= patch_order(undone):
            continue
        if _rolls_back_chain_to(later, undone.id, by_id):
            continue  # a redo of this very patch: undoing the patch undoes the redo too
        if later.rollback_of in by_id and patch_order(by_id[later.rollback_of]) > patch_order(undone):
            continue  # undoes a patch made after this one: the two cancel out
        overlap = touched & touched_ids(later)
        if overlap:
            raise IllegalPatchError(
                f"cannot roll back {undone.id}: the later patch {later.id} ({later.operation}) also changed "
                f"{', '.join(sorted(overlap))}; roll that one back first"
            )
    if undone.operation == "rollback" and undone.rollback_of is None:
        raise IllegalPatchError(f"{undone.id} is a rollback that does not say which patch it undid")


def _relink_after_rollback(store: Store, undone: MemoryPatch, nodes: dict[str, MemoryNode]) -> None:
    """Links follow the patch at the root of the rollback chain: undoing it (or a redo of it)
    removes its superseded_by links; undoing an undo puts them back."""
    root, depth = undone, 0
    while root.rollback_of is not None:
        root, depth = store.read_patch(root.rollback_of), depth + 1
    for node_id in root.target_ids:
        if node_id not in nodes:
            continue
        if depth % 2 == 0:
            _unlink(nodes[node_id], root.new_node_ids)
        else:
            link_replacements(nodes[node_id], [n for n in nodes.values() if n.id in root.new_node_ids])
    if root.operation == "create":  # a conflict flag (record_conflict): its contradicts links follow it
        for node_id in root.prior_states:
            links = nodes[node_id].relations["contradicts"] if node_id in nodes else None
            if links is None:
                continue
            if depth % 2 == 0:
                links[:] = [n for n in links if n not in root.new_node_ids]
            else:
                links.extend(n for n in root.new_node_ids if n not in links)


def _unlink(target: MemoryNode, new_node_ids: list[str]) -> None:
    target.relations["superseded_by"] = [n for n in target.relations["superseded_by"] if n not in new_node_ids]


def _rolls_back_chain_to(patch: MemoryPatch, patch_id: str, by_id: dict[str, MemoryPatch]) -> bool:
    """Whether following ``rollback_of`` from ``patch`` reaches ``patch_id``."""
    seen = set()
    current: MemoryPatch | None = patch
    while current is not None and current.rollback_of and current.id not in seen:
        seen.add(current.id)
        if current.rollback_of == patch_id:
            return True
        current = by_id.get(current.rollback_of)
    return False
