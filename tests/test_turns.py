"""The previous turn (issue 19, CogLog): the hook records each turn's facts at stop, the agent writes
its reading of the turn (CLI, MCP), the entry describes itself, the window is one turn with the
history kept, and the next prompt gets a compact form when it is worth the tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cclg import mcp_tools, turns
from cclg.cli import cli
from cclg.errors import UsageError
from cclg.store import Store
from tests.test_hook import run_hook

SESSION = "4f1c2e7a-turns"
PROMPT = "why does the nightly export skip the archived invoices?"
ANSWER = "The export filters on status='open'; archived invoices are excluded on purpose since March."
THINKING = "The user asks about the export job; check the query in export.py first."


def transcript(tmp_path: Path) -> Path:
    """A Claude Code transcript: the prompt, a tool round trip, then thinking and the answer."""
    records: list[dict[str, Any]] = [
        {"type": "user", "message": {"role": "user", "content": "an earlier prompt"}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "an earlier answer"}]}},
        {"type": "user", "message": {"role": "user", "content": PROMPT}},
        {"type": "assistant", "message": {"content": [{"type": "thinking", "thinking": THINKING}]}},
        {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "..."}]}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": ANSWER}]}},
    ]
    path = tmp_path / "transcript.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def claude(event: str, tmp_path: Path, **fields: Any) -> dict[str, Any]:
    names = {"user-prompt": "UserPromptSubmit", "stop": "Stop", "pre-compact": "PreCompact"}
    base = {"session_id": SESSION, "transcript_path": str(transcript(tmp_path)), "cwd": "/home/u/repo"}
    return {**base, "permission_mode": "default", "hook_event_name": names[event], **fields}


def hook(store: Store, event: str, payload: dict[str, Any]) -> dict[str, Any]:
    result = run_hook(store.root, event, payload)
    assert result.returncode == 0
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def a_turn(store: Store, tmp_path: Path, prompt: str = PROMPT) -> dict[str, Any]:
    hook(store, "user-prompt", claude("user-prompt", tmp_path, prompt=prompt))
    return hook(store, "stop", claude("stop", tmp_path, stop_hook_active=False))


def cclg(store: Store, *args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(cli, ["--root", str(store.root), *args], input=stdin)


def test_stop_records_the_turns_facts_as_a_self_describing_entry(store: Store, tmp_path: Path) -> None:
    assert a_turn(store, tmp_path) == {}, "stop answers nothing"
    entry = json.loads(cclg(store, "turn", "read", "--json").output)
    assert entry["turn_id"] == 1 and entry["session_id"] == SESSION
    assert entry["layers"] == {"user": PROMPT, "thinking": THINKING, "assistant": ANSWER}
    assert [entry[k] for k in turns.INTERPRETATION] == ["", "", "", ""]
    schema = entry["_schema"]
    assert set(schema) >= {"version", "fact_layer", "interpretation_layer", "constraints"}
    assert "1 turn" in schema["constraints"]["window_size"], "the file says how to read it"

    coglog = json.loads(cclg(store, "turn", "read", "--coglog").output)
    assert list(coglog) == ["_schema", "turn_id", "timestamp", "layers", *turns.INTERPRETATION], "CogLog's shape"


def test_the_agents_reading_is_sealed_into_its_turn_and_comes_with_the_next_prompt(
    store: Store, tmp_path: Path
) -> None:
    hook(store, "user-prompt", claude("user-prompt", tmp_path, prompt=PROMPT))
    written = cclg(
        store, "turn", "write", "--session", SESSION, "--json", stdin='{"current_focus": "the export filter"}'
    )
    assert written.exit_code == 0, written.output
    mcp_tools.coglog_write(
        store, annotation="confirm with the user whether archived ones should go", session_id=SESSION
    )
    hook(store, "stop", claude("stop", tmp_path, stop_hook_active=False))
    entry = mcp_tools.coglog_read(store, SESSION)
    assert entry["current_focus"] == "the export filter"
    assert entry["annotation"].startswith("confirm with the user")

    context = hook(store, "user-prompt", claude("user-prompt", tmp_path, prompt="ok, and the CSV header?"))
    text = context["hookSpecificOutput"]["additionalContext"]
    assert "## The previous turn (cclg turn 1" in text and '"the export filter"' in text
    assert f'- user: "{PROMPT}"' in text
    again = hook(store, "user-prompt", claude("user-prompt", tmp_path, prompt="and the footer?"))
    assert again == {}, "given once"
    hook(store, "pre-compact", claude("pre-compact", tmp_path, trigger="auto"))
    after = hook(store, "user-prompt", claude("user-prompt", tmp_path, prompt="where were we?"))
    assert "## The previous turn" in after["hookSpecificOutput"]["additionalContext"], "again after a compaction"


def test_a_turn_nobody_interpreted_costs_no_tokens_on_the_next_prompt(store: Store, tmp_path: Path) -> None:
    a_turn(store, tmp_path)
    assert hook(store, "user-prompt", claude("user-prompt", tmp_path, prompt="thanks")) == {}


def test_one_turn_window_with_the_history_kept(store: Store, tmp_path: Path) -> None:
    a_turn(store, tmp_path)
    a_turn(store, tmp_path, prompt="second question about invoices")
    entry = turns.read(store, SESSION)
    assert entry["turn_id"] == 2 and entry["layers"]["user"] == "second question about invoices"
    stops = [e for e in store.session_events(SESSION) if e["event"] == "stop"]
    kept = [json.loads((store.root / e["summary"]["turn"]["raw"]).read_text()) for e in stops]
    assert [k["turn_id"] for k in kept] == [1, 2] and kept[0]["layers"]["user"] == PROMPT
    assert cclg(store, "turn", "clear", "--session", SESSION).output.strip() == "cleared"
    cleared = cclg(store, "turn", "read", "--session", SESSION)
    assert cleared.exit_code == 5 and f"no turn recorded for session {SESSION}" in cleared.stderr, cleared.output
    assert (store.root / stops[0]["summary"]["turn"]["raw"]).exists(), "clearing keeps the history"


def test_codex_gives_the_last_message_and_no_thinking(store: Store) -> None:
    base = {"session_id": "019d-codex", "turn_id": "t-1", "transcript_path": None, "cwd": "/r", "model": "gpt-5-codex"}
    hook(store, "user-prompt", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "rename the flag"})
    stop = {**base, "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Renamed it."}
    result = run_hook(store.root, "stop", stop, "--agent", "codex")
    assert json.loads(result.stdout) == {}
    entry = turns.read(store, "019d-codex")
    assert entry["layers"] == {"user": "rename the flag", "thinking": "", "assistant": "Renamed it."}
    assert entry["host_turn_id"] == "t-1"


def test_secrets_in_a_turn_are_redacted(store: Store, tmp_path: Path) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    a_turn(store, tmp_path, prompt=f"use the token {secret} for the export")
    on_disk = b"".join(p.read_bytes() for p in store.root.rglob("*") if p.is_file() and "index" not in p.name)
    assert secret.encode() not in on_disk
    user = turns.read(store, SESSION)["layers"]["user"]
    assert user.startswith("use the token [REDACTED:") and user.endswith("] for the export"), user


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"mood": "fine"}, "unknown field(s) mood"),
        ({"annotation": 3}, "must be strings"),
        ({"user": "hi", "thinking": ""}, "needs a non-empty assistant"),
    ],
)
def test_a_bad_write_is_refused_with_a_clear_error(store: Store, tmp_path: Path, fields: dict, message: str) -> None:
    a_turn(store, tmp_path)
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        turns.write(store, fields, SESSION)
    result = cclg(store, "turn", "write", stdin=json.dumps(fields))
    assert result.exit_code == 2 and message in result.output


def test_a_whole_entry_written_at_once_is_the_current_entry(store: Store) -> None:
    entry = mcp_tools.coglog_write(store, user="hello", assistant="hi there", self_narrative="", session_id="s-mcp")
    assert entry["turn_id"] == 1 and entry["layers"] == {"user": "hello", "thinking": "", "assistant": "hi there"}
    assert mcp_tools.coglog_read(store)["layers"]["assistant"] == "hi there", "the latest session by default"
    assert mcp_tools.coglog_clear(store, "s-mcp") == {"cleared": True}
