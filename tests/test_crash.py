"""Writers killed with SIGKILL: nothing is left unaccounted, and the next write heals.

Every writer is a real process (``sys.executable -c``) on a real store, killed with a
real SIGKILL, either by itself just before its Nth write (a chosen crash point) or by
the test at a random moment (ten writers at once). What is checked afterwards never
depends on timing:

- no memory is served that no patch created;
- everything a killed write left is a ``cclg doctor`` finding (never an "ok");
- the temp files of a killed writer are gone after the next normal write, so doctor
  is clean again without ``--repair`` (an unfinished patch still needs it);
- after ``doctor --repair`` the store is clean, every memory is accounted for by a
  patch, and a create is all or nothing.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cclg.api import add_memory, build_node
from cclg.core.files import read_jsonl
from cclg.core.records import new_node
from cclg.core.store import Store
from cclg.ledger.view import effective_view
from cclg.maintenance import doctor

# Killed by itself just before its Nth write primitive: an `add`, or a create of three
# memories at once (what an import does).
STEP_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from cclg.api import add_memory, build_node
    from cclg.ledger.writer import create_nodes
    from cclg.core.store import Store

    root, operation, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
    steps = []

    def wrap(name):
        real = getattr(Store, name)

        def step(self, *args, **kwargs):
            steps.append(name)
            print(name, flush=True)
            if len(steps) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, *args, **kwargs)

        setattr(Store, name, step)

    for name in ("write_file", "stage_file", "publish_file", "append"):
        if hasattr(Store, name):
            wrap(name)
    store = Store.open(root)
    if operation == "add":
        add_memory(store, "a memory that may never be", source="crash")
    else:
        nodes = [build_node(f"imported fact {i}", source="crash") for i in range(3)]
        create_nodes(store, nodes, reason="import", new_content="three imported facts")
    print("finished", flush=True)
    """
)


def run_step_writer(store: Store, operation: str, kill_at: int) -> bool:
    """Run the writer; returns whether it finished (else it was killed at step ``kill_at``)."""
    proc = subprocess.run(
        [sys.executable, "-c", STEP_WRITER, str(store.root), operation, str(kill_at)],
        capture_output=True,
        timeout=60,
    )
    finished = proc.stdout.decode().split()[-1:] == ["finished"]
    assert proc.returncode == (0 if finished else -signal.SIGKILL), proc.stderr
    return finished


def temps(store: Store) -> list[Path]:
    return sorted(store.root.rglob("*.tmp"))


def created_by_patches(store: Store) -> set[str]:
    return {n for p in store.load_patches() for n in p.new_node_ids}


def served(store: Store) -> set[str]:
    return {n.id for n in effective_view(store.load_nodes().values(), store.load_patches())}


def assert_leftovers_are_findings(store: Store) -> doctor.Report:
    """Nothing served without its patch, and every leftover of a killed write is a doctor finding."""
    assert served(store) <= created_by_patches(store), "a memory is served that no patch created"
    report = doctor.diagnose(store)
    found = {(f.check, f.path) for f in report.findings}
    for node_id in set(store.load_nodes()) - created_by_patches(store):
        assert (doctor.ORPHAN, f"nodes/{node_id}.json") in found
    for path in temps(store):
        assert (doctor.TEMP, store.relative(path)) in found
    for patch in store.load_patches():
        if not all((store.root / "nodes" / f"{n}.json").exists() for n in patch.new_node_ids):
            assert (doctor.PATCH_IDS, f"patches/{patch.id}.json") in found
    return report


def assert_next_write_heals(store: Store, text: str) -> None:
    """One normal write clears what the killed writer left in tmp/: no temp file is a finding after it."""
    add_memory(store, text, source="test")
    assert temps(store) == []
    assert [f for f in doctor.diagnose(store).findings if f.check == doctor.TEMP] == []


def assert_repaired(store: Store) -> None:
    doctor.repair(store)
    assert doctor.diagnose(store).findings == []
    assert set(store.load_nodes()) <= created_by_patches(store)
    assert temps(store) == []


# ---------------------------------------------------------------- a crash at each write


@pytest.mark.parametrize("operation", ["add", "import"])
def test_a_create_killed_at_any_write_is_all_or_nothing(tmp_path: Path, operation: str) -> None:
    for kill_at in range(1, 20):
        store, _ = Store.init(tmp_path / f"store-{kill_at}")
        finished = run_step_writer(store, operation, kill_at)
        assert_leftovers_are_findings(store)
        assert_next_write_heals(store, f"a later fact {kill_at}")
        assert_repaired(store)
        kept = [n.id for n in store.load_nodes().values() if n.source.label == "crash"]
        assert len(kept) in (0, 1 if operation == "add" else 3), f"killed at step {kill_at}: {kept}"
        if finished:
            assert len(kept) == (1 if operation == "add" else 3)
            break
    else:
        pytest.fail("the writer never finished")


def test_an_add_killed_before_its_patch_leaves_no_memory_without_one(store: Store) -> None:
    """The issue's reproducer: `add` killed after writing its memory and before its patch left an
    active memory with no patch and no audit record, and doctor and doctor --repair said "ok"."""
    kill_at = 1
    while not run_step_writer(store, "add", kill_at):
        assert served(store) <= created_by_patches(store)
        orphans = set(store.load_nodes()) - created_by_patches(store)
        assert not orphans or not doctor.diagnose(store).ok
        doctor.repair(store)
        assert set(store.load_nodes()) <= created_by_patches(store)
        kill_at += 1


