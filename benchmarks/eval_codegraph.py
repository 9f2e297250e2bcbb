"""Code-localisation evaluation of `cclg code-search` against plain BM25, from git history.

Run by hand (not part of the test suite):

    python benchmarks/eval_codegraph.py REPO_PATH [REPO_PATH ...] [--commits 200] [--per-commit]
                                        [--workdir /tmp/cg-eval] [--show-misses N] [--json] [--save FILE]

REPO_PATH is a git work tree or a bare repository; it is only read, except that
a detached worktree is added to it for the run (``git worktree add``) and
removed afterwards.

The task: given what a commit says it does, find the files it changed. For each
repository the most recent non-merge commits (up to ``--commits``) that change 1
to 3 source files (files with a language known to
``cclg.codegraph.languages.language_of``; renames count as a deletion plus an
addition) and modify or delete at least one file that existed before the commit
are the queries: the commit subject is the query, the changed source files that
existed before the commit are the answer. A commit that only adds files is
skipped (nothing to localise).

No leakage. The default scheme indexes the repository once, AS IT WAS BEFORE the
evaluated commits: the base is the parent of the oldest selected commit, a
detached worktree is made at the base and indexed with ``build_graph`` into a
fresh store, so the file contents, symbols, import edges, churn and co-change
counts all come from history before every evaluated commit. Commits whose answer
files do not all exist at the base (files created by a later commit) are
dropped, and counted. The price is a stale index for the newest commits (the
code moved on between the base and the commit).

``--per-commit`` is the exact scheme: the worktree is moved to each commit's
parent in turn, oldest first, and re-indexed (``build_graph`` is incremental: it
re-parses only the files that changed), so every query sees exactly the
repository its author saw. Nothing after the parent is ever indexed, and no
commit is dropped for its files being younger than a base. Slower: one
incremental index (history read included) per query.

Rankers, on the same queries and the same files (the graph's files; text is the
content of the files cclg parsed, cut at ``search_index.MAX_TEXT_CHARS`` as cclg's text
index cuts it):

- ``cclg``: ``rank_files`` as ``cclg code-search`` calls it (BM25 over path,
  names and contents, symbol matches, named files, PageRank, churn prior);
- ``bm25``: a plain BM25 over file contents computed here: text lower-cased,
  split at non-alphanumerics and camelCase, k1=1.2, b=0.75, no stopwords, no
  stemming, no path or symbol boosts; the query is tokenised the same way;
- ``path``: the same BM25 over the file paths only, for context.

Metrics, per query then averaged: hit@1 and hit@5 (any answer file among the
first 1 or 5), recall@5 (share of the answer files among the first 5) and MRR
(1 / rank of the first answer file within the first ``--depth``, else 0). Queries
are split in two by their commit hash (last hex digit even: ``tune``, odd:
``held_out``) so that ranking constants can be chosen on one half and checked
on the other; both halves and their union are reported, per repository and
pooled over all repositories. Repositories are split in two as well
(``repository_half``, by the first letter of the name), and the pooled figures
are given for each half. Index time is the in-process ``build_graph`` time
of the first (cold) index; with ``--per-commit`` the incremental re-index time
is given too. ``--show-misses N`` prints up to N queries per repository where
cclg misses the top 5 and BM25 hits it, for diagnosis; ``--json`` prints the
results (with every query's ranks) as JSON instead of the tables. Stores and
worktrees live under ``--workdir`` and are removed afterwards; ``--save FILE``
writes the JSON to FILE as well.

Sessions as priors (base mode only). The hook lifts the files the session
already edited; the evaluation has no agent sessions, so it takes a developer's
working session as one: a commit's *session files* are the source files changed
by the same author's commits just before it (each within ``SESSION_GAP`` of the
next, among the commits read), files that exist at the base. For the queries
that have any, ``cclg+session`` ranks again with those files as priors, as the
hook passes them, and the session table compares it with ``cclg`` and ``bm25`` on
exactly those queries. Nothing of the query commit itself is used.

A subject with no word cclg can search for ("Typo", "0.74.0") gets an empty
ranking and counts as a miss; it stays in (the baselines may match its digits).
The first output line names the cclg under test (its commit); to compare cclg
versions on the same queries, run this script with ``PYTHONPATH`` pointing at an
older checkout of the package (``cclg_ranker`` speaks the earlier ``rank_files``
signatures too).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cclg
from cclg.codegraph.build import build_graph
from cclg.codegraph.languages import language_of
from cclg.codegraph.rank import rank_files
from cclg.codegraph.search_index import MAX_TEXT_CHARS
from cclg.core.store import Store

RANKERS = ("cclg", "bm25", "path")
SPLITS = ("tune", "held_out")
MIN_FILES, MAX_FILES = 1, 3
K1, B = 1.2, 0.75
TOP = 5
SESSION_GAP = 2 * 3600  # seconds between one commit of a working session and the next
SESSION_RANKERS = ("cclg", "cclg+session", "bm25")


# ---------------------------------------------------------------- git


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, errors="replace"
    ).stdout


@dataclass
class Query:
    sha: str
    parent: str
    subject: str
    answer: list[str]  # changed source files that existed before the commit
    changed: int  # source files the commit changed, added ones included
    split: str
    session: list[str] = field(default_factory=list)  # source files the author's session changed before it
    ranks: dict[str, list[str]] = field(default_factory=dict)  # ranker -> ranked paths


def select_commits(repo: Path, limit: int) -> tuple[list[Query], int]:
    """The newest ``limit`` qualifying commits (newest first) and how many commits were read to find them."""
    process = subprocess.Popen(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "core.quotePath=false",  # file names as they are, not octal-escaped
            "log",
            "--no-merges",
            "--no-renames",
            "--format=%x00%H%x09%P%x09%at%x09%aE%x09%s",
            "--name-status",
            "HEAD",
        ],
        stdout=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    assert process.stdout is not None
    found: list[Query] = []
    timeline: list[tuple[str, int, list[str], Query | None]] = []  # author, time, source files; newest first
    read = 0

    def take(chunk: str) -> None:
        nonlocal read
        header, _, body = chunk.partition("\n")
        sha, parents, stamp, author, subject = (header.split("\t", 4) + [""] * 5)[:5]
        read += 1
        source: list[tuple[str, str]] = []
        for line in body.splitlines():
            status, _, path = line.partition("\t")
            if path and language_of(path) is not None:
                source.append((status[:1], path))
        timeline.append((author, int(stamp) if stamp.isdigit() else 0, [path for _, path in source], None))
        if not parents.strip() or " " in parents.strip():  # root commit (or a merge)
            return
        answer = sorted({path for status, path in source if status != "A"})
        if MIN_FILES <= len(source) <= MAX_FILES and answer:
            split = SPLITS[int(sha[-1], 16) % 2]
            found.append(Query(sha, parents.strip(), subject.strip(), answer, len(source), split))
            timeline[-1] = (*timeline[-1][:3], found[-1])

    pending = ""
    try:
        for line in process.stdout:
            if line.startswith("\0"):
                if pending:
                    take(pending)
                    if len(found) >= limit:
                        break
                pending = line[1:]
            else:
                pending += line
        else:
            if pending and len(found) < limit:
                take(pending)
    finally:
        process.kill()
        process.wait()
    for i, (author, when, _, query) in enumerate(timeline):
        if query is not None:
            query.session = session_files(timeline[i + 1 :], author, when)
    return found[:limit], read


def session_files(older: list[tuple[str, int, list[str], Query | None]], author: str, when: int) -> list[str]:
    """The source files changed by ``author``'s commits just before ``when`` (``older``: newest first),
    each within ``SESSION_GAP`` of the next: the commit's working session so far."""
    files: set[str] = set()
    last = when
    for other, time_, paths, _ in older:
        if last - time_ > SESSION_GAP:
            break
        if other == author:
            files.update(paths)
            last = time_
    return sorted(files)


