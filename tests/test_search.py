"""Search: BM25 with field weights, the effective view and its filters, grep, graph, time, fusion, the CLI.

Every search answers from current truth (the effective view for the session,
project and moment asked about) unless a status is named. The expectations are
written from that contract and from ``cclg.ledger.view.effective_view``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cclg.api import add_memory, import_jsonl
from cclg.cli import cli
from cclg.core.ids import FixedClock, fixed_clock, parse_moment, parse_time
from cclg.core.records import MemoryNode, Scope, dumps, new_node
from cclg.core.store import Store
from cclg.errors import UsageError
from cclg.ledger.undo import rollback
from cclg.ledger.writer import apply_patch, create_nodes
from cclg.retrieval import search as search_module
from cclg.retrieval.query import Hit, Where
from cclg.retrieval.search import MODES, grep, search

ALL_MODES = [m for m in MODES if m != "grep"]  # grep mode needs the query's exact text


def add(store: Store, content: str, **fields: Any) -> MemoryNode:
    return add_memory(store, content, source="test", **fields).new_nodes[0]


def write(store: Store, *nodes: MemoryNode) -> list[MemoryNode]:
    """Write ready-made nodes (relations, windows, times of our choosing) with one create patch."""
    create_nodes(store, list(nodes), reason="test", new_content=f"{len(nodes)} memories")
    return list(nodes)


def ids(hits: list[Hit]) -> list[str]:
    return [h.node.id for h in hits]


def run(store: Store, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--root", str(store.root), *args])


# ---------------------------------------------------------------- BM25


@pytest.fixture
def weighted(store: Store) -> tuple[MemoryNode, MemoryNode]:
    """Two memories of about the same length: the word in one's key, in the other's content."""
    keyed = add(store, "Production runs on the blue cluster", key="deploy.target")
    mentioned = add(store, "Remember to deploy the docs site")
    for filler in ("Unrelated note about coffee", "The cache lives in /var/cache/app", "Lint with ruff"):
        add(store, filler)
    return keyed, mentioned


def test_bm25_ranks_a_key_match_above_a_content_only_mention(
    store: Store, weighted: tuple[MemoryNode, MemoryNode]
) -> None:
    keyed, mentioned = weighted
    hits = search(store, "deploy", mode="bm25")
    assert ids(hits) == [keyed.id, mentioned.id]
    assert hits[0].score > hits[1].score > 0
    assert "deploy" in hits[0].matched


def test_the_key_ranking_comes_from_the_field_weights(
    store: Store, weighted: tuple[MemoryNode, MemoryNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the weights the content mention would win: the test above is not luck."""
    keyed, mentioned = weighted
    monkeypatch.setattr(search_module, "BM25_WEIGHTS", (1.0, 1.0, 1.0, 1.0))
    assert ids(search(store, "deploy", mode="bm25")) == [mentioned.id, keyed.id]


def test_bm25_prefers_the_memory_matching_more_query_words(store: Store) -> None:
    add(store, "Tests are slow on CI")
    best = add(store, "Run the tests with pytest -q from the repository root")
    add(store, "pytest plugins live in conftest files")
    add(store, "The cache lives in /var/cache/app")
    hits = search(store, "how do I run tests with pytest", mode="bm25")
    assert hits[0].node.id == best.id
    assert len(hits) == 3
    assert hits[0].matched == ["pytest", "run", "test", "tests"]


def test_bm25_finds_identifiers_by_their_parts_and_inflections(store: Store) -> None:
    node = add(store, "parseHTTPHeader lives in src/cclg/net/headers.py and was deployed in v2.3.1")
    for query in ("http header", "headers.py", "net", "deploy", "v2.3.1", "parseHTTPHeader"):
        assert ids(search(store, query, mode="bm25")) == [node.id], query
    assert search(store, "v2.3", mode="bm25") == []


def test_tags_are_searched(store: Store) -> None:
    tagged = add(store, "Use the staging cluster for load tests", tags=["kubernetes"])
    add(store, "Unrelated note about coffee")
    assert ids(search(store, "kubernetes", mode="bm25")) == [tagged.id]


