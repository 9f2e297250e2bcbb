"""The sensors of post-tool (issue 18): silent while a session goes well; one factual line when it
burns its context, runs long without the user, fails the same way again, edits a file many others
import, or repeats a read that gives the same answer; pain and loop escalate on later firings."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cclg.core.store import Store
from cclg.hook import handle
from cclg.learning import sensors

REPO = "/home/u/shop"


def claude(session: str, event: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    names = {"post-tool": "PostToolUse", "post-tool-failure": "PostToolUseFailure", "user-prompt": "UserPromptSubmit"}
    base = {"session_id": session, "transcript_path": "/t.jsonl", "cwd": REPO, "permission_mode": "default"}
    return event, {**base, "hook_event_name": names.get(event, event), **fields}


def bash(session: str, command: str, stdout: str = "ok\n") -> tuple[str, dict[str, Any]]:
    response = {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}
    return claude(session, "post-tool", tool_name="Bash", tool_input={"command": command}, tool_response=response)


def failed(session: str, command: str, error: str) -> tuple[str, dict[str, Any]]:
    fields = {"tool_name": "Bash", "tool_input": {"command": command}, "error": error, "is_interrupt": False}
    return claude(session, "post-tool-failure", **fields)


def edit(session: str, path: str, cwd: str = REPO) -> tuple[str, dict[str, Any]]:
    tool_input = {"file_path": f"{cwd}/{path}", "old_string": "a", "new_string": "b"}
    event, payload = claude(session, "post-tool", tool_name="Edit", tool_input=tool_input, tool_response={})
    return event, {**payload, "cwd": cwd}


def grep(session: str, pattern: str, found: str) -> tuple[str, dict[str, Any]]:
    tool_input = {"pattern": pattern, "path": REPO, "output_mode": "content"}
    response = {"mode": "content", "numFiles": 1, "filenames": ["a.py"], "content": found}
    return claude(session, "post-tool", tool_name="Grep", tool_input=tool_input, tool_response=response)


def codex_shell(session: str, command: str, output: str) -> tuple[str, dict[str, Any]]:
    payload = {
        "session_id": session, "turn_id": "t1", "transcript_path": None, "cwd": REPO, "model": "gpt-5-codex",
        "permission_mode": "default", "hook_event_name": "PostToolUse", "tool_name": "Bash",
        "tool_input": {"command": command}, "tool_response": output, "tool_use_id": "call_1",
    }  # fmt: skip
    return "post-tool", payload


def run(store: Store, calls: list[tuple[str, dict[str, Any]]]) -> list[str | None]:
    """Each call through the hook in order; what the agent got back for each."""
    answers = []
    for event, payload in calls:
        agent = "codex" if "turn_id" in payload else "claude"
        answers.append(handle(event, payload, agent, str(store.root)))
    return answers


def said(answers: list[str | None]) -> list[tuple[int, str]]:
    """(call index, line) of every sensor line in ``answers``."""
    return [(i, line) for i, a in enumerate(answers) for line in (a or "").splitlines() if line.startswith("- ")]


PYTEST_ERROR = (
    "Exit code 1\n{tmp}/test_api.py:41: in test_create\nE   AssertionError: assert {n} == 4\n=== 1 failed in 0.{n}s ==="
)


def test_a_nominal_session_gets_nothing(store: Store) -> None:
    s = "nominal"
    calls = [
        bash(s, "git status", "On branch main\nnothing to commit\n"),
        grep(s, "def create_order", "shop/orders.py:12:def create_order(cart):"),
        edit(s, "shop/orders.py"),
        failed(s, "pytest -x", PYTEST_ERROR.format(tmp="/tmp/a", n=3)),
        edit(s, "shop/orders.py"),
        bash(s, "pytest -x", "=== 12 passed in 0.41s ===\n"),
        bash(s, "git status", "On branch main\nmodified: shop/orders.py\n"),
        bash(s, "git status", "On branch main\nmodified: shop/orders.py\n"),
    ]
    assert run(store, calls) == [None] * len(calls)


def test_pain_speaks_at_the_third_same_failure_and_escalates_until_a_success(store: Store) -> None:
    s = "pain"
    calls = []
    for n in range(6):  # the same error, with other numbers and temp paths each time, edits between
        calls += [failed(s, "pytest tests/test_api.py -x", PYTEST_ERROR.format(tmp=f"/tmp/run{n}", n=n + 5))]
        calls += [edit(s, "shop/api.py")]
    lines = said(run(store, calls))
    assert [i for i, _ in lines] == [4, 6, 8, 10], "the 3rd, 4th, 5th and 6th failures"
    first, socratic, directive, ask = (line for _, line in lines)
    assert first.startswith(
        '- pain: "pytest" failed 3 times in a row with the same error: "AssertionError: assert N == N"'
    )
    assert "Before" not in first and "Stop" not in first, "the first level states a fact, no instruction"
    assert "state the assumption" in socratic
    assert "Change approach" in directive and 'edited "shop/api.py"' in directive
    assert "ask the user" in ask
    levels = [
        s["level"] for e in store.session_events(s) for s in e.get("summary", {}).get("step", {}).get("signals", [])
    ]
    assert levels == [0, 1, 2, 3], "each level is recorded in the session"

    # The command passes: the streak is over (and taught a rule, see test_rules.py); the same error
    # once more starts a new streak, of one.
    after = run(store, [bash(s, "pytest tests/test_api.py -x", "=== 13 passed ===\n")])
    after += run(store, [failed(s, "pytest -x", PYTEST_ERROR.format(tmp="/tmp/x", n=1))])
    assert after[0] is None and "- pain" not in (after[1] or "")


def test_pain_reads_codex_output_text(store: Store) -> None:
    s = "codex-pain"
    trace = (
        'Traceback (most recent call last):\n  File "/repo/{n}/app.py", line {n}\n'
        "ModuleNotFoundError: No module named 'shop'\n"
    )
    calls = [codex_shell(s, "python -m pytest", trace.format(n=n)) for n in range(3)]
    lines = said(run(store, calls))
    assert [i for i, _ in lines] == [2]
    assert "ModuleNotFoundError: No module named 'shop'" in lines[0][1]
    assert run(store, [codex_shell(s, "python -m pytest", "=== 4 passed in 0.2s ===\n")]) == [None]


def test_other_commands_between_failures_do_not_end_the_streak_but_another_error_does(store: Store) -> None:
    s = "streak"
    error = PYTEST_ERROR.format(tmp="/tmp/a", n=1)
    calls = [
        failed(s, "pytest", error),
        bash(s, "ls"),
        failed(s, "cat missing.txt", "Exit code 1\ncat: missing.txt: No such file or directory"),
    ]
    calls += [failed(s, "pytest", error)]
    calls += [failed(s, "pytest", "Exit code 1\nE   TypeError: unsupported operand")]  # another error: a new streak
    calls += [failed(s, "pytest", error)]
    assert said(run(store, calls)) == []
    assert said(run(store, [failed(s, "pytest", error), failed(s, "pytest", error)]))[-1][1].startswith(
        '- pain: "pytest" failed 3'
    )


def test_loop_speaks_at_the_third_identical_read_unless_an_edit_or_new_answer_comes_between(store: Store) -> None:
    s = "loop"
    lines = said(run(store, [grep(s, "TODO", "a.py:1:# TODO")] * 4))
    assert [i for i, _ in lines] == [2, 3]
    assert lines[0][1].startswith('- loop: the same "Grep" call returned the same result 3 times')
    assert "state the assumption" in lines[1][1]

    t = "no-loop"
    calls = [grep(t, "TODO", "a.py:1:# TODO"), grep(t, "TODO", "a.py:1:# TODO"), edit(t, "a.py")]
    calls += [grep(t, "TODO", "a.py:1:# TODO"), grep(t, "TODO", "b.py:1:# TODO"), grep(t, "TODO", "b.py:1:# TODO")]
    assert said(run(store, calls)) == []


def test_burn_speaks_once_a_context_when_the_pace_would_fill_it(store: Store) -> None:
    s = "burn"
    big = "x" * 160_000  # 40,000 tokens a call
    answers = run(store, [bash(s, f"cat log{n}.txt", big) for n in range(6)])
    lines = said(answers)
    # From the first call: 40,001 used + 5 calls x 40,001 at that pace >= the 200,000-token window.
    assert [i for i, _ in lines] == [0], lines
    assert "burn: about 40,001 of the 200,000-token context used" in lines[0][1]
    run(store, [claude(s, "pre-compact", trigger="auto")])  # a new context: burn may speak again
    assert [i for i, _ in said(run(store, [bash(s, "cat again.txt", big)]))] == [0]


def test_clock_speaks_every_fifty_calls_and_once_after_thirty_minutes(store: Store) -> None:
    s = "clock"
    run(store, [claude(s, "user-prompt", prompt="refactor the billing module")])
    answers = run(store, [bash(s, f"sed -n {n},+5p shop/billing.py", f"line {n}\n") for n in range(100)])
    lines = said(answers)
    assert [i for i, _ in lines] == [49, 99]
    assert lines[0][1] == "- clock: 50 tool calls since the user's last prompt."

    t = "minutes"
    run(store, [claude(t, "user-prompt", prompt="upgrade the dependencies")])
    path = store.session_events_path(t)
    events = [json.loads(line) for line in path.read_text().splitlines()]
    events[-1]["summary"]["at"] -= 31 * 60  # the prompt came 31 minutes ago
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    lines = said(run(store, [bash(t, "pip list", "a 1\n"), bash(t, "pip check", "ok\n")]))
    assert [i for i, _ in lines] == [0] and "31 minutes since the user's last prompt" in lines[0][1]


def _repo_with_hub(folder: Path, dependants: int) -> Path:
    (folder / "shop").mkdir(parents=True)
    (folder / "shop" / "__init__.py").write_text("")
    (folder / "shop" / "config.py").write_text("SETTINGS = {}\n")
    (folder / "shop" / "lonely.py").write_text("X = 1\n")
    for n in range(dependants):
        (folder / "shop" / f"view{n}.py").write_text(
            f"from shop.config import SETTINGS\n\n\ndef view{n}():\n    return SETTINGS\n"
        )
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x"}
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "start"]):
        subprocess.run(["git", *command], cwd=folder, check=True, env={**os.environ, **env})
    return folder


def test_reach_names_the_dependants_of_an_edited_hub_once(store: Store, tmp_path: Path) -> None:
    from cclg.codegraph.build import build_graph

    repo = _repo_with_hub(tmp_path / "shop-repo", 12)
    build_graph(store, repo)
    s = "reach"
    answers = run(store, [edit(s, "shop/lonely.py", str(repo)), edit(s, "shop/config.py", str(repo))])
    answers += run(store, [edit(s, "config.py", str(repo / "shop"))])  # the same file, from a subfolder
    lines = said(answers)
    assert [i for i, _ in lines] == [1], "once a session, and never for a file few import"
    assert lines[0][1].startswith('- reach: "shop/config.py" is imported by 12 other files ("shop/view')


def test_thresholds_come_from_the_store_config(store: Store) -> None:
    config = json.loads((store.root / "config.json").read_text())
    config["sensors"] = {"loop_repeats": 2, "pain_repeats": "three", "clock_steps": -1, "unknown": 5}
    (store.root / "config.json").write_text(json.dumps(config))
    settings = sensors.settings(Store.open(store.root))
    assert settings == {**sensors.DEFAULTS, "loop_repeats": 2}, "unusable values are ignored, not fatal"
    assert [i for i, _ in said(run(Store.open(store.root), [grep("cfg", "x", "y")] * 2))] == [1]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            "ValueError: bad id 0x7f3a2b91 at /tmp/abc/run1/x.py:12",
            "ValueError: bad id 0x11aa22bb at /tmp/q/run7/x.py:99",
        ),
        (
            "FAILED tests/test_a.py::test_b - AssertionError: assert 3 == 4",
            "FAILED tests/test_a.py::test_b - AssertionError: assert 5 == 4",
        ),
        (
            "error[E0308]: mismatched types\n --> src/main.rs:4:18",
            "error[E0308]: mismatched types\n --> src/main.rs:9:2",
        ),
    ],
)
def test_one_error_reads_the_same_whatever_its_numbers_paths_and_addresses(first: str, second: str) -> None:
    assert sensors.signature(first) == sensors.signature(second) is not None


@pytest.mark.parametrize(
    "text", ["=== 12 passed in 0.41s ===", "Success. Updated the following files:\nM a.py", "0 errors, 0 warnings"]
)
def test_output_of_a_success_has_no_error_signature(text: str) -> None:
    step = sensors.observe("post-tool", dict(codex_shell("x", "make", text)[1]), REPO)
    assert "failure" not in step


def test_doctor_shows_the_thresholds_in_use(store: Store) -> None:
    from click.testing import CliRunner

    from cclg.cli import cli

    result = CliRunner().invoke(cli, ["--root", str(store.root), "doctor", "--json"])
    assert json.loads(result.output)["sensors"] == sensors.DEFAULTS
    text = CliRunner().invoke(cli, ["--root", str(store.root), "doctor"]).output
    assert 'sensors (config.json "sensors"): context_window_tokens=200000, burn_calls=5' in text


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ("python3 -c \"import sys; sys.exit('x')\"", "python3"),  # quotes respected
        ("python -m pytest tests/ -x", "pytest"),
        ("FOO=1 uv run pytest -q", "pytest"),
        ("cd app && npm run build", "npm run build"),
        ("timeout 60 cargo test 2>&1 | tail -20", "cargo test"),
        ("git status", "git-status"),
    ],
)
def test_a_command_is_known_by_what_it_runs(command: str, key: str) -> None:
    assert sensors.observe("post-tool", codex_shell("x", command, "ok")[1], REPO)["command"] == key


def test_a_pytest_summary_with_failures_before_passes_is_a_failure() -> None:
    output = "E   TypeError: make_user() got an unexpected keyword argument 'password'\n"
    output += "==================== 1 failed, 5 passed in 0.40s ====================\n"
    step = sensors.observe("post-tool", codex_shell("x", "pytest", output)[1], REPO)
    assert step["failure"] == "TypeError: make_user() got an unexpected keyword argument 'password'"
