"""Indexing a repository into a code graph (``cclg.code_graph.v0.1``).

``build_graph(store, folder)`` finds the repository (a git work tree, else the
folder itself), lists its source files (git's tracked files; outside git every
source file under the folder, skipping what ``.gitignore`` names and vendored or
generated trees), parses them with tree-sitter (``cclg.codegraph.parse``),
resolves their imports to files (``cclg.codegraph.resolve``), reads per-file churn
from one ``git log`` over recent history, and writes:

- ``active/codegraphs/<repo>.json``: root, generated_at, git, files, symbols, edges;
- ``active/codegraphs/<repo>.cache.json``: what each file's parse produced, keyed
  by its content hash (with its size and mtime as a shortcut), so that a warm
  re-index with no changes parses nothing and an edit re-parses only that file.
- ``active/codegraphs/<repo>.search.sqlite``: the search index the ranking reads
  (``cclg.codegraph.search_index``), its text written while the files are parsed;
- ``active/codegraphs/<repo>.history.json``: the last ``git log`` tally
  (``cclg.codegraph.history``), read again from git only when HEAD moves.

Nothing outside the repository is read: only its own regular files (``_regular_inside``: no
symbolic link, tracked or not, nothing under a linked folder, no FIFO or device), each opened
without following a link or waiting (``cclg.core.files.open_regular``) and read no further than its size.

The repository itself is never written to, and no secret in it is copied into the store:
each file is read with its secrets redacted (``cclg.core.secrets.redact_bytes``, line breaks kept so
that line numbers hold) before it is parsed or indexed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any

from cclg.codegraph.history import CHURN_COMMITS, LOG_FORMAT, Churn, read_saved, saved_bytes, saved_key, tally
from cclg.codegraph.languages import language_of, missing_grammars, query
from cclg.codegraph.parse import parse_source
from cclg.codegraph.resolve import resolve_imports
from cclg.codegraph.search_index import SearchIndexWriter, search_index_is_usable, text_body
from cclg.codegraph.stored import (
    build_lock_path,
    cache_path,
    graph_path,
    history_path,
    read_graph,
    search_index_path,
)
from cclg.core import secrets
from cclg.core.files import flock_before, open_regular, read_open, read_regular
from cclg.core.ids import now_iso
from cclg.core.store import Store
from cclg.errors import ConcurrencyError, UsageError

SCHEMA = "cclg.code_graph.v0.1"
CACHE_SCHEMA = "cclg.code_graph_cache.v0.2"  # v0.2: parsed from redacted files (older caches may hold secrets)
MAX_FILE_BYTES = 1_000_000  # larger files are listed but not parsed (generated or data)
CO_CHANGE_MIN = 3  # two files changed together in at least this many commits get an edge
REFERENCE_MAX_DEFINERS = 5  # a name defined in more files than this links nothing: too common
BUILD_WAIT_SECONDS = 600  # another build of the same repository may take this long before a second gives up
PARALLEL_FROM = 200  # parse in worker processes when at least this many files need parsing
# Other people's code: skipped everywhere, even when a git repository tracks it.
VENDORED_FOLDERS = frozenset({"node_modules", "vendor", "third_party", "third-party"})
# Outside git, also version-control data and generated or tool trees (virtualenvs
# are recognised by their pyvenv.cfg, whatever their name).
SKIPPED_FOLDERS = VENDORED_FOLDERS | {
    ".git",
    ".hg",
    ".svn",
    "dist",
    "build",
    "target",
    "out",
    ".venv",
    "__pycache__",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "site-packages",
    ".next",
    "coverage",
}

Progress = Callable[[int, int], None]


# ---------------------------------------------------------------- the repository


class Repository:
    """A folder to index: its root, its source files and, in a git work tree, its history."""

    def __init__(self, folder: Path) -> None:
        folder = folder.resolve()
        if not folder.is_dir():
            raise UsageError(f"no such folder: {folder}")
        self.git: Any = None
        self.root = folder
        try:
            import git

            self.git = git.Repo(folder, search_parent_directories=True)
            if self.git.working_tree_dir is None:
                raise UsageError(f"{folder} is a bare git repository; index a work tree")
            self.root = Path(self.git.working_tree_dir).resolve()
            if folder != self.root and self.git.ignored(str(folder)):
                # A folder the enclosing repository ignores (an installed library inside a
                # tool's checkout, say) is not part of it: index it as a plain folder.
                self.git, self.root = None, folder
        except ImportError:  # gitpython missing: index as a plain folder
            self.git = None
        except Exception as error:  # not a repository (git.InvalidGitRepositoryError, NoSuchPathError)
            if isinstance(error, UsageError):
                raise
            self.git = None

    def git_info(self) -> dict[str, Any] | None:
        if self.git is None:
            return None
        try:
            head = self.git.head.commit.hexsha
        except ValueError:  # no commits yet
            head = None
        branch = None if self.git.head.is_detached else self.git.active_branch.name
        # Not Repo.is_dirty(): its `git diff` refreshes .git/index, and the repository is never written.
        status = self.git.git.execute(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"])
        return {"head": head, "branch": branch, "dirty": bool(status.strip())}

    def files(self) -> list[str]:
        """Repository-relative POSIX paths of the files to consider, sorted."""
        if self.git is not None:
            listed = self.git.git.ls_files("-z", "--cached", "--others", "--exclude-standard")
            paths = sorted({p for p in listed.split("\0") if p})
            return _regular_inside(self.root, [p for p in paths if not _in_vendored_folder(p)])
        return _regular_inside(self.root, sorted(_walk(self.root)))

    def go_module(self) -> str | None:
        text = _small_text(self.root / "go.mod")
        match = re.search(r"^module\s+(\S+)", text, re.MULTILINE)
        return match.group(1) if match else None

    def churn(self, max_commits: int = CHURN_COMMITS) -> Churn:
        """Per-file churn (commits, last commit time, authors), co-change counts and the commits' messages
        with the files each changed, from one ``git log``. Merges are left out."""
        if self.git is None or not self.git.head.is_valid():  # no git, or no commit yet
            return Churn({}, Counter(), 0, [])
        output = self.git.git.execute(
            [
                "git",
                "-c",
                "core.quotePath=false",  # file names as they are, not octal-escaped
                "-c",
                "log.showSignature=false",  # a user's setting would put signature checks into the output
                "log",
                "--no-color",
                f"--max-count={max_commits}",
                "--no-merges",
                "--no-renames",
                f"--format={LOG_FORMAT}",
                "--name-only",
            ]
        )
        return tally(output)


def _regular_inside(root: Path, paths: list[str]) -> list[str]:
    """The paths that are regular files of the repository itself: neither a symbolic link (git tracks
    a link as a link; one to a file of the repository is skipped, its target is listed under its own
    name) nor under a linked folder, so never outside ``root``; never a FIFO, a device or a socket."""
    base = str(root)  # resolved: its real path is itself
    real: dict[str, bool] = {"": True}  # folder -> whether its real path is the path listed
    kept = []
    for path in paths:
        folder = path.rpartition("/")[0]
        if folder not in real:
            full = os.path.join(base, folder)
            real[folder] = os.path.realpath(full) == full
        try:
            regular = real[folder] and stat.S_ISREG(os.lstat(os.path.join(base, path)).st_mode)
        except OSError:
            continue
        if regular:
            kept.append(path)
    return kept


def _small_text(path: Path) -> str:
    """A repository's configuration file (``go.mod``, ``.gitignore``) read as ``_read`` reads sources;
    empty when it is missing, a link, not a regular file or too large."""
    try:
        return read_regular(path, MAX_FILE_BYTES, follow=False).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _in_vendored_folder(path: str) -> bool:
    """Tracked files are indexed, except vendored copies of other projects."""
    return any(part in VENDORED_FOLDERS for part in PurePosixPath(path).parts[:-1])


def _walk(root: Path) -> Iterable[str]:
    """Source files under ``root`` outside git: skipping .gitignore'd paths and vendored or generated trees."""
    ignore = _gitignore_patterns(root)
    for folder, subfolders, names in os.walk(root):
        relative = Path(folder).relative_to(root).as_posix()
        relative = "" if relative == "." else relative + "/"
        subfolders[:] = sorted(
            d
            for d in subfolders
            if d not in SKIPPED_FOLDERS
            and not _ignored(relative + d, True, ignore)
            and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))  # a virtualenv, whatever its name
        )
        for name in names:
            path = relative + name
            if language_of(path) is not None and not _ignored(path, False, ignore):
                yield path


