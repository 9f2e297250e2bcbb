"""``cclg-hook EVENT``: what Claude Code and Codex run on their hook events.

The hook's promises, in order of importance:

1. It never breaks the host. Whatever happens (no store, a corrupt store, garbage
   or truncated stdin, a huge payload, wrong types, a bug), it prints exactly one
   JSON object that the host accepts and exits 0. What went wrong goes to
   ``audit/hook_failures.jsonl`` in the store, when there is one.
2. It is quiet: context is returned only on ``user-prompt`` and ``session-start``
   (the events where hosts take ``hookSpecificOutput.additionalContext``), only
   when there is something relevant, framed as reference material, under the
   host's cap (10,000 characters for Claude Code, about 2,500 tokens for Codex).
3. It is light: it imports the standard library and cclg's core modules only
   (no click, mcp, git or tree-sitter).

Events: ``user-prompt`` records the prompt and returns the pack for it;
``post-tool`` records the tool call (the full response is kept once, in raw/);
``session-start`` opens or resumes the session and returns the pinned memories;
``pre-compact`` / ``post-compact`` keep a compact record; ``stop`` /
``session-end`` close the session record.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

    from cclg.store import Store

HOST_EVENTS = {
    "user-prompt": "UserPromptSubmit",
    "post-tool": "PostToolUse",
    "session-start": "SessionStart",
    "pre-compact": "PreCompact",
    "post-compact": "PostCompact",
    "stop": "Stop",
    "session-end": "SessionEnd",
}
CONTEXT_EVENTS = ("user-prompt", "session-start")
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


def project_of(cwd: object) -> str | None:
    """The name of the git root above ``cwd``, else of ``cwd`` itself."""
    if not isinstance(cwd, str) or not cwd:
        return None
    path = Path(cwd)
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder.name or None
    return path.name or None


def _text(value: object, limit: int = SUMMARY_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters in raw/]"


def handle(
    event: str, payload: dict[str, Any], agent: str, root: str | None, include_codegraph: bool = False
) -> str | None:
    """Do the event's work; return the context for the model, or None."""
    from cclg import guard, sessions
    from cclg.records import is_valid_session_id
    from cclg.store import Store

    # Secrets in prompts and tool output are redacted before anything reaches disk.
    payload, _ = guard.redact_value(payload)
    store = Store.open(root)
    session_id = payload.get("session_id")
    if not is_valid_session_id(session_id):
        raise ValueError(f"the payload has no usable session_id: {session_id!r}")
    assert isinstance(session_id, str)
    project = project_of(payload.get("cwd"))
    include_codegraph = include_codegraph or hook_settings(store).get("include_codegraph", False)
    sessions.start_session(store, session_id, agent=agent, project=project)

    if event == "user-prompt":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("user-prompt payload has no prompt string")
        return _record_and_answer(
            store,
            session_id,
            "user_prompt",
            payload,
            {"prompt": _text(prompt), "cwd": payload.get("cwd")},
            query=prompt,
            project=project,
            agent=agent,
            include_codegraph=include_codegraph,
        )
    if event == "session-start":
        # After a compaction or on resume, offer what the recent prompts needed;
        # at a fresh start there is no prompt yet: pinned memories only.
        source = payload.get("source")
        query = " ".join(_recent_prompts(store, session_id, 3)) if source in ("compact", "resume") else ""
        return _record_and_answer(
            store,
            session_id,
            "session_start",
            payload,
            {"source": source, "cwd": payload.get("cwd")},
            query=query,
            project=project,
            agent=agent,
            include_codegraph=include_codegraph,
        )
    if event == "post-tool":
        summary = {
            "tool_name": payload.get("tool_name"),
            "tool_use_id": payload.get("tool_use_id"),
            "duration_ms": payload.get("duration_ms"),
            "tool_input": _text(payload.get("tool_input"), 500),
        }
        sessions.record_event(store, session_id, "post_tool", payload, summary=summary)
    elif event in ("pre-compact", "post-compact"):
        # The compact record: what the session was doing and which memories it had
        # been given, so nothing is lost with the compacted transcript.
        events = store.session_events(session_id)
        summary = {
            "trigger": payload.get("trigger"),
            "recent_prompts": _recent_prompts(store, session_id, 5, events[-50:]),
            "loaded_memory_ids": _loaded_memory_ids(events),
            "compact_summary": _text(payload.get("compact_summary", "")),
        }
        sessions.record_event(store, session_id, event.replace("-", "_"), payload, summary=summary)
    else:  # stop, session-end
        sessions.record_event(
            store, session_id, event.replace("-", "_"), payload, summary={"reason": payload.get("reason")}
        )
        if event == "session-end":
            loaded = _loaded_memory_ids(store.session_events(session_id))
            sessions.end_session(store, session_id, loaded_memory_ids=loaded)
    return None


