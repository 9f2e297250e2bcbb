"""Promotion (issue 19): a session memory made durable by the user, through one patch with its edge;
the session memory reaches `promoted`, the ledger replay agrees, and a rollback undoes it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cclg import api
from cclg.cli import cli
from cclg.core.records import Source, new_node
from cclg.core.store import Store
from cclg.errors import IllegalPatchError
from cclg.ledger.lineage import lineage
from cclg.ledger.promotion import promote
from cclg.ledger.undo import rollback
from cclg.ledger.view import is_promotion
from cclg.ledger.writer import create_nodes
from cclg.maintenance.doctor import diagnose

SESSION_SCOPE = {"project": "shop", "session": "s-42"}


def session_memory(store: Store, content: str = "The flaky test is test_cache_expiry; rerun it once") -> str:
    node = api.add_memory(store, content, source="session:s-42", scope=api.parse_scope(SESSION_SCOPE)).node
    assert node.status == "active_session"
    return node.id


def test_a_promoted_session_memory_becomes_durable_with_its_edge(store: Store) -> None:
    old = session_memory(store)
    result = promote(store, old, reason="true beyond this session")
    assert is_promotion(result.patch) and result.patch.operation == "update"
    (durable,) = result.new_nodes
    assert api.show(store, old).status == "promoted"
    assert durable.status == "active" and durable.scope.session is None and durable.scope.project == "shop"
    assert durable.relations["derived_from"] == [old] and durable.content == api.show(store, old).content
    assert [(e.type, e.from_id, e.to_id) for e in result.edges] == [("derived_from", durable.id, old)]
    assert diagnose(store).ok, [f.message for f in diagnose(store).findings]
    packed = api.compile_pack(
        store, api.PackRequest("flaky test cache expiry", where=api.Where(session_id="another", project="shop"))
    )
    assert [n["id"] for n in packed["memory_nodes"]] == [durable.id], "another session sees the durable copy"
    assert {m["id"] for m in lineage(store, durable.id)["members"]} == {old, durable.id}


def test_a_memory_waiting_for_promotion_can_be_promoted(store: Store) -> None:
    waiting = new_node(
        "Releases are cut on Thursdays",
        scope=api.parse_scope(SESSION_SCOPE),
        status="pending_promotion",
        source=Source(label="session:s-42"),
    )
    create_nodes(store, [waiting], reason="proposed for promotion")
    promote(store, waiting.id, reason="confirmed")
    assert api.show(store, waiting.id).status == "promoted"
    assert diagnose(store).ok


def test_rollback_restores_the_session_memory(store: Store) -> None:
    old = session_memory(store)
    result = promote(store, old, reason="keep it")
    rollback(store, result.patch.id, reason="it was only true today")
    assert api.show(store, old).status == "active_session"
    assert api.show(store, result.new_nodes[0].id).status == "discarded"
    assert diagnose(store).ok


def test_only_a_session_memory_can_be_promoted(store: Store) -> None:
    durable = api.add_memory(store, "Deploys go out from CI", source="user").node
    with pytest.raises(IllegalPatchError, match="only a session memory"):
        promote(store, durable.id, reason="r")
    result = CliRunner().invoke(cli, ["--root", str(store.root), "promote", durable.id])
    assert result.exit_code != 0 and "only a session memory" in result.output


def test_the_cli_promotes(store: Store) -> None:
    old = session_memory(store)
    result = CliRunner().invoke(cli, ["--root", str(store.root), "promote", old, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["patch"]["resolution_policy"]["rule"] == "promote"
