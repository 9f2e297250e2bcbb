"""The code graph's search index: its SQLite schema and its writer.

The graph as the ranking (``cclg.codegraph.rank``) reads it, in SQLite beside the
graph's JSON (``active/codegraphs/<repo>.search.sqlite``, see
``cclg.codegraph.stored.search_index_path``): a query touches only the rows it
needs instead of parsing the whole graph. The tables:

- ``files_text`` (FTS5, Porter stemming): per file, its path, the names it
  defines and its contents (``text_body``), identifiers split at camelCase;
- ``files``: path, file name, churn and last commit time;
- ``symbols`` and ``symbol_words``: every definition with the words of its name,
  how many words that is and how many files define the name;
- ``neighbours``: per file, the files the graph walk carries its weight to: its heaviest
  ``WALK_LINKS`` import and reference links (both ways), as a JSON list of ``[path, share]``
  whose shares sum to one, so the walk reads one row a file;
- ``imports``: which file imports which (the sensors' reach asks who imports a file);
- ``commits_text`` (FTS5) and ``commit_files``: each past commit's message and the files it changed
  (history as experience: a task like an old commit is likely about the same files);
- ``meta``: the schema version, the newest commit time and the file count.

``build_graph`` writes it through one ``SearchIndexWriter`` per build, in one
transaction. A build after an edit replaces the text and the symbols of the
changed files only (and corrects the counts of files defining each name); the
other tables are written whole. The index is a projection of the graph and the
files, so a broken or outdated one is rebuilt (``search_index_is_usable``
decides), never repaired.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

from cclg.core.files import create_private
from cclg.core.text import code_words, split_identifiers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TEXT_SCHEMA = 4  # 2: the imports table; 3: commits' messages and files; 4: neighbours, symbols updated in place
MAX_TEXT_CHARS = 300_000  # of a file's contents are searchable
CACHE_KIB = 256 * 1024  # an update's changes stay in memory up to this size (SQLite's default: 2 MiB)
JOURNALS = ("-journal", "-wal", "-shm")
WALK_LINKS = 64  # a file's heaviest links carry the walk on (a file linked to hundreds spreads thin anyway)

_SCHEMA_SQL = """
CREATE VIRTUAL TABLE IF NOT EXISTS files_text
    USING fts5(file UNINDEXED, path, names, body, tokenize='porter unicode61');
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, name TEXT, churn INTEGER, last_commit INTEGER);
CREATE INDEX IF NOT EXISTS files_name ON files (name);
CREATE TABLE IF NOT EXISTS symbols (
    id INTEGER PRIMARY KEY, path TEXT, name TEXT, kind TEXT, line INTEGER, signature TEXT,
    parts INTEGER, definers INTEGER
);
CREATE INDEX IF NOT EXISTS symbols_path ON symbols (path);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols (name);
CREATE TABLE IF NOT EXISTS symbol_words (word TEXT, symbol INTEGER);
CREATE INDEX IF NOT EXISTS symbol_words_word ON symbol_words (word);
CREATE INDEX IF NOT EXISTS symbol_words_symbol ON symbol_words (symbol);
CREATE TABLE IF NOT EXISTS neighbours (source TEXT PRIMARY KEY, targets TEXT) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS commits_text USING fts5(message, tokenize='porter unicode61');
CREATE TABLE IF NOT EXISTS commit_files (commit_id INTEGER, path TEXT);
CREATE INDEX IF NOT EXISTS commit_files_commit ON commit_files (commit_id);
CREATE TABLE IF NOT EXISTS imports (source TEXT, target TEXT);
CREATE INDEX IF NOT EXISTS imports_target ON imports (target);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
"""


def _connect(path: Path) -> sqlite3.Connection:
    create_private(path)  # owner-only, like every store file (SQLite would follow the umask)
    db = sqlite3.connect(path)
    db.executescript(_SCHEMA_SQL)
    return db


def text_body(content: bytes | None) -> str:
    """A file's contents as the text index stores them: identifiers split (the slow part, done by
    the parse workers)."""
    return split_identifiers(content[:MAX_TEXT_CHARS].decode("utf-8", errors="replace")) if content else ""


class SearchIndexWriter:
    """One build's changes to the search index, in one transaction.

    Text rows are added as files are parsed (``add``); ``finish(graph)`` replaces
    the tables of files, symbols and links from the new graph (when the build
    changed anything) and commits. The index is a projection the next build can
    rebuild, so it is written without fsyncs; a torn one fails the usability check.

    Readers (the hook, on every prompt) must not wait on a build. A rebuild writes a
    new file beside the index (``<index>.building``) and renames it into place when
    done, so readers go on with the old index meanwhile (and the pages of the old
    text are gone with the old file). An update of the index in place keeps its
    changes in memory (``CACHE_KIB``) until the commit, so that SQLite locks readers
    out for the commit only, not from the first page it would otherwise spill.
    """

    def __init__(self, path: Path, *, rebuild: bool, keep: set[str], replaced: set[str]) -> None:
        building = path.with_name(path.name + ".building")
        remove_with_journals(building)  # what a killed rebuild left (builds take turns: none is running)
        self.path, self.building = path, (building if rebuild else None)
        self.db = _connect(self.building or path)
        self.db.execute("PRAGMA synchronous = OFF")
        if self.building is None:  # readers have this file open
            self.db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        self.db.execute("BEGIN")
        self.rewrite: set[str] | None = None  # the files whose symbols change (None: every file's)
        if rebuild:
            self.db.execute("DELETE FROM files_text")
        else:
            stored = {row[0] for row in self.db.execute("SELECT file FROM files_text")}
            for gone in sorted((stored - keep) | (stored & replaced)):
                self.db.execute("DELETE FROM files_text WHERE file = ?", (gone,))
            self.rewrite = (stored - keep) | replaced

    def add(self, file: str, names: list[str], body: str) -> None:
        """The text of one file: its path, the names it defines, its body (``text_body``)."""
        self.db.execute(
            "INSERT INTO files_text (file, path, names, body) VALUES (?, ?, ?, ?)",
            (
                file,
                split_identifiers(file.replace("/", " ").replace(".", " ")),
                split_identifiers(" ".join(names)),
                body,
            ),
        )

    def finish(self, graph: dict[str, Any] | None, history: list[tuple[str, list[str]]] | None = None) -> None:
        """Write ``graph``'s tables (none when it is None) and ``history``'s commits (the stored ones stay
        when it is None), and commit."""
        try:
            if graph is not None:
                _write_structure(self.db, graph, self.rewrite)
            if history is not None:
                _write_history(self.db, history)
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (TEXT_SCHEMA,))
            self.db.execute("COMMIT")
        finally:
            self.db.close()
        if self.building is not None:
            # A journal beside the old file (a writer killed mid-commit) would be rolled into the new one.
            remove_with_journals(self.path, keep_main=True)
            os.replace(self.building, self.path)

    def abandon(self) -> None:
        """Drop this build's changes (nothing happens if ``finish`` already ran)."""
        try:
            self.db.execute("ROLLBACK")
            self.db.close()
        except sqlite3.ProgrammingError:  # already closed by finish
            pass
        if self.building is not None:
            remove_with_journals(self.building)


