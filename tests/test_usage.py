"""Usage feedback (issue 19): which delivered memories a session used, kept as session evidence,
shown by `cclg stats`, and fed into ranking as a bounded prior that never overrides relevance."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from cclg import api
from cclg.cli import cli
from cclg.core.ids import short_id
from cclg.core.store import Store
from cclg.hook import handle
from cclg.learning import usage
from cclg.retrieval import usage_prior

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
    (line,) = [json.loads(x) for x in (store.usage_log_path).read_text().splitlines()]
    assert line["used"] == [ids[PNPM]] and line["ignored"] == [ids[YARN]]
    events = [e for e in store.session_events("s1") if e["event"] == "session_end"]
    assert events, "the session's own log records its end"
    assert json.loads((store.usage_summary_path).read_text()) == {ids[PNPM]: [1, 1], ids[YARN]: [1, 0]}


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
    assert usage_prior.prior(0, 0) == 1.0
    assert 1.0 < usage_prior.prior(5, 5) <= 1.1
    assert 0.9 <= usage_prior.prior(20, 0) < 1.0
    assert usage_prior.prior(100, 100) <= 1.1 and usage_prior.prior(1000, 0) >= 0.9


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
    assert mcp_tools.memory_stats(store) == usage.table(store)
    assert [r["content"] for r in mcp_tools.memory_stats(store, dead_weight=True, min_delivered=1)["memories"]] == [
        YARN
    ]


# ---------------------------------------------------------------- issue 27, rule 11: the bound holds at the edge

SHOP = {"project": "shop"}
CHECKLIST = "how do I tag the release build?"
WORDS = "amber birch cedar delta ember fjord grove heron iris juniper kestrel larch maple".split()


def checklist(store: Store) -> list[str]:
    """13 memories the prompt matches equally well (the same words, one distinct word each)."""
    return [
        api.add_memory(
            store, f"Release checklist, {word} lane: tag the build before the upload", source="user",
            scope=api.parse_scope(SHOP),
        ).node.id
        for word in WORDS
    ]  # fmt: skip


def delivered_ids(context: str) -> set[str]:
    import re

    return set(re.findall(r"mem_[0-9a-z]{26}", context))


def test_one_session_ignoring_twelve_of_thirteen_equal_memories_swaps_none_of_them(store: Store) -> None:
    """The issue's reproducer: 13 equally relevant memories and a budget of 12; one session was given
    12 and used none, and the next pack swapped one of them for the 13th: usage alone decided
    membership at the budget's edge."""
    ids = checklist(store)
    first = event(store, "s1", "user-prompt", prompt=CHECKLIST) or ""
    given = delivered_ids(first)
    assert len(given) == 12 and given < set(ids)
    response = {"stdout": "done", "stderr": "", "interrupted": False, "isImage": False}
    event(store, "s1", "post-tool", tool_name="Bash", tool_input={"command": "ls"}, tool_response=response)
    event(store, "s1", "session-end", reason="exit")
    (line,) = [json.loads(x) for x in (store.usage_log_path).read_text().splitlines()]
    assert sorted(line["ignored"]) == sorted(given) and line["used"] == []
    again = event(store, "s2", "user-prompt", prompt=CHECKLIST) or ""
    assert delivered_ids(again) == given, "the hook's pack keeps the same 12"
    packed = api.compile_pack(
        store, api.PackRequest(CHECKLIST, where=api.Where(project="shop"), budget=api.Budget(max_nodes=12))
    )["memory_nodes"]
    assert {e["id"] for e in packed} == given, "so does cclg pack"


def test_tool_output_echoing_a_memory_is_not_a_use(store: Store) -> None:
    """What a tool printed (a file, a web page, a test's output) is not what the agent did: a memory
    whose words only came back in tool output was ignored, not used."""
    ids = memories(store)
    event(store, "s1", "user-prompt", prompt="how do I install dependencies?")
    echo = {"stdout": f"README:\n{PNPM}\n{YARN}", "stderr": "", "interrupted": False, "isImage": False}
    event(store, "s1", "post-tool", tool_name="Bash", tool_input={"command": "cat README.md"}, tool_response=echo)
    failed = {"command": "npm test"}
    event(
        store, "s1", "post-tool", tool_name="Bash", tool_input=failed,
        tool_response={"stdout": "", "stderr": "run `pnpm install --frozen-lockfile` first", "interrupted": False},
    )  # fmt: skip
    event(store, "s1", "session-end", reason="exit")
    (line,) = [json.loads(x) for x in (store.usage_log_path).read_text().splitlines()]
    assert line["used"] == [] and sorted(line["ignored"]) == sorted(ids.values())


