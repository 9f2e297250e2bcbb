"""The patch ledger: every operation, every refusal, rollback and the effective view.

The expectations here are written from the ledger's contract, not read back from
``cclg.ledger.lattice``: each operation's edge and relation, which statuses it may move,
what a rollback restores. After every scenario that should succeed the store must
pass ``cclg doctor`` with no finding.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cclg import format as fmt
from cclg.api import add_memory
from cclg.core.files import read_jsonl
from cclg.core.ids import new_id, now_iso
from cclg.core.records import MemoryNode, MemoryPatch, Scope, Source, new_node
from cclg.core.store import Store
from cclg.errors import IllegalPatchError, NotFoundError, UnknownPatchOperationError, UsageError
from cclg.ledger.undo import rollback
from cclg.ledger.view import effective_view, retired_ids, undone_patch_ids
from cclg.ledger.writer import apply_patch, create_nodes
from cclg.maintenance import doctor

LEDGER_CHECK = "node status agrees with the patch ledger"

# operation -> (edge from each new node to each target, relation besides ``supersedes``)
REPLACING: dict[str, tuple[str, str | None]] = {
    "update": ("supersedes", None),
    "supersede": ("supersedes", None),
    "refine": ("refines", "refines"),
    "expand": ("expands", "expands"),
    "narrow": ("narrows", "narrows"),
    "merge": ("derived_from", "derived_from"),
    "split": ("derived_from", "derived_from"),
    "resolve_conflict": ("resolves", None),
}
# operation -> the status it gives its targets (no new node, no edge)
STATUS_ONLY = {"expire": "expired", "deprecate": "deprecated", "forget": "forgotten"}
RETIRING = [*REPLACING, *STATUS_ONLY]
TARGET_STATUS = {**dict.fromkeys(REPLACING, "superseded"), **STATUS_ONLY}

# The lattice as the contract states it: status -> statuses a patch may move it to.
LATTICE: dict[str, set[str]] = {
    "active": {"superseded", "deprecated", "expired", "forgotten", "conflict_pending"},
    "active_session": {"superseded", "expired", "forgotten", "discarded", "promoted"},
    "pending": {"active", "superseded", "deprecated", "expired", "forgotten", "discarded"},
    "pending_promotion": {"promoted", "discarded", "forgotten"},
    "conflict_pending": {"active", "superseded", "deprecated", "expired", "forgotten"},
    "superseded": {"forgotten"},
    "deprecated": {"forgotten"},
    "expired": {"forgotten"},
    "promoted": {"forgotten"},
    "discarded": set(),
    "forgotten": set(),
}
# Statuses a test can reach through the ledger (nothing moves a node to ``promoted``).
REACHABLE = [status for status in LATTICE if status != "promoted"]


# ---------------------------------------------------------------- helpers


def add(store: Store, content: str, **fields: Any) -> str:
    """One active memory added the way ``cclg add`` does it."""
    return add_memory(store, content, source="test", **fields).new_nodes[0].id


def add_with_status(store: Store, content: str, status: str, **fields: Any) -> str:
    """A memory created directly in one of the initial statuses."""
    if status == "active_session":
        fields.setdefault("scope", Scope(session="sess-1"))
    node = new_node(content, status=status, source=Source(label="test"), **fields)
    create_nodes(store, [node], reason="test")
    return node.id


def node_in(store: Store, status: str, content: str = "a fact") -> str:
    """A node brought to ``status`` through the ledger (never by editing its file)."""
    if status in ("active", "active_session", "pending", "pending_promotion", "conflict_pending"):
        return add_with_status(store, content, status)
    node_id = add(store, content)
    if status == "superseded":
        apply_patch(store, "update", [node_id], reason="newer", contents=[f"{content}, corrected"])
    elif status in ("deprecated", "expired", "forgotten"):
        operation = {"deprecated": "deprecate", "expired": "expire", "forgotten": "forget"}[status]
        apply_patch(store, operation, [node_id], reason="retire")
    elif status == "discarded":
        create = next(p for p in store.load_patches() if node_id in p.new_node_ids)
        rollback(store, create.id)
    else:  # pragma: no cover - a status the helper does not know
        raise AssertionError(status)
    assert store.read_node(node_id).status == status
    return node_id


def status_of(store: Store, node_id: str) -> str:
    return store.read_node(node_id).status


def disk_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def disk_patch(store: Store, patch_id: str) -> dict[str, Any]:
    return disk_json(store.root / "patches" / f"{patch_id}.json")


def disk_edges(store: Store) -> list[dict[str, Any]]:
    return [disk_json(p) for p in sorted((store.root / "edges").glob("*.json"))]


def edge_tuples(store: Store) -> list[tuple[str, str, str, str]]:
    return sorted((e["from"], e["to"], e["type"], e["source_patch_id"]) for e in disk_edges(store))


def audit(store: Store) -> list[dict[str, Any]]:
    return read_jsonl(store.audit_path).records


def snapshot(store: Store) -> dict[str, bytes]:
    """Every file of nodes/, patches/, edges/ (temp files too) and the audit log."""
    files = {}
    for folder in ("nodes", "patches", "edges"):
        for path in sorted((store.root / folder).iterdir()):
            files[store.relative(path)] = path.read_bytes()
    files["audit"] = store.audit_path.read_bytes() if store.audit_path.exists() else b""
    return files


def view_ids(store: Store, session_id: str | None = None) -> set[str]:
    return {n.id for n in effective_view(store.load_nodes().values(), store.load_patches(), session_id=session_id)}


def assert_healthy(store: Store) -> None:
    assert doctor.diagnose(store).findings == []


def relations(**kinds: list[str]) -> dict[str, list[str]]:
    expected: dict[str, list[str]] = {kind: [] for kind in fmt.RELATION_KINDS}
    expected.update(kinds)
    return expected


def edit_status(store: Store, node_id: str, status: str) -> None:
    """Rewrite a node file by hand, the way a user with an editor would."""
    path = store.node_path(node_id)
    data = disk_json(path)
    data["status"] = status
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def refused(store: Store, error: type[Exception], operation: str, targets: list[str], **kwargs: Any) -> None:
    """``operation`` raises ``error`` and leaves nodes/, patches/, edges/ and the audit log unchanged."""
    before = snapshot(store)
    kwargs.setdefault("reason", "try it")
    with pytest.raises(error):
        apply_patch(store, operation, targets, **kwargs)
    assert snapshot(store) == before


# ---------------------------------------------------------------- create


def test_create_writes_one_node_and_retires_nothing(store: Store) -> None:
    other = add(store, "an older fact")
    result = add_memory(store, "the build uses make", source="test", key="build")
    node_id = result.new_nodes[0].id
    patch = disk_patch(store, result.patch.id)
    assert patch["operation"] == "create"
    assert patch["target_ids"] == []
    assert patch["new_node_ids"] == [node_id]
    assert patch["prior_states"] == {}
    assert patch["new_content"] == "the build uses make"
    assert status_of(store, node_id) == "active"
    assert status_of(store, other) == "active"
    assert disk_edges(store) == []
    records = [r for r in audit(store) if r.get("patch_id") == result.patch.id]
    assert [r["event"] for r in records] == ["node_written", "patch_written"]
    assert records[0]["node_id"] == node_id
    assert records[1]["operation"] == "create"
    assert records[1]["new_node_ids"] == [node_id]
    assert view_ids(store) == {node_id, other}
    assert retired_ids(store.load_patches()) == {}
    assert_healthy(store)


def test_create_of_a_batch_is_one_patch(store: Store) -> None:
    nodes = [new_node(f"fact {i}", source=Source(label="test")) for i in range(3)]
    result = create_nodes(store, nodes, reason="import", new_content="three facts")
    ids = [n.id for n in nodes]
    assert [p.id for p in store.load_patches()] == [result.patch.id]
    assert disk_patch(store, result.patch.id)["new_node_ids"] == ids
    written = [r["node_id"] for r in audit(store) if r["event"] == "node_written"]
    assert written == ids
    assert view_ids(store) == set(ids)
    assert_healthy(store)


# ---------------------------------------------------------------- operations that write new nodes

REPLACING_CASES = [
    ("update", 1, 1),
    ("update", 2, 1),
    ("supersede", 1, 1),
    ("supersede", 3, 1),
    ("refine", 1, 1),
    ("expand", 1, 1),
    ("expand", 2, 1),
    ("narrow", 1, 1),
    ("merge", 2, 1),
    ("merge", 3, 1),
    ("split", 1, 2),
    ("split", 1, 3),
    ("resolve_conflict", 1, 1),
    ("resolve_conflict", 2, 1),
]


@pytest.mark.parametrize(("operation", "n_targets", "n_contents"), REPLACING_CASES)
def test_replacing_operation(store: Store, operation: str, n_targets: int, n_contents: int) -> None:
    edge_kind, relation = REPLACING[operation]
    first_scope = Scope(project="proj-a")
    targets = [add(store, "the first fact", type="project_decision", key="deploy", scope=first_scope, tags=["x"])]
    targets += [
        add(store, f"another fact {i}", type="constraint", key=f"other{i}", scope=Scope(workspace="ws"), tags=["y"])
        for i in range(1, n_targets)
    ]
    bystander = add(store, "an unrelated fact")
    contents = [f"new content {i}" for i in range(n_contents)]
    audit_before = len(audit(store))

    result = apply_patch(store, operation, targets, reason="because", contents=contents)

    new_ids = [n.id for n in result.new_nodes]
    assert len(new_ids) == n_contents
    patch = disk_patch(store, result.patch.id)
    assert patch["operation"] == operation
    assert patch["target_ids"] == targets
    assert patch["new_node_ids"] == new_ids
    assert patch["prior_states"] == dict.fromkeys(targets, "active")
    # Every target is retired and points at every new node.
    for target in targets:
        node = store.read_node(target)
        assert node.status == "superseded"
        assert node.relations == relations(superseded_by=new_ids)
    # New nodes: live, inheriting type, scope and key from the first target.
    for index, node_id in enumerate(new_ids):
        node = store.read_node(node_id)
        assert node.status == "active"
        assert node.content == contents[index]
        assert node.type == "project_decision"
        assert node.scope == first_scope
        assert node.key == (f"deploy.{index + 1}" if operation == "split" else "deploy")
        expected = {"supersedes": targets}
        if relation:
            expected[relation] = targets
        assert node.relations == relations(**expected)
    # One edge from each new node to each target, of the operation's kind.
    assert edge_tuples(store) == sorted((n, t, edge_kind, result.patch.id) for n in new_ids for t in targets)
    # Audit: the new nodes, then the patch, then the edges.
    records = audit(store)[audit_before:]
    events = [(str(r["event"]), str(r.get("node_id") or r.get("edge_id") or r.get("patch_id"))) for r in records]
    edge_ids = sorted(e["id"] for e in disk_edges(store))
    node_events = [i for i, (event, _) in enumerate(events) if event == "node_written"]
    patch_events = [i for i, (event, _) in enumerate(events) if event == "patch_written"]
    edge_events = [i for i, (event, _) in enumerate(events) if event == "edge_written"]
    assert [events[i][1] for i in node_events] == new_ids
    assert sorted(events[i][1] for i in edge_events) == edge_ids
    assert len(patch_events) == 1
    assert max(node_events) < patch_events[0] < min(edge_events)
    written = records[patch_events[0]]
    assert (written["patch_id"], written["operation"]) == (result.patch.id, operation)
    assert (written["target_ids"], written["new_node_ids"]) == (targets, new_ids)
    assert all(r["patch_id"] == result.patch.id for r in records)

    assert view_ids(store) == {*new_ids, bystander}
    assert set(retired_ids(store.load_patches())) == set(targets)
    assert status_of(store, bystander) == "active"
    assert_healthy(store)


def test_split_of_a_node_without_key_gives_parts_without_key(store: Store) -> None:
    target = add(store, "run tests with pytest and lint with ruff")
    result = apply_patch(store, "split", [target], reason="two facts", contents=["tests: pytest", "lint: ruff"])
    assert [n.key for n in result.new_nodes] == [None, None]
    assert_healthy(store)


@pytest.mark.parametrize("operation", [*REPLACING, *STATUS_ONLY])
def test_new_records_are_named_after_the_patch_and_targets_retired_last(
    store: Store, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    targets = [add(store, "fact one")]
    if operation == "merge":
        targets.append(add(store, "fact two"))
    contents = {"split": ["part one", "part two"]}.get(operation, [] if operation in STATUS_ONLY else ["new"])
    calls: list[tuple[str, str, str]] = []
    write_node, write_patch = store.write_node, store.write_patch
    stage_file, publish_file = store.stage_file, store.publish_file

    def spy_node(node: MemoryNode, *, new: bool = False) -> None:
        calls.append(("new node" if new else "node", node.id, node.status))
        write_node(node, new=new)

    def spy_patch(patch: MemoryPatch) -> None:
        calls.append(("patch", patch.id, ""))
        write_patch(patch)

    def spy_stage(path: Path, data: bytes, patch_id: str) -> Path:
        calls.append((f"stage {path.parent.name}", path.stem, patch_id))
        return stage_file(path, data, patch_id)

    def spy_publish(staged: Path, path: Path) -> None:
        calls.append((f"name {path.parent.name}", path.stem, ""))
        publish_file(staged, path)

    monkeypatch.setattr(store, "write_node", spy_node)
    monkeypatch.setattr(store, "write_patch", spy_patch)
    monkeypatch.setattr(store, "stage_file", spy_stage)
    monkeypatch.setattr(store, "publish_file", spy_publish)
    result = apply_patch(store, operation, targets, reason="order", contents=contents)

    kinds = [kind for kind, _, _ in calls]
    n_new = len(result.new_nodes)
    n_edges = len(disk_edges(store))
    # New nodes and edges staged, the patch file (the commit point), the staged files named, the
    # targets retired: nothing the patch makes shows before the patch, and nothing is lost before it.
    staged = ["stage nodes"] * n_new + ["stage edges"] * n_edges
    named = ["name nodes"] * n_new + ["name edges"] * n_edges
    assert kinds == [*staged, "patch", *named] + ["node"] * len(targets)
    assert {patch_id for kind, _, patch_id in calls if kind.startswith("stage")} <= {result.patch.id}
    assert [(node_id, status) for kind, node_id, status in calls if kind == "node"] == [
        (t, TARGET_STATUS[operation]) for t in targets
    ]
    assert_healthy(store)


# ---------------------------------------------------------------- operations that only move statuses


@pytest.mark.parametrize("n_targets", [1, 2])
@pytest.mark.parametrize("operation", list(STATUS_ONLY))
def test_status_only_operation(store: Store, operation: str, n_targets: int) -> None:
    targets = [add(store, f"fact {i}", key=f"k{i}") for i in range(n_targets)]
    bystander = add(store, "unrelated")
    audit_before = len(audit(store))
    result = apply_patch(store, operation, targets, reason="no longer true")
    assert result.new_nodes == []
    patch = disk_patch(store, result.patch.id)
    assert patch["operation"] == operation
    assert patch["target_ids"] == targets
    assert patch["new_node_ids"] == []
    assert patch["new_content"] is None
    assert patch["prior_states"] == dict.fromkeys(targets, "active")
    for target in targets:
        node = store.read_node(target)
        assert node.status == STATUS_ONLY[operation]
        assert node.relations == relations()
    assert disk_edges(store) == []
    records = audit(store)[audit_before:]
    assert [r["event"] for r in records if r["event"] in ("node_written", "edge_written")] == []
    assert [(r["event"], r["patch_id"], r["operation"]) for r in records if r["event"] == "patch_written"] == [
        ("patch_written", result.patch.id, operation)
    ]
    assert view_ids(store) == {bystander}
    assert_healthy(store)


@pytest.mark.parametrize(
    ("start", "operation"),
    [
        ("pending", "expire"),
        ("pending", "update"),
        ("conflict_pending", "resolve_conflict"),
        ("conflict_pending", "deprecate"),
        ("active_session", "supersede"),
        ("active_session", "forget"),
        ("pending_promotion", "forget"),
        ("superseded", "forget"),
        ("expired", "forget"),
        ("deprecated", "forget"),
    ],
)
def test_prior_states_record_the_status_before(store: Store, start: str, operation: str) -> None:
    target = node_in(store, start)
    contents = [] if operation in STATUS_ONLY else ["the new version"]
    result = apply_patch(store, operation, [target], reason="move", contents=contents)
    assert disk_patch(store, result.patch.id)["prior_states"] == {target: start}
    assert status_of(store, target) == TARGET_STATUS[operation]
    assert target not in view_ids(store, session_id="sess-1")
    assert_healthy(store)


def test_active_session_target_gives_a_session_overlay(store: Store) -> None:
    target = node_in(store, "active_session")
    result = apply_patch(store, "update", [target], reason="fix", contents=["corrected"])
    (new,) = result.new_nodes
    assert store.read_node(new.id).scope == Scope(session="sess-1")
    assert view_ids(store, session_id="sess-1") == {new.id}
    assert view_ids(store) == set()
    assert_healthy(store)


# ---------------------------------------------------------------- the lattice


@pytest.mark.parametrize("operation", RETIRING)
@pytest.mark.parametrize("start", REACHABLE)
def test_each_operation_moves_exactly_the_statuses_the_lattice_allows(store: Store, start: str, operation: str) -> None:
    target = node_in(store, start)
    targets = [target, add(store, "a second fact")] if operation == "merge" else [target]
    contents = {"split": ["one part", "another part"]}.get(operation, [] if operation in STATUS_ONLY else ["new"])
    if TARGET_STATUS[operation] in LATTICE[start]:
        apply_patch(store, operation, targets, reason="allowed", contents=contents)
        assert status_of(store, target) == TARGET_STATUS[operation]
    else:
        refused(store, IllegalPatchError, operation, targets, contents=contents)
        assert status_of(store, target) == start
    assert_healthy(store)


@pytest.mark.parametrize("terminal", ["forgotten", "discarded"])
def test_terminal_statuses_are_left_only_by_rollback(store: Store, terminal: str) -> None:
    target = node_in(store, terminal)
    for operation in RETIRING:
        targets = [target, add(store, f"partner for {operation}")] if operation == "merge" else [target]
        contents = {"split": ["a", "b"]}.get(operation, [] if operation in STATUS_ONLY else ["new"])
        refused(store, IllegalPatchError, operation, targets, contents=contents)
    # The patch that made it terminal (forget; for discarded, the undo of its create) can be rolled back.
    last = next(p for p in reversed(store.load_patches()) if target in p.target_ids)
    assert last.operation == ("forget" if terminal == "forgotten" else "rollback")
    rollback(store, last.id)
    assert status_of(store, target) == "active"
    assert target in view_ids(store)
    assert_healthy(store)


# ---------------------------------------------------------------- illegal patches change nothing


def test_unknown_target_is_refused(store: Store) -> None:
    known = add(store, "a fact")
    missing = new_id("mem")
    refused(store, IllegalPatchError, "update", [missing], contents=["x"])
    refused(store, IllegalPatchError, "merge", [known, missing], contents=["x"])
    refused(store, IllegalPatchError, "expire", [known, missing])
    assert status_of(store, known) == "active"
    assert_healthy(store)


@pytest.mark.parametrize(
    ("legal", "illegal", "operation"),
    [
        ("active", "superseded", "merge"),
        ("active", "forgotten", "expire"),
        ("active", "discarded", "update"),
        ("active", "pending_promotion", "deprecate"),
    ],
)
def test_one_illegal_target_refuses_the_whole_patch(store: Store, legal: str, illegal: str, operation: str) -> None:
    good = node_in(store, legal)
    bad = node_in(store, illegal, "another fact")
    contents = [] if operation in STATUS_ONLY else ["merged"]
    refused(store, IllegalPatchError, operation, [good, bad], contents=contents)
    refused(store, IllegalPatchError, operation, [bad, good], contents=contents)
    assert (status_of(store, good), status_of(store, bad)) == (legal, illegal)
    assert_healthy(store)


@pytest.mark.parametrize("operation", list(REPLACING))
@pytest.mark.parametrize("contents", [None, [], ["   "], ["fine", "\n"]])
def test_missing_or_empty_content_is_refused(store: Store, operation: str, contents: list[str] | None) -> None:
    targets = [add(store, "one"), add(store, "two")] if operation == "merge" else [add(store, "one")]
    if operation == "split" and contents:
        contents = [*contents, "enough parts"]
    refused(store, IllegalPatchError, operation, targets, contents=contents)
    assert_healthy(store)


@pytest.mark.parametrize("operation", list(STATUS_ONLY))
def test_content_given_to_a_status_only_operation_is_refused(store: Store, operation: str) -> None:
    target = add(store, "a fact")
    refused(store, IllegalPatchError, operation, [target], contents=["why would this have content"])
    assert_healthy(store)


@pytest.mark.parametrize(
    ("operation", "n_distinct", "contents"),
    [
        ("update", 1, ["x"]),
        ("merge", 2, ["x"]),
        ("expire", 1, []),
        ("forget", 2, []),
        ("split", 1, ["a", "b"]),
    ],
)
def test_duplicate_targets_are_refused(store: Store, operation: str, n_distinct: int, contents: list[str]) -> None:
    targets = [add(store, f"fact {i}") for i in range(n_distinct)]
    refused(store, IllegalPatchError, operation, [*targets, targets[0]], contents=contents)
    assert_healthy(store)


@pytest.mark.parametrize(
    ("operation", "n_targets", "n_contents"),
    [
        ("merge", 1, 1),
        ("merge", 2, 2),
        ("merge", 0, 1),
        ("split", 2, 2),
        ("split", 1, 1),
        ("split", 0, 2),
        ("update", 0, 1),
        ("update", 1, 2),
        ("supersede", 1, 2),
        ("refine", 1, 0),
        ("resolve_conflict", 1, 2),
        ("expire", 0, 0),
        ("forget", 0, 0),
    ],
)
def test_wrong_number_of_targets_or_contents_is_refused(
    store: Store, operation: str, n_targets: int, n_contents: int
) -> None:
    targets = [add(store, f"fact {i}") for i in range(n_targets)]
    refused(store, IllegalPatchError, operation, targets, contents=[f"content {i}" for i in range(n_contents)])
    assert_healthy(store)


@pytest.mark.parametrize("operation", ["obliterate", "Update", "", "delete"])
def test_unknown_operation_is_an_error(store: Store, operation: str) -> None:
    target = add(store, "a fact")
    refused(store, UnknownPatchOperationError, operation, [target], contents=["x"])
    refused(store, UnknownPatchOperationError, operation, [target])
    assert status_of(store, target) == "active"
    assert_healthy(store)


@pytest.mark.parametrize("operation", ["create", "rollback"])
def test_create_and_rollback_are_not_applied_as_patches(store: Store, operation: str) -> None:
    target = add(store, "a fact")
    refused(store, UsageError, operation, [target], contents=["x"])
    assert_healthy(store)


def test_unknown_operation_in_the_ledger_is_never_ignored() -> None:
    node = new_node("a fact", source=Source(label="test"))
    stamp = now_iso()
    patch = MemoryPatch(
        id=new_id("patch"),
        operation="obliterate",
        target_ids=[node.id],
        new_node_ids=[],
        reason="?",
        new_content=None,
        source=Source(label="test"),
        confidence=1.0,
        resolution_policy={},
        created_at=stamp,
        applied_at=stamp,
    )
    with pytest.raises(UnknownPatchOperationError):
        effective_view([node], [patch])


# ---------------------------------------------------------------- rollback


def rollback_checked(store: Store, patch_id: str) -> MemoryPatch:
    """Roll back and check the rollback patch itself: rollback_of, no new node, no edge, audited."""
    edges_before = edge_tuples(store)
    result = rollback(store, patch_id)
    patch = disk_patch(store, result.patch.id)
    assert patch["operation"] == "rollback"
    assert patch["rollback_of"] == patch_id
    assert patch["new_node_ids"] == []
    assert edge_tuples(store) == edges_before
    records = [r for r in audit(store) if r.get("patch_id") == result.patch.id]
    assert [r["event"] for r in records if r["event"] == "patch_written"] == ["patch_written"]
    changed = {r["node_id"]: r["status"] for r in records if r["event"] == "node_status_changed"}
    assert changed == {node_id: status_of(store, node_id) for node_id in patch["target_ids"]}
    assert result.patch.id not in retired_ids(store.load_patches()).values()
    return result.patch


@pytest.mark.parametrize(("operation", "n_targets", "n_contents"), REPLACING_CASES)
def test_rollback_of_a_replacing_operation(store: Store, operation: str, n_targets: int, n_contents: int) -> None:
    targets = [add(store, f"fact {i}") for i in range(n_targets)]
    done = apply_patch(store, operation, targets, reason="do", contents=[f"c{i}" for i in range(n_contents)])
    new_ids = [n.id for n in done.new_nodes]
    undo = rollback_checked(store, done.patch.id)
    assert undo.prior_states == {**dict.fromkeys(targets, "superseded"), **dict.fromkeys(new_ids, "active")}
    assert {t: status_of(store, t) for t in targets} == dict.fromkeys(targets, "active")
    assert {n: status_of(store, n) for n in new_ids} == dict.fromkeys(new_ids, "discarded")
    for target in targets:
        assert store.read_node(target).relations["superseded_by"] == []
    assert undone_patch_ids(store.load_patches()) == {done.patch.id}
    assert view_ids(store) == set(targets)
    assert_healthy(store)


@pytest.mark.parametrize(("start", "operation"), [(s, o) for o in STATUS_ONLY for s in ("active", "pending")])
def test_rollback_of_a_status_only_operation_restores_the_prior_status(
    store: Store, start: str, operation: str
) -> None:
    target = node_in(store, start)
    done = apply_patch(store, operation, [target], reason="do")
    undo = rollback_checked(store, done.patch.id)
    assert undo.prior_states == {target: STATUS_ONLY[operation]}
    assert status_of(store, target) == start
    assert (target in view_ids(store)) == (start == "active")
    assert_healthy(store)


def test_rollback_restores_a_non_active_prior_state(store: Store) -> None:
    old = add(store, "v1")
    apply_patch(store, "update", [old], reason="v2", contents=["v2"])
    forget = apply_patch(store, "forget", [old], reason="drop history")
    rollback_checked(store, forget.patch.id)
    assert status_of(store, old) == "superseded"
    assert_healthy(store)


def test_rollback_of_create_discards_the_new_nodes(store: Store) -> None:
    nodes = [new_node(f"fact {i}", source=Source(label="test")) for i in range(2)]
    created = create_nodes(store, nodes, reason="import", new_content="two")
    undo = rollback_checked(store, created.patch.id)
    assert undo.prior_states == {n.id: "active" for n in nodes}
    assert [status_of(store, n.id) for n in nodes] == ["discarded", "discarded"]
    assert view_ids(store) == set()
    assert_healthy(store)


def test_rollback_of_a_rollback_redoes_the_patch(store: Store) -> None:
    old = add(store, "port 8080", key="port")
    done = apply_patch(store, "supersede", [old], reason="moved", contents=["port 9090"])
    (new,) = done.new_nodes
    undo = rollback_checked(store, done.patch.id)
    redo = rollback_checked(store, undo.id)
    assert redo.prior_states == {old: "active", new.id: "discarded"}
    assert (status_of(store, old), status_of(store, new.id)) == ("superseded", "active")
    assert store.read_node(old).relations["superseded_by"] == [new.id]
    assert undone_patch_ids(store.load_patches()) == {undo.id}
    assert retired_ids(store.load_patches()) == {old: done.patch.id}
    assert view_ids(store) == {new.id}
    assert_healthy(store)
    # Undoing the redo undoes the patch again.
    rollback_checked(store, redo.id)
    assert (status_of(store, old), status_of(store, new.id)) == ("active", "discarded")
    assert undone_patch_ids(store.load_patches()) == {done.patch.id, redo.id}
    assert view_ids(store) == {old}
    assert_healthy(store)


def test_a_redone_patch_can_be_undone_again_directly(store: Store) -> None:
    old = add(store, "a fact")
    done = apply_patch(store, "update", [old], reason="v2", contents=["v2"])
    (new,) = done.new_nodes
    undo = rollback(store, done.patch.id)
    rollback(store, undo.patch.id)  # redo
    again = rollback_checked(store, done.patch.id)
    assert again.prior_states == {old: "superseded", new.id: "active"}
    assert (status_of(store, old), status_of(store, new.id)) == ("active", "discarded")
    assert done.patch.id in undone_patch_ids(store.load_patches())
    assert view_ids(store) == {old}
    assert_healthy(store)


def test_rollback_of_an_undone_patch_is_refused(store: Store) -> None:
    old = add(store, "a fact")
    done = apply_patch(store, "expire", [old], reason="stale")
    undo = rollback(store, done.patch.id)
    before = snapshot(store)
    with pytest.raises(IllegalPatchError):
        rollback(store, done.patch.id)
    assert snapshot(store) == before
    # A redo makes the patch live again; then it can be undone once more.
    redo = rollback(store, undo.patch.id)
    with pytest.raises(IllegalPatchError):
        rollback(store, undo.patch.id)
    assert snapshot(store) != before
    assert status_of(store, old) == "expired"
    rollback(store, redo.patch.id)
    assert status_of(store, old) == "active"
    assert_healthy(store)


@pytest.mark.parametrize(
    ("first", "later"),
    [
        ("supersede", "update"),  # the later patch retires the first one's new node
        ("update", "forget"),  # the later patch moves the first one's target again
        ("expire", "forget"),
        ("create", "expire"),
    ],
)
def test_rollback_is_refused_when_a_later_live_patch_touched_the_same_nodes(
    store: Store, first: str, later: str
) -> None:
    old = add(store, "a fact")
    if first == "create":
        done_id = store.load_patches()[-1].id
        touched = old
    else:
        done = apply_patch(store, first, [old], reason="first", contents=[] if first in STATUS_ONLY else ["v2"])
        done_id = done.patch.id
        touched = done.new_nodes[0].id if later == "update" else old
    apply_patch(store, later, [touched], reason="later", contents=[] if later in STATUS_ONLY else ["v3"])
    before = snapshot(store)
    with pytest.raises(IllegalPatchError):
        rollback(store, done_id)
    assert snapshot(store) == before
    assert_healthy(store)


def test_later_patches_on_other_nodes_do_not_block_a_rollback(store: Store) -> None:
    a, b = add(store, "a"), add(store, "b")
    done = apply_patch(store, "update", [a], reason="first", contents=["a2"])
    apply_patch(store, "expire", [b], reason="unrelated")
    rollback_checked(store, done.patch.id)
    assert (status_of(store, a), status_of(store, b)) == ("active", "expired")
    assert_healthy(store)


def test_rollback_of_an_unknown_patch_writes_nothing(store: Store) -> None:
    add(store, "a fact")
    before = snapshot(store)
    with pytest.raises(NotFoundError):
        rollback(store, new_id("patch"))
    assert snapshot(store) == before
    assert_healthy(store)


# ---------------------------------------------------------------- effective view (pure)


def make_node(content: str, **fields: Any) -> MemoryNode:
    updated_at = fields.pop("updated_at", None)
    node = new_node(content, source=Source(label="test"), **fields)
    if updated_at is not None:
        node.updated_at = updated_at
    return node


def make_patch(operation: str, targets: list[str], *, rollback_of: str | None = None) -> MemoryPatch:
    stamp = now_iso()
    return MemoryPatch(
        id=new_id("patch"),
        operation=operation,
        target_ids=targets,
        new_node_ids=[],
        reason="test",
        new_content=None if operation in STATUS_ONLY or operation == "rollback" else "new",
        source=Source(label="test"),
        confidence=1.0,
        resolution_policy={},
        created_at=stamp,
        applied_at=stamp,
        rollback_of=rollback_of,
    )


def ids(nodes: list[MemoryNode]) -> list[str]:
    return [n.id for n in nodes]


@pytest.mark.parametrize("status", list(LATTICE))
def test_view_serves_only_active_nodes(status: str) -> None:
    node = make_node("a fact", status=status)
    assert ids(effective_view([node], [])) == ([node.id] if status == "active" else [])
    assert ids(effective_view([node], [], session_id="sess-1")) == ([node.id] if status == "active" else [])


@pytest.mark.parametrize("operation", RETIRING)
def test_view_follows_the_ledger_not_an_unbaked_status(operation: str) -> None:
    node, other = make_node("retired by the ledger"), make_node("still current")
    patch = make_patch(operation, [node.id])
    assert node.status == "active"
    assert ids(effective_view([node, other], [patch])) == [other.id]
    undo = make_patch("rollback", [node.id], rollback_of=patch.id)
    assert ids(effective_view([node, other], [patch, undo])) == sorted([node.id, other.id])
    redo = make_patch("rollback", [node.id], rollback_of=undo.id)
    assert ids(effective_view([node, other], [patch, undo, redo])) == [other.id]


def test_view_unbaked_status_also_hides_session_overlays() -> None:
    overlay = make_node("session note", scope=Scope(session="s1"))
    assert ids(effective_view([overlay], [], session_id="s1")) == [overlay.id]
    assert ids(effective_view([overlay], [make_patch("expire", [overlay.id])], session_id="s1")) == []


def test_rollback_patches_retire_nothing_in_the_view() -> None:
    node = make_node("a fact")
    assert ids(effective_view([node], [make_patch("rollback", [node.id], rollback_of=new_id("patch"))])) == [node.id]


def test_view_excludes_nodes_outside_their_effective_window() -> None:
    now = datetime.now(UTC)
    past, future = (now - timedelta(days=1)).isoformat(), (now + timedelta(days=1)).isoformat()
    lapsed = make_node("ended", effective_from=(now - timedelta(days=2)).isoformat(), effective_until=past)
    running = make_node("still valid", effective_until=future)
    not_yet = make_node("starts tomorrow", effective_from=future)
    forever = make_node("no end")
    nodes = [lapsed, running, not_yet, forever]
    assert ids(effective_view(nodes, [])) == sorted([running.id, forever.id])
    later = now + timedelta(days=3)
    assert ids(effective_view(nodes, [], at=later)) == sorted([not_yet.id, forever.id])
    # At the exact end the node is over.
    assert running.id not in ids(effective_view(nodes, [], at=now + timedelta(days=1)))


def test_a_lapsed_or_retired_node_does_not_hide_a_wider_one_with_the_same_key() -> None:
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    wide = make_node("global default", key="k")
    lapsed = make_node("project value, ended", key="k", scope=Scope(project="p"), effective_until=past)
    retired = make_node("workspace value, retired", key="k", scope=Scope(workspace="w"))
    patches = [make_patch("deprecate", [retired.id])]
    assert ids(effective_view([wide, lapsed, retired], patches)) == [wide.id]


def test_same_key_collapses_by_scope_precedence() -> None:
    glob = make_node("global", key="editor")
    workspace = make_node("workspace", key="editor", scope=Scope(workspace="w"))
    project = make_node("project", key="editor", scope=Scope(workspace="w", project="p"))
    session = make_node("session", key="editor", scope=Scope(project="p", session="s1"))
    other = make_node("another key", key="shell")
    unkeyed = [make_node("no key"), make_node("no key either")]
    nodes = [glob, workspace, project, session, other, *unkeyed]
    plain = sorted([project.id, other.id, *ids(unkeyed)])
    assert ids(effective_view(nodes, [])) == plain
    assert ids(effective_view(nodes, [], session_id="s2")) == plain
    assert ids(effective_view(nodes, [], session_id="s1")) == sorted([session.id, other.id, *ids(unkeyed)])
    assert ids(effective_view([glob, workspace], [])) == [workspace.id]
    assert ids(effective_view([glob, workspace, project], [make_patch("expire", [project.id])])) == [workspace.id]
    assert ids(effective_view([glob], [])) == [glob.id]


@pytest.mark.parametrize("reverse", [False, True])
def test_same_key_and_scope_goes_to_the_newest_update(reverse: bool) -> None:
    now = datetime.now(UTC)
    older = make_node("older", key="k", updated_at=(now - timedelta(minutes=5)).isoformat())
    newer = make_node("newer", key="k", updated_at=(now - timedelta(minutes=1)).isoformat())
    # The newer update wins even when its node was created first.
    newer.created_at = (now - timedelta(minutes=10)).isoformat()
    nodes = [newer, older] if reverse else [older, newer]
    assert ids(effective_view(nodes, [])) == [newer.id]


def test_session_overlays_belong_to_their_session() -> None:
    mine = make_node("mine", scope=Scope(session="s1"))
    theirs = make_node("theirs", scope=Scope(session="s2"))
    pending = make_node("pending in s1", scope=Scope(session="s1"), status="pending")
    shared = make_node("shared")
    nodes = [mine, theirs, pending, shared]
    assert mine.status == "active_session"
    assert ids(effective_view(nodes, [])) == [shared.id]
    assert ids(effective_view(nodes, [], session_id="s1")) == sorted([mine.id, shared.id])
    assert ids(effective_view(nodes, [], session_id="s2")) == sorted([theirs.id, shared.id])


# ---------------------------------------------------------------- effective view and doctor on a store


def test_store_view_ignores_a_hand_edited_status_and_doctor_repairs_it(store: Store) -> None:
    old = add(store, "uses python 3.10", key="python")
    done = apply_patch(store, "supersede", [old], reason="upgrade", contents=["uses python 3.11"])
    (new,) = done.new_nodes
    assert_healthy(store)
    edit_status(store, old, "active")  # superseded -> active, around the lattice
    assert view_ids(store) == {new.id}
    findings = doctor.diagnose(store).findings
    assert [(f.check, f.path) for f in findings if f.check == LEDGER_CHECK] == [(LEDGER_CHECK, f"nodes/{old}.json")]
    actions = doctor.repair(store)
    assert any(old in action and "superseded" in action for action in actions)
    assert status_of(store, old) == "superseded"
    assert_healthy(store)


@pytest.mark.parametrize(
    ("status", "edited"),
    [
        ("superseded", "active"),
        ("superseded", "deprecated"),
        ("forgotten", "active"),
        ("forgotten", "superseded"),
        ("discarded", "active"),
        ("expired", "deprecated"),
        ("deprecated", "forgotten"),
    ],
)
def test_doctor_finds_and_repairs_status_moved_by_hand(store: Store, status: str, edited: str) -> None:
    target = node_in(store, status)
    edit_status(store, target, edited)
    assert LEDGER_CHECK in {f.check for f in doctor.diagnose(store).findings}
    if status != "discarded":  # a retiring patch targets it, so the view ignores the edit
        assert target not in view_ids(store)
    doctor.repair(store)
    assert status_of(store, target) == status
    assert_healthy(store)


@pytest.mark.parametrize("operation", list(STATUS_ONLY))
def test_doctor_finds_and_repairs_a_hand_edit_of_a_status_restored_by_rollback(store: Store, operation: str) -> None:
    target = add(store, "a fact")
    done = apply_patch(store, operation, [target], reason="retire")
    rollback(store, done.patch.id)
    assert_healthy(store)
    edit_status(store, target, STATUS_ONLY[operation])  # as if the rollback had not happened
    report = doctor.diagnose(store)
    assert [(f.check, f.path) for f in report.findings] == [(LEDGER_CHECK, f"nodes/{target}.json")]
    # The hand edit also left the search index (built by add's duplicate check) behind the file: doctor
    # brings it up to date and says so.
    assert report.refreshed == [f"nodes/{target}.json"]
    doctor.repair(store)
    assert status_of(store, target) == "active"
    assert_healthy(store)


def test_doctor_finds_a_node_retired_by_hand_without_a_patch(store: Store) -> None:
    target = add(store, "a fact")
    edit_status(store, target, "superseded")
    report = doctor.diagnose(store)
    assert [(f.check, f.path) for f in report.findings] == [(LEDGER_CHECK, f"nodes/{target}.json")]
    assert report.refreshed == [f"nodes/{target}.json"]


def test_store_view_drops_a_node_past_its_effective_until(store: Store) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    start = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    lapsed = new_node("until yesterday", source=Source(label="test"), effective_from=start, effective_until=past)
    create_nodes(store, [lapsed], reason="test")
    current = add(store, "still true")
    assert view_ids(store) == {current}
    assert_healthy(store)


def test_store_view_collapses_keys_and_overlays_sessions(store: Store) -> None:
    glob = add(store, "tabs", key="indent")
    project = add(store, "4 spaces", key="indent", scope=Scope(project="p"))
    overlay = add(store, "2 spaces for now", key="indent", scope=Scope(project="p", session="s1"))
    assert status_of(store, overlay) == "active_session"
    assert view_ids(store) == {project}
    assert view_ids(store, session_id="s1") == {overlay}
    assert view_ids(store, session_id="s2") == {project}
    apply_patch(store, "expire", [project], reason="project rule dropped")
    assert view_ids(store) == {glob}
    assert view_ids(store, session_id="s1") == {overlay}
    assert_healthy(store)


def test_undo_two_levels_in_reverse_order(store: Store) -> None:
    """P then Q on P's result; undoing Q, then P, leaves the original memory alone and current."""
    original = add(store, "v1")
    first = apply_patch(store, "update", [original], reason="v2", contents=["v2"])
    second = apply_patch(store, "update", [first.new_nodes[0].id], reason="v3", contents=["v3"])
    rollback(store, second.patch.id)
    rollback(store, first.patch.id)
    nodes = store.load_nodes()
    assert nodes[original].status == "active"
    assert nodes[original].relations["superseded_by"] == []
    assert {nodes[n.id].status for n in first.new_nodes + second.new_nodes} == {"discarded"}
    assert [n.id for n in effective_view(nodes.values(), store.load_patches())] == [original]
    assert doctor.diagnose(store).findings == []


