"""Issue 15, rule 3, for imports: ``kill -9`` during ``import-jsonl`` or a container import leaves all
of the import or none of it, never a memory without its patch, and the next normal write heals.

Each run is a real process, killed with SIGKILL by itself at the k-th file write it makes
(``Store.write_file``, ``stage_file``, ``publish_file``): a deterministic point, no timing. A first
run that is not killed counts the writes an import makes; the kill points are spread over them, so
the runs land before the import's commit point and after it. After each kill the store is read as
it was left, then one normal ``add`` runs, then ``doctor`` (without ``--repair``) must find nothing.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cclg import api
from cclg.core.files import read_jsonl
from cclg.core.records import Scope, Source, new_node
from cclg.core.store import Store
from cclg.intake.container import export_store, load_container, write_container
from cclg.ledger.sessions import start_session
from cclg.ledger.view import effective_view
from cclg.ledger.writer import apply_patch
from cclg.maintenance import doctor

# Runs one import in a child process that SIGKILLs itself at its KILL_AT-th file write (0: never),
# then prints how many writes it made.
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from cclg import api
    from cclg.core.store import Store

    root, kind, source, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    writes = 0

    def counted(method):
        def write(self, *args, **kwargs):
            global writes
            writes += 1
            if writes == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return method(self, *args, **kwargs)
        return write

    for name in ("write_file", "stage_file", "publish_file"):
        if hasattr(Store, name):
            setattr(Store, name, counted(getattr(Store, name)))
    store = Store.open(root)
    data = Path(source).read_bytes()
    if kind == "jsonl":
        api.import_jsonl(store, data, name="seed.jsonl")
    else:
        api.import_container(store, api.load_container(data.decode("utf-8")))
    print(writes)
    """
)


def run_child(root: Path, kind: str, source: Path, kill_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(root), kind, str(source), str(kill_at)],
        capture_output=True,
        text=True,
        check=False,
    )


def count_writes(tmp_path: Path, kind: str, source: Path) -> int:
    """How many file writes the import makes, counted on a store of its own."""
    store, _ = Store.init(tmp_path / "count")
    done = run_child(store.root, kind, source, 0)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def kill_points(total: int) -> list[int]:
    return sorted({1, total // 4, total // 2 - 1, total // 2 + 1, 3 * total // 4, total - 1})


def imported_and_current(store: Store, ids: set[str]) -> tuple[set[str], set[str]]:
    """(imported ids with a file in nodes/, imported ids in the effective view)."""
    nodes = store.load_nodes()
    view = {n.id for n in effective_view(nodes.values(), store.load_patches())}
    return ids & set(nodes), ids & view


def audited(store: Store) -> set[str]:
    """The memories the audit log says were written: by their writer (``node_written``) or, for a write
    the next writer finished, by the repair that named their files."""
    found = set()
    for record in read_jsonl(store.audit_path).records:
        if record["event"] == "node_written":
            found.add(record["node_id"])
        elif record["event"] == "repair_applied":
            found |= {m for action in record["actions"] for m in re.findall(r"nodes/(mem_[0-9a-z]+)\.json", action)}
    return found


def heal_and_check(store: Store, ids: set[str]) -> bool:
    """One normal write, then: all of the import or none of it, audited, and doctor finds nothing.
    Returns whether the import is there."""
    api.add_memory(store, "One normal write after the crash", source="test")
    written, _ = imported_and_current(store, ids)
    assert written in (set(), ids), f"{len(written)} of {len(ids)} imported memories are in nodes/"
    assert audited(store) >= written, "every memory written is in the audit log"
    assert list((store.root / "tmp").glob("*")) == [] and not (store.root / "staging").exists()
    assert [(f.check, f.path) for f in doctor.diagnose(store).findings] == []
    return bool(written)


# ---------------------------------------------------------------- import-jsonl


def seed_lines(path: Path, count: int) -> set[str]:
    """``count`` full-record lines (their ids are known in advance), one distinctive word each."""
    nodes = [
        new_node(f"Heron fact number {i}: the heron service {i} runs", source=Source(label="seed"))
        for i in range(count)
    ]
    path.write_text("".join(json.dumps(n.to_dict()) + "\n" for n in nodes), "utf-8")
    return {n.id for n in nodes}


def make_seed(folder: Path, count: int) -> tuple[Path, set[str], int]:
    path = folder / "seed.jsonl"
    ids = seed_lines(path, count)
    return path, ids, count_writes(folder, "jsonl", path)


@pytest.fixture(scope="module")
def small_seed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str], int]:
    return make_seed(tmp_path_factory.mktemp("small"), 200)


@pytest.mark.parametrize("point", range(6))
def test_kill_9_during_import_jsonl_leaves_all_or_nothing(
    tmp_path: Path, small_seed: tuple[Path, set[str], int], point: int
) -> None:
    path, ids, total = small_seed
    store, _ = Store.init(tmp_path / "store")
    killed = run_child(store.root, "jsonl", path, kill_points(total)[point])
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    _, current = imported_and_current(store, ids)
    patches = [p for p in store.load_patches() if set(p.new_node_ids) == ids]
    # Nothing is current before its patch is on disk; once the patch is, the next write finishes it.
    assert not current or len(patches) == 1, f"{len(current)} memories are current without their patch"
    there = heal_and_check(store, ids)
    assert there == bool(patches)
    hits = api.search_memories(store, "heron service", limit=5)
    assert bool(hits) == there


