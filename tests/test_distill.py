"""Distilling a session (issue 19): corrections and decisions in the user's prompts, in English, Korean
and Japanese, proposed as memories with their evidence; nothing written until the user accepts, and
a correction supersedes what it corrects instead of sitting beside it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from cclg import api
from cclg.cli import cli
from cclg.core.records import QUESTION_CHARS, node_questions
from cclg.core.store import Store
from cclg.errors import UsageError
from cclg.hook import handle
from cclg.intake.new_memories import parse_scope
from cclg.learning import distill
from cclg.maintenance.doctor import diagnose

SESSION = "distill-s1"


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("no, use pnpm not npm. the lockfile is pnpm-lock.yaml", "correction"),
        ("that's wrong: the API listens on 8443, not 8080", "correction"),
        ("the `--legacy` flag was removed in 3.0; it's `--compat` these days", "correction"),
        ("아니, yarn 말고 pnpm으로 설치해", "correction"),
        ("違います。デフォルトブランチはmainではなくdevelopです", "correction"),
        ("from now on, run the linter before every commit", "decision"),
        ("Never force-push to main.", "decision"),
        ("앞으로는 PR 설명을 한국어로 써줘", "decision"),
        ("今後はコミットを小さく分けてください", "decision"),
        ("is it wrong to pin numpy here?", None),  # a question
        ("no errors this time, thanks!", None),
        ("let's try the new cache and see if p99 drops", None),  # a trial, not a decision
        ("the log says:\n```\nERROR: never reached the server, use --retry instead\n```\nwhat happened?", None),
        ("違うエラーが出ました。見てもらえますか？", None),  # "a different error", and a question
        ("앞으로 몇 개 남았어?", None),
    ],
)
def test_detect_reads_the_users_own_words(prompt: str, kind: str | None) -> None:
    found = distill.detect(prompt)
    assert (found["kind"] if found else None) == kind, found


def prompt_event(store: Store, text: str) -> None:
    payload = {"session_id": SESSION, "cwd": "/home/u/shop", "hook_event_name": "UserPromptSubmit", "prompt": text}
    handle("user-prompt", payload, "claude", str(store.root))


@pytest.fixture
def session(store: Store) -> dict[str, Any]:
    old = api.add_memory(
        store, "The staging database listens on port 5432", source="user", scope=parse_scope({"project": "shop"})
    ).node
    prompt_event(store, "can you check the staging config?")
    prompt_event(store, "no, the staging database is on port 5433 now, not 5432")
    prompt_event(store, "From now on always run ruff before committing.")
    prompt_event(store, "is the cache always cold after a deploy?")
    return {"old": old}


def test_proposals_carry_evidence_and_correct_rather_than_duplicate(store: Store, session: dict[str, Any]) -> None:
    before = len(store.load_nodes())
    correction, decision = distill.propose(store, SESSION)
    assert len(store.load_nodes()) == before, "nothing is written by proposing"
    assert correction["kind"] == "correction" and correction["action"] == "supersede"
    assert correction["target"] == session["old"].id and correction["scope"] == {"project": "shop"}
    assert decision == {**decision, "kind": "decision", "action": "add", "number": 2, "type": "project_decision"}
    span = correction["evidence"]["raw_span"]
    raw = (store.root / "raw" / span["source_id"]).read_text()
    assert raw[span["char_start"] : span["char_end"]] == correction["content"]


def test_accepting_writes_through_the_ledger_with_the_evidence(store: Store, session: dict[str, Any]) -> None:
    (done,) = distill.accept(store, SESSION, [1])
    (new_id,) = done["new_memory_ids"]
    assert api.show(store, session["old"].id).status == "superseded"
    cited = api.cite(store, new_id)
    assert cited["raw_spans"][0]["text"] == "no, the staging database is on port 5433 now, not 5432"
    assert diagnose(store).ok
    with pytest.raises(UsageError, match="no proposal numbered 7"):
        distill.accept(store, SESSION, [7])


def test_a_proposal_carries_the_users_sentence_as_a_question_and_accepting_writes_it(
    store: Store, session: dict[str, Any]
) -> None:
    api.patch(store, "update", [session["old"].id], contents=[session["old"].content], reason="asked",
              questions=["what port is the staging db on?"])  # fmt: skip
    correction, decision = distill.propose(store, SESSION)
    assert correction["questions"] == [correction["content"]] and decision["questions"] == [decision["content"]]
    done = distill.accept(store, SESSION, None)
    corrected = api.show(store, done[0]["new_memory_ids"][0])
    assert node_questions(corrected) == ["what port is the staging db on?", correction["content"]]
    assert node_questions(api.show(store, done[1]["memory"])) == [decision["content"]]


def test_a_long_sentence_becomes_a_question_cut_at_a_word() -> None:
    question = distill.as_question("word " * 100)
    assert len(question) <= QUESTION_CHARS and question.endswith("word")


def test_the_cli_lists_then_accepts(store: Store, session: dict[str, Any]) -> None:
    runner = CliRunner()
    listed = runner.invoke(cli, ["--root", str(store.root), "distill", SESSION])
    assert listed.exit_code == 0, listed.output
    assert "1. [correction] no, the staging database is on port 5433 now, not 5432" in listed.output
    assert f"would supersede {session['old'].id}" in listed.output and "--accept N" in listed.output
    accepted = runner.invoke(cli, ["--root", str(store.root), "distill", SESSION, "--accept", "2", "--json"])
    assert accepted.exit_code == 0, accepted.output
    (done,) = json.loads(accepted.output)["accepted"]
    assert api.show(store, done["memory"]).content == "From now on always run ruff before committing."


def test_the_mcp_tool_proposes_and_writes_nothing(store: Store, session: dict[str, Any]) -> None:
    from cclg import mcp_tools

    before = len(store.load_nodes()), len(store.load_patches())
    proposals = mcp_tools.memory_distill(store, SESSION)["proposals"]
    assert [p["kind"] for p in proposals] == ["correction", "decision"]
    assert (len(store.load_nodes()), len(store.load_patches())) == before


def test_a_fact_stated_in_two_prompts_is_proposed_once(store: Store) -> None:
    for text in (
        "The billing service reads its config from /etc/billing.toml. Can you check the parser?",
        "ok that works. The billing service reads its config from /etc/billing.toml.",
        "thanks",
        "thanks",
    ):
        prompt_event(store, text)
    (proposal,) = distill.propose(store, SESSION)
    assert proposal["kind"] == "repeated" and proposal["type"] == "project_fact" and proposal["action"] == "add"
    assert proposal["content"] == "The billing service reads its config from /etc/billing.toml."


def test_a_distilled_correction_of_a_pinned_memory_is_not_pinned_and_the_proposal_says_so(store: Store) -> None:
    """Issue 27, rule 7: accepting a correction of the user's pinned memory once wrote a trusted, pinned
    memory whose text was the detector's reading of a prompt, and the proposal did not say so."""
    from cclg.core.labels import labels_of
    from cclg.retrieval.selection import PackRequest, compile_pack

    old = api.add_memory(
        store, "The staging database listens on port 5432", source="user", trust="trusted", retention="required",
        sensitivity="confidential", scope=parse_scope({"project": "shop"}),
    ).node  # fmt: skip
    prompt_event(store, "no, the staging database is on port 5433 now, not 5432")
    (proposal,) = distill.propose(store, SESSION)
    assert proposal["action"] == "supersede" and proposal["target"] == old.id
    assert proposal["labels"] == {"trust": "untrusted", "sensitivity": "confidential", "retention": "preferred"}
    assert proposal["lowered"] == ["trust trusted -> untrusted", "retention required -> preferred"]
    listed = CliRunner().invoke(cli, ["--root", str(store.root), "distill", SESSION])
    assert listed.exit_code == 0, listed.output
    assert "labels: trust untrusted, sensitivity confidential, retention preferred" in listed.output
    assert "lower than what it supersedes: trust trusted -> untrusted, retention required -> preferred" in listed.output
    (done,) = distill.accept(store, SESSION, [1])
    (new_id,) = done["new_memory_ids"]
    assert labels_of(api.show(store, new_id).metadata) == ("untrusted", "confidential", "preferred")
    assert compile_pack(store, PackRequest(""))["memory_nodes"] == [], "not pinned into every pack"


def test_every_proposal_shows_the_labels_acceptance_sets(store: Store, session: dict[str, Any]) -> None:
    from cclg.core.labels import labels_of

    proposals = distill.propose(store, SESSION)
    for proposal, done in zip(proposals, distill.accept(store, SESSION, None), strict=True):
        (node_id,) = done.get("new_memory_ids") or [done["memory"]]
        labels = labels_of(api.show(store, node_id).metadata)
        assert tuple(proposal["labels"][k] for k in ("trust", "sensitivity", "retention")) == labels, proposal