# ---------------------------------------------------------------- ten writers, random kills

RANDOM_WRITER = textwrap.dedent(
    """
    import sys
    from cclg.api import add_memory, build_node
    from cclg.ledger.writer import apply_patch, create_nodes
    from cclg.ledger.sessions import record_event
    from cclg.core.store import Store

    store = Store.open(sys.argv[1])
    tag = sys.argv[2]
    print("ready", flush=True)
    last = None
    i = 0
    while True:
        step = i % 4
        if step == 0:
            last = add_memory(store, f"{tag} fact {i} about widgets", source="crash").new_nodes[0].id
        elif step == 1:
            batch = [build_node(f"{tag} imported fact {i}.{k} about gadgets", source="crash") for k in range(20)]
            create_nodes(store, batch, reason="import", new_content=f"{tag} batch {i}")
        elif step == 2 and last is not None:
            apply_patch(store, "supersede", [last], reason="newer", contents=[f"{tag} fact {i} about gizmos"])
        else:
            record_event(store, "crash-session", "tool_result", {"tag": tag, "i": i, "blob": "b" * 50_000})
        i += 1
    """
)


def test_ten_writers_killed_at_random_leave_nothing_unaccounted(store: Store) -> None:
    rng = random.Random(15)
    for round_ in range(2):
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RANDOM_WRITER, str(store.root), f"w{round_}.{n}"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for n in range(10)
        ]
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"ready\n", proc.stderr.read() if proc.stderr else b""
        for proc in procs:  # one at a time, each at a moment of its own
            time.sleep(rng.uniform(0.0, 0.15))
            os.kill(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait()  # reaped: their pids are dead, so their temp files are orphans
            assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else b""
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        report = assert_leftovers_are_findings(store)
        allowed = {doctor.TEMP, doctor.LOGS, doctor.LEDGER, doctor.PATCH_IDS, doctor.ORPHAN, doctor.SUPERSEDES}
        assert {f.check for f in report.findings} <= allowed | {doctor.EDGE_IDS}
        assert_next_write_heals(store, f"a fact after round {round_}")
        assert_repaired(store)
        for log in store.logs():
            contents = read_jsonl(log)
            assert contents.bad_lines == [] and contents.torn_tail == b"", log
    assert len(store.load_nodes()) > 10  # the writers got somewhere


# ---------------------------------------------------------------- what doctor finds


def test_doctor_finds_and_sets_apart_a_memory_no_patch_created(store: Store) -> None:
    """What an `add` killed between its memory and its patch left before this release: an active
    memory with no patch and no audit record. Doctor reports it; repair moves it to recovered/."""
    kept = add_memory(store, "a fact with its patch", source="test").new_nodes[0]
    leftover = build_node("a fact whose patch never came", source="test")
    store.write_node(leftover, new=True)
    findings = doctor.diagnose(store).findings
    assert [(f.check, f.path) for f in findings] == [(doctor.ORPHAN, f"nodes/{leftover.id}.json")]
    assert "no patch created it" in findings[0].message
    actions = doctor.repair(store)
    assert any(leftover.id in a and "recovered/" in a for a in actions)
    assert (store.root / "recovered" / "nodes" / f"{leftover.id}.json").is_file()
    assert set(store.load_nodes()) == {kept.id}
    assert doctor.diagnose(store).findings == []


def test_memories_accounted_for_otherwise_are_left_alone(store: Store) -> None:
    """A memory the audit log says was written (an import's), and one without a content hash (the
    reference implementation writes memories without patches), are no leftovers."""
    imported = build_node("an imported fact", source="test")
    store.write_node(imported, new=True)
    store.audit("node_written", node_id=imported.id, via="import")
    reference = new_node("a fact the reference implementation wrote", source=None)
    del reference.metadata["content_hash"]
    store.write_node(reference, new=True)
    assert doctor.diagnose(store).findings == []
    doctor.repair(store)
    assert set(store.load_nodes()) == {imported.id, reference.id}


# ---------------------------------------------------------------- temp files


RAW_WRITER_KILLED_MID_WRITE = textwrap.dedent(
    """
    import os, signal, sys
    from cclg.core.store import Store

    def die(fd):
        os.kill(os.getpid(), signal.SIGKILL)

    store = Store.open(sys.argv[1])
    os.fsync = die  # killed with its temp file written and not yet renamed
    store.write_raw(b"evidence " * 1000, "payload.json")
    """
)


def test_a_temp_file_of_a_killed_writer_is_cleared_by_the_next_write(store: Store) -> None:
    proc = subprocess.run([sys.executable, "-c", RAW_WRITER_KILLED_MID_WRITE, str(store.root)], capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (temp,) = temps(store)
    assert [(f.check, f.path) for f in doctor.diagnose(store).findings] == [(doctor.TEMP, store.relative(temp))]
    add_memory(store, "a normal write", source="test")  # takes the store lock: clears it
    assert not temp.exists()
    assert doctor.diagnose(store).findings == []
    actions = [r for r in read_jsonl(store.audit_path).records if r["event"] == "repair_applied"]
    assert actions[-1]["actions"] == [f"removed orphan temp file {store.relative(temp)}"]


def test_a_live_writers_temp_file_is_left_alone(store: Store) -> None:
    (store.root / "tmp").mkdir(exist_ok=True)
    temp = store.root / "tmp" / f".mem_x.json.{os.getpid()}.0a0b0c0d.tmp"
    temp.write_bytes(b"being written")
    add_memory(store, "a normal write", source="test")
    assert temp.exists()
