"""One index kept open between reads (``cclg.ledger.index.keep_open``), as the semantic helper keeps it:
every read still finds what the files hold, one read holds it at a time, and it is opened again when
its file is replaced, deleted or damaged."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cclg.core.records import Scope
from cclg.core.store import Store
from cclg.intake.new_memories import add_memory
from cclg.ledger import index as ledger_index
from cclg.ledger.index import Index, IndexDamage, keep_open, read_fresh, rebuild_index
from cclg.retrieval.selection import PackRequest, compile_pack


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[Store]:
    store, _ = Store.init(tmp_path / "store")
    add_memory(store, "The billing service runs its tests with pytest -n 4.", source="user")
    keep_open(store)
    yield store
    for kept_index in ledger_index._kept.values():
        kept_index.drop()
    ledger_index._kept.clear()


def _serial(store: Store) -> int:
    return read_fresh(store, lambda index: index.serial)


def _contents(store: Store, query: str = "how are the billing tests run?") -> list[str]:
    pack = compile_pack(store, PackRequest(query, generated_at="t"))
    return [entry["content"] for entry in pack["memory_nodes"]]


def test_reads_share_one_open_index_only_where_it_is_kept(tmp_path: Path, kept: Store) -> None:
    assert _serial(kept) == _serial(kept)
    other, _ = Store.init(tmp_path / "other")
    assert _serial(other) != _serial(other), "a store that is not kept opens an index for each read"


def test_a_memory_written_by_another_process_is_found_by_the_next_read(kept: Store) -> None:
    before = _serial(kept)
    script = (
        "import sys; from cclg.core.store import Store; from cclg.intake.new_memories import add_memory;"
        "add_memory(Store.open(sys.argv[1]), 'The billing tests need a local Postgres on port 5433.', source='user')"
    )
    subprocess.run([sys.executable, "-c", script, str(kept.root)], check=True)
    assert read_fresh(kept, lambda index: len(index.current_hashes())) == 2
    assert any("5433" in content for content in _contents(kept, "which port does the billing Postgres listen on?"))
    assert _serial(kept) == before


def test_a_node_file_rewritten_in_place_is_served_as_it_is_now(kept: Store) -> None:
    node_file = next(kept.folder("nodes").glob("*.json"))
    assert any("pytest -n 4" in content for content in _contents(kept))
    text = node_file.read_text()
    node_file.write_text(text.replace("pytest -n 4", "pytest -n 8"))  # the folder's mtime does not move
    contents = _contents(kept)
    assert any("pytest -n 8" in content for content in contents)
    assert not any("pytest -n 4" in content for content in contents)


def test_an_index_renamed_over_it_or_deleted_is_opened_again(kept: Store) -> None:
    first = _serial(kept)
    rebuild_index(kept)  # a new file renamed over the one it holds open
    second = _serial(kept)
    assert second != first
    assert _contents(kept)
    kept.drop_index()
    assert _serial(kept) != second
    assert kept.index_path.exists() and _contents(kept)


def test_damage_met_in_a_read_builds_the_index_again_and_reads_once_more(kept: Store) -> None:
    """A record of the kept index that no longer parses (what ``IndexDamage`` says) is damage: the kept
    index is closed, the file deleted and built again (audited), and the read runs on the new one."""
    serials: list[int] = []

    def read(index: Index) -> int:
        serials.append(index.serial)
        if len(serials) == 1:
            raise IndexDamage("the index's record of mem_x does not parse")
        return len(index.current_hashes())

    assert read_fresh(kept, read) == 1
    assert serials[0] != serials[1]
    audit = "".join(path.read_text() for path in (kept.root / "audit").rglob("*") if path.is_file())
    assert "damaged search index" in audit
    assert _serial(kept) == _serial(kept) == serials[1], "the index built again is the one kept"


def test_a_read_that_comes_while_another_holds_it_opens_its_own(kept: Store) -> None:
    seen: dict[str, int] = {}

    def outer(index: Index) -> None:
        seen["outer"] = index.serial
        worker = threading.Thread(target=lambda: seen.setdefault("other thread", _serial(kept)))
        worker.start()
        worker.join()
        seen["nested"] = _serial(kept)  # a read inside a read, in the same thread

    read_fresh(kept, outer)
    assert seen["other thread"] != seen["outer"] and seen["nested"] != seen["outer"]
    assert _serial(kept) == seen["outer"], "the kept index is taken again once the read ends"


def test_what_a_read_leaves_uncommitted_is_rolled_back(kept: Store) -> None:
    def write_and_fail(index: Index) -> None:
        index.db.execute("INSERT INTO meta (key, value) VALUES ('left', 'behind')")
        assert index.db.in_transaction
        raise ValueError("the read failed half way")

    with pytest.raises(ValueError):
        read_fresh(kept, write_and_fail)
    with sqlite3.connect(kept.index_path, timeout=0.1) as other:  # no write lock is left held
        other.execute("INSERT INTO meta (key, value) VALUES ('other', 'writer')")
    left = read_fresh(kept, lambda index: index.db.execute("SELECT value FROM meta WHERE key = 'left'").fetchone())
    assert left is None


def test_the_vectors_skip_counting_the_rows_when_the_kept_index_did_not_change(kept: Store) -> None:
    """``Index.version`` stays while nothing was written; a write by another connection moves it."""
    first = read_fresh(kept, lambda index: index.version())
    assert read_fresh(kept, lambda index: index.version()) == first
    add_memory(kept, "Invoices are rendered by the pdf worker.", source="user", scope=Scope(project="billing"))
    assert read_fresh(kept, lambda index: index.version()) != first