def test_undoing_a_redo_removes_the_links_again(store: Store) -> None:
    target = add(store, "old")
    patch = apply_patch(store, "supersede", [target], reason="new", contents=["new"])
    new = patch.new_nodes[0].id
    undo = rollback(store, patch.patch.id)
    assert store.read_node(target).relations["superseded_by"] == []
    redo = rollback(store, undo.patch.id)
    assert store.read_node(target).relations["superseded_by"] == [new]
    rollback(store, redo.patch.id)
    assert store.read_node(target).status == "active"
    assert store.read_node(target).relations["superseded_by"] == []
    assert doctor.diagnose(store).findings == []


@pytest.mark.parametrize("operation", ["create", "supersede"])
def test_a_patch_that_cannot_be_written_leaves_nothing_behind(store: Store, operation: str) -> None:
    """A full disk when the patch file is written: the error comes back, and neither the new memory nor
    a temp file stays (the new memory was written first, and stayed, served with no patch)."""
    import errno

    target = add(store, "the old fact")
    before = {p.name for folder in ("nodes", "edges", "patches") for p in (store.root / folder).iterdir()}

    def full(patch: MemoryPatch) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    store.write_patch = full  # type: ignore[method-assign]
    with pytest.raises(OSError, match="No space left"):
        if operation == "create":
            create_nodes(store, [new_node("a new fact", source=Source(label="test"))], reason="test")
        else:
            apply_patch(store, operation, [target], reason="test", contents=["the new fact"])
    after = {p.name for folder in ("nodes", "edges", "patches") for p in (store.root / folder).iterdir()}
    assert after == before
    assert list(store.root.rglob("*.tmp")) == []


