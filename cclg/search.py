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
import sqlite3
import time
from collections.abc import Iterable
from datetime import UTC, datetime

from cclg import format as fmt
from cclg.errors import UsageError
from cclg.ids import parse_time
from cclg.index import Index, indexed_node, read_fresh, search_fields
from cclg.records import MemoryNode, Record
from cclg.repository import ProjectKeys, project_keys
from cclg.store import Store, patch_order
from cclg.text import query_terms, tokens
from cclg.view import effective_view

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

MODES = ("auto", "grep", "bm25", "graph", "temporal")
# Field weights for content, key, tags and retrieval keys.
BM25_WEIGHTS = (1.0, 2.0, 1.5, 0.5)
GRAPH_RELATIONS = ("depends_on", "refines", "expands", "narrows", "derived_from")
RRF_K = 60
MAX_CHAIN = 20  # replacement links followed from a retired memory to the current one


class Where(Record):
    """Which view a search looks at: session overlays, scope filters, the moment. ``project``: one
    scope value, or the values a project answers to (``cclg.repository.Project.keys``); a memory of
    none of them is left out, one of no project is kept."""

    def __init__(
        self,
        session_id: str | None = None,
        project: ProjectKeys = None,
        workspace: str | None = None,
        at: datetime | None = None,
    ) -> None:
        self.session_id = session_id
        self.projects = project_keys(project)
        self.workspace = workspace
        self.at = at

    @property
    def moment(self) -> float:
        return (self.at or datetime.now(UTC)).timestamp()


class Hit:
    """One search result. The node record is parsed only when asked for."""

    __slots__ = ("_node", "_record", "evidence", "id", "matched", "score", "via")

    def __init__(
        self,
        node: MemoryNode | None = None,
        score: float = 0.0,
        matched: list[str] | None = None,
        via: str = "bm25",
        *,
        node_id: str | None = None,
        record: str | None = None,
    ) -> None:
        if node is None and (node_id is None or record is None):
            raise ValueError("a hit needs a node, or a node id and its record")
        self._node = node
        self._record = record
        self.id: str = node.id if node is not None else str(node_id)
        self.score = score
        self.matched = matched or []
        self.via = via
        self.evidence: Any = None  # why the relevance decision kept it (cclg.relevance.Evidence)

    @property
    def node(self) -> MemoryNode:
        if self._node is None:
            self._node = indexed_node(self.id, self._record)
        return self._node

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": round(self.score, 4),
            "via": self.via,
            "matched": self.matched,
            "node": self.node.to_dict(),
        }


# ---------------------------------------------------------------- the view, row by row

_ROW = "n.rowid, n.id, n.status, n.key, n.level, n.session, n.project, n.workspace, n.updated, n.starts, n.ends"


def _applies(row: sqlite3.Row, where: Where) -> bool:
    """Whether a current node's row belongs to the view ``where`` describes (key collapse aside)."""
    if row["status"] == "active_session" and (where.session_id is None or row["session"] != where.session_id):
        return False
    if where.projects and row["project"] is not None and row["project"] not in where.projects:
        return False
    if where.workspace is not None and row["workspace"] not in (None, where.workspace):
        return False
    moment = where.moment
    return bool(row["starts"] <= moment and (row["ends"] is None or row["ends"] > moment))


def _precedence(row: sqlite3.Row) -> tuple[int, float, str]:
    return (-row["level"], row["updated"], row["id"])


