"""Team memory over git (``cclg sync``, issue 30): real git, real processes, a bare remote on local disk.

What never leaves is shown by reading the bare remote's own tree with git; trust is capped on arrival;
who wrote a record is in ``cite``; two patches written apart over the same memory surface as a conflict
on both sides and ``cclg resolve`` settles it everywhere; a sync killed with SIGKILL is finished by the next.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cclg.core.ids import content_hash
from cclg.core.store import Store

PROJECT = "project=git:0123456789abcdef0123456789abcdef01234567"
ENV_KEYS = ("HOME", "CCLG_HOME", "CCLG_SEMANTIC", "PATH")


def cclg(root: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """``cclg --root ROOT ARGS`` in a process of its own; its exit code must be ``code``."""
    env = {key: os.environ[key] for key in ENV_KEYS if key in os.environ}
    done = subprocess.run(
        [sys.executable, "-m", "cclg", "--root", str(root), *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == code, (args, done.returncode, done.stdout, done.stderr)
    return done


def js(root: Path, *args: str) -> Any:
    return json.loads(cclg(root, *args, "--json").stdout)


def pack(root: Path, query: str) -> Any:
    return json.loads(cclg(root, "pack", "--query", query, "--format", "json").stdout)


def add(root: Path, content: str, *extra: str) -> str:
    return str(js(root, "add", "--content", content, "--source", "user", "--scope", PROJECT, *extra)["node"]["id"])


def bare(tmp_path: Path) -> Path:
    path = tmp_path / "team.git"
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def remote_files(remote: Path) -> dict[str, bytes]:
    """Every file on the remote's branch, read with git from the bare repository itself."""
    listed = subprocess.run(
        ["git", "--git-dir", str(remote), "ls-tree", "-r", "--name-only", "cclg/memory"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    show = ["git", "--git-dir", str(remote), "show"]
    return {
        name: subprocess.run([*show, f"cclg/memory:{name}"], capture_output=True, check=True).stdout for name in listed
    }


def doctor_ok(root: Path) -> dict[str, Any]:
    report: dict[str, Any] = js(root, "doctor")
    assert report["ok"], report["findings"]
    return report


@pytest.fixture
def team(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two stores, each with the bare remote ``team`` (trusted), and the remote."""
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / ".gitconfig").write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n")
    remote = bare(tmp_path)
    stores = []
    for name in ("a", "b"):
        root = tmp_path / name
        cclg(root, "init")
        cclg(root, "remote", "add", "team", str(remote), "--trust", "trusted")
        stores.append(root)
    return stores[0], stores[1], remote


def test_remote_commands_add_list_remove_and_refuse_what_is_wrong(tmp_path: Path) -> None:
    root = tmp_path / "s"
    cclg(root, "init")
    cclg(root, "sync", code=2)  # no remote yet
    added = js(root, "remote", "add", "team", str(tmp_path / "r.git"))
    assert added == {
        "name": "team",
        "url": str(tmp_path / "r.git"),
        "trust": "untrusted",
        "raw": False,
        "branch": "cclg/memory",
    }
    cclg(root, "remote", "add", "team", "elsewhere", code=2)  # the name is taken
    cclg(root, "remote", "add", "../x", "url", code=2)
    cclg(root, "remote", "add", "ci", "--upload-pack=touch", code=2)
    cclg(root, "remote", "add", "ci", str(tmp_path / "r.git"), "--raw", "--trust", "trusted")
    assert [r["name"] for r in js(root, "remote", "list")["remotes"]] == ["ci", "team"]
    cclg(root, "sync", code=2)  # two remotes: say which
    cclg(root, "sync", "team", code=9)  # no repository there: git refuses, exit 9
    cclg(root, "remote", "remove", "nope", code=5)
    cclg(root, "remote", "remove", "team")
    assert [r["name"] for r in js(root, "remote", "list")["remotes"]] == ["ci"]
    doctor_ok(root)


def plant_secret(root: Path, memory_id: str) -> None:
    """A secret in a stored memory, as an older detector or another implementation may have let in."""
    path = root / "nodes" / f"{memory_id}.json"
    data = json.loads(path.read_text())
    data["content"] = "deploy with AKIAIOSFODNN7EXAMPLF and the usual flags"
    data["metadata"]["content_hash"] = content_hash(data["content"])
    path.write_text(json.dumps(data, indent=2))


def cite_raw(root: Path, memory_id: str, raw_name: str, length: int) -> None:
    path = root / "nodes" / f"{memory_id}.json"
    data = json.loads(path.read_text())
    data["source"]["raw_spans"] = [{"source_id": raw_name, "turn_id": None, "char_start": 0, "char_end": length}]
    path.write_text(json.dumps(data, indent=2))


def test_what_never_leaves_the_machine_is_not_on_the_remote(team: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b, remote = team
    shared = add(a, "the payments service listens on 7443")
    session = js(
        a,
        "add",
        "--content",
        "SESSIONONLY tried port 9000",
        "--source",
        "user",
        "--scope",
        PROJECT,
        "--scope",
        "session=s-1",
    )["node"]["id"]
    add(a, "CONFIDENTIALTEXT the acquisition closes in May", "--sensitivity", "confidential")
    add(a, "RESTRICTEDTEXT the payroll export lives on host 12", "--sensitivity", "restricted")
    js(a, "add", "--content", "GLOBALTEXT I like short answers", "--source", "user", "--global")
    secret = add(a, "deploy with the usual flags")
    plant_secret(a, secret)
    (tmp_path / "evidence.txt").write_text("RAWTEXT the user said so")
    raw_name = js(a, "raw", str(tmp_path / "evidence.txt"))["path"].removeprefix("raw/")
    cite_raw(a, shared, raw_name, 10)
    cclg(a, "sync")
    files = remote_files(remote)
    everything = b"".join(files.values())
    for planted in (
        b"SESSIONONLY",
        b"CONFIDENTIALTEXT",
        b"RESTRICTEDTEXT",
        b"GLOBALTEXT",
        b"AKIAIOSFODNN7",
        b"RAWTEXT",
    ):
        assert planted not in everything
    assert f"nodes/{shared}.json" in files and f"nodes/{session}.json" not in files
    assert f"nodes/{secret}.json" not in files
    assert not [name for name in files if name.startswith(("raw/", "audit/", "sessions/"))]
    assert sorted({name.partition("/")[0] for name in files}) == ["nodes", "patches"]
    # raw evidence goes only where it is asked for, and never with a secret in it
    cclg(a, "remote", "add", "evidence", str(bare(tmp_path / "e")), "--raw")
    cclg(a, "sync", "evidence")
    with_raw = remote_files(tmp_path / "e" / "team.git")
    assert [name for name in with_raw if name.startswith("raw/")] == [f"raw/{raw_name}"]
    assert b"AKIAIOSFODNN7" not in b"".join(with_raw.values())
    # and the teammate gets the shared memory, healthy, with nothing of the rest
    cclg(b, "sync")
    assert [hit["node"]["content"] for hit in js(b, "search", "payments")] == ["the payments service listens on 7443"]
    assert js(b, "search", "CONFIDENTIALTEXT") == []
    doctor_ok(a)
    doctor_ok(b)


def test_raw_evidence_that_arrives_keeps_its_digest_and_doctor_checks_its_bytes(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Raw evidence that comes in from a ``--raw`` remote is audited as kept, with its SHA-256, like evidence
    kept here: ``cclg doctor`` finds a byte of it changed afterwards."""
    a, b, _ = team
    (tmp_path / "evidence.txt").write_text("the user said the payments service listens on 7443")
    memory = add(a, "the payments service listens on 7443")
    raw_name = js(a, "raw", str(tmp_path / "evidence.txt"))["path"].removeprefix("raw/")
    cite_raw(a, memory, raw_name, 10)
    evidence = bare(tmp_path / "e")
    cclg(a, "remote", "add", "evidence", str(evidence), "--raw", "--trust", "trusted")
    cclg(a, "sync", "evidence")
    cclg(b, "remote", "add", "evidence", str(evidence), "--raw", "--trust", "trusted")
    cclg(b, "sync", "evidence")
    arrived = b / "raw" / raw_name
    audit = [json.loads(line) for line in (b / "audit" / "memory_audit.jsonl").read_text().splitlines()]
    kept = [r for r in audit if r["event"] == "raw_written" and r["path"] == f"raw/{raw_name}"]
    assert [(r["sha256"], r["synced"]) for r in kept] == [(hashlib.sha256(arrived.read_bytes()).hexdigest(), True)]
    doctor_ok(b)
    arrived.write_bytes(arrived.read_bytes().replace(b"7443", b"7444"))
    report = json.loads(cclg(b, "doctor", "--json", code=1).stdout)
    assert [f["path"] for f in report["findings"]] == [f"raw/{raw_name}"], report["findings"]


def test_incoming_trust_is_capped_at_the_remote_and_provenance_is_in_cite(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, _, remote = team
    pinned = add(a, "never run the migrations by hand", "--trust", "trusted", "--retention", "required")
    cclg(a, "sync")
    cautious = tmp_path / "c"
    cclg(cautious, "init")
    cclg(cautious, "remote", "add", "team", str(remote))  # default: untrusted
    cclg(cautious, "sync")
    node = js(cautious, "show", pinned)
    assert node["metadata"]["trust"] == "untrusted" and node["metadata"]["retention"] == "preferred"
    assert [m for m in pack(cautious, "migrations")["memory_nodes"] if m.get("pinned")] == []
    trusting = tmp_path / "d"
    cclg(trusting, "init")
    cclg(trusting, "remote", "add", "team", str(remote), "--trust", "trusted")
    cclg(trusting, "sync")
    node = js(trusting, "show", pinned)
    assert node["metadata"]["trust"] == "trusted" and node["metadata"]["retention"] == "required"
    cited = js(cautious, "cite", pinned)["synced"]
    origin = json.loads((a / "sync" / "store.json").read_text())["store_id"]
    assert cited["author"] == "Ada Lovelace <ada@example.org>" and cited["store"] == origin
    assert cited["remote"] == "team" and len(cited["commit"]) == 40
    doctor_ok(cautious)


def test_dry_run_lists_both_ways_and_changes_neither_side(team: tuple[Path, Path, Path]) -> None:
    a, b, remote = team
    first = add(a, "we moved from webpack to Vite")
    cclg(a, "sync")
    mine = add(b, "the payments service listens on 7443")
    head = subprocess.run(["git", "--git-dir", str(remote), "rev-parse", "cclg/memory"], capture_output=True, text=True)
    before = sorted(p.name for p in (b / "nodes").iterdir())
    plan = js(b, "sync", "--dry-run")
    assert f"nodes/{first}.json" in plan["incoming"] and f"nodes/{mine}.json" in plan["outgoing"]
    assert sorted(p.name for p in (b / "nodes").iterdir()) == before
    after = subprocess.run(
        ["git", "--git-dir", str(remote), "rev-parse", "cclg/memory"], capture_output=True, text=True
    )
    assert head.stdout == after.stdout


def test_records_are_shared_even_where_the_branch_ignores_their_names(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Each record is added to the clone by its path as it is (``git update-index``), never matched as a
    pathspec: a teammate's ``.gitignore`` on the branch cannot keep a record out (``git add`` refused
    the whole sync), and the first sync of a large store does not match every file against every path."""
    a, b, remote = team
    add(a, "we moved from webpack to Vite")
    cclg(a, "sync")
    work = tmp_path / "teammate"
    git = ["git", "-c", "user.name=T", "-c", "user.email=t@example.org", "-C", str(work)]
    subprocess.run(["git", "clone", "-q", "--branch", "cclg/memory", str(remote), str(work)], check=True)
    (work / ".gitignore").write_text("*.json\n")
    subprocess.run([*git, "add", ".gitignore"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "ignore json"], check=True)
    subprocess.run([*git, "push", "-q", "origin", "cclg/memory"], check=True)
    second = add(a, "the payments service listens on 7443")
    cclg(a, "sync")
    assert f"nodes/{second}.json" in remote_files(remote)
    cclg(b, "sync")
    assert "7443" in json.dumps(pack(b, "which port does the payments service listen on"))


def conflicted(root: Path) -> set[str]:
    return {entry["node"]["id"] for entry in js(root, "conflicts")}


def test_two_machines_changing_one_memory_surface_a_conflict_and_resolve_syncs(team: tuple[Path, Path, Path]) -> None:
    a, b, _ = team
    port = add(a, "the payments service listens on 7443", "--key", "payments.port")
    cclg(a, "sync")
    cclg(b, "sync")
    refined = js(
        a,
        "patch",
        "refine",
        "--target",
        port,
        "--content",
        "the payments service listens on 7443 (TLS)",
        "--reason",
        "tls",
    )["patch"]["new_node_ids"][0]
    moved = js(
        b,
        "patch",
        "supersede",
        "--target",
        port,
        "--content",
        "the payments service listens on 8443",
        "--reason",
        "moved",
    )["patch"]["new_node_ids"][0]
    for root in (a, b, a):
        cclg(root, "sync")
    assert conflicted(a) == conflicted(b) == {refined, moved}
    packed = pack(b, "which port does the payments service listen on")
    assert [m["id"] for m in packed["memory_nodes"]] == []  # neither successor is chosen silently
    assert {entry["id"]: entry["status"] for entry in packed["suppressed_nodes"]}[refined] == "conflict_pending"
    assert js(a, "doctor")["ok"] and js(b, "doctor")["ok"]
    assert any("open conflict" in n["message"] for n in js(a, "doctor")["notices"])
    settled = js(
        b,
        "resolve",
        refined,
        moved,
        "--content",
        "the payments service listens on 8443 (TLS)",
        "--reason",
        "asked the team",
    )["patch"]["new_node_ids"][0]
    for root in (b, a):
        cclg(root, "sync")
    assert conflicted(a) == conflicted(b) == set()
    assert [hit["id"] for hit in js(a, "search", "payments service")] == [settled]
    doctor_ok(a)
    doctor_ok(b)


def test_a_rollback_under_a_patch_built_on_it_is_a_conflict_not_a_lost_change(team: tuple[Path, Path, Path]) -> None:
    a, b, _ = team
    first = add(a, "CI runs on the self-hosted runners")
    done = js(a, "patch", "supersede", "--target", first, "--content", "CI runs on GitHub's runners", "--reason", "r")
    moved, patch_id = done["patch"]["new_node_ids"][0], done["patch"]["id"]
    cclg(a, "sync")
    cclg(b, "sync")
    built = js(
        b, "patch", "refine", "--target", moved, "--content", "CI runs on GitHub's large runners", "--reason", "bigger"
    )["patch"]["new_node_ids"][0]
    js(a, "rollback", patch_id)
    for root in (a, b, a):
        cclg(root, "sync")
    assert conflicted(a) == conflicted(b) == {first, built}
    doctor_ok(a)
    doctor_ok(b)


def test_a_sync_killed_mid_way_is_finished_by_the_next(team: tuple[Path, Path, Path]) -> None:
    a, b, remote = team
    lines = "".join(
        json.dumps(
            {
                "content": f"fact number {i} about the build",
                "source": "user",
                "scope": {"project": PROJECT.partition("=")[2]},
            }
        )
        + "\n"
        for i in range(400)
    )
    (a.parent / "facts.jsonl").write_text(lines)
    cclg(a, "import-jsonl", str(a.parent / "facts.jsonl"))
    env = {key: os.environ[key] for key in ENV_KEYS if key in os.environ}
    for root, delay in ((a, 0.6), (a, 1.0), (b, 0.7), (b, 1.1)):
        process = subprocess.Popen([sys.executable, "-m", "cclg", "--root", str(root), "sync"], env=env)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        cclg(root, "sync")
    cclg(a, "sync")
    cclg(b, "sync")
    assert len(list((b / "nodes").iterdir())) == 400
    assert sorted(p.name for p in (a / "patches").iterdir()) == sorted(p.name for p in (b / "patches").iterdir())
    fsck = subprocess.run(["git", "--git-dir", str(remote), "fsck", "--no-progress"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr
    doctor_ok(a)
    doctor_ok(b)
    for root in (a, b):
        clone = Store.open(root).sync_clone("team")
        status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True)
        assert status.stdout == ""


def test_a_link_or_a_bad_record_a_remote_holds_is_never_taken_in(team: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b, remote = team
    add(a, "the payments service listens on 7443")
    cclg(a, "remote", "remove", "team")
    cclg(a, "remote", "add", "team", str(remote), "--trust", "trusted", "--raw")
    cclg(a, "sync")
    private = tmp_path / "private.txt"
    private.write_text("PRIVATEKEYTEXT")
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", "-b", "cclg/memory", str(remote), str(work)], check=True)
    (work / "raw").mkdir(exist_ok=True)
    (work / "raw" / "notes-0123456789ab.txt").symlink_to(private)
    (work / "nodes" / "mem_01m8zzzzzzzzzzzzzzzzzzzzzz.json").write_text('{"not": "a record"}')
    subprocess.run(["git", "add", "-A"], cwd=work, check=True)
    commit = ["git", "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "planted"]
    subprocess.run(commit, cwd=work, check=True)
    subprocess.run(["git", "push", "-q", "origin", "cclg/memory"], cwd=work, check=True)
    cclg(b, "remote", "remove", "team")
    cclg(b, "remote", "add", "team", str(remote), "--raw")
    report = js(b, "sync")
    assert "nodes/mem_01m8zzzzzzzzzzzzzzzzzzzzzz.json" in report["refused"]
    assert not any(b"PRIVATEKEYTEXT" in path.read_bytes() for path in (b / "raw").iterdir())
    assert not (b / "nodes" / "mem_01m8zzzzzzzzzzzzzzzzzzzzzz.json").exists()
    doctor_ok(b)


def test_settling_reads_each_patch_once_however_many_memories_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import names all its memories in one patch: settling them takes that patch's names once, not
    once per memory (quadratic: the first sync of 100,000 imported memories did not end)."""
    from cclg.api import import_jsonl
    from cclg.sync import incoming

    store, _ = Store.init(tmp_path / "s")
    lines = "".join(
        json.dumps({"content": f"note {i}: keep port {7000 + i}", "source": "user"}) + "\n" for i in range(40)
    )
    imported = import_jsonl(store, lines.encode(), name="notes")
    assert len(imported.memory_ids) == 40
    seen: list[str] = []
    real = incoming.touched_ids
    monkeypatch.setattr(incoming, "touched_ids", lambda patch: seen.append(patch.id) or real(patch))
    store.sync_settle_path.parent.mkdir(exist_ok=True)  # made by the first `cclg sync`
    incoming.mark(store, list(imported.memory_ids))
    incoming.settle(store)
    assert len(seen) == len(set(seen)) >= 1, seen


class _Scanned(list):  # type: ignore[type-arg]
    """A patch's list of ids that counts the lookups made in it."""

    lookups = 0

    def __contains__(self, item: object) -> bool:
        _Scanned.lookups += 1
        return super().__contains__(item)


def test_the_ledger_never_scans_an_import_patch_list_for_each_memory(tmp_path: Path) -> None:
    """Settling each memory of a 40-memory import, and giving each its birth form as it leaves, looks the
    memory up in sets, never in the patch's list of 40 ids (quadratic at 100,000)."""
    from cclg.api import import_jsonl
    from cclg.ledger.view import Ledger
    from cclg.sync.outgoing import birth_form

    store, _ = Store.init(tmp_path / "s")
    lines = "".join(
        json.dumps({"content": f"note {i}: keep port {7000 + i}", "source": "user"}) + "\n" for i in range(40)
    )
    ids = import_jsonl(store, lines.encode(), name="notes").memory_ids
    patches = store.load_patches()
    for patch in patches:
        patch.new_node_ids, patch.target_ids = _Scanned(patch.new_node_ids), _Scanned(patch.target_ids)
    ledger = Ledger(patches)
    _Scanned.lookups = 0
    for node_id in ids:
        node = store.read_node(node_id)
        assert ledger.settle(node).status == "active"
        birth_form(node, ledger, set(ids), "store-a")
    assert _Scanned.lookups == 0


def test_a_sync_that_brings_many_memories_leaves_the_search_index_in_one_segment(
    team: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Records arriving by the thousand are indexed in chunks, each chunk's terms a segment of the
    full-text index that every search would seek through (``cclg.ledger.index.COMPACT_AFTER``)."""
    import sqlite3

    from cclg.ledger.index import COMPACT_AFTER

    a, b, _ = team
    scope = {"project": PROJECT.split("=", 1)[1]}
    lines = [
        json.dumps(
            {
                "content": f"Service {n} of the team is deployed from the {n % 5} branch",
                "source": "user",
                "scope": scope,
            }
        )
        for n in range(COMPACT_AFTER + 100)
    ]
    (tmp_path / "many.jsonl").write_text("\n".join(lines) + "\n")
    cclg(a, "import-jsonl", str(tmp_path / "many.jsonl"))
    cclg(a, "sync")
    cclg(b, "search", "service")  # b's index exists before the records arrive, as in a store in use
    add(b, "the payments service listens on 7443")  # and holds a segment of its own already
    cclg(b, "sync")
    db = sqlite3.connect(b / "index.sqlite")
    try:
        assert db.execute("SELECT count(DISTINCT segid) FROM nodes_fts_idx").fetchone() == (1,)
    finally:
        db.close()
    assert len(js(b, "search", "deployed from the branch", "--limit", "50")) == 50