def _record_and_answer(
    store: Store,
    session_id: str,
    event: str,
    payload: dict[str, Any],
    summary: dict[str, Any],
    *,
    query: str,
    project: str | None,
    agent: str,
    include_codegraph: bool,
) -> str | None:
    """Compile the pack for ``query``, record the event with the ids it loaded, return the context.

    The event is recorded even when the pack cannot be compiled; the error is
    raised afterwards (and logged as a hook failure).
    """
    from cclg import sessions

    pack: dict[str, Any] = {"memory_nodes": [], "suppressed_nodes": []}
    context = None
    failure: Exception | None = None
    codegraph = ""
    if include_codegraph:
        try:
            codegraph = codegraph_context(store, payload.get("cwd"), query, agent)
        except Exception:  # the memories still go out; the failure is logged
            import traceback

            _log_failure(str(store.root), f"{event} (code graph)", traceback.format_exc())
    try:
        pack, context = _fit_context(store, query, session_id, project, agent, codegraph)
    except Exception as error:
        failure = error
    summary["loaded_memory_ids"] = [node["id"] for node in pack["memory_nodes"]]
    sessions.record_event(store, session_id, event, payload, summary=summary)
    if failure is not None:
        raise failure
    return context


CODEGRAPH_SHARE = 4  # the code graph gets at most a quarter of the host's cap


