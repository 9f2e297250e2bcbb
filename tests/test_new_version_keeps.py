"""A new version keeps what its patch does not change: relabelling a memory valid until 2027 once made
it valid from now, forever, with confidence 1.0. A patch's new memory keeps its target's validity
window, confidence and priority unless the patch sets them; with several targets (merge, resolve), a
value all of them share, else the default (confidence: the lowest of theirs)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cclg import api, mcp_tools
from cclg.core.store import Store
from cclg.intake.new_memories import parse_scope
from cclg.learning import distill
from cclg.ledger.promotion import promote
from tests.test_disk_refusals import cclg

UNTIL = "2027-01-01T00:00:00+00:00"
FROM = "2025-03-01T00:00:00+00:00"


def added(root: Path, content: str, *extra: str) -> dict[str, Any]:
    result = cclg(root, "add", "--content", content, "--source", "user", "--global", "--json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["node"]


def shown(root: Path, node_id: str) -> dict[str, Any]:
    result = cclg(root, "show", node_id, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def kept(node: dict[str, Any]) -> tuple[Any, ...]:
    return node["effective_from"], node["effective_until"], node["confidence"], node["priority"]


def written(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    (new_id,) = json.loads(result.stdout)["patch"]["new_node_ids"]
    return str(new_id)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    store, _ = Store.init(tmp_path / "store")
    return store.root


WINDOWED = ("--valid-from", "2025-03-01", "--valid-until", "2027-01-01", "--confidence", "0.6", "--priority", "high")


def test_a_relabelled_memory_keeps_its_window_confidence_and_priority(root: Path) -> None:
    old = added(root, "The freeze lasts until the migration ends", *WINDOWED)
    assert kept(old) == (FROM, UNTIL, 0.6, "high")
    new_id = written(cclg(root, "label", old["id"], "--trust", "untrusted", "--reason", "unsure now", "--json"))
    new = shown(root, new_id)
    assert kept(new) == kept(old), new
    assert new["metadata"]["trust"] == "untrusted"


def test_a_patch_keeps_what_it_does_not_set_and_sets_what_it_names(root: Path) -> None:
    old = added(root, "Staging listens on port 5432", *WINDOWED)
    same = written(cclg(root, "patch", "refine", "--target", old["id"], "--content", "Staging listens on 5432/tcp",
                        "--reason", "precise", "--json"))  # fmt: skip
    assert kept(shown(root, same)) == kept(old)
    ended = written(cclg(root, "patch", "update", "--target", same, "--content", "Staging listens on 5433/tcp",
                         "--reason", "moved", "--valid-until", "2026-06-01", "--confidence", "0.9",
                         "--json"))  # fmt: skip
    assert kept(shown(root, ended)) == (FROM, "2026-06-01T00:00:00+00:00", 0.9, "high")
    started = written(cclg(root, "patch", "update", "--target", ended, "--content", "Staging listens on 5434/tcp",
                           "--reason", "moved", "--valid-from", "2026-01-01", "--json"))  # fmt: skip
    assert kept(shown(root, started)) == ("2026-01-01T00:00:00+00:00", "2026-06-01T00:00:00+00:00", 0.9, "high")


def test_a_window_the_patch_empties_with_the_inherited_end_is_refused(root: Path) -> None:
    old = added(root, "The freeze lasts until the migration ends", *WINDOWED)
    result = cclg(root, "patch", "update", "--target", old["id"], "--content", "The freeze lasts longer",
                  "--reason", "later", "--valid-from", "2028-01-01")  # fmt: skip
    assert result.returncode == 2 and "must come after" in result.stderr, result.stderr
    assert shown(root, old["id"])["status"] == "active", "nothing was written"


def test_several_targets_keep_what_they_agree_on(root: Path) -> None:
    one = added(root, "The cache lives in redis", *WINDOWED)
    two = added(root, "The cache expires after an hour", "--valid-from", "2025-03-01", "--valid-until", "2027-01-01",
                "--confidence", "0.8")  # fmt: skip
    merged = written(cclg(root, "patch", "merge", "--target", one["id"], "--target", two["id"], "--content",
                          "The cache lives in redis and expires after an hour", "--reason", "one fact",
                          "--json"))  # fmt: skip
    assert kept(shown(root, merged)) == (FROM, UNTIL, 0.6, "normal")


def test_mcp_patch_and_label_keep_the_window(root: Path) -> None:
    store = Store.open(root)
    old = added(root, "Builds run on the old runners", *WINDOWED)
    patched = mcp_tools.memory_patch(store, "refine", "the runner name", [old["id"]], ["Builds run on runner-old"])
    (new_id,) = patched["patch"]["new_node_ids"]
    assert kept(shown(root, new_id)) == kept(old)
    labelled = mcp_tools.memory_label(store, new_id, "stricter", sensitivity="confidential")
    (label_id,) = labelled["patch"]["new_node_ids"]
    assert kept(shown(root, label_id)) == kept(old)


def test_promotion_and_distill_keep_the_window(store: Store) -> None:
    scope = parse_scope({"project": "shop", "session": "s1"})
    session = api.add_memory(store, "The build is red until the fix lands", source="user", confidence=0.7,
                             scope=scope, valid_until="2027-01-01").node  # fmt: skip
    promoted = promote(store, session.id, reason="kept").new_nodes[0]
    assert (promoted.effective_from, promoted.effective_until, promoted.confidence) == (
        session.effective_from, UNTIL, 0.7)  # fmt: skip
    from tests.test_distill import SESSION, prompt_event

    old = api.add_memory(store, "The staging database listens on port 5432", source="user", confidence=0.8,
                         scope=parse_scope({"project": "shop"}), valid_until="2027-01-01").node  # fmt: skip
    prompt_event(store, "no, the staging database is on port 5433 now, not 5432")
    (proposal,) = distill.propose(store, SESSION)
    assert proposal["keeps"] == {"valid_until": UNTIL, "confidence": 0.8, "priority": "normal"}, "the proposal says so"
    (done,) = distill.accept(store, SESSION, None)
    (new_id,) = done["new_memory_ids"]
    new = api.show(store, new_id)
    assert (new.effective_from, new.effective_until, new.confidence) == (old.effective_from, UNTIL, 0.8)


def test_a_patch_ends_a_kept_window_with_never(root: Path) -> None:
    """The end a new version keeps can be taken away: ``--valid-until never`` (a fact extended for good)."""
    old = added(root, "The freeze lasts until the migration ends", *WINDOWED)
    new_id = written(cclg(root, "patch", "update", "--target", old["id"], "--content", "The freeze stays",
                          "--reason", "for good", "--valid-until", "never", "--json"))  # fmt: skip
    assert kept(shown(root, new_id)) == (FROM, None, 0.6, "high")
    assert added(root, "Another fact", "--valid-until", "never")["effective_until"] is None
