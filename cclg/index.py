"""The SQLite projection of a store: fast search and effective view, always disposable.

``index.sqlite`` (standard-library ``sqlite3``, FTS5, WAL) mirrors ``nodes/`` and
``patches/``. The files stay the truth: deleting the index loses nothing, and
``rebuild`` makes it again. Every write path of the ledger calls
``note_changes`` under the store lock; readers call ``open_index``, which checks
cheaply whether the folders changed since the index last saw them (their mtime)
and, if so, re-reads only the files whose size or mtime changed, so a node added
or replaced by hand or by a sync is picked up without a full rebuild. (An edit
that rewrites a file in place without touching its folder is seen at the next
write, ``cclg reindex`` or ``cclg doctor``.)

For every node the index keeps its record, its search terms (``cclg.text``) and
a ``current`` flag: the node is ``active`` or ``active_session`` and no live
patch retires it. Which session, project and moment a query is for, and which of
several nodes sharing a key wins, are decided at query time (``cclg.search``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from cclg.errors import ValidationError
from cclg.ids import content_hash, parse_time
from cclg.lattice import RULES, undone_patches
from cclg.records import MemoryNode, MemoryPatch
from cclg.store import Store
from cclg.text import tokens
from cclg.view import PRECEDENCE

SCHEMA_VERSION = "cclg.index.v2"
MMAP_BYTES = 1 << 30

# The FTS tokenizer keeps inside a term the characters cclg.text keeps (tokenchars).
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
CREATE INDEX IF NOT EXISTS nodes_session ON nodes(session) WHERE session IS NOT NULL;
CREATE INDEX IF NOT EXISTS nodes_pinned ON nodes(id) WHERE pinned = 1;
CREATE INDEX IF NOT EXISTS nodes_view ON nodes(
    rowid, current, id, status, key, level, session, project, workspace, updated, starts, ends
);
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
CREATE INDEX IF NOT EXISTS patch_nodes_patch ON patch_nodes(patch_id);
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_fts USING fts5(
    content, key, tags, keys, tokenize = "unicode61 remove_diacritics 0 tokenchars '._/-:+#@_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_vocab USING fts5vocab(nodes_fts, 'row');
"""


def is_pinned(node: MemoryNode) -> bool:
    """Always-needed memories: ``metadata.pinned`` true or ``metadata.retention`` = required."""
    return node.metadata.get("pinned") is True or node.metadata.get("retention") == "required"


