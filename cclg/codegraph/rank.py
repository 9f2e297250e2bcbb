"""Ranking the files of a code graph for a task description.

A file's score combines, for the words of the task:

- text relevance: BM25 (SQLite FTS5, Porter stemming) over the file's path, the
  names it defines and its contents, identifiers split at camelCase and
  snake_case;
- symbol-name matches: a definition whose name's parts are words of the task,
  weighted by how rare the name is (a name defined in many files counts little);
- files the task mentions by path or file name;
- a personalised PageRank over import and reference edges, seeded by the files
  above, so that what they lean on rises too;
- a small prior for files that changed often and lately (git churn).

The order is deterministic: equal scores tie on the path. Everything the ranking
reads is in the graph's search index (``active/codegraphs/<repo>.search.sqlite``,
written by ``update_search_index`` when the graph is built), so a query reads only
the rows it needs.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path

from cclg.guard import estimate_tokens
from cclg.guard import json_literal as quoted
from cclg.text import STOPWORDS

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

TEXT_SCHEMA = 1
MAX_TEXT_CHARS = 300_000
BM25_WEIGHTS = (0.0, 4.0, 3.0, 1.0)  # (the stored path), path words, defined names, contents
CANDIDATES = 200
SEEDS = 30
RESTART = 0.3
ITERATIONS = 4
FRONTIER = 100
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def split_identifiers(text: str) -> str:
    """``parseHTTPHeader`` -> ``parse HTTP Header``; snake_case is split by the tokenizer itself."""
    return _CAMEL.sub(" ", text)


def query_words(text: str) -> list[str]:
    """The task's words, lower-cased, identifiers split, stopwords and one-letter words left out."""
    words = []
    for raw in _WORD.findall(split_identifiers(text)):
        word = raw.lower()
        if len(word) > 1 and word not in STOPWORDS and word not in words:
            words.append(word)
    return words


# ---------------------------------------------------------------- the search index

# The graph as the ranking reads it, in SQLite beside the graph's JSON: the query
# touches only the rows it needs instead of parsing the whole graph.
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
CREATE TABLE IF NOT EXISTS symbol_words (word TEXT, symbol INTEGER);
CREATE INDEX IF NOT EXISTS symbol_words_word ON symbol_words (word);
CREATE TABLE IF NOT EXISTS links (source TEXT, target TEXT, weight REAL);
CREATE INDEX IF NOT EXISTS links_source ON links (source);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
"""


def _connect(path: Path) -> sqlite3.Connection:
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
    """

    def __init__(self, path: Path, *, rebuild: bool, keep: set[str], replaced: set[str]) -> None:
        self.db = _connect(path)
        self.db.execute("PRAGMA synchronous = OFF")
        self.db.execute("BEGIN")
        if rebuild:
            self.db.execute("DELETE FROM files_text")
        else:
            stored = {row[0] for row in self.db.execute("SELECT file FROM files_text")}
            for gone in sorted((stored - keep) | (stored & replaced)):
                self.db.execute("DELETE FROM files_text WHERE file = ?", (gone,))

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

    def finish(self, graph: dict[str, Any] | None) -> None:
        try:
            if graph is not None:
                _write_structure(self.db, graph)
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (TEXT_SCHEMA,))
            self.db.execute("COMMIT")
        finally:
            self.db.close()

    def abandon(self) -> None:
        """Drop this build's changes (nothing happens if ``finish`` already ran)."""
        try:
            self.db.execute("ROLLBACK")
            self.db.close()
        except sqlite3.ProgrammingError:  # already closed by finish
            pass