def open_repository(path: Path) -> tuple[Path, str]:
    """The git directory or work tree to run git in, and a short name for the repository."""
    path = path.resolve()
    bare = git(path, "rev-parse", "--is-bare-repository").strip() == "true"
    if bare:
        name = path.name.removesuffix(".git")
        if name in ("repo", ""):  # a mirror kept as <folder named owner+name>/repo
            name = path.parent.name.split("+")[-1]
    else:
        name = Path(git(path, "rev-parse", "--show-toplevel").strip()).name
    return path, name


def add_worktree(repo: Path, where: Path, sha: str) -> None:
    remove_worktree(repo, where)
    where.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--detach", str(where), sha)


def remove_worktree(repo: Path, where: Path) -> None:
    if where.exists():
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(where)], capture_output=True)
        shutil.rmtree(where, ignore_errors=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "prune"], capture_output=True)


def session_ranker(store: Store, graph: dict[str, Any]) -> Callable[[str, int, dict[str, str]], list[dict[str, Any]]]:
    """``rank_files`` as the hook calls it, with the files the session worked on as priors."""
    from cclg.codegraph.stored import search_index_path

    index = search_index_path(store, Path(graph["root"]))
    return lambda query, limit, priors: rank_files(index, query, limit=limit, priors=priors)


