"""``cclg-hook EVENT``: what Claude Code and Codex run on their hook events.

The hook's promises, in order of importance:

1. It never breaks the host. Whatever happens (no store, a corrupt store, garbage
   or truncated stdin, a huge payload, wrong types, a bug), it prints exactly one
   JSON object that the host accepts and exits 0. What went wrong goes to
   ``audit/hook_failures.jsonl`` in the store, when there is one.
2. It is quiet: context is returned on ``user-prompt`` and ``session-start`` only
   when there is something relevant, and on ``post-tool`` only when a sensor sees
   something off or a rule's trigger is near; always framed as reference material,
   under the host's cap (10,000 characters for Claude Code, about 2,500 tokens for
   Codex).
3. It is light: it imports the standard library and cclg's core modules only
   (no click, mcp, git or tree-sitter). When the store's helper takes the event, the
   process imports neither ``json`` nor ``re`` (``_wire_loads``), and its script is a
   plain one (``scripts/cclg-hook``) rather than pip's wrapper, which imports ``re``:
   its CPU goes from about 17 ms a run to about 10.

The module is an adapter: ``main`` reads the payload, ``handle`` opens the store
and the session, and ``HANDLERS`` maps each event to one function (a test checks
the table against the contract's events and the host templates):
``user-prompt`` records the prompt and returns the pack for it (``cclg.retrieval.rendering.fit_markdown``,
which fits the host's cap in one pass); ``post-tool`` and ``post-tool-failure`` record
the tool call (the full response is kept once, in raw/) with what the sensors make of
it (``cclg.learning.sensors``) and the rules it nears or teaches (``cclg.learning.rules``); ``session-start``
opens or resumes the session (bringing the project's registered instruction files in step when one
moved: ``cclg.api.sources``) and returns the pinned memories and the strong rules;
``pre-compact`` / ``post-compact`` keep a compact record; ``stop`` / ``session-end``
close the session record (and count the rules it was given that held). The session
bookkeeping lives in ``cclg.ledger.sessions``, the code graph's part in
``cclg.codegraph.context``. The handlers reach them through the library's area modules
(``cclg.api.learning``, ``retrieval``, ``code``), imported inside the handler that needs
one, so an event loads only what its handler uses.
"""

from __future__ import annotations

import os
import sys
import time

from cclg.core.hook_events import (
    POST_COMPACT,
    POST_TOOL,
    POST_TOOL_FAILURE,
    PRE_COMPACT,
    SESSION_END,
    SESSION_START,
    STOP,
    USER_PROMPT,
    logged,
)

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence
    from typing import Any

    from cclg.api.memories import Store
    from cclg.core.repository import Project
    from cclg.ledger.sessions import Digest

# The host's name of each event: the edge where the hook answers the host (``hookEventName``).
HOST_EVENTS = {
    USER_PROMPT: "UserPromptSubmit",
    POST_TOOL: "PostToolUse",
    POST_TOOL_FAILURE: "PostToolUseFailure",
    SESSION_START: "SessionStart",
    PRE_COMPACT: "PreCompact",
    POST_COMPACT: "PostCompact",
    STOP: "Stop",
    SESSION_END: "SessionEnd",
}
CONTEXT_EVENTS = (USER_PROMPT, SESSION_START, POST_TOOL, POST_TOOL_FAILURE)
MAX_STDIN_BYTES = 8 * 1024 * 1024
CLAUDE_MAX_CHARS = 10_000
CODEX_MAX_TOKENS = 2_500
SUMMARY_CHARS = 2_000
FRAME = (
    "cclg memory: reference notes recorded in earlier sessions, retrieved for this prompt. "
    "They describe the project as it was recorded; check them against the code when it matters.\n\n"
)


def detect_agent(payload: dict[str, Any]) -> str:
    """Codex sends ``turn_id`` on turn events and may send a null ``transcript_path``;
    Claude Code does neither. (The installer passes ``--agent``, so this is a fallback.)"""
    return (
        "codex"
        if "turn_id" in payload or ("transcript_path" in payload and payload["transcript_path"] is None)
        else "claude"
    )


