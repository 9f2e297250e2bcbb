"""The SQLite projection of a store: fast search and effective view, always disposable.

``index.sqlite`` (standard-library ``sqlite3``, FTS5, WAL) mirrors ``nodes/`` and
``patches/``; the files stay the truth (``rebuild_index`` makes it again). Every
write path of the ledger tells ``IndexChanges`` under the store lock; readers call
``open_index``, which checks cheaply whether the folders changed (their mtime) and
re-reads only the files whose size or mtime changed, so a node added or replaced
by hand or by a sync is picked up without a full rebuild.

A file rewritten in place (an editor, ``cp`` over it, ``touch``) leaves its folder
alone, so that check misses it. What is served is checked instead: ``read_fresh``
runs a search or a pack, stats the files of the memories it is about to return (a
handful), and when one changed since the index saw it, re-reads it and runs
again. ``cclg doctor`` and ``cclg reindex`` re-read every file that changed.

A damaged index file ("database disk image is malformed") is deleted and built
again from the files, wherever the damage shows (opening, syncing, a query); the
audit log records it. The file is created owner-only, like every store file.

For every node the index keeps its record, its search terms (``cclg.core.text``) and
a ``current`` flag: the node is ``active`` or ``active_session`` and no live
patch retires it. Which session, project and moment a query is for, and which of
several nodes sharing a key wins, are decided at query time (``cclg.retrieval.query.View``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import time
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from cclg.core.fields import parse_json
from cclg.core.files import create_private, fsync_dir
from cclg.core.ids import content_hash, parse_time
from cclg.core.records import MemoryNode, MemoryPatch, node_questions
from cclg.core.store import Store
from cclg.core.text import tokens
from cclg.errors import ValidationError, disk_refusal
from cclg.ledger.lattice import OPERATIONS, undone_patches
from cclg.ledger.view import rank

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    Result = TypeVar("Result")

SCHEMA_VERSION = "cclg.index.v5"  # v4: the content column holds the questions a memory answers; v5: type, trust
MAX_READS = 3  # runs of a read whose served memories keep changing on disk, before it is served as is
BUSY_TIMEOUT = 30.0  # seconds a writer waits for the index's write lock
READER_WAIT = 0.3  # seconds a reader waits for it to catch up with the files, else it reads the index as it is
# FTS5 writes each transaction's terms as a new segment of its full-text index, and a term's lookup
# (a MATCH, a document frequency) seeks in every segment. Left to FTS5's defaults, one memory added
# at a time piles up to 16 segments before they are merged (13 at 100,000 memories cost the pack ~3 ms);
# merging at 4 keeps it near 4-7, and ``Index.compact`` makes it one when nobody is waiting.
FTS_CRISIS_MERGE = 4
COMPACT_AFTER = 1000  # memories written at once (an import, a sync) after which the writer compacts it
VIEW_COUNT_SECONDS = 300.0  # how long an open index keeps a view's count of memories (``Index.view_count``)
DAMAGE_CODES = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (the low byte of an extended result code)

# The columns of a node's row that decide whether it is in a view (``cclg.retrieval.query.View``), read without
# its record. The covering index ``nodes_view`` holds them, so a search ranks matches on them alone.
VIEW_COLUMNS = ("rowid", "id", "status", "key", "level", "session", "project", "workspace", "updated", "starts", "ends")
_VIEW_ROW = ", ".join(f"n.{column}" for column in VIEW_COLUMNS)
PARAMETERS = 500  # SQLite caps the number of parameters of a statement: ids are asked for this many at a time

# The FTS tokenizer keeps inside a term the characters cclg.core.text keeps (tokenchars).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
    rowid INTEGER PRIMARY KEY,
    id TEXT UNIQUE NOT NULL,
    status TEXT NOT NULL,
    key TEXT,
    hash TEXT NOT NULL,
    level INTEGER NOT NULL,
    session TEXT,
    project TEXT,
    workspace TEXT,
    type TEXT NOT NULL DEFAULT '',
    trust TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL,
    starts REAL NOT NULL,
    ends REAL,
    pinned INTEGER NOT NULL,
    retired INTEGER NOT NULL DEFAULT 0,
    current INTEGER NOT NULL DEFAULT 0,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_key ON nodes(key);
CREATE INDEX IF NOT EXISTS nodes_hash ON nodes(hash);
CREATE INDEX IF NOT EXISTS nodes_current ON nodes(current);
CREATE INDEX IF NOT EXISTS nodes_kinds ON nodes(current, type, trust, project);  -- the web view's counts, filters
CREATE INDEX IF NOT EXISTS nodes_status ON nodes(status);  -- the web view's list of one status, newest first
CREATE INDEX IF NOT EXISTS nodes_session ON nodes(session) WHERE session IS NOT NULL;
CREATE INDEX IF NOT EXISTS nodes_pinned ON nodes(id) WHERE pinned = 1;
CREATE INDEX IF NOT EXISTS nodes_files ON nodes(id, mtime_ns, size);  -- comparing with the files reads no record
CREATE INDEX IF NOT EXISTS nodes_view ON nodes(rowid, current, {view_columns});
CREATE TABLE IF NOT EXISTS patches (
    id TEXT PRIMARY KEY,
    operation TEXT NOT NULL,
    rollback_of TEXT,
    retiring INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS patch_nodes (patch_id TEXT NOT NULL, node_id TEXT NOT NULL, role TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS patch_nodes_node ON patch_nodes(node_id);
CREATE INDEX IF NOT EXISTS patch_nodes_patch_role ON patch_nodes(patch_id, role);  -- search joins on both
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_fts USING fts5(
    content, key, tags, keys, tokenize = "unicode61 remove_diacritics 0 tokenchars '._/-:+#@_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_vocab USING fts5vocab(nodes_fts, 'row');
""".replace("{view_columns}", ", ".join(VIEW_COLUMNS[1:]))


def is_pinned(node: MemoryNode) -> bool:
    """Always-needed memories: ``metadata.pinned`` true or ``metadata.retention`` = required."""
    return node.metadata.get("pinned") is True or node.metadata.get("retention") == "required"


