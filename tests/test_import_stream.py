"""import-jsonl reads its lines as a stream: the ledger checks, stages and indexes them a chunk at a time
(``ledger.CHUNK``), so an import is never held whole in memory. Whatever goes wrong in a late chunk
(a bad line, a secret, thrown-out content) must still leave nothing behind, and what a finished import
leaves must be what reading the files would give. CHUNK is made small here so that every case spans
several chunks."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cclg import api
from cclg.core.records import MemoryNode
from cclg.core.secrets import SecretError
from cclg.core.store import Store
from cclg.errors import IllegalPatchError, ValidationError
from cclg.ledger import writer
from cclg.ledger.index import open_index
from cclg.ledger.undo import rollback
from cclg.maintenance.doctor import diagnose
from cclg.retrieval.query import Where
from cclg.retrieval.search import bm25

CHUNK = 4
GOOD = 3 * CHUNK + 1  # good lines before the trouble: three whole chunks staged, and one more


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "CHUNK", CHUNK)


def lines(*contents: str) -> bytes:
    return "\n".join(json.dumps({"content": c, "source": "file"}) for c in contents).encode()


def good(count: int = GOOD) -> list[str]:
    return [f"Service {n} listens on port {8000 + n}" for n in range(count)]


def files(root: Path) -> dict[str, bytes]:
    """Every file of the store but its lock and its disposable index."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock" and not p.name.startswith("index.sqlite")
    }


def searchable(store: Store, text: str) -> list[str]:
    index = open_index(store)
    try:
        return [hit.node.content for hit in bm25(index, text, Where(), limit=50)]
    finally:
        index.close()


@pytest.fixture
def seeded(store: Store) -> Store:
    api.add_memory(store, "The staging database is Postgres 16", source="user")
    searchable(store, "postgres")  # the index exists before the import, as in a store in use
    return store


def assert_nothing_written(store: Store, before: dict[str, bytes]) -> None:
    assert files(store.root) == before, "a refused import leaves no file behind, staged or named"
    assert not list((store.root / "tmp").iterdir())
    assert searchable(store, "service listens port") == [], "nor a row in the index"
    assert diagnose(store).ok


def test_a_bad_line_after_several_chunks_leaves_nothing(seeded: Store) -> None:
    before = files(seeded.root)
    data = lines(*good()) + b"\n{not json\n" + lines(*good(2)) + b'\n{"content": 7, "source": "file"}'
    with pytest.raises(ValidationError) as refused:
        api.import_jsonl(seeded, data, name="seed.jsonl")
    assert [p.split(":")[0] for p in refused.value.problems] == [
        f"seed.jsonl line {GOOD + 1}",
        f"seed.jsonl line {GOOD + 4}",
    ], "every bad line is listed, not only the first"
    assert_nothing_written(seeded, before)


def test_a_secret_in_a_late_chunk_leaves_nothing(seeded: Store) -> None:
    before = files(seeded.root)
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    with pytest.raises(SecretError):
        api.import_jsonl(seeded, lines(*good(), f"The deploy token is {secret}"), name="seed.jsonl")
    assert_nothing_written(seeded, before)
    assert secret.encode() not in b"".join(files(seeded.root).values())


def test_thrown_out_content_in_a_late_chunk_refuses_the_whole_import(seeded: Store) -> None:
    node = api.add_memory(seeded, "Deploys need two approvals", source="user").node
    writer.apply_patch(seeded, "forget", [node.id], reason="policy changed")
    before = files(seeded.root)
    with pytest.raises(IllegalPatchError, match=f"seed.jsonl line {GOOD + 1}"):
        api.import_jsonl(seeded, lines(*good(), "Deploys need two approvals"), name="seed.jsonl")
    assert_nothing_written(seeded, before)


