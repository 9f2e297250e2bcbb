"""A short follow-up prompt is judged with the session's previous prompt; a long one alone."""

from __future__ import annotations

import pytest

from cclg.api import add_memory
from cclg.core.files import read_jsonl
from cclg.core.store import Store
from cclg.hook import handle
from cclg.retrieval.selection import PackRequest, select


@pytest.fixture
def deploys(store: Store) -> dict[str, str]:
    """Memories about deploying to each environment, and one unrelated."""
    return remember(
        store,
        production="Deploy to production with make release after the tag is pushed",
        staging="Deploy to staging with make stage, it needs the VPN",
        staging_db="The staging database is reset every night",
        staging_logs="Staging logs are kept for a week in the staging bucket",
        tests="The test suite runs with pytest -q from the repository root",
        fonts="The docs site uses Inter for headings",
    )


def remember(store: Store, **contents: str) -> dict[str, str]:
    """Add each memory the user states; name -> its id."""
    return {name: add_memory(store, content, source="user").new_nodes[0].id for name, content in contents.items()}


def prompt(store: Store, text: str, session: str = "s-1") -> list[str]:
    """Send ``text`` as the session's prompt; the ids its pack loaded."""
    payload = {"session_id": session, "cwd": "/home/u/repo", "hook_event_name": "UserPromptSubmit", "prompt": text}
    handle("user-prompt", payload, "claude", str(store.root))
    return read_jsonl(store.session_events_path(session)).records[-1]["summary"]["loaded_memory_ids"]


def test_a_short_follow_up_is_judged_with_the_previous_prompt(store: Store, deploys: dict[str, str]) -> None:
    assert deploys["production"] in prompt(store, "how do I deploy to production?")
    assert prompt(store, "and in staging?") == [deploys["staging"]]
    alone = select(store, PackRequest("and in staging?"))
    assert [h.id for h in alone.chosen] != [deploys["staging"]], "alone, the follow-up does not say which"


def test_the_previous_prompt_is_found_after_many_tool_calls(store: Store, deploys: dict[str, str]) -> None:
    """A turn of the agent's may run a hundred tools: the follow-up is still judged with the user's prompt."""
    prompt(store, "how do I deploy to production?")
    for n in range(120):
        tool = {
            "session_id": "s-1",
            "cwd": "/home/u/repo",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"ls {n}"},
            "tool_response": {"stdout": f"file-{n}"},
        }
        handle("post-tool", tool, "claude", str(store.root))
    assert prompt(store, "and in staging?") == [deploys["staging"]]


def test_a_content_free_follow_up_packs_nothing_new(store: Store, deploys: dict[str, str]) -> None:
    prompt(store, "how do I deploy to production?")
    assert prompt(store, "thanks, that worked") == []


def test_a_long_prompt_ignores_the_previous_one(store: Store, deploys: dict[str, str]) -> None:
    previous = "how do I deploy to staging?"
    long_prompt = "where do the docs headings get their font from, and which font family is it exactly?"
    alone = select(store, PackRequest(long_prompt))
    after = select(store, PackRequest(long_prompt, previous=previous))
    assert [h.id for h in after.chosen] == [h.id for h in alone.chosen]
    assert deploys["staging"] not in [h.id for h in after.chosen]


def test_the_first_prompt_of_a_session_has_no_previous_prompt(store: Store, deploys: dict[str, str]) -> None:
    alone = [h.id for h in select(store, PackRequest("and in staging?")).chosen]
    assert prompt(store, "and in staging?", session="s-2") == alone


def test_the_previous_prompt_only_supports_the_prompt_s_own_words(store: Store, deploys: dict[str, str]) -> None:
    request = PackRequest("and in staging?", previous="how do I deploy to production?")
    assert [h.id for h in select(store, request).chosen] == [deploys["staging"]]
    plain = PackRequest("thanks!", previous="how do I deploy to production?")
    assert select(store, plain).chosen == []


def test_a_session_log_that_cannot_be_read_leaves_the_prompt_its_pack(
    store: Store, deploys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The previous prompt is a help: when reading it fails, the prompt is judged alone."""
    from cclg.api import learning

    def broken(*args: object, **kwargs: object) -> list[str]:
        raise OSError("the session's log cannot be read")

    monkeypatch.setattr(learning, "recent_prompts", broken)
    assert deploys["production"] in prompt(store, "how do I deploy to production?")


def test_a_compaction_keeps_the_prompts_before_a_long_turn(store: Store) -> None:
    """The compact record's recent prompts are the user's last ones, however many tool calls followed."""
    from cclg.api import learning

    learning.start_session(store, "s-9", agent="claude", project=None)
    for text in ("fix the flaky cache test", "now run the whole suite"):
        learning.record_event(store, "s-9", "user_prompt", {}, summary={"prompt": text})
    for n in range(80):
        learning.record_event(store, "s-9", "post_tool", {}, summary={"tool": "Bash", "n": n})
    assert learning.recent_prompts(store, "s-9", 5) == ["fix the flaky cache test", "now run the whole suite"]
    assert learning.recent_prompts(store, "s-9", 1) == ["now run the whole suite"]
    assert learning.recent_prompts(store, "no-such-session", 5) == []


def test_a_short_question_on_a_new_subject_carries_nothing_over(store: Store) -> None:
    """The words a short prompt repeats from the previous one are the subject carried over: they are no
    evidence of their own, or a switch of subject would pack what the previous prompt was about."""
    ids = remember(
        store,
        tests="Tern tests run with uv run pytest -n auto",
        release="Tern is released to PyPI by pushing a version tag",
        docs="Tern docs are built with MkDocs from docs/",
        fonts="The docs site uses Inter for headings",
        deploy="Deploy to production with make release after the tag is pushed",
    )
    switch = PackRequest("how is tern released?", previous="how do I run the tern tests?")
    assert [h.id for h in select(store, switch).chosen] == [ids["release"]]
    follow_up = PackRequest("and the docs?", previous="how do I run the tern tests?")
    assert ids["docs"] in [h.id for h in select(store, follow_up).chosen], "a follow-up still reads its context"


def test_a_follow_up_after_a_long_prompt_reads_the_user_s_words_only(store: Store) -> None:
    """The session log keeps a long prompt's head and tail (a paste, then its question) around a note of
    how much more raw/ holds: the note's words ("characters", "raw") are not the user's, and a follow-up
    is judged with the head and the question, not with them."""
    from cclg.hook import SUMMARY_CHARS, Call, _previous_prompt

    question = "why does the staging deploy fail here?"
    long_prompt = "the deploy log: " + "step ok; " * SUMMARY_CHARS + question
    payload = {"session_id": "s-3", "cwd": "/home/u/repo", "hook_event_name": "UserPromptSubmit"}
    handle("user-prompt", {**payload, "prompt": long_prompt}, "claude", str(store.root))
    logged = read_jsonl(store.session_events_path("s-3")).records[-1]["summary"]["prompt"]
    assert "more characters in raw/" in logged and logged.endswith(question)
    call = Call("user-prompt", store, "s-3", {**payload, "prompt": "and in production?"}, "claude", False)
    previous = _previous_prompt(call)
    assert previous.startswith("the deploy log: step ok;") and previous.endswith(question)
    assert "characters" not in previous and "raw/" not in previous and len(previous) == SUMMARY_CHARS + 1
