"""The repository a folder belongs to, and the project name memories are scoped by.

One rule for reads and writes: the project of a folder is the name of the nearest
folder above it (itself included) that holds ``.git``. The hook reads memories
for that project; ``cclg add`` and the MCP add tool write into it by default.
Light on purpose (``pathlib`` only): the hook calls it on every event.
"""

from __future__ import annotations

from pathlib import Path


def git_root(folder: str | Path) -> Path | None:
    """The nearest folder at or above ``folder`` that holds ``.git`` (a work tree), or None."""
    path = Path(folder)
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def git_project(folder: str | Path) -> str | None:
    """The name of the git work tree holding ``folder``, or None outside git."""
    root = git_root(folder)
    return (root.name or None) if root is not None else None