def cclg_ranker(store: Store, graph: dict[str, Any]) -> Callable[[str, int], list[dict[str, Any]]]:
    """``rank_files`` called as ``cclg code-search`` calls it, for the cclg under test.

    Earlier cclg versions took the graph and a text index, so that older checkouts
    (``PYTHONPATH=/path/to/old/cclg``) can be measured on the same queries."""
    root = Path(graph["root"])
    try:  # the ranking reads only the graph's search index
        from cclg.codegraph.stored import search_index_path

        index = search_index_path(store, root)
        return lambda query, limit: rank_files(index, query, limit=limit)
    except ImportError:
        pass
    try:  # the graph and a text index beside it
        from cclg.codegraph.stored import text_index_path  # type: ignore[attr-defined]

        text = text_index_path(store, root)
    except ImportError:  # the first code graph: the text index's path derived from the graph file's
        from cclg.codegraph.build import graph_path  # type: ignore[attr-defined]
        from cclg.codegraph.rank import text_index_path as beside  # type: ignore[attr-defined]

        text = beside(graph_path(store, root))
    return lambda query, limit: rank_files(graph, text, query, limit=limit)  # type: ignore[call-arg]


def cclg_version() -> str:
    """The cclg under test: its git commit (``+dirty`` with uncommitted changes) when run from a checkout."""
    source = Path(cclg.__file__).resolve().parent.parent
    try:
        head = git(source, "rev-parse", "--short=10", "HEAD").strip()
        dirty = git(source, "status", "--porcelain", "--untracked-files=no", "--", "cclg").strip()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        return f"{getattr(cclg, '__version__', '?')} at {source}"
    return head + ("+dirty" if dirty else "")


# ---------------------------------------------------------------- the BM25 baselines

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^0-9A-Za-z]+")


def tokens(text: str) -> list[str]:
    """Lower-cased words split at non-alphanumerics and camelCase."""
    return [t for t in _SPLIT.split(_CAMEL.sub(" ", text).lower()) if t]


class Bm25:
    """Okapi BM25 (k1=1.2, b=0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))) over ``{name: token counts}``."""

    def __init__(self, documents: dict[str, Counter[str]]) -> None:
        self.documents = documents
        self.lengths = {name: sum(counts.values()) for name, counts in documents.items()}
        self.average = (sum(self.lengths.values()) / len(documents)) if documents else 1.0
        self.df: dict[str, int] = {}

    def idf(self, term: str) -> float:
        if term not in self.df:
            self.df[term] = sum(1 for counts in self.documents.values() if term in counts)
        n, df = len(self.documents), self.df[term]
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def rank(self, query: str, limit: int) -> list[str]:
        terms = list(dict.fromkeys(tokens(query)))
        weights = {term: self.idf(term) for term in terms}
        scores: dict[str, float] = {}
        for name, counts in self.documents.items():
            score = 0.0
            norm = K1 * (1 - B + B * self.lengths[name] / (self.average or 1.0))
            for term, weight in weights.items():
                tf = counts.get(term)
                if tf:
                    score += weight * tf * (K1 + 1) / (tf + norm)
            if score > 0:
                scores[name] = score
        return sorted(scores, key=lambda name: (-scores[name], name))[:limit]


class Corpus:
    """The baselines' documents for the graph's files; token counts cached by content hash across re-indexes."""

    def __init__(self) -> None:
        self.cache: dict[str, Counter[str]] = {}

    def baselines(self, root: Path, graph: dict[str, Any]) -> tuple[Bm25, Bm25]:
        contents: dict[str, Counter[str]] = {}
        paths: dict[str, Counter[str]] = {}
        for entry in graph["files"]:
            path = entry["path"]
            paths[path] = Counter(tokens(path))
            data = b""
            if entry.get("parsed"):
                try:
                    data = (root / path).read_bytes()
                except OSError:
                    data = b""
            key = hashlib.sha1(data, usedforsecurity=False).hexdigest()
            if key not in self.cache:
                self.cache[key] = Counter(tokens(data.decode("utf-8", errors="replace")[:MAX_TEXT_CHARS]))
            contents[path] = self.cache[key]
        return Bm25(contents), Bm25(paths)


