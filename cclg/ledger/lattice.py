"""The status lattice and what each patch operation does, written down once.

``TRANSITIONS`` is the whole lattice: for each node status, the statuses a patch
may move it to. Every other check is derived from it: an operation accepts a
target exactly when the target's status may move to the status that operation
gives its targets. ``discarded`` and ``forgotten`` have no way out: only a
rollback of the patch that put a node there brings it back.

``OPERATIONS`` says, for each of the thirteen operations of the contract, what it does
to its targets, how many new nodes it writes, and which edge and relation link a
new node to its targets. An operation outside the closed set is an error
(``UnknownPatchOperationError``), never a silent no-op: a reader that guessed
"unknown means harmless" could bring a retired fact back to life.
"""

from __future__ import annotations

from collections.abc import Iterable

from cclg import format as fmt
from cclg.core.records import Record
from cclg.errors import UnknownPatchOperationError

TRANSITIONS: dict[str, frozenset[str]] = {
    "active": frozenset({"superseded", "deprecated", "expired", "forgotten", "conflict_pending"}),
    "active_session": frozenset({"superseded", "expired", "forgotten", "discarded", "promoted"}),
    "pending": frozenset({"active", "superseded", "deprecated", "expired", "forgotten", "discarded"}),
    "pending_promotion": frozenset({"promoted", "discarded", "forgotten"}),
    "conflict_pending": frozenset({"active", "superseded", "deprecated", "expired", "forgotten"}),
    "superseded": frozenset({"forgotten"}),
    "deprecated": frozenset({"forgotten"}),
    "expired": frozenset({"forgotten"}),
    "promoted": frozenset({"forgotten"}),
    "discarded": frozenset(),
    "forgotten": frozenset(),
}

# Statuses a node may have without any patch having touched it.
INITIAL_STATUSES = frozenset({"active", "active_session", "pending", "pending_promotion", "conflict_pending"})
# Statuses a node may be read as current truth in.
LIVE_STATUSES = frozenset({"active", "active_session"})


class OperationSpec(Record):
    """What one patch operation does."""

    def __init__(
        self,
        target_status: str | None,
        new_nodes: str,
        edge: str | None = None,
        relation: str | None = None,
        min_targets: int = 1,
        max_targets: int | None = None,
    ) -> None:
        self.target_status = target_status  # where targets go; None: targets keep their status
        self.new_nodes = new_nodes  # "none", "one" or "many" (two or more)
        self.edge = edge  # edge kind from each new node to each target
        self.relation = relation  # relation kind a new node gets besides ``supersedes``
        self.min_targets = min_targets
        self.max_targets = max_targets

    @property
    def retiring(self) -> bool:
        return self.target_status is not None


OPERATIONS: dict[str, OperationSpec] = {
    "create": OperationSpec(None, "one", min_targets=0, max_targets=0),
    "update": OperationSpec("superseded", "one", edge="supersedes"),
    "supersede": OperationSpec("superseded", "one", edge="supersedes"),
    "refine": OperationSpec("superseded", "one", edge="refines", relation="refines"),
    "expand": OperationSpec("superseded", "one", edge="expands", relation="expands"),
    "narrow": OperationSpec("superseded", "one", edge="narrows", relation="narrows"),
    "merge": OperationSpec("superseded", "one", edge="derived_from", relation="derived_from", min_targets=2),
    "split": OperationSpec("superseded", "many", edge="derived_from", relation="derived_from", max_targets=1),
    "resolve_conflict": OperationSpec("superseded", "one", edge="resolves"),
    "expire": OperationSpec("expired", "none"),
    "deprecate": OperationSpec("deprecated", "none"),
    "forget": OperationSpec("forgotten", "none"),
    "rollback": OperationSpec(None, "none"),
}


def operation_spec(operation: str) -> OperationSpec:
    """What ``operation`` does; ``UnknownPatchOperationError`` outside the closed set."""
    try:
        return OPERATIONS[operation]
    except KeyError:
        raise UnknownPatchOperationError(
            f"unknown patch operation {operation!r}: the format defines only {', '.join(fmt.PATCH_OPERATIONS)}"
        ) from None


def accepting_statuses(operation: str) -> frozenset[str]:
    """The statuses a target of ``operation`` may be in (derived from the lattice)."""
    target_status = operation_spec(operation).target_status
    if target_status is None:
        return frozenset(TRANSITIONS)
    return frozenset(status for status, moves in TRANSITIONS.items() if target_status in moves)


def undone_patches(rollbacks: Iterable[tuple[str, str]]) -> set[str]:
    """From (rollback id, id of the patch it undoes) pairs: the patches that stand undone.

    A patch is undone when some rollback of it is not itself undone, so undoing a
    rollback redoes the patch, and so on down the chain.
    """
    by_undone: dict[str, list[str]] = {}
    for rollback_id, undone_id in rollbacks:
        by_undone.setdefault(undone_id, []).append(rollback_id)
    memo: dict[str, bool] = {}

    def is_undone(patch_id: str, depth: int = 0) -> bool:
        if patch_id not in memo:
            memo[patch_id] = depth < 1000 and any(not is_undone(r, depth + 1) for r in by_undone.get(patch_id, []))
        return memo[patch_id]

    return {patch_id for patch_id in by_undone if is_undone(patch_id)}
