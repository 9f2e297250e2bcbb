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


# ---------------------------------------------------------------- many writers (cclg.sync)
#
# Stores that share their ledgers (``cclg sync``) hold the same set of patches in any order of
# arrival. What a node's status is, and which memories wait for a decision, is therefore read from
# the set alone: the order among patches is ``patch_order`` (created time, then id), never the order
# in which their files came.

# Statuses a retiring patch found its target in when it was the first to retire it.
_UNRETIRED = frozenset({"active", "active_session", "pending", "pending_promotion", "conflict_pending"})


class Conflict:
    """Patches written apart that the ledger cannot both honour: two that retired the same memory
    (``node`` is that memory), or a rollback of a patch another patch built on (``node`` is a memory the
    undone patch made). ``flagged`` are the memories that wait for a decision (``conflict_pending``)."""

    def __init__(self, kind: str, node: str, patches: list[str], flagged: list[str]) -> None:
        self.kind = kind  # "retired twice" or "rolled back under"
        self.node = node
        self.patches = patches
        self.flagged = flagged

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "node": self.node, "patches": self.patches, "flagged": self.flagged}


def concurrent_conflicts(patches: Iterable[MemoryPatch]) -> list[Conflict]:
    """The conflicts of a ledger written on several machines: a pure function of the set of patches.

    - Retired twice: two live retiring patches that each found the memory unretired (each was written
      without the other); their new memories are flagged.
    - Rolled back under: a live rollback of a patch whose new memory a live patch went on to retire;
      that patch's new memories and the memories the rollback restored are flagged.

    A flagged memory that a later live patch retired (``cclg resolve``) waits no more.
    """
    ordered = sorted(patches, key=patch_order)
    undone = undone_patch_ids(ordered)
    by_id = {p.id: p for p in ordered}
    fresh: dict[str, list[MemoryPatch]] = {}
    retiring_of: dict[str, list[MemoryPatch]] = {}
    for patch in ordered:
        if patch.id in undone or not OPERATIONS[patch.operation].retiring:
            continue
        for node_id in patch.target_ids:
            retiring_of.setdefault(node_id, []).append(patch)
            if patch.prior_states.get(node_id, "active") in _UNRETIRED:
                fresh.setdefault(node_id, []).append(patch)
    found = [
        Conflict("retired twice", node_id, [p.id for p in group], [n for p in group for n in p.new_node_ids])
        for node_id, group in fresh.items()
        if len(group) > 1
    ]
    for patch in ordered:
        base = by_id.get(patch.rollback_of or "")
        if patch.operation != "rollback" or patch.id in undone or base is None or base.id not in undone:
            continue
        for node_id in base.new_node_ids:
            built = [p for p in retiring_of.get(node_id, []) if p.id != base.id]
            if built:
                restored = [n for n in base.target_ids if n not in base.new_node_ids]
                flagged = [n for p in built for n in p.new_node_ids] + restored
                found.append(Conflict("rolled back under", node_id, [patch.id, *(p.id for p in built)], flagged))
    return found


class Settled:
    """What the set of patches says of one node: its status, when it last changed, its links."""

    def __init__(
        self, status: str, updated_at: str | None, superseded_by: list[str], contradicts: list[str], decided: bool
    ) -> None:
        self.status = status
        self.decided = decided  # whether a patch decided the status (else it is the node's own, as it was born)
        self.updated_at = updated_at  # None: the node's own
        self.superseded_by = superseded_by
        self.contradicts = contradicts


class Ledger:
    """The patches of a store, read once, answering for any node what the whole set says of it
    (``settle``), the same on every machine that holds the same set."""

    def __init__(self, patches: Iterable[MemoryPatch]) -> None:
        self.patches = sorted(patches, key=patch_order)
        self.undone = undone_patch_ids(self.patches)
        self.naming: dict[str, list[MemoryPatch]] = {}
        for patch in self.patches:
            for node_id in touched_ids(patch):
                self.naming.setdefault(node_id, []).append(patch)
        # Each patch's new memories and targets as sets: an import's patch names all its memories, and a
        # lookup in its list for each of them was quadratic.
        self._made = {patch.id: frozenset(patch.new_node_ids) for patch in self.patches}
        self._targets = {patch.id: frozenset(patch.target_ids) for patch in self.patches}
        self.flagged: set[str] = set()
        self.conflicts = concurrent_conflicts(self.patches)
        for conflict in self.conflicts:
            self.flagged.update(conflict.flagged)

    def made(self, patch: MemoryPatch, node_id: str) -> bool:
        """Whether ``patch`` (one of the ledger's) made the memory ``node_id``."""
        return node_id in self._made[patch.id]

    def targets(self, patch: MemoryPatch, node_id: str) -> bool:
        """Whether ``patch`` (one of the ledger's) targets the memory ``node_id``."""
        return node_id in self._targets[patch.id]

    def birth(self, node: MemoryNode) -> str:
        """The status ``node`` had before any patch changed it: what the first patch that recorded it found;
        else live for a memory a patch made as a new version of others; else its own."""
        for patch in self.naming.get(node.id, ()):
            if node.id in patch.prior_states and not self.made(patch, node.id):
                return patch.prior_states[node.id]
        for patch in self.naming.get(node.id, ()):  # a new version is born live (its own file may say disputed)
            if self.made(patch, node.id) and patch.operation != "create":
                return "active_session" if node.scope.session else "active"
        return node.status

    def settle(self, node: MemoryNode) -> Settled:
        """The node as the set of patches has it: a live retiring patch decides its status (the last such),
        then a live rollback of the patch that made it (discarded), then a live conflict flag, then the
        status it was born with; a flagged memory still live waits for a decision (``conflict_pending``)."""
        naming = [p for p in self.naming.get(node.id, ()) if p.id not in self.undone]
        status = self.birth(node)
        retirers = [p for p in naming if OPERATIONS[p.operation].retiring and self.targets(p, node.id)]
        made_by_undone = any(self.made(p, node.id) and p.id in self.undone for p in self.naming.get(node.id, ()))
        flags = [p for p in naming if p.operation == "create" and node.id in p.prior_states]
        if retirers:
            last = retirers[-1]
            status = "promoted" if is_promotion(last) else str(OPERATIONS[last.operation].target_status)
        elif made_by_undone:
            status = "discarded"
        elif flags:
            status = "conflict_pending"
        overlaid = status in LIVE_STATUSES and node.id in self.flagged
        if overlaid:
            status = "conflict_pending"
        listing = [p for p in naming if node.id in p.prior_states and not self.made(p, node.id)]
        made = {n for p in self.naming.get(node.id, ()) if self.targets(p, node.id) for n in p.new_node_ids}
        links = [n for n in node.relations.get("superseded_by", []) if n not in made]
        links += [n for p in retirers for n in p.new_node_ids if n not in links]
        flag_made = {
            n
            for p in self.naming.get(node.id, ())
            if p.operation == "create" and node.id in p.prior_states
            for n in p.new_node_ids
        }
        against = [n for n in node.relations.get("contradicts", []) if n not in flag_made]
        against += [n for p in flags for n in p.new_node_ids if n not in against]
        decided = overlaid or bool(retirers or made_by_undone or flags or listing)
        return Settled(status, listing[-1].created_at if listing else None, links, against, decided)
