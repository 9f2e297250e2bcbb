"""Turn reflection: what happened in the previous turn, and how the agent read it (CogLog).

An entry has two layers, with CogLog's field names so that it reads as CogLog's
``current.json`` does:

- the **fact layer** (``layers``: ``user``, ``thinking``, ``assistant``), recorded by the
  hook at ``stop``: the user's prompt (the raw evidence of the session's last
  ``user-prompt``), the thinking where the host exposes it (Claude Code's transcript;
  Codex's is not readable) and the assistant's last output (the payload's
  ``last_assistant_message``, else the transcript), redacted by the guard like every
  hook write;
- the **interpretation layer** (``current_focus``, ``theory_of_mind``,
  ``self_narrative``, ``annotation``), each a string, empty allowed (choosing not to
  write is itself meaningful), written by the agent (MCP ``coglog_write``, ``cclg turn
  write``) during its turn; the ``stop`` that ends the turn seals it into the entry.
  A write that carries the fact layer too is a whole entry at once (CogLog's own
  write), for clients without hooks.

Each entry carries ``_schema``, the contract it was written under, so the file alone
says how to read it. The window is one turn: the session's current entry
(``active/turns/<session>.json``) is replaced at each ``stop``; every entry is also
kept verbatim in ``raw/`` and named by the session log's ``stop`` event, so nothing
is lost. At the next ``user-prompt`` a compact form of the entry comes with the
pack when the agent wrote an interpretation, or when the context was emptied since
(a compaction or a clear) and the conversation no longer holds the turn.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from cclg.core import fencing, secrets
from cclg.core.fields import parse_json
from cclg.core.files import open_regular, private_folders
from cclg.core.hook_events import USER_PROMPT, logged
from cclg.core.ids import is_valid_session_id, now_iso, sha256_hex
from cclg.core.store import Store
from cclg.errors import NotFoundError, UsageError
from cclg.ledger.sessions import event_payload, latest_event

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

FACTS = ("user", "thinking", "assistant")
INTERPRETATION = ("current_focus", "theory_of_mind", "self_narrative", "annotation")
FACT_CHARS = 200_000  # of each fact kept in an entry (the raw transcript keeps everything)
MAX_FIELD_CHARS = 20_000  # of each interpretation field a writer sends (CLI and MCP alike)
MAX_WRITE_BYTES = len(INTERPRETATION) * MAX_FIELD_CHARS * 6 + 4_096  # a write's JSON, every character escaped
COMPACT_CHARS = 1_200  # the form that comes with the next prompt
SCHEMA: dict[str, Any] = {
    "version": "0.9.1",
    "writer": "cclg (cclg.turn.v0.1)",
    "fact_layer": {
        "user": "string — the user's utterance, verbatim (secrets redacted)",
        "thinking": "string — the assistant's thinking, verbatim; empty when the host does not expose it",
        "assistant": "string — the assistant's output, verbatim (secrets redacted)",
    },
    "interpretation_layer": {
        "current_focus": "string required, empty OK — present: what am I working on?",
        "theory_of_mind": "string required, empty OK — other: what is the user's state?",
        "self_narrative": "string required, empty OK — self: who am I in this moment?",
        "annotation": "string required, empty OK — future: what should I do next?",
    },
    "constraints": {
        "window_size": "1 turn (overwritten each turn; every entry is kept in raw/ and the session log)",
        "interpretation_empty": "choosing not to write is itself a metacognitive act",
        "turn_id": "the turn's number in its session, from 1",
    },
}


def _folder(store: Store) -> str:
    return os.fspath(store.turns_dir)


def _path(store: Store, session_id: str, pending: bool = False) -> str:
    if not is_valid_session_id(session_id):
        raise UsageError(f"not a session id: {session_id!r}")
    return os.path.join(_folder(store), f"{session_id}{'.pending' if pending else ''}.json")


def _load(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as handle:
            value = parse_json(handle.read())
    except (FileNotFoundError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _save(store: Store, path: str, value: dict[str, Any], *, durable: bool = True) -> None:
    private_folders(os.path.dirname(path))
    data = (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    store.write_file(Path(path), data, durable=durable)


# ---------------------------------------------------------------- whose turn: the writer's own session


def _real(folder: object) -> str | None:
    return os.path.realpath(folder) if isinstance(folder, str) and os.path.isabs(folder) else None


def _marker(store: Store, folder: str) -> str:
    """``active/turns/folders/<digest>.json``: the session with the latest prompt from ``folder``."""
    digest = sha256_hex(folder.encode("utf-8", "surrogateescape"))[:32]
    return os.path.join(_folder(store), "folders", f"{digest}.json")


def note_prompt(store: Store, session_id: str, cwd: object) -> None:
    """At ``user-prompt``: ``session_id`` has the latest prompt from its working folder, the default
    session of a write made there (``own_session``)."""
    folder = _real(cwd)
    if folder is not None:
        marker = {"session_id": session_id, "cwd": folder, "at": now_iso()}
        _save(store, _marker(store, folder), marker, durable=False)  # a pointer, made again at the next prompt


def _folders_up(folder: str) -> list[str]:
    """``folder`` and every folder above it, nearest first."""
    found = [folder]
    while os.path.dirname(found[-1]) != found[-1]:
        found.append(os.path.dirname(found[-1]))
    return found


def own_session(store: Store, session_id: str | None, folder: str | None = None) -> str:
    """The writer's own session, from its working ``folder`` (default: the current one): the session
    named, if its last prompt came from that folder or one above it (``UsageError`` otherwise), else
    the session with the latest prompt from the nearest of those folders (``NotFoundError`` when
    none has one). Never just any session: another window's turn is not the writer's."""
    here = os.path.realpath(folder or os.getcwd())
    if session_id is None:
        for above in _folders_up(here):
            marker = _load(_marker(store, above))
            if marker is not None and marker.get("cwd") == above and is_valid_session_id(marker.get("session_id")):
                return str(marker["session_id"])
        raise NotFoundError(f"no session has prompted from {here} yet; name one (--session, or session_id)")
    _path(store, session_id)  # a UsageError for what is no session id
    prompt = latest_event(store, session_id, logged(USER_PROMPT)) or {}
    summary = prompt.get("summary")
    cwd = _real(summary.get("cwd")) if isinstance(summary, dict) else None
    if cwd is None or cwd not in _folders_up(here):
        where = f"from {cwd}" if cwd else "with no prompt recorded"
        raise UsageError(f"session {session_id} is not this folder's ({here}): it is of another folder ({where})")
    return session_id


# ---------------------------------------------------------------- the fact layer, at stop


def seal(store: Store, session_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """At ``stop``: the entry of the turn that just ended (its facts, and the interpretation written
    during it), made the session's current entry and kept in ``raw/``. Returns what the session log
    records of it."""
    previous = _load(_path(store, session_id)) or {}
    pending = _load(_path(store, session_id, pending=True)) or {}
    layers = facts(payload, store, session_id)
    entry = _entry(int(previous.get("turn_id") or 0) + 1, layers, pending, session_id, payload.get("turn_id"))
    raw_path = _keep(store, session_id, entry)
    _save(store, _path(store, session_id), entry)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(store, session_id, pending=True))
    return {"turn_id": entry["turn_id"], "raw": raw_path, "interpreted": any(entry[k] for k in INTERPRETATION)}


def _entry(
    turn: int, layers: dict[str, str], interpretation: dict[str, Any], session_id: str, host_turn: object
) -> dict[str, Any]:
    entry: dict[str, Any] = {"_schema": SCHEMA, "turn_id": turn, "timestamp": now_iso(), "layers": layers}
    entry.update({k: str(interpretation.get(k) or "") for k in INTERPRETATION})
    entry["session_id"] = session_id  # cclg's additions, left out of the CogLog form
    if isinstance(host_turn, str):
        entry["host_turn_id"] = host_turn
    redacted, _ = secrets.redact_value(entry)
    return dict(redacted)


def _keep(store: Store, session_id: str, entry: dict[str, Any]) -> str:
    data = (json.dumps(entry, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    raw_path, _ = store.write_raw(data, f"{session_id}-turn-{entry['turn_id']}.json")
    return raw_path


def facts(payload: dict[str, Any], store: Store, session_id: str) -> dict[str, str]:
    """The turn's fact layer: the session's last prompt, and the transcript's (or the payload's) thinking
    and output after it."""
    user = _last_prompt(store, session_id)
    thinking, assistant = _from_transcript(payload.get("transcript_path"), user)
    last = payload.get("last_assistant_message")
    if isinstance(last, str) and last.strip():
        assistant = last
    return {"user": user[:FACT_CHARS], "thinking": thinking[:FACT_CHARS], "assistant": assistant[:FACT_CHARS]}


def _last_prompt(store: Store, session_id: str) -> str:
    """The session's last prompt, verbatim from its raw evidence (the log keeps a summary), however many
    tool calls came after it; "" before the first."""
    event = latest_event(store, session_id, logged(USER_PROMPT))
    if event is None:
        return ""
    prompt = event_payload(store, event).get("prompt")
    if isinstance(prompt, str):
        return prompt
    summary = event.get("summary") or {}
    return str(summary.get("prompt") or "")


def _from_transcript(path: object, prompt: str) -> tuple[str, str]:
    """(thinking, assistant text) after the last user prompt of a Claude Code transcript (JSON lines
    of ``{"type": "user"|"assistant", "message": {"content": ...}}``); ("", "") when there is none."""
    if not isinstance(path, str) or not path:
        return "", ""
    try:  # the host's payload names it: a regular file only, never a FIFO to wait on or a device
        fd, _ = open_regular(path)
    except OSError:
        return "", ""
    messages = []
    with open(fd, "rb") as handle:
        for line in handle:
            try:
                record = parse_json(line)
            except ValueError:  # not JSON, or nested too deep
                continue
            if isinstance(record, dict) and record.get("type") in ("user", "assistant"):
                messages.append(record)
    start = max((i for i, r in enumerate(messages) if _is_prompt(r)), default=-1)
    thinking, text = [], []
    for record in messages[start + 1 :]:
        content = (record.get("message") or {}).get("content")
        for block in content if isinstance(content, list) and record.get("type") == "assistant" else []:
            if isinstance(block, dict) and block.get("type") == "thinking":
                thinking.append(str(block.get("thinking") or ""))
            elif isinstance(block, dict) and block.get("type") == "text":
                text.append(str(block.get("text") or ""))
    return "\n\n".join(t for t in thinking if t), "\n\n".join(t for t in text if t)


def _is_prompt(record: dict[str, Any]) -> bool:
    """A user message that is a prompt, not a tool result the host sends back as a user message."""
    if record.get("type") != "user":
        return False
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "text" for b in content)


# ---------------------------------------------------------------- read, write, clear


def read(store: Store, session_id: str | None = None, *, coglog: bool = False) -> dict[str, Any]:
    """The session's current entry (any session named; else the one with the latest prompt from the
    current folder, ``own_session``). ``coglog``: exactly
    CogLog's shape (``_schema``, ``turn_id``, ``timestamp``, ``layers`` and the four fields)."""
    session_id = session_id or own_session(store, None)
    entry = _load(_path(store, session_id))
    if entry is None:
        raise NotFoundError(f"no turn recorded for session {session_id}")
    if coglog:
        keys = ("_schema", "turn_id", "timestamp", "layers", *INTERPRETATION)
        return {k: entry[k] for k in keys if k in entry}
    pending = _load(_path(store, session_id, pending=True))
    return {**entry, "pending_interpretation": pending} if pending else entry


