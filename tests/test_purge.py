"""``cclg purge``: one memory's content erased from every file of a store, real files, no mocks of the store.

Each test plants a distinctive token in a memory, lets it spread the way it does in use (the
supersede patch that wrote it, a refine after it, a raw file quoting it, a hook event whose
prompt repeats it, the search index), purges the memory, and then searches the bytes of every
file under the store's root (index.sqlite and its WAL included) for the token.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cclg import api, hook
from cclg.cli import cli
from cclg.core.files import read_jsonl
from cclg.core.ids import content_hash
from cclg.core.store import Store
from cclg.errors import UsageError
from cclg.ledger.purge import purge_memory
from cclg.ledger.writer import PURGED, PURGED_CONTENT
from cclg.maintenance.doctor import PURGE, diagnose

TOKEN = "zebracorn7741"
# Quotes, a newline and a non-ASCII letter: the text is held JSON-escaped, with \r\n and \u00e9 too.
TEXT = f'Deploys go through the {TOKEN} bastion, after the "smoke" step\nand a café break'


def cclg(root: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], input=input)


def cclg_json(root: Path, *args: str) -> Any:
    result = cclg(root, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under the store's root, by relative path, with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def holding(root: Path, token: str = TOKEN) -> list[str]:
    """The files under ``root`` whose bytes hold ``token`` (as UTF-8, or \\u-escaped)."""
    needles = {token.encode(), json.dumps(token).strip('"').encode()}
    return [name for name, data in files_of(root).items() if any(n in data for n in needles)]


def doctor_findings(root: Path) -> list[str]:
    return [f"{f.check}: {f.path}: {f.message}" for f in diagnose(Store.open(root)).findings]


@pytest.fixture
def spread(tmp_path: Path) -> dict[str, Any]:
    """A store where ``TEXT`` is memory M, written by a supersede of O, refined into N, quoted by two raw
    files (one with \\r\\n line endings) and by a hook prompt, and in the search index."""
    root = tmp_path / "store"
    Store.init(root)
    old = cclg_json(root, "add", "--content", "Deploys go out from the Jenkins box", "--source", "user", "--key", "d")
    made = cclg_json(root, "patch", "supersede", "--target", old["node"]["id"], "--content", TEXT, "--reason", "moved")
    middle = made["new_nodes"][0]["id"]
    refine = ("patch", "refine", "--target", middle, "--content", "Deploys go through the new bastion", "--reason", "r")
    later = cclg_json(root, *refine)
    notes = tmp_path / "notes.md"
    notes.write_text(f"# Meeting\nWe agreed: {TEXT}. Then lunch.\n", encoding="utf-8")
    assert cclg(root, "raw", str(notes)).exit_code == 0
    crlf = f"Windows notes: {TEXT}\n".replace("\n", "\r\n").encode("utf-8")
    assert cclg(root, "raw", "-", "--name", "crlf.txt", input=crlf.decode("utf-8")).exit_code == 0
    prompt = {"session_id": "sess-purge-1", "cwd": str(tmp_path), "prompt": f"Is this still true? {TEXT}"}
    hook.handle("user-prompt", prompt, "claude", str(root))
    assert cclg(root, "search", "bastion").exit_code == 0  # the index holds it (and its WAL)
    return {"root": root, "old": old["node"]["id"], "id": middle, "new": later["new_nodes"][0]["id"], **made}


def test_purge_erases_the_text_from_every_file_and_index(spread: dict[str, Any]) -> None:
    root, node_id = spread["root"], spread["id"]
    before = files_of(root)
    assert {name.split("/")[0] for name in holding(root)} >= {"nodes", "patches", "raw", "sessions", "index.sqlite"}

    result = cclg(root, "purge", node_id, "--yes", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "purged" and report["held_elsewhere"] == []
    assert report["erased"]["nodes"] == 1 and report["erased"]["raw"] >= 3 and report["erased"]["sessions"] >= 1
    assert "files rewritten" in result.stderr

    assert holding(root) == [], "no file under the root keeps a byte of the text"
    assert holding(root, "café break") == [] and holding(root, "smoke") == []
    assert doctor_findings(root) == []
    assert cclg(root, "doctor").exit_code == 0

    store = Store.open(root)
    tombstone = store.read_node(node_id)
    assert (tombstone.content, tombstone.status) == (PURGED_CONTENT, "forgotten")
    assert tombstone.metadata[PURGED]["content_hash"] == content_hash(TEXT) == report["content_hash"]
    assert tombstone.metadata[PURGED]["patch_id"] == report["patch_id"]
    after = files_of(root)
    for other in (spread["old"], spread["new"]):  # the rest of the lineage is not touched
        assert after[f"nodes/{other}.json"] == before[f"nodes/{other}.json"]
    assert sorted(n for n in after if n.startswith("edges/")) == sorted(n for n in before if n.startswith("edges/"))
    notes = next(name for name in after if name.startswith("raw/notes-"))
    old_text, new_text = before[notes].decode(), after[notes].decode()
    assert len(new_text) == len(old_text) and new_text.startswith("# Meeting\nWe agreed: [purged---")
    assert new_text.endswith("]. Then lunch.\n"), "raw evidence keeps every other character where it was"
    for name in (n for n in after if n.startswith("raw/") and n.endswith(".json")):
        json.loads(after[name])  # the hook's evidence, rewritten, is still the JSON it was
    audit = [r for r in read_jsonl(store.audit_path).records if r["event"] == "node_purged"]
    assert [(r["node_id"], r["content_hash"]) for r in audit] == [(node_id, content_hash(TEXT))]


def test_purged_content_is_refused_also_after_reindex(spread: dict[str, Any]) -> None:
    root = spread["root"]
    assert cclg(root, "purge", spread["id"], "--yes").exit_code == 0
    for _ in range(2):
        again = cclg(root, "add", "--content", TEXT, "--source", "user")
        assert again.exit_code == 6 and "purged (erased for good)" in again.stderr, again.output
        assert "--force" in again.stderr
        line = json.dumps({"content": TEXT, "source": "import"})
        assert cclg(root, "import-jsonl", "-", input=line + "\n").exit_code == 6
        assert cclg(root, "reindex").exit_code == 0
        Store.open(root).drop_index()  # and with no index at all: the tombstone is a file
    assert holding(root) == []
    marker = cclg(root, "add", "--content", PURGED_CONTENT, "--source", "user")  # the marker is no refused content
    assert marker.exit_code == 0, marker.output


def test_a_purge_cannot_be_rolled_back_nor_any_patch_that_needs_the_text(spread: dict[str, Any]) -> None:
    root, node_id = spread["root"], spread["id"]
    purge_id = cclg_json(root, "purge", node_id, "--yes")["patch_id"]
    before = files_of(root)
    undo = cclg(root, "rollback", purge_id)
    assert undo.exit_code == 6 and "a purge cannot be undone" in undo.stderr
    for earlier in (spread["patch"]["id"], *[p["id"] for p in cclg_json(root, "log", "--memory", spread["new"])]):
        if earlier == purge_id:
            continue
        refused = cclg(root, "rollback", earlier)
        assert refused.exit_code == 6 and f"{purge_id} purged" in refused.stderr, refused.output
    # `cclg log --memory` reads through the index, which may catch up with the files: a projection, not the ledger.
    ledger = lambda files: {k: v for k, v in files.items() if not k.startswith("index.sqlite")}  # noqa: E731
    assert ledger(files_of(root)) == ledger(before), "nothing was written"


def test_purge_of_an_unknown_memory_or_without_confirmation_changes_nothing(spread: dict[str, Any]) -> None:
    root = spread["root"]
    before = files_of(root)
    unknown = cclg(root, "purge", "mem_01zzzzzzzzzzzzzzzzzzzzzzzz", "--yes")
    assert unknown.exit_code == 5 and "no memory" in unknown.stderr
    assert cclg(root, "purge", "not-an-id", "--yes").exit_code == 5  # as `forget` says it
    unconfirmed = cclg(root, "purge", spread["id"])  # CliRunner's stdin is no terminal
    assert unconfirmed.exit_code == 2 and "--yes" in unconfirmed.stderr
    assert files_of(root) == before
    with pytest.raises(Exception, match="needs a reason"):
        purge_memory(Store.open(root), spread["id"], reason=" ")
    assert files_of(root) == before


def test_an_interrupted_purge_is_finished_by_running_it_again(
    spread: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, node_id = spread["root"], spread["id"]
    real_write = Store.write_file
    rewrites: list[Path] = []

    def dies_on_the_second_raw_file(self: Store, path: Path, data: bytes, *, replace: bool = True) -> None:
        if path.parent.name == "raw":
            rewrites.append(path)
            if len(rewrites) == 2:
                raise OSError("killed mid-purge")
        real_write(self, path, data, replace=replace)

    with monkeypatch.context() as patched:
        patched.setattr(Store, "write_file", dies_on_the_second_raw_file)
        with pytest.raises(OSError, match="killed mid-purge"):
            purge_memory(Store.open(root), node_id)

    assert holding(root), "the text is still in files the purge had not reached"
    assert Store.open(root).read_node(node_id).content == TEXT, "kept in its node file until the end"
    findings = doctor_findings(root)
    assert findings and all(f.startswith(PURGE) for f in findings), findings
    assert cclg(root, "add", "--content", TEXT, "--source", "user").exit_code == 6, "refused meanwhile"
    purge_id = json.loads(cclg(root, "log", "--memory", node_id, "--json").stdout)[0]["id"]
    assert cclg(root, "rollback", purge_id).exit_code == 6

    again = cclg(root, "purge", node_id, "--yes", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["status"] == "finished"
    assert json.loads(again.stdout)["patch_id"] == purge_id, "the purge patch written before is finished"
    assert holding(root) == []
    assert doctor_findings(root) == []
    done = cclg(root, "purge", node_id, "--yes", "--json")  # once more: nothing left to do
    assert json.loads(done.stdout)["status"] == "already purged"
    assert "nothing left to erase" in done.stderr


def test_doctor_repair_finishes_a_purge_killed_before_its_indexes(
    spread: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, node_id = spread["root"], spread["id"]

    def killed() -> None:
        raise OSError("killed before the rebuild")

    with monkeypatch.context() as patched:
        patched.setattr("cclg.ledger.purge.rebuild_projections", lambda store: killed())
        with pytest.raises(OSError):
            purge_memory(Store.open(root), node_id)
    assert Store.open(root).read_node(node_id).content == PURGED_CONTENT
    assert "index.sqlite" in holding(root), "the old index still holds it"
    assert any(f.startswith(PURGE) for f in doctor_findings(root))

    repaired = cclg(root, "doctor", "--repair")
    assert "finished the interrupted purge" in repaired.output, repaired.output
    assert holding(root) == []
    assert doctor_findings(root) == []


def test_other_memories_with_the_same_text_are_named_and_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "store"
    Store.init(root)
    mine = cclg_json(root, "add", "--content", TEXT, "--source", "user", "--scope", "project=a")["node"]["id"]
    added = cclg_json(root, "add", "--content", TEXT, "--source", "user", "--scope", "project=b")
    theirs = added["node"]["id"]
    before = files_of(root)
    report = cclg_json(root, "purge", mine, "--yes")
    assert report["held_elsewhere"] == [theirs]
    after = files_of(root)
    for name in (f"nodes/{theirs}.json", f"patches/{added['patch_id']}.json"):
        assert after[name] == before[name], "the other memory and the patch that wrote it keep their text"
    kept = {f"nodes/{theirs}.json", f"patches/{added['patch_id']}.json"}
    assert set(holding(root)) == kept | {"index.sqlite"}, "only they (and the index of current memories) hold it"
    assert doctor_findings(root) == []
    assert cclg(root, "purge", theirs, "--yes").exit_code == 0
    assert holding(root) == []


def test_a_store_with_a_purge_reads_as_plain_records(spread: dict[str, Any], tmp_path: Path) -> None:
    """A reader that knows nothing of purges: the records validate, and the store exports and opens as a
    container with the purged memory forgotten."""
    root, node_id = spread["root"], spread["id"]
    assert cclg(root, "purge", node_id, "--yes").exit_code == 0
    assert cclg(root, "validate", str(root / "nodes"), str(root / "patches"), str(root / "edges")).exit_code == 0
    out = tmp_path / "out.cclg"
    assert cclg(root, "export", str(out)).exit_code == 0
    opened = cclg(root, "open", str(out), "--json")
    assert opened.exit_code == 0, opened.output
    assert TOKEN.encode() not in out.read_bytes()
    from cclg.intake.container import load_container

    statuses = {n.id: n.status for n in load_container(out.read_text("utf-8")).nodes}
    assert statuses[node_id] == "forgotten" and statuses[spread["new"]] == "active", statuses
    assert spread["new"] in json.loads(opened.stdout)["effective_view_node_ids"]


def test_a_log_rewritten_whole_loses_no_append_waiting_for_its_lock(store: Store) -> None:
    """A purge or a redaction replaces a log by rename while holding its lock; an appender that was
    waiting for that lock writes to the new file, not to the replaced one."""
    log = store.audit_path
    store.audit("repair_applied", actions=["before"])
    appended = threading.Event()
    with store.locked_log(log):
        writer = threading.Thread(target=lambda: (store.append(log, [{"event": "late"}]), appended.set()))
        writer.start()
        time.sleep(0.2)
        assert not appended.is_set(), "the append waits for the log's lock"
        store.write_file(log, b'{"event": "rewritten"}\n')
    writer.join(5)
    assert [r["event"] for r in read_jsonl(log).records] == ["rewritten", "late"]


def test_a_forgotten_memory_is_purged_and_its_forget_can_no_longer_be_undone(tmp_path: Path) -> None:
    root = tmp_path / "store"
    Store.init(root)
    node_id = cclg_json(root, "add", "--content", TEXT, "--source", "user")["node"]["id"]
    forget_id = cclg_json(root, "forget", node_id)["patch"]["id"]
    report = cclg_json(root, "purge", node_id, "--yes")
    assert report["status"] == "purged" and holding(root) == []
    assert doctor_findings(root) == []
    undo = cclg(root, "rollback", forget_id)
    assert undo.exit_code == 6 and "purged (erased for good)" in undo.stderr
    forced = cclg(root, "add", "--content", TEXT, "--source", "user", "--force", "--json")
    assert forced.exit_code == 0, "the user may still add it again on purpose"


def test_the_mcp_tool_is_off_until_the_user_allows_it_and_needs_the_id_twice(store: Store) -> None:
    from cclg import mcp_tools

    node = api.add_memory(store, "The vault token rotates on Tuesdays via kestrelrotate", source="user").node
    with pytest.raises(UsageError, match="purging through MCP is off"):
        mcp_tools.memory_purge(store, node.id, "asked to erase", node.id)
    config = json.loads((store.root / "config.json").read_text())
    (store.root / "config.json").write_text(json.dumps({**config, "mcp": {"allow_purge": True}}))
    with pytest.raises(UsageError, match="confirm_id must be the memory's full id"):
        mcp_tools.memory_purge(store, node.id, "asked to erase", node.id[:10])
    assert api.show(store, node.id).content.startswith("The vault token"), "nothing was erased"
    mcp_tools.memory_purge(store, node.id, "asked to erase", node.id)
    assert api.show(store, node.id).content == "[purged]"


def raw_digest_findings(root: Path) -> dict[str, str]:
    from cclg.maintenance.doctor import RAW

    return {f.path: f.message for f in diagnose(Store.open(root)).findings if f.check == RAW}


def test_doctor_knows_the_bytes_of_raw_evidence_and_of_what_a_purge_rewrote(spread: dict[str, Any]) -> None:
    """Raw evidence is kept verbatim, its SHA-256 in the audit log: a byte changed outside cclg is a
    finding. A purge rewrites raw files in place and records their new digests, so doctor stays quiet
    after it and still finds a change made after it."""
    root = spread["root"]
    notes = next(p for p in sorted((root / "raw").iterdir()) if p.name.startswith("notes-"))
    relative = f"raw/{notes.name}"
    kept = notes.read_bytes()
    assert raw_digest_findings(root) == {}
    notes.write_bytes(kept.replace(b"Then lunch", b"Then tea!!"))  # the same size, other bytes
    assert list(raw_digest_findings(root)) == [relative]
    assert cclg(root, "doctor").exit_code == 1
    notes.write_bytes(kept)
    assert raw_digest_findings(root) == {}

    assert cclg(root, "purge", spread["id"], "--yes").exit_code == 0
    store = Store.open(root)
    rewritten = [r for r in read_jsonl(store.audit_path).records if r["event"] == "raw_rewritten"]
    assert relative in {r["path"] for r in rewritten} and all(r["path"].startswith("raw/") for r in rewritten)
    for record in rewritten:
        data = (root / record["path"]).read_bytes()
        assert record["sha256"] == hashlib.sha256(data).hexdigest() and record["bytes"] == len(data)
    assert raw_digest_findings(root) == {}
    purged = notes.read_bytes()
    notes.write_bytes(purged.replace(b"Then lunch", b"Then tea!!"))
    assert list(raw_digest_findings(root)) == [relative]

    # a store a release before these records purged: the digests before a purge are unknown, never wrong
    lines = store.audit_path.read_bytes().splitlines(keepends=True)
    store.audit_path.write_bytes(b"".join(line for line in lines if b'"raw_rewritten"' not in line))
    assert raw_digest_findings(root) == {}


def test_a_redaction_of_raw_evidence_records_its_new_digest(tmp_path: Path) -> None:
    """``scan --store --redact`` rewrites raw evidence that holds a secret (kept by a release before the
    guard) and records the new digest: doctor has no finding after it, and one for a change after it."""
    root = tmp_path / "store"
    Store.init(root)
    relative, _ = Store.open(root).write_raw(b"ci notes\ndb_password=Xk9mQ2vL7pR4tW8zB3nY\nend\n", "ci.txt")
    result = cclg(root, "scan", "--store", "--redact", "--json")
    assert [r["file"] for r in json.loads(result.stdout)["redacted"]] == [relative], result.output
    assert b"Xk9mQ2vL7pR4tW8zB3nY" not in (root / relative).read_bytes()
    assert raw_digest_findings(root) == {}
    (root / relative).write_bytes(b"ci notes changed by hand\n")
    assert list(raw_digest_findings(root)) == [relative]
