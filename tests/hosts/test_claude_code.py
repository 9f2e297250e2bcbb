"""cclg inside the real Claude Code CLI (issue 16): ``cclg install claude`` in a temporary HOME, then
``claude -p`` against a loopback fake of the Anthropic Messages API that records what the CLI sends.

The CLI is installed once from the npm registry into a cache folder (see conftest.py); without node
and npm, or when the install fails, these tests skip with one line saying why."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .common import (
    CURRENT,
    FAILING_COMMAND,
    PROMPT,
    RETIRED,
    Host,
    assert_code_graph_reached,
    assert_current_reached_not_retired,
    assert_pain_reached_model_once,
    helper_share,
    index_project,
    isolated_env,
)
from .common import assert_store_clean as _assert_store_clean
from .common import cclg as _cclg
from .common import events as _events
from .common import strings as _strings
from .conftest import FakeAnthropic

pytestmark = pytest.mark.hosts

if shutil.which("node") is None or shutil.which("npm") is None:
    pytest.skip("host tests need node and npm on PATH", allow_module_level=True)


@pytest.fixture
def host(tmp_path: Path, fake_anthropic: FakeAnthropic) -> Host:
    """A temporary HOME with a cclg store (one current and one retired memory) installed for Claude Code."""
    home = tmp_path / "host-home"
    project = home / "work" / "kestrel"
    project.mkdir(parents=True)
    env = isolated_env(home, tmp_path)
    env.update(
        {
            # The fake model, and a dummy key.
            "ANTHROPIC_BASE_URL": fake_anthropic.url,
            "ANTHROPIC_API_KEY": "sk-ant-test-dummy-key",
            # Nothing but the model request: no updater, telemetry, error reports or feature flags.
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_UPDATES": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_GROWTHBOOK": "1",
            "DISABLE_INSTALLATION_CHECKS": "1",
            "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        }
    )
    placeholder = Host(home, Path(env["CCLG_HOME"]), project, env, "", "")
    _cclg(placeholder, "init")
    old = json.loads(_cclg(placeholder, "add", "--content", RETIRED, "--source", "user", "--json").stdout)
    retired_id = old["node"]["id"]
    new = json.loads(
        _cclg(
            placeholder, "patch", "supersede", "--target", retired_id, "--content", CURRENT,
            "--reason", "kestrel moved off Jenkins", "--json",
        ).stdout
    )  # fmt: skip
    current_id = new["patch"]["new_node_ids"][0]
    _cclg(placeholder, "install", "claude")  # the user install, as a user gets it
    return Host(home, placeholder.store, project, env, current_id, retired_id)


def _run_claude(claude: Path, host: Host, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [str(claude), "-p", PROMPT, "--output-format", "json", *args], cwd=host.project, env=host.env,
        capture_output=True, text=True, timeout=90, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, f"claude failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


def _assert_memory_reached_model(fake: FakeAnthropic, host: Host) -> None:
    bodies = fake.messages()
    assert bodies, f"the CLI sent no /v1/messages request: {[r['path'] for r in fake.requests]}"
    leaves = [leaf for body in bodies for leaf in _strings(body.get("messages", []))]
    assert_current_reached_not_retired(leaves, "the model's messages (hook additionalContext lost)")


def test_hook_context_reaches_the_model(claude_bin: Path, host: Host, fake_anthropic: FakeAnthropic) -> None:
    result = _run_claude(claude_bin, host)
    assert result.get("is_error") is False, result

    _assert_memory_reached_model(fake_anthropic, host)

    session_id = result["session_id"]
    leaves = [leaf for body in fake_anthropic.messages() for leaf in _strings(body.get("messages", []))]
    assert any(f"Your cclg session: {session_id} " in leaf for leaf in leaves), "the agent is told its session"
    assert (host.store / "sessions" / f"{session_id}.json").is_file()
    events = _events(host, session_id)
    names = [event["event"] for event in events]
    assert {"session_start", "user_prompt", "stop", "session_end"} <= set(names), names
    prompt_event = next(event for event in events if event["event"] == "user_prompt")
    assert prompt_event["summary"]["prompt"] == PROMPT
    assert host.current_id in prompt_event["summary"]["loaded_memory_ids"]
    assert host.retired_id not in prompt_event["summary"]["loaded_memory_ids"]
    _assert_store_clean(host)


def test_mcp_search_tool_round_trip(claude_bin: Path, host: Host, fake_anthropic: FakeAnthropic) -> None:
    offered: dict[str, Any] = {}

    def responder(body: dict[str, Any]) -> list[dict[str, Any]]:
        last = body.get("messages", [{}])[-1]
        content = last.get("content")
        if isinstance(content, list) and any(block.get("type") == "tool_result" for block in content):
            return [{"type": "text", "text": "Through the blue-green script."}]
        search = [tool for tool in body.get("tools", []) if str(tool.get("name", "")).endswith("__cclg_search")]
        if not search or offered:
            return [{"type": "text", "text": "ok"}]
        offered.update(search[0])
        return [{"type": "tool_use", "id": "toolu_fake0001", "name": search[0]["name"],
                 "input": {"query": "kestrel deploys"}}]  # fmt: skip

    fake_anthropic.responder = responder
    result = _run_claude(claude_bin, host, "--allowedTools", "mcp__cclg__cclg_search")
    assert offered, "the CLI never offered cclg's search tool to the model"
    assert offered["name"] == "mcp__cclg__cclg_search"
    assert "query" in offered["input_schema"]["properties"], offered["input_schema"]

    bodies = fake_anthropic.messages()
    results = [
        block
        for body in bodies
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result" and block.get("tool_use_id") == "toolu_fake0001"
    ]
    assert results, "no request carried the tool_result of the cclg search call"
    text = "\n".join(_strings(results[-1].get("content")))
    assert results[-1].get("is_error") is not True, text
    assert CURRENT in text, text
    assert result["result"] == "Through the blue-green script."

    events = _events(host, result["session_id"])
    tool_events = [event for event in events if event["event"] == "post_tool"]
    assert tool_events, [event["event"] for event in events]
    _assert_store_clean(host)


SUMMARY_TEXT = "The user asked about kestrel."
SUMMARY = f"<analysis>Two questions about the kestrel service.</analysis>\n<summary>{SUMMARY_TEXT}</summary>"


def _claude(claude: Path, host: Host, *args: str) -> dict[str, Any]:
    """One ``claude -p`` run with ``args`` (prompt and options), its JSON result."""
    result = subprocess.run(
        [str(claude), "-p", *args, "--output-format", "json"], cwd=host.project, env=host.env,
        capture_output=True, text=True, timeout=90, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, f"claude {args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    answer = json.loads(result.stdout)
    assert answer.get("is_error") is False, answer
    return answer


def _carrying(messages: list[dict[str, Any]]) -> list[int]:
    """The indexes of the messages that hold the current memory's text."""
    return [index for index, message in enumerate(messages) if CURRENT in "\n".join(_strings(message))]