# ---------------------------------------------------------------- evaluation


def metrics(queries: list[Query], ranker: str, depth: int) -> dict[str, float]:
    if not queries:
        return {"hit@1": math.nan, "hit@5": math.nan, "recall@5": math.nan, "mrr": math.nan}
    hit1 = hit5 = recall5 = mrr = 0.0
    for q in queries:
        ranked = q.ranks[ranker][:depth]
        answer = set(q.answer)
        hit1 += bool(ranked[:1] and ranked[0] in answer)
        top = answer.intersection(ranked[:TOP])
        hit5 += bool(top)
        recall5 += len(top) / len(answer)
        first = next((i for i, path in enumerate(ranked, 1) if path in answer), None)
        mrr += 1 / first if first else 0.0
    n = len(queries)
    return {"hit@1": hit1 / n, "hit@5": hit5 / n, "recall@5": recall5 / n, "mrr": mrr / n}


def rank_all(
    q: Query, ranker: Callable[[str, int], list[dict[str, Any]]], content: Bm25, paths: Bm25, depth: int, timing: dict
) -> None:
    start = time.perf_counter()
    q.ranks["cclg"] = [entry["path"] for entry in ranker(q.subject, depth)]
    timing["cclg"].append(time.perf_counter() - start)
    start = time.perf_counter()
    q.ranks["bm25"] = content.rank(q.subject, depth)
    timing["bm25"].append(time.perf_counter() - start)
    q.ranks["path"] = paths.rank(q.subject, depth)


def evaluate_repository(source: Path, args: argparse.Namespace) -> dict[str, Any]:
    repo, name = open_repository(source)
    head = git(repo, "rev-parse", "HEAD").strip()
    say(f"[{name}] selecting commits from {source} @ {head[:10]} ...")
    selected, read = select_commits(repo, args.commits)
    result: dict[str, Any] = {
        "name": name,
        "path": str(source),
        "head": head,
        "mode": "per-commit" if args.per_commit else "base",
        "commits_read": read,
        "selected": len(selected),
    }
    if not selected:
        say(f"[{name}] no qualifying commits")
        return {**result, "queries": [], "evaluated": 0}
    base = selected[-1].parent
    where = args.workdir / f"{name}-base"
    store_dir = Path(tempfile.mkdtemp(prefix=f"{name}-store-", dir=args.workdir))
    timing: dict[str, list[float]] = {"cclg": [], "bm25": [], "index": []}
    corpus = Corpus()
    evaluated: list[Query] = []
    dropped = 0
    try:
        store, _ = Store.init(store_dir / "store")
        add_worktree(repo, where, base)
        if not args.per_commit:
            say(f"[{name}] indexing the base {base[:10]} ...")
            start = time.perf_counter()
            graph = build_graph(store, where)
            timing["index"].append(time.perf_counter() - start)
            ranker = cclg_ranker(store, graph)
            content, paths = corpus.baselines(where, graph)
            files = {f["path"] for f in graph["files"]}
            result["base"] = {"sha": base, "date": git(repo, "log", "-1", "--format=%cI", base).strip()}
            result["index"] = {**graph["summary"], "wall_seconds": round(timing["index"][0], 3)}
            with_priors = session_ranker(store, graph)
            for q in selected:
                if not set(q.answer) <= files:
                    dropped += 1
                    continue
                rank_all(q, ranker, content, paths, args.depth, timing)
                evaluated.append(q)
                priors = {path: "edited in this session" for path in q.session if path in files}
                if priors:
                    q.ranks["cclg+session"] = [e["path"] for e in with_priors(q.subject, args.depth, priors)]
        else:
            first_summary = None
            for i, q in enumerate(reversed(selected), 1):
                git(where, "checkout", "-q", "--detach", q.parent)
                start = time.perf_counter()
                graph = build_graph(store, where)
                timing["index"].append(time.perf_counter() - start)
                first_summary = first_summary or graph["summary"]
                files = {f["path"] for f in graph["files"]}
                if not set(q.answer) <= files:  # a file in a skipped folder (vendor/, build/, ...)
                    dropped += 1
                    continue
                ranker = cclg_ranker(store, graph)
                content, paths = corpus.baselines(where, graph)
                rank_all(q, ranker, content, paths, args.depth, timing)
                evaluated.append(q)
                if i % 25 == 0:
                    say(f"[{name}] {i}/{len(selected)} commits")
            evaluated.reverse()
            result["base"] = {"sha": base, "date": git(repo, "log", "-1", "--format=%cI", base).strip()}
            incremental = timing["index"][1:]
            result["index"] = {
                **(first_summary or {}),
                "wall_seconds": round(timing["index"][0], 3),
                "incremental_median_seconds": round(statistics.median(incremental), 3) if incremental else None,
                "incremental_total_seconds": round(sum(incremental), 1),
            }
    finally:
        remove_worktree(repo, where)
        shutil.rmtree(store_dir, ignore_errors=True)
    result["evaluated"] = len(evaluated)
    result["dropped"] = dropped
    result["newest"] = {"sha": selected[0].sha, "date": git(repo, "log", "-1", "--format=%cI", selected[0].sha).strip()}
    result["query_ms"] = {
        ranker: round(1000 * statistics.median(timing[ranker]), 2) for ranker in ("cclg", "bm25") if timing[ranker]
    }
    result["metrics"] = table(evaluated, args.depth)
    result["sessions"] = table([q for q in evaluated if "cclg+session" in q.ranks], args.depth, SESSION_RANKERS)
    result["answer_files_per_query"] = (
        round(sum(len(q.answer) for q in evaluated) / len(evaluated), 2) if evaluated else None
    )
    result["queries"] = [
        {
            "sha": q.sha,
            "subject": q.subject,
            "split": q.split,
            "answer": q.answer,
            **{f"{ranker}_top": q.ranks[ranker][:TOP] for ranker in RANKERS},
            **{f"{ranker}_rank": first_rank(q, ranker) for ranker in RANKERS},
        }
        for q in evaluated
    ]
    result["_queries"] = evaluated
    return result