def _write_structure(db: sqlite3.Connection, graph: dict[str, Any]) -> None:
    for table in ("files", "symbols", "symbol_words", "links"):
        db.execute(f"DELETE FROM {table}")
    db.executemany(
        "INSERT INTO files VALUES (?, ?, ?, ?)",
        ((f["path"], f["path"].rsplit("/", 1)[-1], f["churn"], f["last_commit"]) for f in graph["files"]),
    )
    # How many files define each name (a name defined everywhere says little).
    definers = Counter(name for name, _ in {(s["name"], s["path"]) for s in graph["symbols"]})
    parts_of = {name: query_words(name.replace("_", " ")) for name in definers}
    words: list[tuple[str, int]] = []
    rows = []
    for number, symbol in enumerate(graph["symbols"], 1):
        parts = parts_of[symbol["name"]]
        rows.append(
            (
                number,
                symbol["path"],
                symbol["name"],
                symbol["kind"],
                symbol["line"],
                symbol["signature"],
                len(parts),
                definers[symbol["name"]],
            )
        )
        words.extend((part, number) for part in parts)
    db.executemany("INSERT INTO symbols VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO symbol_words VALUES (?, ?)", words)
    links: dict[tuple[str, str], float] = defaultdict(float)
    for edge in graph["edges"]:
        if edge["type"] not in ("imports", "references"):
            continue
        weight = 1.0 if edge["type"] == "imports" else math.log1p(edge.get("weight", 1))
        links[(edge["from"], edge["to"])] += weight  # what a file leans on
        links[(edge["to"], edge["from"])] += 0.5 * weight  # and, less, what leans on it
    db.executemany("INSERT INTO links VALUES (?, ?, ?)", ((a, b, w) for (a, b), w in sorted(links.items())))
    newest = max((f.get("last_commit") or 0 for f in graph["files"]), default=0)
    db.execute("INSERT OR REPLACE INTO meta VALUES ('newest', ?)", (newest,))
    db.execute("INSERT OR REPLACE INTO meta VALUES ('files', ?)", (len(graph["files"]),))


def search_index_is_usable(path: Path, expected_files: int) -> bool:
    if not path.is_file():
        return False
    try:
        db = _connect(path)
        try:
            schema = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            count = db.execute("SELECT count(*) FROM files_text").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return False
    return schema is not None and schema[0] == TEXT_SCHEMA and count == expected_files


def _text_scores(db: sqlite3.Connection, words: list[str], limit: int = CANDIDATES) -> dict[str, float]:
    """BM25 of the files matching any of ``words`` (higher is better)."""
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    rows = db.execute(
        f"SELECT file, bm25(files_text, {weights}) AS rank FROM files_text WHERE files_text MATCH ?"
        " ORDER BY rank, file LIMIT ?",
        (match, limit),
    ).fetchall()
    return {file: -rank for file, rank in rows}


# ---------------------------------------------------------------- ranking


def rank_files(index: Path, query: str, *, limit: int = 10) -> list[dict[str, Any]]:
    """The files to read first for ``query``: ``[{"path", "score", "symbols", "why"}]`` in rank order.

    ``index`` is the graph's search index (``cclg.codegraph.stored.search_index_path``).
    """
    words = query_words(query)
    if not words or not index.is_file():
        return []
    db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        return _rank(db, query, words, limit)
    finally:
        db.close()


def _rank(db: sqlite3.Connection, query: str, words: list[str], limit: int) -> list[dict[str, Any]]:
    why: dict[str, list[str]] = defaultdict(list)
    base: dict[str, float] = defaultdict(float)

    text = _text_scores(db, words)
    if text:
        top = max(text.values())
        for path, score in text.items():
            base[path] += score / top
            why[path].append("its text matches the task")

    subject = _COMPONENTS.sub("", query, count=1)  # "fix(parser): ..." calls nothing named fix
    matched_symbols = _symbol_matches(db, words, code_names(subject))
    for path, (score, names) in matched_symbols.items():
        base[path] += score
        why[path].append(f"defines {', '.join(names[:3])}")

    for path in _mentioned(db, query):
        base[path] += 2.0
        why[path].append("named in the task")

    components = subject_components(query)
    if components:
        for path in _in_components(db, components):
            base[path] += 1.0
            why[path].append("in the part of the code the task names")

    seeds = dict(sorted(base.items(), key=lambda item: (-item[1], item[0]))[:SEEDS])
    spread = _personalised_pagerank(db, seeds)
    candidates = sorted(set(base) | set(spread))
    history = {
        path: (churn, last)
        for path, churn, last in db.execute(
            f"SELECT path, churn, last_commit FROM files WHERE path IN ({','.join('?' * len(candidates))})", candidates
        )
    }
    newest_row = db.execute("SELECT value FROM meta WHERE key = 'newest'").fetchone()
    newest = int(newest_row[0] or 0) if newest_row else 0
    scores: dict[str, float] = {}
    for path in candidates:
        if path not in history:
            continue  # the text index knows a file the graph no longer has
        score = base.get(path, 0.0) + 2.0 * spread.get(path, 0.0)
        if path not in base and spread.get(path, 0.0) > 0:
            why[path].append("imported or referenced by the matching files")
        scores[path] = score * _prior(*history[path], newest)
    ranked = sorted(scores, key=lambda p: (-round(scores[p], 9), p))[:limit]
    results = []
    for path in ranked:
        names = matched_symbols.get(path, (0.0, []))[1]
        symbols = db.execute(
            "SELECT name, kind, line, signature FROM symbols WHERE path = ? ORDER BY id", (path,)
        ).fetchall()
        key_symbols = [s for s in symbols if s[0] in names] or [
            s for s in symbols if s[1] in ("class", "function", "type", "interface")
        ]
        results.append(
            {
                "path": path,
                "score": round(scores[path], 4),
                "symbols": [
                    {"name": name, "kind": kind, "line": line, "signature": signature}
                    for name, kind, line, signature in key_symbols[:5]
                ],
                "why": why[path] or ["related to the matching files"],
            }
        )
    return results