def _gitignore_patterns(root: Path) -> list[tuple[str, bool, bool]]:
    """The root ``.gitignore``'s patterns as (pattern, anchored, folders only); negations are not supported."""
    patterns = []
    for line in _small_text(root / ".gitignore").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        folders_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        patterns.append((line.lstrip("/"), anchored, folders_only))
    return patterns


def _ignored(path: str, is_folder: bool, patterns: list[tuple[str, bool, bool]]) -> bool:
    name = path.rsplit("/", 1)[-1]
    for pattern, anchored, folders_only in patterns:
        if folders_only and not is_folder:
            continue
        if fnmatch(path if anchored else name, pattern):
            return True
    return False


# ---------------------------------------------------------------- parsing, with the cache


def _names(facts: dict[str, Any] | None) -> list[str]:
    return [d["name"] for d in (facts or {}).get("definitions", [])]


def _read(path: Path) -> bytes | None:
    """A file's bytes with any secret in them redacted (what the graph and its indexes may hold): a
    regular file, never through a link, never over ``MAX_FILE_BYTES`` (none larger is parsed)."""
    try:
        return _without_secrets(read_regular(path, MAX_FILE_BYTES, follow=False))
    except OSError:
        return None


def _read_source(path: Path) -> tuple[os.stat_result, bytes | None, str, int] | None:
    """A source file as the scan takes it: (its ``fstat``, its bytes or None when over ``MAX_FILE_BYTES``,
    their hash, their line count), read through ``open_regular`` (no link, no FIFO, no device) and
    never past the size it had when opened; None when it cannot be read."""
    try:
        fd, info = open_regular(path, follow=False)
    except OSError:
        return None
    try:
        if info.st_size <= MAX_FILE_BYTES:
            data = read_open(fd, info.st_size)
            return info, data, _content_hash(data), _line_count(data)
        digest = hashlib.sha1(usedforsecurity=False)  # listed, not parsed: hashed and counted a chunk at a time
        newlines, left, last = 0, info.st_size, b""
        while left > 0 and (chunk := read_open(fd, min(left, 1 << 20))):
            digest.update(chunk)
            newlines += chunk.count(b"\n")
            left -= len(chunk)
            last = chunk[-1:]
        return info, None, digest.hexdigest(), newlines + (1 if last not in (b"\n", b"") else 0)
    except OSError:
        return None
    finally:
        os.close(fd)


