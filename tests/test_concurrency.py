"""Many real processes on one store, and writers killed with SIGKILL in the middle of a write.

Workers run in separate interpreters (multiprocessing "spawn", or a ``sys.executable -c``
subprocess), so nothing is shared but the files and the kernel's locks.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cclg.api import add_memory, build_node
from cclg.core.files import read_jsonl
from cclg.core.store import Store
from cclg.errors import IllegalPatchError
from cclg.ledger.sessions import record_event, start_session
from cclg.ledger.view import effective_view
from cclg.ledger.writer import apply_patch, create_nodes
from cclg.maintenance import doctor

SPAWN = multiprocessing.get_context("spawn")
WORKERS = 8
PER_WORKER = 25
EVENT_EVERY = 9  # a session event after memories 0, 9, 18
EVENTS_PER_WORKER = len(range(0, PER_WORKER, EVENT_EVERY))
SESSION = "shared-session"


def _writer(root: str, index: int, barrier: Any, results: Any) -> None:
    """One of the concurrent writers: memories, two patches on its own nodes, session events."""
    try:
        store = Store.open(root)
        barrier.wait(timeout=60)
        start_session(store, SESSION, agent=f"worker-{index}")
        created = []
        for i in range(PER_WORKER):
            result = add_memory(
                store,
                f"worker {index} memory {i}: " + "detail " * (i % 7),
                source=f"worker-{index}",
                tags=[f"w{index}"],
            )
            created.append(result.new_nodes[0].id)
            if i % EVENT_EVERY == 0:
                record_event(store, SESSION, "tool_result", {"worker": index, "n": i // EVENT_EVERY})
        refined = apply_patch(
            store, "refine", [created[0]], reason=f"worker {index} refines", contents=[f"worker {index} refined"]
        )
        apply_patch(store, "forget", [created[1]], reason=f"worker {index} forgets")
        results.put(
            {
                "index": index,
                "created": created,
                "refined_from": created[0],
                "refined_to": refined.new_nodes[0].id,
                "forgotten": created[1],
            }
        )
    except BaseException as exc:
        results.put({"index": index, "error": repr(exc)})
        raise


def _racer(root: str, node_id: str, index: int, barrier: Any, results: Any) -> None:
    """Try to supersede ``node_id``; report whether the ledger accepted it."""
    store = Store.open(root)
    barrier.wait(timeout=60)
    try:
        result = apply_patch(store, "supersede", [node_id], reason=f"racer {index}", contents=[f"racer {index} wins"])
    except IllegalPatchError as exc:
        results.put((index, "illegal", str(exc)))
    except BaseException as exc:
        results.put((index, "error", repr(exc)))
        raise
    else:
        results.put((index, "ok", result.new_nodes[0].id))


def _run(target: Any, args_list: list[tuple[Any, ...]], timeout: float = 60) -> list[Any]:
    """Start one spawned process per args tuple, all released together by a barrier; collect results."""
    barrier = SPAWN.Barrier(len(args_list))
    results = SPAWN.Queue()
    procs = [SPAWN.Process(target=target, args=(*args, barrier, results)) for args in args_list]
    for proc in procs:
        proc.start()
    collected = []
    deadline = time.monotonic() + timeout
    try:
        for _ in procs:
            collected.append(results.get(timeout=max(0.1, deadline - time.monotonic())))
    finally:
        for proc in procs:
            proc.join(timeout=max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert [p.exitcode for p in procs] == [0] * len(procs), collected
    return collected


def _records_parse(store: Store) -> int:
    """Every record file parses as JSON; return how many there are. Fails on any half-written file."""
    count = 0
    for folder in ("nodes", "patches", "edges", "sessions"):
        for path in (store.root / folder).iterdir():
            if path.name.startswith(".") or not path.name.endswith(".json"):
                continue
            data = json.loads(path.read_bytes())
            assert isinstance(data, dict) and data["id"] == path.stem, path
            count += 1
    return count


# ---------------------------------------------------------------- many writers


def test_eight_processes_write_at_once(store: Store) -> None:
    outcomes = _run(_writer, [(str(store.root), index) for index in range(WORKERS)])
    assert [o.get("error") for o in outcomes] == [None] * WORKERS
    assert sorted(o["index"] for o in outcomes) == list(range(WORKERS))

    nodes = store.load_nodes()
    patches = store.load_patches()
    expected_ids = {n for o in outcomes for n in o["created"]} | {o["refined_to"] for o in outcomes}
    assert len(expected_ids) == WORKERS * (PER_WORKER + 1)  # ids are unique across processes
    assert set(nodes) == expected_ids
    assert _records_parse(store) == len(nodes) + len(patches) + len(store.record_files("edges")) + 1

    for o in outcomes:
        assert nodes[o["refined_from"]].status == "superseded"
        assert nodes[o["refined_from"]].relations["superseded_by"] == [o["refined_to"]]
        assert nodes[o["refined_to"]].relations["refines"] == [o["refined_from"]]
        assert nodes[o["forgotten"]].status == "forgotten"
        for node_id in o["created"][2:]:
            assert nodes[node_id].status == "active"
            assert nodes[node_id].tags == [f"w{o['index']}"]

    operations = Counter(p.operation for p in patches)
    assert operations == {"create": WORKERS * PER_WORKER, "refine": WORKERS, "forget": WORKERS}
    created_by_patches = [n for p in patches if p.operation == "create" for n in p.new_node_ids]
    assert sorted(created_by_patches) == sorted(n for o in outcomes for n in o["created"])
    assert len(store.record_files("edges")) == WORKERS
    assert len(effective_view(nodes.values(), patches)) == WORKERS * (PER_WORKER - 1)

    raw_lines = store.audit_path.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""
    audit = [json.loads(line) for line in raw_lines[:-1]]  # every line is whole JSON
    contents = read_jsonl(store.audit_path)
    assert contents.bad_lines == [] and contents.torn_tail == b""
    events = Counter(r["event"] for r in audit)
    assert events["node_written"] == len(nodes)
    assert events["patch_written"] == len(patches)
    assert events["edge_written"] == WORKERS
    assert events["session_started"] == 1  # eight processes started the same session; one created it
    assert events["session_event"] == WORKERS * EVENTS_PER_WORKER
    assert events["raw_written"] == WORKERS * EVENTS_PER_WORKER
    assert "torn_tail_set_aside" not in events
    assert sorted(r["node_id"] for r in audit if r["event"] == "node_written") == sorted(nodes)

    session_events = store.session_events(SESSION)
    assert sorted((e["payload"]["worker"], e["payload"]["n"]) for e in session_events) == [
        (w, n) for w in range(WORKERS) for n in range(EVENTS_PER_WORKER)
    ]
    for event in session_events:
        evidence = json.loads((store.root / event["raw"]).read_bytes())
        assert evidence["payload"] == event["payload"]
    log = read_jsonl(store.session_events_path(SESSION))
    assert log.bad_lines == [] and log.torn_tail == b""

    assert list(store.root.rglob("*.tmp")) == []
    assert doctor.diagnose(store).findings == []


def test_two_processes_race_to_supersede_the_same_node(store: Store) -> None:
    for round_ in range(2):
        target = add_memory(store, f"the contested fact {round_}", source="test").new_nodes[0].id
        outcomes = sorted(_run(_racer, [(str(store.root), target, 0), (str(store.root), target, 1)]))
        kinds = sorted(kind for _, kind, _ in outcomes)
        assert kinds == ["illegal", "ok"], outcomes
        (winner_new_id,) = [detail for _, kind, detail in outcomes if kind == "ok"]
        (refusal,) = [detail for _, kind, detail in outcomes if kind == "illegal"]
        assert "superseded" in refusal

        node = store.read_node(target)
        assert node.status == "superseded"
        assert node.relations["superseded_by"] == [winner_new_id]
        supersedes = [p for p in store.load_patches() if p.operation == "supersede" and target in p.target_ids]
        assert len(supersedes) == 1
        assert supersedes[0].new_node_ids == [winner_new_id]
        assert supersedes[0].prior_states == {target: "active"}
        # The loser wrote nothing: exactly one node claims to supersede the target.
        claimants = [n for n in store.load_nodes().values() if target in n.relations["supersedes"]]
        assert [n.id for n in claimants] == [winner_new_id]
        assert doctor.diagnose(store).findings == []


def test_threads_sharing_one_store_race_to_supersede(store: Store) -> None:
    """The MCP server runs tool calls in worker threads over one Store object."""
    import threading

    target = add_memory(store, "the contested fact", source="test").new_nodes[0].id
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def racer(i: int) -> None:
        start.wait()
        try:
            apply_patch(store, "supersede", [target], reason=f"thread {i}", contents=[f"corrected by {i}"])
            outcomes.append("ok")
        except IllegalPatchError:
            outcomes.append("illegal")
        add_memory(store, f"thread {i} adds a fact", source="test")

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["illegal", "illegal", "illegal", "ok"]
    assert len([p for p in store.load_patches() if p.operation == "supersede"]) == 1
    assert len(store.load_nodes()) == 1 + 1 + 4
    assert doctor.diagnose(store).findings == []


# ---------------------------------------------------------------- SIGKILL mid-write

KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from cclg.api import add_memory
    from cclg.ledger.writer import apply_patch
    from cclg.ledger.sessions import record_event
    from cclg.core.store import Store

    store = Store.open(sys.argv[1])
    tag = sys.argv[2]
    big = " ".join(f"word{i}" for i in range(40_000))  # ~400 kB per node file
    print("ready", flush=True)
    i = 0
    while True:
        node = add_memory(store, f"{tag} memory {i} " + big, source="killed-writer").new_nodes[0]
        store.audit("session_event", session_id="killed", padding="p" * 600_000)
        if i % 2 == 0:
            apply_patch(store, "deprecate", [node.id], reason=f"{tag} deprecates {i}")
        record_event(store, "killed", "tool_result", {"i": i, "tag": tag, "blob": "b" * 300_000})
        print("wrote", i, flush=True)
        i += 1
    """
)