def test_compaction_offers_the_memory_again(claude_bin: Path, host: Host, fake_anthropic: FakeAnthropic) -> None:
    settings = json.loads((host.home / ".claude" / "settings.json").read_text())
    for event in ("PreCompact", "PostCompact", "SessionStart"):
        commands = [hook["command"] for group in settings["hooks"][event] for hook in group["hooks"]]
        assert any("cclg-hook" in command for command in commands), (event, commands)

    # Two turns (Claude Code 2.1.197 answers a one-turn /compact with "Not enough messages to compact").
    session_id = _claude(claude_bin, host, PROMPT)["session_id"]
    assert _claude(claude_bin, host, "--resume", session_id, PROMPT)["session_id"] == session_id
    before = fake_anthropic.messages()
    assert len(before) == 2, len(before)
    assert _carrying(before[0]["messages"]), "the memory never reached the first request"
    # Within one context the memory is given once: the second turn only replays the first one's context.
    assert _carrying(before[1]["messages"]) == _carrying(before[0]["messages"]), _carrying(before[1]["messages"])

    # /compact on the resumed session: one summarisation request, answered by the fake model.
    fake_anthropic.responder = lambda body: [{"type": "text", "text": SUMMARY}]
    _claude(claude_bin, host, "--resume", session_id, "/compact keep the kestrel deploy facts")
    summarising = fake_anthropic.messages()[len(before) :]
    assert len(summarising) == 1, [body["messages"][-1] for body in summarising]
    assert "summary" in "\n".join(_strings(summarising[0]["messages"][-1])).lower()

    fake_anthropic.responder = lambda body: [{"type": "text", "text": "ok"}]
    _claude(claude_bin, host, "--resume", session_id, PROMPT)
    after = fake_anthropic.messages()[len(before) + 1 :]
    assert len(after) == 1, len(after)
    messages = after[0]["messages"]
    opening = "\n".join(_strings(messages[0]))
    assert SUMMARY_TEXT in opening, f"the request after the compaction does not start from the summary:\n{opening}"
    assert CURRENT not in opening
    assert _carrying(messages), "the memory was not offered again after the compaction"

    events = _events(host, session_id)
    names = [event["event"] for event in events]
    assert {"pre_compact", "post_compact"} <= set(names), names
    pre = next(event for event in events if event["event"] == "pre_compact")["summary"]
    post = next(event for event in events if event["event"] == "post_compact")["summary"]
    assert pre["trigger"] == post["trigger"] == "manual", (pre, post)
    for record in (pre, post):
        assert record["recent_prompts"] == [PROMPT, PROMPT], record
        assert host.current_id in record["loaded_memory_ids"], record
    assert SUMMARY_TEXT in post["compact_summary"], post
    raw = json.loads((host.store / next(e for e in events if e["event"] == "pre_compact")["raw"]).read_text())
    assert raw["payload"]["custom_instructions"] == "keep the kestrel deploy facts", raw
    # Claude Code 2.1.197 sends SessionStart (source "compact") between PreCompact and PostCompact.
    compact_starts = [
        index for index, event in enumerate(events)
        if event["event"] == "session_start" and event["summary"]["source"] == "compact"
    ]  # fmt: skip
    assert compact_starts, names
    assert names.index("pre_compact") < compact_starts[0] < names.index("post_compact"), names
    assert host.current_id in events[compact_starts[0]]["summary"]["loaded_memory_ids"], events[compact_starts[0]]
    prompts = [event["summary"] for event in events if event["event"] == "user_prompt"]
    assert [p["prompt"] for p in prompts] == [PROMPT] * 3, prompts
    assert host.current_id in prompts[0]["loaded_memory_ids"], prompts[0]
    assert prompts[1]["loaded_memory_ids"] == [], prompts[1]  # still in context: not given twice
    # The compact session start gave it to the new context; the post-compact after it must not forget that.
    assert host.current_id not in prompts[2]["loaded_memory_ids"], prompts[2]
    _assert_store_clean(host)