def _line_count(data: bytes) -> int:
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def _without_secrets(data: bytes) -> bytes:
    return secrets.redact_bytes(data, keep_lines=True)[0]


def _minified(data: bytes, lines: int) -> bool:
    """Generated or minified code (very long lines): listed, not parsed (it says little and parses slowly)."""
    return len(data) > 20_000 and len(data) / max(lines, 1) > 500


def _content_hash(data: bytes) -> str:
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


def _parse_one(job: tuple[str, str, bytes]) -> tuple[str, dict[str, Any] | None, str]:
    """A file's facts and the body of its search text (both costly, so both done in the workers)."""
    path, language, data = job
    data = _without_secrets(data)  # in the workers: scanning costs about as much as parsing
    facts = parse_source(language, data)
    return path, facts, text_body(data) if facts is not None else ""


def _parse_all(
    jobs: list[tuple[str, str, bytes]], progress: Progress | None
) -> Iterator[tuple[str, dict[str, Any] | None, str]]:
    """Each job's (path, facts, search text) as it is done: in worker processes when there are many."""
    done = 0
    if len(jobs) >= PARALLEL_FROM and (os.cpu_count() or 1) > 1:
        import multiprocessing

        for language in {language for _, language, _ in jobs}:
            query(language)  # compiled once here; the forked workers inherit it
        with multiprocessing.get_context("fork").Pool(min(os.cpu_count() or 2, 8)) as pool:
            for result in pool.imap_unordered(_parse_one, jobs, chunksize=16):
                done += 1
                if progress:
                    progress(done, len(jobs))
                yield result
        return
    for job in jobs:
        done += 1
        if progress:
            progress(done, len(jobs))
        yield _parse_one(job)


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):  # damaged, nested too deep: every file parsed again
        return {}
    if not isinstance(data, dict) or data.get("schema_version") != CACHE_SCHEMA:
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}


