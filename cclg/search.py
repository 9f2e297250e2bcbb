"""Search over the effective view (first version: term matching).

Only current truth is searched unless a status is asked for by name: forgetting
the option narrows the result, never widens it. Ranked retrieval (BM25, graph
expansion, temporal filters, an index) replaces the scoring here in a later
version; the function signatures stay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cclg.ledger import effective_view
from cclg.records import MemoryNode, normalize_text
from cclg.store import Store

_TERM_RE = re.compile(r"\w[\w./-]*", re.UNICODE)


def terms(text: str) -> list[str]:
    """Lower-cased words of ``text`` (identifiers, paths and versions stay whole)."""
    return [t.strip("./-") for t in _TERM_RE.findall(normalize_text(text).lower()) if t.strip("./-")]


@dataclass
class Hit:
    node: MemoryNode
    score: float
    matched: list[str]

    def to_dict(self) -> dict[str, object]:
        return {"score": round(self.score, 4), "matched": self.matched, "node": self.node.to_dict()}


def match(query: str, node: MemoryNode) -> Hit | None:
    """A hit when some query term starts a word of the node (content, key, tags, sparse keys)."""
    wanted = sorted(set(terms(query)))
    if not wanted:
        return None
    words = set(terms(" ".join([node.content, node.key or "", *node.tags, *node.retrieval.sparse_keys])))
    matched = [t for t in wanted if any(w.startswith(t) for w in words)]
    if not matched:
        return None
    return Hit(node=node, score=len(matched) / len(wanted), matched=matched)


def rank(query: str, nodes: list[MemoryNode], limit: int) -> list[Hit]:
    hits = [hit for node in nodes if (hit := match(query, node)) is not None]
    hits.sort(key=lambda h: (-h.score, h.node.updated_at, h.node.id), reverse=False)
    return hits[:limit]


def search(
    store: Store, query: str, *, limit: int = 10, session_id: str | None = None, status: str | None = None
) -> list[Hit]:
    """Memories matching ``query``: the effective view, or every node of ``status`` (``all`` for any)."""
    if status is None:
        nodes = effective_view(store.load_nodes().values(), store.load_patches(), session_id=session_id)
    else:
        nodes = [n for n in store.load_nodes().values() if status == "all" or n.status == status]
    return rank(query, nodes, limit)