def test_the_issues_reproducer_5000_lines(tmp_path: Path) -> None:
    """The issue's case: 5,000 lines, killed at the 5,000th file write (on the old code, with 4,999
    memories written and no patch). The dense sample above covers both sides of the commit."""
    path = tmp_path / "seed.jsonl"
    ids = seed_lines(path, 5000)
    store, _ = Store.init(tmp_path / "store")
    assert run_child(store.root, "jsonl", path, 5000).returncode == -signal.SIGKILL
    _, current = imported_and_current(store, ids)
    assert not current or any(set(p.new_node_ids) == ids for p in store.load_patches())
    heal_and_check(store, ids)


def test_every_memory_of_a_killed_import_jsonl_is_audited(
    tmp_path: Path, small_seed: tuple[Path, set[str], int]
) -> None:
    path, ids, total = small_seed
    store, _ = Store.init(tmp_path / "store")
    assert run_child(store.root, "jsonl", path, kill_points(total)[-2]).returncode == -signal.SIGKILL
    assert heal_and_check(store, ids)


# ---------------------------------------------------------------- container import


@pytest.fixture(scope="module")
def osprey(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str], int]:
    """A container whose import writes every kind of record: created and superseded memories, a
    forget, an edge, a session, and memories no patch names (as the reference writes them); with
    the number of file writes its import makes."""
    folder = tmp_path_factory.mktemp("osprey")
    store, _ = Store.init(folder / "source")
    start_session(store, "sess-crash", agent="test")
    for i in range(30):
        api.add_memory(store, f"Osprey fact {i}: osprey job {i} runs hourly", source="test")
    first = sorted(store.load_nodes())[:2]
    apply_patch(store, "supersede", [first[0]], reason="moved", contents=["Osprey jobs run every two hours"])
    apply_patch(store, "forget", [first[1]], reason="wrong")
    container = load_container(export_store(store))
    loose = [new_node(f"Osprey loose fact {i}", source=Source(label="ref"), scope=Scope(project="o")) for i in range(5)]
    path = folder / "osprey.cclg"
    path.write_text(
        write_container([*container.nodes, *loose], container.patches, container.edges, container.sessions), "utf-8"
    )
    return path, {n.id for n in [*container.nodes, *loose]}, count_writes(folder, "container", path)


@pytest.mark.parametrize("point", range(6))
def test_kill_9_during_a_container_import_leaves_all_or_nothing(
    tmp_path: Path, osprey: tuple[Path, set[str], int], point: int
) -> None:
    path, ids, total = osprey
    store, _ = Store.init(tmp_path / "store")
    killed = run_child(store.root, "container", path, kill_points(total)[point])
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    _, current = imported_and_current(store, ids)
    named = {n for p in store.load_patches() for n in (*p.new_node_ids, *p.target_ids)}
    assert current <= named, "no imported memory is current before a patch names it"
    there = heal_and_check(store, ids)
    if there:  # the whole import, as an import that was never killed leaves it
        whole, _ = Store.init(tmp_path / "whole")
        api.import_container(whole, load_container(path.read_text("utf-8")))
        statuses = {n.id: n.status for n in whole.load_nodes().values()}
        assert {n.id: n.status for n in store.load_nodes().values() if n.id in ids} == statuses
        assert len(store.load_patches()) == len(whole.load_patches()) + 1  # + the normal write's patch
        assert [s.id for s in store.load_sessions()] == ["sess-crash"] and store.load_edges()
    else:
        assert store.load_sessions() == [] and store.load_edges() == [] and len(store.load_patches()) == 1


def test_container_kill_points_fall_on_both_sides_of_the_commit(
    tmp_path: Path, osprey: tuple[Path, set[str], int]
) -> None:
    path, ids, total = osprey
    outcomes = []
    for kill_at in (kill_points(total)[0], kill_points(total)[-1]):
        store, _ = Store.init(tmp_path / f"store-{kill_at}")
        assert run_child(store.root, "container", path, kill_at).returncode == -signal.SIGKILL
        outcomes.append(heal_and_check(store, ids))
    assert outcomes == [False, True]


def test_doctor_repair_right_after_a_killed_import_finishes_it_first(
    tmp_path: Path, osprey: tuple[Path, set[str], int]
) -> None:
    """A library caller may run ``doctor.repair`` before any other command: it must finish an import
    killed past its commit point, not set its patch apart as an unfinished create."""
    path, ids, total = osprey
    store = Store.open(Store.init(tmp_path / "store")[0].root)
    assert run_child(store.root, "container", path, kill_points(total)[-1]).returncode == -signal.SIGKILL
    doctor.repair(store)
    _, current = imported_and_current(store, ids)
    assert current and not list((store.root / "recovered").rglob("patch_*.json"))
    assert [(f.check, f.path) for f in doctor.diagnose(store).findings] == []