def search_fields(node: MemoryNode) -> tuple[str, str, str, str]:
    """The four indexed fields (content, key, tags, retrieval keys) as space-joined terms. The content
    field holds the questions the memory answers too (``node_questions``): searched like its content,
    in a user's words."""
    return (
        " ".join(tokens(" ".join([node.content, *node_questions(node)]))),
        " ".join(tokens(node.key or "")),
        " ".join(tokens(" ".join(node.tags))),
        " ".join(tokens(" ".join(node.retrieval.sparse_keys + node.retrieval.entity_keys))),
    )


def _folder_signature(store: Store) -> str:
    parts = []
    for folder in ("nodes", "patches"):
        info = os.stat(store.folder(folder))
        parts.append(f"{folder}:{info.st_mtime_ns}")
    return " ".join(parts)


def _files(store: Store, folder: str) -> dict[str, tuple[int, int]]:
    """(mtime, size) of each record file of ``folder``, by id."""
    found = {}
    for entry in store.scan_records(folder)[0]:
        info = entry.stat()
        found[entry.name[:-5]] = (info.st_mtime_ns, info.st_size)
    return found


def _row_filter(
    status: str | None, session_id: str | None, projects: Sequence[str], workspace: str | None
) -> tuple[str, list[str]]:
    """The SQL condition (and its parameters) on ``nodes n`` for a status and where a query is asked: a
    session (None: none), the values of a project (empty: any) and a workspace (None: any).

    ``status``: None for the effective view, ``"all"`` for every node, ``"retired"`` for nodes out
    of the view for good (retired by a patch or in a retired status), or one node status."""
    params: list[str] = []
    if status is None:
        condition = "n.current = 1"
    elif status == "all":
        condition = "1"
    elif status == "retired":
        # Facts that were true and are no longer, and disputed ones (conflict_pending: a pack lists them
        # as unsettled, never as current truth); not forgotten ones (the user wanted them gone), nor
        # rolled-back or pending ones.
        condition = (
            "n.current = 0 AND n.status IN ('active', 'active_session', 'superseded', 'deprecated', 'expired', "
            "'conflict_pending')"
        )
    else:
        condition = "n.status = ?"
        params = [status]
    # Scope filters go into the SQL so that memories out of scope never crowd the pool.
    # Another session's memories are out of the view; asking for "all" or a named
    # status shows them unless a session is named.
    if status in (None, "retired") or session_id is not None:
        condition += " AND (n.session IS NULL OR n.session = ?)"
        params.append(session_id or "")
    if projects:
        condition += f" AND (n.project IS NULL OR n.project IN ({', '.join('?' * len(projects))}))"
        params.extend(projects)
    if workspace is not None:
        condition += " AND (n.workspace IS NULL OR n.workspace = ?)"
        params.append(workspace)
    return condition, params


_SCOPES = {  # a memory's narrowest scope, from its row's columns
    "session": "n.session IS NOT NULL",
    "project": "n.session IS NULL AND n.project IS NOT NULL",
    "workspace": "n.session IS NULL AND n.project IS NULL AND n.workspace IS NOT NULL",
    "global": "n.session IS NULL AND n.project IS NULL AND n.workspace IS NULL",
}


def _list_conditions(filters: dict[str, str]) -> tuple[list[str], list[object]]:
    """The SQL conditions (and parameters) on ``nodes n`` of ``Index.listed_rows``'s ``filters``."""
    status = filters.get("status")
    conditions = ["n.status = ?" if status else "n.current = 1"]
    params: list[object] = [status] if status else []
    if filters.get("project"):
        conditions.append("n.project = ?")
        params.append(filters["project"])
    if filters.get("scope"):
        conditions.append(_SCOPES[filters["scope"]])
    for field in ("type", "trust"):
        if filters.get(field):
            conditions.append(f"n.{field} = ?")
            params.append(filters[field])
    if filters.get("tag"):
        words = tokens(filters["tag"])
        if words:  # the full-text index narrows to the rows whose tags hold its words (no scan of records)
            phrase = " ".join(words).replace('"', '""')
            conditions.append("n.rowid IN (SELECT rowid FROM nodes_fts WHERE nodes_fts MATCH ?)")
            params.append(f'tags : "{phrase}"')
        conditions.append("EXISTS (SELECT 1 FROM json_each(n.record, '$.tags') WHERE value = ?)")  # the exact tag
        params.append(filters["tag"])
    return conditions, params


LIST_SCOPES = tuple(_SCOPES)


class IndexDamage(sqlite3.DatabaseError):
    """A row of the index that cannot be read back (its record no longer parses): the file is damaged."""