def test_relations_may_name_a_memory_of_a_later_line_but_not_a_missing_one(store: Store) -> None:
    early = api.build_node("The cache sits in front of the API", source="file")
    late = api.build_node("The cache is Redis 7", source="file")
    early.relations["depends_on"] = [late.id]
    data = "\n".join(json.dumps(n.to_dict()) for n in (early, *[api.build_node(c, source="f") for c in good()], late))
    result = api.import_jsonl(store, data.encode(), name="seed.jsonl")
    assert early.id in result.memory_ids and late.id in result.memory_ids
    orphan = api.build_node("The queue is RabbitMQ", source="file")
    orphan.relations["depends_on"] = ["mem_0000000000000000000000000a"]
    with pytest.raises(ValidationError) as refused:
        api.import_jsonl(store, json.dumps(orphan.to_dict()).encode(), name="more.jsonl")
    assert refused.value.problems == [
        "more.jsonl line 1: relations.depends_on names mem_0000000000000000000000000a, "
        "which is neither in the file nor in the store"
    ]


def test_a_streamed_import_is_indexed_as_its_files_read_and_undone_whole(seeded: Store) -> None:
    result = api.import_jsonl(seeded, lines(*good(), "The last memory of the file names Kestrel"), name="seed.jsonl")
    assert len(result.memory_ids) == GOOD + 1 and result.patch is not None
    assert searchable(seeded, "kestrel") == ["The last memory of the file names Kestrel"]
    report = diagnose(seeded)
    assert report.ok and report.refreshed == [], "the index the import wrote agrees with the files as they are"
    rollback(seeded, result.patch.id, reason="wrong file")
    assert searchable(seeded, "kestrel") == [] and searchable(seeded, "service listens port") == []
    assert searchable(seeded, "postgres") == ["The staging database is Postgres 16"]


def test_a_failed_create_drops_its_rows_from_the_callers_index(seeded: Store) -> None:
    """The caller's index connection stays usable after a refused write, without the refused rows."""

    def stream() -> Iterator[MemoryNode]:
        for content in good():
            yield api.build_node(content, source="file")
        raise ValidationError("the source gave out")

    index = open_index(seeded)
    try:
        with pytest.raises(ValidationError, match="gave out"):
            writer.create_nodes(seeded, stream(), reason="test", new_content="streamed", index=index)
        assert [hit.node.content for hit in bm25(index, "service listens port", Where(), limit=50)] == []
        assert index.db.execute("SELECT count(*) FROM nodes").fetchone()[0] == 1
    finally:
        index.close()


def test_a_line_that_is_not_utf8_is_named_and_nothing_is_written(seeded: Store) -> None:
    """Lines are decoded one at a time (the file is never decoded whole): a bad one is a bad line."""
    before = files(seeded.root)
    with pytest.raises(ValidationError) as refused:
        api.import_jsonl(seeded, lines(*good()) + b'\n{"content": "caf\xe9", "source": "file"}', name="seed.jsonl")
    assert refused.value.problems == [
        f"seed.jsonl line {GOOD + 1}: not UTF-8 text (invalid continuation byte at byte 16)"
    ]
    assert_nothing_written(seeded, before)


def test_after_a_big_import_tmp_is_made_anew_unless_another_writer_uses_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder keeps the size of the most entries it ever held: after an import staged its files in
    tmp/, tmp/ is swapped for a fresh one, but never while another writer has a file in it."""
    monkeypatch.setattr(writer, "SHRINK_AFTER", CHUNK)
    tmp = store.root / "tmp"
    before = tmp.stat().st_ino
    api.import_jsonl(store, lines(*good()), name="seed.jsonl")
    assert tmp.stat().st_ino != before and list(tmp.iterdir()) == []
    assert sorted(p.name for p in store.root.iterdir() if p.name.startswith("tmp")) == ["tmp"]
    busy = tmp / f".another-writer.json.{os.getpid()}.abcd.tmp"  # a live writer's: left alone
    busy.write_text("{}")
    again = tmp.stat().st_ino
    api.import_jsonl(store, lines(*[f"Queue {n} drains every {n} minutes" for n in range(GOOD)]), name="more.jsonl")
    assert tmp.stat().st_ino == again and busy.exists(), "a folder in use is left as it is"
    assert sorted(p.name for p in store.root.iterdir() if p.name.startswith("tmp")) == ["tmp"]