def test_a_term_most_memories_hold_still_ranks_by_relevance(store: Store) -> None:
    """FTS5 floors such a term's idf at 1e-6: the ranking must survive scores that small."""
    longer = add(store, "the pytest plugins are listed in conftest")
    shorter = add(store, "pytest is the runner")
    add(store, "coffee")
    hits = search(store, "pytest", mode="bm25")
    assert ids(hits) == [shorter.id, longer.id]
    assert 0 < hits[1].score < hits[0].score < 1e-5


def test_a_query_with_nothing_searchable_finds_nothing(store: Store) -> None:
    add(store, "Tests run with pytest")
    for mode in ALL_MODES:
        assert search(store, "  ... ", mode=mode) == []
        assert search(store, "zebra", mode=mode) == []


def test_an_unknown_mode_is_a_usage_error(store: Store) -> None:
    with pytest.raises(UsageError, match="unknown search mode"):
        search(store, "x", mode="fuzzy")


# ---------------------------------------------------------------- statuses


@pytest.fixture
def history(store: Store) -> dict[str, MemoryNode]:
    old = add(store, "Tests run with nose", key="test.command")
    new = apply_patch(store, "supersede", [old.id], reason="moved", contents=["Tests run with pytest"]).new_nodes[0]
    gone = add(store, "Tests need the VPN")
    apply_patch(store, "forget", [gone.id], reason="no longer")
    return {"old": old, "new": new, "gone": gone}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_search_returns_current_memories_only(store: Store, history: dict[str, MemoryNode], mode: str) -> None:
    assert ids(search(store, "tests", mode=mode)) == [history["new"].id]


def test_grep_mode_returns_current_memories_only(store: Store, history: dict[str, MemoryNode]) -> None:
    assert ids(search(store, "Tests", mode="grep")) == [history["new"].id]
    assert grep(store, "nose") == []
    assert grep(store, "VPN") == []


def test_a_named_status_or_all_widens_the_search(store: Store, history: dict[str, MemoryNode]) -> None:
    every = {h.node.id for h in search(store, "tests", mode="bm25", status="all")}
    assert every == {history["old"].id, history["new"].id, history["gone"].id}
    assert ids(search(store, "tests", status="superseded")) == [history["old"].id]
    assert ids(search(store, "tests", status="forgotten")) == [history["gone"].id]
    assert ids(search(store, "tests", status="active")) == [history["new"].id]
    # "retired": facts that were true and are no longer; a forgotten memory is not listed (the user wanted it gone).
    assert {h.node.id for h in search(store, "tests", status="retired")} == {history["old"].id}
    assert search(store, "tests", status="deprecated") == []


def test_a_retired_memory_whose_file_still_says_active_is_excluded(store: Store) -> None:
    """An interrupted patch: the patch file (the commit point) exists, the target was not rewritten."""
    old = add(store, "Releases are cut from the develop branch", key="release.branch")
    patch = apply_patch(store, "supersede", [old.id], reason="trunk", contents=["Releases are cut from main"])
    new = patch.new_nodes[0]
    reverted = store.read_node(old.id)
    reverted.status = "active"
    reverted.relations["superseded_by"] = []
    tmp = store.root / "nodes" / ".revert.tmp"
    tmp.write_bytes(dumps(reverted.to_dict()))
    os.replace(tmp, store.node_path(old.id))
    assert store.read_node(old.id).status == "active"
    for mode in ALL_MODES:
        assert ids(search(store, "releases branch", mode=mode)) == [new.id], mode
    assert grep(store, "develop") == []
    assert old.id in ids(search(store, "releases", status="all"))


def test_a_rolled_back_retirement_brings_the_memory_back(store: Store) -> None:
    node = add(store, "Cache TTL is five minutes")
    forgetting = apply_patch(store, "forget", [node.id], reason="oops")
    assert search(store, "cache") == []
    rollback(store, forgetting.patch.id)
    assert ids(search(store, "cache")) == [node.id]


# ---------------------------------------------------------------- scope filters and key collapse


