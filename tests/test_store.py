"""The store on disk: where it lives, atomic whole-file writes, locked appends, raw evidence, recovery.

Every test works on real files in tmp_path; processes used to find a dead pid are real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from hashlib import sha256
from pathlib import Path

import pytest

from cclg.core.files import read_jsonl
from cclg.core.store import Store, resolve_root
from cclg.errors import StoreNotFoundError, UsageError


def temp_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.name.endswith(".tmp"))


def audit_events(store: Store) -> list[dict]:
    return read_jsonl(store.audit_path).records


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    pid = proc.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    return pid


# ---------------------------------------------------------------- location


def test_explicit_root_wins_over_cclg_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCLG_HOME", str(tmp_path / "from-env"))
    assert resolve_root(tmp_path / "explicit") == tmp_path / "explicit"
    store, new = Store.init(tmp_path / "explicit")
    assert new
    assert store.root == tmp_path / "explicit"
    assert (tmp_path / "explicit" / "config.json").is_file()
    assert not (tmp_path / "from-env").exists()


def test_cclg_home_wins_over_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCLG_HOME", str(tmp_path / "from-env"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_root(None) == tmp_path / "from-env"
    assert resolve_root("") == tmp_path / "from-env"
    store, _ = Store.init()
    assert store.root == tmp_path / "from-env"
    assert (tmp_path / "from-env" / "nodes").is_dir()
    assert not (tmp_path / "home" / ".cclg").exists()
    assert Store.open().root == tmp_path / "from-env"


def test_default_is_dot_cclg_in_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CCLG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_root() == tmp_path / "home" / ".cclg"
    store, new = Store.init()
    assert new
    assert store.root == tmp_path / "home" / ".cclg"
    assert (tmp_path / "home" / ".cclg" / "config.json").is_file()
    assert Store.open().root == tmp_path / "home" / ".cclg"


def test_empty_cclg_home_falls_back_to_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CCLG_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_root() == tmp_path / "home" / ".cclg"


def test_open_missing_folder_says_what_to_do(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(StoreNotFoundError) as info:
        Store.open(missing)
    message = str(info.value)
    assert str(missing) in message
    assert "does not exist" in message
    assert "init" in message
    assert not missing.exists()  # opening never creates


def test_open_non_store_folder_says_what_to_do(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(StoreNotFoundError) as info:
        Store.open(folder)
    message = str(info.value)
    assert "not a cclg store" in message
    assert f"--root {folder} init" in message
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_open_store_with_wrong_schema_is_refused(store: Store) -> None:
    config = store.root / "config.json"
    config.write_text(json.dumps({"schema_version": "cclg.store.v9"}))
    with pytest.raises(StoreNotFoundError, match="v9"):
        Store.open(store.root)


def test_init_refuses_non_empty_non_store_folder(tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="not a cclg store"):
        Store.init(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "mine"


def test_init_refuses_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(UsageError, match="not a folder"):
        Store.init(target)
    assert target.read_text() == "x"


def test_init_is_idempotent(tmp_path: Path) -> None:
    first, new = Store.init(tmp_path / "s")
    assert new
    config = (first.root / "config.json").read_bytes()
    (first.root / "nodes" / "keep.txt").write_text("kept")
    second, new_again = Store.init(tmp_path / "s")
    assert not new_again
    assert second.root == first.root
    assert (first.root / "config.json").read_bytes() == config
    assert (first.root / "nodes" / "keep.txt").read_text() == "kept"
    events = [r["event"] for r in audit_events(second)]
    assert events == ["store_initialized"]
    for name in ("raw", "nodes", "patches", "edges", "sessions", "audit", "active", "active/codegraphs"):
        assert (first.root / name).is_dir(), name


def test_init_into_existing_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    store, new = Store.init(tmp_path / "empty")
    assert new
    assert Store.open(tmp_path / "empty").root == store.root


# ---------------------------------------------------------------- atomic whole-file writes


def test_write_file_replaces_atomically(store: Store) -> None:
    target = store.root / "active" / "thing.json"
    store.write_file(target, b"first")
    store.write_file(target, b"second")
    assert target.read_bytes() == b"second"
    assert temp_files(store.root) == []


def test_write_file_without_replace_refuses_and_keeps_old_bytes(store: Store) -> None:
    target = store.root / "active" / "thing.json"
    store.write_file(target, b"old bytes", replace=False)
    with pytest.raises(FileExistsError):
        store.write_file(target, b"new bytes", replace=False)
    assert target.read_bytes() == b"old bytes"
    assert temp_files(store.root) == []


def test_write_file_leaves_no_temp_file_when_writing_fails(store: Store) -> None:
    target = store.root / "active" / "thing.json"
    store.write_file(target, b"old")
    with pytest.raises(TypeError):
        store.write_file(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert temp_files(store.root) == []


def test_write_file_leaves_no_temp_file_when_rename_fails(store: Store) -> None:
    target = store.root / "active" / "a-folder"
    target.mkdir()
    (target / "inside").write_text("x")
    with pytest.raises(OSError):
        store.write_file(target, b"data")
    assert (target / "inside").read_text() == "x"
    assert temp_files(store.root) == []


def test_write_file_in_missing_folder_fails_cleanly(store: Store) -> None:
    with pytest.raises(FileNotFoundError):
        store.write_file(store.root / "no-such-folder" / "x.json", b"data")
    assert temp_files(store.root) == []


def test_write_file_keeps_large_data_whole(store: Store) -> None:
    data = os.urandom(3 * 1024 * 1024)
    target = store.root / "active" / "big.bin"
    store.write_file(target, data, replace=False)
    assert sha256(target.read_bytes()).digest() == sha256(data).digest()


# ---------------------------------------------------------------- appends


def test_append_writes_one_record_per_line_in_order(store: Store) -> None:
    log = store.root / "sessions" / "s1.events.jsonl"
    store.append(log, [{"n": 0, "text": "line\nbreak"}, {"n": 1}])
    store.append(log, [{"n": 2, "text": "ünïcødé"}])
    store.append(log, [])  # nothing to write: no change
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line)["n"] for line in lines[:-1]] == [0, 1, 2]
    contents = read_jsonl(log)
    assert [r["n"] for r in contents.records] == [0, 1, 2]
    assert contents.records[0]["text"] == "line\nbreak"
    assert contents.records[2]["text"] == "ünïcødé"
    assert contents.bad_lines == []
    assert contents.torn_tail == b""


def test_read_jsonl_of_missing_log_is_empty(store: Store) -> None:
    contents = read_jsonl(store.root / "audit" / "nothing.jsonl")
    assert (contents.records, contents.bad_lines, contents.torn_tail) == ([], [], b"")


def test_torn_tail_is_reported_not_parsed(store: Store) -> None:
    log = store.root / "sessions" / "s1.events.jsonl"
    store.append(log, [{"n": 0}, {"n": 1}])
    # A killed writer left a line that happens to be valid JSON but has no newline.
    with open(log, "ab") as handle:
        handle.write(b'{"n": 2}')
    contents = read_jsonl(log)
    assert [r["n"] for r in contents.records] == [0, 1]
    assert contents.torn_tail == b'{"n": 2}'
    assert contents.bad_lines == []


def test_log_holding_only_a_torn_line(store: Store) -> None:
    log = store.root / "sessions" / "s1.events.jsonl"
    log.write_bytes(b'{"half": ')
    contents = read_jsonl(log)
    assert contents.records == []
    assert contents.torn_tail == b'{"half": '


def test_next_append_sets_the_torn_tail_aside(store: Store) -> None:
    log = store.audit_path
    before = log.read_bytes()
    fragment = b'{"event": "node_written", "node_id": "mem_half'
    with open(log, "ab") as handle:
        handle.write(fragment)
    store.audit("repair_applied", actions=["after the tear"])
    torn = log.with_name(log.name + ".torn")
    assert torn.read_bytes() == fragment + b"\n"
    assert log.read_bytes().startswith(before)
    contents = read_jsonl(log)
    assert contents.torn_tail == b""
    assert contents.bad_lines == []
    events = [r["event"] for r in contents.records]
    assert events == ["store_initialized", "torn_tail_set_aside", "repair_applied"]
    set_aside = contents.records[1]
    assert set_aside["path"] == "audit/memory_audit.jsonl"
    assert set_aside["bytes"] == len(fragment)
    assert contents.records[2]["actions"] == ["after the tear"]
    # A second tear is appended to the same .torn file, not over it.
    with open(log, "ab") as handle:
        handle.write(b"second")
    store.audit("repair_applied", actions=["again"])
    assert torn.read_bytes() == fragment + b"\nsecond\n"
    assert read_jsonl(log).torn_tail == b""


def test_torn_tail_longer_than_one_read_block(store: Store) -> None:
    log = store.root / "sessions" / "s1.events.jsonl"
    store.append(log, [{"n": 0}])
    fragment = b'{"big": "' + b"y" * 200_000
    with open(log, "ab") as handle:
        handle.write(fragment)
    store.append(log, [{"n": 1}])
    assert log.with_name(log.name + ".torn").read_bytes() == fragment + b"\n"
    contents = read_jsonl(log)
    assert [r.get("n") for r in contents.records] == [0, None, 1]
    assert contents.records[1]["event"] == "torn_tail_set_aside"
    assert contents.records[1]["bytes"] == len(fragment)


def test_torn_log_without_any_whole_line(store: Store) -> None:
    log = store.root / "sessions" / "s1.events.jsonl"
    log.write_bytes(b"x" * 70_000)
    store.append(log, [{"n": 0}])
    contents = read_jsonl(log)
    assert [r["event"] if "event" in r else r["n"] for r in contents.records] == ["torn_tail_set_aside", 0]
    assert log.with_name(log.name + ".torn").read_bytes() == b"x" * 70_000 + b"\n"


def test_bad_line_in_the_middle_is_reported_by_number(store: Store) -> None:
    log = store.root / "sessions" / "s1.events.jsonl"
    log.write_bytes(b'{"n": 0}\n{"n": 1, broken\n\n{"n": 2}\n[1, 2]\n\xff\xfe\n{"n": 3}\n')
    contents = read_jsonl(log)
    assert [r["n"] for r in contents.records] == [0, 2, 3]
    assert [number for number, _ in contents.bad_lines] == [2, 5, 6]
    assert "not JSON" in contents.bad_lines[0][1]
    assert contents.bad_lines[1][1] == "not a JSON object"
    assert contents.torn_tail == b""
    # Appending does not touch whole lines, bad or not.
    store.append(log, [{"n": 4}])
    again = read_jsonl(log)
    assert [number for number, _ in again.bad_lines] == [2, 5, 6]
    assert [r["n"] for r in again.records] == [0, 2, 3, 4]
    assert not log.with_name(log.name + ".torn").exists()


# ---------------------------------------------------------------- raw evidence


class _AnyTime:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other[:2] == "20" and "T" in other

    def __repr__(self) -> str:
        return "<any timestamp>"


ANY_TIME = _AnyTime()


def test_write_raw_keeps_bytes_verbatim(store: Store) -> None:
    data = b"\x00\xffbinary\r\n\xe2\x9c\x93 not normalised  \n"
    relative, written = store.write_raw(data, "capture.bin")
    assert written
    path = store.root / relative
    assert path.parent == store.root / "raw"
    assert path.read_bytes() == data
    digest = sha256(data).hexdigest()
    assert path.name == f"capture-{digest[:12]}.bin"
    raw_audit = [r for r in audit_events(store) if r["event"] == "raw_written"]
    assert raw_audit == [
        {"event": "raw_written", "path": relative, "sha256": digest, "bytes": len(data), "created_at": ANY_TIME}
    ]


def test_same_bytes_twice_are_stored_once(store: Store) -> None:
    first, written = store.write_raw(b"evidence", "note.md")
    second, written_again = store.write_raw(b"evidence", "note.md")
    assert written
    assert not written_again
    assert first == second
    assert [p.name for p in (store.root / "raw").iterdir()] == [Path(first).name]
    assert sum(r["event"] == "raw_written" for r in audit_events(store)) == 1


def test_different_bytes_with_same_name_never_overwrite(store: Store) -> None:
    first, _ = store.write_raw(b"version one", "note.md")
    second, written = store.write_raw(b"version two", "note.md")
    assert written
    assert first != second
    assert (store.root / first).read_bytes() == b"version one"
    assert (store.root / second).read_bytes() == b"version two"
    assert len(list((store.root / "raw").iterdir())) == 2
    assert sum(r["event"] == "raw_written" for r in audit_events(store)) == 2


def test_raw_name_taken_by_other_bytes_gets_the_long_name(store: Store) -> None:
    data = b"the real evidence"
    digest = sha256(data).hexdigest()
    squatter = store.root / "raw" / f"note-{digest[:12]}.md"
    squatter.write_bytes(b"someone else")
    relative, written = store.write_raw(data, "note.md")
    assert written
    assert relative == f"raw/note-{digest}.md"
    assert squatter.read_bytes() == b"someone else"
    assert (store.root / relative).read_bytes() == data
    assert temp_files(store.root) == []


@pytest.mark.parametrize(
    "name",
    [
        "../../etc/passwd",
        "../../../../../../tmp/evil.json",
        "a/b",
        "/absolute/path.txt",
        ".hidden",
        "..",
        ".",
        "",
        "résumé 📄.txt",
        "名前.md",
        "spaces and\nnewline\x00nul.txt",
        "x" * 500 + ".json",
        "trailing.",
        "file.weird ext!!",
    ],
)
def test_raw_names_land_safely_inside_raw(store: Store, name: str, tmp_path: Path) -> None:
    data = f"evidence for {name!r}".encode()
    relative, written = store.write_raw(data, name)
    assert written
    raw = (store.root / "raw").resolve()
    path = (store.root / relative).resolve()
    assert path.parent == raw
    assert not path.name.startswith(".")
    assert path.read_bytes() == data
    assert len(path.name) <= 255
    assert all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in path.name)
    # Nothing was written anywhere else: raw/ holds one file, and nothing appeared outside the store.
    assert [p.resolve() for p in raw.iterdir()] == [path]
    outside = [p for p in tmp_path.rglob("*") if store.root not in p.parents and p != store.root]
    assert outside == []
    assert not (store.root / "etc").exists()
    assert [r["path"] for r in audit_events(store) if r["event"] == "raw_written"] == [relative]


# ---------------------------------------------------------------- recovery


def test_recover_removes_orphan_temp_files_of_dead_writers(store: Store) -> None:
    gone = dead_pid()
    orphan = store.root / "nodes" / f".mem_x.json.{gone}.abcd.tmp"
    orphan.write_bytes(b'{"half": ')
    top_orphan = store.root / f".config.json.{gone}.0f.tmp"
    top_orphan.write_bytes(b"")
    live = store.root / "patches" / f".patch_x.json.{os.getpid()}.beef.tmp"
    live.write_bytes(b'{"being": "written"}')
    not_ours = store.root / "nodes" / ".notes.tmp"
    not_ours.write_bytes(b"not a cclg temp file")

    assert store.orphan_temp_files() == sorted([orphan, top_orphan])
    actions = store.recover()
    assert not orphan.exists()
    assert not top_orphan.exists()
    assert live.read_bytes() == b'{"being": "written"}'
    assert not_ours.exists()
    assert sorted(actions) == sorted(
        [
            f"removed orphan temp file nodes/.mem_x.json.{gone}.abcd.tmp",
            f"removed orphan temp file .config.json.{gone}.0f.tmp",
        ]
    )
    repairs = [r for r in audit_events(store) if r["event"] == "repair_applied"]
    assert [r["actions"] for r in repairs] == [actions]
    # Nothing left to do: a second recover is a no-op and writes no audit record.
    assert store.recover() == []
    assert len([r for r in audit_events(store) if r["event"] == "repair_applied"]) == 1


def test_recover_sets_torn_tails_of_every_log_aside(store: Store) -> None:
    events_log = store.root / "sessions" / "s1.events.jsonl"
    store.append(events_log, [{"n": 0}])
    with open(events_log, "ab") as handle:
        handle.write(b'{"n": 1')
    with open(store.audit_path, "ab") as handle:
        handle.write(b'{"event": "raw_wri')
    actions = store.recover()
    assert len(actions) == 2
    assert all("torn last line" in a for a in actions)
    assert read_jsonl(events_log).torn_tail == b""
    assert read_jsonl(store.audit_path).torn_tail == b""
    assert (store.root / "sessions" / "s1.events.jsonl.torn").read_bytes() == b'{"n": 1\n'
    assert (store.root / "audit" / "memory_audit.jsonl.torn").read_bytes() == b'{"event": "raw_wri\n'
    assert [r["n"] for r in read_jsonl(events_log).records] == [0]
    assert audit_events(store)[-1]["event"] == "repair_applied"


def test_recover_on_healthy_store_does_nothing(store: Store) -> None:
    audit_before = store.audit_path.read_bytes()
    assert store.recover() == []
    assert store.audit_path.read_bytes() == audit_before


def test_the_next_lock_names_what_a_killed_writer_staged_for_a_patch_on_disk(store: Store) -> None:
    """tmp/ holds what killed writers left: a record staged for a committed patch is finished, the
    rest deleted, by whichever process takes the store lock next; live writers' files stay."""
    gone = dead_pid()
    tmp = store.root / "tmp"
    (store.root / "patches" / "patch_committed.json").write_text("{}")
    committed = tmp / f".patch_committed.mem_kept.json.{gone}.aa.tmp"
    committed.write_text('{"id": "mem_kept"}')
    uncommitted = tmp / f".patch_never.mem_lost.json.{gone}.bb.tmp"
    uncommitted.write_text('{"id": "mem_lost"}')
    plain = tmp / f".blob-0123.txt.{gone}.cc.tmp"
    plain.write_text("half a raw file")
    live = tmp / f".patch_never.mem_busy.json.{os.getpid()}.dd.tmp"
    live.write_text("being written")
    with store.lock():
        healed = store.healed
    assert (store.root / "nodes" / "mem_kept.json").read_text() == '{"id": "mem_kept"}'
    assert sorted(p.name for p in tmp.iterdir()) == [live.name]
    assert not (store.root / "nodes" / "mem_lost.json").exists()
    assert sorted(healed) == sorted(
        [
            "finished an interrupted patch: named nodes/mem_kept.json",
            f"removed orphan temp file tmp/{uncommitted.name}",
            f"removed orphan temp file tmp/{plain.name}",
        ]
    )
    assert audit_events(store)[-1]["actions"] == healed
    with store.lock():
        assert store.healed == []  # nothing left: no audit record either
    assert audit_events(store)[-1]["actions"] == healed


