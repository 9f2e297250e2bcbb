"""Sessions and learning: what the hook records of a session, and what sessions teach and used.

A session's record and its event log are ``cclg.ledger.sessions``'; what its tool calls show is
``cclg.learning.sensors``'; the rules learned from failures ``cclg.learning.rules``'; the previous turn's entry
(CogLog) ``cclg.learning.turns``'; which delivered memories were used ``cclg.learning.usage``; memories proposed
from a session's prompts ``cclg.learning.distill``. The hook calls this module on every event, so it
imports none of them up front: each operation imports what it needs when it runs, and an event
loads only the modules its handler uses.
"""

from __future__ import annotations

from cclg.api.lazy import served_on_first_use

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from collections.abc import Callable, Collection
    from typing import Any

    from cclg.core.repository import Project
    from cclg.core.store import Store
    from cclg.learning.sensors import Window
    from cclg.learning.turns import MAX_FIELD_CHARS as MAX_FIELD_CHARS
    from cclg.learning.turns import MAX_WRITE_BYTES as MAX_WRITE_BYTES
    from cclg.ledger.sessions import FRESH_CONTEXT_SOURCES as FRESH_CONTEXT_SOURCES  # served below, not in __all__
    from cclg.ledger.sessions import Digest
    from cclg.ledger.writer import PatchResult
else:
    _LAZY = {  # module -> the constants it serves, imported on first use
        "cclg.ledger.sessions": "FRESH_CONTEXT_SOURCES",
        "cclg.learning.turns": "MAX_FIELD_CHARS MAX_WRITE_BYTES",
    }

    __getattr__ = served_on_first_use(globals(), _LAZY)


__all__ = [
    "accept_rule",
    "awareness",
    "clear_turn",
    "close_session",
    "deliver_previous_turn",
    "distill_accept",
    "distill_review",
    "learn_from_step",
    "list_rules",
    "list_sessions",
    "log_hook_failure",
    "mark_turn_context_emptied",
    "note_prompt",
    "read_turn",
    "recent_prompts",
    "record_event",
    "redact_payload",
    "reopen_session",
    "rules_to_give",
    "seal_turn",
    "sense_step",
    "session_digest",
    "session_project",
    "session_store",
    "session_timeline",
    "start_session",
    "tool_window",
    "usage_of",
    "usage_report",
    "write_turn",
]


# ---------------------------------------------------------------- the hook's session record


def session_store(root: str | None) -> Store:
    """The store the hook records a session in, as it is: an import a killed process left half-moved is
    left for the next command to finish (``open_store`` does), so an event never waits on one."""
    from cclg.core.store import Store

    return Store.open(root)


def redact_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A hook payload with its secrets redacted, before anything of it reaches disk (``cclg.core.secrets``)."""
    from cclg.core import secrets

    redacted, _ = secrets.redact_value(payload)
    return redacted  # type: ignore[no-any-return]


def session_project(cwd: object, store: Store | None = None) -> Project | None:
    """The project the host works in: its git repository (``cclg.core.repository.project_of``, the root
    commit cached in ``store``), else a project named after the folder itself."""
    if not isinstance(cwd, str) or not cwd:
        return None
    from pathlib import Path

    from cclg.core import repository

    found = repository.project_of(cwd, cache=store.project_cache_path if store is not None else None)
    if found is None and Path(cwd).name:
        found = repository.Project(Path(cwd).name)
    return found


def start_session(store: Store, session_id: str, *, agent: str, project: str | None) -> None:
    """Open the session's record, or leave the one there is (``cclg.ledger.sessions.start_session``)."""
    from cclg.ledger import sessions

    sessions.start_session(store, session_id, agent=agent, project=project)


def reopen_session(store: Store, session_id: str) -> None:
    """A resumed session that had ended is active again (``cclg.ledger.sessions.reopen_session``)."""
    from cclg.ledger import sessions

    sessions.reopen_session(store, session_id)


def session_digest(store: Store, session_id: str, keep: Callable[[Callable[[], object]], None] | None = None) -> Digest:
    """What the session was given so far (``cclg.ledger.sessions.digest``: its log, never read whole;
    ``keep`` runs the write that keeps the digest when it suits the caller)."""
    from cclg.ledger import sessions

    return sessions.digest(store, session_id, keep)


def record_event(
    store: Store, session_id: str, event: str, payload: dict[str, Any], *, summary: dict[str, Any] | None = None
) -> None:
    """Append an event to the session's log (``summary`` instead of the whole payload, if given)."""
    from cclg.ledger import sessions

    sessions.record_event(store, session_id, event, payload, summary=summary)