def read_through(path: Path) -> None:
    """Read the search index at ``path`` back as a reader could meet it (``cclg doctor``): every B-tree
    walked (``PRAGMA quick_check``: a page SQLite finds malformed) and every row of every table decoded
    (text that is no longer UTF-8). A ``sqlite3.DatabaseError`` for what cannot be read: damage."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise sqlite3.DatabaseError(f"database disk image is malformed: {problems[0]}")
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for _ in db.execute(f'SELECT * FROM "{table}"'):
                pass


def remove_with_journals(path: Path, *, keep_main: bool = False) -> None:
    """Delete an SQLite file (unless ``keep_main``) and the journal files SQLite may have left beside it."""
    for leftover in (*(() if keep_main else (path,)), *(path.with_name(path.name + s) for s in JOURNALS)):
        leftover.unlink(missing_ok=True)


def _write_structure(db: sqlite3.Connection, graph: dict[str, Any], rewrite: set[str] | None) -> None:
    """Replace the files, neighbours and imports tables with the graph's, and its symbols: those of the
    files in ``rewrite`` only (the others' are as the last build wrote them), or all when it is None."""
    for table in ("files", "neighbours", "imports"):
        db.execute(f"DELETE FROM {table}")
    db.executemany(
        "INSERT INTO files VALUES (?, ?, ?, ?)",
        ((f["path"], f["path"].rsplit("/", 1)[-1], f["churn"], f["last_commit"]) for f in graph["files"]),
    )
    if rewrite is None or not _update_symbols(db, graph["symbols"], rewrite):
        _write_symbols(db, graph["symbols"])
    db.executemany("INSERT INTO neighbours VALUES (?, ?)", _neighbours(graph["edges"]))
    imports = sorted({(e["from"], e["to"]) for e in graph["edges"] if e["type"] == "imports" and e["from"] != e["to"]})
    db.executemany("INSERT INTO imports VALUES (?, ?)", imports)
    newest = max((f.get("last_commit") or 0 for f in graph["files"]), default=0)
    db.execute("INSERT OR REPLACE INTO meta VALUES ('newest', ?)", (newest,))
    db.execute("INSERT OR REPLACE INTO meta VALUES ('files', ?)", (len(graph["files"]),))


def _write_history(db: sqlite3.Connection, history: list[tuple[str, list[str]]]) -> None:
    """Replace the commits' messages (identifiers split, as the file text is) and their files."""
    db.execute("DELETE FROM commits_text")
    db.execute("DELETE FROM commit_files")
    for number, (message, files) in enumerate(history, 1):
        db.execute("INSERT INTO commits_text (rowid, message) VALUES (?, ?)", (number, split_identifiers(message)))
        db.executemany("INSERT INTO commit_files VALUES (?, ?)", ((number, path) for path in files))


def _definers(symbols: list[dict[str, Any]]) -> Counter[str]:
    """How many files define each name (a name defined everywhere says little)."""
    return Counter(name for name, _ in {(s["name"], s["path"]) for s in symbols})


def _symbol_rows(
    symbols: list[dict[str, Any]], first: int, definers: Counter[str]
) -> tuple[list[tuple[Any, ...]], list[tuple[str, int]]]:
    """The ``symbols`` rows of ``symbols``, numbered from ``first``, and their ``symbol_words`` rows."""
    parts_of: dict[str, list[str]] = {}
    words: list[tuple[str, int]] = []
    rows = []
    for number, symbol in enumerate(symbols, first):
        name = symbol["name"]
        if name not in parts_of:
            parts_of[name] = code_words(name.replace("_", " "))
        parts = parts_of[name]
        shown = (symbol["path"], name, symbol["kind"], symbol["line"], symbol["signature"])
        rows.append((number, *shown, len(parts), definers[name]))
        words.extend((part, number) for part in parts)
    return rows, words


def _write_symbols(db: sqlite3.Connection, symbols: list[dict[str, Any]]) -> None:
    db.execute("DELETE FROM symbols")
    db.execute("DELETE FROM symbol_words")
    rows, words = _symbol_rows(symbols, 1, _definers(symbols))
    db.executemany("INSERT INTO symbols VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO symbol_words VALUES (?, ?)", words)


def _update_symbols(db: sqlite3.Connection, symbols: list[dict[str, Any]], rewrite: set[str]) -> bool:
    """Replace the symbols of the files in ``rewrite`` and correct every stored definer count: what a
    one-file edit needs, instead of writing some 60,000 rows again. False when the stored symbols do
    not add up to the graph's: the caller then writes them all."""
    definers = _definers(symbols)
    paths = sorted(rewrite)
    stale: list[int] = []
    for first in range(0, len(paths), 500):
        chunk = paths[first : first + 500]
        marks = ",".join("?" * len(chunk))
        stale.extend(row[0] for row in db.execute(f"SELECT id FROM symbols WHERE path IN ({marks})", chunk))
    for first in range(0, len(stale), 500):
        chunk_ids = stale[first : first + 500]
        marks = ",".join("?" * len(chunk_ids))
        db.execute(f"DELETE FROM symbol_words WHERE symbol IN ({marks})", chunk_ids)
        db.execute(f"DELETE FROM symbols WHERE id IN ({marks})", chunk_ids)
    changed = [s for s in symbols if s["path"] in rewrite]
    if db.execute("SELECT count(*) FROM symbols").fetchone()[0] + len(changed) != len(symbols):
        return False
    top = db.execute("SELECT coalesce(max(id), 0) FROM symbols").fetchone()[0]
    rows, words = _symbol_rows(changed, top + 1, definers)
    db.executemany("INSERT INTO symbols VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO symbol_words VALUES (?, ?)", words)
    counts = db.execute("SELECT id, name, definers FROM symbols WHERE id <= ?", (top,)).fetchall()
    db.executemany(
        "UPDATE symbols SET definers = ? WHERE id = ?",
        [(definers[name], number) for number, name, stored in counts if stored != definers[name]],
    )
    return True


def _neighbours(edges: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Per file, its ``WALK_LINKS`` heaviest links as JSON ``[[path, share], ...]`` (heaviest first, ties
    by path; the shares sum to one). A link weighs what the file leans on, and half as much what
    leans on it (an import 1, references the log of their number)."""
    links: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for edge in edges:
        if edge["type"] not in ("imports", "references"):
            continue
        weight = 1.0 if edge["type"] == "imports" else math.log1p(edge.get("weight", 1))
        links[edge["from"]][edge["to"]] += weight
        links[edge["to"]][edge["from"]] += 0.5 * weight
    rows = []
    for source in sorted(links):
        heaviest = sorted(links[source].items(), key=lambda item: (-item[1], item[0]))[:WALK_LINKS]
        total = sum(weight for _, weight in heaviest) or 1.0
        rows.append((source, json.dumps([[target, weight / total] for target, weight in heaviest])))
    return rows


def index_schema(path: Path) -> int:
    """The schema version of the index at ``path`` (0 when it cannot be read), without changing it."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        finally:
            db.close()
    except sqlite3.Error:
        return 0
    return int(row[0]) if row and str(row[0]).isdigit() else 0


def search_index_is_usable(path: Path, expected_files: int) -> bool:
    """Whether the index at ``path`` is of this schema and holds the text of ``expected_files`` files."""
    if index_schema(path) != TEXT_SCHEMA:  # also when there is none or it cannot be read
        return False
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            count = db.execute("SELECT count(*) FROM files_text").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return False
    return bool(count == expected_files)