def test_a_project_filter_keeps_that_project_and_unscoped_memories(store: Store) -> None:
    in_x = add(store, "Lint with ruff in project x", scope=Scope(project="x"))
    in_y = add(store, "Lint with flake8 in project y", scope=Scope(project="y"))
    unscoped = add(store, "Lint before every commit")

    def found(where: Where) -> set[str]:
        return {h.node.id for h in search(store, "lint", mode="bm25", where=where)}

    assert found(Where(project="x")) == {in_x.id, unscoped.id}
    assert found(Where(project="y")) == {in_y.id, unscoped.id}
    assert found(Where(project="z")) == {unscoped.id}
    assert found(Where()) == {in_x.id, in_y.id, unscoped.id}
    assert {m.where for m in grep(store, "Lint", where=Where(project="x"))} == {in_x.id, unscoped.id}


def test_a_workspace_filter_works_the_same_way(store: Store) -> None:
    in_a = add(store, "Format with black", scope=Scope(workspace="a"))
    add(store, "Format with yapf", scope=Scope(workspace="b"))
    anywhere = add(store, "Format on save")
    found = {h.node.id for h in search(store, "format", where=Where(workspace="a"))}
    assert found == {in_a.id, anywhere.id}


def test_key_collapse_is_decided_per_applicable_scope(store: Store) -> None:
    everywhere = add(store, "Tests run with pytest", key="test.command")
    override_y = add(store, "Tests run with tox", key="test.command", scope=Scope(project="y"))

    def found(text: str, where: Where) -> list[str]:
        return ids(search(store, text, mode="bm25", where=where))

    # In project x the project-y override does not apply, so it must not hide the global memory.
    assert found("tests", Where(project="x")) == [everywhere.id]
    assert found("pytest", Where(project="x")) == [everywhere.id]
    # In project y the override wins, even for a query only the hidden memory matches.
    assert found("tests", Where(project="y")) == [override_y.id]
    assert found("pytest", Where(project="y")) == []
    # Asked without a project, every scope applies and the narrowest wins (as in effective_view).
    assert found("tests", Where()) == [override_y.id]
    assert [m.where for m in grep(store, "Tests", where=Where(project="x"))] == [everywhere.id]


def test_key_collapse_narrowest_scope_then_newest(store: Store) -> None:
    add(store, "Port is 8000", key="port")
    workspace = add(store, "Port is 8001", key="port", scope=Scope(workspace="w"))
    project = add(store, "Port is 8002", key="port", scope=Scope(workspace="w", project="p"))
    newer_project = add(store, "Port is 8003", key="port", scope=Scope(workspace="w", project="p"))
    assert ids(search(store, "port", where=Where(workspace="w"))) == [newer_project.id]
    assert ids(search(store, "port", where=Where(workspace="w", project="q"))) == [workspace.id]
    assert project.id not in ids(search(store, "port", mode="bm25", where=Where(project="p")))


def test_session_overlays_show_only_in_their_session(store: Store) -> None:
    shared = add(store, "The build uses make", key="build.command")
    overlay = add(store, "The build uses ninja for this session", key="build.command", scope=Scope(session="s1"))
    scratch = add(store, "Scratch: the build is flaky today", scope=Scope(session="s1"))
    assert overlay.status == scratch.status == "active_session"

    def found(session_id: str | None) -> set[str]:
        return {h.node.id for h in search(store, "build", mode="bm25", where=Where(session_id=session_id))}

    assert found(None) == {shared.id}
    assert found("s2") == {shared.id}
    assert found("s1") == {overlay.id, scratch.id}
    assert {m.where for m in grep(store, "build", where=Where(session_id="s1"))} == {overlay.id, scratch.id}
    assert {m.where for m in grep(store, "build")} == {shared.id}


def test_the_effective_window_decides_what_is_in_force(store: Store) -> None:
    now = datetime.now(UTC)
    ended = new_node("Freeze deploys during the migration", effective_until=(now - timedelta(hours=1)).isoformat())
    ended.created_at = ended.updated_at = ended.effective_from = (now - timedelta(days=2)).isoformat()
    ongoing = new_node("Freeze deploys on Fridays", effective_until=(now + timedelta(days=1)).isoformat())
    upcoming = new_node("Freeze deploys over the holidays", effective_from=(now + timedelta(days=3)).isoformat())
    write(store, ended, ongoing, upcoming)
    for mode in ALL_MODES:
        assert ids(search(store, "freeze deploys", mode=mode)) == [ongoing.id], mode
    yesterday = Where(at=now - timedelta(days=1))
    assert ids(search(store, "freeze", where=yesterday)) == [ended.id]
    assert grep(store, "Freeze") == [search_module.GrepMatch(ongoing.id, 1, ongoing.content)]


