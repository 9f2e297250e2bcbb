"""cclg inside the real Codex CLI (issue 16): ``cclg install codex`` in a temporary HOME, then
``codex exec`` against a loopback fake of the OpenAI Responses API that records what the CLI sends.

The CLI is installed once from the npm registry into a cache folder (see codex.py); without node and
npm, or when the install fails, these tests skip with one line saying why."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .codex import FAKE_KEY_VARIABLE, FakeResponses, install_codex, provider_config
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

pytestmark = pytest.mark.hosts

if shutil.which("node") is None or shutil.which("npm") is None:
    pytest.skip("host tests need node and npm on PATH", allow_module_level=True)


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return install_codex()


@pytest.fixture
def fake_responses() -> Iterator[FakeResponses]:
    with FakeResponses() as fake:
        yield fake


@pytest.fixture
def host(tmp_path: Path, fake_responses: FakeResponses, codex_bin: Path) -> Host:
    """A temporary HOME with a cclg store (one current and one retired memory) installed for Codex."""
    home = tmp_path / "host-home"
    project = home / "work" / "kestrel"
    project.mkdir(parents=True)
    codex_home = home / ".codex"
    codex_home.mkdir()
    env = isolated_env(home, tmp_path, str(codex_bin.parent))  # codex on PATH: install asks it for hooks
    env.update(CODEX_HOME=str(codex_home), **{FAKE_KEY_VARIABLE: "sk-test-dummy-key"})
    (codex_home / "config.toml").write_text(provider_config(fake_responses.url))
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
    installed = _cclg(placeholder, "install", "codex").stdout  # the user install, as a user gets it
    # Install asked Codex for its hooks and recorded the user's trust in them: no hook runs otherwise.
    assert "added Codex trust for" in installed, installed
    return Host(home, placeholder.store, project, env, current_id, retired_id)


def _run_codex(codex: Path, host: Host, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(codex), "exec", "--json", "--skip-git-repo-check", *args, PROMPT],
        cwd=host.project, env=host.env, capture_output=True, text=True, timeout=90, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 0, f"codex failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def _thread_id(result: subprocess.CompletedProcess[str]) -> str:
    for line in result.stdout.splitlines():
        if line.startswith("{") and json.loads(line).get("type") == "thread.started":
            return str(json.loads(line)["thread_id"])
    raise AssertionError(f"no thread.started event in codex's output:\n{result.stdout}")


def _assert_memory_reached_model(fake: FakeResponses) -> None:
    bodies = fake.responses()
    assert bodies, f"codex sent no /responses request: {[r['path'] for r in fake.requests]}"
    leaves = [leaf for body in bodies for leaf in _strings(body.get("input", []))]
    assert_current_reached_not_retired(leaves, "the model's input (hook additionalContext lost)")


def test_hook_context_reaches_the_model(codex_bin: Path, host: Host, fake_responses: FakeResponses) -> None:
    result = _run_codex(codex_bin, host)
    assert '"type":"turn.completed"' in result.stdout, result.stdout

    _assert_memory_reached_model(fake_responses)
    # Codex puts the hook's additionalContext in a developer message after the user's prompt.
    first = fake_responses.responses()[0]["input"]
    prompt_at = max(i for i, item in enumerate(first) if item.get("role") == "user" and PROMPT in _strings(item))
    context = [item for item in first[prompt_at + 1 :] if any(CURRENT in leaf for leaf in _strings(item))]
    assert context and context[0].get("role") == "developer", first[prompt_at:]

    session_id = _thread_id(result)
    assert any(f"Your cclg session: {session_id} " in leaf for leaf in _strings(first)), "told its session"
    assert (host.store / "sessions" / f"{session_id}.json").is_file()
    events = _events(host, session_id)
    names = [event["event"] for event in events]
    assert {"session_start", "user_prompt", "stop", "session_end"} <= set(names), names
    prompt_event = next(event for event in events if event["event"] == "user_prompt")
    assert prompt_event["summary"]["prompt"] == PROMPT
    assert host.current_id in prompt_event["summary"]["loaded_memory_ids"]
    assert host.retired_id not in prompt_event["summary"]["loaded_memory_ids"]
    _assert_store_clean(host)


def test_mcp_search_tool_round_trip(codex_bin: Path, host: Host, fake_responses: FakeResponses) -> None:
    called: dict[str, Any] = {}

    def responder(body: dict[str, Any]) -> list[dict[str, Any]]:
        items = body.get("input", [])
        if any(item.get("type") == "function_call_output" for item in items):
            return [{"type": "message", "text": "Through the blue-green script."}]
        namespaces = [tool for tool in body.get("tools", []) if tool.get("type") == "namespace"]
        search = [
            (space["name"], tool)
            for space in namespaces
            for tool in space.get("tools", [])
            if tool.get("name") == "cclg_search"
        ]
        if not search or called:
            return [{"type": "message", "text": "ok"}]
        called["namespace"], called["tool"] = search[0]
        return [{"type": "function_call", "namespace": search[0][0], "name": "cclg_search",
                 "call_id": "call_fake0001", "arguments": {"query": "kestrel deploys"}}]  # fmt: skip

    fake_responses.responder = responder
    # Codex does not wait for an MCP server that is not required before its first model request, and
    # cclg-mcp answers tools/list about 0.5 s after it starts, close to when that request goes out: wait
    # for it here, so the round trip does not depend on that race (issue 16 measures the race itself).
    result = _run_codex(codex_bin, host, "-c", "mcp_servers.cclg.required=true")
    assert called, "codex never offered cclg's search tool to the model"
    assert called["namespace"] == "mcp__cclg"
    assert "query" in called["tool"]["parameters"]["properties"], called["tool"]

    outputs = [
        item
        for body in fake_responses.responses()
        for item in body.get("input", [])
        if item.get("type") == "function_call_output" and item.get("call_id") == "call_fake0001"
    ]
    assert outputs, "no request carried the function_call_output of the cclg search call"
    text = "\n".join(_strings(outputs[-1].get("output")))
    assert CURRENT in text, text
    assert '"text":"Through the blue-green script."' in result.stdout, result.stdout

    events = _events(host, _thread_id(result))
    tool_events = [event for event in events if event["event"] == "post_tool"]
    assert tool_events, [event["event"] for event in events]
    assert [event["summary"]["tool_name"] for event in tool_events] == ["mcp__cclg__cclg_search"], tool_events
    _assert_store_clean(host)


def _is_compaction(body: dict[str, Any]) -> bool:
    """Codex 0.171 compacts through the same /responses endpoint: no tools, the history so far, and a
    last user message asking for a handoff summary (its metadata says ``request_kind: compaction``)."""
    metadata = json.loads((body.get("client_metadata") or {}).get("x-codex-turn-metadata") or "{}")
    return metadata.get("request_kind") == "compaction" or (
        not body.get("tools") and any("CONTEXT CHECKPOINT COMPACTION" in leaf for leaf in _strings(body.get("input")))
    )


def test_compaction_fires_hooks_and_memory_returns(codex_bin: Path, host: Host, fake_responses: FakeResponses) -> None:
    state: dict[str, bool] = {}

    def responder(body: dict[str, Any]) -> list[dict[str, Any]]:
        if _is_compaction(body):
            state["compacted"] = True
            return [{"type": "message", "text": "Summary: the user asked how kestrel deploys go out."}]
        if state.get("compacted") or state.get("called"):
            return [{"type": "message", "text": "Through the blue-green script."}]
        state["called"] = True
        # A tool call keeps the turn going; its usage (110 tokens) is over the limit, so Codex compacts
        # mid-turn before its next request.
        return [{"type": "function_call", "namespace": "mcp__cclg", "name": "cclg_search",
                 "call_id": "call_fake0001", "arguments": {"query": "kestrel deploys"}}]  # fmt: skip

    fake_responses.responder = responder
    result = _run_codex(
        codex_bin, host, "-c", "mcp_servers.cclg.required=true", "-c", "model_auto_compact_token_limit=50"
    )
    assert '"text":"Through the blue-green script."' in result.stdout, result.stdout

    bodies = fake_responses.responses()
    compactions = [index for index, body in enumerate(bodies) if _is_compaction(body)]
    assert compactions, f"codex never compacted: {len(bodies)} requests"
    after = [body for body in bodies[compactions[0] + 1 :] if not _is_compaction(body)]
    assert after, "no model request after the compaction"
    offered = [
        item
        for item in after[0].get("input", [])
        if item.get("role") == "developer" and any(CURRENT in leaf for leaf in _strings(item))
    ]
    assert offered, "the memory was not offered again after compaction"

    names = [event["event"] for event in _events(host, _thread_id(result))]
    assert {"pre_compact", "post_compact"} <= set(names), names
    assert names.index("pre_compact") < names.index("post_compact"), names
    _assert_store_clean(host)


def test_a_repeated_failure_reaches_the_model_as_pain(
    codex_bin: Path, host: Host, fake_responses: FakeResponses
) -> None:
    """Codex sends a failed command as PostToolUse with the output as text; the third same failure
    brings the pain line into the next request."""
    turns = {"count": 0}

    def responder(body: dict[str, Any]) -> list[dict[str, Any]]:
        turns["count"] += 1
        if turns["count"] <= 3:
            return [{"type": "function_call", "name": "exec_command", "call_id": f"call_fail{turns['count']}",
                     "arguments": {"cmd": FAILING_COMMAND}}]  # fmt: skip
        return [{"type": "message", "text": "done"}]

    fake_responses.responder = responder
    result = _run_codex(codex_bin, host, "--dangerously-bypass-approvals-and-sandbox")
    after_failures = ["\n".join(_strings(body["input"][-3:])) for body in fake_responses.responses()[1:4]]
    assert_pain_reached_model_once(after_failures)

    events = _events(host, _thread_id(result))
    assert [e["event"] for e in events if e["event"].startswith("post_tool")] == ["post_tool"] * 3
    _assert_store_clean(host)


def test_the_turn_is_recorded_from_the_stop_payload(codex_bin: Path, host: Host, fake_responses: FakeResponses) -> None:
    """Codex's Stop carries the last assistant message; the prompt comes from the session's log (issue 19)."""
    fake_responses.responder = lambda body: [{"type": "message", "text": "Through the blue-green script."}]
    result = _run_codex(codex_bin, host)
    entry = json.loads(_cclg(host, "turn", "read", "--session", _thread_id(result), "--json").stdout)
    assert entry["layers"]["user"] == PROMPT
    own = json.loads(_cclg(host, "turn", "read", "--json").stdout)  # from the project's folder (issue 27)
    assert own["session_id"] == _thread_id(result), "the session of the latest prompt from this folder"
    assert entry["layers"]["assistant"] == "Through the blue-green script."
    assert entry["layers"]["thinking"] == "" and entry["host_turn_id"]


def test_the_code_graph_reaches_the_model(codex_bin: Path, host: Host, fake_responses: FakeResponses) -> None:
    """In an indexed git repository the prompt's context carries the CodeGraphPack beside the memories."""
    index_project(host)
    _run_codex(codex_bin, host)
    leaves = [leaf for body in fake_responses.responses() for leaf in _strings(body.get("input", []))]
    assert_code_graph_reached(leaves)
    _assert_memory_reached_model(fake_responses)
    _assert_store_clean(host)


def test_the_helper_answers_the_prompts_after_the_first(
    codex_bin: Path, host: Host, fake_responses: FakeResponses
) -> None:
    """Semantic recall on: the first session's start wakes the store's helper, which then takes the hook's
    events (``cclg.hook.hand_off``) and answers the prompts after the first (issue 29: at least 95%)."""

    def run(prompt: str) -> None:
        result = subprocess.run(
            [str(codex_bin), "exec", "--json", "--skip-git-repo-check", prompt],
            cwd=host.project, env=host.env, capture_output=True, text=True, timeout=90, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert result.returncode == 0, f"codex failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"

    answered, asked = helper_share(host, run)
    # The target is 95% of them. On a loaded machine a prompt that finds the helper still
    # writing the previous event's records is done in process, and may miss its answer; so the test holds
    # the helper to answering, and benchmarks/RESULTS.md has the shares measured.
    assert answered >= 1, f"the helper answered {answered} of {asked} prompts after the first"
    _assert_memory_reached_model(fake_responses)
    _assert_store_clean(host)
