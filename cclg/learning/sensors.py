"""Sensors: what a session's own tool calls show, said only when something is off.

Every ``post-tool`` (and Claude Code's ``post-tool-failure``) call is reduced to a
*step* (``observe``): the tool, a signature of its input, the tokens its output
adds to the context, the files it edited, the command it ran and, when it failed,
the failure's signature (numbers, paths, addresses and hex stripped, so that the
same error reads the same each time). The step is logged with the event. Then
``sense`` reads the session's recent steps (the tail of its event log, never the
store) and asks five questions:

- **burn**: at the pace of the last calls, will the context window be full within
  a few more?
- **clock**: how many steps, and how long, since the user last spoke?
- **pain**: has the same command failed with the same error several times in a row?
- **reach**: does the file just edited have many dependants in the code graph?
- **loop**: is the same read-only call repeated with the same answer and no edit
  in between?

Nominal sessions get nothing (no output, no tokens). A sensor that deviates gives
one factual line; pain and loop escalate on later firings: a question about the
assumption, then a change of approach, then stopping to ask the user. A success of
the failing command (the failure gone) resets pain. Thresholds come from the
store's ``config.json`` (``"sensors"``) over ``DEFAULTS``.
"""

from __future__ import annotations

import json
import re
import time

from cclg.core.config import SENSORS
from cclg.core.fencing import quote_outside
from cclg.core.fields import parse_json
from cclg.core.hook_events import POST_COMPACT, POST_TOOL_FAILURE, PRE_COMPACT, SESSION_START, USER_PROMPT, logged
from cclg.core.ids import sha256_hex
from cclg.core.text import estimate_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from cclg.core.store import Store

    Dependants = Callable[[str], tuple[str, list[str]]]

DEFAULTS: dict[str, int] = SENSORS  # the thresholds when config.json sets none
WINDOW_BYTES = 256 * 1024  # how much of the session's event log the sensors read (its tail)
SIGNATURE_CHARS = 160
ESCALATION = (
    "",
    "Before the next attempt: state the assumption this approach relies on, and what result would disprove it.",
    "Change approach: the same attempt has not worked. Tried so far: {tried}.",
    "Stop and ask the user how to proceed: say what was tried ({tried}) and what keeps happening.",
)

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit", "apply_patch")
READ_ONLY_COMMANDS = frozenset(  # programs that look and change nothing: their repeats can be a loop
    "cat nl bat head tail less more sed awk grep rg ag ack find fd ls tree wc file stat du df pwd which jq yq "
    "sort uniq cut column diff cmp od xxd hexdump strings readlink realpath git-status git-diff git-log "
    "git-show git-grep git-blame git-branch git-ls-files git-rev-parse".split()
)
WRAPPERS = frozenset("sudo time env nice timeout uv poetry pipenv npx bunx pnpx".split())
RUNNERS = frozenset("git npm pnpm yarn bun cargo go make docker kubectl dotnet mvn gradle".split())
# Patterns as text: ``re`` compiles each on first use (and caches it), so a call that needs none of
# them, such as an edit, pays nothing for them at start-up.
NUMBERS = r"0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b|\d+(?:\.\d+)*"
DIRECTORIES = r"(?:[A-Za-z]:)?(?:[\w.~-]*/)+([\w.-]+)"
# Lines that say a command failed, in the tools agents run (a Python exception, a test runner's
# failure line, a compiler's error, npm, a shell): the best one becomes the failure's signature.
ERROR_LINE = (
    r"(?m)^(?:E\s+)?(?:\w+\.)*\w*(?:Error|Exception|Exit)\b:?.*"  # ValueError: ..., E   AssertionError: ...
    r"|^FAILED\s.*|^ERROR\s.*|^error(?:\[\w+\])?:.*|^.*\berror (?:TS|CS)\d+:.*"  # pytest, rustc, tsc
    r"|^npm ERR!.*|^fatal:.*|^panic:.*|^.*: command not found$|^.*: No such file or directory$"
    r"|^FAIL\s.*|^--- FAIL:.*|^.*\b\d+ (?:failed|errors?)\b.*"
)
EXCEPTION = r"^(?:E\s+)?(?:\w+\.)*\w+(?:Error|Exception)"  # the cause, where there is one
SUCCESS_SUMMARY = r"(?m)^(?!.*\b(?:failed|errors?)\b)=+ .*\bpassed\b.* =+$|^ok\s|^PASS\s"  # "1 failed, 5 passed": no


