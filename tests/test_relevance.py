"""The relevance decision on the prompts the issue that designed it names: task instructions, long
pastes, a new user's small store, and prompts the store says nothing about."""

from __future__ import annotations

import pytest

from cclg import api
from cclg.core.store import Store
from cclg.retrieval import relevance, semantic

NOTES = [
    "Database migrations are written with alembic in db/migrations",
    "Use ruff format for Python formatting",
    "Frontend is built with Vite",
    "Use uv for Python environments",
    "mypy --strict runs in CI on every push",
    "The CLI is built with click; flags go in cli/options.py and every flag needs a test in tests/test_cli.py",
    "Orchard's Postgres connections go through psycopg2 with a pool of 20; OperationalError 'too many clients' "
    "means the pool leaked",
    "i18n strings live in locales/*.po and are compiled with make messages",
    "Deploys go out from CI with the release workflow",
    "The test suite runs with pytest -q",
]
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/orchard/app/views.py", line 42, in list_orders\n'
    "    cursor.execute(sql)\n"
    "psycopg2.OperationalError: FATAL: sorry, too many clients already\n"
) * 4 + "this keeps happening on staging since this morning, what do I do?"


@pytest.fixture
def small(store: Store) -> Store:
    for note in NOTES:
        api.add_memory(store, note, source="user")
    return store


def packed(store: Store, query: str) -> list[str]:
    return [e["content"] for e in api.compile_pack(store, api.PackRequest(query))["memory_nodes"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("add a migration for the users table", NOTES[0]),
        ("please add a --verbose flag to the CLI and make sure the tests pass", NOTES[5]),
        ("what bundler builds the frontend", NOTES[2]),
        (TRACEBACK, NOTES[6]),
        ("deploys and tests", NOTES[8]),
    ],
)
def test_the_memory_a_prompt_needs_is_packed(small: Store, query: str, expected: str) -> None:
    assert expected in packed(small, query)


@pytest.mark.parametrize(
    "query",
    ["translate good morning into French", "we'll see you tomorrow", "what's the time complexity of quicksort"],
)
def test_a_prompt_the_store_says_nothing_about_gets_nothing(small: Store, query: str) -> None:
    assert packed(small, query) == []


def test_each_entry_says_why_and_the_runner_up_why_not(small: Store) -> None:
    explained = api.explain_pack(small, api.PackRequest("add a migration for the users table"))
    (entry,) = explained["pack"]["memory_nodes"]
    assert "migration" in entry["why"] and entry["evidence"]["matched"] == ["migration"]
    assert explained["left_out"] == [], "no other memory shares a word with it"
    explained = api.explain_pack(small, api.PackRequest("write a migration with alembic for the users table in Python"))
    (entry,) = explained["pack"]["memory_nodes"]
    (left,) = explained["left_out"]
    assert left["content"] == NOTES[3] and left["why_not"] == "no evidence strong enough; words: python"


def test_a_huge_prompt_searches_with_its_rarest_words(small: Store) -> None:
    """A megabyte of pasted log: the search keeps the terms the store holds that are rarest there,
    so the one note it is about still comes out."""
    noise = " ".join(f"line{i} ok done" for i in range(60_000))
    assert NOTES[6] in packed(small, noise + "\n" + TRACEBACK)


