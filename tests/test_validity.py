"""A validity window on new memories (issue 19): --valid-from / --valid-until on add and patch, and on
MCP add, so that a temporary fact expires by itself; the effective view honours the window."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cclg import api, mcp_tools
from cclg.cli import cli
from cclg.core.store import Store
from cclg.errors import UsageError


def cclg(store: Store, *args: str) -> object:
    return CliRunner().invoke(cli, ["--root", str(store.root), *args])


def packed(store: Store, query: str) -> list[str]:
    return [n["content"] for n in api.compile_pack(store, api.PackRequest(query))["memory_nodes"]]


def test_a_fact_that_expired_is_no_longer_current_and_one_not_yet_valid_is_not_either(store: Store) -> None:
    result = cclg(store, "add", "--content", "The deploy freeze runs through the holidays", "--source", "user",
                  "--global", "--valid-until", "2020-01-05", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    node = json.loads(result.output)["node"]  # type: ignore[attr-defined]
    assert node["effective_until"] == "2020-01-05T00:00:00+00:00"
    api.add_memory(store, "The deploy freeze starts next year", source="user", valid_from="2999-01-01")
    api.add_memory(store, "The deploy freeze is announced in #releases", source="user", valid_until="2999-01-01T12:00")
    assert packed(store, "deploy freeze") == ["The deploy freeze is announced in #releases"]


def test_a_patch_can_give_its_new_memory_a_window(store: Store) -> None:
    old = api.add_memory(store, "Staging runs on port 5432", source="user").node
    result = cclg(store, "patch", "supersede", "--target", old.id, "--content", "Staging runs on port 5433 this week",
                  "--reason", "migration", "--valid-until", "2000-01-01", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert packed(store, "staging port") == [], "the replacement expired and the old one is superseded"


def test_mcp_add_takes_a_window(store: Store) -> None:
    result = mcp_tools.memory_add(store, "Use the hotfix branch until the release", valid_until="2000-01-01T00:00Z")
    assert result["node"]["effective_until"] == "2000-01-01T00:00:00+00:00"


@pytest.mark.parametrize(
    ("valid_from", "valid_until", "message"),
    [
        ("next week", None, "valid_from must be an ISO 8601 date or time"),
        ("2026-02-01", "2026-01-01", "must come after valid_from"),
    ],
)
def test_a_bad_window_is_refused_before_anything_is_written(
    store: Store, valid_from: str | None, valid_until: str | None, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        api.add_memory(store, "A fact", source="user", valid_from=valid_from, valid_until=valid_until)
    assert not store.load_nodes()
    args = ["add", "--content", "A fact", "--source", "user", "--valid-from", valid_from or "2026-01-01"]
    result = cclg(store, *args, *(["--valid-until", valid_until] if valid_until else []))
    assert result.exit_code == 2 and message in result.output  # type: ignore[attr-defined]


def test_forget_takes_no_window(store: Store) -> None:
    node = api.add_memory(store, "A fact to forget", source="user").node
    with pytest.raises(UsageError, match="a validity window applies to new memories only"):
        api.patch(store, "forget", [node.id], contents=[], reason="r", valid_until="2030-01-01")