# A kill leaves torn log lines, orphan temp files, targets whose patch was written but whose status
# was not yet changed (the writer deprecates, so no new node is involved), and a create patch whose
# staged node was not yet named. (The search index left behind is brought up to date by doctor.)
ALLOWED_AFTER_KILL = {doctor.LOGS, doctor.TEMP, doctor.LEDGER, doctor.PATCH_IDS}


def _check_after_kill(store_root: Path) -> None:
    store = Store.open(store_root)  # opening works whatever the killed writer was doing
    _records_parse(store)
    report = doctor.diagnose(store)
    assert [f for f in report.findings if f.check not in ALLOWED_AFTER_KILL] == []
    # Nothing is served that no patch created.
    created = {n for p in store.load_patches() for n in p.new_node_ids}
    assert {n.id for n in effective_view(store.load_nodes().values(), store.load_patches())} <= created
    doctor.repair(store)
    assert doctor.diagnose(store).findings == []
    assert list(store_root.rglob("*.tmp")) == []
    for log in store.logs():
        contents = read_jsonl(log)
        assert contents.bad_lines == [] and contents.torn_tail == b"", log


def test_sigkill_mid_write_leaves_a_store_doctor_can_repair(store: Store) -> None:
    config = json.loads((store.root / "config.json").read_text())  # the writer's memories are ~400 kB
    (store.root / "config.json").write_text(json.dumps({**config, "limits": {"memory_chars": 1_000_000}}))
    for round_, delay in enumerate((0.05, 0.1, 0.15, 0.2, 0.3, 0.12)):
        proc = subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER, str(store.root), f"round{round_}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read() if proc.stderr else b""
        if round_ == 5:  # the last writer is killed only after a whole round of writes, however slow the machine
            assert proc.stdout.readline().startswith(b"wrote"), proc.stderr.read() if proc.stderr else b""
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()  # reaped: its pid is dead, so its temp files are orphans
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else b""
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
        _check_after_kill(store.root)
    # The writers got somewhere before being killed.
    assert len(store.record_files("nodes")) >= 1


