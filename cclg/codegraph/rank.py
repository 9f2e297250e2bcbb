"""Ranking the files of a code graph for a task description.

A file's score combines, for the words of the task:

- text relevance: BM25 (SQLite FTS5, Porter stemming) over the file's path, the
  names it defines and its contents, identifiers split at camelCase and
  snake_case (``active/codegraphs/<repo>.text.sqlite``, kept in step by
  ``update_text_index`` when the graph is built);
- symbol-name matches: a definition whose name's parts are words of the task,
  weighted by how rare the name is (a name defined in many files counts little);
- files the task mentions by path or file name;
- a personalised PageRank over import and reference edges, seeded by the files
  above, so that what they lean on rises too;
- a small prior for files that changed often and lately (git churn).

The order is deterministic: equal scores tie on the path.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections import defaultdict
from pathlib import Path

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
ITERATIONS = 20
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


# ---------------------------------------------------------------- the text index


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS files"
        " USING fts5(file UNINDEXED, path, names, body, tokenize='porter unicode61')"
    )
    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value)")
    return db


def update_text_index(
    path: Path, documents: dict[str, tuple[list[str], bytes | None]], keep: set[str], *, rebuild: bool
) -> None:
    """Bring the text index in step: ``documents`` maps changed files to (defined names, content);
    files not in ``keep`` are dropped. With ``rebuild`` everything is written afresh."""
    db = _connect(path)
    try:
        with db:
            if rebuild:
                db.execute("DELETE FROM files")
            else:
                stored = {row[0] for row in db.execute("SELECT file FROM files")}
                for gone in sorted((stored - keep) | (stored & set(documents))):
                    db.execute("DELETE FROM files WHERE file = ?", (gone,))
            db.executemany(
                "INSERT INTO files (file, path, names, body) VALUES (?, ?, ?, ?)",
                (
                    (
                        file,
                        split_identifiers(file.replace("/", " ").replace(".", " ")),
                        split_identifiers(" ".join(names)),
                        split_identifiers(content[:MAX_TEXT_CHARS].decode("utf-8", errors="replace"))
                        if content
                        else "",
                    )
                    for file, (names, content) in sorted(documents.items())
                ),
            )
            db.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (TEXT_SCHEMA,))
    finally:
        db.close()


def text_index_is_usable(path: Path, expected_files: int) -> bool:
    if not path.is_file():
        return False
    try:
        db = _connect(path)
        try:
            schema = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            count = db.execute("SELECT count(*) FROM files").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return False
    return schema is not None and schema[0] == TEXT_SCHEMA and count == expected_files


def text_scores(path: Path, words: list[str], limit: int = CANDIDATES) -> dict[str, float]:
    """BM25 of the files matching any of ``words`` (higher is better)."""
    if not words or not path.is_file():
        return {}
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            f"SELECT file, bm25(files, {weights}) AS rank FROM files WHERE files MATCH ? ORDER BY rank, file LIMIT ?",
            (match, limit),
        ).fetchall()
    finally:
        db.close()
    return {file: -rank for file, rank in rows}


# ---------------------------------------------------------------- ranking


def rank_files(graph: dict[str, Any], text_index: Path, query: str, *, limit: int = 10) -> list[dict[str, Any]]:
    """The files to read first for ``query``: ``[{"path", "score", "symbols", "why"}]`` in rank order."""
    words = query_words(query)
    files = {f["path"]: f for f in graph["files"]}
    if not words or not files:
        return []
    why: dict[str, list[str]] = defaultdict(list)
    base: dict[str, float] = defaultdict(float)

    text = text_scores(text_index, words)
    if text:
        top = max(text.values())
        for path, score in text.items():
            if path in files:
                base[path] += score / top
                why[path].append("its text matches the task")

    matched_symbols = _symbol_matches(graph, words, set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", query)))
    for path, (score, names) in matched_symbols.items():
        base[path] += score
        why[path].append(f"defines {', '.join(names[:3])}")

    for path in _mentioned(query, files):
        base[path] += 2.0
        why[path].append("named in the task")

    newest = max((f.get("last_commit") or 0 for f in files.values()), default=0)
    seeds = dict(sorted(base.items(), key=lambda item: (-item[1], item[0]))[:SEEDS])
    spread = _personalised_pagerank(graph, seeds)
    scores: dict[str, float] = {}
    for path in set(base) | set(spread):
        score = base.get(path, 0.0) + 2.0 * spread.get(path, 0.0)
        if path not in base and spread.get(path, 0.0) > 0:
            why[path].append("imported or referenced by the matching files")
        scores[path] = score * _prior(files[path], newest)
    ranked = sorted(scores, key=lambda p: (-round(scores[p], 9), p))[:limit]
    symbols_by_file = defaultdict(list)
    for symbol in graph["symbols"]:
        symbols_by_file[symbol["path"]].append(symbol)
    results = []
    for path in ranked:
        names = matched_symbols.get(path, (0.0, []))[1]
        key_symbols = [s for s in symbols_by_file[path] if s["name"] in names] or [
            s for s in symbols_by_file[path] if s["kind"] in ("class", "function", "type", "interface")
        ]
        results.append(
            {
                "path": path,
                "score": round(scores[path], 4),
                "symbols": [
                    {"name": s["name"], "kind": s["kind"], "line": s["line"], "signature": s["signature"]}
                    for s in key_symbols[:5]
                ],
                "why": why[path] or ["related to the matching files"],
            }
        )
    return results


def _symbol_matches(graph: dict[str, Any], words: list[str], written: set[str]) -> dict[str, tuple[float, list[str]]]:
    """Per file: a score for definitions whose name parts are task words, and those names.

    A name the task spells out whole (``InvoiceCalculator``, ``parse_args``) counts
    most: it says which definition is meant, where shared words only hint.
    """
    wanted = set(words)
    definers: dict[str, set[str]] = defaultdict(set)
    for symbol in graph["symbols"]:
        definers[symbol["name"]].add(symbol["path"])
    total = max(len(graph["files"]), 1)
    found: dict[str, tuple[float, list[str]]] = {}
    for symbol in graph["symbols"]:
        parts = query_words(symbol["name"].replace("_", " "))
        if not parts:
            continue
        hit = sum(1 for part in parts if part in wanted)
        if not hit:
            continue
        coverage = hit / len(parts)
        rarity = math.log(1 + total / len(definers[symbol["name"]])) / math.log(1 + total)
        score = coverage * rarity * (hit / max(len(wanted), 1))
        if symbol["name"] in written and len(symbol["name"]) >= 4:
            score += rarity
        old_score, names = found.get(symbol["path"], (0.0, []))
        if symbol["name"] not in names:
            names = [*names, symbol["name"]]
        found[symbol["path"]] = (max(old_score, score), names)
    return found


def _mentioned(query: str, files: dict[str, Any]) -> list[str]:
    """Files the task names by path or by file name (a name shared by several files names none)."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in files:
        by_name[path.rsplit("/", 1)[-1]].append(path)
    mentioned = set()
    for token in re.findall(r"[\w./-]+", query):
        token = token.strip("./")
        if token in files:
            mentioned.add(token)
        elif "." in token and len(by_name.get(token, [])) == 1:
            mentioned.add(by_name[token][0])
    return sorted(mentioned)


