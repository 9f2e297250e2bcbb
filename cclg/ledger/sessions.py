"""Sessions: one record per agent session and an append-only log of its events.

The session record (``sessions/<id>.json``) holds who and where; it is rewritten
atomically only when the session starts or ends. Events go to the append-only
``sessions/<id>.events.jsonl`` (one locked write each), and each event's payload
is also kept verbatim as raw evidence, which the event points to. Nothing here
takes the store lock: hooks call these on every event, and must never wait behind
a long write such as an import.
"""

from __future__ import annotations

import contextlib
import json

from cclg.core.fields import parse_json
from cclg.core.files import private_folders
from cclg.core.hook_events import POST_COMPACT, PRE_COMPACT, SESSION_START, USER_PROMPT, logged
from cclg.core.ids import now_iso
from cclg.core.records import Record, Session
from cclg.core.store import Store, audit_record
from cclg.errors import NotFoundError

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import Any, BinaryIO


def start_session(
    store: Store,
    session_id: str,
    *,
    agent: str,
    workspace: str | None = None,
    project: str | None = None,
    branch_name: str | None = None,
) -> Session:
    """Open a session, or return it if it exists already (a resumed session).

    Every hook event calls this, so it takes no store lock: a hook must never wait behind a long
    write such as an import. The record is published only where none exists: of two hooks opening
    one session at once, the second reads the first's."""
    try:
        return store.read_session(session_id)
    except NotFoundError:
        pass
    stamp = now_iso()
    session = Session(
        id=session_id,
        agent=agent,
        workspace=workspace,
        project=project,
        started_at=stamp,
        ended_at=None,
        status="active",
        branch_name=branch_name,
        created_at=stamp,
        updated_at=stamp,
    )
    try:
        store.write_session(session, new=True)
    except FileExistsError:
        return store.read_session(session_id)
    store.audit("session_started", session_id=session_id)
    return session