# ---------------------------------------------------------------- grep


@pytest.fixture
def notes(store: Store) -> dict[str, MemoryNode]:
    return {
        "pytest": add(store, "Run tests:\npytest -q tests/\nthen ruff check"),
        "shout": add(store, "NEVER push to main"),
    }


def test_grep_matches_exact_text_line_by_line(store: Store, notes: dict[str, MemoryNode]) -> None:
    assert grep(store, "pytest -q") == [search_module.GrepMatch(notes["pytest"].id, 2, "pytest -q tests/")]
    assert grep(store, "PYTEST") == []
    assert grep(store, "pytest  -q") == []


def test_grep_ignore_case(store: Store, notes: dict[str, MemoryNode]) -> None:
    assert [(m.where, m.line) for m in grep(store, "never PUSH", ignore_case=True)] == [(notes["shout"].id, 1)]
    assert grep(store, "never PUSH") == []


def test_grep_regex_and_literal_special_characters(store: Store, notes: dict[str, MemoryNode]) -> None:
    matches = grep(store, r"\b(pytest|ruff)\b", regex=True)
    assert [(m.where, m.line) for m in matches] == [(notes["pytest"].id, 2), (notes["pytest"].id, 3)]
    assert grep(store, "tests/") != []
    assert grep(store, "tests.", regex=False) == []  # a literal dot, not any character
    assert grep(store, "tests.", regex=True) != []


def test_grep_a_bad_regex_is_a_usage_error(store: Store, notes: dict[str, MemoryNode]) -> None:
    with pytest.raises(UsageError, match="bad regular expression"):
        grep(store, "(unclosed", regex=True)
    assert grep(store, "(unclosed") == []  # as plain text it is fine