def first_rank(q: Query, ranker: str) -> int | None:
    answer = set(q.answer)
    return next((i for i, path in enumerate(q.ranks[ranker], 1) if path in answer), None)


def table(queries: list[Query], depth: int, rankers: tuple[str, ...] = RANKERS) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in (*SPLITS, "all"):
        chosen = [q for q in queries if split == "all" or q.split == split]
        out[split] = {"queries": len(chosen), **{r: metrics(chosen, r, depth) for r in rankers}}
    return out


# ---------------------------------------------------------------- output


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def header(rankers: tuple[str, ...] = RANKERS) -> str:
    cells = " | ".join(f"{r:<12} {'hit@1':>5} {'hit@5':>5} {'rec@5':>5} {'MRR':>5}" for r in rankers)
    return f"{'repository':<14} {'split':<8} {'n':>4} | {cells}"


def row(name: str, split: str, cell: dict[str, Any], rankers: tuple[str, ...] = RANKERS) -> str:
    parts = []
    for r in rankers:
        m = cell[r]
        parts.append(f"{'':<12} {m['hit@1']:>5.3f} {m['hit@5']:>5.3f} {m['recall@5']:>5.3f} {m['mrr']:>5.3f}")
    return f"{name:<14} {split:<8} {cell['queries']:>4} | " + " | ".join(parts)


def describe(result: dict[str, Any]) -> str:
    if not result.get("evaluated"):
        return f"{result['name']}: {result['path']} @ {result['head'][:10]}: no queries"
    index = result["index"]
    languages = ", ".join(f"{k} {v}" for k, v in index.get("languages", {}).items())
    timing = f"indexed in {index['wall_seconds']:.1f} s"
    if result["mode"] == "per-commit":
        timing = (
            f"first index {index['wall_seconds']:.1f} s, re-index median {index['incremental_median_seconds']} s "
            f"(total {index['incremental_total_seconds']} s)"
        )
    return (
        f"{result['name']}: {result['path']} @ {result['head'][:10]}; {result['mode']} mode; "
        f"{result['selected']} commits selected of {result['commits_read']} read "
        f"(newest {result['newest']['date'][:10]}, base {result['base']['sha'][:10]} {result['base']['date'][:10]}); "
        f"{result['evaluated']} evaluated, {result['dropped']} dropped (answer file absent from the index); "
        f"{result['answer_files_per_query']} answer files per query\n"
        f"    {index.get('files')} files ({languages}), {timing}; "
        f"median query {result['query_ms'].get('cclg')} ms (cclg), {result['query_ms'].get('bm25')} ms (bm25)"
    )


