"""Ranking the files of a code graph for a task description, and the CodeGraphPack that shows them.

A file's score combines, for the words of the task:

- text relevance: BM25 (SQLite FTS5, Porter stemming) over the file's path, the
  names it defines and its contents, identifiers split at camelCase and
  snake_case;
- symbol-name matches: a definition whose name's parts are words of the task,
  weighted by how rare the name is (a name defined in many files counts little);
- definition sites: the file defining a name the task spells as code
  (``parse_args``, ``NetRCAuth``, in backticks or called with ``(``);
- files the task mentions by path or file name;
- a personalised PageRank over import and reference edges, seeded by the files
  above, so that what they lean on rises too;
- a small prior for files that changed often and lately (git churn);
- history as experience: the files that the past commits most like the task changed;
- the files the session already edited or read, when the caller (the hook) names them.

The order is deterministic: equal scores tie on the path. Everything the ranking
reads is in the graph's search index (``cclg.codegraph.search_index`` owns its
schema and writes it when the graph is built), so a query reads only the rows it
needs. The task's words come from ``cclg.core.text``'s code-search family.

``render_pack`` stays here, beside ``rank_files``: it is the one view of the
ranking's result records (path, why, symbols), which are defined here, and every
caller that shows a ranking to an agent (the hook, the MCP server) imports both.

Light on purpose: the hook imports this module (stdlib, ``cclg.core.text`` and
``cclg.core.fencing`` only; never gitpython or tree-sitter).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import defaultdict
from pathlib import Path

from cclg.codegraph.search_index import remove_with_journals
from cclg.core.fencing import quote_outside as quoted
from cclg.core.text import code_names, code_words, estimate_tokens, subject_components, without_component_prefix
from cclg.errors import UsageError

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from typing import Any

BM25_WEIGHTS = (0.0, 4.0, 3.0, 1.0)  # (the stored path), path words, defined names, contents
CANDIDATES = 200
SEEDS = 30
RESTART = 0.3
ITERATIONS = 4
FRONTIER = 100
HISTORY_COMMITS = 50  # past commits most like the task that vote for the files they changed
HISTORY_WEIGHT = 1.0  # a file the history points at most strongly gets as much as the best text match
NAMED_WEIGHT = 2.0  # a file the task names by path or file name
COMPONENT_WEIGHT = 1.0  # a file in the part of the code a commit-style subject names ("parser: ...")
GRAPH_WEIGHT = 2.0  # what the walk over imports and references spread to a file
DEFINITION_WEIGHT = 2.0  # the file defining a name the task spells as code (shared among its definers)
DEFINITION_MAX_DEFINERS = 3  # a name defined in more files than this points at none
SESSION_WEIGHT = 0.5  # a file the session edited or read: half the best text match (tuned: eval_codegraph's sessions)


# ---------------------------------------------------------------- ranking


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


def rank_files(
    index: Path, query: str, *, limit: int = 10, priors: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """The files to read first for ``query``: ``[{"path", "score", "symbols", "why", "signals"}]`` in
    rank order.

    ``index`` is the graph's search index (``cclg.codegraph.stored.search_index_path``). ``priors``:
    files the session already worked on (repository-relative path -> why), which rise a little.
    """
    words = code_words(query)
    if not words or not index.is_file():
        return []
    db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
    try:
        return _rank(db, query, words, limit, priors or {})
    except sqlite3.DatabaseError as exc:  # any failure to read it back: a projection, deleted to be built again
        db.close()
        remove_with_journals(index)
        raise SearchIndexDamage(
            f"the code graph's search index {index} was damaged ({exc}) and is deleted: "
            "`cclg code-index` on the repository builds it again"
        ) from None
    finally:
        db.close()


class SearchIndexDamage(UsageError):
    """The code graph's search index could not be read back; ``rank_files`` deleted it."""


def _rank(
    db: sqlite3.Connection, query: str, words: list[str], limit: int, priors: dict[str, str]
) -> list[dict[str, Any]]:
    why: dict[str, dict[str, str]] = defaultdict(dict)  # per file, each signal's reason
    signals: dict[str, dict[str, float]] = defaultdict(dict)  # per file, what each signal added
    base, matched_symbols = _base_scores(db, query, words, why, signals)
    for path, reason in sorted(priors.items()):
        base[path] = base.get(path, 0.0) + SESSION_WEIGHT
        signals[path]["session"] = SESSION_WEIGHT
        why[path]["session"] = reason
    seeds = dict(sorted(base.items(), key=lambda item: (-item[1], item[0]))[:SEEDS])
    spread = _personalised_pagerank(db, seeds)
    scores = _final_scores(db, base, spread, why, signals)
    ranked = sorted(scores, key=lambda p: (-round(scores[p], 9), p))[:limit]
    return [
        {
            "path": path,
            "score": round(scores[path], 4),
            "symbols": _key_symbols(db, path, matched_symbols.get(path, (0.0, []))[1]),
            "why": list(why[path].values()) or ["related to the matching files"],
            "reason": _main_reason(why[path], signals[path]),
            "signals": {name: round(value, 4) for name, value in signals[path].items()},
        }
        for path in ranked
    ]