def _personalised_pagerank(graph: dict[str, Any], seeds: dict[str, float]) -> dict[str, float]:
    """Random walk with restart to ``seeds`` over import and reference edges (both directions)."""
    if not seeds:
        return {}
    neighbours: dict[str, dict[str, float]] = defaultdict(dict)
    for edge in graph["edges"]:
        if edge["type"] not in ("imports", "references"):
            continue
        a, b = edge["from"], edge["to"]
        weight = 1.0 if edge["type"] == "imports" else math.log1p(edge.get("weight", 1))
        neighbours[a][b] = neighbours[a].get(b, 0.0) + weight
        neighbours[b][a] = neighbours[b].get(a, 0.0) + 0.5 * weight
    total = sum(seeds.values()) or 1.0
    restart = {path: value / total for path, value in seeds.items()}
    rank = dict(restart)
    for _ in range(ITERATIONS):
        step: dict[str, float] = defaultdict(float)
        for path, mass in rank.items():
            out = neighbours.get(path)
            if not out:
                step[path] += (1 - RESTART) * mass
                continue
            out_total = sum(out.values())
            for target, weight in out.items():
                step[target] += (1 - RESTART) * mass * weight / out_total
        for path, value in restart.items():
            step[path] += RESTART * value
        rank = step
    # What the walk adds beyond the restart distribution itself.
    return {path: max(0.0, value - RESTART * restart.get(path, 0.0)) for path, value in rank.items()}


def _prior(file: dict[str, Any], newest: int) -> float:
    """1 plus a little for files that change often and changed lately (``newest``: the last commit's time)."""
    churn = file.get("churn") or 0
    boost = 0.05 * math.log1p(churn)
    last = file.get("last_commit")
    if last and newest:
        age_days = max(0.0, (newest - last) / 86_400)
        boost += 0.05 / (1 + age_days / 30)
    return 1.0 + boost


# ---------------------------------------------------------------- the CodeGraphPack


def estimate_tokens(text: str) -> int:
    """About four characters per token for code and English (the pack's estimate)."""
    return math.ceil(len(text) / 4)


def render_pack(files: list[dict[str, Any]], *, max_tokens: int = 800) -> str:
    """The CodeGraphPack as Markdown: files to read first, their key symbols and why, under ``max_tokens``.

    Paths, names and signatures come from the repository, so each is shown as a
    JSON string literal: nothing in them can open a heading or end the list.
    """
    import json

    def quoted(text: str) -> str:
        return json.dumps(text, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")

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