def list_sessions(store: Store, *, limit: int = 50) -> list[dict[str, Any]]:
    """The ``limit`` sessions started last, newest first: each session's record without its events."""
    found = sorted(store.load_sessions(), key=lambda s: (s.started_at or "", s.id), reverse=True)[:limit]
    return [{k: v for k, v in session.to_dict().items() if k != "events"} for session in found]


def session_timeline(store: Store, session_id: str, *, limit: int = 200) -> dict[str, Any]:
    """A session's record (``session``) and its last ``limit`` events, oldest first (``events``: each
    prompt with the memories its pack loaded, tool calls with the sensors' step and the rules given,
    compactions, turn ends), read from the end of its log (a long log is never read whole); ``NotFoundError``
    for a session the store does not hold."""
    from cclg.ledger import sessions

    record = store.read_session(session_id).to_dict()
    events = [*record.pop("events", []), *sessions.last_events(store, session_id, limit)][-limit:]
    return {"session": record, "events": events}


def recent_prompts(store: Store, session_id: str, count: int = 5) -> list[str]:
    """The session's last ``count`` prompts, oldest first, however many tool calls came after them: what a
    compact record keeps, and what a short follow-up is judged with (the last one)."""
    from cclg.ledger import sessions

    return sessions.recent_prompts(store, session_id, count)


def close_session(store: Store, session_id: str) -> None:
    """Close the session's record with the memories it was given; each rule it was given whose
    failure did not come gets a suppression (``cclg.learning.rules``), and each memory it was given a verdict,
    used or ignored (``cclg.learning.usage``)."""
    from cclg.learning import rules, usage
    from cclg.ledger import sessions

    found = sessions.digest(store, session_id)
    sessions.end_session(store, session_id, loaded_memory_ids=list(found.ever))
    rules.close_session(store, session_id, found)
    usage.record_session(store, session_id, found)


def log_hook_failure(root: str | None, event: str, error: str) -> None:
    """Record a hook failure in the store's ``audit/hook_failures.jsonl`` (if there is a store); never raises."""
    try:
        from cclg.core.ids import now_iso
        from cclg.core.store import Store

        store = Store.open(root)
        store.append(store.hook_failures_path, [{"event": event, "error": error[-4000:], "created_at": now_iso()}])
    except Exception:
        pass


# ---------------------------------------------------------------- the sensors and the rules


def tool_window(store: Store, session_id: str) -> Window:
    """The session's recent tool calls, as the sensors read them (``cclg.learning.sensors.Window``)."""
    from cclg.learning import sensors

    return sensors.Window(sensors.recent_events(store, session_id))


def sense_step(store: Store, event: str, payload: dict[str, Any], window: Window) -> dict[str, Any]:
    """The step one tool call makes, with the signals of the sensors that deviate (``cclg.learning.sensors``);
    reach asks the code graph which files import an edited one."""
    from cclg.learning import sensors

    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    step = sensors.observe(event, payload, cwd)

    def dependants(path: str) -> tuple[str, list[str]]:
        from cclg.api import code

        return code.dependants(store, cwd, path) if cwd else (path, [])

    signals = sensors.sense(window, step, sensors.settings(store), dependants if step.get("files") else None)
    if signals:
        step["signals"] = signals
    return step


def awareness(signals: list[dict[str, Any]], lines: list[str]) -> str:
    """What the hook answers a tool call with: the sensors' signals and the rules it comes near."""
    from cclg.learning import sensors

    return sensors.awareness(signals, lines)


def rules_to_give(
    store: Store,
    project: Project | None,
    session_id: str,
    *,
    step: dict[str, Any] | None = None,
    given: Collection[str] = (),
) -> tuple[list[str], list[str]]:
    """The rules to give now (``cclg.learning.rules``): the strong ones of the project at a session's start
    (no ``step``), or those ``step`` comes near that the session was not ``given``; their lines and
    keys, recorded as delivered."""
    from cclg.learning import rules

    found = rules.strong(store, project) if step is None else rules.near(store, step, project, set(given))
    keys = [rule.key for rule, _ in found]
    if keys:
        rules.note(store, "delivered", keys, session_id)
    return [f"- {rules.line(node, rule)}" for rule, node in found], keys