# Whole-file writes only, inside a batch (no fsync), so nearly all of the writer's time is
# spent writing and renaming files: a kill almost always lands in the middle of a write.
FILE_WRITER = textwrap.dedent(
    """
    import copy, sys
    from cclg.core.ids import content_hash, new_id
    from cclg.core.store import Store

    store = Store.open(sys.argv[1])
    node = store.read_node(sys.argv[2])
    filler = " ".join(f"w{i}" for i in range(200_000))  # ~1.5 MB per file
    versions = []
    for name in ("version a ", "version b "):
        content = name + filler
        metadata = {**node.metadata, "content_hash": content_hash(content)}
        version = copy.copy(node)
        version.content, version.metadata = content, metadata
        versions.append(version)
    blob = filler.encode()
    previous = []
    with store.batch():
        print("ready", flush=True)
        i = 0
        while True:
            store.write_node(versions[i % 2])  # replaces the file
            fresh_node = copy.copy(versions[i % 2])
            fresh_node.id = new_id("mem")
            store.write_node(fresh_node, new=True)  # publishes a new file by hard link
            raw, _ = store.write_raw(b"blob %d " % i + blob, "blob.txt")
            for path in previous:  # keep the store small: only the newest files stay
                path.unlink()
            previous = [store.node_path(fresh_node.id), store.root / raw]
            i += 1
    """
)


