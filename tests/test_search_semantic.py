"""Search's auto mode with the semantic signal: meaning fused with words, and failing open.

``cclg search`` and MCP ``memory_search`` rank, in ``auto`` mode, the lexical evidence (bm25, graph,
exact text) fused with the memories nearest the query in meaning (``cclg.retrieval.semantic.similar``).
A query that shares no word with the memory it needs finds it when the semantic signal answers; when
it does not (the helper cold, semantic recall off), auto ranks as it did without it, and the result
says which it was: ``semantic`` is ``answered``, ``cold`` or ``off``.
"""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from cclg import mcp_tools
from cclg.api import add_memory
from cclg.cli import cli
from cclg.core.records import MemoryNode
from cclg.core.store import Store
from cclg.retrieval import semantic
from cclg.retrieval.query import Hit
from cclg.retrieval.search import search

PARAPHRASE = "how should I configure a virtualenv?"  # no word in common with the memory it needs


def add(store: Store, content: str, **fields: Any) -> MemoryNode:
    return add_memory(store, content, source="test", **fields).new_nodes[0]


def ids(hits: list[Hit]) -> list[str]:
    return [h.node.id for h in hits]


@pytest.fixture
def memories(store: Store) -> dict[str, MemoryNode]:
    found = {"uv": add(store, "Use uv for Python environments")}
    for number in range(12):  # memories that do share the query's words
        found[f"word{number}"] = add(store, f"Configure the build runner number {number} for releases")
    return found


def answering(answer: list[tuple[str, float]] | None, calls: list[str] | None = None) -> Any:
    """A stand-in for ``semantic.consult``: the helper's ``answer``, or, with none, the state the client
    gives a question nobody answered (``cold``, or ``off`` where the model is known to be missing)."""

    def consult(store: Store, query: str, **_: Any) -> tuple[list[tuple[str, float]] | None, str]:
        if calls is not None:
            calls.append(query)
        return (answer, semantic.ANSWERED) if answer is not None else (None, semantic._missed(store))

    return consult


def test_auto_finds_a_memory_sharing_no_word_when_the_semantic_signal_answers(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert memories["uv"].id not in ids(search(store, PARAPHRASE, limit=5))  # words alone never find it
    nearest = [(memories["uv"].id, 0.62), (memories["word3"].id, 0.2)]
    monkeypatch.setattr(semantic, "consult", answering(nearest))
    found = search(store, PARAPHRASE, limit=5)
    assert memories["uv"].id in ids(found)
    assert found.semantic == "answered"
    assert len(found) == 5


def test_a_memory_found_by_both_signals_ranks_first(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    lexical = search(store, "configure runner", limit=10)
    target = ids(lexical)[5]
    monkeypatch.setattr(semantic, "consult", answering([(target, 0.7), (memories["uv"].id, 0.3)]))
    assert ids(search(store, "configure runner", limit=10))[0] == target


def test_a_semantic_answer_outside_the_view_is_left_out(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "consult", answering([("mem_does_not_exist", 0.9), (memories["uv"].id, 0.6)]))
    found = search(store, PARAPHRASE, limit=20)
    assert "mem_does_not_exist" not in ids(found) and memories["uv"].id in ids(found)


def test_without_an_answer_auto_ranks_as_it_does_lexically(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    queries = [PARAPHRASE, "configure runner", "build releases number 7"]
    lexical = [search(store, q) for q in queries]
    assert {found.semantic for found in lexical} == {"off"}  # the tests run with CCLG_SEMANTIC=off
    monkeypatch.delenv("CCLG_SEMANTIC")
    monkeypatch.setattr(semantic, "consult", answering(None))
    cold = [search(store, q) for q in queries]
    assert [ids(found) for found in cold] == [ids(found) for found in lexical]
    assert {found.semantic for found in cold} == {"cold"}


def test_a_helper_turned_off_for_a_missing_model_says_off(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.delenv("CCLG_SEMANTIC")
    monkeypatch.setenv("CCLG_SEMANTIC_DIR", str(tmp_path / "runtime"))
    monkeypatch.setattr(semantic, "consult", answering(None))
    semantic.private_dir()  # the marker a client leaves when the model is missing: no helper is started for a while
    semantic.socket_path(store.root).with_suffix(".off").write_text("package missing (test)\n")
    assert search(store, PARAPHRASE).semantic == "off"


def test_in_process_without_the_model_says_off(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(semantic, "IN_PROCESS", True)
    monkeypatch.setattr(semantic.embed, "available", lambda: False)
    monkeypatch.setattr(semantic.embed, "failure", lambda: "package missing (test)")
    found = search(store, PARAPHRASE)
    assert found.semantic == "off" and memories["uv"].id not in ids(found)


@pytest.mark.parametrize("mode", ["bm25", "graph", "temporal", "grep"])
def test_other_modes_never_ask_for_meaning(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(semantic, "consult", answering([(memories["uv"].id, 0.9)], calls))
    found = search(store, "configure", mode=mode)
    assert calls == [] and found.semantic == "off" and memories["uv"].id not in ids(found)


def test_a_search_of_a_named_status_never_asks_for_meaning(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(semantic, "consult", answering([(memories["uv"].id, 0.9)], calls))
    found = search(store, "configure", status="superseded")
    assert calls == [] and list(found) == [] and found.semantic == "off"


def test_the_mcp_search_and_the_cli_say_what_the_semantic_signal_did(
    store: Store, memories: dict[str, MemoryNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = mcp_tools.memory_search(store, "configure runner")
    assert result["semantic"] == "off" and len(result["results"]) == 10
    monkeypatch.setattr(semantic, "consult", answering([(memories["uv"].id, 0.6)]))
    result = mcp_tools.memory_search(store, PARAPHRASE)
    assert result["semantic"] == "answered" and memories["uv"].id in [r["id"] for r in result["results"]]
    shown = CliRunner().invoke(cli, ["--root", str(store.root), "search", PARAPHRASE])
    assert shown.exit_code == 0 and memories["uv"].id in shown.output
    assert shown.output.rstrip().splitlines()[-1] == "semantic: answered"
    bm25 = CliRunner().invoke(cli, ["--root", str(store.root), "search", PARAPHRASE, "--mode", "bm25"])
    assert "semantic:" not in bm25.output