def test_grep_stops_a_regex_that_would_run_for_ever(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """``(a|aa)+$`` against a long run of a's backtracks exponentially: with Python's ``re`` it froze
    the command (and the MCP server with it). It now gives up after ``search.USER_PATTERN_SECONDS``."""
    from cclg.retrieval import search

    add_memory(store, "a" * 60 + "b", source="test")
    monkeypatch.setattr(search, "USER_PATTERN_SECONDS", 0.2)
    with pytest.raises(UsageError, match=r"took more than 0\.2 s"):
        grep(store, "(a|aa)+$", regex=True)
    assert grep(store, "aab", regex=True) != []  # a sane pattern still answers


def test_grep_raw_searches_raw_evidence_too(store: Store, notes: dict[str, MemoryNode]) -> None:
    path, _ = store.write_raw(b"meeting notes\nwe agreed: pytest -q everywhere\n", "meeting.md")
    assert [m.where for m in grep(store, "pytest -q")] == [notes["pytest"].id]
    matches = grep(store, "pytest -q", raw=True)
    assert [(m.where, m.line) for m in matches] == [(notes["pytest"].id, 2), (path, 2)]
    assert matches[1].text == "we agreed: pytest -q everywhere"


def test_grep_limit(store: Store) -> None:
    for i in range(5):
        add(store, f"line {i} says hello")
    assert len(grep(store, "hello")) == 5
    assert len(grep(store, "hello", limit=2)) == 2


# ---------------------------------------------------------------- graph


def test_graph_mode_pulls_in_what_a_hit_depends_on(store: Store) -> None:
    docker = new_node("Docker must be running first")
    compose = new_node("Integration tests use the compose file")
    compose.relations["depends_on"] = [docker.id]
    lines = [json.dumps(n.to_dict()) for n in (docker, compose)]
    result = import_jsonl(store, "\n".join(lines).encode(), name="graph.jsonl")
    assert result.patch is not None
    assert ids(search(store, "integration", mode="bm25")) == [compose.id]
    hits = search(store, "integration", mode="graph")
    assert ids(hits) == [compose.id, docker.id]
    assert [h.via for h in hits] == ["bm25", "graph"]
    assert hits[1].score == pytest.approx(hits[0].score / 2)


def test_graph_mode_does_not_pull_in_a_refined_target_or_an_out_of_scope_neighbour(store: Store) -> None:
    old = add(store, "Run the suite with pytest", key="test.command")
    refined = apply_patch(store, "refine", [old.id], reason="quiet", contents=["Run the suite with pytest -q"])
    new = refined.new_nodes[0]
    assert new.relations["refines"] == [old.id]
    assert ids(search(store, "suite", mode="graph")) == [new.id]

    elsewhere = new_node("The suite needs Postgres 16", scope=Scope(project="y"))
    forgotten = new_node("The suite needs Redis")
    hit = new_node("Nightly suite runs at 02:00", scope=Scope(project="x"))
    hit.relations["depends_on"] = [elsewhere.id, forgotten.id]
    write(store, elsewhere, forgotten, hit)
    apply_patch(store, "forget", [forgotten.id], reason="gone")
    graph = ids(search(store, "nightly", mode="graph", where=Where(project="x")))
    assert graph == [hit.id]
    assert ids(search(store, "nightly", mode="graph", where=Where(project="y"))) == []
    assert ids(search(store, "nightly", mode="graph")) == [hit.id, elsewhere.id]


# ---------------------------------------------------------------- time


def at(day: int) -> str:
    return datetime(2025, 1, day, 12, tzinfo=UTC).isoformat()


@pytest.fixture
def dated(store: Store) -> dict[str, MemoryNode]:
    """Three deploy memories whose id order, relevance order and time order all differ."""
    made = {
        "middle": new_node(
            "deploy deploy deploy with the script", node_id="mem_a0000000000000000000000000", created_at=at(10)
        ),
        "newest": new_node("deploy from CI", node_id="mem_b0000000000000000000000000", created_at=at(20)),
        "oldest": new_node(
            "deploy by hand with the old deploy notes", node_id="mem_c0000000000000000000000000", created_at=at(1)
        ),
    }
    write(store, *made.values())
    return made


def test_temporal_mode_orders_newest_first(store: Store, dated: dict[str, MemoryNode]) -> None:
    by_relevance = ids(search(store, "deploy", mode="bm25"))
    newest_first = [dated[k].id for k in ("newest", "middle", "oldest")]
    assert sorted(by_relevance) == sorted(newest_first) and by_relevance != newest_first
    hits = search(store, "deploy", mode="temporal")
    assert ids(hits) == newest_first


def test_since_and_until_filter_by_when_a_memory_was_recorded(store: Store, dated: dict[str, MemoryNode]) -> None:
    def found(**window: datetime | None) -> set[str]:
        return {h.node.id for h in search(store, "deploy", **window)}  # type: ignore[arg-type]

    day = parse_time
    assert found(since=day(at(5))) == {dated["middle"].id, dated["newest"].id}
    assert found(until=day(at(15))) == {dated["oldest"].id, dated["middle"].id}
    assert found(since=day(at(5)), until=day(at(15))) == {dated["middle"].id}
    assert found(since=day(at(10))) == {dated["middle"].id, dated["newest"].id}, "since is inclusive"
    assert found(until=day(at(10))) == {dated["oldest"].id}, "until is exclusive"
    assert found(since=day(at(25))) == set()


@pytest.fixture
def ledger_times(store: Store) -> Iterator[dict[str, Any]]:
    """A memory, superseded later: distinct, known times from a fixed clock."""
    with fixed_clock(FixedClock("2025-03-01T00:00:00+00:00", tag="asof")):
        old = add(store, "Deploy target is staging", key="deploy.target")
        superseded = apply_patch(
            store, "supersede", [old.id], reason="go live", contents=["Deploy target is production"]
        )
    new = superseded.new_nodes[0]
    created = parse_time(old.created_at)
    replaced = parse_time(superseded.patch.created_at)
    assert created < replaced
    yield {"old": old, "new": new, "created": created, "replaced": replaced}


def test_as_of_shows_the_view_before_a_later_supersede(store: Store, ledger_times: dict[str, Any]) -> None:
    t = ledger_times
    between = t["created"] + (t["replaced"] - t["created"]) / 2
    assert ids(search(store, "deploy target", as_of=between)) == [t["old"].id]
    assert ids(search(store, "deploy target", as_of=t["replaced"])) == [t["new"].id]
    assert ids(search(store, "deploy target", as_of=t["created"] - timedelta(seconds=1))) == []
    assert ids(search(store, "deploy target")) == [t["new"].id]
    assert ids(search(store, "staging", as_of=between)) == [t["old"].id]
    assert search(store, "staging") == []


def test_as_of_cannot_be_combined_with_a_status(store: Store, ledger_times: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match="cannot be combined"):
        search(store, "deploy", as_of=ledger_times["created"], status="all")


def test_as_of_before_a_rollback_still_sees_the_retirement(store: Store) -> None:
    with fixed_clock(FixedClock("2025-04-01T00:00:00+00:00", tag="undo")):
        node = add(store, "Cache TTL is five minutes")
        forgetting = apply_patch(store, "forget", [node.id], reason="oops")
        undo = rollback(store, forgetting.patch.id)
    forgotten_at = parse_time(forgetting.patch.created_at)
    restored_at = parse_time(undo.patch.created_at)
    assert search(store, "cache", as_of=forgotten_at) == []
    assert ids(search(store, "cache", as_of=restored_at)) == [node.id]
    assert ids(search(store, "cache", as_of=forgotten_at - timedelta(microseconds=1))) == [node.id]


def test_parse_moment() -> None:
    assert parse_moment(None, "--since") is None
    assert parse_moment("2025-01-02", "--since") == datetime(2025, 1, 2, tzinfo=UTC)
    assert parse_moment("2025-01-02T03:04:05+09:00", "--since") == datetime(2025, 1, 1, 18, 4, 5, tzinfo=UTC)
    with pytest.raises(UsageError, match="--until must be an ISO 8601"):
        parse_moment("last tuesday", "--until")


# ---------------------------------------------------------------- auto: fusion


def test_auto_mode_fuses_ranked_graph_and_exact_lists(store: Store) -> None:
    ci = new_node("The runners need docker")
    ship = new_node("We ship release builds from the main branch")
    ship.relations["depends_on"] = [ci.id]
    notes = new_node("Release notes are written by hand")
    write(store, ci, ship, notes)
    hits = search(store, "ship release", mode="auto")
    assert ids(hits) == [ship.id, notes.id, ci.id]
    assert {h.via for h in hits} == {"auto"}
    k = search_module.RRF_K
    # ship: first in the ranked, graph and exact lists; notes: second in two; ci: third, graph only.
    assert [h.score for h in hits] == pytest.approx([3 / (k + 1), 2 / (k + 2), 1 / (k + 3)])


def test_auto_mode_keeps_to_the_view(store: Store, history: dict[str, MemoryNode]) -> None:
    assert ids(search(store, "tests")) == [history["new"].id]


# ---------------------------------------------------------------- Korean, Japanese, Chinese


@pytest.fixture
def multilingual(store: Store) -> dict[str, MemoryNode]:
    return {
        "ko": add(store, "배포 설정은 README에 있다"),
        "ko2": add(store, "CCLG는 기억 저장소다"),
        "ja": add(store, "テストはpytestで実行する"),
        "zh": add(store, "运行测试用例之前先启动数据库"),
        "en": add(store, "The settings live in config.toml"),
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("설정", "ko"),
        ("배포 설정", "ko"),
        ("설정은", "ko"),
        ("cclg", "ko2"),
        ("기억", "ko2"),
        ("実行", "ja"),
        ("テスト", "ja"),
        ("测试", "zh"),
        ("数据库", "zh"),
    ],
)
def test_cjk_queries_find_memories_written_in_them(
    store: Store, multilingual: dict[str, MemoryNode], query: str, expected: str
) -> None:
    assert ids(search(store, query, mode="bm25"))[:1] == [multilingual[expected].id]
    assert ids(search(store, query))[:1] == [multilingual[expected].id]


