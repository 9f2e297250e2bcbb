"""The pack's second tier, "possibly related": one line per candidate with part of the evidence,
never memory in full, never retired or withheld, within its characters, in every rendering, and
ignored by a reader that knows only the reference implementation's pack."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from cclg.api import label
from cclg.core.store import Store
from cclg.ledger.writer import apply_patch
from cclg.retrieval.rendering import MARKDOWN_RELATED, fit_markdown, prompt_markdown, prompt_toml
from cclg.retrieval.selection import RELATED_CHARS, RELATED_MAX, Budget, PackRequest, compile_pack, related_text
from tests.test_pack import GENERATED_AT, SOFTWARE_FACTS, seed

DATA = Path(__file__).parent / "data"
REFERENCE = tomllib.loads((DATA / "reference-format.v0.1.toml").read_text(encoding="utf-8"))
# Shares one word ("frontend") with one memory: not enough for the pack, enough for an offer.
PARTIAL = "which linter and which database tool do we use for the frontend build"
FRONTEND = "The frontend is built with React, TypeScript and Vite"


def pack(store: Store, query: str, **options: Any) -> dict[str, Any]:
    return compile_pack(store, PackRequest(query, generated_at=GENERATED_AT, **options))


@pytest.fixture
def facts(store: Store) -> dict[str, str]:
    return dict(zip(SOFTWARE_FACTS, seed(store, SOFTWARE_FACTS), strict=True))


def test_partial_word_evidence_is_offered_as_one_line_not_packed(store: Store, facts: dict[str, str]) -> None:
    result = pack(store, PARTIAL)
    assert result["memory_nodes"] == []
    related = result["possibly_related"]
    assert [e["id"] for e in related] == [facts[FRONTEND]]
    entry = related[0]
    assert set(entry) == {"id", "type", "key", "preview", "why"}
    assert entry["preview"] == FRONTEND and "frontend" in entry["why"]


def test_a_memory_in_tier_one_is_not_offered_again(store: Store, facts: dict[str, str]) -> None:
    result = pack(store, "how is the frontend built, React or Vite?")
    assert facts[FRONTEND] in [e["id"] for e in result["memory_nodes"]]
    assert facts[FRONTEND] not in [e["id"] for e in result["possibly_related"]]


def test_a_retired_fact_is_never_offered(store: Store, facts: dict[str, str]) -> None:
    apply_patch(store, "forget", [facts[FRONTEND]], reason="gone")
    assert pack(store, PARTIAL)["possibly_related"] == []


@pytest.mark.parametrize("labels", [{"trust": "quarantined"}, {"sensitivity": "restricted"}])
def test_withheld_memories_are_never_offered(store: Store, facts: dict[str, str], labels: dict[str, str]) -> None:
    label(store, facts[FRONTEND], reason="test", **labels)
    result = pack(store, PARTIAL)
    assert result["memory_nodes"] == [] and result["possibly_related"] == []


def test_offers_are_few_short_and_counted_in_the_budget(store: Store, facts: dict[str, str]) -> None:
    result = pack(store, PARTIAL)
    related = result["possibly_related"]
    assert 1 <= len(related) <= RELATED_MAX
    assert all(len(e["preview"]) <= 64 for e in related)
    assert result["budget"]["used_chars"] == sum(len(related_text(e)) for e in related) <= RELATED_CHARS
    assert pack(store, PARTIAL, budget=Budget(related_chars=0))["possibly_related"] == []


def test_markdown_shows_the_tier_within_its_characters_and_the_cap(store: Store, facts: dict[str, str]) -> None:
    seed(store, [f"The frontend widget number {n} renders the sidebar of page {n}" for n in range(8)])
    for cap in (400, 700, 4000):
        result, markdown = fit_markdown(store, PackRequest(PARTIAL, budget=Budget(max_chars=cap)))
        assert len(markdown) <= cap
        lines = [line for line in markdown.splitlines() if line.startswith("- mem_")]
        assert len(lines) == len(result["possibly_related"]) <= RELATED_MAX
        assert sum(len(line) + 1 for line in lines) <= RELATED_CHARS
        if lines:
            assert MARKDOWN_RELATED in markdown and "cclg show" in markdown
    assert prompt_markdown(result) == markdown


def test_toml_and_json_show_the_tier(store: Store, facts: dict[str, str]) -> None:
    result = pack(store, PARTIAL)
    assert tomllib.loads(prompt_toml(result))["possibly_related"][0]["id"] == facts[FRONTEND]
    assert json.loads(json.dumps(result))["possibly_related"][0]["preview"] == FRONTEND


def test_an_off_topic_prompt_gets_no_tier_one(store: Store, facts: dict[str, str]) -> None:
    for query in ("tell me a joke about cats", "what is the capital of France", PARTIAL):
        assert pack(store, query)["memory_nodes"] == []


def reference_reader(pack: dict[str, Any]) -> dict[str, Any]:
    """A pack as a reader that knows only the reference's contract takes it: its required fields, in
    its canonical order, anything else ignored."""
    spec = REFERENCE["record"]["active_memory_pack"]
    missing = [name for name in spec["required"] if name not in pack]
    assert not missing, missing
    assert pack["schema_version"] == spec["schema_version"]
    return {name: pack[name] for name in spec["canonical_order"]}


def test_a_reference_reader_ignores_the_tier(store: Store, facts: dict[str, str]) -> None:
    result = pack(store, PARTIAL)
    read = reference_reader(result)
    assert "possibly_related" not in read and read["memory_nodes"] == result["memory_nodes"]
    ours = [name for name in result if name in read]
    assert ours == list(read)  # the reference's fields keep their order; ours follow them
    assert list(result)[len(read) :] == ["possibly_related", "semantic"]  # cclg's additions, in order
    assert "possibly_related" not in REFERENCE["record"]["active_memory_pack"]["required"]


def test_a_memory_near_in_meaning_is_offered_but_a_retired_one_never(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the semantic helper's answer, a memory that shares no word but is near enough in meaning
    is offered; one under the floor is not; a retired one is not, however near."""
    from cclg.retrieval import semantic
    from cclg.retrieval.selection import RELATED_SIMILARITY

    near, far, gone = facts[SOFTWARE_FACTS[3]], facts[SOFTWARE_FACTS[4]], facts[SOFTWARE_FACTS[8]]
    apply_patch(store, "forget", [gone], reason="gone")
    answer = [(near, RELATED_SIMILARITY + 0.02), (gone, 0.44), (far, RELATED_SIMILARITY - 0.05)]
    monkeypatch.setattr(semantic, "consult", lambda *args, **kwargs: (answer, semantic.ANSWERED))
    result = pack(store, "zzz qqq")
    assert result["memory_nodes"] == []
    assert [e["id"] for e in result["possibly_related"]] == [near]
    assert "similarity" in result["possibly_related"][0]["why"]