class View:
    """The effective view of one index for one ``Where``, resolved lazily."""

    def __init__(self, index: Index, where: Where) -> None:
        self.index = index
        self.where = where
        self._winners: dict[str, str | None] = {}
        index.db.row_factory = sqlite3.Row

    def winner(self, key: str) -> str | None:
        """The id of the node that holds ``key`` in this view (None if no current node applies)."""
        self.preload([key])
        return self._winners[key]

    def preload(self, keys: Iterable[str | None]) -> None:
        """Decide the winners of many keys at once (one query instead of one per key).

        "+n.current" keeps SQLite on the key index: left to itself it may pick the
        index on current, which holds nearly every row, and scan the whole store.
        """
        missing = [k for k in dict.fromkeys(keys) if k is not None and k not in self._winners]
        for first in range(0, len(missing), 500):
            chunk = missing[first : first + 500]
            found: dict[str, list[sqlite3.Row]] = {k: [] for k in chunk}
            for r in self.index.db.execute(
                f"SELECT {_ROW} FROM nodes n WHERE n.key IN ({','.join('?' * len(chunk))}) AND +n.current = 1", chunk
            ):
                if _applies(r, self.where):
                    found[r["key"]].append(r)
            for key, rows in found.items():
                self._winners[key] = max(rows, key=_precedence)["id"] if rows else None

    def contains(self, row: sqlite3.Row) -> bool:
        return _applies(row, self.where) and (row["key"] is None or self.winner(row["key"]) == row["id"])

    def node(self, node_id: str) -> MemoryNode | None:
        row = self.index.db.execute(
            f"SELECT {_ROW}, n.record, n.current FROM nodes n WHERE n.id = ?", (node_id,)
        ).fetchone()
        if row is None or not row["current"] or not self.contains(row):
            return None
        return _node(row)

    def all_nodes(self) -> list[MemoryNode]:
        rows = self.index.db.execute(f"SELECT {_ROW}, n.record FROM nodes n WHERE n.current = 1 ORDER BY n.id")
        return [_node(r) for r in rows if self.contains(r)]

    def live_ends(self, node: MemoryNode) -> list[MemoryNode]:
        """The memories of this view that replace ``node`` now: its ``superseded_by`` followed, through
        memories retired in turn (a supersede then a refine, ...), to the ones that are current."""
        return [_node(row) for row in self._current_ends(node) if self.contains(row)]

    def moved_away(self, node: MemoryNode) -> bool:
        """Whether ``node`` was replaced only by current memories outside this view: it moved to another
        scope (``cclg project adopt`` gave a folder name's memory to one repository), it did not stop
        being true, so this view has nothing to say about it."""
        ends = self._current_ends(node)
        return bool(ends) and not any(self.contains(row) for row in ends)

    def _current_ends(self, node: MemoryNode) -> list[sqlite3.Row]:
        """The index rows of the current memories that replace ``node``, in any scope, by id."""
        found: dict[str, sqlite3.Row] = {}
        seen = {node.id}
        frontier = list(node.relations["superseded_by"])
        for _ in range(MAX_CHAIN):
            following = []
            for node_id in frontier:
                if node_id in seen:
                    continue
                seen.add(node_id)
                row = self.index.db.execute(
                    f"SELECT {_ROW}, n.record, n.current FROM nodes n WHERE n.id = ?", (node_id,)
                ).fetchone()
                if row is None:
                    continue
                if not row["current"]:
                    following.extend(_node(row).relations["superseded_by"])
                else:
                    found[node_id] = row
            frontier = following
        return [found[i] for i in sorted(found)]


def _node(row: sqlite3.Row) -> MemoryNode:
    return indexed_node(row["id"], row["record"])


# ---------------------------------------------------------------- BM25