def settings(store: Store) -> dict[str, int]:
    """The thresholds: the store config's ``"sensors"`` object over ``DEFAULTS`` (``cclg.core.config``:
    an unusable value keeps its default, so a typo in config.json neither silences nor breaks the hook)."""
    return store.settings.section("sensors")


# ---------------------------------------------------------------- one tool call


def observe(event: str, payload: dict[str, Any], cwd: str | None) -> dict[str, Any]:
    """The step of one tool call: what the sensors need of it, small enough to log with the event."""
    tool = str(payload.get("tool_name") or "")
    tool_input = payload.get("tool_input")
    output = _output_text(event, payload)
    command = _command(tool_input) if tool in ("Bash", "shell", "exec_command") else None
    failure = _failure(event, payload, output)
    step: dict[str, Any] = {
        "tool": tool,
        "input": _digest(_input_signature(tool, tool_input)),
        "output": _digest(output),
        "tokens": estimate_tokens(output),
        "at": time.time(),
    }
    if command is not None:
        step["command"] = key = _command_key(command)
        step["read_only"] = key.split(" ")[0] in READ_ONLY_COMMANDS
    else:
        step["read_only"] = tool in ("Read", "Grep", "Glob", "LS", "WebFetch", "WebSearch")
    files = _edited_files(tool, tool_input, cwd)
    if files:
        step["files"] = files
    read = tool_input.get("file_path") if tool == "Read" and isinstance(tool_input, dict) else None
    if isinstance(read, str) and read:
        step["read"] = [_relative(read, cwd)]  # for code search's session prior
    if failure:
        step["failure"] = failure
    return step


def _output_text(event: str, payload: dict[str, Any]) -> str:
    if event == POST_TOOL_FAILURE:
        return str(payload.get("error") or "")
    response = payload.get("tool_response")
    if isinstance(response, str):
        return response
    if isinstance(response, dict) and ("stdout" in response or "stderr" in response):
        return f"{response.get('stdout') or ''}\n{response.get('stderr') or ''}"
    return json.dumps(response, ensure_ascii=False, default=str) if response is not None else ""


def _digest(text: str) -> str:
    return sha256_hex(text.encode("utf-8", "replace"))[:16]


def _command(tool_input: object) -> str:
    if isinstance(tool_input, dict):
        value = tool_input.get("command", tool_input.get("cmd"))
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        return str(value or "")
    return str(tool_input or "")


def _command_key(command: str) -> str:
    """What a command runs, for telling runs of one command apart from others: its program and, for a
    runner (``python -m pytest``, ``npm test``, ``cargo build``), the task; no arguments, paths or env.
    Of ``cd app && pytest -x | tail`` it is the last step's first program: ``pytest``."""
    words = _last_step(command)
    while words and (("=" in words[0] and not words[0].startswith("-")) or words[0] in WRAPPERS):
        wrapper = words.pop(0)
        while words and (words[0].startswith("-") or words[0].isdigit() or (wrapper in WRAPPERS and words[0] == "run")):
            words.pop(0)  # the wrapper's own options: `timeout 60`, `uv run`, `nice -n 5`
    if not words:
        return ""
    program = words[0].rsplit("/", 1)[-1]
    if program.startswith("python") and words[1:2] == ["-m"] and len(words) > 2:
        return words[2]
    task = [w for w in words[1:3] if not w.startswith("-")][: 2 if words[1:2] == ["run"] else 1]
    if program in RUNNERS and task:
        return f"{program}-{task[0]}" if program == "git" else " ".join([program, *task])
    return program