CUT_MARK, CUT_END = "… [", " more characters in raw/]"  # the note ``_text`` puts where it cut a text


def _text(value: object, limit: int = SUMMARY_CHARS, tail: int = 0) -> str:
    """``value`` as the session log summarises it: whole up to ``limit`` characters, else its head (and its
    last ``tail`` characters) around a note of how many more the raw evidence holds."""
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return text
    head, rest = limit - tail, len(text) - limit
    return text[:head] + f"{CUT_MARK}{rest}{CUT_END}" + (f" {text[-tail:]}" if tail else "")


def _uncut(text: str) -> str:
    """``text`` without the note ``_text`` put where it cut it: the note's words are not the user's."""
    at = text.rfind(CUT_MARK)
    end = text.find(CUT_END, at) if at >= 0 else -1
    if end < 0 or not text[at + len(CUT_MARK) : end].isdigit():
        return text
    return text[:at] + text[end + len(CUT_END) :]


class Call:
    """One hook event as the handlers see it: the store, the session, the payload, the host."""

    def __init__(
        self, event: str, store: Store, session_id: str, payload: dict[str, Any], agent: str, include_codegraph: bool
    ) -> None:
        self.event = event
        self.logged_as = logged(event)  # the name in the session log
        self.store = store
        self.session_id = session_id
        self.payload = payload
        self.agent = agent
        self.project = _project(payload.get("cwd"), store)  # what the session reads and learns for
        self.project_value = self.project.value if self.project is not None else None  # what it writes
        self.include_codegraph = include_codegraph
        self._given: Digest | None = None

    def given(self) -> Digest:
        """What the session was given before this event (``cclg.ledger.sessions.digest``), read once."""
        from cclg.api import learning

        if self._given is None:
            self._given = learning.session_digest(self.store, self.session_id, keep=_after_answer)
        return self._given

    def record(self, summary: dict[str, Any] | None = None) -> None:
        """Append the event to the session's log (``summary`` instead of the whole payload, if given)."""
        from cclg.api import learning

        learning.record_event(self.store, self.session_id, self.logged_as, self.payload, summary=summary)


def _project(cwd: object, store: Store) -> Project | None:
    """The project the host works in (``cclg.api.learning.session_project``)."""
    from cclg.api import learning

    return learning.session_project(cwd, store)


def _writable(value: Any) -> Any:
    """``value`` with every string encodable as UTF-8: a lone surrogate becomes ``?``."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {_writable(k): _writable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_writable(v) for v in value]
    return value


def handle(
    event: str, payload: dict[str, Any], agent: str, root: str | None, include_codegraph: bool = False
) -> str | None:
    """Do the event's work; return the context for the model, or None."""
    from cclg.api import learning
    from cclg.core.ids import is_valid_session_id

    # Secrets in prompts and tool output are redacted before anything reaches disk, and text
    # that cannot be written as UTF-8 (lone surrogates from JSON escapes) is mended first.
    payload = learning.redact_payload(_writable(payload))
    store = learning.session_store(root)
    session_id = payload.get("session_id")
    if not is_valid_session_id(session_id):
        raise ValueError(f"the payload has no usable session_id: {session_id!r}")
    assert isinstance(session_id, str)
    include_codegraph = include_codegraph or hook_settings(store).get("include_codegraph", False)
    call = Call(event, store, session_id, payload, agent, include_codegraph)
    if event == SESSION_END and not store.session_path(session_id).exists():
        return None  # the end of a session cclg never saw start (`claude mcp list` fires one): nothing to close
    _bookkeeping(lambda: learning.start_session(store, session_id, agent=agent, project=call.project_value))
    return HANDLERS[event](call)


_later: list[Callable[[], object]] | None = None  # in the helper: the event's records, written after its answer


def _after_answer(write: Callable[[], object]) -> None:
    """Write one of the event's records that its answer does not read: now, in the hook's own process; in
    the helper, right after the host has the answer (``run_event``), before the helper takes another event."""
    if _later is None:
        write()
    else:
        _later.append(write)


