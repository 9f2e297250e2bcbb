"""Search over the effective view: BM25, grep, graph expansion, temporal filters, fusion.

Every search returns current truth only (the effective view for the given
session, project and moment) unless a status is named explicitly (``status="all"``
or a status such as ``"superseded"``): forgetting the option narrows the result,
never widens it.

Scope filters keep a memory when it applies where the query is asked: with
``project="x"`` a memory scoped to project ``x`` (or to any value a repository answers to, given
its ``Project.keys``) or to no project at all. Of
memories sharing a key, only the most trusted wins (an untrusted memory never
shadows a trusted one), of those the one with the narrowest applicable scope
(session > project > workspace > global), then the newest (``view.rank``, kept in
the index as a node's ``level``); that is decided against every current memory
with the key, not just the ones that matched.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from datetime import datetime

from cclg import format as fmt
from cclg.core import media
from cclg.core.ids import parse_time
from cclg.core.records import MemoryNode, Record
from cclg.core.store import Store, patch_order
from cclg.core.text import query_terms, tokens
from cclg.errors import UsageError
from cclg.ledger.index import Index, read_fresh, search_fields
from cclg.ledger.view import effective_view
from cclg.retrieval import semantic
from cclg.retrieval.query import Hit, View, Where

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

MODES = ("auto", "grep", "bm25", "graph", "temporal")
# Field weights for content, key, tags and retrieval keys.
BM25_WEIGHTS = (1.0, 2.0, 1.5, 0.5)
GRAPH_RELATIONS = ("depends_on", "refines", "expands", "narrows", "derived_from")
RRF_K = 60
# The semantic list's part in auto mode's fusion: each memory at least SEMANTIC_FLOOR near the query in
# meaning (cosine) adds SEMANTIC_WEIGHT / (SEMANTIC_K + rank); tuned on the retrieval evaluation's tune
# half (benchmarks/eval_search.py, benchmarks/RESULTS.md).
SEMANTIC_FLOOR = 0.0
SEMANTIC_WEIGHT = 0.5
SEMANTIC_K = 10


# ---------------------------------------------------------------- BM25


def fts_query(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: any of the terms, each quoted."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def idf(total: int, docs: int) -> float:
    return math.log(1 + (total - docs + 0.5) / (docs + 0.5))


def node_terms(node: MemoryNode) -> set[str]:
    return set(" ".join(search_fields(node)).split())


def bm25(
    index: Index,
    text: str,
    where: Where,
    *,
    limit: int = 10,
    status: str | None = None,
    pool: int | None = None,
    terms: list[str] | None = None,
    postings: int | None = None,
) -> list[Hit]:
    """Ranked lexical search with field weights (content, key, tags, retrieval keys).

    ``status``: None for the effective view, ``"all"`` for every node, ``"retired"``
    for nodes out of the view for good (retired by a patch or in a retired status),
    or one node status. ``terms``, when given, are the terms to search with instead
    of all of ``text``'s. ``postings``: the MATCH ranks with the rarest terms that hold at most this many
    memories together (``_selective``), for a caller that weighs every term itself afterwards.
    """
    terms = terms or query_terms(text) or [t for t in tokens(text)]
    if not terms or (status == "retired" and not index.has_retired()):
        return []  # (no memory out of the view: the scan of every match for a retired one would find none)
    view = View(index, where)
    # Rank every match on the small columns only, keep the best that are in the view, and only then
    # read their records and indexed terms: in a big store that reading is what costs.
    rows = index.matches(
        fts_query(_selective(index, terms, postings)),
        BM25_WEIGHTS,
        pool or max(limit * 4, 40),
        status=status,
        session_id=where.session_id,
        projects=where.projects,
        workspace=where.workspace,
    )
    if status is None:
        view.preload(row["key"] for row in rows)
    kept = [row for row in rows if status is not None or view.contains(row)]
    # Scores equal up to float noise tie on the id. Rounded to significant digits, not
    # decimal places: FTS5 floors the idf of a term held by most memories at 1e-6, so
    # a whole ranking can lie below 1e-5 (round(x, 6) would make it id order).
    kept.sort(key=lambda row: (-float(f"{-row['rank']:.9g}"), row["id"]))
    kept = kept[:limit]
    details = index.match_fields([row["rowid"] for row in kept])
    wanted = set(terms)
    hits = []
    for row in kept:
        record, *fields = details[row["rowid"]]
        present = set(" ".join(fields).split())
        hits.append(Hit(node_id=row["id"], record=record, score=-row["rank"], matched=sorted(wanted & present)))
    return hits


# A term found in more than this share of a large store barely ranks anything but
# makes FTS score every document holding it: it is left out of the MATCH (it
# still counts for the relevance decision, which reads each hit's terms).
COMMON_TERM_SHARE = 0.1
COMMON_TERM_MIN_NODES = 2000


def rarest_terms(index: Index, terms: list[str], count: int) -> list[str]:
    """The ``count`` terms (of ``terms``) held by the fewest memories, leaving out those no memory holds:
    a search with them finds what shares the distinctive words, at a cost that does not grow with the
    store the way a common term's thousands of matches do."""
    terms = list(dict.fromkeys(terms))
    _, docs = index.document_frequencies(terms)
    return sorted((t for t in terms if docs[t] > 0), key=lambda t: (docs[t], t))[:count]


