"""The search index's full-text part stays in few segments (``cclg.ledger.index.FTS_CRISIS_MERGE``,
``Index.compact``): FTS5 writes each transaction's terms as a segment of their own, and every term's
lookup (a MATCH, a document frequency) seeks in each, so a store grown one memory at a time would
read through up to 16 of them on every prompt. A rebuild leaves one; one memory added at a time merges
at four; the helper merges them into one when nobody is asking (``Serving.tidy``)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cclg.core.store import Store
from cclg.intake.new_memories import add_memory
from cclg.ledger import index as ledger_index
from cclg.ledger.index import COMPACT_AFTER, FTS_CRISIS_MERGE, keep_open, open_index, read_fresh, rebuild_index
from cclg.retrieval.search import search
from cclg.retrieval.semantic import TIDY_AFTER, Serving

TOPICS = ["billing", "deploys", "the cache", "the release train", "migrations", "the search index"]


def _one(store: Store, sql: str) -> Any:
    """The first column of the first row ``sql`` gives on the store's index file (None for no row)."""
    db = sqlite3.connect(store.index_path)
    try:
        row = db.execute(sql).fetchone()
        return None if row is None else row[0]
    finally:
        db.close()


def _segments(store: Store) -> int:
    return int(_one(store, "SELECT count(DISTINCT segid) FROM nodes_fts_idx"))


def _merge_setting(store: Store) -> Any:
    return _one(store, "SELECT v FROM nodes_fts_config WHERE k = 'crisismerge'")


def _add(store: Store, number: int) -> None:
    topic = TOPICS[number % len(TOPICS)]
    add_memory(store, f"Note {number}: {topic} is owned by team {number % 7} and reviewed on Fridays", source="user")


def _found(store: Store, query: str) -> list[str]:
    return [hit.id for hit in search(store, query, limit=20)]


@pytest.fixture
def grown(store: Store) -> Store:
    """A store of 48 memories, each added in a write of its own (as an agent adds them)."""
    for number in range(48):
        _add(store, number)
    return store


def test_memories_added_one_at_a_time_keep_the_full_text_index_in_few_segments(store: Store) -> None:
    seen = []
    for number in range(48):
        _add(store, number)
        seen.append(_segments(store))
    assert max(seen) <= 8, seen  # FTS5's own default (merging at 16) lets it reach 16


def test_a_rebuilt_index_is_one_segment_with_the_merge_setting(grown: Store) -> None:
    rebuild_index(grown)
    assert _segments(grown) == 1
    assert _merge_setting(grown) == FTS_CRISIS_MERGE


def test_an_index_an_earlier_cclg_built_takes_the_setting_at_its_next_write(grown: Store) -> None:
    db = sqlite3.connect(grown.index_path)
    with db:
        db.execute("DELETE FROM nodes_fts_config WHERE k = 'crisismerge'")
    db.close()
    _add(grown, 100)
    assert _merge_setting(grown) == FTS_CRISIS_MERGE


def test_compacting_merges_into_one_segment_and_changes_no_answer(grown: Store) -> None:
    queries = ["who owns billing?", "when are deploys reviewed", "team 3", "the release train"]
    before = [_found(grown, query) for query in queries]
    assert _segments(grown) > 1
    index = open_index(grown)
    try:
        index.compact()
    finally:
        index.close()
    assert _segments(grown) == 1
    assert [_found(grown, query) for query in queries] == before


@pytest.fixture
def serving(grown: Store) -> Iterator[Serving]:
    keep_open(grown)
    yield Serving(grown, None, None, ("test", "test", ()))  # type: ignore[arg-type]
    for kept in ledger_index._kept.values():
        kept.drop()
    ledger_index._kept.clear()


def test_the_helper_compacts_only_when_nobody_has_asked_for_a_while(serving: Serving) -> None:
    store = serving.store
    read_fresh(store, lambda index: index.segments())  # a read opens the kept index
    assert _segments(store) > 1
    serving.last = time.monotonic()
    serving.tidy()
    assert _segments(store) > 1, "a request came within TIDY_AFTER seconds"
    serving.last = time.monotonic() - TIDY_AFTER - 1
    with serving.events_lock:  # an event is being handled
        serving.tidy()
    assert _segments(store) > 1
    serving.tidy()
    assert _segments(store) == 1


def test_the_helper_leaves_the_merge_to_a_writer_that_holds_the_lock(serving: Serving) -> None:
    store = serving.store
    read_fresh(store, lambda index: index.segments())
    serving.last = time.monotonic() - TIDY_AFTER - 1
    writer = sqlite3.connect(store.index_path)
    writer.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        serving.tidy()
        assert time.monotonic() - started < 1.0, "it does not wait for the writer"
    finally:
        writer.rollback()
        writer.close()
    assert _segments(store) > 1
    serving.tidy()
    assert _segments(store) == 1


def _import(store: Store, tmp_path: Path, count: int) -> None:
    from click.testing import CliRunner

    from cclg.cli import cli

    lines = [
        json.dumps(
            {"content": f"Imported note {n}: {TOPICS[n % len(TOPICS)]} is owned by team {n % 9}", "source": "user"}
        )
        for n in range(count)
    ]
    path = tmp_path / f"seed-{count}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["--root", str(store.root), "import-jsonl", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output


def test_an_import_of_many_memories_leaves_one_segment_and_a_small_one_pays_nothing(
    grown: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compactions: list[int] = []
    real = ledger_index.Index.compact

    def counted(self: ledger_index.Index, wait: float | None = None) -> None:
        compactions.append(1)
        real(self, wait)

    monkeypatch.setattr(ledger_index.Index, "compact", counted)
    _import(grown, tmp_path, 20)
    assert compactions == [], "a small write leaves the merging to FTS5 and the helper"
    _import(grown, tmp_path, COMPACT_AFTER + 200)  # written in chunks, each its own segments
    assert compactions == [1]
    assert _segments(grown) == 1
    assert len(_found(grown, "who owns the release train")) == 20