def test_a_cjk_query_does_not_match_unrelated_text(store: Store, multilingual: dict[str, MemoryNode]) -> None:
    assert search(store, "東京", mode="bm25") == []
    assert search(store, "설명", mode="bm25") == []


def test_japanese_query_finds_the_english_word_inside_it(store: Store, multilingual: dict[str, MemoryNode]) -> None:
    assert multilingual["ja"].id in ids(search(store, "pytest"))


# ---------------------------------------------------------------- the command line


@pytest.fixture
def cli_store(store: Store) -> dict[str, MemoryNode]:
    return {
        "pytest": add(store, "Tests run with pytest -q", key="test.command"),
        "tox": add(store, "Tests run with tox", key="test.command", scope=Scope(project="y")),
        "s1": add(store, "Debugging the flaky upload test", scope=Scope(session="s1")),
    }


def test_cli_search_json(store: Store, cli_store: dict[str, MemoryNode]) -> None:
    result = run(store, "search", "tests", "--json", "--project", "x")
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert [h["id"] for h in hits] == [cli_store["pytest"].id]
    assert set(hits[0]) == {"id", "score", "via", "matched", "node"}
    assert hits[0]["node"]["content"] == "Tests run with pytest -q"
    assert hits[0]["via"] == "auto"

    result = run(store, "search", "tests", "--json", "--project", "y", "--mode", "bm25")
    assert [h["id"] for h in json.loads(result.stdout)] == [cli_store["tox"].id]
    result = run(store, "search", "flaky", "--json", "--session", "s1")
    assert [h["id"] for h in json.loads(result.stdout)] == [cli_store["s1"].id]
    result = run(store, "search", "flaky", "--json")
    assert json.loads(result.stdout) == []