def write(store: Store, fields: dict[str, Any], session_id: str | None = None) -> dict[str, Any]:
    """The agent's reading of its turn: the four interpretation fields (strings, empty allowed), kept
    until the ``stop`` that ends the turn, in the writer's own session (``own_session``). The fact
    layer is the hook's, from the session's recorded evidence: a write that carries ``user``,
    ``thinking`` or ``assistant`` is refused, as are unknown fields and wrong types (``UsageError``)."""
    facts = sorted(set(fields) & set(FACTS))
    if facts:
        raise UsageError(
            f"{', '.join(facts)}: the fact layer is recorded by the hook from the session's evidence; "
            f"write only {', '.join(INTERPRETATION)}"
        )
    unknown = sorted(set(fields) - set(INTERPRETATION))
    if unknown:
        raise UsageError(f"unknown field(s) {', '.join(unknown)}; use {', '.join(INTERPRETATION)}")
    wrong = sorted(k for k, v in fields.items() if not isinstance(v, str))
    if wrong:
        raise UsageError(f"field(s) {', '.join(wrong)} must be strings (empty allowed)")
    long = sorted(k for k, v in fields.items() if len(v) > MAX_FIELD_CHARS)
    if long:
        raise UsageError(f"field(s) {', '.join(long)} longer than {MAX_FIELD_CHARS:,} characters")
    session_id = own_session(store, session_id)
    pending = _load(_path(store, session_id, pending=True)) or {}
    pending.update(secrets.redact_value(fields)[0])
    _save(store, _path(store, session_id, pending=True), pending)
    return {"session_id": session_id, "pending_interpretation": pending}


