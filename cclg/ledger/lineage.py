"""A memory's history: its lineage, every version of it, from the first to the current ones, through the patches
that replaced one with another (``cclg log --lineage ID``).

``cclg log --memory ID`` shows the patches that touch one memory: one hop. The lineage follows the
links those patches make (a target and the new memories of the same patch) in both directions
until there are no more, so that from any member, an old version or the current one, the whole
chain shows: which memory came from which, by what operation and why, and where each stands now.
A patch undone by a rollback is shown, marked undone. ``patch_diff`` is one patch's change
(``cclg diff PATCH_ID``).
"""

from __future__ import annotations

import difflib

from cclg.core.store import Store
from cclg.errors import NotFoundError
from cclg.ledger.index import Index, healing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cclg.core.records import MemoryNode, MemoryPatch


def lineage(store: Store, memory_id: str) -> dict[str, Any]:
    """``{"memory": memory_id, "steps": [...], "members": [...]}``: the patches of the chain in ledger
    order (each with its operation, reason, targets, new memories and whether it stands undone), and
    every member with its status and content, oldest first; ``dangling``, how many members the
    patches name that the store no longer holds (skipped). ``memory_id`` must be a full id, of a stored
    memory or of one a patch names. The walk asks the index which patches name each member and reads
    only those: a member's chain costs its own patches, never the whole ledger."""
    return healing(store, lambda index: _walk(store, index, memory_id))


def _walk(store: Store, index: Index, memory_id: str) -> dict[str, Any]:
    read: dict[str, MemoryPatch] = {}

    def patches_of(node_id: str) -> list[MemoryPatch]:
        found = []
        for patch_id in index.patches_naming([node_id]):
            if patch_id not in read:
                read[patch_id] = store.read_patch(patch_id)
            if read[patch_id].operation != "rollback":  # a rollback links no versions
                found.append(read[patch_id])
        return found

    if not patches_of(memory_id):
        store.read_node(memory_id)  # NotFoundError for an id neither the store nor a patch knows
    members, chain, frontier = {memory_id}, {}, [memory_id]
    while frontier:
        current = frontier.pop()
        for patch in patches_of(current):
            chain[patch.id] = patch
            if patch.operation == "create":
                continue  # a create links nothing: its new memories came from no other
            for other in [*patch.target_ids, *patch.new_node_ids]:
                if other not in members:
                    members.add(other)
                    frontier.append(other)
    undone = index.undone_patch_ids()
    steps = [_step(patch, patch.id in undone) for patch in chain.values()]
    steps.sort(key=lambda s: (s["created_at"], s["patch"]))
    found = _members(store, members)
    return {"memory": memory_id, "steps": steps, "members": found, "dangling": len(members) - len(found)}


def _step(patch: MemoryPatch, undone: bool) -> dict[str, Any]:
    return {
        "patch": patch.id,
        "operation": patch.operation,
        "created_at": patch.created_at,
        "reason": patch.reason,
        "targets": list(patch.target_ids),
        "new": list(patch.new_node_ids),
        "undone": undone,
    }


def _members(store: Store, ids: set[str]) -> list[dict[str, Any]]:
    found = []
    for member in ids:
        node = _read_optional(store, member)
        if node is None:
            continue  # moved to recovered/ or deleted by a sync: counted as dangling
        found.append({"id": node.id, "status": node.status, "created_at": node.created_at, "content": node.content})
    return sorted(found, key=lambda m: (m["created_at"], m["id"]))


def patch_diff(store: Store, patch_id: str) -> dict[str, Any]:
    """What the patch ``patch_id`` (a full id) changed: each target's status move and a content diff old -> new."""
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
