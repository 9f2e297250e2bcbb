"""Adding what is already there, and what was thrown out: duplicates, near-duplicates, tombstones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cclg import api
from cclg.cli import cli
from cclg.core.records import Scope
from cclg.core.store import Store
from cclg.errors import IllegalPatchError
from cclg.ledger.undo import rollback
from cclg.ledger.writer import apply_patch
from cclg.maintenance.doctor import diagnose


def files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock" and not p.name.startswith("index.sqlite")
    }


# ---------------------------------------------------------------- exact duplicates


def test_the_same_content_in_the_same_scope_returns_the_existing_memory(store: Store) -> None:
    first = api.add_memory(store, "Deploys go out on Fridays", source="user")
    before = files(store.root)
    again = api.add_memory(store, "Deploys go out on Fridays", source="someone else", tags=["ops"])
    assert again.duplicate_of == first.node.id and again.patch is None and again.new_nodes == []
    assert again.node.to_dict() == first.node.to_dict()
    assert files(store.root) == before, "a duplicate writes nothing"


def test_canonical_content_ignores_line_endings_and_unicode_form(store: Store) -> None:
    first = api.add_memory(store, "Caf\u00e9 notes:\nthe wiki is stale", source="user")
    again = api.add_memory(store, "Cafe\u0301 notes:\r\nthe wiki is stale", source="user")
    assert again.duplicate_of == first.node.id


def test_the_same_content_in_another_scope_is_a_new_memory(store: Store) -> None:
    first = api.add_memory(store, "Tests run with pytest -q", source="user")
    other = api.add_memory(store, "Tests run with pytest -q", source="user", scope=Scope(project="web"))
    assert other.duplicate_of is None and other.node.id != first.node.id


def test_content_of_a_superseded_memory_is_not_a_duplicate(store: Store) -> None:
    old = api.add_memory(store, "The build uses make", source="user").node
    apply_patch(store, "supersede", [old.id], reason="moved", contents=["The build uses just"])
    back = api.add_memory(store, "The build uses make", source="user")
    assert back.duplicate_of is None and back.patch is not None
    assert diagnose(store).findings == []


# ---------------------------------------------------------------- tombstones


def test_forgotten_content_is_refused_naming_the_forgetting_patch(store: Store) -> None:
    node = api.add_memory(store, "The staging password rotates monthly", source="user").node
    forget = apply_patch(store, "forget", [node.id], reason="wrong: it never rotates")
    before = files(store.root)
    with pytest.raises(IllegalPatchError) as refused:
        api.add_memory(store, "The staging password rotates monthly", source="agent")
    message = str(refused.value)
    assert forget.patch.id in message and "forgotten" in message and "wrong: it never rotates" in message
    assert "--force" in message
    assert files(store.root) == before
    forced = api.add_memory(store, "The staging password rotates monthly", source="user", force=True)
    assert forced.patch is not None and forced.node.id != node.id
    assert diagnose(store).findings == []


def test_discarded_content_is_refused_too(store: Store) -> None:
    added = api.add_memory(store, "Use the v1 API for uploads", source="agent")
    undo = rollback(store, added.patch.id if added.patch else "", reason="not what the user said")
    assert store.read_node(added.node.id).status == "discarded"
    with pytest.raises(IllegalPatchError, match=undo.patch.id):
        api.add_memory(store, "Use the v1 API for uploads", source="agent")


def test_the_tombstone_check_reads_the_index_not_the_files(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    node = api.add_memory(store, "Old fact", source="user").node
    apply_patch(store, "forget", [node.id], reason="wrong")
    api.add_memory(store, "A fact that makes the index current", source="user")

    def no_scan(*_: object) -> None:
        raise AssertionError("the duplicate check loaded every node")

    monkeypatch.setattr(Store, "load_nodes", no_scan)
    with pytest.raises(IllegalPatchError):
        api.add_memory(store, "Old fact", source="user")


# ---------------------------------------------------------------- near-duplicates


def test_a_current_memory_with_the_same_key_is_named(store: Store) -> None:
    old = api.add_memory(store, "Tests run with pytest", source="user", key="test.command").node
    new = api.add_memory(store, "Tests run with pytest -q -x", source="user", key="test.command")
    assert new.patch is not None, "a near-duplicate is written, and reported"
    assert new.similar == [{"id": old.id, "why": "same key 'test.command'"}]


def test_very_similar_text_in_the_same_scope_is_named(store: Store) -> None:
    old = api.add_memory(store, "The release workflow tags the commit and pushes the tag", source="user").node
    new = api.add_memory(store, "The release workflow tags the commit and pushes the tags", source="user")
    assert new.similar == [{"id": old.id, "why": "very similar text"}]
    unrelated = api.add_memory(store, "Logs are kept for thirty days", source="user")
    assert unrelated.similar == []


def test_a_near_duplicate_is_found_among_many_memories_that_share_its_common_words(store: Store) -> None:
    """The check searches with the new text's rarest words only; the memory it nearly repeats holds
    them, however many others share "note", "step" and the number."""
    lines = [
        json.dumps({"content": f"Release note {n % 7}: step {n % 5} builds shard {n}", "source": "user"})
        for n in range(300)
    ]
    api.import_jsonl(store, ("\n".join(lines) + "\n").encode())
    old = api.add_memory(store, "Release note 3: the canary deploy waits for the quartz probe", source="user").node
    new = api.add_memory(store, "Release note 3: the canary deploy waits for the quartz probes", source="user")
    assert new.similar == [{"id": old.id, "why": "very similar text"}]


# ---------------------------------------------------------------- the command line


def test_cli_add_says_what_happened(tmp_path: Path) -> None:
    root = tmp_path / "store"
    Store.init(root)
    runner = CliRunner()

    def add(*args: str) -> tuple[int, dict, str]:
        result = runner.invoke(cli, ["--root", str(root), "add", "--source", "user", "--json", *args])
        return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else {}, result.stderr

    code, first, _ = add("--content", "Docs build with mkdocs", "--key", "docs.build")
    assert code == 0 and first["duplicate_of"] is None and first["patch_id"]
    code, again, notes = add("--content", "Docs build with mkdocs")
    assert code == 0 and again["duplicate_of"] == first["node"]["id"] and "nothing was written" in notes
    code, close, notes = add("--content", "Docs build with mkdocs --strict", "--key", "docs.build")
    assert code == 0 and close["similar"][0]["id"] == first["node"]["id"]
    assert f"cclg patch supersede --target {first['node']['id']}" in notes
    forgotten = runner.invoke(cli, ["--root", str(root), "forget", close["node"]["id"], "--reason", "the flag is gone"])
    assert forgotten.exit_code == 0, forgotten.output
    code, _, notes = add("--content", "Docs build with mkdocs --strict")
    assert code == 6 and "forgotten" in notes and "--force" in notes
    code, forced, _ = add("--content", "Docs build with mkdocs --strict", "--force")
    assert code == 0 and forced["patch_id"]


# ---------------------------------------------------------------- import-jsonl, the bulk add


def jsonl(*contents: str) -> bytes:
    return "\n".join(json.dumps({"content": c, "source": "seed"}) for c in contents).encode()


def test_import_skips_content_already_current_and_repeats_within_the_file(store: Store) -> None:
    known = api.add_memory(store, "Ports: the API listens on 9090", source="user").node
    result = api.import_jsonl(
        store, jsonl("Ports: the API listens on 9090", "Logs rotate weekly", "Logs rotate weekly"), name="seed.jsonl"
    )
    assert [store.read_node(i).content for i in result.memory_ids] == ["Logs rotate weekly"]
    assert result.to_dict()["duplicates"] == [
        {"line": 1, "duplicate_of": known.id},
        {"line": 3, "duplicate_of": result.memory_ids[0]},
    ]
    again = api.import_jsonl(store, jsonl("Logs rotate weekly"), name="seed.jsonl")
    assert again.patch is None and again.memory_ids == []


def test_import_of_forgotten_content_is_refused_whole_unless_forced(store: Store) -> None:
    node = api.add_memory(store, "Deploys need two approvals", source="user").node
    forget = apply_patch(store, "forget", [node.id], reason="policy changed")
    before = files(store.root)
    with pytest.raises(IllegalPatchError, match=rf"seed.jsonl line 2: .*{forget.patch.id}"):
        api.import_jsonl(store, jsonl("A new fact", "Deploys need two approvals"), name="seed.jsonl")
    assert files(store.root) == before, "all or nothing"
    forced = api.import_jsonl(store, jsonl("A new fact", "Deploys need two approvals"), name="seed.jsonl", force=True)
    assert len(forced.memory_ids) == 2
    assert diagnose(store).findings == []
