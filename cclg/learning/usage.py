"""Usage: which delivered memories a session actually used, and a small, bounded say in ranking.

At ``session-end`` the hook looks at what the session did after each memory was delivered (the
tool calls' inputs, the assistant's last messages, from their raw evidence; never what a tool
printed, which anyone's file or page can fill with a memory's words) for the
memory's **distinctive terms**: its code spans (`` `pnpm install` ``) and its rarest words in the
store (a port, a path, a tool's name). A memory whose terms show up was **used**; one delivered
and never echoed was **ignored**. A memory offered only as **possibly related** (one line, not its
content) was delivered when the agent opened it: its id in a later tool call (``cclg show ID``,
MCP ``memory_cite``), and then it counts as used; one never opened has no verdict (``opened``).
The verdicts are session evidence: a ``usage`` event in the session's log and a line in
``audit/usage.jsonl``; nodes are never rewritten for them.

``active/usage.json`` is a projection of that log (memory id -> delivered, used), rebuilt at each
session end, and ``cclg.retrieval.usage_prior`` turns it into a multiplier between 0.9 and 1.1 that the pack applies to
the relevance score of memories that relevance and the budget already let into the pack
(``cclg.retrieval.selection.usage_order``): a memory that keeps helping rises a little, one delivered twenty
times and never used sinks a little, and neither ever enters or leaves a pack on usage alone, not
even at the budget's edge. Nothing changes with time alone.
"""

from __future__ import annotations

import json
import re

from cclg.core.hook_events import POST_TOOL, POST_TOOL_FAILURE, STOP, logged
from cclg.core.ids import now_iso, short_id
from cclg.core.store import Store
from cclg.ledger.sessions import Digest, digest, event_payload, events_from
from cclg.retrieval.usage_prior import counts, rebuild

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from cclg.ledger.index import Index

TERMS = 3  # distinctive words of a memory, besides its code spans
EVIDENCE_CHARS = 2_000_000  # of a session's later tool calls and answers read for the terms


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
    from cclg.core.text import tokens

    spans = [s.strip().lower() for s in re.findall(r"`([^`\n]{3,80})`", content)]
    words = {t for t in tokens(content) if len(t) >= 4 or any(c.isdigit() for c in t)}
    rare = sorted(words, key=lambda t: (frequencies.get(t, 0), t))[:TERMS]
    return [*dict.fromkeys([*spans, *rare])]


def observe_session(store: Store, session_id: str, found: Digest | None = None) -> dict[str, list[str]]:
    """The session's verdicts: each memory delivered to it, used or ignored (see the module). What was
    delivered, and where, comes from the session's digest (``cclg.ledger.sessions.digest``); the log is read
    from the first delivery on, line by line, until ``EVIDENCE_CHARS`` of evidence."""
    found = found or digest(store, session_id)
    delivered, offered = found.ever, {k: at for k, at in found.offered.items() if k not in found.ever}
    if not delivered and not offered:
        return {"used": [], "ignored": []}
    texts, size = [], 0
    for offset, event in events_from(store, session_id, min([*delivered.values(), *offered.values()]), EVIDENCE_EVENTS):
        text = _evidence(store, event).lower()
        texts.append((offset, text))
        size += len(text)
        if size > EVIDENCE_CHARS:
            break
    were_opened = [node_id for node_id, at in offered.items() if opened(node_id, at, texts)]
    terms = _terms(store, [*delivered, *were_opened])
    delivered = {node_id: at for node_id, at in delivered.items() if node_id in terms}  # gone: no verdict
    used = sorted(
        node_id
        for node_id, at in delivered.items()
        if any(term in text for offset, text in texts if offset > at for term in terms.get(node_id, ()))
    )
    used = sorted({*used, *(node_id for node_id in were_opened if node_id in terms)})
    return {"used": used, "ignored": sorted(set(delivered) - set(used))}


def opened(node_id: str, offered_at: int, texts: list[tuple[int, str]]) -> bool:
    """Whether the agent opened a memory offered as possibly related: its id in what it did after the
    offer (``cclg show ID`` in a command, ``memory_cite``'s ``memory_id``), in full or in the short form the
    line showed (``mem~...``). The id, not the memory's
    words: a line of preview is not the memory, and its words may be the prompt's own."""
    short = short_id(node_id)  # the form the possibly related line shows
    return any(node_id in text or short in text for offset, text in texts if offset > offered_at)


def _terms(store: Store, node_ids: list[str]) -> dict[str, list[str]]:
    from cclg.core.text import tokens
    from cclg.ledger.index import read_fresh

    def read(index: Index) -> tuple[dict[str, str], dict[str, int]]:
        contents = {}
        for node_id in node_ids:
            node = index.node(node_id)
            if node is not None:
                contents[node_id] = node.content
        _, frequencies = index.document_frequencies([t for c in contents.values() for t in tokens(c)])
        return contents, frequencies

    contents, frequencies = read_fresh(store, read)
    return {node_id: distinctive_terms(content, frequencies) for node_id, content in contents.items()}


def record_session(store: Store, session_id: str, found: Digest | None = None) -> dict[str, list[str]]:
    """``observe_session``, kept: a line in the usage log and the projection rebuilt."""
    verdicts = observe_session(store, session_id, found)
    if verdicts["used"] or verdicts["ignored"]:
        store.append(store.usage_log_path, [{"session_id": session_id, **verdicts, "created_at": now_iso()}])
        rebuild(store)
    return verdicts


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