def test_writes_go_through_tmp_and_leave_nothing_there(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    published: list[tuple[Path, Path]] = []  # (temp file, final name) of every rename or link
    for name in ("replace", "link"):
        real = getattr(os, name)

        def record(src: str | Path, dst: str | Path, *args: object, _real=real, **kwargs: object) -> None:
            published.append((Path(src), Path(dst)))
            _real(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, name, record)
    thing = store.root / "active" / "thing.json"
    store.write_file(thing, b"data")
    raw, new = store.write_raw(b"evidence", "note.txt")
    assert new and thing.read_bytes() == b"data" and (store.root / raw).read_bytes() == b"evidence"
    assert {dst for _, dst in published} >= {thing, store.root / raw}
    assert all(src.parent == store.root / "tmp" for src, dst in published if dst in (thing, store.root / raw))
    assert list((store.root / "tmp").iterdir()) == []


# ---------------------------------------------------------------- layout, strays and modes


def git_repository(folder: Path) -> Path:
    folder.mkdir()
    (folder / "app.py").write_text("def main():\n    return 1\n")
    git = ["git", "-C", str(folder), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    return folder


def test_open_creates_the_folders_a_reference_store_lacks(store: Store, tmp_path: Path) -> None:
    """The reference implementation's `init` makes no active/codegraphs/ (nor tmp/): `cclg code-index`
    died with an uncaught sqlite3.OperationalError."""
    from click.testing import CliRunner

    from cclg.cli import cli

    for name in ("active/codegraphs", "tmp"):
        (store.root / name).rmdir()
    opened = Store.open(store.root)
    for name in ("active/codegraphs", "tmp"):
        assert (opened.root / name).is_dir()
        assert (opened.root / name).stat().st_mode & 0o777 == 0o700
    (store.root / "active" / "codegraphs").rmdir()
    repo = git_repository(tmp_path / "repo")
    result = CliRunner().invoke(cli, ["--root", str(store.root), "code-index", str(repo)])
    assert result.exit_code == 0, result.output


def test_files_that_are_no_records_are_ignored_and_listed(store: Store) -> None:
    from cclg.api import add_memory

    node = add_memory(store, "the build uses gradle", source="test").new_nodes[0]
    original = store.node_path(node.id)
    conflict = original.with_name(f"{node.id}.sync-conflict-20260101-120000-ABCDEFG.json")
    conflict.write_bytes(original.read_bytes().replace(b"gradle", b"maven"))
    (store.root / "nodes" / "notes.json").mkdir()
    (store.root / "patches" / "Copy of patch.json").write_text("{}")
    assert store.record_files("nodes") == [original]
    assert list(store.load_nodes()) == [node.id]
    assert store.load_nodes()[node.id].content == "the build uses gradle"
    assert [p.name for p in store.stray_files("nodes")] == [conflict.name, "notes.json"]
    assert [p.name for p in store.stray_files("patches")] == ["Copy of patch.json"]
    assert store.stray_files("edges") == []


def test_a_session_copy_under_another_name_is_left_out(store: Store) -> None:
    from cclg.ledger.sessions import start_session

    session = start_session(store, "s1", agent="claude")
    copy = store.root / "sessions" / "s1.sync-conflict-20260101-120000-ABCDEFG.json"
    copy.write_bytes(store.session_path("s1").read_bytes())
    assert [s.id for s in store.load_sessions()] == [session.id]


def all_modes(root: Path) -> dict[str, int]:
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            found[path.relative_to(root).as_posix()] = path.lstat().st_mode & 0o777
    return found


def test_every_store_file_is_owners_only(tmp_path: Path) -> None:
    """index.sqlite and the code graph's SQLite files were created 0644 (the umask's default)."""
    from cclg.api import add_memory, code_index
    from cclg.ledger.sessions import record_event
    from cclg.maintenance.doctor import repair
    from cclg.retrieval import semantic
    from cclg.retrieval.query import Where
    from cclg.retrieval.rendering import fit_markdown
    from cclg.retrieval.search import search
    from cclg.retrieval.selection import Budget, PackRequest

    repo = git_repository(tmp_path / "repo")
    old_umask = os.umask(0o022)
    try:
        store, _ = Store.init(tmp_path / "store")
        add_memory(store, "the build uses gradle", source="test")
        search(store, "gradle")
        fit_markdown(store, PackRequest("gradle", where=Where(session_id="s1"), budget=Budget(max_chars=2000)))
        record_event(store, "s1", "user_prompt", {"prompt": "gradle?"})
        code_index(store, repo)
        semantic._open_vectors(store).close()  # the semantic helper's vectors
        with open(store.audit_path, "ab") as handle:
            handle.write(b'{"torn')
        repair(store)
    finally:
        os.umask(old_umask)
    modes = all_modes(store.root)
    assert {"index.sqlite", "semantic.sqlite", "active/codegraphs", "audit/memory_audit.jsonl.torn"} <= set(modes)
    assert any(name.endswith(".search.sqlite") for name in modes)
    loose = {name: oct(mode) for name, mode in modes.items() if mode & 0o077}
    assert loose == {}


def test_a_folder_made_for_the_store_becomes_owners_only(tmp_path: Path) -> None:
    (tmp_path / "made").mkdir(mode=0o755)
    (tmp_path / "made").chmod(0o755)
    store, _ = Store.init(tmp_path / "made")
    assert store.root.stat().st_mode & 0o777 == 0o700


def test_a_damaged_code_graph_is_a_clear_error(store: Store, tmp_path: Path) -> None:
    from cclg.api import code_index
    from cclg.codegraph.stored import graph_path, read_graph, repository_root
    from cclg.errors import UsageError

    repo = git_repository(tmp_path / "repo")
    code_index(store, repo)
    root = repository_root(repo)
    graph_path(store, root).write_bytes(b"{broken")
    with pytest.raises(UsageError, match="damaged; run `cclg code-index"):
        read_graph(store, root)
    code_index(store, repo)
    assert read_graph(store, root)["root"] == str(root)


def test_code_index_rebuilds_a_damaged_code_search_index(store: Store, tmp_path: Path) -> None:
    """It died with "sqlite3.DatabaseError: vtable constructor failed"."""
    from cclg.api import code_index
    from cclg.codegraph.rank import rank_files
    from cclg.codegraph.stored import read_graph, repository_root, search_index_path
    from cclg.errors import UsageError

    repo = git_repository(tmp_path / "repo")
    code_index(store, repo)
    root = repository_root(repo)
    index = search_index_path(store, root)
    data = bytearray(index.read_bytes())
    data[4096:] = b"\xde\xad" * ((len(data) - 4096) // 2)
    index.write_bytes(bytes(data))
    with pytest.raises(
        UsageError,
        match=r"search index .* was damaged .* and is deleted: `cclg code-index` on the repository builds it again",
    ):
        rank_files(index, "app")  # what `cclg code-search` and the hook read: a clear error, not a traceback
    code_index(store, repo)
    assert [f["path"] for f in read_graph(store, root)["files"]] == ["app.py"]
    assert index.stat().st_mode & 0o777 == 0o600