def fts_query(terms: Iterable[str]) -> str:
    """An FTS5 MATCH expression: any of the terms, each quoted."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def document_frequencies(index: Index, terms: list[str]) -> tuple[int, dict[str, int]]:
    """(number of indexed nodes, nodes containing each term).

    Counting is not free in a large store (FTS5 walks each term's document list)
    and one pack asks for the same terms several times, so the counts are kept on
    the open index for as long as its database has not changed: ``data_version``
    moves when another connection commits, ``total_changes`` when this one writes.
    """
    db = index.db
    version = (db.total_changes, db.execute("PRAGMA data_version").fetchone()[0])
    cache = index.frequencies
    if index.frequencies_version != version:
        cache.clear()
        index.frequencies_version = version
    if None not in cache:
        cache[None] = db.execute("SELECT count(*) FROM nodes").fetchone()[0]
    missing = list(dict.fromkeys(t for t in terms if t not in cache))
    cache.update((t, 0) for t in missing)
    for first in range(0, len(missing), 500):  # SQLite caps the number of parameters of a statement
        chunk = missing[first : first + 500]
        marks = ",".join("?" * len(chunk))
        for term, docs in db.execute(f"SELECT term, doc FROM nodes_vocab WHERE term IN ({marks})", chunk):
            cache[term] = docs
    return cache[None], {t: cache[t] for t in terms}


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
) -> list[Hit]:
    """Ranked lexical search with field weights (content, key, tags, retrieval keys).

    ``status``: None for the effective view, ``"all"`` for every node, ``"retired"``
    for nodes out of the view for good (retired by a patch or in a retired status),
    or one node status. ``terms``, when given, are the terms to search with instead
    of all of ``text``'s.
    """
    terms = terms or query_terms(text) or [t for t in tokens(text)]
    if not terms or (status == "retired" and not index.db.execute("SELECT 1 FROM nodes WHERE current = 0").fetchone()):
        return []  # (no memory out of the view: the scan of every match for a retired one would find none)
    view = View(index, where)
    condition, params = _row_filter(status, where)
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    # Rank every match on the small columns only, keep the best that are in the
    # view, and only then read their records and indexed terms: in a big store that
    # reading is what costs. CROSS JOIN keeps FTS as the outer loop (SQLite may
    # otherwise walk the index on ``current`` and run the MATCH once per node), and
    # the covering index ``nodes_view`` answers each match without touching the wide
    # table rows that hold the records.
    rows = index.db.execute(
        f"SELECT {_ROW}, bm25(nodes_fts, {weights}) AS rank FROM nodes_fts"
        f" CROSS JOIN nodes n INDEXED BY nodes_view ON n.rowid = nodes_fts.rowid"
        f" WHERE nodes_fts MATCH ? AND {condition}"
        " ORDER BY rank, n.id LIMIT ?",
        [fts_query(_selective(index, terms)), *params, pool or max(limit * 4, 40)],
    ).fetchall()
    if status is None:
        view.preload(row["key"] for row in rows)
    kept = [row for row in rows if status is not None or view.contains(row)]
    # Scores equal up to float noise tie on the id. Rounded to significant digits, not
    # decimal places: FTS5 floors the idf of a term held by most memories at 1e-6, so
    # a whole ranking can lie below 1e-5 (round(x, 6) would make it id order).
    kept.sort(key=lambda row: (-float(f"{-row['rank']:.9g}"), row["id"]))
    kept = kept[:limit]
    details = {
        row[0]: row[1:]
        for row in index.db.execute(
            "SELECT n.rowid, n.record, f.content, f.key, f.tags, f.keys FROM nodes n"
            f" JOIN nodes_fts f ON f.rowid = n.rowid WHERE n.rowid IN ({','.join('?' * len(kept))})",
            [row["rowid"] for row in kept],
        )
    }
    wanted = set(terms)
    hits = []
    for row in kept:
        record, *fields = details[row["rowid"]]
        present = set(" ".join(fields).split())
        hits.append(Hit(node_id=row["id"], record=record, score=-row["rank"], matched=sorted(wanted & present)))
    return hits


def _row_filter(status: str | None, where: Where) -> tuple[str, list[str]]:
    """The SQL condition (and its parameters) on ``nodes n`` for a status and a ``Where``."""
    params: list[str] = []
    if status is None:
        condition = "n.current = 1"
    elif status == "all":
        condition = "1"
    elif status == "retired":
        # Facts that were true and are no longer: not forgotten ones (the user wanted
        # them gone), nor rolled-back, pending or disputed ones.
        condition = "n.current = 0 AND n.status IN ('active', 'active_session', 'superseded', 'deprecated', 'expired')"
    else:
        condition = "n.status = ?"
        params = [status]
    # Scope filters go into the SQL so that memories out of scope never crowd the pool.
    # Another session's memories are out of the view; asking for "all" or a named
    # status shows them unless a session is named.
    if status in (None, "retired") or where.session_id is not None:
        condition += " AND (n.session IS NULL OR n.session = ?)"
        params.append(where.session_id or "")
    if where.projects:
        condition += f" AND (n.project IS NULL OR n.project IN ({', '.join('?' * len(where.projects))}))"
        params.extend(where.projects)
    if where.workspace is not None:
        condition += " AND (n.workspace IS NULL OR n.workspace = ?)"
        params.append(where.workspace)
    return condition, params


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
    _, docs = document_frequencies(index, terms)
    return sorted((t for t in terms if docs[t] > 0), key=lambda t: (docs[t], t))[:count]


def _selective(index: Index, terms: list[str]) -> list[str]:
    total, docs = document_frequencies(index, terms)
    if total < COMMON_TERM_MIN_NODES:
        return terms
    rare = [t for t in terms if docs[t] <= total * COMMON_TERM_SHARE]
    return rare or terms


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
    Every memory read is checked against its file (``cclg.index.read_fresh``): grep reads them all."""
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
            text = path.read_bytes().decode("utf-8", errors="replace")
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
        neighbours += [
            row[0]
            for row in index.db.execute(
                "SELECT t.node_id FROM patch_nodes s JOIN patch_nodes t ON s.patch_id = t.patch_id"
                " WHERE s.node_id = ? AND s.role = 'new' AND t.role = 'target'",
                (hit.id,),
            )
        ]
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


def fuse(lists: list[list[Hit]], *, limit: int) -> list[Hit]:
    """Reciprocal rank fusion: each list adds 1 / (60 + rank) to a memory's score."""
    scores: dict[str, float] = {}
    best: dict[str, Hit] = {}
    for hits in lists:
        for rank, hit in enumerate(hits, start=1):
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
            best.setdefault(hit.id, hit)
    fused = [Hit(node=best[i].node, score=s, matched=best[i].matched, via="auto") for i, s in scores.items()]
    fused.sort(key=lambda h: (-round(h.score, 9), h.id))
    return fused[:limit]


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
) -> list[Hit]:
    """Search memories. ``mode`` is one of auto, grep, bm25, graph, temporal; ``status`` (None for the
    effective view) is ``all``, ``retired`` or one node status (see ``bm25``). What it returns is
    checked against the memories' files first (``cclg.index.read_fresh``)."""
    if mode not in MODES:
        raise UsageError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    if status is not None and status not in ("all", "retired", *fmt.NODE_STATUSES):
        raise UsageError(f"unknown status {status!r}; use all, retired or one of {', '.join(fmt.NODE_STATUSES)}")
    where = where or Where()
    if as_of is not None:
        if status is not None:
            raise UsageError("--as-of shows the effective view at that moment; it cannot be combined with --status")
        hits = rank_nodes(as_of_view(store, as_of, where.session_id), text, limit=limit)
        return _time_filter(hits, since, until)

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
            exact = [h for h in lexical if text.strip().lower() in h.node.content.lower()]
            hits = fuse([lexical, expand(index, lexical[:limit], where, limit=pool), exact], limit=pool)
        return _time_filter(hits, since, until)[:limit]

    return read_fresh(store, read, lambda hits: [hit.node.id for hit in hits])  # each parsed while it can heal


def _time_filter(hits: list[Hit], since: datetime | None, until: datetime | None) -> list[Hit]:
    """Keep memories recorded (``created_at``) within [since, until)."""

    def inside(node: MemoryNode) -> bool:
        created = parse_time(node.created_at)
        return (since is None or created >= since) and (until is None or created < until)

    return [h for h in hits if inside(h.node)]
