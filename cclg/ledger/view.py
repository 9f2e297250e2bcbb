"""The read model: which memories are current truth, computed from nodes and patches.

Pure functions of records, shared by everything that reads: search and the
index's ``current`` flag follow the same rules, and stores and portable
containers compute the view the same way.

- A patch is undone when a rollback of it is not itself undone (``undone_patch_ids``).
- A node targeted by a live retiring patch is retired, whatever its own status says
  (``retired_ids``).
- Of current nodes sharing a ``key``, the most trusted wins (an untrusted memory never
  shadows a trusted one), then the narrowest scope (``PRECEDENCE``, from the
  contract's ``scope_precedence``), then the newest update: ``rank`` says it in one number.
- ``expected_statuses`` replays the ledger to say which status each node may have now.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from cclg import format as fmt
from cclg.core import labels
from cclg.core.ids import now_iso, parse_time
from cclg.core.labels import labels_of
from cclg.core.records import MemoryNode, MemoryPatch
from cclg.core.store import patch_order
from cclg.ledger import lattice
from cclg.ledger.lattice import LIVE_STATUSES, OPERATIONS, operation_spec

# Scope level -> rank; the smaller rank wins among nodes sharing a key (of the same trust).
PRECEDENCE: dict[str, int] = {level: rank for rank, level in enumerate(fmt.SCOPE_PRECEDENCE)}


def rank(node: MemoryNode) -> int:
    """Where ``node`` stands among current nodes sharing its key; the smaller wins. Trust comes
    first (trusted, untrusted, quarantined), then the scope: an untrusted memory, however narrow
    its scope, never shadows a trusted one. (The index keeps this number as a node's ``level``.)"""
    return labels.TRUST.index(labels_of(node.metadata)[0]) * len(PRECEDENCE) + PRECEDENCE[node.scope.level]


def touched_ids(patch: MemoryPatch) -> set[str]:
    """Every node a patch names: targets, new nodes, nodes whose prior status it recorded."""
    return set(patch.target_ids) | set(patch.new_node_ids) | set(patch.prior_states)


def undone_patch_ids(patches: Iterable[MemoryPatch]) -> set[str]:
    """Ids of patches undone by a rollback that is not itself undone."""
    return lattice.undone_patches((p.id, p.rollback_of) for p in patches if p.operation == "rollback" and p.rollback_of)


def retired_ids(patches: Iterable[MemoryPatch]) -> dict[str, str]:
    """Node id -> id of the live retiring patch that targets it.

    Raises ``UnknownPatchOperationError`` for an operation outside the closed set.
    """
    patches = list(patches)
    for patch in patches:
        operation_spec(patch.operation)
    undone = undone_patch_ids(patches)
    retired: dict[str, str] = {}
    for patch in sorted(patches, key=patch_order):
        if OPERATIONS[patch.operation].retiring and patch.id not in undone:
            for node_id in patch.target_ids:
                retired.setdefault(node_id, patch.id)
    return retired


def is_in_force(node: MemoryNode, at: datetime) -> bool:
    """Whether ``at`` lies in the node's effective window."""
    if parse_time(node.effective_from) > at:
        return False
    return node.effective_until is None or parse_time(node.effective_until) > at


def effective_view(
    nodes: Iterable[MemoryNode],
    patches: Iterable[MemoryPatch],
    session_id: str | None = None,
    at: datetime | None = None,
) -> list[MemoryNode]:
    """The memories that are current truth, sorted by id.

    Active nodes, plus ``active_session`` nodes of ``session_id``; never a node
    targeted by a live retiring patch, whatever its own status says; never one
    outside its effective window; and of nodes sharing a ``key``, only the most
    trusted, of those the one with the narrowest scope (session > project >
    workspace > global), ties going to the newest ``updated_at`` (``rank``).
    """
    moment = at or parse_time(now_iso())
    retired = retired_ids(patches)
    live = [
        node
        for node in nodes
        if node.id not in retired
        and (
            node.status == "active"
            or (node.status == "active_session" and session_id is not None and node.scope.session == session_id)
        )
        and is_in_force(node, moment)
    ]
    groups: dict[str, list[MemoryNode]] = {}
    view = []
    for node in live:
        if node.key is None:
            view.append(node)
        else:
            groups.setdefault(node.key, []).append(node)
    view.extend(max(group, key=_precedence) for group in groups.values())
    return sorted(view, key=lambda n: n.id)


def _precedence(node: MemoryNode) -> tuple[int, datetime, str]:
    """Larger wins: the smallest rank, then the newest update, then the larger id."""
    return (-rank(node), parse_time(node.updated_at), node.id)


PROMOTE_RULE = "promote"  # resolution_policy.rule of the update a promotion writes (cclg.ledger.promotion)


def is_promotion(patch: MemoryPatch) -> bool:
    """Whether ``patch`` is a promotion: an update marked ``PROMOTE_RULE``, whose target is promoted."""
    policy = patch.resolution_policy if isinstance(patch.resolution_policy, dict) else {}
    return patch.operation == "update" and policy.get("rule") == PROMOTE_RULE


def expected_statuses(nodes: dict[str, MemoryNode], patches: list[MemoryPatch]) -> dict[str, frozenset[str]]:
    """Replay the ledger: for each node the statuses its patches allow it to have now.

    Nodes no patch touched may have any initial status. A rollback written by
    another implementation (without ``rollback_of``) makes its nodes unverifiable
    (any status).
    """
    anything = frozenset(lattice.TRANSITIONS)
    expected = {node_id: lattice.INITIAL_STATUSES for node_id in nodes}
    by_id = {p.id: p for p in patches}
    for patch in sorted(patches, key=patch_order):
        spec = operation_spec(patch.operation)
        if patch.operation == "rollback":
            undone = by_id.get(patch.rollback_of or "")
            if undone is None:
                for node_id in touched_ids(patch):
                    expected[node_id] = anything
                continue
            for node_id, status in undone.prior_states.items():
                expected[node_id] = frozenset({status})
            for node_id in undone.new_node_ids:
                if node_id not in undone.prior_states:
                    expected[node_id] = frozenset({"discarded"})
            continue
        for node_id in patch.new_node_ids:
            expected[node_id] = lattice.INITIAL_STATUSES if patch.operation == "create" else LIVE_STATUSES
        if patch.operation == "create":  # a create with prior states flagged those nodes (record_conflict)
            for node_id in patch.prior_states:
                expected[node_id] = frozenset({"conflict_pending"})
        if spec.target_status is not None:
            moved = "promoted" if is_promotion(patch) else spec.target_status
            for node_id in patch.target_ids:
                expected[node_id] = frozenset({moved})
    return expected
