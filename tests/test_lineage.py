"""``cclg log --lineage ID`` (issue 19): from any version of a memory, the whole chain of versions
and the patches between them, not one hop."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cclg import api
from cclg.cli import cli
from cclg.core.store import Store
from cclg.ledger.lineage import lineage
from cclg.ledger.undo import rollback
from cclg.ledger.writer import apply_patch


def test_every_member_shows_the_whole_chain(store: Store) -> None:
    first = api.add_memory(store, "Deploys go out from Jenkins", source="user").node
    (second,) = apply_patch(
        store, "supersede", [first.id], reason="moved to CI", contents=["Deploys go out from CI"]
    ).patch.new_node_ids
    (third,) = apply_patch(
        store, "refine", [second], reason="precise", contents=["Deploys go out from GitHub Actions"]
    ).patch.new_node_ids
    unrelated = api.add_memory(store, "Logs are kept for thirty days", source="user").node
    chains = [lineage(store, member) for member in (first.id, second, third)]
    assert all(chain["members"] == chains[0]["members"] for chain in chains), "the same chain from every member"
    assert [m["id"] for m in chains[0]["members"]] == [first.id, second, third]
    assert [m["status"] for m in chains[0]["members"]] == ["superseded", "superseded", "active"]
    assert [s["operation"] for s in chains[0]["steps"]] == ["create", "supersede", "refine"]
    assert unrelated.id not in {m["id"] for m in chains[0]["members"]}

    undo = rollback(store, chains[0]["steps"][2]["patch"], reason="too precise")
    assert undo is not None
    steps = lineage(store, first.id)["steps"]
    assert [s["undone"] for s in steps] == [False, False, True], "an undone patch is shown, marked"


def test_the_cli_prints_the_chain(store: Store) -> None:
    first = api.add_memory(store, "The API listens on 8080", source="user").node
    apply_patch(store, "supersede", [first.id], reason="port change", contents=["The API listens on 8443"])
    runner = CliRunner()
    text = runner.invoke(cli, ["--root", str(store.root), "log", "--lineage", first.id]).output
    assert "supersede" in text and "port change" in text and "[active]  The API listens on 8443" in text
    data = json.loads(runner.invoke(cli, ["--root", str(store.root), "log", "--lineage", first.id, "--json"]).output)
    assert len(data["members"]) == 2


def test_one_memory_s_chain_and_patches_never_read_the_whole_ledger(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The web view shows a memory's lineage and provenance on every visit: the index says which patches
    name it, and only those files are read (a store of 100,000 memories has as many patches)."""
    first = api.add_memory(store, "The queue is drained every hour.", source="test").new_nodes[0].id
    for n in range(5):
        api.add_memory(store, f"Unrelated fact number {n}.", source="test")
    new = apply_patch(store, "supersede", [first], reason="now every ten minutes", contents=["Drained every 10 min."])
    newer = new.new_nodes[0].id
    rollback(store, apply_patch(store, "forget", [newer], reason="oops").patch.id, reason="undo the forget")

    def whole_ledger() -> None:
        raise AssertionError("read every patch")

    monkeypatch.setattr(Store, "load_patches", lambda self: whole_ledger())
    chain = lineage(store, newer)
    assert [s["operation"] for s in chain["steps"]] == ["create", "supersede", "forget"]
    assert chain["steps"][-1]["undone"] is True
    assert {m["id"] for m in chain["members"]} == {first, newer}
    touching = api.history(store, memory_id=newer)
    assert [p.operation for p in touching] == ["rollback", "forget", "supersede"]
    assert api.cite(store, newer)["created_by_patch"] == new.patch.id