def search_fields(node: MemoryNode) -> tuple[str, str, str, str]:
    """The four indexed fields (content, key, tags, retrieval keys) as space-joined terms."""
    return (
        " ".join(tokens(node.content)),
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


def _files(folder: Path) -> dict[str, tuple[int, int, Path]]:
    found = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name
            if name.endswith(".json") and not name.startswith("."):
                info = entry.stat()
                found[name[:-5]] = (info.st_mtime_ns, info.st_size, Path(entry.path))
    return found


class Index:
    """An open index over one store."""

    def __init__(self, store: Store, db: sqlite3.Connection) -> None:
        self.store = store
        self.db = db
        # Document frequencies already looked up (``cclg.search.document_frequencies``),
        # with the database version they hold for.
        self.frequencies: dict[str | None, int] = {}
        self.frequencies_version: tuple[int, int] | None = None

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------ keeping in step

    def sync(self, *, force: bool = False) -> int:
        """Bring the index in line with the files; returns how many files were re-read."""
        signature = _folder_signature(self.store)
        if not force and self._meta("signature") == signature:
            return 0
        changed_nodes, changed_patches = self._scan_changes()
        self._apply(changed_nodes, changed_patches)
        self._set_meta("signature", signature)
        self.db.commit()
        return len(changed_nodes) + len(changed_patches)

    def _scan_changes(self) -> tuple[list[str], list[str]]:
        changed: dict[str, list[str]] = {}
        for folder, table in (("nodes", "nodes"), ("patches", "patches")):
            on_disk = _files(self.store.folder(folder))
            known = {row[0]: (row[1], row[2]) for row in self.db.execute(f"SELECT id, mtime_ns, size FROM {table}")}
            ids = [i for i, (mtime, size, _) in on_disk.items() if known.get(i) != (mtime, size)]
            ids += [i for i in known if i not in on_disk]
            changed[folder] = ids
        return changed["nodes"], changed["patches"]

    def note_changes(self, node_ids: Iterable[str], patch_ids: Iterable[str]) -> None:
        """Record files just written by this process (called under the store lock)."""
        self._apply(list(node_ids), list(patch_ids))
        self._set_meta("signature", _folder_signature(self.store))
        self.db.commit()

    def _apply(self, node_ids: list[str], patch_ids: list[str]) -> None:
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
        path = self.store.folder("nodes") / f"{node_id}.json"
        old = self.db.execute("SELECT rowid FROM nodes WHERE id = ?", (node_id,)).fetchone()
        if old is not None:
            self.db.execute("DELETE FROM nodes WHERE rowid = ?", old)
            self.db.execute("DELETE FROM nodes_fts WHERE rowid = ?", old)
        try:
            info = path.stat()
            text = path.read_text(encoding="utf-8")
            node = MemoryNode.from_dict(json.loads(text), where=f"nodes/{node_id}.json")
        except FileNotFoundError:
            return
        except (ValueError, UnicodeDecodeError, ValidationError):
            return  # an unreadable record is doctor's business; search simply does not see it
        ends = parse_time(node.effective_until).timestamp() if node.effective_until else None
        cursor = self.db.execute(
            "INSERT INTO nodes (id, status, key, hash, level, session, project, workspace, created, updated, starts,"
            " ends, pinned, mtime_ns, size, record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                node.id,
                node.status,
                node.key,
                content_hash(node.content),
                PRECEDENCE[node.scope.level],
                node.scope.session,
                node.scope.project,
                node.scope.workspace,
                parse_time(node.created_at).timestamp(),
                parse_time(node.updated_at).timestamp(),
                parse_time(node.effective_from).timestamp(),
                ends,
                int(is_pinned(node)),
                info.st_mtime_ns,
                info.st_size,
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
            patch = MemoryPatch.from_dict(json.loads(path.read_bytes()), where=f"patches/{patch_id}.json")
        except FileNotFoundError:
            return touched
        except (ValueError, UnicodeDecodeError, ValidationError):
            return touched
        self.db.execute(
            "INSERT INTO patches (id, operation, rollback_of, retiring, mtime_ns, size) VALUES (?, ?, ?, ?, ?, ?)",
            (
                patch.id,
                patch.operation,
                patch.rollback_of,
                int(RULES[patch.operation].retiring),
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

    def current_with_key(self, key: str) -> list[MemoryNode]:
        """The current memories (in any scope) with ``key``."""
        rows = self.db.execute("SELECT id, record FROM nodes WHERE key = ? AND current = 1 ORDER BY id", (key,))
        return [MemoryNode.from_dict(json.loads(record), where=f"nodes/{node_id}.json") for node_id, record in rows]

    def patches_targeting(self, node_id: str) -> list[str]:
        """Ids of the patches that name ``node_id`` as a target."""
        rows = self.db.execute(
            "SELECT patch_id FROM patch_nodes WHERE node_id = ? AND role = 'target' ORDER BY patch_id", (node_id,)
        )
        return [row[0] for row in rows]

    def rebuild(self) -> int:
        """Forget everything and read every file again; returns the number of nodes."""
        for table in ("nodes", "patches", "patch_nodes", "nodes_fts", "meta"):
            self.db.execute(f"DELETE FROM {table}")
        nodes = sorted(_files(self.store.folder("nodes")))
        patches = sorted(_files(self.store.folder("patches")))
        for patch_id in patches:
            self._load_patch(patch_id)
        for node_id in nodes:
            self._load_node(node_id)
        self._recompute(set(nodes))
        self._set_meta("schema", SCHEMA_VERSION)
        self._set_meta("signature", _folder_signature(self.store))
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


def _open_db(path: Path | str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=30, isolation_level="DEFERRED")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    # Read pages through a memory map: a search touches rows all over the table,
    # and the default page cache (2 MB) cannot hold a large store.
    db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
    return db


def connect(store: Store) -> Index:
    """Open (creating if needed) the index database of ``store`` without syncing it.

    An index of another schema version is thrown away and rebuilt. Where no index
    file can be written (a read-only store), the index is built in memory for this
    process: slower, never wrong.
    """
    try:
        db = _open_db(store.index_path)
        index = Index(store, db)
        if index._table_exists("meta") and index._meta("schema") not in (None, SCHEMA_VERSION):
            db.close()
            store.drop_index()
            index = Index(store, _open_db(store.index_path))
        index.db.executescript(_SCHEMA)
    except (sqlite3.OperationalError, sqlite3.DatabaseError, OSError):
        index = Index(store, _open_db(":memory:"))
        index.db.executescript(_SCHEMA)
    if index._meta("schema") is None:
        index.rebuild()
    return index


def open_index(store: Store) -> Index:
    """The index of ``store``, brought up to date with its files."""
    index = connect(store)
    index.sync()
    return index


def rebuild_index(store: Store) -> int:
    """Read every file again into the index (in place, in one transaction); returns the number of memories."""
    index = connect(store)
    try:
        return index.rebuild()
    finally:
        index.close()


def note_changes(store: Store, node_ids: Iterable[str], patch_ids: Iterable[str]) -> None:
    """The ledger's one call into the index, after a write (under the store lock).

    Updates the index if there is one (it is built on first read otherwise). The
    files are already written; if the index cannot be updated now (locked,
    damaged), the write still stands and the next reader re-syncs the index from
    the files, because its folder signature no longer matches.
    """
    if not store.index_path.exists():
        return
    with contextlib.suppress(sqlite3.Error):
        index = connect(store)
        try:
            index.note_changes(node_ids, patch_ids)
        finally:
            index.close()