# ---------------------------------------------------------------- the graph


@dataclass
class _Scan:
    """What a build found in the repository, before parsing."""

    listed: list[tuple[str, str, os.stat_result]]  # (path, language, stat) of every source file
    cache: dict[str, Any]  # path -> cache entry (its "facts" filled in by the parse)
    jobs: list[tuple[str, str, bytes]]  # (path, language, content) of the files to parse now
    changed: set[str]  # files whose content is new to the cache


def build_graph(
    store: Store,
    folder: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    max_commits: int = CHURN_COMMITS,
) -> dict[str, Any]:
    """Index ``folder``'s repository into the store; returns the graph with a ``summary``.

    Builds of one repository take turns (the hook's background re-index and ``cclg code-index`` may
    overlap): a second waits for the first, then finds most of its work done."""
    repo = Repository(Path(folder))
    with _one_build_at_a_time(store, repo.root):
        return _build(store, repo, progress, max_commits)


@contextmanager
def _one_build_at_a_time(store: Store, root: Path) -> Iterator[None]:
    """Hold the repository's build lock (``<graph>.lock``, an exclusive ``flock``), waiting up to
    ``BUILD_WAIT_SECONDS`` for another build to end."""
    lock = build_lock_path(store, root)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not flock_before(fd, time.monotonic() + BUILD_WAIT_SECONDS, poll=0.05):
            raise ConcurrencyError(
                f"another code-index of {root} has run for over {BUILD_WAIT_SECONDS} s; try again when it ends"
            )
        yield
    finally:
        os.close(fd)  # also releases the lock


def _build(store: Store, repo: Repository, progress: Progress | None, max_commits: int) -> dict[str, Any]:
    start = time.perf_counter()
    cache_file = cache_path(store, repo.root)
    old_cache = _load_cache(cache_file)
    scan = _scan(repo, old_cache)
    # The search text is written while the workers parse (the main process would only wait).
    index_file = search_index_path(store, repo.root)
    rebuild = not search_index_is_usable(index_file, len(old_cache))  # then written anew beside the old one
    keep = {path for path, _, _ in scan.listed}
    writer = SearchIndexWriter(index_file, rebuild=rebuild, keep=keep, replaced=scan.changed)
    try:
        _parse_and_add_text(repo, scan, writer, rebuild=rebuild, progress=progress)
        head = repo.git_info()
        git_info = None if head is None else {**head, "max_commits": max_commits}
        same_files = not scan.changed and not (set(old_cache) - keep) and not rebuild
        previous = _previous_graph(store, repo.root) if same_files else None  # 25 MB of JSON on a large tree
        if previous is not None and _git_of(previous) == git_info:
            # Nothing changed since the last build: the stored graph stands (cheap warm runs).
            writer.finish(None)
            previous["summary"] = _summary(previous, 0, start)
            with store.lock():
                if scan.cache != old_cache:  # only mtimes moved
                    store.write_file(cache_file, _cache_bytes(scan.cache))
                _mark_current(graph_path(store, repo.root))
            return previous
        key = saved_key(head["head"] if head else None, max_commits)
        churn = read_saved(history_path(store, repo.root), key)  # git is read again when HEAD moved
        fresh = churn is None
        churn = churn or repo.churn(max_commits)
        graph = _assemble(repo, scan.listed, scan.cache, churn.per_file, churn.pairs)
        graph["git"] = None if git_info is None else {**git_info, "commits_read": churn.commits}
    except BaseException:
        writer.abandon()
        raise
    writer.finish(graph, churn.history if fresh or rebuild else None)  # None: the index has these messages
    with store.lock():
        store.write_file(cache_file, _cache_bytes(scan.cache))
        store.write_file(graph_path(store, repo.root), graph_bytes(graph))
        if fresh and key is not None:
            store.write_file(history_path(store, repo.root), saved_bytes(key, churn))
        _mark_current(graph_path(store, repo.root))
    graph["summary"] = _summary(graph, len(scan.jobs), start)  # the run's figures, not stored with the graph
    return graph


