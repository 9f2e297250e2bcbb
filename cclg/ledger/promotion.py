"""Promotion: a session memory made durable (``cclg promote ID``).

A memory scoped to one session (``active_session``, or ``pending_promotion`` for one proposed for
promotion) lives and dies with that session. When the user promotes it, one patch writes a durable
copy (the same content, type, key, tags and labels, the scope without the session, status
``active``), links it to the session memory with a ``derived_from`` edge and relation, and moves
the session memory to ``promoted``: the lattice's only way into that status.

The format's thirteen operations name no promotion, so the patch is an ``update`` (same content,
new home) whose ``resolution_policy.rule`` is ``"promote"``: a reader that knows nothing of
promotion sees an update; cclg's ledger replay (``cclg.ledger.view.expected_statuses``, through
``cclg.ledger.view.is_promotion``) expects the target ``promoted``, and a rollback restores the session
memory and discards the copy, as for any patch.
"""

from __future__ import annotations

from cclg.core import secrets
from cclg.core.ids import new_id, now_iso
from cclg.core.records import MemoryEdge, MemoryNode, MemoryPatch, Scope, Source, default_resolution_policy, new_node
from cclg.core.store import Store
from cclg.errors import IllegalPatchError, UsageError
from cclg.ledger.view import PROMOTE_RULE
from cclg.ledger.writer import PatchResult, flag_instructions, new_node_source, read_target, write_retiring_patch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROMOTABLE = ("active_session", "pending_promotion")


def promote(store: Store, memory_id: str, *, reason: str, source: str = "manual") -> PatchResult:
    """Make the session memory ``memory_id`` durable (see the module). An ``IllegalPatchError`` for a
    memory that is not a session memory (or not one waiting for promotion)."""
    if not reason.strip():
        raise UsageError("a promotion needs a reason")
    secrets.refuse_secrets({"reason": reason, "source": source}, "the promotion")
    with store.lock():
        target = read_target(store, memory_id)
        if target.status not in PROMOTABLE:
            raise IllegalPatchError(
                f"{target.id} is {target.status}: only a session memory ({' or '.join(PROMOTABLE)}) can be promoted"
            )
        stamp, patch_id = now_iso(), new_id("patch")
        scope = Scope(**{**target.scope.to_dict(), "session": None})
        durable = new_node(
            target.content,
            type=target.type,
            scope=scope,
            key=target.key,
            priority=target.priority,
            tags=list(target.tags),
            confidence=target.confidence,
            effective_from=target.effective_from,
            effective_until=target.effective_until,
            source=new_node_source(patch_id, reason, target.source),
            created_at=stamp,
            status="active",
            metadata={**_labels(target), "created_by": "promotion", "patch_id": patch_id},
        )
        durable.relations["derived_from"] = [target.id]
        flag_instructions(durable)
        policy = {**default_resolution_policy(), "rule": PROMOTE_RULE}
        patch = MemoryPatch(
            id=patch_id, operation="update", target_ids=[target.id], new_node_ids=[durable.id], reason=reason,
            new_content=target.content, source=Source(label=source), confidence=target.confidence,
            resolution_policy=policy, prior_states={target.id: target.status}, created_at=stamp, applied_at=stamp,
        )  # fmt: skip
        edge = MemoryEdge(
            id=new_id("edge"), from_id=durable.id, to_id=target.id, type="derived_from", created_at=stamp,
            source_patch_id=patch_id,
        )  # fmt: skip
        write_retiring_patch(store, patch, [durable], [edge], [target], "promoted")
    return PatchResult(patch=patch, new_nodes=[durable], edges=[edge], changed_nodes=[target])


def _labels(node: MemoryNode) -> dict[str, Any]:
    """The labels a promoted copy keeps: the session memory's trust, sensitivity and retention."""
    return {k: node.metadata[k] for k in ("trust", "sensitivity", "retention") if k in node.metadata}
