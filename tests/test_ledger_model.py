"""Model-based test of the patch ledger.

Hypothesis drives a real store through random sequences of adds, patches (any
operation, on any targets: legal ones and illegal ones) and rollbacks (allowed or
refused). Next to it runs a small model written from the ledger's contract: node
id -> status, and the list of patches with what each touched. The model never
calls the library's ledger functions; after every step the store must agree with
it, pass ``cclg doctor`` with no finding, and serve exactly the model's active
nodes as its effective view.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from cclg.core.ids import new_id
from cclg.core.records import Scope, Source, new_node
from cclg.core.store import Store
from cclg.errors import IllegalPatchError, UnknownPatchOperationError
from cclg.ledger.undo import rollback
from cclg.ledger.view import effective_view, retired_ids, undone_patch_ids
from cclg.ledger.writer import apply_patch, create_nodes
from cclg.maintenance import doctor

SESSION = "sess-model"

# The lattice as the contract states it: status -> statuses a patch may move it to.
LATTICE: dict[str, frozenset[str]] = {
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
INITIAL = ["active", "active_session", "pending", "pending_promotion", "conflict_pending"]


@dataclass(frozen=True)
class Op:
    target_status: str
    contents: str  # "none", "one" or "many" (two or more)
    min_targets: int = 1
    max_targets: int | None = None


OPS = {
    "update": Op("superseded", "one"),
    "supersede": Op("superseded", "one"),
    "refine": Op("superseded", "one"),
    "expand": Op("superseded", "one"),
    "narrow": Op("superseded", "one"),
    "merge": Op("superseded", "one", min_targets=2),
    "split": Op("superseded", "many", max_targets=1),
    "resolve_conflict": Op("superseded", "one"),
    "expire": Op("expired", "none"),
    "deprecate": Op("deprecated", "none"),
    "forget": Op("forgotten", "none"),
}
UNKNOWN_OPS = ["obliterate", "create_or_update"]


@dataclass
class ModelPatch:
    id: str
    operation: str
    targets: list[str]
    new: list[str]
    prior: dict[str, str]
    rollback_of: str | None = None

    @property
    def touched(self) -> set[str]:
        return {*self.targets, *self.new, *self.prior}


def snapshot(store: Store) -> dict[str, bytes]:
    files = {}
    for folder in ("nodes", "patches", "edges"):
        for path in sorted((store.root / folder).iterdir()):
            files[store.relative(path)] = path.read_bytes()
    files["audit"] = store.audit_path.read_bytes() if store.audit_path.exists() else b""
    return files


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="cclg-ledger-model-"))
        self.store, _ = Store.init(self.tmp / "store")
        # Skip fsyncs (durability is not under test here) to keep each step fast.
        self.store._batch_depth = 1
        self.status: dict[str, str] = {}
        self.patches: list[ModelPatch] = []
        self.counter = 0

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ the model

    def undone(self) -> set[str]:
        """A patch is undone when a rollback of it is live (not itself undone)."""
        rollbacks: dict[str, list[str]] = {}
        for patch in self.patches:
            if patch.rollback_of:
                rollbacks.setdefault(patch.rollback_of, []).append(patch.id)
        memo: dict[str, bool] = {}

        def is_undone(patch_id: str) -> bool:
            if patch_id not in memo:
                memo[patch_id] = any(not is_undone(r) for r in rollbacks.get(patch_id, []))
            return memo[patch_id]

        return {p.id for p in self.patches if is_undone(p.id)}

    def why_illegal(self, operation: str, targets: list[str], contents: list[str]) -> str | None:
        op = OPS[operation]
        if len(set(targets)) != len(targets):
            return "duplicate target"
        if len(targets) < op.min_targets or (op.max_targets is not None and len(targets) > op.max_targets):
            return "number of targets"
        if any(not c.strip() for c in contents):
            return "empty content"
        wanted = {"none": len(contents) == 0, "one": len(contents) == 1, "many": len(contents) >= 2}[op.contents]
        if not wanted:
            return "number of contents"
        for target in targets:
            if target not in self.status:
                return "unknown target"
            if op.target_status not in LATTICE[self.status[target]]:
                return "lattice"
        return None

    def redoes(self, later: ModelPatch, patch_id: str) -> bool:
        """Whether ``later`` is a rollback whose chain of rollback_of leads to ``patch_id``."""
        by_id = {p.id: p for p in self.patches}
        current: ModelPatch | None = later
        while current is not None and current.rollback_of:
            if current.rollback_of == patch_id:
                return True
            current = by_id.get(current.rollback_of)
        return False

    def why_rollback_refused(self, patch: ModelPatch) -> str | None:
        undone = self.undone()
        if patch.id in undone:
            return "already undone"
        index = self.patches.index(patch)
        position = {p.id: i for i, p in enumerate(self.patches)}
        for later in self.patches[index + 1 :]:
            if later.id in undone or self.redoes(later, patch.id):
                continue
            if later.rollback_of is not None and position[later.rollback_of] > index:
                continue  # undoes a patch made after this one: the pair cancels out
            if later.touched & patch.touched:
                return f"later live patch {later.operation} touched the same nodes"
        return None

    # ------------------------------------------------------------ rules

    @initialize(initials=st.lists(st.sampled_from(INITIAL), min_size=2, max_size=4), keyed=st.booleans())
    def start(self, initials: list[str], keyed: bool) -> None:
        """Begin with a few memories, so that patches have targets from the first step."""
        for initial in initials:
            self.add_node(initial, keyed)

    @rule(initial=st.sampled_from(INITIAL), keyed=st.booleans())
    def add(self, initial: str, keyed: bool) -> None:
        self.add_node(initial, keyed)

    def add_node(self, initial: str, keyed: bool) -> None:
        self.counter += 1
        scope = Scope(session=SESSION) if initial == "active_session" else Scope()
        node = new_node(
            f"fact number {self.counter}",
            status=initial,
            scope=scope,
            key=f"key{self.counter}" if keyed else None,
            source=Source(label="model"),
        )
        result = create_nodes(self.store, [node], reason="model add")
        self.status[node.id] = initial
        self.patches.append(ModelPatch(result.patch.id, "create", [], [node.id], {}))

    @precondition(lambda self: self.status)
    @rule(
        operation=st.sampled_from([*OPS, *UNKNOWN_OPS]),
        picks=st.lists(st.integers(0, 10_000), max_size=3),
        unknown_target=st.integers(0, 9),
        fitting_contents=st.booleans(),
        contents=st.lists(st.sampled_from(["a new fact", "another new fact", "  "]), max_size=3),
    )
    def any_patch(
        self, operation: str, picks: list[int], unknown_target: int, fitting_contents: bool, contents: list[str]
    ) -> None:
        """Any operation on any targets, legal or not; half the time with the right number of contents."""
        ids = sorted(self.status)
        targets = [ids[i % len(ids)] for i in picks]
        if unknown_target == 0:
            targets.append(new_id("mem"))
        if fitting_contents and operation in OPS:
            contents = [f"content {i}" for i in range({"none": 0, "one": 1, "many": 2}[OPS[operation].contents])]
        self.attempt(operation, targets, contents)

    @precondition(lambda self: self.status)
    @rule(operation=st.sampled_from(list(OPS)), picks=st.lists(st.integers(0, 10_000), min_size=3, max_size=3))
    def sensible_patch(self, operation: str, picks: list[int]) -> None:
        """An operation on targets the model thinks it accepts, with the right number of contents."""
        op = OPS[operation]
        candidates = sorted(n for n, s in self.status.items() if op.target_status in LATTICE[s])
        if not candidates:
            return
        wanted = op.min_targets + picks[1] % 2
        targets = sorted({candidates[i % len(candidates)] for i in picks[:wanted]})[: op.max_targets]
        n_contents = {"none": 0, "one": 1, "many": 2 + picks[0] % 2}[op.contents]
        self.attempt(operation, targets, [f"revised fact {i}" for i in range(n_contents)])

    @precondition(lambda self: self.status)
    @rule(operation=st.sampled_from(list(OPS)), pick=st.integers(0, 10_000), partner=st.integers(0, 10_000))
    def lattice_probe(self, operation: str, pick: int, partner: int) -> None:
        """An operation on a target whose status the model says it cannot move, otherwise well formed."""
        op = OPS[operation]
        candidates = sorted(n for n, s in self.status.items() if op.target_status not in LATTICE[s])
        if not candidates:
            return
        targets = [candidates[pick % len(candidates)]]
        others = sorted(set(self.status) - set(targets))
        if op.min_targets > 1 and others:
            targets.append(others[partner % len(others)])
            if partner % 2:
                targets.reverse()
        n_contents = {"none": 0, "one": 1, "many": 2}[op.contents]
        self.attempt(operation, targets, [f"probe {i}" for i in range(n_contents)])

    def attempt(self, operation: str, targets: list[str], contents: list[str]) -> None:
        before = snapshot(self.store)
        if operation not in OPS:
            with pytest.raises(UnknownPatchOperationError):
                apply_patch(self.store, operation, targets, reason="model", contents=contents)
            assert snapshot(self.store) == before
            return
        reason = self.why_illegal(operation, targets, contents)
        if reason is not None:
            with pytest.raises(IllegalPatchError):
                apply_patch(self.store, operation, targets, reason="model", contents=contents)
            assert snapshot(self.store) == before, reason
            return
        result = apply_patch(self.store, operation, targets, reason="model", contents=contents)
        new_ids = list(result.patch.new_node_ids)
        assert len(new_ids) == len(contents)
        assert not set(new_ids) & set(self.status)
        prior = {t: self.status[t] for t in targets}
        assert result.patch.prior_states == prior
        first = self.status[targets[0]]
        for target in targets:
            self.status[target] = OPS[operation].target_status
        for node_id in new_ids:
            self.status[node_id] = "active_session" if first == "active_session" else "active"
        self.patches.append(ModelPatch(result.patch.id, operation, list(targets), new_ids, prior))

    @precondition(lambda self: self.patches)
    @rule(pick=st.integers(0, 10_000))
    def undo(self, pick: int) -> None:
        """Roll back any patch, allowed or not."""
        self.roll_back(self.patches[pick % len(self.patches)])

    def roll_back(self, patch: ModelPatch) -> None:
        reason = self.why_rollback_refused(patch)
        before = snapshot(self.store)
        if reason is not None:
            with pytest.raises(IllegalPatchError):
                rollback(self.store, patch.id)
            assert snapshot(self.store) == before, reason
            return
        result = rollback(self.store, patch.id)
        restore = dict(patch.prior)
        discard = [n for n in patch.new if n not in restore]
        prior = {n: self.status[n] for n in [*restore, *discard]}
        assert result.patch.rollback_of == patch.id
        assert result.patch.new_node_ids == []
        assert result.patch.prior_states == prior
        self.status.update(restore)
        self.status.update(dict.fromkeys(discard, "discarded"))
        self.patches.append(ModelPatch(result.patch.id, "rollback", list(prior), [], prior, rollback_of=patch.id))

    @precondition(lambda self: self.patches)
    @rule(back=st.integers(0, 2))
    def undo_recent(self, back: int) -> None:
        """Undo one of the last patches: undo, redo and undo-again chains come from here."""
        self.roll_back(self.patches[max(len(self.patches) - 1 - back, 0)])

    # ------------------------------------------------------------ invariants

    @invariant()
    def store_agrees_with_model(self) -> None:
        nodes = self.store.load_nodes()
        patches = self.store.load_patches()
        assert {node_id: n.status for node_id, n in nodes.items()} == self.status
        assert [p.id for p in patches] == [p.id for p in self.patches]
        assert doctor.diagnose(self.store).findings == []
        active = {n for n, s in self.status.items() if s == "active"}
        overlays = {n for n, s in self.status.items() if s == "active_session"}
        assert {n.id for n in effective_view(nodes.values(), patches)} == active
        assert {n.id for n in effective_view(nodes.values(), patches, session_id=SESSION)} == active | overlays
        undone = self.undone()
        assert undone_patch_ids(patches) == undone
        live_targets = {t for p in self.patches if p.operation in OPS and p.id not in undone for t in p.targets}
        assert set(retired_ids(patches)) == live_targets


def test_ledger_agrees_with_its_model() -> None:
    run_state_machine_as_test(
        LedgerMachine,
        settings=settings(
            max_examples=30,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