def show_misses(result: dict[str, Any], count: int) -> None:
    misses = [q for q in result["_queries"] if not set(q.answer) & set(q.ranks["cclg"][:TOP])]
    misses = [q for q in misses if set(q.answer) & set(q.ranks["bm25"][:TOP])]
    print(f"\n{result['name']}: {len(misses)} queries where cclg misses the top {TOP} and bm25 hits it")
    for q in misses[:count]:
        print(f"  {q.sha[:10]} {q.subject!r}")
        print(f"    answer: {', '.join(q.answer)} (cclg rank {first_rank(q, 'cclg')}, bm25 {first_rank(q, 'bm25')})")
        print(f"    cclg:   {', '.join(q.ranks['cclg'][:TOP]) or '(nothing)'}")
        print(f"    bm25:   {', '.join(q.ranks['bm25'][:TOP])}")


def repository_half(name: str) -> str:
    """A repository's half, fixed by its name (not by its results): the first letter's code, even or odd.
    Ranking constants are chosen on the tune repositories' tune queries only."""
    return SPLITS[ord(name[0].lower()) % 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("repos", nargs="+", type=Path, metavar="REPO_PATH", help="git work tree or bare repository")
    parser.add_argument("--commits", type=int, default=200, help="newest qualifying commits to evaluate")
    parser.add_argument("--per-commit", action="store_true", help="re-index at each commit's parent (exact, slower)")
    parser.add_argument("--depth", type=int, default=100, help="ranks read for MRR")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/cg-eval"), help="worktrees and stores go here")
    parser.add_argument("--show-misses", type=int, default=0, metavar="N", help="cclg misses that bm25 finds")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--save", type=Path, metavar="FILE", help="also write the JSON results to FILE")
    args = parser.parse_args()
    args.workdir = args.workdir.resolve()
    args.workdir.mkdir(parents=True, exist_ok=True)

    version = cclg_version()
    results = [evaluate_repository(path, args) for path in args.repos]
    pooled = table([q for r in results for q in r["_queries"]], args.depth)
    in_sessions = [q for r in results for q in r["_queries"] if "cclg+session" in q.ranks]
    pooled_sessions = table(in_sessions, args.depth, SESSION_RANKERS)
    sessions_by_repository = {
        half: table(
            [q for q in in_sessions if any(q in r["_queries"] and repository_half(r["name"]) == half for r in results)],
            args.depth,
            SESSION_RANKERS,
        )
        for half in SPLITS
    }
    by_repository = {
        half: table([q for r in results if repository_half(r["name"]) == half for q in r["_queries"]], args.depth)
        for half in SPLITS
    }
    clean = [{k: v for k, v in r.items() if not k.startswith("_")} for r in results]
    document = json.dumps(
        {
            "cclg": version,
            "repositories": clean,
            "overall": pooled,
            "by_repository_half": by_repository,
            "sessions": pooled_sessions,
            "sessions_by_repository_half": sessions_by_repository,
        },
        indent=1,
    )
    if args.save:
        args.save.write_text(document + "\n", encoding="utf-8")
    if args.json:
        print(document)
        return
    print(f"cclg {version}; {'per-commit' if args.per_commit else 'base'} mode; up to {args.commits} commits each")
    for result in results:
        print(describe(result))
    print()
    print(header())
    print("-" * len(header()))
    for result in results:
        if result.get("evaluated"):
            for split, cell in result["metrics"].items():
                print(row(result["name"], split, cell))
    if len(results) > 1:
        for split, cell in pooled.items():
            print(row("overall", split, cell))
        for half, cells in by_repository.items():
            for split, cell in cells.items():
                print(row(f"{half} repos", split, cell))
    if in_sessions:
        print(f"\nqueries with session files (the same author's commits just before): {len(in_sessions)}")
        print(header(SESSION_RANKERS))
        print("-" * len(header(SESSION_RANKERS)))
        for result in results:
            if result.get("sessions", {}).get("all", {}).get("queries"):
                print(row(result["name"], "all", result["sessions"]["all"], SESSION_RANKERS))
        for split, cell in pooled_sessions.items():
            print(row("overall", split, cell, SESSION_RANKERS))
        for half, cells in sessions_by_repository.items():
            for split, cell in cells.items():
                print(row(f"{half} repos", split, cell, SESSION_RANKERS))
    if args.show_misses:
        for result in results:
            if result.get("evaluated"):
                show_misses(result, args.show_misses)


if __name__ == "__main__":
    main()