def _base_scores(
    db: sqlite3.Connection,
    query: str,
    words: list[str],
    why: dict[str, dict[str, str]],
    signals: dict[str, dict[str, float]],
) -> tuple[dict[str, float], dict[str, tuple[float, list[str]]]]:
    """Per file, what the task says of it directly (text, names it defines, its path, the part of the
    code it is in, the past commits like it), with the reasons added to ``why`` and each signal's
    share to ``signals``; and the matching names per file."""
    base: dict[str, float] = defaultdict(float)

    def add(path: str, signal: str, score: float, reason: str) -> None:
        base[path] += score
        signals[path][signal] = signals[path].get(signal, 0.0) + score
        why[path][signal] = reason

    text = _text_scores(db, words)
    top = max(text.values(), default=1.0)
    for path, score in text.items():
        add(path, "text", score / top, "its text matches the task")
    subject = without_component_prefix(query)  # "fix(parser): ..." calls nothing named fix
    matched_symbols = _symbol_matches(db, words)
    for path, (score, names) in matched_symbols.items():
        add(path, "symbols", score, f"defines {', '.join(quoted(name) for name in names[:3])}")
    for path, (share, names) in _definitions(db, code_names(subject)).items():
        add(path, "definition", DEFINITION_WEIGHT * share, f"defines {quoted(names[0])}, named in the task")
        score, matched = matched_symbols.get(path, (0.0, []))
        matched_symbols[path] = (score, names + [name for name in matched if name not in names])  # shown first
    for path in _mentioned(db, query):
        add(path, "named", NAMED_WEIGHT, "named in the task")
    history, examples = _history_scores(db, words)
    for path, score in history.items():
        add(
            path,
            "history",
            HISTORY_WEIGHT * score,
            f"changed by past commits like this task ({quoted(examples[path][:60])})",
        )
    components = subject_components(query)
    for path in _in_components(db, components) if components else []:
        add(path, "component", COMPONENT_WEIGHT, "in the part of the code the task names")
    return base, matched_symbols


def _final_scores(
    db: sqlite3.Connection,
    base: dict[str, float],
    spread: dict[str, float],
    why: dict[str, dict[str, str]],
    signals: dict[str, dict[str, float]],
) -> dict[str, float]:
    """The direct scores plus what the walk spread, times the churn prior, for files the graph has."""
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
        score = base.get(path, 0.0) + GRAPH_WEIGHT * spread.get(path, 0.0)
        if path not in base and spread.get(path, 0.0) > 0:
            why[path]["graph"] = "imported or referenced by the matching files"
        if spread.get(path, 0.0) > 0:
            signals[path]["graph"] = GRAPH_WEIGHT * spread[path]
        prior = _prior(*history[path], newest)
        signals[path]["churn prior (times)"] = prior
        scores[path] = score * prior
    return scores


def _history_scores(db: sqlite3.Connection, words: list[str]) -> tuple[dict[str, float], dict[str, str]]:
    """Per file, how much the past commits most like the task changed it (BM25 of each commit's message,
    shared among the files it changed, summed, the best file at 1); and for each, the best commit's
    subject. Empty for an index built before history was kept."""
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    try:
        rows = db.execute(
            "SELECT c.rowid, -bm25(commits_text) AS score, c.message FROM commits_text c WHERE commits_text MATCH ?"
            " ORDER BY score DESC, c.rowid LIMIT ?",
            (match, HISTORY_COMMITS),
        ).fetchall()
    except sqlite3.OperationalError:  # no commits_text table: an index of an older schema
        return {}, {}
    scores: dict[str, float] = defaultdict(float)
    examples: dict[str, tuple[float, str]] = {}
    for commit, score, message in rows:
        files = [row[0] for row in db.execute("SELECT path FROM commit_files WHERE commit_id = ?", (commit,))]
        for path in files:
            scores[path] += score / math.sqrt(len(files))
            if path not in examples or score > examples[path][0]:
                examples[path] = (score, message.split("\n", 1)[0])
    top = max(scores.values(), default=0.0)
    if top <= 0:
        return {}, {}
    return {p: v / top for p, v in scores.items()}, {p: examples[p][1] for p in scores}


def _main_reason(why: dict[str, str], signals: dict[str, float]) -> str:
    """The reason of the signal that added most to a file's score: the one the CodeGraphPack shows."""
    given = [(value, name) for name, value in signals.items() if name in why]
    return why[max(given)[1]] if given else "related to the matching files"