def _selective(index: Index, terms: list[str], postings: int | None = None) -> list[str]:
    """The terms a MATCH ranks with: in a large store, not those held by more than ``COMMON_TERM_SHARE``
    of it; with ``postings``, the rarest of them that hold at most that many memories together (the
    rarest one always). FTS5 scores every memory a MATCH's terms hold, so a ranking costs what they hold."""
    total, docs = index.document_frequencies(terms)
    if total < COMMON_TERM_MIN_NODES:
        return terms
    rare = [t for t in terms if docs[t] <= total * COMMON_TERM_SHARE] or terms
    if postings is None:
        return rare
    kept: set[str] = set()
    held = 0
    for term in sorted(rare, key=lambda t: (docs[t], t)):
        if kept and held + docs[term] > postings:
            break
        kept.add(term)
        held += docs[term]
    return [t for t in rare if t in kept]


# ---------------------------------------------------------------- grep


class GrepMatch(Record):
    def __init__(self, where: str, line: int, text: str) -> None:
        self.where = where  # a memory id or a raw file path
        self.line = line
        self.text = text

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "line": self.line, "text": self.text}


# ---------------------------------------------------------------- grep's patterns

USER_PATTERN_SECONDS = 5.0


class UserPattern:
    """A search pattern from a user or an agent (``cclg grep``, MCP ``cclg_grep``): plain text, or
    a regular expression run by the ``regex`` package under one time limit shared by every search
    made with it, so that ``(a|aa)+$`` ends in a ``UsageError`` instead of freezing the caller."""

    def __init__(
        self, pattern: str, *, regex: bool = False, ignore_case: bool = False, seconds: float | None = None
    ) -> None:
        import importlib  # the regex package: the hook never needs it

        engine = importlib.import_module("regex")
        self.pattern = pattern
        self.seconds = USER_PATTERN_SECONDS if seconds is None else seconds  # read now: a test may lower it
        self._deadline = time.monotonic() + self.seconds
        try:  # plain text needs no time limit: it is found in linear time
            self._regex = engine.compile(pattern if regex else engine.escape(pattern), engine.I if ignore_case else 0)
        except (engine.error, ValueError, OverflowError, RecursionError, MemoryError) as exc:
            raise UsageError(f"bad regular expression {pattern!r}: {exc}") from None
        self._plain = not regex

    def search(self, text: str) -> bool:
        """Whether the pattern occurs in ``text``; ``UsageError`` once the time limit is spent."""
        left = self._deadline - time.monotonic()
        try:
            if self._plain or left > 0:
                return self._regex.search(text, timeout=None if self._plain else left) is not None
        except TimeoutError:
            pass
        raise UsageError(
            f"the regular expression {self.pattern!r} took more than {self.seconds:g} s; simplify it "
            "(nested repeats such as (a+)+ can take forever) or search for plain text"
        )


def grep(
    store: Store,
    pattern: str,
    *,
    regex: bool = False,
    ignore_case: bool = False,
    raw: bool = False,
    where: Where | None = None,
    limit: int = 50,
) -> list[GrepMatch]:
    """Exact (or regex) matches, line by line, in current memories and, with ``raw``, in raw evidence.
    Every memory read is checked against its file (``cclg.ledger.index.read_fresh``): grep reads them all."""
    compiled = UserPattern(pattern, regex=regex, ignore_case=ignore_case)  # time-limited: no ReDoS

    def read(index: Index) -> tuple[list[GrepMatch], list[str]]:
        found, read_ids = [], []
        for node in View(index, where or Where()).all_nodes():
            read_ids.append(node.id)
            for number, line in enumerate(node.content.split("\n"), start=1):
                if compiled.search(line):
                    found.append(GrepMatch(node.id, number, line))
        return found, read_ids

    matches, _ = read_fresh(store, read, lambda result: result[1])
    if raw:
        for path in store.raw_files():
            record = store.raw_record(path.name) or {}
            text = media.readable_text(path.read_bytes(), path.name, record.get("mime"))
            if text is None:  # binary evidence is never printed as text
                continue
            for number, line in enumerate(text.split("\n"), start=1):
                if compiled.search(line):
                    matches.append(GrepMatch(store.relative(path), number, line))
    return matches[:limit]