def _symbol_matches(db: sqlite3.Connection, words: list[str], written: set[str]) -> dict[str, tuple[float, list[str]]]:
    """Per file: a score for definitions whose name parts are task words, and those names.

    A name the task spells out whole (``InvoiceCalculator``, ``parse_args``) counts
    most: it says which definition is meant, where shared words only hint.
    """
    wanted = set(words)
    total_row = db.execute("SELECT value FROM meta WHERE key = 'files'").fetchone()
    total = max(int(total_row[0]) if total_row else 1, 1)
    hits: dict[int, int] = defaultdict(int)
    marks = ",".join("?" * len(wanted))
    for (symbol,) in db.execute(f"SELECT symbol FROM symbol_words WHERE word IN ({marks})", sorted(wanted)):
        hits[symbol] += 1
    found: dict[str, tuple[float, list[str]]] = {}
    ids = sorted(hits)
    for first in range(0, len(ids), 500):
        chunk = ids[first : first + 500]
        for symbol, path, name, parts, definers in db.execute(
            f"SELECT id, path, name, parts, definers FROM symbols WHERE id IN ({','.join('?' * len(chunk))})", chunk
        ):
            hit = min(hits[symbol], parts)
            rarity = math.log(1 + total / max(definers, 1)) / math.log(1 + total)
            score = (hit / max(parts, 1)) * rarity * (hit / max(len(wanted), 1))
            if name in written and len(name) >= 4:
                score += rarity
            old_score, names = found.get(path, (0.0, []))
            if name not in names:
                names = [*names, name]
            found[path] = (max(old_score, score), names)
    return found


_CODE_NAME = re.compile(
    r"`([^`]+)`"  # written in backticks
    r"|\b([A-Za-z_][A-Za-z0-9_]*)\("  # called: name(
    r"|\b([A-Za-z0-9]*[a-z0-9][A-Z][A-Za-z0-9]*|[A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]|[A-Z]{2,}[a-z][A-Za-z0-9]*)\b"
)
_COMPONENTS = re.compile(r"^\s*([\w./,\- ]+?)(?:\(([\w./,\- ]+)\))?!?:\s")


def code_names(query: str) -> set[str]:
    """Names the task spells the way code does: ``snake_case``, ``camelCase``, ``HTTPServer``,
    in backticks or called with ``(``. Plain words ("add", "types") are not among them."""
    names = set()
    for match in _CODE_NAME.finditer(query):
        for group in match.groups():
            if group:
                names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", group))
    return names


def subject_components(query: str) -> list[list[str]]:
    """The parts of the code a commit-style subject names before its colon: ``ignore/types: ...``
    gives [["ignore", "types"]], ``ignore,globset: ...`` [["ignore"], ["globset"]], ``fix(parser): ...``
    [["parser"]]. Each component is a list of path words that must all appear in a file's path."""
    match = _COMPONENTS.match(query)
    if not match:
        return []
    text = match.group(2) or match.group(1)
    if match.group(2) is None and " " in text.strip():
        return []  # "Fix the bug: ..." is a sentence, not a component
    components = []
    for part in re.split(r"[, ]+", text):
        words = [w.lower() for w in re.split(r"[/.\-]+", part) if w]
        if words:
            components.append(words)
    return components


def _in_components(db: sqlite3.Connection, components: list[list[str]]) -> list[str]:
    """Files whose path words (split at ``/ _ - .``) hold every word of one of ``components``."""
    found = []
    for (path,) in db.execute("SELECT path FROM files ORDER BY path"):
        segments = set(re.split(r"[/_.\-]+", path.lower()))
        if any(all(word in segments for word in words) for words in components):
            found.append(path)
    return found if len(found) <= 50 else []  # a component everything is in says nothing