def test_meaning_lifts_words_that_fall_short_over_the_bar(small: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Words alone leave the migrations note out of "the database schema needs a new column" (it
    matches "database" only); a semantic similarity over the floor lifts it to the bar, one under the
    floor does not, and a lifted note never outranks one the words carry on their own."""
    query = "the database schema needs a new column"
    assert packed(small, query) == []
    (found,) = api.compile_pack(small, api.PackRequest("alembic migrations"))["memory_nodes"]
    migrations = found["id"]

    def similar(cosine: float) -> None:
        monkeypatch.setattr(semantic, "consult", lambda *a, **k: ([(migrations, cosine)], semantic.ANSWERED))

    similar(relevance.SEMANTIC_FLOOR + 0.01)
    assert packed(small, query) == []
    similar(relevance.SEMANTIC - 0.01)  # under the bar of meaning alone
    (entry,) = api.compile_pack(small, api.PackRequest(query))["memory_nodes"]
    assert entry["content"] == NOTES[0] and entry["evidence"]["strength"] == 1.0
    assert "backed by their meaning" in entry["why"]
    api.add_memory(small, "A new column is written with a default value", source="user")  # words carry it
    carried, lifted = api.compile_pack(small, api.PackRequest(query))["memory_nodes"]
    assert lifted["id"] == migrations and "backed by their meaning" in lifted["why"]
    assert "meaning" not in carried["why"] and lifted["evidence"]["strength"] <= 1.0 <= carried["evidence"]["strength"]


ADMIN = "If mirveltan-admin stops consuming, check the lag dashboard in Sentry, then restart the deployment."
GATEWAY = "Marlin allows each merchant 600 requests per minute at the gateway; see config/gateway.toml."
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.mark.parametrize(
    "query",
    [
        "we'll see you tomorrow",
        PNG,  # base64: its scraps (i, k, rw, 0, ...) are no words
    ],
)
def test_scraps_of_words_carry_no_prompt(store: Store, query: str) -> None:
    for note in [*NOTES, ADMIN, GATEWAY, "Keep a 1x1 PNG fixture in tests/data for the image upload tests"]:
        api.add_memory(store, note, source="user")
    assert packed(store, query) == []
    # The same notes are found by what they are about.
    assert ADMIN in packed(store, "mirveltan-admin stopped consuming")
    assert GATEWAY in packed(store, "what is the gateway's request limit per merchant?")


def test_a_compound_matched_in_part_counts_in_part(store: Store) -> None:
    """ "atlas-admin" shares only "admin" with "mirveltan-admin": half the word, not all of it (before,
    a prompt about another project's atlas-admin dashboard got the mirveltan-admin runbook)."""
    for note in [*NOTES, ADMIN]:
        api.add_memory(store, note, source="user")

    def share(query: str) -> float:
        explained = api.explain_pack(store, api.PackRequest(query))
        entries = explained["pack"]["memory_nodes"] + explained["left_out"]
        return float(next(e for e in entries if e["content"] == ADMIN)["evidence"]["query_share"])

    assert share("mirveltan-admin") == 1.0
    assert share("atlas-admin") == 0.5


def test_a_korean_word_is_matched_by_its_noun_not_by_a_bigram_inside_it(store: Store) -> None:
    """A Korean word is its noun, then its particles: "테이블에" (at the table) is matched by a note on
    "테이블", but "컨테이너" (container) is not, though both hold the bigram "테이" (before, a question
    about docker containers was offered notes on database tables)."""
    table = "주문 테이블에는 created_at 인덱스가 있다"
    for note in [*NOTES, table]:
        api.add_memory(store, note, source="user")

    def matched(query: str) -> list[str]:
        explained = api.explain_pack(store, api.PackRequest(query))
        entries = explained["pack"]["memory_nodes"] + explained["left_out"]
        return [w for e in entries if e["content"] == table for w in e["evidence"]["matched"]]

    assert "테이블을" in matched("테이블을 어떻게 만들어?")
    assert matched("도커 컨테이너 로그 보는 명령어") == []


def test_a_prompts_korean_word_credits_a_memorys_word_by_its_noun_alone(store: Store) -> None:
    """The same rule from the memory's side: a note on the log table ("로그 테이블은 ...") shares "로그"
    (logs) with a question about a docker container's logs, and its "테이블" is not matched by the
    "테이" inside the prompt's "컨테이너" (before, that made two of its four words the prompt's,
    and the table note was packed)."""
    note = "로그 테이블은 주문과 분리한다"
    for text in [*NOTES, note]:
        api.add_memory(store, text, source="user")
    explained = api.explain_pack(store, api.PackRequest("도커 컨테이너 로그 보는 명령어"))
    assert note not in [e["content"] for e in explained["pack"]["memory_nodes"]]
    (entry,) = [e for e in explained["left_out"] if e["content"] == note]
    assert entry["evidence"]["memory_share"] == pytest.approx(0.25, abs=0.01)  # "로그" alone of four words
    assert note in packed(store, "로그 테이블 분리 기준")  # a question about the table still finds it