def _last_step(command: str) -> list[str]:
    """The words of the last step of a shell line (after its last ``&&``, ``||`` or ``;``), up to a pipe,
    quotes respected: ``python3 -c "a; b"`` is one step."""
    import shlex

    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # an unclosed quote: split on spaces
        tokens = command.split()
    steps: list[list[str]] = [[]]
    for token in tokens:
        if token in ("&&", "||", ";", "&", "\n"):
            steps.append([])
        else:
            steps[-1].append(token)
    last = next((step for step in reversed(steps) if step), [])
    return last[: last.index("|")] if "|" in last else last


def _input_signature(tool: str, tool_input: object) -> str:
    """The call's input with whitespace and case evened out, so a repeated call reads the same."""
    text = json.dumps(tool_input, sort_keys=True, ensure_ascii=False, default=str)
    return f"{tool}:{' '.join(text.split()).lower()}"


def _edited_files(tool: str, tool_input: object, cwd: str | None) -> list[str]:
    if tool not in EDIT_TOOLS or not isinstance(tool_input, dict):
        return []
    if tool == "apply_patch":
        text = _command(tool_input) or str(tool_input.get("input") or tool_input.get("patch") or "")
        paths = re.findall(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", text, re.MULTILINE)
    else:
        path = tool_input.get("file_path") or tool_input.get("notebook_path")
        paths = [path] if isinstance(path, str) and path else []
    return [_relative(p.strip(), cwd) for p in paths][:20]


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _failure(event: str, payload: dict[str, Any], output: str) -> str | None:
    """The failure's signature, or None when the call did not fail. Claude Code reports a failed
    command as ``post-tool-failure``; Codex only in the output's text, read for error lines."""
    if event == POST_TOOL_FAILURE:
        if payload.get("is_interrupt"):
            return None
        return signature(output) or "failed"
    response = payload.get("tool_response")
    if isinstance(response, dict):
        code = response.get("exit_code", response.get("exitCode", response.get("returncode")))
        if isinstance(code, int) and code != 0:
            return signature(output) or f"exit {code}"
        if response.get("is_error") is True or response.get("success") is False:
            return signature(output) or "failed"
        if "stdout" in response or "stderr" in response:
            return None  # Claude Code's shell result: a failed command would have come as post-tool-failure
    if str(payload.get("tool_name") or "") not in ("Bash", "shell", "exec_command"):
        return None
    if re.search(SUCCESS_SUMMARY, output[-2000:]):
        return None
    return signature(output)


def signature(text: str) -> str | None:
    """The most telling error line of ``text`` (the last one a runner prints is usually the cause),
    normalised: numbers, hex, addresses and directories stripped. None when no line reads as an error."""
    lines = [m.group(0).strip() for m in re.finditer(ERROR_LINE, text[-20_000:])]
    lines = [line for line in lines if line and not re.match(r"^(?:0|no) (?:failed|errors?)\b", line)]
    if not lines:
        return None
    chosen = next((line for line in reversed(lines) if re.match(EXCEPTION, line)), lines[-1])
    chosen = re.sub(DIRECTORIES, r"\1", re.sub(r"^E\s+", "", chosen))
    chosen = re.sub(NUMBERS, "N", chosen)
    return " ".join(chosen.split())[:SIGNATURE_CHARS]


# ---------------------------------------------------------------- the session so far


def recent_events(store: Store, session_id: str) -> list[dict[str, Any]]:
    """The last ``WINDOW_BYTES`` of the session's event log, as records (a cut first line dropped)."""
    path = store.session_events_path(session_id)
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - WINDOW_BYTES))
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    if size > WINDOW_BYTES:
        lines = lines[1:]
    events = []
    for line in lines:
        try:
            record = parse_json(line)
        except ValueError:
            continue  # a torn or cut line
        if isinstance(record, dict):
            events.append(record)
    return events