def record_event(
    store: Store, session_id: str, event: str, payload: dict[str, Any], summary: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Append an event to the session's log, keeping its payload as raw evidence.

    The log holds the payload itself, or only ``summary`` when one is given (for
    large payloads such as tool output, which are then stored once, in raw/).
    ``raw_bytes`` is the size of that evidence.
    """
    stamp = now_iso()
    evidence = {"event": event, "payload": payload, "created_at": stamp}
    data = (json.dumps(evidence, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    raw_path, _ = store.write_raw(data, f"{session_id}-{event}.json")
    record: dict[str, Any] = {"event": event}
    record.update({"payload": payload} if summary is None else {"summary": summary})
    record.update(raw=raw_path, raw_bytes=len(data), created_at=stamp)
    store.append(store.session_events_path(session_id), [record])
    store.audit_many([audit_record("session_event", session_id=session_id, session_event=event, raw=raw_path)])
    return record


@contextlib.contextmanager
def _session_lock(store: Store, session_id: str) -> Iterator[None]:
    """Serialise rewrites of one session's record: the lock its event log's appends take, never the
    store lock, which a long write (an import) may hold while a hook ends its session. Taken through
    ``store.locked_log``, so a log rewritten whole meanwhile (``cclg purge``) is locked anew."""
    with store.locked_log(store.session_events_path(session_id)):
        yield


def end_session(store: Store, session_id: str, loaded_memory_ids: list[str] | None = None) -> Session:
    """Close a session; ``loaded_memory_ids`` lists the memories it was given."""
    store.read_session(session_id)  # NotFoundError before any file is made
    with _session_lock(store, session_id):
        session = store.read_session(session_id)
        if session.ended_at is None:
            session.ended_at = session.updated_at = now_iso()
            session.status = "ended"
            if loaded_memory_ids is not None:
                session.loaded_memory_ids = loaded_memory_ids
            store.write_session(session)
            store.audit("session_ended", session_id=session_id)
    return session


def active_sessions(store: Store, within: float) -> list[str]:
    """The sessions started and not ended whose record or event log changed in the last ``within``
    seconds: a session whose host died without ending it stops counting then. Only the recent records
    are read."""
    import os
    import time

    since = time.time() - within
    active = []
    for record in sorted(store.folder("sessions").glob("*.json")):
        log = record.with_suffix(".events.jsonl")
        with contextlib.suppress(NotFoundError, ValueError, OSError):  # gone meanwhile, or not a session's
            changed = max(os.stat(p).st_mtime for p in (record, log) if p.exists())
            if changed >= since and store.read_session(record.stem).ended_at is None:
                active.append(record.stem)
    return active


def reopen_session(store: Store, session_id: str) -> None:
    """Mark an ended session active again (a host resumed it); nothing when it is not ended."""
    if store.read_session(session_id).ended_at is None:
        return
    with _session_lock(store, session_id):
        session = store.read_session(session_id)
        if session.ended_at is not None:
            session.ended_at, session.status, session.updated_at = None, "active", now_iso()
            store.write_session(session)
            store.audit("session_started", session_id=session_id, resumed=True)


def note_overlay(store: Store, session_id: str, node_id: str) -> None:
    """List a session-scoped memory on its session record (if the session exists)."""
    try:
        store.read_session(session_id)
    except NotFoundError:
        return
    with _session_lock(store, session_id):
        session = store.read_session(session_id)
        if node_id not in session.session_overlay_ids:
            session.session_overlay_ids.append(node_id)
            session.updated_at = now_iso()
            store.write_session(session)
            store.audit("session_overlay_written", session_id=session_id, node_id=node_id)


def event_payload(store: Store, event: dict[str, Any]) -> dict[str, Any]:
    """The payload an event's raw evidence keeps verbatim (``record_event``): the whole prompt or tool
    response the log only summarises; {} when the event has none or it cannot be read."""
    raw = event.get("raw")
    path = store.raw_file(raw.split("/", 1)[-1]) if isinstance(raw, str) else None
    if path is None:
        return {}
    try:
        payload = parse_json(path.read_bytes()).get("payload")
    except (OSError, ValueError, AttributeError):
        return {}
    return payload if isinstance(payload, dict) else {}


TAIL_CHUNK = 64 * 1024


def latest_event(store: Store, session_id: str, event: str) -> dict[str, Any] | None:
    """The session's last ``event`` (``user_prompt``, say); None when there is none (``latest_events``)."""
    found = latest_events(store, session_id, event, 1)
    return found[0] if found else None


def latest_events(store: Store, session_id: str, event: str, count: int) -> list[dict[str, Any]]:
    """The session's last ``count`` events named ``event``, last first, read backwards from the end of its
    log (``lines_backwards``), parsing only the lines that name it: a long session's log is never read
    whole, however many other events came after them."""
    needle = f'"event": "{event}"'.encode()
    found: list[dict[str, Any]] = []
    try:
        with open(store.session_events_path(session_id), "rb") as handle:
            for line in lines_backwards(handle):
                parsed = _parsed(line) if needle in line else None
                if parsed is not None and parsed.get("event") == event:
                    found.append(parsed)
                    if len(found) == count:
                        break
    except FileNotFoundError:
        pass
    return found


def lines_backwards(handle: BinaryIO) -> Iterator[bytes]:
    """The lines of an open file, last first, read ``TAIL_CHUNK`` bytes at a time from the end."""
    end = handle.seek(0, 2)
    rest = b""  # the start of a line the chunk before it cut
    while end > 0:
        start = max(0, end - TAIL_CHUNK)
        handle.seek(start)
        lines = (handle.read(end - start) + rest).split(b"\n")
        rest = lines.pop(0) if start > 0 else b""
        yield from reversed(lines)
        end = start


def _parsed(line: bytes) -> dict[str, Any] | None:
    try:
        value = parse_json(line)
    except ValueError:  # a torn line
        return None
    return value if isinstance(value, dict) else None


def recent_prompts(store: Store, session_id: str, count: int) -> list[str]:
    """The session's last ``count`` prompts, oldest first (``latest_events``)."""
    prompts = [e.get("summary", {}).get("prompt") for e in latest_events(store, session_id, logged(USER_PROMPT), count)]
    return [p for p in prompts[::-1] if isinstance(p, str) and p]


# When the host's context stops holding what it was given. A session-start with one of these sources
# opens a new, empty context (Claude Code sends it between PreCompact and PostCompact); a post-compact
# closes the old one where no such session-start came after the pre-compact. A pre-compact alone
# proves nothing: a compaction the host refused ("Not enough messages to compact") sends one too.
FRESH_CONTEXT_SOURCES = ("compact", "clear")


class Digest(Record):
    """What a session's event log says that the hook needs at every prompt and at its end, kept small
    however long the session: which memories its context was given (``in_context``, since the host
    last compacted or cleared it, current memories and retired ones listed as such; ``ever``, the
    current ones over the whole session, first offer first, each with the log offset of its first
    offer), the memories offered as possibly related only (``offered``: one line each, not given in
    full; id -> offset of the first offer), the rules it was given (key -> offset of the first time)
    and the failures its steps met (signature -> offset of the last). It covers the log's first
    ``offset`` bytes, ``tail`` the last of them (a log rewritten meanwhile, by a purge, is read again)."""

    def __init__(self) -> None:
        self.offset = 0
        self.tail = ""
        self.compacting = False  # a pre-compact came, and no fresh session-start since
        self.in_context: dict[str, None] = {}
        self.ever: dict[str, int] = {}
        self.offered: dict[str, int] = {}
        self.rules_given: dict[str, int] = {}
        self.failures: dict[str, int] = {}


def digest(store: Store, session_id: str, keep: Callable[[Callable[[], object]], None] | None = None) -> Digest:
    """The session's digest: the one kept in ``active/sessions/<id>.json``, brought up to date with
    the lines appended to the log since (each call reads only those, line by line; a torn last line
    is left for later), and kept again. A digest missing, unreadable or of a rewritten log is made
    anew from the whole log, once. ``keep``, when given, is handed the write that keeps it, to run
    when it suits (the hook's helper: after the host has its answer); a digest kept late, or not at
    all, only makes the next call read more of the log."""
    path = store.digest_path(session_id)
    kept = _load_digest(path)
    start = -1 if kept is None else kept.offset
    try:
        with open(store.session_events_path(session_id), "rb") as handle:
            found = _caught_up(handle, kept if kept is not None and _covers(handle, kept) else Digest())
    except FileNotFoundError:
        return Digest()
    if found.offset != start:
        data = json.dumps(vars(found), separators=(",", ":")).encode()

        def write() -> None:
            private_folders(path.parent)
            store.write_file(path, data, durable=False)

        if keep is None:
            write()
        else:
            keep(write)
    return found


FOLDED = (b'"loaded_memory_ids"', b"compact", b'"failure": "', b'"rules_given": ["')  # the lines a digest reads


def _caught_up(handle: BinaryIO, found: Digest) -> Digest:
    """``found`` with the log's whole lines after its ``offset`` folded in."""
    start = found.offset
    handle.seek(start)
    for line in handle:
        if not line.endswith(b"\n"):
            break
        if any(mark in line for mark in FOLDED):
            _fold(found, line, found.offset)
        found.offset += len(line)
    if found.offset != start:
        handle.seek(max(0, found.offset - TAIL_BYTES))
        found.tail = handle.read(found.offset - max(0, found.offset - TAIL_BYTES)).hex()
    return found


TAIL_BYTES = 32


def _covers(handle: BinaryIO, found: Digest) -> bool:
    """Whether the log still holds, where the digest stopped, the bytes it stopped after."""
    start = max(0, found.offset - TAIL_BYTES)
    handle.seek(start)
    return handle.read(found.offset - start).hex() == found.tail


def _load_digest(path: Path) -> Digest | None:
    try:
        data = parse_json(path.read_bytes())
    except (OSError, ValueError):
        return None
    found = Digest()
    if not isinstance(data, dict) or set(data) != set(vars(found)):
        return None
    for name, value in data.items():
        if type(value) is not type(getattr(found, name)):
            return None
        setattr(found, name, value)
    offsets = [found.offset, *found.ever.values(), *found.offered.values(), *found.rules_given.values()]
    offsets += found.failures.values()
    return found if all(type(n) is int for n in offsets) else None  # else damage: made anew


def _fold(found: Digest, line: bytes, offset: int) -> None:
    """One event of the log into the digest."""
    event = _parsed(line)
    if event is None:
        return
    name = event.get("event")
    summary = event.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    fresh = name == logged(SESSION_START) and summary.get("source") in FRESH_CONTEXT_SOURCES
    if fresh or (name == logged(POST_COMPACT) and found.compacting):
        found.in_context.clear()
    found.compacting = name == logged(PRE_COMPACT) or (found.compacting and not fresh and name != logged(POST_COMPACT))
    if name in (logged(USER_PROMPT), logged(SESSION_START)):
        ids = summary.get("loaded_memory_ids")
        given = [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
        found.in_context.update(dict.fromkeys(given))
        for node_id in given:
            found.ever.setdefault(node_id, offset)
        offered = summary.get("offered_related_ids")
        for node_id in offered if isinstance(offered, list) else ():
            if isinstance(node_id, str):
                found.offered.setdefault(node_id, offset)
        listed = summary.get("listed_retired_ids")
        if isinstance(listed, list):
            found.in_context.update(dict.fromkeys(i for i in listed if isinstance(i, str)))
    rules = summary.get("rules_given")
    for key in rules if isinstance(rules, list) else ():
        if isinstance(key, str):
            found.rules_given.setdefault(key, offset)
    step = summary.get("step")
    failure = step.get("failure") if isinstance(step, dict) else None
    if isinstance(failure, str):
        found.failures[failure] = offset


def events_from(
    store: Store, session_id: str, offset: int, kinds: tuple[str, ...]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(offset, event) of the session's events of ``kinds`` from ``offset`` on, read line by line (a
    long log is never held whole); a torn last line is not read."""
    starts = tuple(f'{{"event": "{kind}"'.encode() for kind in kinds)
    path = store.session_events_path(session_id)
    if not path.exists():
        return
    with open(path, "rb") as handle:
        handle.seek(offset)
        for line in handle:
            event = _parsed(line) if line.endswith(b"\n") and line.startswith(starts) else None
            if event is not None:
                yield offset, event
            offset += len(line)


def last_events(store: Store, session_id: str, count: int) -> list[dict[str, Any]]:
    """The session's last ``count`` events, oldest first, read from the end of its log."""
    found: list[dict[str, Any]] = []
    try:
        with open(store.session_events_path(session_id), "rb") as handle:
            for line in lines_backwards(handle):
                event = _parsed(line) if line else None
                if event is not None:
                    found.append(event)
                if len(found) == count:
                    break
    except FileNotFoundError:
        pass
    return found[::-1]