def _scan(repo: Repository, old_cache: dict[str, Any]) -> _Scan:
    """The repository's source files, each with its cache entry: reused when the file is unchanged
    (same size and mtime, or same content), else new and, unless too big or minified, a parse job."""
    scan = _Scan(listed=[], cache={}, jobs=[], changed=set())
    for path in repo.files():
        language = language_of(path)
        if language is None:
            continue
        try:
            info = os.lstat(repo.root / path)
        except OSError:
            continue
        entry = old_cache.get(path)
        unparsed = entry is not None and entry.get("facts") is None and info.st_size <= MAX_FILE_BYTES
        if entry and entry.get("size") == info.st_size and entry.get("mtime_ns") == info.st_mtime_ns and not unparsed:
            scan.listed.append((path, language, info))
            scan.cache[path] = entry  # unchanged (a file left unparsed is looked at again: its grammar may be here now)
            continue
        read = _read_source(repo.root / path)
        if read is None:  # gone, or no longer a regular file of its own (a link now)
            continue
        info, data, digest, lines = read
        scan.listed.append((path, language, info))
        if entry and entry.get("sha1") == digest and not unparsed:
            scan.cache[path] = {**entry, "mtime_ns": info.st_mtime_ns}
            continue
        scan.changed.add(path)
        scan.cache[path] = {
            "size": info.st_size,
            "mtime_ns": info.st_mtime_ns,
            "sha1": digest,
            "language": language,
            "lines": lines,
        }
        if data is not None and not _minified(data, lines):
            scan.jobs.append((path, language, data))
        else:
            scan.cache[path]["facts"] = None
    return scan


def _parse_and_add_text(
    repo: Repository, scan: _Scan, writer: SearchIndexWriter, *, rebuild: bool, progress: Progress | None
) -> None:
    """Parse the scan's jobs into the cache and give the search index the text of every file it lacks."""
    for path, facts, body in _parse_all(scan.jobs, progress):
        scan.cache[path]["facts"] = facts
        writer.add(path, _names(facts), body)
    parsed = {path for path, _, _ in scan.jobs}
    for path in sorted({path for path, _, _ in scan.listed} - parsed):
        if rebuild or path in scan.changed:  # not parsed now: unchanged (the index is rebuilt) or unparseable
            facts = scan.cache[path].get("facts")
            writer.add(path, _names(facts), text_body(_read(repo.root / path)) if facts is not None else "")


