"""A pack parses only the memories it reads: the relevance decision weighs dozens of candidates on
their index rows and terms, and a memory's record (JSON checked into a ``MemoryNode``) is parsed for
the ones whose content it reads, not to learn whether a memory is in the view or has questions."""

from __future__ import annotations

import json

import pytest

from cclg import api
from cclg.core.store import Store
from cclg.ledger import index as index_module
from cclg.ledger.index import open_index
from cclg.retrieval import query as query_module
from cclg.retrieval import relevance
from cclg.retrieval.query import Hit, Where

QUESTION = "how do I get the billing sandbox running?"


def test_a_pack_over_many_candidates_parses_only_the_memories_it_reads(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for number in range(60):  # candidates that share a word with the prompt, and stay out
        api.add_memory(store, f"Queue {number} of the billing workers is drained on Sundays", source="user")
    api.add_memory(store, "The billing webhook retries each delivery with exponential backoff", source="user")
    api.compile_pack(store, api.PackRequest("warm the index"))
    parsed: list[str] = []
    real = index_module.indexed_node

    def counting(node_id: str, record: object):  # type: ignore[no-untyped-def]
        parsed.append(node_id)
        return real(node_id, record)

    monkeypatch.setattr(query_module, "indexed_node", counting)
    pack = api.compile_pack(store, api.PackRequest("why does the billing webhook retry?"))
    weighed = relevance_candidates(store, "why does the billing webhook retry?")
    assert weighed >= 30, "the prompt must give the decision many candidates for the count to mean anything"
    served = len(pack["memory_nodes"]) + len(pack["possibly_related"])
    # The memory share reads the content of the best ten; everything served is parsed to be shown.
    assert len(set(parsed)) <= 10 + served, (len(set(parsed)), served)


def relevance_candidates(store: Store, prompt: str) -> int:
    index = open_index(store)
    try:
        current, retired, runners_up = relevance.relevant(index, prompt, Where(), limit=36, runners_up=100)
        return len(current) + len(retired) + len(runners_up)
    finally:
        index.close()


def test_a_memory_s_questions_are_found_whether_or_not_its_record_is_parsed(store: Store) -> None:
    plain = api.add_memory(store, "The billing sandbox starts with make sandbox", source="user").node
    asked = api.add_memory(store, "The billing sandbox needs STRIPE_KEY set", source="user", questions=[QUESTION]).node
    record = store.node_path(asked.id).read_text("utf-8")
    # The same record as another program may write it: the key spelled with a JSON escape.
    escaped = record.replace('"questions"', '"\\u0071uestions"')
    assert json.loads(escaped) == json.loads(record)
    no_questions = Hit(node_id=plain.id, record=store.node_path(plain.id).read_text("utf-8"))
    assert no_questions.questions() == []
    assert Hit(node_id=asked.id, record=record).questions() == [QUESTION]
    assert Hit(node_id=asked.id, record=escaped).questions() == [QUESTION]