def _bookkeeping(write: Callable[[], object]) -> None:
    """Run one of the hook's records of the session (its record, an event): a disk that refuses the
    write (full, read-only) costs that record, never the answer, which needs no write."""
    from cclg.errors import disk_refusal

    try:
        write()
    except Exception as exc:
        if disk_refusal(exc) is None:
            raise


def on_user_prompt(call: Call) -> str | None:
    """Record the prompt; answer with the pack for it, leaving out what the host's context holds already."""
    prompt = call.payload.get("prompt")
    if not isinstance(prompt, str):
        raise ValueError("user-prompt payload has no prompt string")
    given = call.given().in_context
    # A long prompt is mostly a paste with its question at the end: its head and its tail are kept.
    summary = {"prompt": _text(prompt, tail=SUMMARY_CHARS // 2), "cwd": call.payload.get("cwd"), "at": time.time()}
    _after_answer(lambda: _note_prompt(call))  # a pointer for `cclg turn write`: nothing the answer reads
    turn = _deliver_previous_turn(call)
    if turn:
        summary["previous_turn_given"] = True
    previous = _previous_prompt(call)
    return _record_and_answer(call, summary, query=prompt, skip=given, appendix=turn, previous=previous)


def _previous_prompt(call: Call) -> str:
    """The session's previous prompt, which a short follow-up is judged with (the current one is
    recorded after its pack); "" for a session's first prompt, and when the session's log cannot be
    read: the prompt is then judged alone, and still gets its pack."""
    from cclg.api import learning

    try:
        prompts = learning.recent_prompts(call.store, call.session_id, 1)
    except Exception:  # the follow-up's context is a help, never a reason to lose the pack
        return ""
    return _uncut(prompts[-1]) if prompts else ""


def _deliver_previous_turn(call: Call) -> str:
    """The previous turn's entry, compact, marked delivered (``cclg.learning.turns.deliver_previous_turn``); ""
    on any failure, which is logged: the pack still goes out."""
    try:
        from cclg.api import learning

        return learning.deliver_previous_turn(call.store, call.session_id)
    except Exception:
        import traceback

        _log_failure(str(call.store.root), f"{call.logged_as} (previous turn)", traceback.format_exc())
        return ""


def _note_prompt(call: Call) -> None:
    """This session has the latest prompt from its folder (``cclg.learning.turns.note_prompt``): a turn written
    there without naming a session is this one's. A failure is logged: the pack still goes out."""
    try:
        from cclg.api import learning

        learning.note_prompt(call.store, call.session_id, call.payload.get("cwd"))
    except Exception:
        import traceback

        _log_failure(str(call.store.root), f"{call.logged_as} (turn's folder)", traceback.format_exc())


def on_session_start(call: Call) -> str | None:
    """Open the session: pinned memories. After a compaction, also what the session had been given
    before it (the memories it was working with), current ones or what replaced them; after a
    resume, nothing the replayed context holds already."""
    from cclg.api import learning, retrieval

    source = call.payload.get("source")
    retrieval.wake_semantic(call.store)  # so that the first prompt, seconds later, finds the helper ready
    _sync_instructions(call)
    learning.reopen_session(call.store, call.session_id)  # a resumed session that had ended is active again
    given = call.given()
    offer = list(given.ever) if source == "compact" else []
    skip = () if source in learning.FRESH_CONTEXT_SOURCES else given.in_context
    summary: dict[str, Any] = {"source": source, "cwd": call.payload.get("cwd")}
    lines: list[str] = []
    if source != "resume":  # a resumed context holds the rules it was given already
        lines, summary["rules_given"] = _rules_given(call)
    if source in ("compact", "clear"):
        learning.mark_turn_context_emptied(call.store, call.session_id)
    rules = RULES_FRAME + "\n".join(lines) if lines else ""
    return _record_and_answer(call, summary, query="", offer=offer, skip=skip, appendix=rules)


def _sync_instructions(call: Call) -> None:
    """Bring the project's registered instruction files in step when one moved since its last sync
    (``cclg.api.sources.sync_changed_instructions``: a stat per file first). A failure is logged: the
    session still opens."""
    try:
        from cclg.api import sources

        sources.sync_changed_instructions(call.store, call.payload.get("cwd"))
    except Exception:
        import traceback

        _log_failure(str(call.store.root), f"{call.logged_as} (instruction files)", traceback.format_exc())


RULES_FRAME = (
    "cclg rules: lessons earlier sessions of this project learned from failures they got out of "
    "(reference material, not a task):\n"
)


def _rules_given(
    call: Call, *, step: dict[str, Any] | None = None, given: Collection[str] = ()
) -> tuple[list[str], list[str]]:
    """The rules to give now, their lines and keys, recorded as delivered (``cclg.api.learning.rules_to_give``)."""
    from cclg.api import learning

    return learning.rules_to_give(call.store, call.project, call.session_id, step=step, given=given)


def on_post_tool(call: Call) -> str | None:
    """Record the tool call (the full response is kept once, in raw/) with the step the sensors make
    of it; answer with their signals and the rules the call comes near, or with nothing while all
    is nominal. (Claude Code reports a command that failed as ``post-tool-failure``, handled here too.)"""
    from cclg.api import learning

    summary = {
        "tool_name": call.payload.get("tool_name"),
        "tool_use_id": call.payload.get("tool_use_id"),
        "duration_ms": call.payload.get("duration_ms"),
        "tool_input": _text(call.payload.get("tool_input"), 500),
    }
    try:
        window = learning.tool_window(call.store, call.session_id)
        step = summary["step"] = learning.sense_step(call.store, call.event, call.payload, window)
        lines, summary["rules_given"] = _rules_given(call, step=step, given=window.rules_given)
    finally:  # the call is recorded even when a sensor fails
        call.record(summary)
    learning.learn_from_step(call.store, step, window, call.project, call.session_id)
    signals = step.get("signals", [])
    return learning.awareness(signals, lines) if signals or lines else None


def on_compact(call: Call) -> None:
    """The compact record: what the session was doing and which memories it had been given, so
    nothing is lost with the compacted transcript."""
    from cclg.api import learning

    prompts = learning.recent_prompts(call.store, call.session_id, 5)
    learning.mark_turn_context_emptied(call.store, call.session_id)
    call.record(
        {
            "trigger": call.payload.get("trigger"),
            "recent_prompts": prompts,
            "loaded_memory_ids": list(call.given().ever),
            "compact_summary": _text(call.payload.get("compact_summary", "")),
        }
    )


def on_stop(call: Call) -> None:
    """Record the end of a turn, with its entry (``cclg.learning.turns``: what happened, and the agent's reading
    of it if it wrote one), which becomes the session's current entry."""
    from cclg.api import learning

    summary: dict[str, Any] = {"reason": call.payload.get("reason")}
    try:
        summary["turn"] = learning.seal_turn(call.store, call.session_id, call.payload)
    finally:  # the stop is recorded even when the entry cannot be made
        call.record(summary)


def on_session_end(call: Call) -> None:
    """Record the end of the session and close its record with the memories it was given; each rule
    it was given whose failure did not come gets a suppression (``cclg.learning.rules``), and each memory it
    was given a verdict, used or ignored (``cclg.learning.usage``)."""
    from cclg.api import learning

    call.record({"reason": call.payload.get("reason")})
    learning.close_session(call.store, call.session_id)


# What each event does. A test checks this table against the contract's events and the host templates.
HANDLERS: dict[str, Callable[[Call], str | None]] = {
    USER_PROMPT: on_user_prompt,
    POST_TOOL: on_post_tool,
    POST_TOOL_FAILURE: on_post_tool,
    SESSION_START: on_session_start,
    PRE_COMPACT: on_compact,
    POST_COMPACT: on_compact,
    STOP: on_stop,
    SESSION_END: on_session_end,
}


def _record_and_answer(
    call: Call,
    summary: dict[str, Any],
    *,
    query: str,
    offer: Sequence[str] = (),
    skip: Collection[str] = (),
    appendix: str = "",
    previous: str = "",
) -> str | None:
    """Compile the pack for ``query`` (with the session's ``previous`` prompt, for a follow-up), record
    the event with the ids it loaded, return the context.

    The event is recorded even when the pack cannot be compiled; the error is
    raised afterwards (and logged as a hook failure).
    """
    from cclg.api import retrieval
    from cclg.core.text import estimate_tokens  # 5 ms of imports: not on the way to the helper

    max_chars, max_tokens = context_limits(call.store, call.agent)
    codegraph = _codegraph(call, query, max_chars, max_tokens) if call.include_codegraph else ""
    appendix = f"\n\n{appendix}" if appendix else ""  # after the pack, within the same cap
    own = SESSION_LINE.format(session_id=call.session_id)
    extra = FRAME + codegraph + appendix + own
    nodes: list[dict[str, Any]] = []
    retired: list[dict[str, Any]] = []
    related: list[dict[str, Any]] = []
    context = None
    try:
        budget = retrieval.Budget(
            max_chars=max_chars - len(extra),
            max_tokens=None if max_tokens is None else max_tokens - estimate_tokens(extra),
        )
        where = retrieval.Where(session_id=call.session_id, project=call.project)
        request = retrieval.PackRequest(query, where=where, budget=budget, offer=offer, skip=skip, previous=previous)
        fitted, rendered = retrieval.fit_markdown(call.store, request)
        nodes, retired, related = fitted["memory_nodes"], fitted["suppressed_nodes"], fitted["possibly_related"]
        if nodes or retired or related:
            context = FRAME + rendered + codegraph + appendix + own
        elif codegraph.startswith("\n## Code graph") or appendix:
            context = (codegraph + appendix).lstrip("\n") + own
    finally:
        summary["loaded_memory_ids"] = [node["id"] for node in nodes]
        summary["listed_retired_ids"] = [node["id"] for node in retired]
        summary["offered_related_ids"] = [entry["id"] for entry in related]  # used only once opened (usage)
        # why each was given, as the pack said it then (the ui's session page shows it beside the id)
        summary["why"] = {entry["id"]: str(entry["why"])[:WHY_CHARS] for entry in nodes + related if entry.get("why")}
        summary["tokens"] = estimate_tokens(query) + estimate_tokens(context or "")  # what it adds to the context
        _after_answer(lambda: _bookkeeping(lambda: call.record(summary)))
    return context


WHY_CHARS = 160  # of each given memory's reason, kept in the session's log


# The last line of every context a prompt or a session start gets: the agent's own session, for the
# turn it writes (``cclg turn write``, MCP ``coglog_write``).
SESSION_LINE = "\n\nYour cclg session: {session_id} (for `cclg turn write --session {session_id}` or coglog_write)."
CODEGRAPH_SHARE = 4  # the code graph gets at most a quarter of the host's cap


def _codegraph(call: Call, query: str, max_chars: int, max_tokens: int | None) -> str:
    """The CodeGraphPack for the repository the host works in; "" when it fails (the failure is
    logged: the memories still go out)."""
    try:
        from cclg.api import code

        budget = (max_tokens if max_tokens is not None else max_chars // 4) // CODEGRAPH_SHARE
        worked = _session_files(call) if query.strip() else {}  # no query (a session start): no search
        return code.prompt_context(call.store, call.payload.get("cwd"), query, max_tokens=budget, session_files=worked)
    except Exception:
        import traceback

        _log_failure(str(call.store.root), f"{call.logged_as} (code graph)", traceback.format_exc())
        return ""


def _session_files(call: Call) -> dict[str, str]:
    """The files this session edited or read (from the sensors' steps) and those named in the current
    memories it was given, for code search's prior."""
    from cclg.api import code, learning

    worked = dict.fromkeys(code.files_named(call.store, call.given().ever), "named in a memory")
    for step in learning.tool_window(call.store, call.session_id).steps:
        for path in step.get("read", ()):
            worked.setdefault(path, "read in this session")
        for path in step.get("files", ()):
            worked[path] = "edited in this session"
    return worked


def hook_settings(store: Store) -> dict[str, Any]:
    """The ``hook`` object of the store's config.json, with the values that are usable.

    ``max_chars`` and ``max_tokens`` (positive integers) make the context smaller
    than the host's cap (never larger); ``include_codegraph`` (a boolean) is the
    default of ``--include-codegraph``. A value of the wrong type keeps its default (``cclg.core.config``).
    """
    return {name: value for name, value in store.settings.section("hook").items() if value is not None}


def context_limits(store: Store, agent: str) -> tuple[int, int | None]:
    """(characters, tokens) the pack may take: the host's cap, made smaller by the store's config."""
    if agent == "codex":
        max_chars, max_tokens = CODEX_MAX_TOKENS * 4, CODEX_MAX_TOKENS
    else:
        max_chars, max_tokens = CLAUDE_MAX_CHARS, None
    settings = hook_settings(store)
    if "max_chars" in settings:
        max_chars = min(max_chars, settings["max_chars"])
    if "max_tokens" in settings:
        max_tokens = settings["max_tokens"] if max_tokens is None else min(max_tokens, settings["max_tokens"])
    return max_chars, max_tokens


def respond(event: str, context: str | None) -> dict[str, Any]:
    """The one JSON object the host gets: context in hookSpecificOutput, or nothing."""
    if context is None or event not in CONTEXT_EVENTS:
        return {}
    return {"hookSpecificOutput": {"hookEventName": HOST_EVENTS[event], "additionalContext": context}}


def _log_failure(root: str | None, event: str, error: str) -> None:
    """Record a hook failure in the store (if there is one); never raises."""
    try:
        from cclg.api import learning

        learning.log_hook_failure(root, event, error)
    except Exception:
        pass


USAGE = """usage: cclg-hook [--agent claude|codex] [--root DIR] [--include-codegraph] EVENT

Hook entry point for Claude Code and Codex. EVENT is one of: {events}.
Reads the host's JSON payload on stdin; prints one JSON object; always exits 0.
The store is --root, else $CCLG_HOME, else ~/.cclg.
"""


class Arguments:
    def __init__(self) -> None:
        self.event = ""
        self.agent: str | None = None
        self.root: str | None = None
        self.include_codegraph = False


def parse_arguments(argv: list[str]) -> Arguments:
    """The hook's few options, read by hand: argparse alone costs ~15 ms of start-up.

    Anything unexpected is ignored rather than fatal: a host must still get JSON.
    """
    args = Arguments()
    words = iter(argv)
    for word in words:
        if word in ("--agent", "--root"):
            value = next(words, None)
            if word == "--agent" and value in ("claude", "codex"):
                args.agent = value
            elif word == "--root":
                args.root = value
        elif word.startswith("--agent=") and word.split("=", 1)[1] in ("claude", "codex"):
            args.agent = word.split("=", 1)[1]
        elif word.startswith("--root="):
            args.root = word.split("=", 1)[1]
        elif word == "--include-codegraph":
            args.include_codegraph = True
        elif not word.startswith("-") and not args.event:
            args.event = word
    return args


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--helper"]:  # the store's helper (``cclg.retrieval.semantic``), which takes events too
        from cclg.api import retrieval

        sys.exit(retrieval.serve_helper(argv[1:], events=run_event))
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(USAGE.format(events=", ".join(HANDLERS)))
        sys.exit(0)
    args = parse_arguments(argv)
    data = _stdin()
    output = hand_off(args, data)  # the store's helper does the work, when one is up and takes it
    if output is None:
        output = run(args, data)  # else this process does it, the same way
    sys.stdout.write(output + "\n")
    sys.stdout.flush()
    sys.exit(0)


def _stdin() -> bytes | None:
    """The payload's bytes (one more than the hook reads, so a larger one is known), None if unreadable."""
    try:
        return sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    except Exception:
        return None


def run(args: Arguments, data: bytes | None) -> str:
    """The event's output line, done in this process: the JSON object the host gets; ``{}`` on any failure,
    which is logged. The helper runs the same (``run_event``)."""
    output: dict[str, Any] = {}
    try:
        from io import BytesIO

        from cclg.core.fields import read_json

        if args.event not in HANDLERS:
            raise ValueError(f"unknown hook event {args.event!r}; use one of {', '.join(HANDLERS)}")
        if data is None:
            raise ValueError("the payload could not be read from stdin")
        payload = read_json(BytesIO(data), MAX_STDIN_BYTES, "the payload")
        if not isinstance(payload, dict):
            raise ValueError("the payload is not a JSON object")
        agent = args.agent or detect_agent(payload)
        output = respond(args.event, handle(args.event, payload, agent, args.root, args.include_codegraph))
    except Exception:
        import traceback  # only on failure: it costs start-up time

        _log_failure(args.root, str(args.event), traceback.format_exc())
        output = {}
    import json

    return json.dumps(output, ensure_ascii=False)


# ---------------------------------------------------------------- the hand-off to the store's helper

HANDOFF_READY = 0.05  # seconds to reach the helper and hear it take the event; past them, this process does it
# Seconds for the answer of an event the helper took; past them, the host gets {}. The event's own work,
# not a wait for a daemon to start: about 4x the hook's whole run at 100,000 memories on a loaded machine.
HANDOFF_ANSWER = 2.0


def hand_off(args: Arguments, data: bytes | None) -> str | None:
    """The event's output line from the store's helper, or None when no helper took the event (none
    runs, it is not this user's, it runs other code, it is busy, it did not say "ready" within
    ``HANDOFF_READY``): then this process does the work itself (``run``), and the output is the same.

    It imports only the standard library and ``cclg.core.runtime``, which finds the helper's socket as
    every part of cclg does. What it sends: the event's facts (the event, ``--agent``, the store's
    folder, ``--include-codegraph``, ``$CCLG_SEMANTIC``: all the handlers read besides the payload;
    they read the working folder from the payload's ``cwd``, not the process's) and the payload's
    bytes as read. An event is handled once: the helper answers "ready", handles it only after this
    process's "go", and once "go" is sent this process never handles it, even when the answer does
    not come within ``HANDOFF_ANSWER`` (the host then gets ``{}`` and the miss is logged)."""
    if args.event not in HANDLERS or data is None or len(data) > MAX_STDIN_BYTES:
        return None
    try:
        conn, root = _reach_helper(args.root)
    except Exception:  # no helper, or not this user's: this process does the work (and says what it found)
        return None
    try:
        try:
            import cclg

            facts = {
                "event": args.event,
                "agent": args.agent,
                "root": root,
                "include_codegraph": args.include_codegraph,
                "semantic": os.environ.get("CCLG_SEMANTIC"),
                "version": cclg.__version__,
                "package": os.path.dirname(os.path.abspath(cclg.__file__)),
                "length": len(data),
            }
            conn.sendall(_wire_dumps(facts).encode() + b"\n" + data)
            if _wire_loads(_line(conn, HANDOFF_READY)).get("ready") is not True:
                return None  # refused (its reason is in the answer): this process does it
            conn.sendall(b"go\n")
        except Exception:  # no "go" went out: the helper drops the event
            return None
        try:  # the helper has the event now: never done here as well
            output = _wire_loads(_line(conn, HANDOFF_ANSWER))["output"]
            if not isinstance(output, str) or not isinstance(_wire_loads(output.encode()), dict):
                raise ValueError(f"the helper's output is not a JSON object: {output!r}")
            return output
        except Exception as error:
            _log_failure(root, args.event, f"the helper took the event and gave no answer in time: {error!r}")
            return "{}"
    finally:
        conn.close()


def _reach_helper(root: str | None) -> tuple[Any, str]:
    """A connection to the helper of the store at ``root`` (the store's folder, absolute, with it), checked
    as the semantic client checks it: the runtime folder and the socket are this user's alone, and so is
    the process serving it (``cclg.core.runtime``). Raises when there is none, or it is not to be trusted."""
    import stat

    from cclg.core import runtime

    uid = os.geteuid()
    folder = os.path.abspath(runtime.store_root(root))
    path = runtime.socket_for(folder, uid)
    info = os.lstat(path)  # no helper (the usual FileNotFoundError): nothing more is loaded
    if not stat.S_ISSOCK(info.st_mode):
        raise FileNotFoundError(path)
    place = os.lstat(os.path.dirname(path))
    if not stat.S_ISDIR(place.st_mode):
        raise runtime.Untrusted(f"{os.path.dirname(path)} is not a folder")
    runtime.check_private(os.path.dirname(path), place, "runtime folder", uid)
    runtime.check_private(path, info, "helper's socket", uid)
    import _socket  # not ``socket``: its import alone costs the hook milliseconds

    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(HANDOFF_READY)
        conn.connect(path)
        peer = runtime.peer_uid(conn)
        if peer is not None and peer != uid:
            raise runtime.Untrusted(f"the helper's socket {path} is served by uid {peer}, not {uid}")
    except BaseException:
        conn.close()
        raise
    return conn, folder


class _Decoding:
    """What the C scanner of ``json`` (``_json.make_scanner``) reads of its decoder: ``json.loads``'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


def _wire_loads(line: bytes) -> Any:
    """The JSON value of one line from the helper, as ``json.loads`` decodes it, by the C scanner ``json``
    itself uses: importing ``json`` loads ``re``, which costs the hook about 3 ms. Where the interpreter
    has no ``_json`` (not CPython), ``json`` does it. Raises ``ValueError`` for anything that is not
    exactly one JSON value."""
    text = line.decode("utf-8").strip(" \t\r\n")
    try:
        import _json
    except ImportError:
        import json

        return json.loads(text)
    decoding: Any = _Decoding()  # (typeshed types the context as a scanner; any object with these attributes is one)
    try:
        value, end = _json.make_scanner(decoding)(text, 0)
    except StopIteration:
        raise ValueError(f"not JSON: {text[:80]!r}") from None
    if end != len(text):
        raise ValueError(f"more than one JSON value: {text[:80]!r}")
    return value


def _wire_dumps(facts: dict[str, str | int | bool | None]) -> str:
    """``facts`` (strings, integers, booleans and None) as ``json.dumps`` writes them, without importing
    ``json`` (see ``_wire_loads``)."""
    try:
        from _json import encode_basestring_ascii as quote
    except ImportError:
        import json

        return json.dumps(facts)

    def value(item: str | int | bool | None) -> str:
        if item is None or isinstance(item, bool):
            return {None: "null", True: "true", False: "false"}[item]
        if isinstance(item, int):
            return str(item)
        if isinstance(item, str):
            return str(quote(item))
        raise TypeError(f"not a fact the helper reads: {item!r}")

    return "{" + ", ".join(f"{quote(key)}: {value(item)}" for key, item in facts.items()) + "}"


def _line(conn: Any, seconds: float) -> bytes:
    """One line from ``conn`` within ``seconds`` in all (``TimeoutError`` past them)."""
    deadline = time.monotonic() + seconds
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        conn.settimeout(left)
        chunk = conn.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the helper closed the connection")
        data += chunk
    return data


def run_event(facts: dict[str, Any], data: bytes) -> tuple[str, Callable[[], None]]:
    """In the helper: the output line of an event handed to it (``hand_off``), done as ``run`` does it, and
    what writes the event's records once the answer is sent (``_after_answer``; a failure there is logged,
    as the hook's own process logs it)."""
    global _later
    args = Arguments()
    args.event = str(facts.get("event"))
    args.agent = facts.get("agent") if facts.get("agent") in ("claude", "codex") else None
    args.root = str(facts["root"])
    args.include_codegraph = facts.get("include_codegraph") is True
    _later = []
    try:
        output = run(args, data)
    finally:
        writes, _later = _later, None

    def finish() -> None:
        for write in writes:
            try:
                write()
            except Exception:
                import traceback

                _log_failure(args.root, args.event, traceback.format_exc())

    return output, finish


if __name__ == "__main__":
    main()