def clear(store: Store, session_id: str | None = None) -> bool:
    """Drop the session's current entry and pending interpretation (the history stays in ``raw/``
    and the session log); whether there was anything to drop. Only the writer's own (``own_session``)."""
    session_id = own_session(store, session_id)
    dropped = False
    for pending in (False, True):
        try:
            os.unlink(_path(store, session_id, pending=pending))
            dropped = True
        except FileNotFoundError:
            pass
    return dropped


# ---------------------------------------------------------------- the next prompt


def deliver_previous_turn(store: Store, session_id: str) -> str:
    """The previous turn, compact, for the next prompt's context, once: the entry is marked delivered.
    "" when there is nothing worth the tokens: no entry, an entry given already, or one the
    conversation still holds whole (no interpretation written, and the context not emptied since)."""
    path = _path(store, session_id)
    entry = _load(path)
    if entry is None or entry.get("delivered"):
        return ""
    interpreted = [(k, str(entry.get(k) or "")) for k in INTERPRETATION if entry.get(k)]
    if not interpreted and not entry.get("context_emptied"):
        return ""
    layers = entry.get("layers") or {}
    number = entry.get("turn_id")  # the entry's file is outside text too: only a number is shown as one
    lines = [f"## The previous turn (cclg turn {number if isinstance(number, int) else '?'}, CogLog's fields)"]
    lines += [f"- {k}: {fencing.quote_outside(v, limit=300)}" for k, v in interpreted]
    for fact in ("user", "assistant"):
        text = " ".join(str(layers.get(fact) or "").split())
        if text:
            lines.append(f"- {fact}: {fencing.quote_outside(text, limit=240)}")
    _save(store, path, {**entry, "delivered": True})
    return "\n".join(lines)[:COMPACT_CHARS]


def mark_context_emptied(store: Store, session_id: str) -> None:
    """The host emptied the context (a compaction, a clear): the current entry may be given again."""
    path = _path(store, session_id)
    entry = _load(path)
    if entry is not None and (entry.get("delivered") or not entry.get("context_emptied")):
        _save(store, path, {**entry, "delivered": False, "context_emptied": True})