def _step(event: dict[str, Any]) -> dict[str, Any] | None:
    summary = event.get("summary")
    step = summary.get("step") if isinstance(summary, dict) else None
    return step if isinstance(step, dict) and isinstance(step.get("input"), str) else None


_COMPACTION = (logged(PRE_COMPACT), logged(POST_COMPACT))


def _is_fresh_context(event: dict[str, Any]) -> bool:
    summary = event.get("summary")
    source = summary.get("source") if isinstance(summary, dict) else None
    return event.get("event") in _COMPACTION or (
        event.get("event") == logged(SESSION_START) and source in ("compact", "clear")
    )


class Window:
    """The session as the sensors see it: its steps and signals since the last prompt and since the
    context was last emptied (a compaction or a /clear), and the rules it was given."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        context_start = max((i + 1 for i, e in enumerate(events) if _is_fresh_context(e)), default=0)
        asked = logged(USER_PROMPT)
        prompt_at = max((i for i, e in enumerate(events) if e.get("event") == asked), default=-1)
        self.steps = [s for e in events if (s := _step(e)) is not None]
        self.context_steps = [s for e in events[context_start:] if (s := _step(e)) is not None]
        self.context_prompt_tokens = sum(_prompt_tokens(e) for e in events[context_start:])
        self.prompt_steps = [s for e in events[prompt_at + 1 :] if (s := _step(e)) is not None]
        prompt = events[prompt_at].get("summary") if prompt_at >= 0 else None
        self.prompt_at = prompt.get("at") if isinstance(prompt, dict) else None
        summaries = [e.get("summary") for e in events]
        self.rules_given = {k for s in summaries if isinstance(s, dict) for k in s.get("rules_given", ())}

    def fired(self, steps: list[dict[str, Any]], sensor: str, key: str | None = None) -> bool:
        """Whether ``sensor`` (about ``key``, if given) spoke at any of ``steps``."""
        return any(
            s.get("sensor") == sensor and (key is None or s.get("key") == key)
            for step in steps
            for s in step.get("signals", ())
            if isinstance(s, dict)
        )


def _prompt_tokens(event: dict[str, Any]) -> int:
    """What a prompt (or a session start) added to the context: its text and the pack that came with it."""
    summary = event.get("summary")
    tokens = summary.get("tokens") if isinstance(summary, dict) and "step" not in summary else 0
    return tokens if isinstance(tokens, int) else 0


# ---------------------------------------------------------------- the five sensors


def sense(
    window: Window,
    step: dict[str, Any],
    config: dict[str, int],
    dependants: Dependants | None = None,
) -> list[dict[str, Any]]:
    """The signals of this step (empty when all is nominal), each ``{"sensor", "level", "key", "line"}``.
    ``dependants(path)``: the path as the code graph names it (from the repository's root) and the
    files that import it."""
    found = [_burn(window, step, config), _clock(window, step, config), _pain(window, step, config)]
    found.append(_loop(window, step, config))
    found.extend(_reach(window, step, config, dependants))
    return [signal for signal in found if signal is not None]


def _signal(sensor: str, line: str, key: str = "", level: int = 0, tried: str = "") -> dict[str, Any]:
    if level:
        line += " " + ESCALATION[min(level, len(ESCALATION) - 1)].format(tried=tried or "nothing recorded")
    return {"sensor": sensor, "level": level, "key": key, "line": line}


def _burn(window: Window, step: dict[str, Any], config: dict[str, int]) -> dict[str, Any] | None:
    outputs = [s.get("tokens", 0) for s in window.context_steps] + [step["tokens"]]
    used = sum(outputs) + window.context_prompt_tokens
    recent = outputs[-5:]
    pace = sum(recent) / len(recent)
    limit = config["context_window_tokens"]
    if used + config["burn_calls"] * pace < limit or window.fired(window.context_steps, "burn"):
        return None
    calls = max(0, int((limit - used) / pace)) if pace else 0
    return _signal(
        "burn",
        f"burn: about {used:,} of the {limit:,}-token context used; at the last calls' pace "
        f"(about {int(pace):,} tokens a call) it is full in about {calls} more calls.",
    )


def _clock(window: Window, step: dict[str, Any], config: dict[str, int]) -> dict[str, Any] | None:
    count = len(window.prompt_steps) + 1
    minutes = int((step["at"] - window.prompt_at) / 60) if isinstance(window.prompt_at, (int, float)) else 0
    by_steps = count >= config["clock_steps"] and count % config["clock_steps"] == 0
    by_time = minutes >= config["clock_minutes"] and not window.fired(window.prompt_steps, "clock", "minutes")
    if not (by_steps or by_time):
        return None
    since = f"{count} tool calls" + (f" and {minutes} minutes" if minutes else "")
    return _signal("clock", f"clock: {since} since the user's last prompt.", "steps" if by_steps else "minutes")


def _pain(window: Window, step: dict[str, Any], config: dict[str, int]) -> dict[str, Any] | None:
    failure = step.get("failure")
    if not failure:
        return None
    key = step.get("command") or step["tool"]
    count, edited = 1, set(step.get("files", ()))
    for past in reversed(window.steps):
        edited.update(past.get("files", ()))
        if (past.get("command") or past.get("tool")) != key:
            continue  # reads, edits and other commands between the runs do not end the streak
        if past.get("failure") != failure:
            break  # a success of the command, or another error: a new streak
        count += 1
    if count < config["pain_repeats"]:
        return None
    tried = ", ".join(["edited " + _names(sorted(edited)[:5])] if edited else []) or "the same run again"
    return _signal(
        "pain",
        f"pain: {quote_outside(key)} failed {count} times in a row with the same error: {quote_outside(failure)}",
        key=failure,
        level=count - config["pain_repeats"],
        tried=tried,
    )


LOOP_LOOKBACK = 12  # steps: a repeat further back than this is not a loop


def _loop(window: Window, step: dict[str, Any], config: dict[str, int]) -> dict[str, Any] | None:
    if not step.get("read_only") or step.get("failure"):
        return None
    count = 1
    for past in window.steps[::-1][:LOOP_LOOKBACK]:
        if past.get("files"):
            break  # an edit in between: the repeat may see something new
        if past.get("input") == step["input"]:
            if past.get("output") != step["output"]:
                break
            count += 1
    if count < config["loop_repeats"]:
        return None
    what = quote_outside(step.get("command") or step["tool"])
    return _signal(
        "loop",
        f"loop: the same {what} call returned the same result {count} times with no edit in between.",
        key=step["input"],
        level=count - config["loop_repeats"],
        tried=f"the same {what} call {count} times",
    )


def _reach(
    window: Window, step: dict[str, Any], config: dict[str, int], dependants: Dependants | None
) -> list[dict[str, Any] | None]:
    if dependants is None:
        return []
    found: list[dict[str, Any] | None] = []
    for edited in step.get("files", ())[:5]:
        path, users = dependants(edited)
        if len(users) < config["reach_dependants"] or window.fired(window.steps, "reach", path):
            continue
        line = f"reach: {quote_outside(path)} is imported by {len(users)} other files ({_names(users[:3])}, ...)."
        found.append(_signal("reach", line, key=path))
    return found


def _names(paths: Sequence[str]) -> str:
    """File names from the session or the code graph, each shown as outside text."""
    return ", ".join(quote_outside(path) for path in paths)


def awareness(signals: list[dict[str, Any]], rules: Sequence[str] = ()) -> str:
    """The text the agent gets: one line a signal, under a heading that says what these are, then the
    lines of the rules (``cclg.learning.rules``) this call came near."""
    lines = "\n".join([f"- {s['line']}" for s in signals] + list(rules))
    return f"cclg sensors (what this session's own tool calls show; an observation, not a new task):\n{lines}"