def test_a_repeated_failure_reaches_the_model_as_pain(
    claude_bin: Path, host: Host, fake_anthropic: FakeAnthropic
) -> None:
    """Claude Code sends a failed command as PostToolUseFailure; the third same failure brings the pain
    line into the next request. A Read (matched by PostToolUse's "*") is recorded too."""
    turns = {"count": 0}

    def responder(body: dict[str, Any]) -> list[dict[str, Any]]:
        turns["count"] += 1
        number = turns["count"]
        if number == 1:
            readme = str(host.project / "README.md")
            return [{"type": "tool_use", "id": "toolu_read", "name": "Read", "input": {"file_path": readme}}]
        if number <= 4:
            return [{"type": "tool_use", "id": f"toolu_fail{number}", "name": "Bash",
                     "input": {"command": FAILING_COMMAND, "description": "run it"}}]  # fmt: skip
        return [{"type": "text", "text": "done"}]

    (host.project / "README.md").write_text("kestrel\n")
    fake_anthropic.responder = responder
    result = _run_claude(claude_bin, host, "--allowedTools", "Bash,Read")
    after_failures = ["\n".join(_strings(body["messages"][-1])) for body in fake_anthropic.messages()[2:5]]
    assert_pain_reached_model_once(after_failures)

    events = _events(host, result["session_id"])
    assert [e["event"] for e in events if e["event"].startswith("post_tool")] == ["post_tool"] + [
        "post_tool_failure"
    ] * 3
    _assert_store_clean(host)


def test_the_turn_is_recorded_from_the_real_transcript(
    claude_bin: Path, host: Host, fake_anthropic: FakeAnthropic
) -> None:
    """Stop reads Claude Code's own transcript: the prompt, and the model's answer (issue 19)."""
    fake_anthropic.responder = lambda body: [{"type": "text", "text": "Through the blue-green script."}]
    result = _run_claude(claude_bin, host)
    entry = json.loads(_cclg(host, "turn", "read", "--session", result["session_id"], "--json").stdout)
    assert entry["turn_id"] == 1
    own = json.loads(_cclg(host, "turn", "read", "--json").stdout)  # from the project's folder (issue 27)
    assert own["session_id"] == result["session_id"], "the session of the latest prompt from this folder"
    assert entry["layers"]["user"] == PROMPT
    assert entry["layers"]["assistant"] == "Through the blue-green script."


def test_the_code_graph_reaches_the_model(claude_bin: Path, host: Host, fake_anthropic: FakeAnthropic) -> None:
    """In an indexed git repository the prompt's context carries the CodeGraphPack beside the memories."""
    index_project(host)
    _run_claude(claude_bin, host)
    leaves = [leaf for body in fake_anthropic.messages() for leaf in _strings(body.get("messages", []))]
    assert_code_graph_reached(leaves)
    _assert_memory_reached_model(fake_anthropic, host)
    _assert_store_clean(host)


def test_the_helper_answers_the_prompts_after_the_first(
    claude_bin: Path, host: Host, fake_anthropic: FakeAnthropic
) -> None:
    """Semantic recall on: the first session's start wakes the store's helper, which then takes the hook's
    events (``cclg.hook.hand_off``) and answers the prompts after the first (issue 29: at least 95%)."""

    def run(prompt: str) -> None:
        result = subprocess.run(
            [str(claude_bin), "-p", prompt, "--output-format", "json"], cwd=host.project, env=host.env,
            capture_output=True, text=True, timeout=90, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert result.returncode == 0, f"claude failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"

    answered, asked = helper_share(host, run)
    # The target is 95% of them. On a loaded machine a prompt that finds the helper still
    # writing the previous event's records is done in process, and may miss its answer; so the test holds
    # the helper to answering, and benchmarks/RESULTS.md has the shares measured.
    assert answered >= 1, f"the helper answered {answered} of {asked} prompts after the first"
    _assert_memory_reached_model(fake_anthropic, host)
    _assert_store_clean(host)