def _key_symbols(db: sqlite3.Connection, path: str, names: list[str]) -> list[dict[str, Any]]:
    """Up to five definitions of the file to show: the ones the task matched, in the order of ``names``
    (the names the task spells out first), else its main ones."""
    symbols = db.execute(
        "SELECT name, kind, line, signature FROM symbols WHERE path = ? ORDER BY id", (path,)
    ).fetchall()
    order = {name: position for position, name in enumerate(names)}
    key_symbols = sorted((s for s in symbols if s[0] in order), key=lambda s: order[s[0]]) or [
        s for s in symbols if s[1] in ("class", "function", "type", "interface")
    ]
    return [
        {"name": name, "kind": kind, "line": line, "signature": signature}
        for name, kind, line, signature in key_symbols[:5]
    ]


def _symbol_matches(db: sqlite3.Connection, words: list[str]) -> dict[str, tuple[float, list[str]]]:
    """Per file: a score for definitions whose name parts are task words, and those names (a name the
    task spells out whole is the definition signal's, ``_definitions``)."""
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
            old_score, names = found.get(path, (0.0, []))
            if name not in names:
                names = [*names, name]
            found[path] = (max(old_score, score), names)
    return found


def _definitions(db: sqlite3.Connection, written: set[str]) -> dict[str, tuple[float, list[str]]]:
    """Per file, the share of the definition sites of the names the task spells as code (of four
    characters or more, defined in at most ``DEFINITION_MAX_DEFINERS`` files) that it holds, and those
    names."""
    names = sorted(name for name in written if len(name) >= 4)
    if not names:
        return {}
    found: dict[str, tuple[float, list[str]]] = {}
    rows = db.execute(
        f"SELECT DISTINCT name, path, definers FROM symbols WHERE name IN ({','.join('?' * len(names))})"
        " AND definers <= ? ORDER BY name, path",
        (*names, DEFINITION_MAX_DEFINERS),
    ).fetchall()
    for name, path, definers in rows:
        share, defined = found.get(path, (0.0, []))
        found[path] = (share + 1.0 / definers, defined if name in defined else [*defined, name])
    return found


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

    Only the heaviest ``FRONTIER`` files carry their mass on at each step, each to its
    heaviest links (the index's ``neighbours``, read once per file), so a query costs
    the same in a repository of ten thousand files as in one of a hundred.
    """
    if not seeds:
        return {}
    neighbours: dict[str, list[list[Any]]] = {}
    total = sum(seeds.values()) or 1.0
    restart = {path: value / total for path, value in seeds.items()}
    rank = dict(restart)
    for _ in range(ITERATIONS):
        step: dict[str, float] = defaultdict(float)
        carried = sorted(rank.items(), key=lambda item: (-item[1], item[0]))[:FRONTIER]
        _read_neighbours(db, [path for path, _ in carried if path not in neighbours], neighbours)
        for path, mass in carried:
            out = neighbours[path]
            if not out:
                step[path] += (1 - RESTART) * mass
                continue
            moving = (1 - RESTART) * mass
            for target, share in out:
                step[target] += moving * share
        for path, value in restart.items():
            step[path] += RESTART * value
        rank = step
    # What the walk adds beyond the restart distribution itself.
    return {path: max(0.0, value - RESTART * restart.get(path, 0.0)) for path, value in rank.items()}


def _read_neighbours(db: sqlite3.Connection, paths: list[str], into: dict[str, list[list[Any]]]) -> None:
    """Add each of ``paths``' links (``[[target, share], ...]``, none for a file without) to ``into``."""
    for path in paths:
        into[path] = []
    for first in range(0, len(paths), 500):
        chunk = paths[first : first + 500]
        marks = ",".join("?" * len(chunk))
        try:
            rows = db.execute(f"SELECT source, targets FROM neighbours WHERE source IN ({marks})", chunk).fetchall()
        except sqlite3.OperationalError:  # no neighbours table: an index of an older schema (no walk until rebuilt)
            return
        for source, targets in rows:
            into[source] = json.loads(targets)


def _prior(churn: int | None, last: int | None, newest: int) -> float:
    """1 plus a little for files that change often and changed lately (``newest``: the last commit's time)."""
    boost = 0.05 * math.log1p(churn or 0)
    if last and newest:
        age_days = max(0.0, (newest - last) / 86_400)
        boost += 0.05 / (1 + age_days / 30)
    return 1.0 + boost


# ---------------------------------------------------------------- the CodeGraphPack


def render_pack(files: list[dict[str, Any]], *, max_tokens: int = 800) -> str:
    """The CodeGraphPack as Markdown: files to read first, the main reason each is there and its key
    symbols, under ``max_tokens``.

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
        line = f"{rank}. {quoted(entry['path'])}: {entry.get('reason') or entry['why'][0]}" + (
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
