"""The code graph: indexing a repository, searching it, and what the hook adds from it.

The graph lives in ``cclg.codegraph``; tree-sitter and git are imported only when an
operation needs them, never when this module is.
"""

from __future__ import annotations

import re
from pathlib import Path

from cclg.api.lazy import served_on_first_use
from cclg.errors import UsageError

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:  # what type checkers see; at run time, __getattr__ below
    from collections.abc import Callable, Collection
    from typing import Any

    from cclg.codegraph.rank import SearchIndexDamage
    from cclg.core.store import Store
else:
    __getattr__ = served_on_first_use(globals(), {"cclg.codegraph.rank": "SearchIndexDamage"})


__all__ = [
    "SearchIndexDamage",
    "allowed_repository",
    "code_index",
    "code_search",
    "dependants",
    "files_named",
    "prompt_context",
]


def code_index(
    store: Store, repo: str | Path, *, max_commits: int = 5000, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """``cclg code-index``: index a repository's code graph into the store; returns the build summary
    with the repository's ``root``."""
    from cclg.codegraph.build import build_graph  # tree-sitter and git: only when indexing

    graph = build_graph(store, repo, progress=progress, max_commits=max_commits)
    return {"root": graph["root"], **graph["summary"]}


def code_search(store: Store, query: str, repo: str | Path, *, limit: int = 10) -> dict[str, Any]:
    """``cclg code-search``: the files of an indexed repository to read first for ``query``, with the
    CodeGraphPack that shows them (``pack``)."""
    from cclg.codegraph.rank import SearchIndexDamage, rank_files, render_pack
    from cclg.codegraph.search_index import TEXT_SCHEMA, index_schema
    from cclg.codegraph.stored import find_search_index

    root, index = find_search_index(store, repo)
    if not index.is_file():  # deleted as damaged (`cclg doctor`): built again from the repository first
        code_index(store, root)
    try:
        files = rank_files(index, query, limit=limit)
    except SearchIndexDamage:  # deleted: built again from the repository, once, and asked again
        code_index(store, root)
        files = rank_files(index, query, limit=limit)
    result = {"query": query, "root": str(root), "files": files, "pack": render_pack(files)}
    if index_schema(index) < TEXT_SCHEMA:  # it ranks without what it lacks
        result["note"] = f"the code graph was indexed by an older cclg: `cclg code-index {root}` completes it"
    return result


def allowed_repository(store: Store, repo: str) -> Path:
    """``repo`` as a folder, when it lies in a git repository the user allowed an MCP caller to index:
    the one the server runs in, or one listed under ``"mcp": {"code_index_repos": [...]}`` in the
    store's ``config.json`` (``Store.settings``). Anything else (``/etc``, another repository) is refused."""
    from cclg.core.repository import git_root

    folder = Path(repo).expanduser()
    if not folder.is_dir():
        raise UsageError(f"no such folder: {folder}")
    folder = folder.resolve()
    root = git_root(folder)
    allowed = {git_root(Path.cwd().resolve())}
    allowed |= {git_root(Path(p).expanduser().resolve()) for p in store.settings.get("mcp", "code_index_repos")}
    if root is None or root not in allowed:
        where = "is not in a git repository" if root is None else f"is in {root}, a repository not allowed here"
        raise UsageError(
            f"{folder} {where}: an MCP caller indexes only the server's own repository and those listed under "
            f'"mcp": {{"code_index_repos": [...]}} in {store.config_path}; `cclg code-index` has no limit'
        )
    return folder


# ---------------------------------------------------------------- what the hook adds


def prompt_context(
    store: Store, cwd: object, query: str, *, max_tokens: int, session_files: dict[str, str] | None = None
) -> str:
    """The CodeGraphPack the hook adds to a prompt, from the repository holding ``cwd``, under
    ``max_tokens`` (``cclg.codegraph.context``); ``session_files`` (path -> why) lifts the files the
    session worked on."""
    from cclg.codegraph.context import prompt_context as context

    return context(store, cwd, query, max_tokens=max_tokens, session_files=session_files)


def dependants(store: Store, folder: str, path: str) -> tuple[str, list[str]]:
    """The file ``path`` (in the repository holding ``folder``) as the code graph names it, and the
    files that import it (``cclg.codegraph.stored.dependants``): the sensors' reach."""
    from cclg.codegraph.stored import dependants as importers

    return importers(store, folder, path)


FILE_NAMED = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.[A-Za-z0-9]{1,5})(?![\w/])")  # a path with a folder


def files_named(store: Store, memory_ids: Collection[str]) -> list[str]:
    """The file paths (with a folder) that the current memories among ``memory_ids`` name, in order:
    for code search's prior, the files a session's memories talk about."""
    from cclg.ledger.index import Index, read_fresh

    if not memory_ids:
        return []

    def contents(index: Index) -> list[str]:
        return [node.content for node in index.current_nodes(memory_ids)]

    return [path for content in read_fresh(store, contents) for path in FILE_NAMED.findall(content)]
