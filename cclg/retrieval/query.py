"""The shared query types: where a query is asked (``Where``), one result (``Hit``), and the
effective view of the index for one ``Where`` (``View``), resolved key by key as it is asked.

Search, relevance, semantic recall, selection and intake all speak these. A memory is in the view
when it applies where the query is asked (its session, project, workspace and validity) and, of the
current memories sharing its key, it wins: the most trusted (an untrusted memory never shadows a
trusted one), of those the narrowest applicable scope (session > project > workspace > global),
then the newest (``view.rank``, kept in the index as a node's ``level``). That is decided against
every current memory with the key, not just the ones a query matched.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from cclg.core.records import QUESTIONS, MemoryNode, Record, node_questions
from cclg.core.repository import ProjectKeys, project_keys
from cclg.ledger.index import Index, indexed_node

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

MAX_CHAIN = 20  # replacement links followed from a retired memory to the current one


class Where(Record):
    """Which view a search looks at: session overlays, scope filters, the moment. ``project``: one
    scope value, or the values a project answers to (``cclg.core.repository.Project.keys``); a memory of
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
        self.evidence: Any = None  # why the relevance decision kept it (cclg.retrieval.relevance.Evidence)

    @property
    def node(self) -> MemoryNode:
        if self._node is None:
            self._node = indexed_node(self.id, self._record)
        return self._node

    def questions(self) -> list[str]:
        """The questions the memory answers (``node_questions``), its record parsed only when its text
        may hold any: a key is spelled out in JSON unless escaped, so a record holding neither the word
        nor an escape holds none (most memories have none, and a pack weighs dozens of candidates)."""
        record = self._record
        if self._node is None and isinstance(record, str) and QUESTIONS not in record and "\\u" not in record:
            return []
        return node_questions(self.node)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "score": round(self.score, 4),
            "via": self.via,
            "matched": self.matched,
            "node": self.node.to_dict(),
        }


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

    def winner(self, key: str) -> str | None:
        """The id of the node that holds ``key`` in this view (None if no current node applies)."""
        self.preload([key])
        return self._winners[key]

    def preload(self, keys: Iterable[str | None]) -> None:
        """Decide the winners of many keys at once (one query instead of one per key)."""
        missing = [k for k in dict.fromkeys(keys) if k is not None and k not in self._winners]
        found: dict[str, list[sqlite3.Row]] = {k: [] for k in missing}
        for row in self.index.current_rows_with_keys(missing):
            if _applies(row, self.where):
                found[row["key"]].append(row)
        for key, rows in found.items():
            self._winners[key] = max(rows, key=_precedence)["id"] if rows else None

    def contains(self, row: sqlite3.Row) -> bool:
        return _applies(row, self.where) and (row["key"] is None or self.winner(row["key"]) == row["id"])

    def node(self, node_id: str) -> MemoryNode | None:
        """The memory ``node_id`` names, if it is in this view (parsed: ``holds`` only asks)."""
        row = self._row(node_id)
        return None if row is None else _node(row)

    def holds(self, node_id: str) -> bool:
        """Whether the memory ``node_id`` names is in this view, asked of its index row alone."""
        return self._row(node_id) is not None

    def hit(self, node_id: str, score: float, via: str) -> Hit | None:
        """A ``Hit`` of the memory ``node_id`` names if it is in this view, its record parsed when read."""
        row = self._row(node_id)
        return None if row is None else Hit(node_id=node_id, record=row["record"], score=score, via=via)

    def _row(self, node_id: str) -> sqlite3.Row | None:
        row = self.index.view_row(node_id)
        return row if row is not None and row["current"] and self.contains(row) else None

    def all_nodes(self) -> list[MemoryNode]:
        return [_node(r) for r in self.index.current_rows() if self.contains(r)]

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
                row = self.index.view_row(node_id)
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