# ---------------------------------------------------------------- graph expansion


def expand(index: Index, hits: list[Hit], where: Where, *, limit: int) -> list[Hit]:
    """Hits plus the current memories they depend on, refine or derive from (and edges to them)."""
    view = View(index, where)
    seen = {h.id for h in hits}
    result = list(hits)
    for hit in hits:
        neighbours = [n for kind in GRAPH_RELATIONS for n in hit.node.relations.get(kind, [])]
        neighbours += index.replaced_by_patches_of(hit.id)
        for node_id in neighbours:
            if node_id in seen:
                continue
            node = view.node(node_id)
            if node is not None:
                seen.add(node_id)
                result.append(Hit(node=node, score=hit.score * 0.5, via="graph"))
    return result[:limit]


# ---------------------------------------------------------------- temporal


def as_of_view(store: Store, moment: datetime, session_id: str | None = None) -> list[MemoryNode]:
    """The effective view at a past moment, replayed from the ledger.

    A node counts if it was created by then; its status then is the one the first
    later patch recorded in ``prior_states`` (or its status now if no later patch
    touched it); only patches made by then count.
    """
    patches = store.load_patches()
    past = [p for p in patches if parse_time(p.created_at) <= moment]
    later = [p for p in patches if parse_time(p.created_at) > moment]
    status_then: dict[str, str] = {}
    for patch in sorted(later, key=patch_order):
        for node_id, status in patch.prior_states.items():
            status_then.setdefault(node_id, status)
    nodes = []
    for node in store.load_nodes().values():
        if parse_time(node.created_at) > moment:
            continue
        if node.id in status_then:
            node.status = status_then[node.id]
        nodes.append(node)
    return effective_view(nodes, past, session_id=session_id, at=moment)


def rank_nodes(nodes: list[MemoryNode], text: str, *, limit: int) -> list[Hit]:
    """Rank a small set of nodes by idf-weighted term overlap (used where there is no index)."""
    terms = query_terms(text)
    bags = {n.id: node_terms(n) for n in nodes}
    total = len(nodes)
    weights = {t: idf(total, sum(1 for bag in bags.values() if t in bag)) for t in terms}
    hits = []
    for node in nodes:
        matched = sorted(t for t in terms if t in bags[node.id])
        if matched or not terms:
            hits.append(Hit(node=node, score=sum(weights[t] for t in matched), matched=matched, via="temporal"))
    hits.sort(key=lambda h: (-round(h.score, 6), h.id))
    return hits[:limit]


# ---------------------------------------------------------------- one entry point


class SearchResult(list[Hit]):
    """A search's hits, best first, and what the semantic signal did for it: ``semantic`` is
    ``answered``, ``cold`` (no answer in time: the ranking is the lexical one) or ``off`` (not asked:
    a mode other than auto, a named status or moment, or semantic recall off or unavailable)."""

    def __init__(self, hits: Iterable[Hit] = (), semantic: str = "off") -> None:
        super().__init__(hits)
        self.semantic = semantic


def fuse(lists: list[list[Hit]], *, limit: int, weights: list[tuple[float, int]] | None = None) -> list[Hit]:
    """Weighted reciprocal rank fusion: list ``i`` adds ``w / (k + rank)`` to a memory's score, with
    ``(w, k) = weights[i]`` (``(1, RRF_K)`` for each list by default)."""
    scores: dict[str, float] = {}
    best: dict[str, Hit] = {}
    for number, hits in enumerate(lists):
        weight, k = weights[number] if weights else (1.0, RRF_K)
        for rank, hit in enumerate(hits, start=1):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (k + rank)
            best.setdefault(hit.id, hit)
    fused = [Hit(node=best[i].node, score=s, matched=best[i].matched, via="auto") for i, s in scores.items()]
    fused.sort(key=lambda h: (-round(h.score, 9), h.id))
    return fused[:limit]