def codegraph_context(store: Store, cwd: object, query: str, agent: str) -> str:
    """The CodeGraphPack for ``query`` from the stored graph of the repository holding ``cwd``.

    Uses the graph as the last ``cclg code-index`` left it; when the repository's
    git index has changed since, a re-index starts in the background (the changed
    files only are parsed again) and this prompt uses the graph as it is.
    """
    from cclg.codegraph.rank import rank_files, render_pack
    from cclg.codegraph.stored import repository_root, search_index_path

    if not isinstance(cwd, str) or not cwd or not query.strip():
        return ""
    root = repository_root(cwd)
    if not search_index_path(store, root).is_file():
        return f"\n(No code graph for this repository yet: `cclg code-index {root}` builds one.)\n"
    _refresh_in_background(store, root)
    max_chars, max_tokens = context_limits(store, agent)
    budget = (max_tokens if max_tokens is not None else max_chars // 4) // CODEGRAPH_SHARE
    text = render_pack(rank_files(search_index_path(store, root), query), max_tokens=budget)
    return "\n" + text if text else ""


def _refresh_in_background(store: Store, root: Path) -> None:
    """Start ``cclg code-index`` detached when git's index is newer than the graph (at most every 10 minutes)."""
    from cclg.codegraph.stored import graph_path

    graph_file = graph_path(store, root)
    marker = graph_file.with_suffix(".refreshing")
    try:
        if (root / ".git" / "index").stat().st_mtime <= graph_file.stat().st_mtime:
            return
        if marker.exists() and marker.stat().st_mtime > graph_file.stat().st_mtime and _age(marker) < 600:
            return
    except OSError:
        return
    import subprocess  # only when a refresh starts

    marker.touch()
    subprocess.Popen(
        [sys.executable, "-m", "cclg", "--root", str(store.root), "code-index", str(root)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _age(path: Path) -> float:
    import time

    return time.time() - path.stat().st_mtime


def _fit_context(
    store: Store, query: str, session_id: str, project: str | None, agent: str, codegraph: str
) -> tuple[dict[str, Any], str | None]:
    """The pack for ``query`` and its rendering (then ``codegraph``), which fit the host's cap whole.

    The pack's budget counts stored text; the rendering adds ids, sources and
    headings. When the rendering overflows, the budget shrinks in proportion and the
    pack is compiled again (at most a few times).
    """
    from cclg.guard import estimate_tokens
    from cclg.pack import compile_pack, prompt_markdown  # only events with context need it

    max_chars, max_tokens = context_limits(store, agent)
    extra = FRAME + codegraph
    budget_chars, budget_tokens = max_chars - len(extra), max_tokens
    for _ in range(4):
        pack = compile_pack(
            store,
            query,
            session_id=session_id,
            project=project,
            max_chars=max(0, budget_chars),
            max_tokens=None if budget_tokens is None else max(0, budget_tokens),
        )
        if not pack["memory_nodes"] and not pack["suppressed_nodes"]:
            return pack, codegraph.lstrip("\n") if codegraph.startswith("\n## Code graph") else None
        rendered = prompt_markdown(pack)
        context = FRAME + rendered + codegraph
        tokens = 0 if max_tokens is None else estimate_tokens(context)
        if len(context) <= max_chars and (max_tokens is None or tokens <= max_tokens):
            return pack, context
        share = (max_chars - len(extra)) / max(len(rendered), 1)
        if max_tokens is not None:
            share = min(share, (max_tokens - estimate_tokens(extra)) / max(estimate_tokens(rendered), 1))
        share *= 0.95  # a margin, so a few rounds always converge
        budget_chars = int(budget_chars * share) - 1
        if budget_tokens is not None:
            budget_tokens = int(budget_tokens * share) - 1
    return {"memory_nodes": [], "suppressed_nodes": []}, None


def hook_settings(store: Store) -> dict[str, Any]:
    """The ``hook`` object of the store's config.json, with the values that are usable.

    ``max_chars`` and ``max_tokens`` (positive integers) make the context smaller
    than the host's cap (never larger); ``include_codegraph`` (a boolean) is the
    default of ``--include-codegraph``. A value of the wrong type is ignored.
    """
    settings = store.config.get("hook")
    if not isinstance(settings, dict):
        return {}
    usable: dict[str, Any] = {}
    for name in ("max_chars", "max_tokens"):
        value = settings.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            usable[name] = value
    if isinstance(settings.get("include_codegraph"), bool):
        usable["include_codegraph"] = settings["include_codegraph"]
    return usable


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


def _recent_prompts(store: Store, session_id: str, count: int, events: list[dict[str, Any]] | None = None) -> list[str]:
    """The session's last ``count`` prompts, oldest first."""
    events = store.session_events(session_id)[-50:] if events is None else events
    prompts = [e.get("summary", {}).get("prompt") for e in events if e.get("event") == "user_prompt"]
    return [p for p in prompts if isinstance(p, str) and p][-count:]


def _loaded_memory_ids(events: list[dict[str, Any]]) -> list[str]:
    """Ids of the memories the session was given, first offer first, without repeats."""
    loaded: dict[str, None] = {}
    for e in events:
        ids = e.get("summary", {}).get("loaded_memory_ids")
        if isinstance(ids, list):
            loaded.update((i, None) for i in ids if isinstance(i, str))
    return list(loaded)


def respond(event: str, context: str | None) -> dict[str, Any]:
    """The one JSON object the host gets: context in hookSpecificOutput, or nothing."""
    if context is None or event not in CONTEXT_EVENTS:
        return {}
    return {"hookSpecificOutput": {"hookEventName": HOST_EVENTS[event], "additionalContext": context}}


def _log_failure(root: str | None, event: str, error: str) -> None:
    """Record a hook failure in the store (if there is one); never raises."""
    try:
        from cclg.records import now_iso
        from cclg.store import Store

        store = Store.open(root)
        store.append(
            store.root / "audit" / "hook_failures.jsonl",
            [{"event": event, "error": error[-4000:], "created_at": now_iso()}],
        )
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
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(USAGE.format(events=", ".join(HOST_EVENTS)))
        sys.exit(0)
    args = parse_arguments(argv)
    output: dict[str, Any] = {}
    try:
        data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
        if args.event not in HOST_EVENTS:
            raise ValueError(f"unknown hook event {args.event!r}; use one of {', '.join(HOST_EVENTS)}")
        if len(data) > MAX_STDIN_BYTES:
            raise ValueError(f"payload larger than {MAX_STDIN_BYTES} bytes")
        payload = json.loads(data.decode("utf-8"))
        if not isinstance(payload, dict):
            raise ValueError("the payload is not a JSON object")
        agent = args.agent or detect_agent(payload)
        output = respond(args.event, handle(args.event, payload, agent, args.root, args.include_codegraph))
    except Exception:
        import traceback  # only on failure: it costs start-up time

        _log_failure(args.root, str(args.event), traceback.format_exc())
        output = {}
    sys.stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    sys.exit(0)
