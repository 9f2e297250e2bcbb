"""The code graph in a prompt's context: what the hook adds for the repository the agent works in.

``prompt_context(store, cwd, query, max_tokens=...)`` returns the CodeGraphPack
(``cclg.codegraph.rank.render_pack``) for the task ``query``, ranked from the
stored search index of the git repository holding ``cwd``, as text to append to
the memory pack:

- ``""`` when ``cwd`` is not a usable folder name or the query is blank, and when
  the ranking finds nothing that fits ``max_tokens``;
- a one-line note (``No code graph for this repository yet: cclg code-index
  "ROOT" builds one.``) when the repository was never indexed, the path quoted as
  a JSON string like every value from outside (a folder may be named anything,
  newlines and "## SYSTEM" included);
- else ``"\\n"`` and the rendered pack.

It uses the graph as the last ``cclg code-index`` left it. When git's index is
newer than the graph, or its search index is of an older schema than this cclg
writes (an older index still ranks, without what it lacks), a re-index (``python
-m cclg code-index ROOT``, which parses the changed files only) starts detached in
the background and this prompt uses the graph as it is; a ``<graph>.refreshing``
marker beside the graph keeps it to one re-index at a time, and to one every
``REFRESH_EVERY`` seconds while one is due (the indexer removes the marker when it
is done).

Light on purpose: the hook calls this on every prompt, so it imports the standard
library and the ranking and storage modules only (never gitpython or tree-sitter),
and ``subprocess`` only when a re-index starts.
"""

from __future__ import annotations

import os
import sys
import time

from cclg.codegraph.rank import SearchIndexDamage, rank_files, render_pack
from cclg.codegraph.search_index import TEXT_SCHEMA, index_schema
from cclg.codegraph.stored import graph_path, repository_root, search_index_path
from cclg.core.fencing import quote_outside

TYPE_CHECKING = False  # typing costs the hook ~4 ms of start-up; annotations are strings anyway
if TYPE_CHECKING:
    from pathlib import Path

    from cclg.core.store import Store

REFRESH_EVERY = 600  # seconds: a re-index that has not finished by then may be started again
# The first index starts by itself only for a repository of moderate size: git's index file holds
# about 100 bytes a tracked file, so this is some 80,000 files. A larger one waits for `cclg code-index`.
FIRST_INDEX_MAX_GIT_INDEX_BYTES = 8 * 1024 * 1024


def prompt_context(
    store: Store, cwd: object, query: str, *, max_tokens: int, session_files: dict[str, str] | None = None
) -> str:
    """The CodeGraphPack for ``query`` from the repository holding ``cwd``, under ``max_tokens``
    (see the module docstring for what comes back when). ``session_files``: files the session worked
    on (a path relative to ``cwd`` or absolute -> why), which the ranking lifts a little."""
    if not isinstance(cwd, str) or not cwd or not query.strip():
        return ""
    root = repository_root(cwd)
    index = search_index_path(store, root)
    if not index.is_file():
        if refresh_in_background(store, root):
            return "\n(No code graph for this repository yet: it is being built in the background.)\n"
        return f"\n(No code graph for this repository yet: cclg code-index {quote_outside(str(root))} builds one.)\n"
    refresh_in_background(store, root)
    priors = {
        os.path.relpath(os.path.join(cwd, path), root).replace(os.sep, "/"): why
        for path, why in (session_files or {}).items()
    }
    try:
        text = render_pack(rank_files(index, query, priors=priors), max_tokens=max_tokens)
    except SearchIndexDamage:  # deleted: rebuilt in the background, as a first index is
        refresh_in_background(store, root)
        return "\n(The code graph's search index was damaged: it is being built again.)\n"
    return "\n" + text if text else ""


def refresh_in_background(store: Store, root: Path) -> bool:
    """Start ``cclg code-index root`` detached (niced) when git's index is newer than the stored graph
    or the graph's search index is of an older schema (a cclg upgrade), or when a git repository of
    moderate size (``FIRST_INDEX_MAX_GIT_INDEX_BYTES``) has no graph yet,
    unless one started less than ``REFRESH_EVERY`` seconds ago; whether one started."""
    graph_file = graph_path(store, root)
    marker = graph_file.with_suffix(".refreshing")
    try:
        git_index = (root / ".git" / "index").stat()
        built = graph_file.stat().st_mtime if graph_file.exists() else 0.0
        outdated = built and index_schema(search_index_path(store, root)) < TEXT_SCHEMA  # cclg was upgraded
        if git_index.st_mtime <= built and not outdated:
            return False
        if not built and git_index.st_size > FIRST_INDEX_MAX_GIT_INDEX_BYTES:
            return False  # too large to index behind the user's back: the note says how
        if marker.exists() and marker.stat().st_mtime > built and _age(marker) < REFRESH_EVERY:
            return False
    except OSError:  # not a git work tree
        return False
    import subprocess  # only when a refresh starts

    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    subprocess.Popen(
        ["nice", "-n", "10", sys.executable, "-m", "cclg", "--root", str(store.root), "code-index", str(root)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return True


def _age(path: Path) -> float:
    """Seconds since ``path`` was last modified."""
    return time.time() - path.stat().st_mtime