def test_usage_counts_never_change_which_memories_a_budget_holds(tmp_path_factory: Any) -> None:
    """Property: for any usage counts and any budget, the pack holds the memories it holds without
    usage; usage only orders them."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    store, _ = Store.init(tmp_path_factory.mktemp("usage") / "store")
    ids = checklist(store)
    ids += [
        api.add_memory(store, f"Tag the release build, {word} lane, after the checklist", source="user").node.id
        for word in ("north", "south", "east")
    ]
    counts = st.dictionaries(
        st.sampled_from(ids), st.tuples(st.integers(0, 40), st.integers(0, 40)).map(lambda t: [max(t), min(t)])
    )

    def packed(max_nodes: int, max_chars: int) -> list[dict[str, Any]]:
        pack = api.compile_pack(
            store, api.PackRequest(CHECKLIST, budget=api.Budget(max_nodes=max_nodes, max_chars=max_chars))
        )
        return list(pack["memory_nodes"])

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(counts=counts, max_nodes=st.integers(1, 16), max_chars=st.integers(60, 1200))
    def check(counts: dict[str, list[int]], max_nodes: int, max_chars: int) -> None:
        store.write_file(store.usage_summary_path, b"{}")
        without = packed(max_nodes, max_chars)
        store.write_file(store.usage_summary_path, json.dumps(counts).encode())
        with_usage = packed(max_nodes, max_chars)
        assert sorted(e["id"] for e in with_usage) == sorted(e["id"] for e in without)
        prior = usage_prior.priors(store)
        weighed = [e["score"] * prior.get(e["id"], 1.0) for e in with_usage]
        assert weighed == sorted(weighed, reverse=True), "usage orders what is in"

    check()


def related_session(store: Store, name: str, command: str) -> tuple[str, str]:
    """A session whose prompt is offered one memory as possibly related (not in full), then runs
    ``command`` and ends: (the context, the offered id)."""
    from tests.test_pack import SOFTWARE_FACTS, seed
    from tests.test_possibly_related import FRONTEND, PARTIAL

    offered = dict(zip(SOFTWARE_FACTS, seed(store, SOFTWARE_FACTS), strict=True))[FRONTEND]
    context = event(store, name, "user-prompt", prompt=PARTIAL) or ""
    response = {"stdout": "done", "stderr": "", "interrupted": False, "isImage": False}
    event(store, name, "post-tool", tool_name="Bash", tool_input={"command": command}, tool_response=response)
    event(store, name, "session-end", reason="exit")
    return context, offered


def test_a_possibly_related_memory_never_opened_has_no_verdict(store: Store) -> None:
    context, offered = related_session(store, "s1", "npm run build")
    assert short_id(offered) in context, "offered as one line, with the id's short form"
    assert usage.observe_session(store, "s1") == {"used": [], "ignored": []}


def test_a_possibly_related_memory_opened_by_its_id_counts_as_used(store: Store) -> None:
    from tests.test_pack import SOFTWARE_FACTS, seed
    from tests.test_possibly_related import FRONTEND, PARTIAL

    offered = dict(zip(SOFTWARE_FACTS, seed(store, SOFTWARE_FACTS), strict=True))[FRONTEND]
    context = event(store, "s2", "user-prompt", prompt=PARTIAL) or ""
    assert short_id(offered) in context
    response = {"content": [{"type": "text", "text": FRONTEND}]}
    event(store, "s2", "post-tool", tool_name="mcp__cclg__memory_cite", tool_input={"memory_id": offered},
          tool_response=response)  # fmt: skip
    event(store, "s2", "session-end", reason="exit")
    (line,) = [json.loads(x) for x in (store.usage_log_path).read_text().splitlines()]
    assert line["used"] == [offered] and line["ignored"] == []


def test_a_possibly_related_memory_opened_by_its_short_id_counts_as_used(store: Store) -> None:
    """The line shows ``mem~...``: the agent opens it with what it was shown."""
    from tests.test_pack import SOFTWARE_FACTS, seed
    from tests.test_possibly_related import FRONTEND, PARTIAL

    offered = dict(zip(SOFTWARE_FACTS, seed(store, SOFTWARE_FACTS), strict=True))[FRONTEND]
    context = event(store, "s3", "user-prompt", prompt=PARTIAL) or ""
    assert short_id(offered) in context and offered not in context
    response = {"stdout": FRONTEND, "stderr": "", "interrupted": False, "isImage": False}
    event(store, "s3", "post-tool", tool_name="Bash", tool_input={"command": f"cclg show {short_id(offered)}"},
          tool_response=response)  # fmt: skip
    event(store, "s3", "session-end", reason="exit")
    (line,) = [json.loads(x) for x in (store.usage_log_path).read_text().splitlines()]
    assert line["used"] == [offered] and line["ignored"] == []