def _mentioned(db: sqlite3.Connection, query: str) -> list[str]:
    """Files the task names by path or by file name (a name shared by several files names none)."""
    mentioned = set()
    for token in re.findall(r"[\w./-]+", query):
        token = token.strip("./")
        if "." not in token and "/" not in token:
            continue
        if db.execute("SELECT 1 FROM files WHERE path = ?", (token,)).fetchone():
            mentioned.add(token)
            continue
        if "/" in token and "." not in token.rsplit("/", 1)[-1]:  # a path without its extension
            suffix = db.execute(
                "SELECT path FROM files WHERE path LIKE ? ESCAPE '\\' LIMIT 2", ("%" + _like(token) + ".%",)
            ).fetchall()
            if len(suffix) == 1:
                mentioned.add(suffix[0][0])
                continue
        named = db.execute("SELECT path FROM files WHERE name = ? LIMIT 2", (token,)).fetchall()
        if len(named) == 1:
            mentioned.add(named[0][0])
    return sorted(mentioned)


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _personalised_pagerank(db: sqlite3.Connection, seeds: dict[str, float]) -> dict[str, float]:
    """A few steps of a random walk with restart to ``seeds`` over the import and reference links.

    Only the heaviest ``FRONTIER`` files carry their mass on at each step, so a query
    costs the same in a repository of ten thousand files as in one of a hundred.
    """
    if not seeds:
        return {}
    neighbours: dict[str, list[tuple[str, float]]] = {}

    def links(path: str) -> list[tuple[str, float]]:
        if path not in neighbours:
            neighbours[path] = db.execute(
                "SELECT target, weight FROM links WHERE source = ? ORDER BY target", (path,)
            ).fetchall()
        return neighbours[path]

    total = sum(seeds.values()) or 1.0
    restart = {path: value / total for path, value in seeds.items()}
    rank = dict(restart)
    for _ in range(ITERATIONS):
        step: dict[str, float] = defaultdict(float)
        carried = sorted(rank.items(), key=lambda item: (-item[1], item[0]))
        for path, mass in carried[:FRONTIER]:
            out = links(path)
            if not out:
                step[path] += (1 - RESTART) * mass
                continue
            out_total = sum(weight for _, weight in out)
            for target, weight in out:
                step[target] += (1 - RESTART) * mass * weight / out_total
        for path, value in restart.items():
            step[path] += RESTART * value
        rank = step
    # What the walk adds beyond the restart distribution itself.
    return {path: max(0.0, value - RESTART * restart.get(path, 0.0)) for path, value in rank.items()}


def _prior(churn: int | None, last: int | None, newest: int) -> float:
    """1 plus a little for files that change often and changed lately (``newest``: the last commit's time)."""
    boost = 0.05 * math.log1p(churn or 0)
    if last and newest:
        age_days = max(0.0, (newest - last) / 86_400)
        boost += 0.05 / (1 + age_days / 30)
    return 1.0 + boost


# ---------------------------------------------------------------- the CodeGraphPack


def render_pack(files: list[dict[str, Any]], *, max_tokens: int = 800) -> str:
    """The CodeGraphPack as Markdown: files to read first, their key symbols and why, under ``max_tokens``.

    Paths, names and signatures come from the repository, so each is shown as a
    JSON string literal, as the memory pack shows stored text: nothing in them can
    open a heading or end the list. Tokens are estimated as the memory pack does.
    """
    lines = [
        "## Code graph: files to read first",
        "",
        "A reading-order hint from the repository's structure and history, not proof of what the code does: "
        "read the files before relying on them.",
        "",
    ]
    used = estimate_tokens("\n".join(lines))
    shown = 0
    for rank, entry in enumerate(files, 1):
        symbols = "; ".join(
            f"{quoted(s['name'])} ({s['kind']}, line {s['line']})" for s in entry.get("symbols", [])[:4]
        )
        line = f"{rank}. {quoted(entry['path'])}: {'; '.join(entry['why'])}" + (
            f". Symbols: {symbols}" if symbols else ""
        )
        cost = estimate_tokens(line) + 1
        if used + cost > max_tokens:
            break
        lines.append(line)
        used += cost
        shown += 1
    if shown == 0:
        return ""
    if shown < len(files):
        lines.append(f"({len(files) - shown} more files left out for the budget.)")
    return "\n".join(lines) + "\n"
