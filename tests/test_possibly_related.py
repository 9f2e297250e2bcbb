"""The pack's second tier, "possibly related": one line per candidate with part of the evidence,
never memory in full, never retired or withheld, within its characters, in every rendering, and
ignored by a reader that knows only the reference implementation's pack."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cclg import api, mcp_tools
from cclg.api import label
from cclg.cli import cli
from cclg.core.ids import FixedClock, fixed_clock, short_id
from cclg.core.store import Store
from cclg.errors import NotFoundError, UsageError
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


def test_one_shared_word_that_many_memories_hold_is_no_offer(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line for the one word a runner-up shares points at it only when few memories hold that word."""
    from cclg.retrieval import selection

    monkeypatch.setattr(selection, "RELATED_ONE_WORD_DOCS", 2)
    assert [e["id"] for e in pack(store, PARTIAL)["possibly_related"]] == [facts[FRONTEND]], "one memory holds it"
    for text in ("The frontend team meets on Thursdays", "Frontend releases go out on Mondays"):
        api.add_memory(store, text, source="user")
    assert pack(store, PARTIAL)["possibly_related"] == [], "one of the three that hold 'frontend' says nothing"


def test_overlapping_bigrams_of_one_japanese_word_are_one_shared_word(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Japanese has no spaces, so a run is weighed as its bigrams: "コマンド" matched as コマ, マン, ンド is
    one word of the prompt, held by as many memories as its rarest bigram, not three words that point."""
    from cclg.retrieval import selection

    monkeypatch.setattr(selection, "RELATED_ONE_WORD_DOCS", 2)
    notes = [f"{tool}のコマンドは make {tool} で動く" for tool in ("lint", "format", "build")]
    for note in notes:
        api.add_memory(store, note, source="user")
    query = "テストを並列で回すには？失敗したテストだけ再実行するコマンドも知りたい"
    assert pack(store, query)["memory_nodes"] == []
    assert pack(store, query)["possibly_related"] == [], "three memories hold the one word it shares"
    monkeypatch.setattr(selection, "RELATED_ONE_WORD_DOCS", 3)
    offered = pack(store, query)["possibly_related"]
    assert len(offered) == 3 and all(e["why"] == "shares the words コマンド" for e in offered), "now few enough"


def test_a_japanese_word_the_prompt_says_twice_is_one_shared_word(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word said twice in a prompt ("ビルド") is one word it shares, not the two words that point at
    a memory (its bigrams are matched once for each run that holds them)."""
    from cclg.retrieval import selection

    monkeypatch.setattr(selection, "RELATED_ONE_WORD_DOCS", 2)
    for tool in ("ios", "android", "web"):
        api.add_memory(store, f"{tool}のビルドは make {tool} で動く", source="user")
    query = "ビルドが遅い。昨日からビルドが十分以上かかる"
    assert pack(store, query)["memory_nodes"] == []
    assert pack(store, query)["possibly_related"] == [], "three memories hold the one word it shares"
    monkeypatch.setattr(selection, "RELATED_ONE_WORD_DOCS", 3)
    offered = pack(store, query)["possibly_related"]
    assert len(offered) == 3 and all(e["why"] == "shares the words ビルド" for e in offered)


def test_a_word_the_index_holds_in_parts_is_held_as_often_as_its_rarest_part(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index keeps "release-train" as its parts: the memories holding it are at most those holding
    "train" (before, a word the index held only in parts counted as held by none, so always a pointer)."""
    from cclg.retrieval import selection

    monkeypatch.setattr(selection, "RELATED_ONE_WORD_DOCS", 2)
    for text in (
        "The release train leaves every Tuesday",
        "Release notes list every train of changes",
        "Train the release managers on the train schedule",
    ):
        api.add_memory(store, text, source="user")
    query = "who drives the release-train when the usual captain is away on holiday this month"
    assert len(pack(store, query)["memory_nodes"]) == 1, "the short note most of whose words it holds"
    assert pack(store, query)["possibly_related"] == [], "three memories hold both its parts"
    monkeypatch.setattr(selection, "RELATED_ONE_WORD_DOCS", 3)
    assert [e["why"] for e in pack(store, query)["possibly_related"]] == ["shares the words release-train"] * 2


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
        lines = [line for line in markdown.splitlines() if line.startswith("- mem~")]
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


def test_offers_for_words_come_first_and_meaning_alone_takes_one_line(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A similarity under the relevance decision's bar is weak evidence: the memories near in meaning
    alone come after those that share words with the prompt, however near, and only the nearest of
    them is offered; one packed in full already does not use that line."""
    from cclg.retrieval import semantic
    from cclg.retrieval.relevance import SEMANTIC
    from cclg.retrieval.selection import RELATED_BY_MEANING, RELATED_SIMILARITY

    assert RELATED_BY_MEANING == 1
    packed, nearer, near = (facts[SOFTWARE_FACTS[n]] for n in (2, 3, 4))
    answer = [(packed, SEMANTIC + 0.3), (nearer, RELATED_SIMILARITY + 0.05), (near, RELATED_SIMILARITY + 0.02)]
    monkeypatch.setattr(semantic, "consult", lambda *args, **kwargs: (answer, semantic.ANSWERED))
    result = pack(store, PARTIAL)
    assert [e["id"] for e in result["memory_nodes"]] == [packed]
    assert [e["id"] for e in result["possibly_related"]] == [facts[FRONTEND], nearer]
    assert "frontend" in result["possibly_related"][0]["why"]
    assert "similarity" in result["possibly_related"][1]["why"]


def test_the_line_for_meaning_is_not_spent_on_a_memory_the_context_holds(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cclg.retrieval import semantic
    from cclg.retrieval.selection import RELATED_SIMILARITY

    held, next_nearest = facts[SOFTWARE_FACTS[3]], facts[SOFTWARE_FACTS[4]]
    answer = [(held, RELATED_SIMILARITY + 0.05), (next_nearest, RELATED_SIMILARITY + 0.02)]
    monkeypatch.setattr(semantic, "consult", lambda *args, **kwargs: (answer, semantic.ANSWERED))
    offered = [e["id"] for e in pack(store, "zzz qqq", skip=[held])["possibly_related"]]
    assert offered == [next_nearest]


def test_the_nearest_memory_standing_out_is_offered_under_the_similarity_bar(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paraphrase scores low against its memory, but that memory stands out from the rest: the
    nearest memory, ``RELATED_MARGIN`` above the next and over ``RELATED_MARGIN_FLOOR``, is offered;
    with a close second, or under the floor, it is not; and the margin speaks only for the nearest."""
    from cclg.retrieval import selection, semantic
    from cclg.retrieval.selection import RELATED_MARGIN, RELATED_MARGIN_FLOOR, RELATED_SIMILARITY

    monkeypatch.setattr(selection, "_similarity_bar", lambda view: RELATED_SIMILARITY)  # a large view's bar
    first, second, third = (facts[SOFTWARE_FACTS[n]] for n in (3, 4, 5))
    low = (RELATED_MARGIN_FLOOR + RELATED_SIMILARITY) / 2  # under the bar, over the floor
    assert low + RELATED_MARGIN < RELATED_SIMILARITY

    def offered(answer: list[tuple[str, float]], **kwargs: Any) -> list[str]:
        monkeypatch.setattr(semantic, "consult", lambda *args, **kw: (answer, semantic.ANSWERED))
        result = pack(store, "zzz qqq", **kwargs)
        assert result["memory_nodes"] == []
        return [e["id"] for e in result["possibly_related"]]

    apart = low - RELATED_MARGIN - 0.01
    assert offered([(second, apart), (first, low)]) == [first]  # the helper's order is not trusted
    assert offered([(first, low)]) == [first]  # alone: nothing stands beside it
    assert offered([(first, low), (second, low - RELATED_MARGIN + 0.01)]) == []  # a close second
    floor = RELATED_MARGIN_FLOOR - 0.01
    assert offered([(first, floor), (second, floor - RELATED_MARGIN - 0.05)]) == []  # under the floor
    # the nearest is in the context already: the runner-up does not inherit its margin
    held = [(first, low + RELATED_MARGIN), (second, apart), (third, apart - RELATED_MARGIN)]
    assert offered(held, skip=[first]) == []


def test_the_similarity_bar_rises_with_the_memories_in_the_view(
    store: Store, facts: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nearest of many memories is near by chance more often than the nearest of a few: a memory
    near in meaning alone is offered at a lower similarity in a repository's small view than in a
    store of 10,000, and the bar never passes ``RELATED_SIMILARITY``."""
    from cclg.ledger.index import open_index
    from cclg.retrieval import selection, semantic
    from cclg.retrieval.query import View, Where

    index = open_index(store)
    try:
        assert index.view_count(None, [], None) == len(facts)
        billing = api.parse_scope({"project": "billing"})
        api.add_memory(store, "The billing service keeps invoices for seven years", source="user", scope=billing)
        assert index.view_count(None, ["other"], None) == len(facts), "another project's memory is out of view"
        assert index.view_count(None, ["billing"], None) == len(facts) + 1
        bars = []
        for count in (10, 50, 500, 10_000, 100_000):
            monkeypatch.setattr(index, "view_count", lambda *args, count=count: count)
            bars.append(selection._similarity_bar(View(index, Where())))
    finally:
        index.close()
    assert bars == sorted(bars) and bars[1] == pytest.approx(selection.RELATED_SIMILARITY_SMALL)
    assert bars[-1] == selection.RELATED_SIMILARITY and bars[-2] == pytest.approx(0.35, abs=0.005)

    nearest, close = facts[SOFTWARE_FACTS[3]], facts[SOFTWARE_FACTS[4]]
    answer = [(nearest, 0.25), (close, 0.24)]  # under 0.35, and standing out from nothing
    monkeypatch.setattr(semantic, "consult", lambda *args, **kw: (answer, semantic.ANSWERED))
    assert [e["id"] for e in pack(store, "zzz qqq")["possibly_related"]] == [nearest], "a few memories: offered"


def test_a_line_shows_the_short_id_that_show_and_cite_take(store: Store, facts: dict[str, str]) -> None:
    """Three lines fit the tier's characters: the line shows ``mem~`` and the id's last characters (a
    batch of memories made in one second shares a long prefix, not an end), and ``cclg show``, ``cclg
    cite`` and MCP ``memory_cite`` take it. The JSON keeps the full id."""
    result, markdown = fit_markdown(store, PackRequest(PARTIAL))
    full = facts[FRONTEND]
    short = short_id(full)
    assert result["possibly_related"][0]["id"] == full
    assert f"- {short} (" in markdown and full not in markdown
    assert len(short) == len("mem~") + 8
    assert api.show(store, short).id == full
    assert api.cite(store, short)["id"] == full
    assert mcp_tools.memory_cite(store, short)["id"] == full
    shown = CliRunner().invoke(cli, ["--root", str(store.root), "show", short, "--json"])
    assert shown.exit_code == 0 and json.loads(shown.output)["id"] == full


def test_a_short_id_that_names_several_or_none_is_refused_clearly(store: Store) -> None:
    ids = []
    for tag in ("a", "b"):
        with fixed_clock(FixedClock("2026-01-01T00:00:00+00:00", tag=tag)):
            ids.append(api.add_memory(store, f"note {tag}: the {tag} build runs on Fridays", source="user").node.id)
    assert ids == ["mem_a0001", "mem_b0001"]
    assert api.show(store, "mem~a0001").id == "mem_a0001"
    with pytest.raises(UsageError, match="matches 2 memories; give the full id"):
        api.show(store, "mem~0001")
    with pytest.raises(UsageError, match="at least 4"):
        api.show(store, "mem~01")
    with pytest.raises(NotFoundError, match="no memory mem~zzzz9999"):
        api.show(store, "mem~zzzz9999")
    with pytest.raises(UsageError, match="short id: give the full id"):
        api.purge_preview(store, "mem~a0001")
