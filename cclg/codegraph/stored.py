"""Where code graphs live in the store, and reading them back.

Light on purpose: the hook imports this module (never gitpython or tree-sitter),
so it finds a repository's root by looking for ``.git`` and reads the graph the
indexer (``cclg.codegraph.build``) wrote.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from cclg.codegraph.search_index import remove_with_journals
from cclg.core.files import safe_name
from cclg.core.ids import sha256_hex
from cclg.core.repository import git_root
from cclg.core.store import Store
from cclg.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def repository_root(folder: str | os.PathLike[str]) -> Path:
    """The git work tree holding ``folder`` (the nearest folder with ``.git``), else the folder."""
    path = Path(folder).resolve()
    return git_root(path) or path


def graph_name(root: Path) -> str:
    """The graph's file stem: the repository folder's name (made safe) and a hash of its full path,
    so two checkouts named alike keep separate graphs."""
    return f"{safe_name(root.name or 'root', 60)}-{sha256_hex(str(root).encode())[:8]}"


def graph_path(store: Store, root: Path) -> Path:
    return store.codegraphs_dir / f"{graph_name(root)}.json"


def cache_path(store: Store, root: Path) -> Path:
    return store.codegraphs_dir / f"{graph_name(root)}.cache.json"


def build_lock_path(store: Store, root: Path) -> Path:
    """The lock that keeps builds of the repository's graph to one at a time (``cclg.codegraph.build``)."""
    return store.codegraphs_dir / f"{graph_name(root)}.lock"


def history_path(store: Store, root: Path) -> Path:
    """The last ``git log`` tally of the repository (``cclg.codegraph.history``)."""
    return store.codegraphs_dir / f"{graph_name(root)}.history.json"


def search_index_path(store: Store, root: Path) -> Path:
    """The graph as the ranking (``cclg.codegraph.rank``) reads it; ``cclg.codegraph.search_index`` writes it."""
    return store.codegraphs_dir / f"{graph_name(root)}.search.sqlite"


def find_search_index(store: Store, folder: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(repository root, its search index) for ``folder``; a ``UsageError`` when it was never indexed.
    The search index may be missing beside its graph (deleted as damaged): the caller builds it again."""
    if not Path(folder).is_dir():
        raise UsageError(f"no such folder: {folder}")
    root = repository_root(folder)
    for candidate in (root, Path(folder).resolve()):  # the folder itself, if it was indexed on its own
        path = search_index_path(store, candidate)
        if path.is_file() or graph_path(store, candidate).is_file():
            return candidate, path
    raise UsageError(f"no code graph for {root}; run `cclg code-index {root}` first")


def read_graph(store: Store, root: Path) -> dict[str, Any]:
    """The stored graph of the repository at ``root``; a ``UsageError`` when there is none."""
    path = graph_path(store, root)
    if not path.is_file():
        raise UsageError(f"no code graph for {root}; run `cclg code-index {root}` first")
    try:
        graph = json.loads(path.read_text("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested too deep: damaged
        graph = None
    if not isinstance(graph, dict):  # damaged: a projection, rebuilt from the repository
        raise UsageError(f"the code graph at {path} is damaged; run `cclg code-index {root}` to build it again")
    if graph.get("root") != str(root):
        raise UsageError(f"the code graph at {path} is of {graph.get('root')}, not {root}; run `cclg code-index`")
    return graph


def _is_damage(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file is broken (corrupt, not a database, text that is not UTF-8): not
    busy, locked, or an index older than the imports table."""
    code = getattr(exc, "sqlite_errorcode", None)
    return str(exc).startswith("Could not decode to UTF-8") or (isinstance(code, int) and code & 0xFF in (11, 26))


def dependants(store: Store, folder: str, path: str) -> tuple[str, list[str]]:
    """``path`` (absolute, or relative to ``folder``) as the code graph of ``folder``'s repository
    names it, and the files that import it, the most changed first; no files when there is no graph
    or it predates the imports table. Reads the search index only: cheap enough for the hook. A damaged
    index (any failure to read it back) is deleted, as ``rank.rank_files`` does: the next prompt in the
    repository or ``cclg code-index`` builds it again."""
    target = os.path.normpath(os.path.join(folder, path))
    try:
        root, index = find_search_index(store, folder)
    except UsageError:
        return target, []
    target = os.path.relpath(target, root).replace(os.sep, "/")
    if not index.is_file():  # deleted as damaged: built again on next use
        return target, []
    try:
        db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
        try:
            rows = db.execute(
                "SELECT i.source FROM imports i LEFT JOIN files f ON f.path = i.source WHERE i.target = ?"
                " ORDER BY coalesce(f.churn, 0) DESC, i.source",
                (target,),
            ).fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        if _is_damage(exc):
            remove_with_journals(index)
        return target, []
    return target, [row[0] for row in rows]