def test_sigkill_during_whole_file_writes_never_leaves_half_a_file(store: Store) -> None:
    # Written through the ledger alone: `add` would build the search index, and repairing it
    # after each kill would mean indexing hundreds of 1.5 MB memories (minutes, and beside the point).
    node = build_node("version start", source="test")
    create_nodes(store, [node], reason="test")
    node_id = node.id
    for delay in (0.03, 0.06, 0.09, 0.12, 0.15):
        proc = subprocess.Popen(
            [sys.executable, "-c", FILE_WRITER, str(store.root), node_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read()
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
        proc.stdout.close()
        proc.stderr.close()

        _records_parse(store)  # no half-written node, whichever moment the kill hit
        node = store.read_node(node_id)
        assert node.content.startswith(("version a ", "version b "))
        for path in (store.root / "raw").iterdir():
            if not path.name.startswith("."):
                data = path.read_bytes()
                assert data.startswith(b"blob ") and data.endswith(b" w199999"), path
        report = doctor.diagnose(store)
        # The writer publishes nodes with no patch (whole-file writes are all it is about): doctor
        # finds them, as it would the leftovers of a killed write.
        assert [f for f in report.findings if f.check not in (doctor.TEMP, doctor.LOGS, doctor.ORPHAN)] == []
        doctor.repair(store)
        assert doctor.diagnose(store).findings == []
        assert list(store.root.rglob("*.tmp")) == []
    assert store.read_node(node_id).content != "version start"  # the writer did replace the file


# A writer that SIGKILLs itself just before its Nth file write or log append: the crash
# points of a patch, hit deterministically. Files are real; only the moment of death is chosen.
CRASHING_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from cclg.api import add_memory
    from cclg.ledger.writer import apply_patch
    from cclg.core.store import Store

    root, operation, target, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    steps = []
    real_write_file, real_append = Store.write_file, Store.append
    real_stage, real_publish = Store.stage_file, Store.publish_file

    def step(name):
        steps.append(name)
        print(name, flush=True)
        if len(steps) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def write_file(self, path, data, *, replace=True):
        step(path.parent.name)
        return real_write_file(self, path, data, replace=replace)

    def append(self, path, records):
        step("append")
        return real_append(self, path, records)

    def stage_file(self, path, data, patch_id):
        step("stage-" + path.parent.name)
        return real_stage(self, path, data, patch_id)

    def publish_file(self, staged, path):
        step("publish-" + path.parent.name)
        return real_publish(self, staged, path)

    Store.write_file, Store.append = write_file, append
    Store.stage_file, Store.publish_file = stage_file, publish_file
    store = Store.open(root)
    if operation == "create":
        add_memory(store, "a memory that may never be", source="crash")
    else:
        apply_patch(store, operation, [target], reason="crash test", contents=["the new fact"])
    print("finished", flush=True)
    """
)
SUPERSEDE_STEPS = ["stage-nodes", "stage-edges", "patches", "publish-nodes", "publish-edges", "nodes", "append"]
CREATE_STEPS = ["stage-nodes", "patches", "append", "publish-nodes"]  # audited before the node is named


def _crash(store: Store, operation: str, target: str, kill_at: int) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", CRASHING_WRITER, str(store.root), operation, target, str(kill_at)],
        capture_output=True,
        timeout=60,
    )
    lines = proc.stdout.decode().split()
    if lines and lines[-1] == "finished":
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    return lines


def _temps(store: Store) -> list[tuple[str, str]]:
    return [(doctor.TEMP, store.relative(p)) for p in sorted((store.root / "tmp").iterdir())]


@pytest.mark.parametrize("kill_at", range(1, 9))
def test_supersede_killed_at_each_step(store: Store, kill_at: int) -> None:
    """A patch stages its new node and edge, writes the patch file (the commit point), names the
    staged files, then retires the target: killed anywhere, nothing of it shows before its patch,
    doctor reports what was left, and the next write (or repair) finishes what was committed."""
    target = add_memory(store, "the old fact", source="test").new_nodes[0].id
    nodes_before = set(store.load_nodes())
    steps = _crash(store, "supersede", target, kill_at)
    if kill_at <= len(SUPERSEDE_STEPS):
        assert steps == SUPERSEDE_STEPS[:kill_at]  # died just before this step
    else:
        assert steps == [*SUPERSEDE_STEPS, "finished"]
    store = Store.open(store.root)
    _records_parse(store)
    patch_written, node_named, target_written = (kill_at > n for n in (3, 4, 6))
    new_ids = set(store.load_nodes()) - nodes_before
    assert len(new_ids) == (1 if node_named else 0)  # never a new node before its patch
    expected = _temps(store)
    patches = [p for p in store.load_patches() if p.operation == "supersede"]
    assert len(patches) == (1 if patch_written else 0)
    if patch_written and not node_named:
        expected.append((doctor.PATCH_IDS, f"patches/{patches[0].id}.json"))
    if node_named and not target_written:
        expected.append((doctor.SUPERSEDES, f"nodes/{min(new_ids)}.json"))
    if patch_written and not target_written:
        expected.append((doctor.LEDGER, f"nodes/{target}.json"))
    report = doctor.diagnose(store)
    assert sorted((f.check, f.path) for f in report.findings) == sorted(expected)
    assert bool(report.refreshed) == (patch_written and kill_at <= len(SUPERSEDE_STEPS))

    # The next process that takes the store lock names the staged records of the committed patch.
    store.recover()
    if patch_written:
        assert len(set(store.load_nodes()) - nodes_before) == 1 and len(store.load_edges()) == 1
    doctor.repair(store)
    assert doctor.diagnose(store).findings == []
    nodes = store.load_nodes()
    new_ids = set(nodes) - nodes_before
    view = {n.id for n in effective_view(nodes.values(), store.load_patches())}
    if patch_written:
        assert new_ids == set(patches[0].new_node_ids)
        assert nodes[target].status == "superseded"
        assert nodes[target].relations["superseded_by"] == sorted(new_ids)
        assert target not in view and new_ids <= view
        with pytest.raises(IllegalPatchError):
            apply_patch(store, "supersede", [target], reason="again", contents=["x"])
    else:  # the patch never happened: nothing of it anywhere
        assert new_ids == set() and store.load_edges() == []
        assert nodes[target].status == "active" and target in view
        apply_patch(store, "supersede", [target], reason="again", contents=["x"])
        assert doctor.diagnose(store).findings == []


@pytest.mark.parametrize("kill_at", [1, 2, 3, 4, 5])
def test_add_memory_killed_at_each_step(store: Store, kill_at: int) -> None:
    """A create stages its node, writes its patch, then names the node: killed anywhere, nothing is
    served that no patch created, doctor reports what was left, and the next write finishes a
    committed create or clears an uncommitted one."""
    steps = _crash(store, "create", "-", kill_at)
    if kill_at <= len(CREATE_STEPS):
        assert steps == CREATE_STEPS[:kill_at]
    else:
        assert steps == [*CREATE_STEPS, "finished"]
    store = Store.open(store.root)
    _records_parse(store)
    patch_written, published = kill_at > 2, kill_at > 4
    nodes, patches = store.load_nodes(), store.load_patches()
    assert len(nodes) == (1 if published else 0)  # never a node before its patch
    assert len(patches) == (1 if patch_written else 0)
    expected = _temps(store)
    if patch_written and not published:
        expected.append((doctor.PATCH_IDS, f"patches/{patches[0].id}.json"))
    assert sorted((f.check, f.path) for f in doctor.diagnose(store).findings) == sorted(expected)
    add_memory(store, "the next write", source="test")
    assert doctor.diagnose(store).findings == []  # healed without --repair
    assert len(store.load_nodes()) == len(store.load_patches()) == (2 if patch_written else 1)
    audit = Counter(r["event"] for r in read_jsonl(store.audit_path).records)
    assert audit["node_written"] == (2 if kill_at > 3 else 1)
    assert list(store.root.rglob("*.tmp")) == []


def test_torn_audit_tail_is_found_and_repaired(store: Store) -> None:
    add_memory(store, "a memory before the tear", source="test")
    whole = store.audit_path.read_bytes()
    line = json.dumps({"event": "node_written", "node_id": "mem_torn", "padding": "x" * 5000}).encode()
    with open(store.audit_path, "ab") as handle:
        handle.write(line[: len(line) // 2])

    report = doctor.diagnose(store)
    assert [(f.check, f.path) for f in report.findings] == [(doctor.LOGS, "audit/memory_audit.jsonl")]
    assert f"({len(line) // 2} bytes)" in report.findings[0].message
    assert read_jsonl(store.audit_path).records == read_jsonl_bytes(whole)

    actions = doctor.repair(store)
    assert any("torn last line of audit/memory_audit.jsonl" in a for a in actions)
    assert doctor.diagnose(store).findings == []
    torn = store.root / "audit" / "memory_audit.jsonl.torn"
    assert torn.read_bytes() == line[: len(line) // 2] + b"\n"
    assert store.audit_path.read_bytes().startswith(whole)
    add_memory(store, "a memory after the repair", source="test")
    contents = read_jsonl(store.audit_path)
    assert contents.bad_lines == [] and contents.torn_tail == b""
    assert [r["event"] for r in contents.records].count("repair_applied") == 1


def test_torn_tail_left_by_another_process_is_set_aside_by_a_concurrent_appender(store: Store) -> None:
    """A real process writes half a line and dies; then several processes append at once."""
    script = textwrap.dedent(
        """
        import os, sys
        fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
        os.write(fd, b'{"event": "session_event", "half": "writ')
        os._exit(0)
        """
    )
    subprocess.run([sys.executable, "-c", script, str(store.audit_path)], check=True)
    assert read_jsonl(store.audit_path).torn_tail == b'{"event": "session_event", "half": "writ'
    outcomes = _run(_appender, [(str(store.root), index) for index in range(4)])
    assert sorted(outcomes) == [0, 1, 2, 3]
    contents = read_jsonl(store.audit_path)
    assert contents.bad_lines == [] and contents.torn_tail == b""
    events = Counter(r["event"] for r in contents.records)
    assert events["torn_tail_set_aside"] == 1  # exactly one appender found the tear
    assert events["session_event"] == 4 * 50
    assert (store.root / "audit" / "memory_audit.jsonl.torn").read_bytes() == (
        b'{"event": "session_event", "half": "writ\n'
    )
    assert doctor.diagnose(store).findings == []


def _appender(root: str, index: int, barrier: Any, results: Any) -> None:
    store = Store.open(root)
    barrier.wait(timeout=60)
    for n in range(50):
        store.audit("session_event", session_id="appenders", worker=index, n=n, padding="z" * (n * 100))
    results.put(index)


def read_jsonl_bytes(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.split(b"\n") if line.strip()]


@pytest.fixture(autouse=True)
def _no_leftover_children() -> Any:
    yield
    assert multiprocessing.active_children() == []


def test_readers_catch_up_with_the_files_while_an_import_writes(store: Store, tmp_path: Path) -> None:
    """Every reader brings the index up to date with the files it finds changed. Its reads and writes
    were two transactions: a row the importer indexed in between made the reader's insert fail
    ("UNIQUE constraint failed: nodes.id"), and the hook answered nothing. Real processes: an
    import-jsonl of 3,000 memories, and readers opening the index while it runs."""
    from cclg.ledger.index import open_index

    seed = tmp_path / "seed.jsonl"
    seed.write_text(
        "".join(
            json.dumps({"content": f"Zeta shard {i} serves region {i % 7}", "source": "seed"}) + "\n"
            for i in range(3000)
        )
    )
    importer = subprocess.Popen(
        [sys.executable, "-m", "cclg", "--root", str(store.root), "import-jsonl", str(seed)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    errors = []
    while importer.poll() is None:
        try:
            open_index(Store.open(store.root)).close()
        except Exception as exc:  # what a reader meets is the test's finding
            errors.append(repr(exc))
    assert importer.returncode == 0, importer.stderr.read() if importer.stderr else ""
    assert errors == []
    index = open_index(Store.open(store.root))
    try:
        assert index.db.execute("SELECT count(*) FROM nodes").fetchone()[0] == 3000
    finally:
        index.close()


RULE_SESSIONS = 8


def test_sessions_ending_the_same_failure_streak_at_once_learn_one_rule_once(store: Store) -> None:
    """Rule 12: the check (is there a rule with this key?) and the writes (the rule's memory, its
    ``learned`` line) are one step under the store lock. Eight real ``cclg-hook`` processes, each a
    session at the end of the same streak, send the passing call at once: one rule, learned once,
    not eight ``learned`` lines that would make it strong at once."""
    from cclg.hook import handle
    from cclg.learning import rules

    cwd = "/home/u/shop"

    def payload(session: str, **fields: Any) -> dict[str, Any]:
        return {
            "session_id": session,
            "transcript_path": "/t.jsonl",
            "cwd": cwd,
            "permission_mode": "default",
            **fields,
        }

    error = "Exit code 1\nE   ModuleNotFoundError: No module named 'shop.settings'\n"
    failing = {"tool_name": "Bash", "tool_input": {"command": "pytest -x"}, "error": error, "is_interrupt": False}
    sessions = [f"racer-{n}" for n in range(RULE_SESSIONS)]
    for session in sessions:  # each session's streak, pain spoke about it: the next pass teaches the rule
        for _ in range(3):
            handle("post-tool-failure", payload(session, hook_event_name="PostToolUseFailure", **failing), "claude",
                   str(store.root))  # fmt: skip
    response = {"stdout": "=== 9 passed in 0.3s ===", "stderr": "", "interrupted": False, "isImage": False}
    hook = [str(Path(sys.executable).parent / "cclg-hook"), "--root", str(store.root), "post-tool"]
    racers = [subprocess.Popen(hook, stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in sessions]
    passing = [
        json.dumps(payload(s, hook_event_name="PostToolUse", tool_name="Bash", tool_input={"command": "pytest -x"},
                           tool_response=response)).encode()
        for s in sessions
    ]  # fmt: skip
    for racer, data in zip(racers, passing, strict=True):  # each waits for its stdin: they start together
        assert racer.stdin is not None
        racer.stdin.write(data)
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.close()
    for racer in racers:
        assert racer.wait(timeout=120) == 0
        assert racer.stdout is not None and json.loads(racer.stdout.read()) is not None
        racer.stdout.close()
    learned = [r for r in read_jsonl(rules.evidence_path(store)).records if r["kind"] == "learned"]
    assert len(learned) == 1, f"{len(learned)} learned lines for one rule"
    (rule,) = rules.read_rules(store).values()
    assert rule.evidence == 1
    assert len([p for p in store.record_files("nodes")]) == 1