def indexed_node(node_id: str, record: object) -> MemoryNode:
    """The node an index row holds (its ``record`` column); ``IndexDamage`` when it does not parse."""
    try:
        return MemoryNode.from_dict(parse_json(record), where=f"index:{node_id}")  # type: ignore[arg-type]
    except (TypeError, ValueError, ValidationError) as exc:
        raise IndexDamage(f"the index's record of {node_id} does not parse ({exc})") from None


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database file itself is broken (not busy, locked or read-only): SQLite
    finds it corrupt, or what it holds cannot be read back (text that is not UTF-8, a record that
    does not parse)."""
    if isinstance(exc, IndexDamage):
        return True
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if str(exc).startswith("Could not decode to UTF-8"):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in DAMAGE_CODES
    return "malformed" in str(exc) or "not a database" in str(exc)


_opened = itertools.count()  # a serial number for each index opened (``Index.version``)


class Index:
    """An open index over one store."""

    def __init__(self, store: Store, db: sqlite3.Connection) -> None:
        self.store = store
        self.db = db
        # Document frequencies already looked up (``document_frequencies``),
        # with the database version they hold for.
        self.frequencies: dict[str | None, int] = {}
        self.frequencies_version: tuple[int, int, int] | None = None
        self.view_counts: dict[str, tuple[int, float]] = {}  # view -> (count, when) (``view_count``)
        self.serial = next(_opened)
        self.damage: str | None = None  # what was done about a damaged index file when it was opened

    def close(self) -> None:
        self.db.close()

    def version(self) -> tuple[int, int, int]:
        """What moves whenever the database may have changed since the last call on this open index: which
        index it is, its own writes (``total_changes``) and other connections' commits (``data_version``)."""
        return self.serial, self.db.total_changes, self.db.execute("PRAGMA data_version").fetchone()[0]

    # ------------------------------------------------------------ keeping in step

    def sync(self, *, force: bool = False) -> int:
        """Bring the index in line with the files; returns how many files were re-read.

        A reader (not ``force``) waits at most ``READER_WAIT`` seconds for the index's write lock: a
        writer that holds it longer (a large import naming its memories) is not done, so the index as
        it stands is what is acknowledged, and the read goes on with it (the hook must not stall)."""
        if not force and self._meta("signature") == _folder_signature(self.store):
            return 0
        if not force:
            try:
                self._begin_write(wait=READER_WAIT)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                return 0
        return len(self.refresh_all())

    def refresh_all(self) -> list[str]:
        """Re-read every record file whose size or mtime changed since the index saw it (a stat of
        every file), and forget those that are gone; returns them as ``folder/id.json``."""
        signature = _folder_signature(self.store)
        self._begin_write()
        changed: dict[str, list[str]] = {}
        for folder in ("nodes", "patches"):
            on_disk = _files(self.store, folder)
            known = {row[0]: (row[1], row[2]) for row in self.db.execute(f"SELECT id, mtime_ns, size FROM {folder}")}
            ids = [i for i, seen in on_disk.items() if known.get(i) != seen]
            changed[folder] = sorted(ids + [i for i in known if i not in on_disk])
        self._apply(changed["nodes"], changed["patches"])
        if self._meta("signature") != signature:  # else nothing is written: the commit costs no checkpoint
            self._set_meta("signature", signature)
        self.db.commit()
        return [f"{folder}/{i}.json" for folder, ids in changed.items() for i in ids]

    def refresh(self, node_ids: Iterable[str]) -> list[str]:
        """Re-read the node files among ``node_ids`` that changed on disk since the index saw them
        (one stat each: meant for the few memories a read is about to serve); returns their ids."""
        ids = sorted(set(node_ids))
        known: dict[str, tuple[int, int]] = {}
        for first in range(0, len(ids), 500):  # SQLite caps the number of parameters of a statement
            chunk = ids[first : first + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(f"SELECT id, mtime_ns, size FROM nodes WHERE id IN ({marks})", chunk)
            known.update((row[0], (row[1], row[2])) for row in rows)
        folder = self.store.folder("nodes")
        changed = []
        for node_id in ids:
            try:
                info = os.stat(folder / f"{node_id}.json")
            except OSError:
                seen = None
            else:
                seen = (info.st_mtime_ns, info.st_size)
            if seen != known.get(node_id):
                changed.append(node_id)
        if changed:  # re-reading a file is idempotent: what changed since is read as it is now
            self._begin_write()
            self._apply(changed, [])
            self.db.commit()
        return changed

    def note_changes(self, node_ids: Iterable[str], patch_ids: Iterable[str]) -> None:
        """Record files just written by this process (called under the store lock)."""
        self._begin_write()
        self._apply(list(node_ids), list(patch_ids))
        self._set_meta("signature", _folder_signature(self.store))
        self.db.commit()

    def _begin_write(self, wait: float | None = None) -> None:
        """Open the write transaction before reading what to change: the module's default opens one
        at the first write only, so the reads before it could see a state that another process (a
        reader catching up with the files, or the writer) changes in between, and the rows it then
        inserts would already be there."""
        if self.db.in_transaction:
            return
        if wait is None:
            self.db.execute("BEGIN IMMEDIATE")
            return
        self.db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
        try:
            self.db.execute("BEGIN IMMEDIATE")
        finally:
            self.db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")

    def _apply(self, node_ids: list[str], patch_ids: list[str]) -> None:
        if node_ids or patch_ids:
            self._merge_setting()
        affected = set(node_ids)
        for patch_id in patch_ids:
            affected |= self._load_patch(patch_id)
        for node_id in node_ids:
            self._load_node(node_id)
        if patch_ids and any(self._is_rollback(p) for p in patch_ids):
            # A rollback changes which patches are live: recompute everything they touch.
            affected |= {row[0] for row in self.db.execute("SELECT node_id FROM patch_nodes")}
        self._recompute(affected)

    def _is_rollback(self, patch_id: str) -> bool:
        row = self.db.execute("SELECT operation FROM patches WHERE id = ?", (patch_id,)).fetchone()
        return row is None or row[0] == "rollback"

    def _load_node(self, node_id: str) -> None:
        """(Re)load one node from its file."""
        old = self.db.execute("SELECT rowid FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if old is not None:
            self.db.execute("DELETE FROM nodes WHERE rowid = ?", old)
            self.db.execute("DELETE FROM nodes_fts WHERE rowid = ?", old)
        read = self._read_node(node_id)
        if read is not None:
            self._insert_node(*read)

    def _read_node(self, node_id: str) -> tuple[MemoryNode, str, int, int] | None:
        """(node, text, mtime, size) of a node file; None if gone, unreadable or a copy (doctor's business)."""
        path = self.store.folder("nodes") / f"{node_id}.json"
        try:
            info = path.stat()
            text = path.read_text(encoding="utf-8")
            node = MemoryNode.from_dict(parse_json(text), where=f"nodes/{node_id}.json")
        except (OSError, ValueError, UnicodeDecodeError, ValidationError):
            return None
        return (node, text, info.st_mtime_ns, info.st_size) if node.id == node_id else None

    def add_staged(self, node: MemoryNode, data: bytes, staged: Path) -> None:
        """Index a new node whose file ``staged`` is written but not yet named (a streamed import, under
        the store lock): the row joins a write transaction that ``note_changes([], [patch])`` commits once
        the files have their names (a rename keeps a file's time and size) and ``drop_staged`` drops."""
        self._begin_write()
        info = staged.stat()
        self._insert_node(node, data.decode("utf-8"), info.st_mtime_ns, info.st_size)

    def drop_staged(self) -> None:
        """Forget the rows ``add_staged`` added (the write they belong to failed)."""
        self.db.rollback()

    def _insert_node(self, node: MemoryNode, text: str, mtime_ns: int, size: int) -> None:
        ends = parse_time(node.effective_until).timestamp() if node.effective_until else None
        cursor = self.db.execute(
            "INSERT INTO nodes (id, status, key, hash, level, session, project, workspace, type, trust, created,"
            " updated, starts, ends, pinned, mtime_ns, size, record)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                node.id,
                node.status,
                node.key,
                content_hash(node.content),
                rank(node),
                node.scope.session,
                node.scope.project,
                node.scope.workspace,
                node.type,
                str(node.metadata.get("trust", "")),
                parse_time(node.created_at).timestamp(),
                parse_time(node.updated_at).timestamp(),
                parse_time(node.effective_from).timestamp(),
                ends,
                int(is_pinned(node)),
                mtime_ns,
                size,
                text,
            ),
        )
        self.db.execute(
            "INSERT INTO nodes_fts (rowid, content, key, tags, keys) VALUES (?, ?, ?, ?, ?)",
            (cursor.lastrowid, *search_fields(node)),
        )

    def _load_patch(self, patch_id: str) -> set[str]:
        """(Re)load one patch; returns the node ids whose standing it may change."""
        touched = {row[0] for row in self.db.execute("SELECT node_id FROM patch_nodes WHERE patch_id = ?", (patch_id,))}
        self.db.execute("DELETE FROM patches WHERE id = ?", (patch_id,))
        self.db.execute("DELETE FROM patch_nodes WHERE patch_id = ?", (patch_id,))
        path = self.store.folder("patches") / f"{patch_id}.json"
        try:
            info = path.stat()
            patch = MemoryPatch.from_dict(parse_json(path.read_bytes()), where=f"patches/{patch_id}.json")
        except (OSError, ValueError, UnicodeDecodeError, ValidationError):
            return touched
        if patch.id != patch_id:
            return touched
        self.db.execute(
            "INSERT INTO patches (id, operation, rollback_of, retiring, mtime_ns, size) VALUES (?, ?, ?, ?, ?, ?)",
            (
                patch.id,
                patch.operation,
                patch.rollback_of,
                int(OPERATIONS[patch.operation].retiring),
                info.st_mtime_ns,
                info.st_size,
            ),
        )
        rows = [(patch.id, n, "target") for n in patch.target_ids]
        rows += [(patch.id, n, "new") for n in patch.new_node_ids]
        self.db.executemany("INSERT INTO patch_nodes (patch_id, node_id, role) VALUES (?, ?, ?)", rows)
        return touched | set(patch.target_ids) | set(patch.new_node_ids)

    def _undone(self) -> set[str]:
        return undone_patches(
            self.db.execute(
                "SELECT id, rollback_of FROM patches WHERE operation = 'rollback' AND rollback_of IS NOT NULL"
            )
        )

    def _recompute(self, node_ids: set[str]) -> None:
        """Recompute ``retired`` and ``current`` for these nodes."""
        if not node_ids:
            return
        db = self.db
        db.execute("CREATE TEMP TABLE IF NOT EXISTS affected (id TEXT PRIMARY KEY)")
        db.execute("DELETE FROM affected")
        db.executemany("INSERT OR IGNORE INTO affected (id) VALUES (?)", ((i,) for i in node_ids))
        db.execute("CREATE TEMP TABLE IF NOT EXISTS undone (id TEXT PRIMARY KEY)")
        db.execute("DELETE FROM undone")
        db.executemany("INSERT INTO undone (id) VALUES (?)", ((i,) for i in self._undone()))
        db.execute(
            "UPDATE nodes SET retired = EXISTS (SELECT 1 FROM patch_nodes t JOIN patches p ON p.id = t.patch_id"
            " WHERE t.node_id = nodes.id AND t.role = 'target' AND p.retiring = 1"
            " AND p.id NOT IN (SELECT id FROM undone)) WHERE id IN (SELECT id FROM affected)"
        )
        db.execute(
            "UPDATE nodes SET current = (status IN ('active', 'active_session') AND retired = 0)"
            " WHERE id IN (SELECT id FROM affected)"
        )

    def same_content(self, digest: str) -> list[tuple[str, str, bool, str]]:
        """(id, status, current, record) of every node whose content hash is ``digest``."""
        rows = self.db.execute(
            "SELECT id, status, current, record FROM nodes WHERE hash = ? ORDER BY id", (digest,)
        ).fetchall()
        return [(node_id, status, bool(current), record) for node_id, status, current, record in rows]

    def nodes_with_content(self, digest: str) -> list[MemoryNode]:
        """Every node whose content hash is ``digest`` (current or not), by id."""
        return [indexed_node(node_id, record) for node_id, _, _, record in self.same_content(digest)]

    def current_with_key(self, key: str) -> list[MemoryNode]:
        """The current memories (in any scope) with ``key``."""
        rows = self.db.execute("SELECT id, record FROM nodes WHERE key = ? AND current = 1 ORDER BY id", (key,))
        return [indexed_node(node_id, record) for node_id, record in rows]

    def patches_targeting(self, node_id: str) -> list[str]:
        """Ids of the patches that name ``node_id`` as a target."""
        rows = self.db.execute(
            "SELECT patch_id FROM patch_nodes WHERE node_id = ? AND role = 'target' ORDER BY patch_id", (node_id,)
        )
        return [row[0] for row in rows]

    # ------------------------------------------------------------ named queries (the only SQL on these tables)

    def _rows(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        """The rows of a query, each readable by column name (``row["key"]``)."""
        cursor = self.db.cursor()
        cursor.row_factory = sqlite3.Row
        return cursor.execute(sql, params).fetchall()

    def view_row(self, node_id: str) -> sqlite3.Row | None:
        """The row of node ``node_id`` (current or not): ``VIEW_COLUMNS``, its ``record`` and ``current``."""
        rows = self._rows(f"SELECT {_VIEW_ROW}, n.record, n.current FROM nodes n WHERE n.id = ?", (node_id,))
        return rows[0] if rows else None

    def current_rows_with_keys(self, keys: Sequence[str]) -> list[sqlite3.Row]:
        """The rows (``VIEW_COLUMNS``) of the current nodes that hold one of ``keys``.

        "+n.current" keeps SQLite on the key index: left to itself it may pick the
        index on current, which holds nearly every row, and scan the whole store.
        """
        found = []
        for first in range(0, len(keys), PARAMETERS):
            chunk = list(keys[first : first + PARAMETERS])
            marks = ",".join("?" * len(chunk))
            found += self._rows(f"SELECT {_VIEW_ROW} FROM nodes n WHERE n.key IN ({marks}) AND +n.current = 1", chunk)
        return found

    def current_rows(self) -> list[sqlite3.Row]:
        """The rows (``VIEW_COLUMNS`` and ``record``) of every current node, by id."""
        return self._rows(f"SELECT {_VIEW_ROW}, n.record FROM nodes n WHERE n.current = 1 ORDER BY n.id")

    def pinned_rows(self) -> list[sqlite3.Row]:
        """The rows (``VIEW_COLUMNS``) of the current pinned nodes (``is_pinned``), by id."""
        return self._rows(f"SELECT {_VIEW_ROW} FROM nodes n WHERE n.pinned = 1 AND +n.current = 1 ORDER BY n.id")

    def ids_ending(self, end: str) -> list[str]:
        """The ids of the nodes (whatever their status) that end with ``end``, letters and digits only: what
        a short id (``cclg.core.ids.short_id``) names. One scan of the id column, not of the files."""
        if not end.isalnum():
            return []
        rows = self.db.execute("SELECT id FROM nodes WHERE id LIKE ? ORDER BY id", ("%" + end,))
        return [row[0] for row in rows if row[0].endswith(end)]

    def node(self, node_id: str) -> MemoryNode | None:
        """Node ``node_id`` as the index holds it, whatever its status (None if it has no row)."""
        row = self.db.execute("SELECT record FROM nodes WHERE id = ?", (node_id,)).fetchone()
        return None if row is None else indexed_node(node_id, row[0])

    def current_nodes(self, node_ids: Iterable[str]) -> list[MemoryNode]:
        """The current nodes among ``node_ids`` (the others left out)."""
        ids = sorted(set(node_ids))
        found = []
        for first in range(0, len(ids), PARAMETERS):
            chunk = ids[first : first + PARAMETERS]
            marks = ",".join("?" * len(chunk))
            rows = self.db.execute(f"SELECT id, record FROM nodes WHERE id IN ({marks}) AND current = 1", chunk)
            found += [indexed_node(node_id, record) for node_id, record in rows]
        return found

    def holds_key(self, key: str, *, besides: str | None = None) -> bool:
        """Whether any node (current or not), other than ``besides``, holds ``key``."""
        row = self.db.execute("SELECT 1 FROM nodes WHERE key = ? AND id != ? LIMIT 1", (key, besides or "")).fetchone()
        return row is not None

    def latest_with_key(self, key: str) -> MemoryNode | None:
        """The node that holds ``key`` now: the current one, else the last one updated (None if none)."""
        row = self.db.execute(
            "SELECT id, record FROM nodes WHERE key = ? ORDER BY current DESC, updated DESC, id LIMIT 1", (key,)
        ).fetchone()
        return None if row is None else indexed_node(row[0], row[1])

    def has_retired(self) -> bool:
        """Whether any node is out of the view (retired by a patch or in a retired status)."""
        return self.db.execute("SELECT 1 FROM nodes WHERE current = 0").fetchone() is not None

    def current_hashes(self) -> dict[str, tuple[str, str | None]]:
        """(the content hash, the project) of every current node, by id."""
        rows = self.db.execute("SELECT id, hash, project FROM nodes WHERE current = 1")
        return {row[0]: (row[1], row[2]) for row in rows}

    def fingerprint(self) -> tuple[str | None, int]:
        """(the folder signature the index last caught up with, the number of current nodes): what changes
        when the current memories may have (the semantic helper embeds again when it moves)."""
        count = self.db.execute("SELECT count(*) FROM nodes WHERE current = 1").fetchone()[0]
        return self._meta("signature"), count

    def file_seen(self, folder: str, record_id: str) -> tuple[int, int] | None:
        """(mtime, size) of the file ``folder/record_id.json`` as the index last read it (None: no row)."""
        if folder not in ("nodes", "patches"):
            raise ValueError(f"the index holds no folder {folder!r}")
        row = self.db.execute(f"SELECT mtime_ns, size FROM {folder} WHERE id = ?", (record_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def replaced_by_patches_of(self, node_id: str) -> list[str]:
        """The nodes that the patches which made ``node_id`` targeted (what it replaced or refined)."""
        rows = self.db.execute(
            "SELECT t.node_id FROM patch_nodes s JOIN patch_nodes t ON s.patch_id = t.patch_id"
            " WHERE s.node_id = ? AND s.role = 'new' AND t.role = 'target'",
            (node_id,),
        )
        return [row[0] for row in rows]

    def patches_naming(self, node_ids: Iterable[str]) -> list[str]:
        """The ids of the patches that name any of ``node_ids`` as a target or a new node, by id."""
        ids = sorted(set(node_ids))
        found: set[str] = set()
        for first in range(0, len(ids), PARAMETERS):
            chunk = ids[first : first + PARAMETERS]
            rows = self.db.execute(
                f"SELECT patch_id FROM patch_nodes WHERE node_id IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(row[0] for row in rows)
        return sorted(found)

    def undone_patch_ids(self) -> set[str]:
        """The patches that stand undone (a rollback of them that is not itself undone)."""
        return self._undone()

    def listed_rows(self, filters: dict[str, str], *, before: int | None, limit: int) -> list[sqlite3.Row]:
        """One page of nodes (``VIEW_COLUMNS`` and ``record``), newest row first, older than row ``before``:
        the web view's list. ``filters`` (each optional): ``status`` (one node status, else the current
        memories), ``project``, ``scope`` (``session``, ``project``, ``workspace`` or ``global``: the
        narrowest the memory is held to), ``type``, ``trust``, ``tag``. The walk runs down the rowid and
        stops at ``limit`` matches: a page costs what it reads, never a scan of the whole store (unless
        few memories match)."""
        conditions, params = _list_conditions(filters)
        if before is not None:
            conditions.append("n.rowid < ?")
            params.append(before)
        return self._rows(
            f"SELECT {_VIEW_ROW}, n.record FROM nodes n WHERE {' AND '.join(conditions)} ORDER BY n.rowid DESC LIMIT ?",
            [*params, limit],
        )

    def counts_by(self, column: str) -> dict[str, int]:
        """How many nodes hold each value of ``column`` (``status``, ``project``, ``type``), the current ones
        for all but ``status``: the web view's overview, counted on the covering indexes (``nodes_view``,
        ``nodes_kinds``), never on the records."""
        if column not in ("status", "project", "type"):
            raise ValueError(f"no count by {column!r}")
        where = "1" if column == "status" else "n.current = 1"
        rows = self.db.execute(f"SELECT n.{column}, count(*) FROM nodes n WHERE {where} GROUP BY 1 ORDER BY 2 DESC")
        return {str(value) if value is not None else "": count for value, count in rows}

    def document_frequencies(self, terms: list[str]) -> tuple[int, dict[str, int]]:
        """(number of indexed nodes, nodes containing each term).

        Counting is not free in a large store (FTS5 walks each term's document list)
        and one pack asks for the same terms several times, so the counts are kept on
        the open index for as long as its database has not changed: ``data_version``
        moves when another connection commits, ``total_changes`` when this one writes.
        """
        db = self.db
        version = self.version()
        cache = self.frequencies
        if self.frequencies_version != version:
            cache.clear()
            self.frequencies_version = version
        if None not in cache:
            cache[None] = db.execute("SELECT count(*) FROM nodes").fetchone()[0]
        missing = list(dict.fromkeys(t for t in terms if t not in cache))
        cache.update((t, 0) for t in missing)
        for first in range(0, len(missing), PARAMETERS):
            chunk = missing[first : first + PARAMETERS]
            marks = ",".join("?" * len(chunk))
            for term, docs in db.execute(f"SELECT term, doc FROM nodes_vocab WHERE term IN ({marks})", chunk):
                cache[term] = docs
        return cache[None], {t: cache[t] for t in terms}

    def view_count(self, session_id: str | None, projects: Sequence[str], workspace: str | None) -> int:
        """About how many current nodes the view holds (``_row_filter``): counted on the covering index
        ``nodes_view`` (10 ms at 100,000 nodes) and kept on this open index for ``VIEW_COUNT_SECONDS``,
        writes or not. Only its order of magnitude is read (``cclg.retrieval.selection._similarity_bar``)."""
        key = "\0".join([session_id or "", workspace or "", *projects])
        kept = self.view_counts.get(key)
        if kept is None or time.monotonic() - kept[1] > VIEW_COUNT_SECONDS:
            condition, params = _row_filter(None, session_id, projects, workspace)
            query = f"SELECT count(*) FROM nodes n INDEXED BY nodes_view WHERE {condition}"
            kept = self.view_counts[key] = (self.db.execute(query, params).fetchone()[0], time.monotonic())
        return kept[0]

    def matches(
        self,
        match: str,
        weights: Sequence[float],
        limit: int,
        *,
        status: str | None,
        session_id: str | None,
        projects: Sequence[str],
        workspace: str | None,
    ) -> list[sqlite3.Row]:
        """The rows (``VIEW_COLUMNS`` and ``rank``, BM25 with ``weights`` per field) of the best ``limit``
        nodes matching the FTS5 expression ``match``, of ``status`` where the query is asked (``_row_filter``).

        Every match is ranked on the small columns only: in a big store reading the records is what
        costs, so the caller reads them (``match_fields``) for the few it keeps. CROSS JOIN keeps FTS as
        the outer loop (SQLite may otherwise walk the index on ``current`` and run the MATCH once per
        node), and the covering index ``nodes_view`` answers each match without touching the wide table
        rows that hold the records."""
        condition, params = _row_filter(status, session_id, projects, workspace)
        return self._rows(
            f"SELECT {_VIEW_ROW}, bm25(nodes_fts, {', '.join(str(w) for w in weights)}) AS rank FROM nodes_fts"
            f" CROSS JOIN nodes n INDEXED BY nodes_view ON n.rowid = nodes_fts.rowid"
            f" WHERE nodes_fts MATCH ? AND {condition}"
            " ORDER BY rank, n.id LIMIT ?",
            [match, *params, limit],
        )

    def match_fields(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str, str, str]]:
        """(record, content, key, tags, retrieval keys: the indexed terms) of the nodes of ``rowids``."""
        rows = self.db.execute(
            "SELECT n.rowid, n.record, f.content, f.key, f.tags, f.keys FROM nodes n"
            f" JOIN nodes_fts f ON f.rowid = n.rowid WHERE n.rowid IN ({','.join('?' * len(rowids))})",
            list(rowids),
        )
        return {row[0]: row[1:] for row in rows}

    def read_through(self, checksums: dict[str, int]) -> None:
        """Read every node's record back as served, and compare it with its file: ``checksums`` holds the
        CRC-32 of each node file's bytes, taken by a caller that read them all (``cclg doctor``). A record
        that is not its file's bytes (a flipped byte: text that is not UTF-8, or wrong text served as
        true) raises ``IndexDamage``; a file changed since the caller read it is re-read, not blamed."""
        folder = self.store.folder("nodes")
        for node_id, data in self.db.execute("SELECT id, CAST(record AS BLOB) FROM nodes"):
            expected = checksums.get(node_id)
            if expected is None or zlib.crc32(data) == expected:
                continue
            try:
                if (folder / f"{node_id}.json").read_bytes() == data:
                    continue
            except OSError:
                continue
            raise IndexDamage(f"the index's record of {node_id} is not what its file holds")

    def _merge_setting(self) -> None:
        """Set the full-text index's merge point (``FTS_CRISIS_MERGE``) in an index that lacks it (one
        built by an earlier cclg): a setting FTS5 keeps in its own table, written in this write's
        transaction."""
        row = self.db.execute("SELECT v FROM nodes_fts_config WHERE k = 'crisismerge'").fetchone()
        if row is None or row[0] != FTS_CRISIS_MERGE:
            self.db.execute("INSERT INTO nodes_fts (nodes_fts, rank) VALUES ('crisismerge', ?)", (FTS_CRISIS_MERGE,))

    def segments(self) -> int:
        """How many segments the full-text index is in (what each term's lookup seeks through)."""
        return int(self.db.execute("SELECT count(DISTINCT segid) FROM nodes_fts_idx").fetchone()[0])

    def compact(self, wait: float | None = None) -> None:
        """Merge the full-text index into one segment (FTS5's ``optimize``), in a write transaction that
        waits at most ``wait`` seconds for the lock (else ``sqlite3.OperationalError``). It rewrites the
        whole full-text index (about 16 MB, 0.5 s at 100,000 memories): for a rebuild, and for the helper
        when it has nothing else to do (``KeptIndex.compact``)."""
        self._begin_write(wait)
        try:
            self._optimize()
            self.db.commit()
        except BaseException:
            self.db.rollback()
            raise

    def _optimize(self) -> None:
        """In the write transaction open: the merge setting, then the full-text index in one segment."""
        self._merge_setting()
        self.db.execute("INSERT INTO nodes_fts (nodes_fts) VALUES ('optimize')")

    def rebuild(self) -> int:
        """Read every file again into tables made anew in one transaction (deleting 100,000 rows took
        longer than reading them back); returns the number of nodes."""
        self._begin_write()
        for table in ("nodes_vocab", "nodes_fts", "patch_nodes", "patches", "nodes", "meta"):
            self.db.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                self.db.execute(statement)
        nodes = sorted(_files(self.store, "nodes"))
        for patch_id in sorted(_files(self.store, "patches")):
            self._load_patch(patch_id)
        for node_id in nodes:
            read = self._read_node(node_id)
            if read is not None:
                self._insert_node(*read)
        self._recompute(set(nodes))
        self._set_meta("schema", SCHEMA_VERSION)
        self._set_meta("signature", _folder_signature(self.store))
        self._optimize()
        self.db.commit()
        return len(nodes)

    # ------------------------------------------------------------ meta

    def _meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def _table_exists(self, name: str) -> bool:
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def _open_db(path: Path | str, *, shared: bool = False) -> sqlite3.Connection:
    """A connection to the index file; ``shared``: usable from any thread, one at a time (``KeptIndex``)."""
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level="DEFERRED", check_same_thread=not shared)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    # No memory map: the pages a search touches would all count as the process's memory (180 MB
    # for one query on 100,000 memories, against 16 MB without), and reading them through the page
    # cache costs no more CPU time once the OS holds the file (benchmarks/RESULTS.md, issue 17).
    return db


def connect(store: Store, *, shared: bool = False) -> Index:
    """Open (creating if needed) the index database of ``store`` without syncing it (``shared``: see ``_open_db``).

    An index of another schema version is thrown away and rebuilt, and so is a
    damaged one. Where no index file can be written (a read-only store), the index
    is built in memory for this process: slower, never wrong.
    """
    damage = None
    for _ in range(2):
        try:
            index = _connect_file(store, shared)
        except sqlite3.DatabaseError as exc:
            if damage is None and is_damage(exc):
                damage = discard_damaged(store, exc)
                continue
            break
        except OSError:
            break
        index.damage = damage
        return index
    index = in_memory(store, shared=shared)
    index.damage = damage
    return index


def in_memory(store: Store, *, shared: bool = False) -> Index:
    """An index of ``store`` built in memory, for a process that cannot write the file: slower, never wrong."""
    index = Index(store, _open_db(":memory:", shared=shared))
    index.db.executescript(_SCHEMA)
    index.rebuild()
    return index


def _connect_file(store: Store, shared: bool = False) -> Index:
    create_private(store.index_path)
    index = Index(store, _open_db(store.index_path, shared=shared))
    try:
        if index._table_exists("meta") and index._meta("schema") not in (None, SCHEMA_VERSION):
            index.close()
            store.drop_index()
            create_private(store.index_path)
            index = Index(store, _open_db(store.index_path, shared=shared))
        index.db.executescript(_SCHEMA)
        if index._meta("schema") is None:
            index.rebuild()
    except BaseException:
        index.close()
        raise
    return index


def discard_damaged(store: Store, exc: BaseException) -> str:
    """Delete a damaged index (the next ``connect`` builds it again) and audit it; returns what was done."""
    done = f"deleted the damaged search index ({exc}), to be built again from the files"
    store.drop_index(vectors=False)
    with contextlib.suppress(OSError):
        store.audit("repair_applied", actions=[done])
    return done


def open_index(store: Store, *, shared: bool = False) -> Index:
    """The index of ``store``, brought up to date with its files: a damaged one is built again, and one
    the disk will not let catch up with them (full, read-only) is built in memory for this process
    (``shared``: see ``_open_db``)."""
    index = connect(store, shared=shared)
    try:
        index.sync()
    except sqlite3.DatabaseError as exc:
        index.close()
        if is_damage(exc):
            damage = discard_damaged(store, exc)
            index = connect(store, shared=shared)
            index.damage = damage
        elif disk_refusal(exc) is not None:
            index = in_memory(store, shared=shared)
        else:
            raise
    return index


def healing(store: Store, run: Callable[[Index], Result]) -> Result:
    """``run(index)`` on the up-to-date index of ``store``: the one place a damaged index heals.

    Any failure to read the index, while it is opened, brought up to date or read
    (``is_damage``: a broken file, a record that is not UTF-8 or no longer parses),
    is damage to a disposable projection: the index is deleted (audited), built again
    from the files, and ``run`` runs once more on it. A write that reads through the
    index runs here too: whatever it staged before the damage showed was dropped."""
    for attempt in (1, 2):
        kept = _kept.get(os.path.realpath(store.root)) if _kept else None
        held = kept if kept is not None and kept.lock.acquire(blocking=False) else None  # else: one of its own
        if held is not None:
            try:
                index = held.take()
            except BaseException:
                held.give_back()
                raise
        else:
            index = open_index(store)
        try:
            return run(index)
        except sqlite3.DatabaseError as exc:
            if held is not None:
                held.drop()
            if attempt == 2 or not is_damage(exc):
                raise
            discard_damaged(store, exc)
        finally:
            if held is not None:
                held.give_back()
            else:
                index.close()
    raise AssertionError("unreachable")


class KeptIndex:
    """One store's index kept open from one read to the next (``keep_open``), for a process that lives to
    read one store many times: the semantic helper, which takes the hook's events. Opening an index and
    checking its schema costs about 2 ms a read; kept open, the terms' counts it looked up
    (``Index.document_frequencies``) stay while its database does not change, and the helper's vectors
    see from ``Index.version`` that nothing changed without counting the rows.

    One read at a time holds it (``lock``); a read that comes meanwhile opens an index of its own, as
    every read does without one. Each read finds it caught up with the files (``Index.sync``, as
    ``open_index`` does); a file that is no longer the one it opened (``cclg reindex`` renamed a new one
    over it, a damaged one was deleted) is opened again; what a read left uncommitted is rolled back,
    as closing the index would have."""

    def __init__(self, store: Store) -> None:
        import threading

        self.store = store
        self.index: Index | None = None
        self.file: tuple[int, int] | None = None  # (device, inode) of the file it opened
        self.lock = threading.Lock()

    def take(self) -> Index:
        """The kept index, caught up with the files (opened first when there is none); under ``lock``."""
        if self.index is not None and self._file() != self.file:
            self.drop()
        if self.index is not None:
            try:
                self.index.sync()
                self.index.damage = None  # said by the read that found it
                return self.index
            except sqlite3.DatabaseError:
                self.drop()  # opened again, as any read opens it (a damaged or refused file handled there)
        self.index = open_index(self.store, shared=True)
        self.file = self._file()
        return self.index

    def compact(self) -> bool:
        """Merge the kept index's full-text index into one segment (``Index.compact``) when it is in more
        than one and no read holds the kept index; whether it did. For the helper between requests: a
        writer that holds the lock, or any failure, leaves it for the next time."""
        if not self.lock.acquire(blocking=False):
            return False
        try:
            index = self.take()
            if index.segments() <= 1:
                return False
            index.compact(wait=0.0)
            return True
        except sqlite3.Error:
            return False
        finally:
            self.give_back()

    def give_back(self) -> None:
        """End a read: roll back what it left uncommitted, and let the next read take the index."""
        try:
            if self.index is not None and self.index.db.in_transaction:
                self.index.db.rollback()
        except sqlite3.Error:
            self.drop()
        finally:
            self.lock.release()

    def drop(self) -> None:
        """Close the kept index (the next read opens it again)."""
        if self.index is not None:
            with contextlib.suppress(sqlite3.Error):
                self.index.close()
        self.index, self.file = None, None

    def _file(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.store.index_path)
        except OSError:
            return None
        return info.st_dev, info.st_ino


_kept: dict[str, KeptIndex] = {}  # store folder -> its kept index, in a process that keeps one (``keep_open``)


def keep_open(store: Store) -> None:
    """From now on, this process's reads of ``store`` (``healing``, ``read_fresh``) share one index kept
    open between them (``KeptIndex``). For a long-lived process reading one store; the semantic
    helper's start calls it."""
    _kept.setdefault(os.path.realpath(store.root), KeptIndex(store))


def compact_kept(store: Store) -> bool:
    """Compact the full-text index of ``store``'s kept index (``KeptIndex.compact``); whether it did."""
    kept = _kept.get(os.path.realpath(store.root))
    return kept is not None and kept.compact()


def read_fresh(
    store: Store, read: Callable[[Index], Result], served: Callable[[Result], Iterable[str]] | None = None
) -> Result:
    """``read(index)`` on the up-to-date index of ``store`` (``healing``), made sure to serve nothing
    stale: the node files of the memories ``served`` names in its result (a stat each) are compared
    with what the index saw; when one changed since (edited in place, restored with ``cp``), it is
    re-read and ``read`` runs again (at most ``MAX_READS`` runs)."""

    def fresh(index: Index) -> Result:
        for run in range(1, MAX_READS + 1):
            result = read(index)
            if served is None or not index.refresh(served(result)) or run == MAX_READS:
                return result
        raise AssertionError("unreachable")

    return healing(store, fresh)


def rebuild_index(store: Store) -> int:
    """Read every file again into a new index, written beside the old one without a journal (half the
    time of rebuilding in place on 100,000 memories), made durable and renamed over it; returns the
    number of memories. Under the store lock; a reader with the old index open finishes on it."""
    with store.lock():
        building = store.index_path.with_name(store.index_path.name + ".rebuild")
        building.unlink(missing_ok=True)  # a rebuild killed before its rename
        _audit_damage(store)
        create_private(building)
        index = Index(store, sqlite3.connect(building, isolation_level="DEFERRED"))
        try:
            index.db.executescript(f"PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; {_SCHEMA}")
            count = index.rebuild()
        except BaseException:
            building.unlink(missing_ok=True)
            raise
        finally:
            index.close()
        with open(building, "rb") as built:
            os.fsync(built.fileno())
        for side in ("-wal", "-shm"):  # the old index's log must not be replayed into the new file
            store.index_path.with_name(store.index_path.name + side).unlink(missing_ok=True)
        os.replace(building, store.index_path)
        fsync_dir(store.index_path.parent)
    return count


def compact_index(store: Store) -> None:
    """Compact the index file (``VACUUM``): no free page keeps the text of a deleted row."""
    with contextlib.closing(sqlite3.connect(store.index_path)) as db:
        db.execute("VACUUM")


def _audit_damage(store: Store) -> None:
    """Audit a damaged index being replaced (``PRAGMA quick_check``: 2 s on 100,000 memories)."""
    if store.index_path.exists():
        try:
            with contextlib.closing(sqlite3.connect(f"file:{store.index_path}?mode=ro", uri=True)) as db:
                problems = [row[0] for row in db.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError(f"database disk image is malformed: {problems[0]}")
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                discard_damaged(store, exc)


class IndexChanges:
    """The change-sink of the ledger's writes: each write path, once its files are written (under the
    store lock), tells it which record files it changed (``changed``), and nothing else of the index.

    It writes into the caller's open ``index`` when given (a streamed import, which holds the rows it
    staged there), else into the index file if there is one (it is built on first read otherwise).
    The files are already written: the write stands whatever happens here. When the index cannot
    take the changes (a full disk, locked, damaged), it is left as it was, its recorded folder
    signature no longer matches the folders, so the next reader re-reads what changed (or rebuilds
    a damaged index); the store keeps a warning saying so.
    """

    def __init__(self, store: Store, index: Index | None = None) -> None:
        self.store = store
        self.index = index

    def changed(self, node_ids: Iterable[str], patch_ids: Iterable[str], *, compact: bool = False) -> None:
        """Bring the index in line with the node and patch files a write just changed; ``compact``: then
        merge its full-text index into one segment (``Index.compact``), for a write of many memories
        (an import's thousands of rows leave it in a dozen segments, and a store used without the
        semantic helper would otherwise read through them until its next rebuild)."""
        store, index = self.store, self.index
        if index is None and not store.index_path.exists():
            return
        try:
            if index is not None:
                index.note_changes(node_ids, patch_ids)
                if compact:
                    index.compact()
                return
            opened = _connect_file(store)  # no index built in memory for a write that cannot reach the file
            try:
                opened.note_changes(node_ids, patch_ids)
                if compact:
                    opened.compact()
            finally:
                opened.close()
        except (sqlite3.Error, OSError) as exc:
            if index is not None:
                with contextlib.suppress(sqlite3.Error):
                    index.db.rollback()
            store.warnings.append(
                f"the write is done, but the search index could not take it ({exc}); "
                "the next search or `cclg doctor` brings the index up to date from the files"
            )
