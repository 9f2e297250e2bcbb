"""Usage: which delivered memories a session actually used, and a small, bounded say in ranking.

At ``session-end`` the hook looks at what the session did after each memory was delivered (the
tool calls' inputs, the assistant's last messages, from their raw evidence; never what a tool
printed, which anyone's file or page can fill with a memory's words) for the
memory's **distinctive terms**: its code spans (`` `pnpm install` ``) and its rarest words in the
store (a port, a path, a tool's name). A memory whose terms show up was **used**; one delivered
and never echoed was **ignored**. The verdicts are session evidence: a ``usage`` event in the
session's log and a line in ``audit/usage.jsonl``; nodes are never rewritten for them.

``active/usage.json`` is a projection of that log (memory id -> delivered, used), rebuilt at each
session end, and ``prior`` turns it into a multiplier between 0.9 and 1.1 that the pack applies to
the relevance score of memories that relevance and the budget already let into the pack
(``cclg.pack.usage_order``): a memory that keeps helping rises a little, one delivered twenty
times and never used sinks a little, and neither ever enters or leaves a pack on usage alone, not
even at the budget's edge. Nothing changes with time alone.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from pathlib import Path

from cclg.fields import parse_json
from cclg.files import read_jsonl
from cclg.hook_events import POST_TOOL, POST_TOOL_FAILURE, STOP, logged
from cclg.ids import now_iso
from cclg.sessions import Digest, digest, event_payload, events_from
from cclg.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cclg.index import Index

LOG = "audit/usage.jsonl"
SUMMARY = "active/usage.json"
TERMS = 3  # distinctive words of a memory, besides its code spans
EVIDENCE_CHARS = 2_000_000  # of a session's later tool calls and answers read for the terms
PRIOR_RANGE = 0.1  # the prior moves a score by at most this share


EVIDENCE_EVENTS = (
    logged(POST_TOOL),
    logged(POST_TOOL_FAILURE),
    logged(STOP),
)  # the events that show what the agent did


def _evidence(store: Store, event: dict[str, Any]) -> str:
    """What the agent did in this event, as text: a tool call's input (the command, the edit), a stop's
    message. Never what a tool printed: a file, a page or a test's output that echoes a memory's words
    is not the agent using it."""
    if event.get("event") not in EVIDENCE_EVENTS:
        return ""
    payload = event_payload(store, event)
    parts = [payload.get(k) for k in ("tool_input", "last_assistant_message")]
    return " ".join(p if isinstance(p, str) else json.dumps(p, ensure_ascii=False) for p in parts if p)


def distinctive_terms(content: str, frequencies: dict[str, int]) -> list[str]:
    """A memory's code spans and its ``TERMS`` rarest words of at least four characters (or with a
    digit), lower-cased: what a use of the memory would echo."""
    from cclg.text import tokens

    spans = [s.strip().lower() for s in re.findall(r"`([^`\n]{3,80})`", content)]
    words = {t for t in tokens(content) if len(t) >= 4 or any(c.isdigit() for c in t)}
    rare = sorted(words, key=lambda t: (frequencies.get(t, 0), t))[:TERMS]
    return [*dict.fromkeys([*spans, *rare])]


def observe_session(store: Store, session_id: str, found: Digest | None = None) -> dict[str, list[str]]:
    """The session's verdicts: each memory delivered to it, used or ignored (see the module). What was
    delivered, and where, comes from the session's digest (``cclg.sessions.digest``); the log is read
    from the first delivery on, line by line, until ``EVIDENCE_CHARS`` of evidence."""
    delivered = (found or digest(store, session_id)).ever
    if not delivered:
        return {"used": [], "ignored": []}
    texts, size = [], 0
    for offset, event in events_from(store, session_id, min(delivered.values()), EVIDENCE_EVENTS):
        text = _evidence(store, event).lower()
        texts.append((offset, text))
        size += len(text)
        if size > EVIDENCE_CHARS:
            break
    terms = _terms(store, list(delivered))
    delivered = {node_id: at for node_id, at in delivered.items() if node_id in terms}  # gone: no verdict
    used = sorted(
        node_id
        for node_id, at in delivered.items()
        if any(term in text for offset, text in texts if offset > at for term in terms.get(node_id, ()))
    )
    return {"used": used, "ignored": sorted(set(delivered) - set(used))}


def _terms(store: Store, node_ids: list[str]) -> dict[str, list[str]]:
    from cclg.index import indexed_node, read_fresh
    from cclg.search import document_frequencies
    from cclg.text import tokens

    def read(index: Index) -> tuple[dict[str, str], dict[str, int]]:
        contents = {}
        for node_id in node_ids:
            row = index.db.execute("SELECT record FROM nodes WHERE id = ?", (node_id,)).fetchone()
            if row is not None:
                contents[node_id] = indexed_node(node_id, row[0]).content
        _, frequencies = document_frequencies(index, [t for c in contents.values() for t in tokens(c)])
        return contents, frequencies

    contents, frequencies = read_fresh(store, read)
    return {node_id: distinctive_terms(content, frequencies) for node_id, content in contents.items()}


def record_session(store: Store, session_id: str, found: Digest | None = None) -> dict[str, list[str]]:
    """``observe_session``, kept: a line in the usage log and the projection rebuilt."""
    verdicts = observe_session(store, session_id, found)
    if verdicts["used"] or verdicts["ignored"]:
        store.append(store.root / LOG, [{"session_id": session_id, **verdicts, "created_at": now_iso()}])
        rebuild(store)
    return verdicts


def counts(store: Store) -> dict[str, list[int]]:
    """Memory id -> [sessions delivered to, sessions that used it], from the usage log."""
    found: dict[str, list[int]] = {}
    for record in read_jsonl(store.root / LOG).records:
        for node_id in record.get("used", ()):
            entry = found.setdefault(node_id, [0, 0])
            entry[0] += 1
            entry[1] += 1
        for node_id in record.get("ignored", ()):
            found.setdefault(node_id, [0, 0])[0] += 1
    return found


def rebuild(store: Store) -> None:
    """Write the projection ``active/usage.json`` from the log."""
    data = json.dumps(counts(store), sort_keys=True, separators=(",", ":")).encode()
    store.write_file(Path(store.root / SUMMARY), data)


def heal(store: Store) -> str | None:
    """``cclg doctor``: the projection compared with its log, and rebuilt when it is not what the log
    says (a byte that breaks it, or one that only changes a count); returns what was done, else None."""
    try:
        with open(os.path.join(store.root, SUMMARY), "rb") as handle:
            data = parse_json(handle.read())
    except FileNotFoundError:
        return None
    except ValueError:
        data = None
    if data == counts(store):
        return None
    try:
        rebuild(store)
    except OSError as exc:
        return f"{SUMMARY}: the usage counts are damaged and could not be rebuilt ({exc})"
    return f"{SUMMARY}: rebuilt the damaged usage counts from {LOG}"


def prior(delivered: int, used: int) -> float:
    """A multiplier in [0.9, 1.1]: above 1 for a memory that keeps being used, below for one
    delivered often and never used; 1 for one never delivered."""
    ignored = delivered - used
    return 1.0 + PRIOR_RANGE * math.tanh((used - 0.25 * ignored) / 4)


def priors(store: Store) -> dict[str, float]:
    """Each delivered memory's prior, from the projection (empty when there is none). A projection that
    cannot be read back (not UTF-8, not JSON, not counts) is damage: it is rebuilt from the log."""
    try:
        with open(os.path.join(store.root, SUMMARY), "rb") as handle:
            data = parse_json(handle.read())
        if not isinstance(data, dict) or not all(isinstance(v, list) and len(v) == 2 for v in data.values()):
            raise ValueError("not counts by memory")
    except FileNotFoundError:
        return {}
    except ValueError:
        data = counts(store)
        with contextlib.suppress(OSError):  # a read-only store: counted for this read only
            rebuild(store)
    return {k: prior(*v) for k, v in data.items()}


def table(store: Store, *, dead_weight: bool = False, min_delivered: int = 10) -> dict[str, Any]:
    """``cclg stats``: ``memories``, each delivered memory with its counts, the most delivered first
    (with ``dead_weight``, only those delivered at least ``min_delivered`` times and never used); and
    ``dangling``, how many memories the log names that the store no longer holds (moved to
    ``recovered/``, deleted by a sync): they are skipped, never an error."""
    from cclg.errors import NotFoundError

    rows, dangling = [], 0
    for node_id, (delivered, used) in sorted(counts(store).items(), key=lambda kv: (-kv[1][0], kv[0])):
        try:
            node = store.read_node(node_id)
        except NotFoundError:
            dangling += 1
            continue
        if dead_weight and (used or delivered < min_delivered):
            continue
        rows.append({"id": node_id, "delivered": delivered, "used": used, "ignored": delivered - used,
                     "status": node.status, "content": node.content})  # fmt: skip
    return {"memories": rows, "dangling": dangling}