def test_text_that_is_not_unicode_is_a_validation_error_and_nothing_is_written(store: Store) -> None:
    """A JSON escape (an MCP argument, an import line) can carry a lone surrogate, which no UTF-8 file
    can hold: the write died with a raw UnicodeEncodeError. It is a validation error before any file."""
    from cclg.errors import ValidationError

    node = add_memory(store, "Kestrel deploys run the canary script", source="user").new_nodes[0]
    before = sorted(p.name for p in store.root.rglob("*.json"))
    with pytest.raises(ValidationError, match="not valid Unicode"):
        add_memory(store, "Kestrel \ud800 deploys", source="agent")
    with pytest.raises(ValidationError, match="not valid Unicode"):
        apply_patch(store, "refine", [node.id], reason="typo", contents=["Kestrel \udfff deploys"])
    assert sorted(p.name for p in store.root.rglob("*.json")) == before
    assert list((store.root / "tmp").glob("*")) == []


def test_a_patch_may_give_its_new_memory_another_project_but_never_another_session(store: Store) -> None:
    """``apply_patch(scope=...)``: the new memory has that scope (``cclg project adopt``), the target
    keeps its own; moving a memory in or out of a session is promotion's job, and a patch that writes
    no new memory has no scope to give."""
    node = add_memory(store, "The api caches sessions in Redis", source="user", scope=Scope(project="api")).node
    moved = apply_patch(
        store, "update", [node.id], reason="adopt", contents=[node.content], scope=Scope(project="git:" + "a" * 40)
    )
    assert moved.new_nodes[0].scope.project == "git:" + "a" * 40
    assert store.read_node(node.id).scope.project == "api" and store.read_node(node.id).status == "superseded"
    current = moved.new_nodes[0].id
    with pytest.raises(UsageError, match="session"):
        apply_patch(store, "update", [current], reason="r", contents=["x"], scope=Scope(session="s1"))
    with pytest.raises(UsageError, match="new memories only"):
        apply_patch(store, "forget", [current], reason="r", scope=Scope(project="web"))
    assert store.read_node(current).status == "active"
    assert doctor.diagnose(store).findings == []