def _git_of(graph: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored graph's git state as ``git_info`` gives it (without the build's commit count)."""
    if graph is None or graph.get("git") is None:
        return None
    state = dict(graph["git"])
    state.pop("commits_read", None)
    return state


def _mark_current(graph_file: Path) -> None:
    """The graph is now current: its modification time says so (the hook compares it with
    git's index to decide on a refresh), and the hook's refresh marker goes."""
    os.utime(graph_file)
    graph_file.with_suffix(".refreshing").unlink(missing_ok=True)


def _summary(graph: dict[str, Any], parsed: int, start: float) -> dict[str, Any]:
    return {
        "files": len(graph["files"]),
        "parsed": parsed,
        "symbols": len(graph["symbols"]),
        "edges": len(graph["edges"]),
        "languages": dict(sorted(Counter(f["language"] for f in graph["files"]).items())),
        "missing_grammars": missing_grammars({f["language"] for f in graph["files"]}),
        "seconds": round(time.perf_counter() - start, 3),
    }


def graph_bytes(graph: dict[str, Any]) -> bytes:
    """A graph as ``active/codegraphs/<repo>.json`` holds it (compact JSON, one final newline)."""
    return (json.dumps(graph, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def _cache_bytes(cache: dict[str, Any]) -> bytes:
    return (json.dumps({"schema_version": CACHE_SCHEMA, "files": cache}, separators=(",", ":")) + "\n").encode()


def _previous_graph(store: Store, root: Path) -> dict[str, Any] | None:
    try:
        return read_graph(store, root)
    except (UsageError, OSError, ValueError):
        return None


def _assemble(
    repo: Repository,
    listed: list[tuple[str, str, os.stat_result]],
    cache: dict[str, Any],
    churn: dict[str, dict[str, Any]],
    pairs: Counter[tuple[str, str]],
) -> dict[str, Any]:
    files, symbols, edges = _nodes(listed, cache, churn)
    paths = frozenset(path for path, _, _ in listed)
    definers: dict[str, set[str]] = defaultdict(set)
    for found in symbols:
        definers[found["name"]].add(found["path"])
    linkable = {name: tuple(owners) for name, owners in definers.items() if len(owners) <= REFERENCE_MAX_DEFINERS}
    edges.extend(_import_and_reference_edges(listed, cache, paths, linkable, repo.go_module()))
    for (a, b), count in sorted(pairs.items()):
        if count >= CO_CHANGE_MIN and a in paths and b in paths:
            edges.append({"type": "co_change", "from": a, "to": b, "weight": count})
    return {
        "schema_version": SCHEMA,
        "root": str(repo.root),
        "generated_at": now_iso(),
        "git": None,
        "files": files,
        "symbols": symbols,
        "edges": edges,
    }


def _nodes(
    listed: list[tuple[str, str, os.stat_result]], cache: dict[str, Any], churn: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The graph's files (with their churn), symbols, and the edges from each file to what it defines."""
    files = []
    symbols = []
    edges: list[dict[str, Any]] = []
    for path, language, _ in listed:
        entry = cache[path]
        facts = entry.get("facts") or {}
        for definition in facts.get("definitions", []):
            symbol_id = f"{path}#{definition['name']}:{definition['line']}"
            symbols.append({"id": symbol_id, "path": path, **definition})
            edges.append({"type": "defines", "from": path, "to": symbol_id, "weight": 1})
        history = churn.get(path, {})
        files.append(
            {
                "path": path,
                "language": language,
                "lines": entry.get("lines", 0),
                "bytes": entry.get("size", 0),
                "parsed": entry.get("facts") is not None,
                "churn": history.get("commits", 0),
                "last_commit": history.get("last_commit"),
                "authors": history.get("authors", 0),
            }
        )
    return files, symbols, edges


def _import_and_reference_edges(
    listed: list[tuple[str, str, os.stat_result]],
    cache: dict[str, Any],
    paths: frozenset[str],
    linkable: dict[str, tuple[str, ...]],
    go_module: str | None,
) -> Iterator[dict[str, Any]]:
    """Per file: the files its imports resolve to, then the files defining the names it uses
    (``linkable``: the files defining each name, for the names defined in few enough files)."""
    for path, language, _ in listed:
        facts = cache[path].get("facts") or {}
        for target in resolve_imports(path, language, facts.get("imports", []), paths, go_module=go_module):
            yield {"type": "imports", "from": path, "to": target, "weight": 1}
        referenced: Counter[str] = Counter()
        for name in facts.get("references", []):
            for owner in linkable.get(name, ()):
                if owner != path:
                    referenced[owner] += 1
        for target, count in sorted(referenced.items()):
            yield {"type": "references", "from": path, "to": target, "weight": count}


def load_graph(store: Store, folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The stored graph of ``folder``'s repository (``cclg code-index`` writes it)."""
    return read_graph(store, Repository(Path(folder)).root)
