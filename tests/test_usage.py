"""Usage feedback (issue 19): which delivered memories a session used, kept as session evidence,
shown by `cclg stats`, and fed into ranking as a bounded prior that never overrides relevance."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from cclg import api, usage
from cclg.cli import cli
from cclg.hook import handle
from cclg.store import Store

CWD = "/home/u/shop"
PNPM = "Install dependencies with `pnpm install --frozen-lockfile`; npm breaks the workspace links."
YARN = "Install dependencies with `yarn install --immutable` in the legacy admin folder."


def event(store: Store, session: str, name: str, **fields: Any) -> str | None:
    hosts = {"user-prompt": "UserPromptSubmit", "post-tool": "PostToolUse", "session-end": "SessionEnd"}
    payload = {"session_id": session, "cwd": CWD, "hook_event_name": hosts[name], **fields}
    return handle(name, payload, "claude", str(store.root))


def session(store: Store, name: str, command: str) -> str:
    """A session that asks how to install dependencies, runs ``command``, and ends; the pack's text."""
    context = event(store, name, "user-prompt", prompt="how do I install dependencies?") or ""
    response = {"stdout": "done", "stderr": "", "interrupted": False, "isImage": False}
    event(store, name, "post-tool", tool_name="Bash", tool_input={"command": command}, tool_response=response)
    event(store, name, "session-end", reason="exit")
    return context


def memories(store: Store) -> dict[str, str]:
    ids = {}
    for content in (PNPM, YARN):
        ids[content] = api.add_memory(store, content, source="user", scope=api.parse_scope({"project": "shop"})).node.id
    return ids


def test_a_session_echoing_a_memory_used_it_and_one_that_did_not_ignored_it(store: Store) -> None:
    ids = memories(store)
    context = session(store, "s1", "pnpm install --frozen-lockfile")
    assert PNPM in context and YARN in context, "both were delivered"
    (line,) = [json.loads(x) for x in (store.root / usage.LOG).read_text().splitlines()]
    assert line["used"] == [ids[PNPM]] and line["ignored"] == [ids[YARN]]
    events = [e for e in store.session_events("s1") if e["event"] == "session_end"]
    assert events, "the session's own log records its end"
    assert json.loads((store.root / usage.SUMMARY).read_text()) == {ids[PNPM]: [1, 1], ids[YARN]: [1, 0]}


def test_stats_and_dead_weight(store: Store) -> None:
    ids = memories(store)
    for number in range(3):
        session(store, f"s{number}", "pnpm install --frozen-lockfile")
    runner = CliRunner()
    listed = json.loads(runner.invoke(cli, ["--root", str(store.root), "stats", "--json"]).output)["memories"]
    assert {r["id"]: (r["delivered"], r["used"], r["ignored"]) for r in listed} == {
        ids[PNPM]: (3, 3, 0),
        ids[YARN]: (3, 0, 3),
    }
    dead = runner.invoke(cli, ["--root", str(store.root), "stats", "--dead-weight", "--min-delivered", "3"]).output
    assert ids[YARN] in dead and ids[PNPM] not in dead and f"cclg forget {ids[YARN]}" in dead


def test_the_prior_is_bounded_and_neutral_without_evidence() -> None:
    assert usage.prior(0, 0) == 1.0
    assert 1.0 < usage.prior(5, 5) <= 1.1
    assert 0.9 <= usage.prior(20, 0) < 1.0
    assert usage.prior(100, 100) <= 1.1 and usage.prior(1000, 0) >= 0.9


def test_a_memory_that_keeps_helping_rises_and_one_never_used_sinks(store: Store) -> None:
    """A simulated usage stream: two memories that match the prompt about equally; the sessions keep
    using the one that came second. After a few, it comes first. Both are still given: usage orders
    what relevance chose, it never decides what is relevant."""
    memories(store)
    before = session(store, "first", "ls")
    second = YARN if before.index(PNPM) < before.index(YARN) else PNPM
    first = PNPM if second == YARN else YARN
    command = "yarn install --immutable" if second == YARN else "pnpm install --frozen-lockfile"
    for number in range(6):
        session(store, f"stream-{number}", command)
    after = event(store, "later", "user-prompt", prompt="how do I install dependencies?") or ""
    assert second in after and first in after
    assert after.index(second) < after.index(first)


def test_the_mcp_tool_gives_the_same_table(store: Store) -> None:
    from cclg import mcp_tools

    memories(store)
    session(store, "s1", "pnpm install --frozen-lockfile")
    assert mcp_tools.memory_stats(store)["memories"] == usage.table(store)
    assert [r["content"] for r in mcp_tools.memory_stats(store, dead_weight=True, min_delivered=1)["memories"]] == [
        YARN
    ]