def learn_from_step(
    store: Store, step: dict[str, Any], window: Window, project: Project | None, session_id: str
) -> None:
    """Evidence for the rules: a detection when pain speaks about a rule's error, a new rule when a
    streak pain spoke about ends in a success."""
    from cclg.learning import rules

    if any(s["sensor"] == "pain" and s["level"] == 0 for s in step.get("signals", ())):
        known = rules.read_rules(store).values()
        seen = [r.key for r in known if r.of(project) and r.trigger.get("signature") == step["failure"]]
        if seen:
            rules.note(store, "detection", seen, session_id)
    elif step.get("command") and not step.get("failure"):
        rules.learn(store, window.steps, step, project.value if project is not None else None, session_id)


def list_rules(store: Store) -> list[dict[str, Any]]:
    """``cclg rules``: every learned rule with its evidence and whether it opens sessions (``cclg.learning.rules``)."""
    from cclg.learning import rules

    return rules.listing(store)


def accept_rule(store: Store, memory_id: str) -> PatchResult:
    """``cclg rules --accept``: the user trusts a rule whose text reads as instructions, so it opens
    sessions of its project (a ``label`` through the ledger; a rollback undoes it)."""
    from cclg.api.memories import show
    from cclg.learning import rules

    result: PatchResult = rules.accept(store, show(store, memory_id))
    return result


# ---------------------------------------------------------------- the previous turn (CogLog)


def note_prompt(store: Store, session_id: str, cwd: object) -> None:
    """This session has the latest prompt from its folder (``cclg.learning.turns.note_prompt``): a turn written
    there without naming a session is this one's."""
    from cclg.learning import turns

    turns.note_prompt(store, session_id, cwd)


def deliver_previous_turn(store: Store, session_id: str) -> str:
    """The previous turn's entry, compact, for the next prompt's context
    (``cclg.learning.turns.deliver_previous_turn``)."""
    from cclg.learning import turns

    return turns.deliver_previous_turn(store, session_id)


def mark_turn_context_emptied(store: Store, session_id: str) -> None:
    """The host's context was emptied (a compaction, a clear): the entry is given again (``cclg.learning.turns``)."""
    from cclg.learning import turns

    turns.mark_context_emptied(store, session_id)


def seal_turn(store: Store, session_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The entry of the turn a stop ends (what happened, and the agent's reading of it if it wrote one),
    which becomes the session's current entry (``cclg.learning.turns.seal``)."""
    from cclg.learning import turns

    return turns.seal(store, session_id, payload)


def read_turn(store: Store, session_id: str | None = None, *, coglog: bool = False) -> dict[str, Any]:
    """``cclg turn read``, MCP ``coglog_read``: the session's current entry (``cclg.learning.turns.read``)."""
    from cclg.learning import turns

    return turns.read(store, session_id, coglog=coglog)


def write_turn(store: Store, fields: dict[str, Any], session_id: str | None = None) -> dict[str, Any]:
    """``cclg turn write``, MCP ``coglog_write``: the agent's reading of its turn (``cclg.learning.turns.write``)."""
    from cclg.learning import turns

    return turns.write(store, fields, session_id)


def clear_turn(store: Store, session_id: str | None = None) -> bool:
    """``cclg turn clear``, MCP ``coglog_clear``: drop the session's current entry; whether there was one."""
    from cclg.learning import turns

    return turns.clear(store, session_id)


# ---------------------------------------------------------------- what sessions taught and used


def distill_review(store: Store, session_id: str) -> dict[str, Any]:
    """``cclg distill``, MCP ``memory_distill``: the corrections and decisions found in a session's
    prompts, proposed as memories with their evidence; nothing is written (``cclg.learning.distill``)."""
    from cclg.learning import distill

    return distill.review(store, session_id)


def distill_accept(store: Store, session_id: str, numbers: list[int] | None) -> list[dict[str, Any]]:
    """``cclg distill --accept``: write the proposals ``numbers`` (all of them for None)."""
    from cclg.learning import distill

    return distill.accept(store, session_id, numbers)


def usage_of(store: Store, memory_id: str) -> dict[str, int]:
    """How many finished sessions were given the memory ``memory_id`` (its full id), and used or ignored it."""
    from cclg.retrieval.usage_prior import counts

    delivered, used = counts(store).get(memory_id, [0, 0])
    return {"delivered": delivered, "used": used, "ignored": delivered - used}


def usage_report(store: Store, *, dead_weight: bool = False, min_delivered: int = 10) -> dict[str, Any]:
    """``cclg stats``, MCP ``memory_stats``: how often each memory was delivered and used (``cclg.learning.usage``);
    ``dead_weight``: only those delivered at least ``min_delivered`` times and never used."""
    from cclg.learning import usage

    return usage.table(store, dead_weight=dead_weight, min_delivered=min_delivered)