def ask_meaning(store: Store, text: str, where: Where, *, limit: int) -> tuple[list[tuple[str, float]] | None, str]:
    """The memories nearest ``text`` in meaning from the semantic helper (None when it does not answer in
    time; failing open like the pack's), and the word for what it did: ``semantic.consult``, as the
    pack asks it."""
    return semantic.consult(store, text, limit=limit, where=where)


def meaning_hits(index: Index, nearest: list[tuple[str, float]], where: Where) -> list[Hit]:
    """The semantic answer as hits, nearest first, keeping only memories still in ``where``'s view and
    at least ``SEMANTIC_FLOOR`` near (in a big store the nearest of a query about nothing there are noise)."""
    view = View(index, where)
    hits = []
    for node_id, cosine in nearest:
        node = view.node(node_id)
        if node is not None and cosine >= SEMANTIC_FLOOR:
            hits.append(Hit(node=node, score=cosine, via="semantic"))
    return hits


def hybrid(
    index: Index, text: str, where: Where, lexical: list[Hit], nearest: list[tuple[str, float]] | None, *, limit: int
) -> list[Hit]:
    """Auto mode: the lexical hits, what they relate to and the exact-text matches, fused with the
    memories nearest in meaning when the semantic signal answered (so a memory that shares no word with
    the query can be found); without an answer, the lexical fusion alone, as before."""
    pool = max(limit * 4, 40)
    exact = [h for h in lexical if text.strip().lower() in h.node.content.lower()]
    lists = [lexical, expand(index, lexical[:limit], where, limit=pool), exact]
    weights = [(1.0, RRF_K)] * len(lists)
    if nearest:
        lists.append(meaning_hits(index, nearest, where))
        weights.append((SEMANTIC_WEIGHT, SEMANTIC_K))
    return fuse(lists, limit=pool, weights=weights)


def search(
    store: Store,
    text: str,
    *,
    mode: str = "auto",
    limit: int = 10,
    where: Where | None = None,
    status: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    as_of: datetime | None = None,
) -> SearchResult:
    """Search memories. ``mode`` is one of auto, grep, bm25, graph, temporal; ``status`` (None for the
    effective view) is ``all``, ``retired`` or one node status (see ``bm25``). Auto mode on the effective
    view also asks for the memories nearest in meaning (``hybrid``); the result says what that signal did
    (``SearchResult.semantic``). What it returns is checked against the memories' files first
    (``cclg.ledger.index.read_fresh``)."""
    if mode not in MODES:
        raise UsageError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    if status is not None and status not in ("all", "retired", *fmt.NODE_STATUSES):
        raise UsageError(f"unknown status {status!r}; use all, retired or one of {', '.join(fmt.NODE_STATUSES)}")
    where = where or Where()
    if as_of is not None:
        if status is not None:
            raise UsageError("--as-of shows the effective view at that moment; it cannot be combined with --status")
        hits = rank_nodes(as_of_view(store, as_of, where.session_id), text, limit=limit)
        return SearchResult(_time_filter(hits, since, until))
    nearest, signal = None, "off"
    if mode == "auto" and status is None:
        nearest, signal = ask_meaning(store, text, where, limit=max(limit * 4, 40))

    def read(index: Index) -> list[Hit]:
        pool = max(limit * 4, 40)
        lexical = bm25(index, text, where, limit=pool, status=status)
        if mode == "bm25":
            hits = lexical
        elif mode == "graph":
            hits = expand(index, lexical[:limit], where, limit=pool)
        elif mode == "temporal":
            hits = sorted(lexical, key=lambda h: (h.node.updated_at, h.node.id), reverse=True)
        elif mode == "grep":
            ids = {m.where for m in grep(store, text, ignore_case=True, where=where, limit=10_000)}
            view = View(index, where)
            found = [view.node(i) for i in sorted(ids)]
            hits = [Hit(node=n, score=1.0, via="grep") for n in found if n is not None]
        else:
            hits = hybrid(index, text, where, lexical, nearest, limit=limit)
        return _time_filter(hits, since, until)[:limit]

    hits = read_fresh(store, read, lambda hits: [hit.node.id for hit in hits])  # each parsed while it can heal
    return SearchResult(hits, signal)


def _time_filter(hits: list[Hit], since: datetime | None, until: datetime | None) -> list[Hit]:
    """Keep memories recorded (``created_at``) within [since, until)."""

    def inside(node: MemoryNode) -> bool:
        created = parse_time(node.created_at)
        return (since is None or created >= since) and (until is None or created < until)

    return [h for h in hits if inside(h.node)]