def test_cli_search_text_output(store: Store, cli_store: dict[str, MemoryNode]) -> None:
    result = run(store, "search", "pytest", "--project", "x")
    assert result.exit_code == 0
    assert cli_store["pytest"].id in result.stdout and "[active] Tests run with pytest -q" in result.stdout
    result = run(store, "search", "nothing-like-this")
    assert result.exit_code == 0 and result.stdout.splitlines() == ["no matches", "semantic: off"]


def test_cli_search_status_and_time_options(store: Store, cli_store: dict[str, MemoryNode]) -> None:
    result = run(store, "search", "tests", "--json", "--status", "all", "--mode", "bm25")
    assert {h["id"] for h in json.loads(result.stdout)} == {n.id for n in cli_store.values()}
    result = run(store, "search", "tests", "--json", "--since", "2000-01-01", "--until", "2000-01-02")
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    result = run(store, "search", "tests", "--json", "--as-of", "2000-01-01")
    assert result.exit_code == 0 and json.loads(result.stdout) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "fuzzy"], "Invalid value for '--mode'"),
        (["--as-of", "yesterday"], "--as-of must be an ISO 8601"),
        (["--since", "soon"], "--since must be an ISO 8601"),
        (["--until", "2025-13-01"], "--until must be an ISO 8601"),
        (["--status", "bogus"], "unknown status"),
        (["--as-of", "2025-01-01", "--status", "all"], "cannot be combined"),
        (["--limit", "0"], "Invalid value for '--limit'"),
    ],
)
def test_cli_search_bad_options_exit_2(
    store: Store, cli_store: dict[str, MemoryNode], args: list[str], message: str
) -> None:
    result = run(store, "search", "tests", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_cli_grep(store: Store, cli_store: dict[str, MemoryNode]) -> None:
    result = run(store, "grep", "pytest -q", "--project", "x")
    assert result.exit_code == 0
    assert result.stdout == f"{cli_store['pytest'].id}:1: Tests run with pytest -q\n"
    # Without a project the project-y override of the same key is the one in the view.
    assert run(store, "grep", "pytest -q").stdout.strip() == "no matches"
    result = run(store, "grep", "-i", "TESTS RUN", "--project", "y", "--json")
    assert [m["where"] for m in json.loads(result.stdout)] == [cli_store["tox"].id]
    result = run(store, "grep", "-E", r"t(ox|est)s?\b", "--json", "--session", "s1")
    assert {m["where"] for m in json.loads(result.stdout)} == {cli_store["tox"].id, cli_store["s1"].id}
    result = run(store, "grep", "nowhere")
    assert result.exit_code == 0 and result.stdout.strip() == "no matches"


def test_cli_grep_raw_and_bad_regex(store: Store, cli_store: dict[str, MemoryNode]) -> None:
    path, _ = store.write_raw(b"transcript: use pytest -q\n", "chat.txt")
    result = run(store, "grep", "--raw", "pytest -q", "--json", "--project", "x")
    assert result.exit_code == 0
    assert [m["where"] for m in json.loads(result.stdout)] == [cli_store["pytest"].id, path]
    result = run(store, "grep", "--regex", "[unclosed")
    assert result.exit_code == 2
    assert "bad regular expression" in result.stderr


def test_cli_reindex(store: Store, cli_store: dict[str, MemoryNode]) -> None:
    before = run(store, "search", "tests", "--json", "--status", "all").stdout
    result = run(store, "reindex")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("indexed 3 memories in ")
    (Path(store.root) / "index.sqlite").unlink()
    assert run(store, "reindex").exit_code == 0
    assert run(store, "search", "tests", "--json", "--status", "all").stdout == before


def test_cli_search_of_a_folder_that_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    result = CliRunner().invoke(cli, ["--root", str(tmp_path / "plain"), "search", "x"])
    assert result.exit_code == 3


def test_a_store_with_nothing_retired_skips_the_search_for_retired_memories(store: Store) -> None:
    """Every prompt also asks which retired memories match it (to list them apart); with none in the
    store that search of every match found nothing and cost 7-10 ms at 100,000 memories."""
    from cclg.ledger.index import open_index

    for content in ("Deploys run from the blue-green script", "Deploys need two approvals"):
        add_memory(store, content, source="t")
    index = open_index(store)
    try:
        statements: list[str] = []
        index.db.set_trace_callback(statements.append)
        assert search_module.bm25(index, "deploys", Where(), status="retired") == []
        assert not any("MATCH" in s for s in statements), statements
        assert len(search_module.bm25(index, "deploys", Where())) == 2
    finally:
        index.close()
    target = next(n.id for n in store.load_nodes().values() if "approvals" in n.content)
    apply_patch(store, "supersede", [target], reason="policy changed", contents=["Deploys need one approval"])
    index = open_index(store)
    try:
        assert [h.id for h in search_module.bm25(index, "deploys", Where(), status="retired")] == [target]
    finally:
        index.close()


class _Frequencies:
    """An index as ``search._selective`` reads it: how many memories it holds, and each term's count."""

    def __init__(self, total: int, docs: dict[str, int]) -> None:
        self.total, self.docs = total, docs

    def document_frequencies(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        return self.total, {t: self.docs.get(t, 0) for t in terms}


def test_the_candidates_match_with_the_rarest_terms_within_a_budget_and_search_with_all() -> None:
    """In a large store the pack's candidates are found with the rarest terms holding at most ``postings``
    memories together (FTS5 scores every memory its terms hold), the rarest always, in the prompt's
    order; search, whose BM25 ranking is final, keeps every term but the commonest."""
    from cclg.retrieval.search import _selective

    index: Any = _Frequencies(100_000, {"mirvel": 3, "deploy": 1_500, "staging": 900, "tests": 7_000, "the": 60_000})
    terms = ["deploy", "the", "mirvel", "staging", "tests"]
    assert _selective(index, terms) == ["deploy", "mirvel", "staging", "tests"]  # "the": in 60% of the store
    assert _selective(index, terms, postings=2000) == ["mirvel", "staging"]  # 3 + 900; + 1,500 is over
    assert _selective(index, terms, postings=10) == ["mirvel"]
    assert _selective(index, ["tests", "deploy"], postings=10) == ["deploy"]  # the rarest, even over the budget
    small: Any = _Frequencies(1_500, {"deploy": 1_400, "mirvel": 1})
    assert _selective(small, ["deploy", "mirvel"], postings=10) == ["deploy", "mirvel"]  # a small store: all
